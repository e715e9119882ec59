"""What the synchronous and the asyncio clients share: the environment, the token, errors, types, and
the reading of event streams (Server-Sent Events)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterable, Iterator, List, Literal, Mapping, Optional, Tuple, TypedDict, Union, cast

#: How often the background heartbeat beats unless told, and the ttl it asks for: three beats to a ttl.
HEARTBEAT_EVERY_S = 10.0
HEARTBEAT_TTL_S = 30
#: The agent sends ``: ping`` at least every 15 s: this long without a byte means the connection is gone.
STREAM_SILENCE_S = 45.0
#: Reconnection delays of an event stream: from 1 s, doubling, to at most 30 s.
RECONNECT_FIRST_S = 1.0
RECONNECT_MAX_S = 30.0
#: How long one call may take unless told: a restart waits for the bot.
DEFAULT_TIMEOUT_S = 90.0
#: Where the agent is looked for first, and how long the look may take.
DEFAULT_PROBE = ("agent", 8000)
PROBE_TIMEOUT_S = 1.0
#: How long opening a connection may take. While one agent replaces another a connection may get neither an
#: answer nor a refusal: the call tries again, 0.25 s apart doubling to 2 s, for up to 60 s within its own
#: time-out (one agent replaced under the chart's Recreate was away 21 s once: docs/operating.md). Only a
#: connection that never opened is tried again: no request is sent twice.
CONNECT_TIMEOUT_S = 1.0
CONNECT_RETRY_FIRST_S = 0.25
CONNECT_RETRY_MAX_S = 2.0
CONNECT_RETRY_FOR_S = 60.0


class BotAgentError(Exception):
    """A failed call: the agent's ``msg`` and the HTTP ``status``, or no status when the agent could not be reached."""

    def __init__(self, msg: str, status: Optional[int] = None) -> None:
        super().__init__(msg if status is None else f"{status}: {msg}")
        self.msg = msg
        self.status = status


class BotStats(TypedDict):
    """The bot's resource use (``GET /api/bots/{id}/stats``)."""

    cpu_percent: float
    memory_usage: str
    memory_percent: float
    uptime: str
    memory_bytes: int
    memory_limit_bytes: int
    uptime_s: int
    network_rx_bytes: Optional[int]
    network_tx_bytes: Optional[int]
    block_read_bytes: Optional[int]
    block_write_bytes: Optional[int]


class UnhealthyEnd(TypedDict):
    """Why a run was ended for its health: the check that failed, and its output."""

    check: Literal["exec", "heartbeat"]
    output: Optional[str]


class ExitRecord(TypedDict):
    """How one run of the bot ended."""

    at: str
    exit_code: Optional[int]
    signal: Optional[str]
    oom_killed: bool
    requested: bool
    started_at: Optional[str]
    unhealthy: Optional[UnhealthyEnd]
    logs: str


class Health(TypedDict):
    """The bot's health: its runtime's check, or its heartbeats."""

    status: Literal["healthy", "unhealthy", "starting", "none"]
    check: Optional[Literal["exec", "heartbeat"]]
    since: Optional[str]
    output: Optional[str]


class DataFolderUse(TypedDict):
    """One data folder of a bot: what it may hold, and what it used when last measured (None before a measure)."""

    path: str
    size_mb: Optional[int]
    used_bytes: Optional[int]
    measured_at: Optional[str]


class BotStatus(TypedDict):
    """What the agent knows of the bot now."""

    bot_id: str
    user_id: Optional[str]
    state: Literal["running", "stopped", "exited", "crash-looping", "given-up"]
    started_at: Optional[str]
    uptime: Optional[str]
    crashes_last_hour: int
    last_exit: Optional[ExitRecord]
    health: Health
    node: str
    data: List[DataFolderUse]


class Revision(TypedDict):
    """One revision of the bot (docs/api.md §15): what it ran, who made it, when, and how it ended."""

    revision: int
    spec: Dict[str, Any]
    by: str
    at: str
    outcome: Literal["deploying", "succeeded", "failed", "rolled-back", "interrupted"]
    reason: Optional[str]
    ended_at: Optional[str]


