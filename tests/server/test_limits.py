"""Bounded work per request: ``[server.limits]`` answered 413/431/400 in OpenAI's error
shape, before authentication, redaction or the upstream; nothing past a limit is read."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dpllm.config import ServerLimits, Settings
from dpllm.errors import ConfigError
from dpllm.redact import Redactor
from dpllm.testing import FakeOpenAIServer
from tests.server.conftest import LiveServer, Proxy, make_settings

LIMITS = """
[server.limits]
max_header_bytes = 4096
max_body_bytes = 65536
max_messages = 8
max_content_parts = 6
max_text_chars = 2000
max_n = 2
max_depth = 8
protect_workers = 2
"""


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, redactor: Redactor) -> Iterator[Proxy]:
    from dpllm.server import create_app

    root = tmp_path_factory.mktemp("limits")
    with FakeOpenAIServer() as upstream:
        settings = make_settings(root, upstream.base_url, timeout=5.0, extra=LIMITS)
        app = create_app(settings, redactor=redactor)
        with LiveServer(app, settings.server_limits) as live:
            yield Proxy(live.url, upstream, settings, root / "ledger.db")


def chat(proxy: Proxy, body: Any, *, who: str | None = "alice") -> httpx.Response:
    headers = proxy.headers(who) if who else {}
    return httpx.post(
        proxy.base_url + "/chat/completions", json=body, headers=headers, timeout=30.0
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assert_refused(r: httpx.Response, status: int, words: str) -> None:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert words in error["message"]
    assert r.headers["x-should-retry"] == "false"


# -- configuration --------------------------------------------------------------------


def test_limits_are_read_from_the_config(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "http://127.0.0.1:9/v1", extra=LIMITS)
    assert settings.server_limits == ServerLimits(
        max_header_bytes=4096,
        max_body_bytes=65536,
        max_messages=8,
        max_content_parts=6,
        max_text_chars=2000,
        max_n=2,
        max_depth=8,
        protect_workers=2,
    )
    assert Settings().server_limits == ServerLimits()


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("[server.limits]\nmax_messages = 0\n", "max_messages"),
        ("[server.limits]\nmax_body = 10\n", "unknown setting"),
        ('[server.limits]\nmax_n = "8"\n', "max_n"),
    ],
)
def test_bad_limits_are_config_errors(tmp_path: Path, extra: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        make_settings(tmp_path, "http://127.0.0.1:9/v1", extra=extra)


# -- headers: refused by the HTTP server, before the key is checked -----------------------


def _raw_exchange(port: int, payload: bytes) -> bytes:
    """Send ``payload`` (as far as the server reads it); everything it answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection before the end: what is tested
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    return b"".join(chunks)


