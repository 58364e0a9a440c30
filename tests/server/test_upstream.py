"""The lean upstream client (aiohttp) against real loopback servers: answers, reuse,
retries, errors."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from dpllm.errors import (
    ModelAuthError,
    ModelBadResponse,
    ModelRateLimited,
    ModelTimeout,
    ModelUnreachable,
)
from dpllm.server.upstream import UpstreamClient, lean_eligible
from dpllm.testing import FakeOpenAIServer

BODY = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}


def client(base_url: str, *, timeout: float = 5.0, max_retries: int = 0) -> UpstreamClient:
    return UpstreamClient(
        base_url, api_key="upstream-secret", timeout=timeout, max_retries=max_retries
    )


def post(upstream: UpstreamClient, body: dict[str, Any] = BODY) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        try:
            return await upstream.post_json("/chat/completions", body)
        finally:
            await upstream.aclose()

    return asyncio.run(run())


# -- against the fake OpenAI server ---------------------------------------------------


@pytest.fixture()
def fake() -> Any:
    with FakeOpenAIServer() as srv:
        yield srv


def test_posts_json_and_reads_the_answer(fake: FakeOpenAIServer) -> None:
    fake.enqueue("About 160 responses.")
    answer = post(client(fake.base_url))
    assert answer["choices"][0]["message"]["content"] == "About 160 responses."
    request = fake.completion_requests[-1]
    assert request.path == "/v1/chat/completions" and request.body == BODY
    assert request.headers["authorization"] == "Bearer upstream-secret"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept-encoding"] == "identity"
    assert request.headers["user-agent"] == "dpllm"  # not aiohttp's


def test_upstream_down_is_unreachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens once closed
    with pytest.raises(ModelUnreachable) as info:
        post(client(f"http://127.0.0.1:{port}/v1", max_retries=1))
    assert info.value.status is None


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (500, ModelBadResponse),
        (404, ModelBadResponse),
        (401, ModelAuthError),
        (429, ModelRateLimited),
    ],
)
def test_upstream_status_errors(
    fake: FakeOpenAIServer, status: int, error: type[Exception]
) -> None:
    fake.enqueue_error(status, "the prompt said Emily Clark")
    with pytest.raises(error) as info:
        post(client(fake.base_url))
    assert getattr(info.value, "status", None) == status
    message = str(info.value)
    assert f"HTTP {status} (scripted)" in message  # the error type, never its message
    assert "Emily" not in message


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retryable_status_is_retried(fake: FakeOpenAIServer, status: int) -> None:
    fake.enqueue_error(status, retry_after=0)
    fake.enqueue("Second time lucky.")
    answer = post(client(fake.base_url, max_retries=1))
    assert answer["choices"][0]["message"]["content"] == "Second time lucky."
    assert len(fake.completion_requests) == 2


def test_client_errors_are_not_retried(fake: FakeOpenAIServer) -> None:
    fake.enqueue_error(400, retry_after=0)
    fake.enqueue("never asked for")
    with pytest.raises(ModelBadResponse):
        post(client(fake.base_url, max_retries=2))
    assert len(fake.completion_requests) == 1


def test_timeout(fake: FakeOpenAIServer) -> None:
    fake.enqueue("late", delay=3.0)
    with pytest.raises(ModelTimeout):
        post(client(fake.base_url, timeout=0.3))


def test_a_timeout_spends_the_deadline_and_is_not_retried(fake: FakeOpenAIServer) -> None:
    fake.enqueue("late", delay=2.0)
    fake.enqueue("never asked for")
    with pytest.raises(ModelTimeout):
        post(client(fake.base_url, timeout=0.3, max_retries=3))
    assert len(fake.completion_requests) == 1


def test_timeout_is_retried_within_a_longer_deadline(fake: FakeOpenAIServer) -> None:
    fake.enqueue("late", delay=3.0)
    fake.enqueue("in time")
    upstream = client(fake.base_url, timeout=0.5, max_retries=1)

    async def run() -> dict[str, Any]:
        # each attempt ≤ timeout; the backoff waits ≤ 0.5 s; the deadline leaves room
        deadline = asyncio.get_running_loop().time() + 5.0
        try:
            return await upstream.post_json("/chat/completions", BODY, deadline=deadline)
        finally:
            await upstream.aclose()

    answer = asyncio.run(run())
    assert answer["choices"][0]["message"]["content"] == "in time"
    assert len(fake.completion_requests) == 2


def test_retry_after_past_the_deadline_is_not_waited_for(fake: FakeOpenAIServer) -> None:
    fake.enqueue_error(503, retry_after=30)
    fake.enqueue("never asked for")
    with pytest.raises(ModelBadResponse) as info:
        post(client(fake.base_url, timeout=2.0, max_retries=3))
    assert info.value.status == 503
    assert len(fake.completion_requests) == 1


def test_retries_stop_at_the_deadline(fake: FakeOpenAIServer) -> None:
    # 0.25 s between attempts, a 1 s deadline: at most 5 attempts of the 11 allowed
    fake.enqueue_error(500, retry_after=0.25, times=20)
    with pytest.raises(ModelBadResponse):
        post(client(fake.base_url, timeout=1.0, max_retries=10))
    assert 1 < len(fake.completion_requests) <= 5


def test_cancelling_the_call_stops_the_attempts(fake: FakeOpenAIServer) -> None:
    fake.enqueue_error(500, retry_after=0.3, times=10)
    upstream = client(fake.base_url, timeout=10.0, max_retries=9)

    async def run() -> None:
        call = asyncio.ensure_future(upstream.post_json("/chat/completions", BODY))
        while not fake.completion_requests:
            await asyncio.sleep(0.01)
        call.cancel()  # what the route does when the client disconnects
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(0.8)  # past two more backoffs, had the call gone on
        await upstream.aclose()

    asyncio.run(run())
    assert len(fake.completion_requests) == 1


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b""], ids=["text", "list", "empty"])
def test_malformed_answer(fake: FakeOpenAIServer, raw: bytes) -> None:
    fake.enqueue(raw_body=raw)
    with pytest.raises(ModelBadResponse) as info:
        post(client(fake.base_url))
    assert info.value.status is None


def test_body_that_is_not_json_is_refused_before_sending(fake: FakeOpenAIServer) -> None:
    with pytest.raises(ValueError):
        post(client(fake.base_url), {"temperature": float("nan"), "messages": []})
    assert fake.completion_requests == []


async def _keep_alive_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A minimal ASGI upstream (served by uvicorn: HTTP/1.1 keep-alive)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    while (await receive()).get("more_body"):
        pass
    body = json.dumps({"choices": [], "object": "chat.completion"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def test_one_client_on_successive_event_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    """An app served by one event loop, shut down (aclose), then served by another."""
    from dpllm.server import upstream as module
    from tests.server.conftest import LiveServer

    monkeypatch.setattr(module, "MAX_CONNECTIONS", 1)  # the 2nd concurrent call waits on a slot

    async def serve(upstream: UpstreamClient) -> list[dict[str, Any]]:
        try:
            return await asyncio.gather(
                *(upstream.post_json("/chat/completions", BODY) for _ in range(2))
            )
        finally:
            await upstream.aclose()  # as the app's lifespan does at shutdown

    with LiveServer(_keep_alive_app) as live:
        upstream = client(live.url + "/v1")
        for _ in range(2):  # asyncio.run: a new event loop each time
            answers = asyncio.run(serve(upstream))
            assert answers == [{"choices": [], "object": "chat.completion"}] * 2


def test_repr_holds_no_key(fake: FakeOpenAIServer) -> None:
    assert "upstream-secret" not in repr(client(fake.base_url))


# -- against a scripted HTTP/1.1 server (keep-alive, chunked, stale connections) -----------

Handler = Callable[[int, asyncio.StreamWriter], Awaitable[bool]]


def _json_response(payload: Any, *, chunked: bool = False, extra: str = "") -> bytes:
    body = json.dumps(payload).encode()
    if chunked:
        half = len(body) // 2
        framed = b"".join(
            b"%x;ext=1\r\n%s\r\n" % (len(part), part) for part in (body[:half], body[half:])
        )
        return (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n" + extra.encode() + b"\r\n" + framed + b"0\r\n\r\n"
        )
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
        % (len(body), extra.encode(), body)
    )


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, Any]]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    decoded: dict[str, Any] = json.loads(await reader.readexactly(length))
    return head, decoded


class Scripted:
    """An asyncio HTTP/1.1 server; ``handler(n, writer)`` answers request n (0-based, over
    all connections), returning False to close the connection. Counts connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests = 0
        self.heads: list[bytes] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head, _ = await _read_request(reader)
                self.heads.append(head.lower())
                n = self.requests
                self.requests += 1
                if not await self.handler(n, writer):
                    break
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def run_scripted(handler: Handler, calls: int, **options: Any) -> tuple[list[Any], Scripted]:
    scripted = Scripted(handler)

    async def run() -> list[Any]:
        server = await asyncio.start_server(scripted.serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        upstream = client(f"http://127.0.0.1:{port}/v1", **options)
        out: list[Any] = []
        try:
            for _ in range(calls):
                try:
                    out.append(await upstream.post_json("/chat/completions", BODY))
                except Exception as exc:  # noqa: BLE001 - the test inspects it
                    out.append(exc)
        finally:
            await upstream.aclose()
            server.close()
            await server.wait_closed()
        return out

    return asyncio.run(run()), scripted


def test_keep_alive_connection_is_reused() -> None:
    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        writer.write(_json_response({"n": n}))
        return True

    answers, scripted = run_scripted(handler, 3)
    assert answers == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert scripted.connections == 1


def test_chunked_answer() -> None:
    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        writer.write(_json_response({"choices": [], "n": n}, chunked=True))
        return True

    answers, scripted = run_scripted(handler, 2)
    assert answers == [{"choices": [], "n": 0}, {"choices": [], "n": 1}]
    assert scripted.connections == 1


def test_connection_close_is_honoured() -> None:
    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        writer.write(_json_response({"n": n}, extra="Connection: close\r\n"))
        return True  # keeps it open; the client must still not reuse it

    answers, scripted = run_scripted(handler, 2)
    assert answers == [{"n": 0}, {"n": 1}]
    assert scripted.connections == 2


def test_stale_kept_alive_connection_is_replaced() -> None:
    """The server drops a kept-alive connection as the next request arrives: retried at
    once (no backoff) on a fresh connection, as one of the max_retries."""

    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        if n == 1:
            return False  # close without answering
        writer.write(_json_response({"n": n}))
        return True

    answers, scripted = run_scripted(handler, 2, max_retries=1)
    assert answers == [{"n": 0}, {"n": 2}]
    assert scripted.connections == 2


@pytest.mark.parametrize("stale", [True, False], ids=["kept-alive", "fresh"])
def test_only_a_stale_kept_alive_connection_skips_the_backoff(
    stale: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connector tells a reused connection from a fresh one: a kept-alive one closed
    unanswered is retried at once (wait 0), a fresh one closed unanswered after the
    backoff (no Retry-After: ``None``, the exponential wait)."""
    from dpllm.server import upstream as module

    waits: list[float | None] = []
    real = module._backoff

    def recorded(attempt: int, retry_after: float | None) -> float:
        waits.append(retry_after)
        return real(attempt, 0.0)  # the test does not wait either way

    monkeypatch.setattr(module, "_backoff", recorded)

    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        if n == (1 if stale else 0):
            return False  # close without answering
        writer.write(_json_response({"n": n}))
        return True

    answers, _ = run_scripted(handler, 2 if stale else 1, max_retries=1)
    assert waits == ([0.0] if stale else [None])
    assert answers[-1] == {"n": 2 if stale else 1}


def test_a_post_is_never_sent_more_than_max_retries_plus_one_times() -> None:
    """The server may have read the request before closing the connection: with
    max_retries=0 the prompt goes out once, whatever the connection was."""

    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        if n == 1:
            return False  # read the request, then close without answering
        writer.write(_json_response({"n": n}))
        return True

    answers, scripted = run_scripted(handler, 2, max_retries=0)
    assert answers[0] == {"n": 0}
    assert isinstance(answers[1], ModelUnreachable)
    assert scripted.requests == 2  # one each: the second was not re-sent


def test_stale_connection_answering_an_error_is_not_retried() -> None:
    """Only a connection closed unanswered is retried at once, not an answer (401 …)."""

    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        if n == 0:
            writer.write(_json_response({"n": n}))
        else:
            body = b'{"error": {"type": "invalid_api_key"}}'
            writer.write(
                b"HTTP/1.1 401 Unauthorized\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
        return True

    answers, scripted = run_scripted(handler, 2, max_retries=0)
    assert answers[0] == {"n": 0}
    assert isinstance(answers[1], ModelAuthError) and answers[1].status == 401
    assert scripted.requests == 2


def test_fresh_connection_closed_unanswered_is_not_retried_at_once() -> None:
    """A new connection that the server closes unanswered is a retryable failure
    (counted in max_retries), not a stale kept-alive one."""

    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        return False

    answers, scripted = run_scripted(handler, 1, max_retries=0)
    assert isinstance(answers[0], ModelUnreachable)
    assert scripted.requests == 1


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
def test_connection_dropped_mid_answer_is_unreachable(chunked: bool) -> None:
    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        writer.write(_json_response({"n": n, "pad": "x" * 100}, chunked=chunked)[:-20])
        return False

    answers, _ = run_scripted(handler, 1)
    assert isinstance(answers[0], ModelUnreachable)


def test_slow_body_times_out() -> None:
    """The timeout covers the whole answer, not only its head."""

    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")
        await writer.drain()
        await asyncio.sleep(2)
        return False

    started = time.monotonic()
    answers, _ = run_scripted(handler, 1, timeout=0.3)
    assert isinstance(answers[0], ModelTimeout)
    assert time.monotonic() - started < 1.5


def test_malformed_chunk_after_the_head_fails_closed() -> None:
    """A chunk size that is not hex, after the head and a good chunk: nothing is passed on,
    and at once (aiohttp's C parser closes the connection without ending the body's read;
    the client notices the close), not at the timeout."""

    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"zz\r\n{}\r\n0\r\n\r\n")
        return False

    answers, _ = run_scripted(handler, 1, timeout=30.0)
    assert isinstance(answers[0], ModelBadResponse), answers


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
def test_answer_over_max_body_is_refused(monkeypatch: pytest.MonkeyPatch, framing: str) -> None:
    from dpllm.server import upstream as module

    monkeypatch.setattr(module, "MAX_BODY", 100)
    body = json.dumps({"pad": "x" * 150}).encode()

    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        if framing == "length":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        elif framing == "chunked":
            writer.write(_json_response({"pad": "x" * 150}, chunked=True))
        else:
            writer.write(b"HTTP/1.0 200 OK\r\n\r\n" + body)
        return False

    answers, _ = run_scripted(handler, 1)
    assert isinstance(answers[0], ModelBadResponse)
    assert "larger than 100 bytes" in str(answers[0])


def test_redirect_is_not_followed() -> None:
    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere\r\n")
        writer.write(b"Content-Length: 0\r\n\r\n")
        return True

    answers, scripted = run_scripted(handler, 1)
    assert isinstance(answers[0], ModelBadResponse) and answers[0].status == 307
    assert "base_url" in str(answers[0]) and "/elsewhere" not in str(answers[0])
    assert scripted.requests == 1


def test_the_upstream_error_type_is_reported_only_when_it_is_an_identifier() -> None:
    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        kind = "invalid_request_error" if n == 0 else "prompt was: Emily Clark 13987654321"
        body = json.dumps({"error": {"type": kind, "message": "secret prompt"}}).encode()
        writer.write(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        return True

    answers, _ = run_scripted(handler, 2, max_retries=0)
    assert "(invalid_request_error)" in str(answers[0])
    assert "Emily" not in str(answers[1]) and "1398765" not in str(answers[1])
    assert all("secret prompt" not in str(a) for a in answers)


def test_cookies_are_not_kept() -> None:
    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        writer.write(_json_response({"n": n}, extra="Set-Cookie: sid=abc; Path=/\r\n"))
        return True

    answers, scripted = run_scripted(handler, 2)
    assert answers == [{"n": 0}, {"n": 1}]
    assert all(b"cookie" not in head for head in scripted.heads)


@pytest.mark.parametrize(
    "response",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n{}",
    ],
    ids=["not-http", "bad-length", "bad-chunk", "huge-head"],
)
def test_malformed_http_fails_closed(response: bytes) -> None:
    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        writer.write(response)
        return False

    answers, _ = run_scripted(handler, 1)
    assert isinstance(answers[0], ModelBadResponse)


def test_interim_response_is_skipped_and_close_delimited_body_read() -> None:
    async def handler(n: int, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\n" + b'{"n": 0}')
        return False

    answers, _ = run_scripted(handler, 1)
    assert answers == [{"n": 0}]


# -- when the lean client is used ---------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "environ", "expected"),
    [
        ("http://127.0.0.1:8000/v1", None, True),
        ("https://api.example.com/v1", None, False),
        ("http://model.lan:8000/v1", {"HTTP_PROXY": "http://proxy:3128"}, False),
        ("http://model.lan:8000/v1", {"all_proxy": "socks5://proxy:1080"}, False),
        ("http://127.0.0.1:8000/v1", {"HTTP_PROXY": "p", "NO_PROXY": "localhost,127.0.0.1"}, True),
        ("http://a.model.lan/v1", {"HTTP_PROXY": "p", "no_proxy": ".model.lan"}, True),
        ("http://a.model.lan/v1", {"HTTP_PROXY": "p", "no_proxy": "*"}, True),
        ("http://model.lan:8000/v1", {"HTTP_PROXY": "p", "NO_PROXY": "model.lan:8000"}, True),
        ("http://othermodel.lan/v1", {"HTTP_PROXY": "p", "NO_PROXY": "model.lan"}, False),
        ("http://[::1]:8000/v1", {"HTTP_PROXY": "p", "NO_PROXY": "[::1]:8000"}, True),
        ("http://model.lan/v1", {"HTTPS_PROXY": "http://proxy:3128"}, True),
        # httpx's rules: a leading dot is subdomains only; a port must match
        ("http://model.lan/v1", {"HTTP_PROXY": "p", "NO_PROXY": ".model.lan"}, False),
        ("http://model.lan/v1", {"HTTP_PROXY": "p", "NO_PROXY": "*.model.lan"}, False),
        ("http://a.model.lan/v1", {"HTTP_PROXY": "p", "NO_PROXY": "model.lan"}, True),
        ("http://localhost:8000/v1", {"HTTP_PROXY": "p", "NO_PROXY": "localhost:9000"}, False),
        ("http://localhost/v1", {"HTTP_PROXY": "p", "NO_PROXY": "localhost:80"}, True),
        ("http://[::1]:8000/v1", {"HTTP_PROXY": "p", "NO_PROXY": "[::1]:9000"}, False),
    ],
)
def test_lean_eligible(url: str, environ: dict[str, str] | None, expected: bool) -> None:
    assert lean_eligible(url, environ) is expected


def test_rejects_https_and_bad_parameters() -> None:
    with pytest.raises(ValueError):
        UpstreamClient("https://api.example.com/v1", api_key="k", timeout=1, max_retries=0)
    with pytest.raises(ValueError):
        UpstreamClient("http://127.0.0.1/v1", api_key="k", timeout=0, max_retries=0)
    with pytest.raises(ValueError):
        UpstreamClient("http://127.0.0.1/v1", api_key="k", timeout=1, max_retries=-1)
    with pytest.raises(ValueError):
        UpstreamClient("http://127.0.0.1/v1", api_key="k\r\nX-Evil: 1", timeout=1, max_retries=0)
    with pytest.raises(ValueError):
        UpstreamClient(
            "http://127.0.0.1/v1", api_key="k", timeout=1, max_retries=0, user_agent="a\nX-Evil: 1"
        )