class LogLine(TypedDict):
    """One line the bot wrote, as live logs send it."""

    type: Literal["log"]
    line: str
    stream: Literal["stdout", "stderr"]
    at: str


#: One event: ``id``, ``type`` (started, exited, crash-looping, recovered, operation, unhealthy, restarted), ``bot_id``, ``at`` and
#: what the type adds (``exit`` for exited; ``operation``, ``result`` and ``by`` for operation).
BotEvent = Dict[str, Any]


@dataclass
class Settings:
    """What a client is made of, read from the bot's environment."""

    bot_id: str
    user_id: Optional[str]
    token: Optional[str]
    token_file: Optional[str]
    probe: Tuple[str, int]
    #: Whether the probe's address was given (BOT_AGENT_PROBE): configuration, not a guess.
    probe_given: bool
    agent_url: Optional[str]
    #: The platform's admin token (BOT_AGENT_ADMIN_TOKEN): when set, every call is the platform's, sent as ``Authorization: Bearer``.
    admin_token: Optional[str] = None


def settings_from(env: Optional[Mapping[str, str]] = None) -> Settings:
    """BOT_ID (required), USER_ID, the token, where to probe and PLATFORM_AGENT_URL, from ``env`` (``os.environ`` unless given)."""
    env = os.environ if env is None else env
    bot_id = env.get("BOT_ID", "")
    if not bot_id:
        raise BotAgentError("BOT_ID is not set: the agent manages only the bot that names itself")
    probe = DEFAULT_PROBE
    given = env.get("BOT_AGENT_PROBE", "")
    host, _, port = given.rpartition(":")
    probe_given = bool(host and port.isdigit())
    if probe_given:
        probe = (host, int(port))
    return Settings(
        bot_id=bot_id,
        user_id=env.get("USER_ID") or None,
        token=env.get("PLATFORM_AGENT_TOKEN") or None,
        token_file=env.get("PLATFORM_AGENT_TOKEN_FILE") or None,
        probe=probe,
        probe_given=probe_given,
        agent_url=(env.get("PLATFORM_AGENT_URL") or "").rstrip("/") or None,
        admin_token=env.get("BOT_AGENT_ADMIN_TOKEN") or None,
    )


def direct_agent(settings: Settings, agent_url: Optional[str]) -> Optional[str]:
    """The agent to call without looking for it: ``agent_url``, else PLATFORM_AGENT_URL for a bot that holds
    a token and was given no probe address (it probes no default ``agent:8000``, which would get no token)."""
    if agent_url:
        return agent_url.rstrip("/")
    holds_token = settings.token is not None or settings.token_file is not None or settings.admin_token is not None
    return settings.agent_url if holds_token and not settings.probe_given else None


def token_only_for(settings: Settings, agent_url: str, given_url: Optional[str]) -> Settings:
    """The settings a client sends with: the bot's token goes only to an agent it was configured for
    (``given_url``, PLATFORM_AGENT_URL, or the probe address BOT_AGENT_PROBE), never to whatever answers
    a probe of the default address."""
    host, port = settings.probe
    configured = {given_url and given_url.rstrip("/"), settings.agent_url, f"http://{host}:{port}" if settings.probe_given else None}
    if agent_url.rstrip("/") in configured:
        return settings
    return replace(settings, token=None, token_file=None, admin_token=None)


def connect_pauses(timeout: float) -> Iterator[float]:
    """The pauses before each new try to connect: while the next try begins within CONNECT_RETRY_FOR_S
    and the call's ``timeout``."""
    until = time.monotonic() + min(timeout, CONNECT_RETRY_FOR_S)
    pause = CONNECT_RETRY_FIRST_S
    while time.monotonic() + pause < until:
        yield pause
        pause = min(pause * 2, CONNECT_RETRY_MAX_S)