@pytest.mark.parametrize("size", [5_000, 8_000_000])
def test_a_header_bomb_is_refused_431_before_authentication(limited: Proxy, size: int) -> None:
    port = int(limited.url.rsplit(":", 1)[1])
    head = b"GET /v1/budget HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b"a" * size
    answer = _raw_exchange(port, head + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "headers_too_large"
    assert b"www-authenticate" not in answer.lower()  # no key was looked at


def test_the_header_limit_also_holds_in_asgi(tmp_path: Path, redactor: Redactor) -> None:
    """The same limit outside uvicorn's protocol (another ASGI server, the test client)."""
    from fastapi.testclient import TestClient

    from dpllm.server import create_app

    settings = make_settings(tmp_path, "http://127.0.0.1:9/v1", extra=LIMITS)
    with TestClient(create_app(settings, redactor=redactor)) as client:
        r = client.get("/v1/budget", headers={"X-Padding": "p" * 5000})
        assert_refused(r, 431, "max_header_bytes")
        assert client.get("/healthz", headers={"X-Padding": "p" * 100}).status_code == 200


def test_headers_under_the_limit_pass(limited: Proxy) -> None:
    r = httpx.get(
        limited.url + "/v1/budget",
        headers={**limited.headers("alice"), "X-Padding": "p" * 3000},
        timeout=30,
    )
    assert r.status_code == 200, r.text


# -- bodies ---------------------------------------------------------------------------------


def test_an_announced_body_over_the_limit_is_refused_unread(limited: Proxy) -> None:
    calls = len(limited.upstream.completion_requests)
    r = chat(limited, {"messages": [user("x" * 70_000)]}, who=None)  # no key either
    assert_refused(r, 413, "max_body_bytes")
    assert len(limited.upstream.completion_requests) == calls


def test_a_chunked_body_over_the_limit_is_refused(limited: Proxy) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(100):
            yield b"y" * 1000
        yield b'"}]}'

    r = httpx.post(
        limited.base_url + "/chat/completions",
        content=chunks(),
        headers=limited.headers("alice"),
        timeout=30,
    )
    assert_refused(r, 413, "max_body_bytes")


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"messages": [user("hi")] * 9}, 400, "max_messages"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}] * 7}]},
            400,
            "max_content_parts",
        ),
        ({"messages": [user("z" * 1500), user("z" * 600)]}, 413, "max_text_chars"),
        ({"messages": [user("hi")], "n": 3}, 400, "max_n"),
        ({"messages": [user("hi")], "n": True}, 400, "max_n"),
        ({"messages": [user("hi")], "metadata": {"a": [[[[[[[1]]]]]]]}}, 400, "max_depth"),
    ],
    ids=["messages", "parts", "text", "n", "n-bool", "depth"],
)
def test_a_chat_over_a_limit_is_refused_before_the_upstream(
    limited: Proxy, body: dict[str, Any], status: int, words: str
) -> None:
    calls = len(limited.upstream.completion_requests)
    assert_refused(chat(limited, body), status, words)
    assert len(limited.upstream.completion_requests) == calls


@pytest.mark.parametrize("where", ["model", "content", "key"])
def test_a_lone_surrogate_is_a_400_before_the_upstream(limited: Proxy, where: str) -> None:
    raw = {
        "model": '{"model": "fake\\ud800", "messages": [{"role": "user", "content": "hi"}]}',
        "content": '{"messages": [{"role": "user", "content": "hi \\udc00 there"}]}',
        "key": '{"messages": [{"role": "user", "content": "hi"}], "x\\ud83d": 1}',
    }[where]
    calls = len(limited.upstream.completion_requests)
    r = httpx.post(
        limited.base_url + "/chat/completions",
        content=raw.encode(),
        headers={**limited.headers("alice"), "Content-Type": "application/json"},
        timeout=30,
    )
    assert_refused(r, 400, "surrogate")
    assert len(limited.upstream.completion_requests) == calls


@pytest.mark.parametrize(
    "raw",
    [
        # UTF-8-encoded surrogates (json.loads decodes bytes with "surrogatepass")
        b'{"model": "fake-\xed\xa0\x80", "messages": [{"role": "user", "content": "hi"}]}',
        b'{"messages": [{"role": "user", "content": "hi \xed\xb0\x80"}]}',
        # UTF-16 with a lone surrogate (no escape, no UTF-8 byte pattern to see)
        '{"messages": [{"role": "user", "content": "hi \ud800"}], "stream": false}'.encode(
            "utf-16-le", "surrogatepass"
        ),
    ],
    ids=["utf8-model", "utf8-content", "utf16-content"],
)
def test_an_unescaped_lone_surrogate_is_a_400_before_the_upstream(
    limited: Proxy, raw: bytes
) -> None:
    calls = len(limited.upstream.completion_requests)
    r = httpx.post(
        limited.base_url + "/chat/completions",
        content=raw,
        headers={**limited.headers("alice"), "Content-Type": "application/json"},
        timeout=30,
    )
    assert_refused(r, 400, "surrogate")
    assert len(limited.upstream.completion_requests) == calls


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1E+999"])
def test_a_number_out_of_range_anywhere_is_a_400_before_the_upstream(
    limited: Proxy, number: str
) -> None:
    calls = len(limited.upstream.completion_requests)
    raw = '{"messages": [{"role": "user", "content": "hi"}], "metadata": {"scores": [0.5, N]}}'
    raw = raw.replace("N", number)
    r = httpx.post(
        limited.base_url + "/chat/completions",
        content=raw.encode(),
        headers={**limited.headers("alice"), "Content-Type": "application/json"},
        timeout=30,
    )
    assert_refused(r, 400, "out of range")
    assert len(limited.upstream.completion_requests) == calls


