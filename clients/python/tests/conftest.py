"""The real agent's tests run inside a bot (a container on the Docker engine, or a pod): its environment
names the bot (BOT_ID, USER_ID), the agent (BOT_AGENT_PROBE or PLATFORM_AGENT_URL) and its token."""

from __future__ import annotations

import os
import time
from typing import Callable

import pytest

from bot_agent import BotAgentClient


@pytest.fixture(scope="session")
def client() -> BotAgentClient:
    if not os.environ.get("BOT_ID"):
        pytest.fail("these tests run inside a bot: BOT_ID is not set (npm test runs them in a container and a pod)")
    return BotAgentClient.from_env()


@pytest.fixture
def say() -> Callable[[str], None]:
    """Writes a line to the bot's own output (its first process's stdout), which is what the agent reads."""

    def write(line: str) -> None:
        with open("/proc/1/fd/1", "w", encoding="utf-8") as out:
            out.write(f"{line}\n")

    return write


def eventually(check: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False
