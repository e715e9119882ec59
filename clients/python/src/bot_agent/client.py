"""The synchronous client: the standard library only (urllib)."""

from __future__ import annotations

import errno
import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import replace
from typing import Any, Callable, Dict, Iterator, List, Literal, Mapping, Optional, Union, cast

from ._common import (
    CONNECT_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    HEARTBEAT_EVERY_S,
    HEARTBEAT_TTL_S,
    PROBE_TIMEOUT_S,
    STREAM_SILENCE_S,
    BotAgentError,
    BotEvent,
    BotStats,
    BotStatus,
    Call,
    Calls,
    ExitRecord,
    LogLine,
    Message,
    Resumption,
    Revision,
    Settings,
    connect_pauses,
    direct_agent,
    envelope,
    headers_for,
    log_item,
    messages,
    settings_from,
    token_only_for,
    unreachable,
    without_probe,
)

#: Failures of opening a connection that a moment may mend.
_TRANSIENT = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, socket.EAI_AGAIN}


class NotConnected(OSError):
    """A connection to the agent that did not open: refused, unreachable, or not within CONNECT_TIMEOUT_S."""


class _QuickConnection(http.client.HTTPConnection):
    """Opens its connection within CONNECT_TIMEOUT_S, then waits as long as the call may."""

    def connect(self) -> None:
        call_timeout = self.timeout
        self.timeout = CONNECT_TIMEOUT_S
        try:
            super().connect()
        except (TimeoutError, socket.timeout) as err:
            raise NotConnected(f"no connection within {CONNECT_TIMEOUT_S:g} s") from err
        except OSError as err:
            if err.errno in _TRANSIENT:
                raise NotConnected(str(err)) from err
            raise
        finally:
            self.timeout = call_timeout
        self.sock.settimeout(call_timeout)


class _QuickTLSConnection(_QuickConnection, http.client.HTTPSConnection):
    pass


class _QuickHTTP(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_QuickConnection, req)


class _QuickHTTPS(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_QuickTLSConnection, req, context=getattr(self, "_context", None))


def find_agent(env: Optional[Mapping[str, str]] = None, external_url: Optional[str] = None, probe_timeout: float = PROBE_TIMEOUT_S) -> str:
    """The agent's address: the internal one (``agent:8000``, or BOT_AGENT_PROBE) when a TCP connection to it
    opens within ``probe_timeout`` seconds, else PLATFORM_AGENT_URL, else ``external_url``."""
    settings = settings_from({"BOT_ID": "-", **(env if env is not None else os.environ)})
    return _find(settings, external_url, probe_timeout)


def _find(settings: Settings, external_url: Optional[str], probe_timeout: float) -> str:
    host, port = settings.probe
    try:
        with socket.create_connection((host, port), timeout=probe_timeout):
            return f"http://{host}:{port}"
    except OSError:
        pass
    return without_probe(settings, external_url)


