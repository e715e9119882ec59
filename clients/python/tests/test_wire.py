"""The client's side of the wire, against a small HTTP server in the test: what it sends, how it reads
answers and event streams, and how it fails. The real agent is in test_agent.py."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import pytest

from bot_agent import BotAgentClient, BotAgentError
from bot_agent._common import EventParser, Settings, messages, settings_from
from bot_agent.aio import AsyncBotAgentClient

Handler = Callable[[BaseHTTPRequestHandler, int], None]


class Stand:
    """A server answering with ``handler``; what each request sent is kept in ``seen``."""

    def __init__(self, handler: Handler, port: int = 0) -> None:
        self.seen: List[Dict[str, str]] = []
        stand = self

        class Reply(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                stand.seen.append({"method": self.command, "path": self.path, "body": body, **{k.lower(): v for k, v in self.headers.items()}})
                handler(self, len(stand.seen))

            do_GET = do_POST = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Reply)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def answer(request: BaseHTTPRequestHandler, status: int, body: object) -> None:
    data = json.dumps(body).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)


def stream(request: BaseHTTPRequestHandler, text: str) -> None:
    request.send_response(200)
    request.send_header("Content-Type", "text/event-stream")
    request.send_header("Connection", "close")
    request.end_headers()
    request.wfile.write(text.encode())
    request.wfile.flush()
    request.close_connection = True


@pytest.fixture
def stand() -> Iterator[Callable[[Handler], Stand]]:
    made: List[Stand] = []

    def make(handler: Handler) -> Stand:
        made.append(Stand(handler))
        return made[-1]

    yield make
    for server in made:
        server.close()


ENV = {"BOT_ID": "bot_1_2_abc", "USER_ID": "user_9"}


def test_calls_carry_the_bot_its_owner_and_its_token(stand: Callable[[Handler], Stand]) -> None:
    server = stand(lambda request, _: answer(request, 200, {"ok": True, "message": "Bot bot_1_2_abc stopped"}))
    client = BotAgentClient.from_env({**ENV, "PLATFORM_AGENT_TOKEN": "bat1.token"}, agent_url=server.url)
    assert client.stop() == "Bot bot_1_2_abc stopped"
    assert client.self_restart() == "Bot bot_1_2_abc stopped"
    first, second = server.seen
    assert (first["method"], first["path"], json.loads(first["body"])) == ("POST", "/api/bots/stop", {"bot_id": "bot_1_2_abc", "user_id": "user_9"})
    assert first["authorization"] == "Bot bat1.token"
    assert (second["path"], second["x-bot-id"]) == ("/api/bots/self/restart", "bot_1_2_abc")


def test_the_token_file_is_read_at_every_call(stand: Callable[[Handler], Stand], tmp_path: Path) -> None:
    server = stand(lambda request, _: answer(request, 200, {"ok": True, "logs": "a\n"}))
    token = tmp_path / "token"
    token.write_text("first\n")
    client = BotAgentClient.from_env({**ENV, "PLATFORM_AGENT_TOKEN_FILE": str(token)}, agent_url=server.url)
    assert client.logs(1) == "a\n"
    token.write_text("renewed")
    client.logs(1)
    assert [seen["authorization"] for seen in server.seen] == ["Bot first", "Bot renewed"]
    token.unlink()
    with pytest.raises(BotAgentError, match=r"cannot read the bot's token from .+ \(PLATFORM_AGENT_TOKEN_FILE\)"):
        client.logs(1)


def test_refusals_are_errors_with_the_status_and_the_agents_words(stand: Callable[[Handler], Stand]) -> None:
    server = stand(lambda request, _: answer(request, 403, {"ok": False, "msg": "forbidden: a bot may manage only itself"}))
    client = BotAgentClient.from_env(ENV, agent_url=server.url)
    with pytest.raises(BotAgentError) as refused:
        client.status()
    assert (refused.value.status, refused.value.msg) == (403, "forbidden: a bot may manage only itself")
    with pytest.raises(BotAgentError) as refused_stream:
        next(client.events())
    assert refused_stream.value.status == 403


def test_missing_settings_and_an_agent_away_are_said_plainly() -> None:
    with pytest.raises(BotAgentError, match="BOT_ID is not set"):
        BotAgentClient.from_env({})
    with pytest.raises(BotAgentError, match="USER_ID is not set"):
        BotAgentClient.from_env({"BOT_ID": "bot_1_2_abc"}, agent_url="http://127.0.0.1:9").stop()
    with pytest.raises(BotAgentError, match="neither PLATFORM_AGENT_URL") as away:
        BotAgentClient.from_env({**ENV, "BOT_AGENT_PROBE": "127.0.0.1:9"})
    assert away.value.status is None
    with pytest.raises(BotAgentError, match="cannot reach the agent at http://127.0.0.1:9") as unreachable:
        BotAgentClient.from_env(ENV, agent_url="http://127.0.0.1:9", timeout=1).status()
    assert unreachable.value.status is None


def test_the_agent_is_found_by_its_probe_else_by_platform_agent_url(stand: Callable[[Handler], Stand]) -> None:
    server = stand(lambda request, _: answer(request, 200, {"ok": True}))
    port = server.url.rsplit(":", 1)[1]
    assert BotAgentClient.from_env({**ENV, "BOT_AGENT_PROBE": f"127.0.0.1:{port}"}).agent_url == server.url
    fallback = BotAgentClient.from_env({**ENV, "BOT_AGENT_PROBE": "127.0.0.1:9", "PLATFORM_AGENT_URL": "http://agent.example:8000/"})
    assert fallback.agent_url == "http://agent.example:8000"


def test_a_bots_token_goes_only_to_the_agent_it_was_configured_for(stand: Callable[[Handler], Stand], monkeypatch: pytest.MonkeyPatch) -> None:
    stranger = stand(lambda request, _: answer(request, 200, {"ok": True, "logs": "x\n"}))
    configured = stand(lambda request, _: answer(request, 200, {"ok": True, "logs": "x\n"}))
    token = {**ENV, "PLATFORM_AGENT_TOKEN": "bat1.secret"}
    # What answers the default probe (agent:8000, here the stranger) gets no token.
    monkeypatch.setattr("bot_agent._common.DEFAULT_PROBE", ("127.0.0.1", int(stranger.url.rsplit(":", 1)[1])))
    assert BotAgentClient.from_env(token).logs(1) == "x\n"
    assert stranger.seen[-1].get("authorization") is None
    # PLATFORM_AGENT_URL names the agent: it gets the token, and nothing is probed.
    probes = len(stranger.seen)
    told = BotAgentClient.from_env({**token, "PLATFORM_AGENT_URL": configured.url})
    assert told.agent_url == configured.url
    assert told.logs(1) == "x\n"
    assert configured.seen[-1]["authorization"] == "Bot bat1.secret"
    assert len(stranger.seen) == probes
    # BOT_AGENT_PROBE is the operator's word too.
    by_probe = BotAgentClient.from_env({**token, "BOT_AGENT_PROBE": stranger.url.removeprefix("http://")})
    assert by_probe.logs(1) == "x\n"
    assert stranger.seen[-1]["authorization"] == "Bot bat1.secret"


def free_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = int(probe.getsockname()[1])
    probe.close()
    return port


def test_a_call_made_while_no_agent_listens_for_16_s_still_gets_its_answer() -> None:
    """One agent replaced under the chart's Recreate was away 21 s once (docs/operating.md): a call keeps trying to
    connect past 15 s, up to 60 s within its time-out (docs/api.md section 7)."""
    port = free_port()
    arrived: List[Stand] = []
    later = threading.Timer(16, lambda: arrived.append(Stand(lambda request, _: answer(request, 200, {"ok": True, "logs": "late\n"}), port)))
    later.start()
    began = time.monotonic()
    assert BotAgentClient.from_env(ENV, agent_url=f"http://127.0.0.1:{port}").logs(1) == "late\n"
    assert time.monotonic() - began >= 15.9
    later.join()
    arrived[0].close()


def test_a_call_tries_again_while_no_agent_listens_and_gets_its_answer_once_one_does() -> None:
    for use_asyncio in (False, True):
        port = free_port()
        arrived: List[Stand] = []
        later = threading.Timer(1.5, lambda: arrived.append(Stand(lambda request, _: answer(request, 200, {"ok": True, "logs": "late\n"}), port)))
        later.start()
        began = time.monotonic()
        url = f"http://127.0.0.1:{port}"
        if use_asyncio:

            async def logs() -> str:
                async with AsyncBotAgentClient(url, settings_from(ENV), timeout=10) as client:
                    return await client.logs(1)

            assert asyncio.run(logs()) == "late\n"
        else:
            assert BotAgentClient.from_env(ENV, agent_url=url, timeout=10).logs(1) == "late\n"
        assert time.monotonic() - began >= 1.4
        later.join()
        arrived[0].close()
    # A call still ends by its time-out when no agent ever comes.
    began = time.monotonic()
    with pytest.raises(BotAgentError, match="cannot reach the agent"):
        BotAgentClient.from_env(ENV, agent_url=f"http://127.0.0.1:{free_port()}", timeout=1.5).logs(1)
    assert time.monotonic() - began < 3


def resuming_stand(stand: Callable[[Handler], Stand]) -> Stand:
    """Two events, a connection that breaks, then the third event to whoever resumes after the second."""

    def handler(request: BaseHTTPRequestHandler, count: int) -> None:
        if count == 1:
            stream(request, ': ping\n\nid: 1\ndata: {"id":"1","type":"started"}\n\nid: 2\nevent: message\ndata: {"id":"2",\ndata: "type":"exited"}\n\n')
        elif request.headers.get("Last-Event-ID") == "2":
            stream(request, 'id: 3\ndata: {"id":"3","type":"started"}\n\n')
        else:
            answer(request, 400, {"ok": False, "msg": "resumed from the wrong place"})

    return stand(handler)


def test_events_resume_after_the_last_event_received_when_the_connection_breaks(stand: Callable[[Handler], Stand]) -> None:
    server = resuming_stand(stand)
    client = BotAgentClient.from_env(ENV, agent_url=server.url)
    events = client.events()
    received = [next(events)["id"] for _ in range(3)]
    assert received == ["1", "2", "3"]
    assert "last-event-id" not in server.seen[0]
    assert server.seen[1]["last-event-id"] == "2"


def test_the_asyncio_client_calls_fails_and_resumes_alike(stand: Callable[[Handler], Stand]) -> None:
    refusing = stand(lambda request, _: answer(request, 429, {"ok": False, "msg": "too many restarts"}))
    resuming = resuming_stand(stand)

    async def run() -> Tuple[int, List[str]]:
        async with AsyncBotAgentClient(refusing.url, _settings()) as client:
            with pytest.raises(BotAgentError) as refused:
                await client.restart()
        async with AsyncBotAgentClient(resuming.url, _settings()) as client:
            received: List[str] = []
            async for event in client.events():
                received.append(event["id"])
                if len(received) == 3:
                    break
        assert refused.value.msg == "too many restarts"
        return refused.value.status or 0, received

    assert asyncio.run(run()) == (429, ["1", "2", "3"])
    assert resuming.seen[1]["last-event-id"] == "2"


def _settings() -> Settings:
    return settings_from(ENV)


def test_event_streams_are_read_by_the_rules_of_server_sent_events() -> None:
    read = list(messages([": comment\n", "event: log\n", "data: one\n", "data: two\n", "id: 7\n", "\n", "\n", "data:x\n", "\n"]))
    assert [(m.event, m.data, m.id) for m in read] == [("log", "one\ntwo", "7"), ("message", "x", "7")]
    parser = EventParser()
    assert parser.feed("retry: 100\n") is None


def test_the_command_line_prints_answers_refusals_and_its_usage(
    stand: Callable[[Handler], Stand], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot_agent.__main__ import main

    def handler(request: BaseHTTPRequestHandler, _: int) -> None:
        if request.path.endswith("/stats"):
            answer(request, 200, {"ok": True, "stats": {"cpu_percent": 1.5, "memory_usage": "12.00 MB", "memory_percent": 2, "uptime": "0h 1m"}})
        else:
            answer(request, 403, {"ok": False, "msg": "forbidden: a bot may manage only itself"})

    server = stand(handler)
    port = server.url.rsplit(":", 1)[1]
    for name, value in {**ENV, "BOT_AGENT_PROBE": f"127.0.0.1:{port}"}.items():
        monkeypatch.setenv(name, value)
    assert main(["stats"]) == 0
    assert json.loads(capsys.readouterr().out)["memory_usage"] == "12.00 MB"
    assert main(["status"]) == 1
    assert capsys.readouterr().err == "bot-agent: 403: forbidden: a bot may manage only itself\n"
    for wrong in ([], ["reboot"], ["logs", "many"], ["exits", "--follow"], ["stats", "7"]):
        assert main(wrong) == 2, wrong
        assert capsys.readouterr().err.startswith("bot-agent: "), wrong