def test_a_surrogate_pair_is_text(limited: Proxy) -> None:
    limited.upstream.enqueue("Fine.")
    raw = '{"messages": [{"role": "user", "content": "smile \\ud83d\\ude00"}]}'
    r = httpx.post(
        limited.base_url + "/chat/completions",
        content=raw.encode(),
        headers={**limited.headers("alice"), "Content-Type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    assert (
        limited.upstream.completion_requests[-1]
        .body["messages"][0]["content"]
        .endswith("\U0001f600")
    )


def test_within_the_limits_is_served(limited: Proxy) -> None:
    limited.upstream.enqueue("Fine.")
    body = {"messages": [user("hi")] * 8, "n": 2, "dpllm": None}
    r = chat(limited, body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "Fine."


# -- the upstream's answer ------------------------------------------------------------------


def test_an_answer_over_max_text_chars_is_a_502_unredacted(limited: Proxy) -> None:
    limited.upstream.enqueue("word " * 1000)  # 5,000 characters > 2,000
    r = chat(limited, {"messages": [user("hi")]})
    assert r.status_code == 502, r.text
    assert "max_text_chars" in r.json()["error"]["message"]
    assert "word" not in r.text
    assert r.headers["x-should-retry"] == "false"


def test_an_answer_with_too_many_choices_is_a_502(limited: Proxy) -> None:
    choice = {"index": 0, "message": {"role": "assistant", "content": "hi"}}
    answer = {"id": "x", "object": "chat.completion", "model": "m", "choices": [choice] * 5}
    limited.upstream.enqueue(raw_body=json.dumps(answer).encode())
    r = chat(limited, {"messages": [user("hi")]})
    assert r.status_code == 502, r.text
    assert "max_n" in r.json()["error"]["message"]


# -- values out of range -----------------------------------------------------------------


@pytest.mark.parametrize("week", ["9999-W52", "0001-W01"])
def test_a_week_at_the_calendar_edge_is_a_400_or_served(limited: Proxy, week: str) -> None:
    r = httpx.get(
        limited.base_url + "/stats/feedback_count",
        params={"week": week, "pool": "weekly"},
        headers=limited.headers("alice"),
        timeout=30,
    )
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        assert r.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b'{"messages": [{"role": "user", "content": "caf\xe9"}]}', 400),  # Latin-1, not UTF-8
        (b'\xef\xbb\xbf{"messages": [{"role": "user", "content": "hi"}]}', 200),  # UTF-8 BOM
        ('{"messages": [{"role": "user", "content": "hi"}]}'.encode("utf-16"), 200),
        (b'{"messages": [{"role": "user", "content": "a\x00b"}]}', 400),  # raw control char
        (b'{"messages": [{"role": "user", "content": "a\\u0000b"}]}', 200),  # escaped: text
    ],
    ids=["latin-1", "bom", "utf-16", "raw-nul", "escaped-nul"],
)
def test_odd_encodings_are_a_400_or_served(limited: Proxy, raw: bytes, status: int) -> None:
    if status == 200:
        limited.upstream.enqueue("Fine.")
    r = httpx.post(
        limited.base_url + "/chat/completions",
        content=raw,
        headers={**limited.headers("alice"), "Content-Type": "application/json"},
        timeout=30,
    )
    assert r.status_code == status, r.text
    if status == 400:
        assert r.json()["error"]["type"] == "invalid_request_error"
