"""A bearer token authenticates only when it *is* a configured key, and only as its owner.

Driven through :class:`ApiKeyMiddleware` in front of a tiny ASGI app that echoes who it
was told the caller is; the proxy-level 401/403 matrix is in ``test_auth.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from dpllm.config import ApiKey, hash_api_key
from dpllm.server.auth import ApiKeyMiddleware

ALICE, BOB = "key-alice-0123456789", "key-bob-0123456789"
KEYS = [
    ApiKey(hash_api_key(ALICE), "alice", ("alice-pool",)),
    ApiKey(hash_api_key(BOB), "bob", ("bob-pool",), admin=True),
]


async def _who(scope: Any, receive: Any, send: Any) -> None:
    key = scope["state"]["api_key"]
    body = json.dumps({"analyst": key.analyst, "admin": key.admin}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def _call(authorization: bytes | None) -> tuple[int, dict[str, Any]]:
    app = ApiKeyMiddleware(_who, keys=KEYS)
    headers = [] if authorization is None else [(b"authorization", authorization)]
    scope = {"type": "http", "path": "/v1/chat/completions", "headers": headers}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return status, json.loads(body)


def test_each_key_is_its_own_analyst() -> None:
    assert _call(b"Bearer " + ALICE.encode()) == (200, {"analyst": "alice", "admin": False})
    assert _call(b"Bearer " + BOB.encode()) == (200, {"analyst": "bob", "admin": True})


STORED = hash_api_key(ALICE)
REFUSED = [
    pytest.param(STORED, id="the stored hash"),
    pytest.param(STORED.removeprefix("sha256:"), id="the hash's hex digits"),
    pytest.param(STORED[: len("sha256:") + 8], id="the logged fingerprint"),
    pytest.param(STORED[:-1], id="a hash prefix"),
    pytest.param(ALICE[:-1], id="a key prefix"),
    pytest.param(ALICE + "0", id="a longer key"),
    pytest.param(ALICE.upper(), id="another case"),
    pytest.param(" " + ALICE, id="a leading space"),
    pytest.param(ALICE + " ", id="a trailing space"),
    pytest.param(ALICE + "\t", id="a trailing tab"),
    pytest.param(ALICE[:5] + " " + ALICE[5:], id="a space inside"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("token", REFUSED)
def test_anything_but_the_key_itself_is_refused(token: str) -> None:
    status, body = _call(b"Bearer " + token.encode())
    assert status == 401, body
    assert body["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize(
    "header",
    [ALICE.encode(), b"Basic " + ALICE.encode(), b"Token " + ALICE.encode(), b"Bearer"],
)
def test_only_the_bearer_scheme(header: bytes) -> None:
    assert _call(header)[0] == 401


def test_no_header_is_401() -> None:
    assert _call(None)[0] == 401


def _raw(scope: dict[str, Any], app: Any = None) -> tuple[list[dict[str, Any]], list[Any]]:
    """Run the middleware on ``scope``; return what it sent and what reached the app."""
    seen: list[Any] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        seen.append((scope, await receive()))
        await send({"type": "http.response.start", "status": 204, "headers": []})

    middleware = ApiKeyMiddleware(app or inner, keys=KEYS)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"hello", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(middleware(scope, receive, send))
    return sent, seen


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ([], "missing API key: send 'Authorization: Bearer <key>'"),
        ([(b"authorization", b"Bearer nope")], "invalid API key"),
    ],
)
def test_a_refusal_is_a_complete_openai_shaped_401(
    headers: list[tuple[bytes, bytes]], message: str
) -> None:
    sent, seen = _raw({"type": "http", "path": "/v1/models", "headers": headers})
    assert seen == []  # the app never runs
    start, body = sent
    assert start["type"] == "http.response.start" and start["status"] == 401
    head = dict(start["headers"])
    assert head[b"content-type"] == b"application/json"
    assert head[b"www-authenticate"] == b"Bearer"
    assert int(head[b"content-length"]) == len(body["body"])
    assert body["type"] == "http.response.body"
    assert json.loads(body["body"]) == {
        "error": {
            "message": message,
            "type": "authentication_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }


@pytest.mark.parametrize("path", ["/healthz", "/openapi.json", "/docs"])
def test_public_paths_pass_untouched_without_a_key(path: str) -> None:
    scope = {"type": "http", "path": path, "headers": []}
    sent, seen = _raw(scope)
    assert [s["status"] for s in sent] == [204]
    assert seen[0][0] is scope and seen[0][1]["body"] == b"hello"
    assert "api_key" not in scope.get("state", {})


def test_a_private_path_is_not_public_whatever_the_scope_type_check() -> None:
    # Only non-HTTP scopes (lifespan, websocket) skip the check, never a private HTTP path.
    sent, seen = _raw({"type": "http", "path": "/v1/stats/x", "headers": []})
    assert seen == [] and sent[0]["status"] == 401


def test_non_http_scopes_pass_through() -> None:
    scope = {"type": "lifespan", "path": "/v1/anything"}
    sent, seen = _raw(scope)
    assert seen[0][0] is scope


def test_an_authenticated_request_reaches_the_app_with_its_body() -> None:
    scope = {
        "type": "http",
        "path": "/v1/models",
        "headers": [(b"authorization", b"Bearer " + ALICE.encode())],
    }
    sent, seen = _raw(scope)
    ((reached, message),) = seen
    assert reached is scope and message["body"] == b"hello"
    assert reached["state"]["api_key"].analyst == "alice"


def test_the_fingerprint_is_the_hash_prefix_only() -> None:
    from dpllm.server.auth import fingerprint

    stored = hash_api_key(ALICE)
    assert fingerprint(stored) == stored[: len("sha256:") + 8]
    assert len(fingerprint(stored)) == 15 and ALICE not in fingerprint(stored)
