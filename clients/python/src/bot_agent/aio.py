"""The asyncio client, on httpx (``pip install bot-agent-client[async]``): the same calls as
:class:`bot_agent.BotAgentClient`, awaited, for bots on discord.py, aiogram or python-telegram-bot."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Mapping, Optional, Union, cast

import httpx

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
    EventParser,
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
    settings_from,
    token_only_for,
    unreachable,
    without_probe,
)


async def _find(settings: Settings, external_url: Optional[str], probe_timeout: float) -> str:
    host, port = settings.probe
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), probe_timeout)
        writer.close()
        return f"http://{host}:{port}"
    except (OSError, asyncio.TimeoutError):
        pass
    return without_probe(settings, external_url)


class AsyncBotAgentClient:
    """Calls the agent as the bot named by BOT_ID, with asyncio; close it with ``await client.aclose()``
    or use it as ``async with``.

    >>> async with await AsyncBotAgentClient.from_env() as agent:
    ...     print((await agent.stats())["memory_usage"])
    """

    def __init__(self, agent_url: str, settings: Settings, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.agent_url = agent_url.rstrip("/")
        self.bot_id = settings.bot_id
        self._settings = settings
        self._calls = Calls(settings)
        self._http = httpx.AsyncClient(base_url=self.agent_url, timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT_S))
        self._timeout = timeout

    @classmethod
    async def from_env(
        cls,
        env: Optional[Mapping[str, str]] = None,
        agent_url: Optional[str] = None,
        external_url: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> "AsyncBotAgentClient":
        """A client for this bot, from its environment (``os.environ`` unless given); the agent found as
        :func:`bot_agent.find_agent` finds it unless ``agent_url`` is given."""
        settings = settings_from(env)
        url = direct_agent(settings, agent_url) or await _find(settings, external_url, PROBE_TIMEOUT_S)
        return cls(url, token_only_for(settings, url, agent_url), timeout)

    async def __aenter__(self) -> "AsyncBotAgentClient":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def self_restart(self) -> str:
        """Restarts this bot; the answer comes before the restart, which then ends this process."""
        return str(await self._ask(self._calls.self_restart()))

    async def heartbeat(self, ttl_s: Optional[int] = None) -> str:
        """Tells the agent this bot is well; without another beat within ``ttl_s`` (30 unless given, or the
        bot's own from its creation) it is unhealthy, and the watchdog restarts it after its grace."""
        return str(await self._ask(self._calls.heartbeat(ttl_s)))

    def beat_while(
        self, healthy: Callable[[], Union[bool, Awaitable[bool]]], every_s: float = HEARTBEAT_EVERY_S, ttl_s: int = HEARTBEAT_TTL_S
    ) -> "asyncio.Task[None]":
        """Beats every ``every_s`` seconds, in a task, while ``healthy()`` says so (e.g. while the gateway is
        connected): cancel the task to stop. A beat that fails is tried again at the next tick."""

        async def beat() -> None:
            while True:
                try:
                    verdict = healthy()
                    if await verdict if inspect.isawaitable(verdict) else verdict:
                        await self.heartbeat(ttl_s)
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - a beat that failed (or a check that threw) is tried at the next tick
                    pass
                await asyncio.sleep(every_s)

        return asyncio.get_running_loop().create_task(beat(), name="bot-agent-heartbeat")

    async def restart(self) -> str:
        """Restarts this bot (as its owner USER_ID); from inside the bot, answered before it happens."""
        return str(await self._ask(self._calls.lifecycle("restart")))

    async def stop(self) -> str:
        """Stops this bot (as its owner USER_ID)."""
        return str(await self._ask(self._calls.lifecycle("stop")))

    async def start(self) -> str:
        """Starts this bot (as its owner USER_ID); a running bot answers that it already runs."""
        return str(await self._ask(self._calls.lifecycle("start")))

    async def logs(self, lines: Optional[int] = None) -> str:
        """The last ``lines`` lines of this bot's output (100 unless given)."""
        return str(await self._ask(self._calls.logs(lines)))

    async def stats(self) -> BotStats:
        """CPU and memory in use, and the uptime."""
        return cast(BotStats, await self._ask(self._calls.stats()))

    async def status(self) -> BotStatus:
        """The bot's state, uptime, crashes in the last hour and its last exit."""
        return cast(BotStatus, await self._ask(self._calls.status()))

    async def exits(self, limit: Optional[int] = None) -> List[ExitRecord]:
        """The bot's exit records, newest first (at most ``limit``, 1 to 50; 20 unless given)."""
        return cast(List[ExitRecord], await self._ask(self._calls.exits(limit)))

    async def revisions(self) -> List[Revision]:
        """The bot's revisions, newest first (docs/api.md §15)."""
        return cast(List[Revision], await self._ask(self._calls.revisions()))

    async def deploy(self, **change: Any) -> int:
        """Deploys a new revision of the bot (see :meth:`bot_agent.BotAgentClient.deploy`)."""
        return int(await self._ask(self._calls.deploy(change)))

    async def rollback(self) -> int:
        """Back to the previous revision; answers the revision that runs now."""
        return int(await self._ask(self._calls.rollback()))

    async def backup(self, mode: str = "stop", stores: Optional[List[str]] = None, pre: Optional[List[str]] = None) -> Dict[str, Any]:
        """A backup of the bot's data folders now, mode stop, live or pre (with pre, the command run in the bot first; docs/api.md §20); answers the backup."""
        return cast(Dict[str, Any], await self._ask(self._calls.backup(mode, stores, pre)))

    async def backups(self, store: Optional[str] = None) -> List[Dict[str, Any]]:
        """The bot's backups, newest first: the agent's folder's, or the store's named."""
        return cast(List[Dict[str, Any]], await self._ask(self._calls.backups(store)))

    async def restore(self, backup_id: str, store: Optional[str] = None) -> str:
        """Restores the backup into the bot; answers the agent's message."""
        return str(await self._ask(self._calls.restore(backup_id, store)))

    async def verify(self, backup_id: str, store: Optional[str] = None) -> Dict[str, Any]:
        """Verifies the backup; answers it with its verification."""
        return cast(Dict[str, Any], await self._ask(self._calls.verify(backup_id, store)))

    async def follow_logs(self, lines: Optional[int] = None) -> AsyncIterator[Union[LogLine, BotEvent]]:
        """The last ``lines`` lines, then each new one as the bot writes it, with an ``exited`` event where a
        run ends, across restarts. Ends when the agent closes the stream."""
        async for message in self._stream(self._calls.follow_logs(lines), {}):
            yield log_item(message)

    async def events(self, after: Optional[str] = None) -> AsyncIterator[BotEvent]:
        """The bot's events as they happen; with ``after``, first every kept event after it. A lost
        connection is opened again, resuming after the last event received (``Last-Event-ID``)."""
        resume = Resumption(after)
        while True:
            try:
                async for message in self._stream(self._calls.events(), resume.headers(), resume.opened):
                    yield resume.received(message)
            except BotAgentError as err:
                resume.broke(err)
            await asyncio.sleep(resume.wait())

    async def _ask(self, call: Call) -> Any:
        return (await self._call(call.method, call.path, call.body, call.headers))[call.field]

    async def _call(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None, headers: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
        extra = dict(headers or {})
        content = None if body is None else json.dumps(body).encode("utf-8")
        if content is not None:
            extra["Content-Type"] = "application/json"
        try:
            reply = await self._connected(lambda: self._http.request(method, path, content=content, headers=headers_for(self._settings, extra)))
        except httpx.HTTPError as err:
            raise unreachable(self.agent_url, err) from None
        return envelope(reply.status_code, reply.content)

    async def _connected(self, send: Callable[[], Awaitable[httpx.Response]]) -> httpx.Response:
        """Sends, trying again while no connection could be opened (see CONNECT_TIMEOUT_S)."""
        for pause in connect_pauses(self._timeout):
            try:
                return await send()
            except (httpx.ConnectError, httpx.ConnectTimeout):
                await asyncio.sleep(pause)
        return await send()

    async def _stream(self, path: str, headers: Mapping[str, str], on_open: Callable[[], None] = lambda: None) -> AsyncIterator[Message]:
        request_headers = headers_for(self._settings, {**headers, "Accept": "text/event-stream"})
        # The read time-out bounds the silence between bytes: the agent's pings come at least every 15 s.
        timeout = httpx.Timeout(self._http.timeout.connect, read=STREAM_SILENCE_S)
        try:
            async with self._http.stream("GET", path, headers=request_headers, timeout=timeout) as reply:
                if not reply.headers.get("content-type", "").startswith("text/event-stream"):
                    envelope(reply.status_code, await reply.aread())
                    raise BotAgentError("the agent answered no event stream", reply.status_code)
                on_open()
                parser = EventParser()
                async for line in reply.aiter_lines():
                    message = parser.feed(line)
                    if message is not None:
                        yield message
        except httpx.ConnectError as err:
            raise unreachable(self.agent_url, err) from None
        except httpx.HTTPError as err:
            raise BotAgentError(f"the agent's stream at {self.agent_url} broke off ({err!r})") from None