class BotAgentClient:
    """Calls the agent as the bot named by BOT_ID (and, for stop, start and restart, its owner USER_ID).

    The bot's token, where the agent names bots by token, is sent as ``Authorization: Bot <token>``:
    PLATFORM_AGENT_TOKEN, or the file PLATFORM_AGENT_TOKEN_FILE names, read at each call.

    >>> client = BotAgentClient.from_env()
    >>> client.status()["state"]
    'running'
    """

    def __init__(self, agent_url: str, settings: Settings, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.agent_url = agent_url.rstrip("/")
        self.bot_id = settings.bot_id
        self._settings = settings
        self._calls = Calls(settings)
        self._timeout = timeout
        self._opener = urllib.request.build_opener(_QuickHTTP, _QuickHTTPS)
        self._platform_named = False

    @classmethod
    def from_env(
        cls,
        env: Optional[Mapping[str, str]] = None,
        agent_url: Optional[str] = None,
        external_url: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> "BotAgentClient":
        """A client for this bot, from its environment (``os.environ`` unless given); the agent is found
        with :func:`find_agent` unless ``agent_url`` is given or, for a bot holding a token, PLATFORM_AGENT_URL
        names it (the token goes to no other). Raises BotAgentError when BOT_ID is not set."""
        settings = settings_from(env)
        url = direct_agent(settings, agent_url) or _find(settings, external_url, PROBE_TIMEOUT_S)
        return cls(url, token_only_for(settings, url, agent_url), timeout)

    def self_restart(self) -> str:
        """Restarts this bot; the answer comes before the restart, which then ends this process."""
        return str(self._ask(self._calls.self_restart()))

    def heartbeat(self, ttl_s: Optional[int] = None) -> str:
        """Tells the agent this bot is well; without another beat within ``ttl_s`` (30 unless given, or the
        bot's own from its creation) it is unhealthy, and the watchdog restarts it after its grace."""
        return str(self._ask(self._calls.heartbeat(ttl_s)))

    def beat_while(self, healthy: Callable[[], bool], every_s: float = HEARTBEAT_EVERY_S, ttl_s: int = HEARTBEAT_TTL_S) -> "Heartbeat":
        """Beats every ``every_s`` seconds, in a daemon thread, while ``healthy()`` says so (e.g. while the
        gateway is connected): when it stops saying so, or the thread is stopped, the beats stop and the agent
        sees the bot go unhealthy ``ttl_s`` later. A beat that fails is tried again at the next tick."""
        return Heartbeat(self, healthy, every_s, ttl_s)

    def restart(self) -> str:
        """Restarts this bot (as its owner USER_ID); from inside the bot, answered before it happens."""
        return self._lifecycle("restart")

    def stop(self) -> str:
        """Stops this bot (as its owner USER_ID)."""
        return self._lifecycle("stop")

    def start(self) -> str:
        """Starts this bot (as its owner USER_ID); a running bot answers that it already runs."""
        return self._lifecycle("start")

    def _lifecycle(self, operation: Literal["restart", "stop", "start"]) -> str:
        # A bot the platform named (PlatformClient.bot) is called as its owner the agent knows, where USER_ID is not set.
        if self._platform_named and not self._settings.user_id:
            self._settings = replace(self._settings, user_id=self.status().get("user_id"))
            self._calls = Calls(self._settings)
        return str(self._ask(self._calls.lifecycle(operation)))

    def logs(self, lines: Optional[int] = None) -> str:
        """The last ``lines`` lines of this bot's output (100 unless given)."""
        return str(self._ask(self._calls.logs(lines)))

    def stats(self) -> BotStats:
        """CPU and memory in use, and the uptime."""
        return cast(BotStats, self._ask(self._calls.stats()))

    def status(self) -> BotStatus:
        """The bot's state, uptime, crashes in the last hour and its last exit."""
        return cast(BotStatus, self._ask(self._calls.status()))

    def exits(self, limit: Optional[int] = None) -> List[ExitRecord]:
        """The bot's exit records, newest first (at most ``limit``, 1 to 50; 20 unless given)."""
        return cast(List[ExitRecord], self._ask(self._calls.exits(limit)))

    def revisions(self) -> List[Revision]:
        """The bot's revisions, newest first (docs/api.md §15)."""
        return cast(List[Revision], self._ask(self._calls.revisions()))

    def deploy(self, **change: Any) -> int:
        """Deploys a new revision of the bot: ``image``, ``env``, ``command``, ``memory_limit``, ``cpu_limit``,
        ``min_ready_s``, ``deadline_s``, ``rollback`` (docs/api.md §15). The platform's: from the host, or with
        BOT_AGENT_ADMIN_TOKEN. Answers its number once its run is started; it is judged after."""
        return int(self._ask(self._calls.deploy(change)))

    def rollback(self) -> int:
        """Back to the previous revision (the platform's, as deploy); answers the revision that runs now."""
        return int(self._ask(self._calls.rollback()))

    def backup(self, mode: str = "stop", stores: Optional[List[str]] = None, pre: Optional[List[str]] = None) -> Dict[str, Any]:
        """A backup of the bot's data folders now, ``stop`` or ``live``, copied to ``stores`` (docs/api.md §20;
        the platform's, as deploy). Answers the backup."""
        return cast(Dict[str, Any], self._ask(self._calls.backup(mode, stores, pre)))

    def backups(self, store: Optional[str] = None) -> List[Dict[str, Any]]:
        """The bot's backups, newest first: the agent's folder's, or the store's named."""
        return cast(List[Dict[str, Any]], self._ask(self._calls.backups(store)))

    def restore(self, backup_id: str, store: Optional[str] = None) -> str:
        """Restores the backup into the bot (its data as it was kept as a backup first); answers the agent's message."""
        return str(self._ask(self._calls.restore(backup_id, store)))

    def verify(self, backup_id: str, store: Optional[str] = None) -> Dict[str, Any]:
        """Verifies the backup (unpacked beside the bot and read back); answers it with its verification."""
        return cast(Dict[str, Any], self._ask(self._calls.verify(backup_id, store)))

    def wait_for_revision(self, revision: int, every_s: float = 1.0) -> Revision:
        """The revision once it is judged (its outcome no longer ``deploying``)."""
        while True:
            for found in self.revisions():
                if found["revision"] == revision and found["outcome"] != "deploying":
                    return found
            time.sleep(every_s)

    def follow_logs(self, lines: Optional[int] = None) -> Iterator[Union[LogLine, BotEvent]]:
        """The last ``lines`` lines (100 unless given), then each new one as the bot writes it, with an
        ``exited`` event where a run ends, across restarts. Ends when the agent closes the stream."""
        for message in self._stream(self._calls.follow_logs(lines), {}):
            yield log_item(message)

    def events(self, after: Optional[str] = None) -> Iterator[BotEvent]:
        """The bot's events as they happen; with ``after`` (an event's id), first every kept event after it.
        A lost connection is opened again, resuming after the last event received (``Last-Event-ID``),
        so none is missed. Refusals, and failures before the stream ever opened, raise BotAgentError."""
        return self._events_at(self._calls.events(), after)

    def _events_at(self, path: str, after: Optional[str]) -> Iterator[BotEvent]:
        resume = Resumption(after)
        while True:
            try:
                for message in self._stream(path, resume.headers(), resume.opened):
                    yield resume.received(message)
            except BotAgentError as err:
                resume.broke(err)
            time.sleep(resume.wait())

    def _ask(self, call: Call) -> Any:
        return self._call(call.method, call.path, call.body, call.headers)[call.field]

    def _call(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None, headers: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        extra = dict(headers or {})
        if data is not None:
            extra["Content-Type"] = "application/json"
        request = urllib.request.Request(f"{self.agent_url}{path}", data=data, method=method, headers=headers_for(self._settings, extra))
        try:
            with self._open(request, self._timeout) as reply:
                return envelope(reply.status, reply.read())
        except urllib.error.HTTPError as err:
            return envelope(err.code, err.read())
        except (urllib.error.URLError, OSError) as err:
            raise unreachable(self.agent_url, getattr(err, "reason", err)) from None

    def _open(self, request: urllib.request.Request, timeout: float) -> Any:
        """Opens the request, trying again while no connection could be opened (see CONNECT_TIMEOUT_S)."""
        for pause in connect_pauses(timeout):
            try:
                return self._opener.open(request, timeout=timeout)
            except urllib.error.URLError as err:
                if not isinstance(err.reason, NotConnected):
                    raise
            time.sleep(pause)
        return self._opener.open(request, timeout=timeout)

    def _stream(self, path: str, headers: Mapping[str, str], on_open: Callable[[], None] = lambda: None) -> Iterator[Message]:
        request = urllib.request.Request(
            f"{self.agent_url}{path}", headers=headers_for(self._settings, {**headers, "Accept": "text/event-stream"})
        )
        try:
            # The time-out bounds each read: the agent's pings come at least every 15 s.
            reply = self._open(request, STREAM_SILENCE_S)
        except urllib.error.HTTPError as err:
            envelope(err.code, err.read())
            raise BotAgentError(f"HTTP {err.code}", err.code) from None
        except (urllib.error.URLError, OSError) as err:
            raise unreachable(self.agent_url, getattr(err, "reason", err)) from None
        with reply:
            if not str(reply.headers.get("Content-Type", "")).startswith("text/event-stream"):
                envelope(reply.status, reply.read())
                raise BotAgentError("the agent answered no event stream", reply.status)
            on_open()
            try:
                yield from messages(line.decode("utf-8") for line in reply)
            except (OSError, ValueError) as err:
                raise BotAgentError(f"the agent's stream at {self.agent_url} broke off ({err})") from None


class Heartbeat:
    """The beats :meth:`BotAgentClient.beat_while` sends, in a daemon thread, until :meth:`stop`."""

    def __init__(self, client: BotAgentClient, healthy: Callable[[], bool], every_s: float, ttl_s: int) -> None:
        self.beats = 0
        self.failures = 0
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(client, healthy, every_s, ttl_s), name="bot-agent-heartbeat", daemon=True)
        self._thread.start()

    def _run(self, client: BotAgentClient, healthy: Callable[[], bool], every_s: float, ttl_s: int) -> None:
        while not self._stopped.is_set():
            try:
                if healthy():
                    client.heartbeat(ttl_s)
                    self.beats += 1
            except Exception:  # noqa: BLE001 - a beat that failed (or a check that threw) is tried at the next tick
                self.failures += 1
            self._stopped.wait(every_s)

    def stop(self) -> None:
        """Stops beating; the agent sees the bot go unhealthy once its last beat's ttl has passed."""
        self._stopped.set()
        self._thread.join()


class PlatformClient:
    """The platform's side of bot-agent (docs/clients.md): any bot, the list of bots, the fleet's nodes, moves and
    every bot's events, with the admin token BOT_AGENT_ADMIN_TOKEN (or from the agent's own host, which needs none),
    at BOT_AGENT_URL, else PLATFORM_AGENT_URL, else ``http://127.0.0.1:8000`` (npm start's).

    >>> platform = PlatformClient.from_env()
    >>> platform.bot("bot_1_2_a").restart()
    """

    def __init__(self, agent_url: str, admin_token: Optional[str], user_id: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.agent_url = agent_url.rstrip("/")
        self._admin_token = admin_token
        self._user_id = user_id
        self._timeout = timeout
        # The transport of a bot's client, for calls that name no bot.
        self._transport = self.bot("-")

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None, timeout: float = DEFAULT_TIMEOUT_S) -> "PlatformClient":
        env = os.environ if env is None else env
        url = env.get("BOT_AGENT_URL") or env.get("PLATFORM_AGENT_URL") or "http://127.0.0.1:8000"
        return cls(url, env.get("BOT_AGENT_ADMIN_TOKEN") or None, env.get("USER_ID") or None, timeout)

    def bot(self, bot_id: str) -> BotAgentClient:
        """A client of one bot, called as the platform: its owner is read from the agent for stop, start and restart."""
        settings = Settings(
            bot_id=bot_id, user_id=self._user_id, token=None, token_file=None, probe=("", 0), probe_given=False, agent_url=self.agent_url, admin_token=self._admin_token
        )
        client = BotAgentClient(self.agent_url, settings, self._timeout)
        client._platform_named = True
        return client

    def bots(self, user_id: Optional[str] = None, limit: Optional[int] = None, after: Optional[str] = None) -> Dict[str, Any]:
        """The bots in the order of their ids, ``{total, bots, next?}``: a page of at most ``limit`` after ``after``, or all."""
        from urllib.parse import urlencode

        query = urlencode({key: value for key, value in (("user_id", user_id), ("limit", limit), ("after", after)) if value is not None})
        answer = self._transport._call("GET", f"/api/admin/bots{'?' + query if query else ''}")
        return {key: answer[key] for key in ("total", "bots", "next") if key in answer}

    def nodes(self) -> Dict[str, Any]:
        """The fleet's nodes, each alive or away with its bots counted (docs/api.md §17)."""
        answer = self._transport._call("GET", "/api/admin/nodes")
        return {"node": answer.get("node"), "nodes": answer.get("nodes")}

    def move(self, bot_id: str, node: str) -> str:
        """Moves the bot to ``node`` (docs/api.md §17); answers the agent's message once it runs there."""
        from urllib.parse import quote

        return str(self._transport._call("POST", f"/api/admin/bots/{quote(bot_id, safe='')}/move", {"node": node})["message"])

    def events(self, after: Optional[str] = None) -> Iterator[BotEvent]:
        """Every bot's events as they happen, resumed as a bot's are (BotAgentClient.events)."""
        return self._transport._events_at("/api/events", after)