def read_token(settings: Settings) -> Optional[str]:
    """PLATFORM_AGENT_TOKEN (Docker), else the file PLATFORM_AGENT_TOKEN_FILE names (a pod's projected
    ServiceAccount token), read at each call since the kubelet renews it."""
    if settings.token is not None or settings.token_file is None:
        return settings.token
    try:
        with open(settings.token_file, encoding="utf-8") as file:
            return file.read().strip() or None
    except OSError as err:
        raise BotAgentError(f"cannot read the bot's token from {settings.token_file} (PLATFORM_AGENT_TOKEN_FILE): {err.strerror}") from None


def headers_for(settings: Settings, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    headers = {"Accept": "application/json"}
    headers.update(extra or {})
    if settings.admin_token is not None:
        headers["Authorization"] = f"Bearer {settings.admin_token}"
        return headers
    token = read_token(settings)
    if token is not None:
        headers["Authorization"] = f"Bot {token}"
    return headers


def unreachable(url: str, reason: object) -> BotAgentError:
    return BotAgentError(
        f"cannot reach the agent at {url} ({reason}): check that the agent is running, the address used, "
        "and that this container is on the agent's network"
    )


def without_probe(settings: Settings, external_url: Optional[str]) -> str:
    """Where the agent is when the probe found none: PLATFORM_AGENT_URL, else ``external_url``."""
    if settings.agent_url:
        return settings.agent_url
    if external_url:
        return external_url.rstrip("/")
    host, port = settings.probe
    raise BotAgentError(f"no agent at {host}:{port}, and neither PLATFORM_AGENT_URL nor an external address is set")


def envelope(status: int, body: bytes) -> Dict[str, Any]:
    """The answer's envelope when it says ok; else BotAgentError with its ``msg`` and status."""
    try:
        answer = json.loads(body.decode("utf-8")) if body else {}
    except ValueError:
        answer = {}
    if not isinstance(answer, dict):
        answer = {}
    if status >= 400 or answer.get("ok") is not True:
        raise BotAgentError(str(answer.get("msg") or f"HTTP {status}"), status)
    return answer


@dataclass(frozen=True)
class Call:
    """One request of the agent's API as both clients send it, and the answer's field they return."""

    method: str
    path: str
    field: str
    body: Optional[Dict[str, Any]] = None
    headers: Optional[Dict[str, str]] = None


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _store_query(store: Optional[str]) -> str:
    return "" if store is None else f"?store={_quote(store)}"


class Calls:
    """The requests of one bot (docs/api.md §2), built in one place; the clients only send them."""

    def __init__(self, settings: Settings) -> None:
        from urllib.parse import quote

        self._settings = settings
        self._quoted = quote(settings.bot_id, safe="")
        self.bot_path = f"/api/bots/{self._quoted}"

    def self_restart(self) -> Call:
        return Call("POST", "/api/bots/self/restart", "message", headers={"X-Bot-ID": self._settings.bot_id})

    def heartbeat(self, ttl_s: Optional[int]) -> Call:
        body: Dict[str, Any] = {} if ttl_s is None else {"ttl_s": int(ttl_s)}
        return Call("POST", "/api/bots/self/heartbeat", "message", body, headers={"X-Bot-ID": self._settings.bot_id})

    def lifecycle(self, operation: Literal["restart", "stop", "start"]) -> Call:
        if not self._settings.user_id:
            raise BotAgentError("USER_ID is not set: stop, start and restart name the owner")
        return Call("POST", f"/api/bots/{operation}", "message", {"bot_id": self._settings.bot_id, "user_id": self._settings.user_id})

    def logs(self, lines: Optional[int]) -> Call:
        body: Dict[str, Any] = {"bot_id": self._settings.bot_id}
        if lines is not None:
            body["lines"] = lines
        return Call("POST", "/api/bots/logs", "logs", body)

    def stats(self) -> Call:
        return Call("GET", f"{self.bot_path}/stats", "stats")

    def status(self) -> Call:
        return Call("GET", self.bot_path, "bot")

    def exits(self, limit: Optional[int]) -> Call:
        return Call("GET", f"{self.bot_path}/exits{'' if limit is None else f'?limit={int(limit)}'}", "exits")

    def revisions(self) -> Call:
        return Call("GET", f"{self.bot_path}/revisions", "revisions")

    def deploy(self, change: Mapping[str, Any]) -> Call:
        return Call("PATCH", f"/api/admin/bots/{self._quoted}", "revision", dict(change))

    def rollback(self) -> Call:
        return Call("POST", f"/api/admin/bots/{self._quoted}/rollback", "revision")

    def backup(self, mode: str, stores: Optional[List[str]], pre: Optional[List[str]] = None) -> Call:
        return Call("POST", f"/api/admin/bots/{self._quoted}/backups", "backup", {"mode": mode, **({"stores": stores} if stores else {}), **({"pre": pre} if pre else {})})

    def backups(self, store: Optional[str]) -> Call:
        return Call("GET", f"/api/admin/bots/{self._quoted}/backups{_store_query(store)}", "backups")

    def restore(self, backup_id: str, store: Optional[str]) -> Call:
        return Call("POST", f"/api/admin/bots/{self._quoted}/backups/{_quote(backup_id)}/restore{_store_query(store)}", "message")

    def verify(self, backup_id: str, store: Optional[str]) -> Call:
        return Call("POST", f"/api/admin/bots/{self._quoted}/backups/{_quote(backup_id)}/verify{_store_query(store)}", "backup")

    def follow_logs(self, lines: Optional[int]) -> str:
        return f"{self.bot_path}/logs?follow=true{'' if lines is None else f'&lines={int(lines)}'}"

    def events(self) -> str:
        return f"{self.bot_path}/events"


class Resumption:
    """Where a bot's event stream resumes (``Last-Event-ID``), and how long to wait before it does: from 1 s,
    doubling to 30 s. A refusal, or a failure before the stream ever opened, is the caller's to see."""

    def __init__(self, after: Optional[str]) -> None:
        self.after = after
        self._delay = RECONNECT_FIRST_S
        self._opened = False

    def headers(self) -> Dict[str, str]:
        return {} if self.after is None else {"Last-Event-ID": self.after}

    def opened(self) -> None:
        self._opened = True

    def received(self, message: "Message") -> BotEvent:
        self._delay = RECONNECT_FIRST_S
        self.after = message.id or self.after
        return cast(BotEvent, json.loads(message.data))

    def broke(self, err: BotAgentError) -> None:
        """Raises ``err`` unless the stream is worth opening again."""
        if not self._opened or (err.status is not None and err.status < 500):
            raise err

    def wait(self) -> float:
        """How long to wait before opening it again."""
        delay, self._delay = self._delay, min(self._delay * 2, RECONNECT_MAX_S)
        return delay


@dataclass
class Message:
    """One message of an event stream."""

    event: str = "message"
    data: str = ""
    id: Optional[str] = None


class EventParser:
    """Reads an event stream line by line (the WHATWG rules: ``event``, ``data``, ``id``; comments ignored)."""

    def __init__(self) -> None:
        self._event = ""
        self._data: List[str] = []
        self._id: Optional[str] = None

    def feed(self, line: str) -> Optional[Message]:
        """The message a blank line completes, else None."""
        line = line.rstrip("\r\n")
        if line == "":
            if not self._data:
                self._event = ""
                return None
            message = Message(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data = "", []
            return message
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None


def messages(lines: Iterable[str]) -> Iterator[Message]:
    parser = EventParser()
    for line in lines:
        message = parser.feed(line)
        if message is not None:
            yield message


def log_item(message: Message) -> Union[LogLine, BotEvent]:
    """A live-logs message: a line the bot wrote, or an event (``exited``) between runs."""
    data = json.loads(message.data)
    if message.event == "log":
        return cast(LogLine, {"type": "log", **data})
    return cast(BotEvent, data)
