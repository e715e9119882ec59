"""The client against the real agent, from inside a real bot (docs/api.md): the bot reads its status,
stats, logs, exit records and events, follows its logs, and is refused what it may not do."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from typing import Callable, List

import pytest

from bot_agent import BotAgentClient, BotAgentError
from bot_agent.aio import AsyncBotAgentClient

from conftest import eventually


def test_status_names_this_bot_running(client: BotAgentClient) -> None:
    status = client.status()
    assert status["bot_id"] == os.environ["BOT_ID"]
    assert status["state"] in ("running", "crash-looping")
    assert status["user_id"] == os.environ["USER_ID"]


def test_stats_are_this_bots_resources(client: BotAgentClient) -> None:
    stats = client.stats()
    assert isinstance(stats["cpu_percent"], (int, float)) and stats["cpu_percent"] >= 0
    assert re.fullmatch(r"\d+\.\d\d MB", stats["memory_usage"]), stats["memory_usage"]
    assert stats["uptime"]


def test_logs_hold_what_the_bot_printed(client: BotAgentClient, say: Callable[[str], None]) -> None:
    marker = f"python says {uuid.uuid4()}"
    say(marker)
    assert eventually(lambda: marker in client.logs(50)), "the line never reached the bot's logs"


def test_the_crash_before_is_an_exit_record_and_an_event(client: BotAgentClient) -> None:
    code = int(os.environ["BOT_AGENT_TEST_EXIT_CODE"])
    assert eventually(lambda: any(record["exit_code"] == code for record in client.exits(5))), f"no exit record with code {code}"
    record = next(record for record in client.exits(5) if record["exit_code"] == code)
    assert record["requested"] is False and record["oom_killed"] is False
    seen: List[str] = []
    for event in client.events(after="0"):
        seen.append(event["type"])
        if event["type"] == "exited" and event["exit"]["exit_code"] == code:
            break
    assert "started" in seen


def test_follow_logs_brings_a_new_line_as_it_is_written(client: BotAgentClient, say: Callable[[str], None]) -> None:
    marker = f"followed {uuid.uuid4()}"
    threading.Timer(1.0, say, args=(marker,)).start()
    for item in client.follow_logs(lines=0):
        if item.get("type") == "log" and item["line"] == marker:
            assert item["stream"] == "stdout"
            break


def test_the_command_line_answers_as_this_bot(client: BotAgentClient) -> None:
    shown = subprocess.run([sys.executable, "-m", "bot_agent", "status"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["bot_id"] == client.bot_id


def test_start_of_a_running_bot_says_so(client: BotAgentClient) -> None:
    assert client.start() == f"Bot {client.bot_id} was already running"


def test_a_bad_request_is_an_error_with_its_status(client: BotAgentClient) -> None:
    with pytest.raises(BotAgentError) as refused:
        client.logs(lines=10_001)
    assert refused.value.status == 400
    assert "lines" in refused.value.msg


def test_the_asyncio_client_reads_and_follows_alike(say: Callable[[str], None]) -> None:
    marker = f"async {uuid.uuid4()}"

    async def run() -> None:
        async with await AsyncBotAgentClient.from_env() as agent:
            assert (await agent.status())["bot_id"] == os.environ["BOT_ID"]
            assert (await agent.stats())["memory_usage"]
            asyncio.get_running_loop().call_later(1.0, say, marker)
            async for item in agent.follow_logs(lines=0):
                if item.get("type") == "log" and item["line"] == marker:
                    break
            assert marker in await agent.logs(20)

    asyncio.run(asyncio.wait_for(run(), 30))


def test_beats_while_the_condition_holds_make_this_bot_healthy_by_its_heartbeats(client: BotAgentClient) -> None:
    connected = True
    beats = client.beat_while(lambda: connected, every_s=0.5, ttl_s=5)
    try:
        assert eventually(lambda: client.status()["health"]["status"] == "healthy")
        health = client.status()["health"]
        assert health["check"] == "heartbeat"
        assert health["output"] is None
        assert beats.beats >= 1 and beats.failures == 0
        connected = False
        time.sleep(1.0)
        counted = beats.beats
        time.sleep(1.5)
        assert beats.beats == counted, "a beat went out while the condition did not hold"
    finally:
        beats.stop()
        # One long beat, so that the watchdog leaves this bot be while the other tests run in it.
        client.heartbeat(ttl_s=3600)


def test_the_asyncio_client_beats_too(client: BotAgentClient) -> None:
    async def run() -> None:
        async with await AsyncBotAgentClient.from_env() as agent:
            assert os.environ["BOT_ID"] in await agent.heartbeat(3600)
            task = agent.beat_while(lambda: True, every_s=0.2, ttl_s=3600)
            await asyncio.sleep(0.5)
            task.cancel()
            assert (await agent.status())["health"]["status"] == "healthy"

    asyncio.run(asyncio.wait_for(run(), 30))
