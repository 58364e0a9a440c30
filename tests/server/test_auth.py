"""The auth matrix: 401 without a (valid) key, 403 for others' pools and admin routes."""

from __future__ import annotations

import httpx
import pytest

from tests.server.conftest import KEYS, WEEK, Proxy

PROTECTED = [
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
    ("GET", f"/v1/stats/feedback_count?week={WEEK}"),
    ("GET", "/v1/budget"),
    ("GET", "/v1/admin/pending"),
    ("POST", "/v1/admin/tickets/abc/approve"),
    ("POST", "/v1/admin/tickets/abc/deny"),
]
BAD_HEADERS = [
    {},
    {"Authorization": "Bearer not-a-key"},
    {"Authorization": f"Basic {KEYS['alice']}"},
    {"Authorization": "Bearer"},
    {"Authorization": KEYS["alice"]},
]


@pytest.mark.parametrize("method,path", PROTECTED)
@pytest.mark.parametrize("headers", BAD_HEADERS)
def test_401_without_a_valid_key(
    proxy: Proxy, method: str, path: str, headers: dict[str, str]
) -> None:
    r = httpx.request(method, proxy.url + path, headers=headers, json={})
    assert r.status_code == 401
    assert r.json()["error"]["type"] == "authentication_error"
    assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("path", ["/healthz", "/openapi.json", "/docs"])
def test_public_paths_need_no_key(proxy: Proxy, path: str) -> None:
    assert httpx.get(proxy.url + path).status_code == 200


def test_pool_not_theirs_is_403(proxy: Proxy) -> None:
    r = httpx.get(
        f"{proxy.url}/v1/stats/feedback_count",
        params={"week": WEEK, "pool": "weekly"},
        headers=proxy.headers("bob"),
    )
    assert r.status_code == 403
    assert r.json()["error"]["type"] == "permission_error"
    message = r.json()["error"]["message"]
    assert "is not one of the pools of analyst 'bob'" in message and "''s" not in message


@pytest.mark.parametrize(
    "method,path",
    [
        ("GET", "/v1/admin/pending"),
        ("POST", "/v1/admin/tickets/abc/approve"),
        ("POST", "/v1/admin/tickets/abc/deny"),
    ],
)
def test_admin_routes(proxy: Proxy, method: str, path: str) -> None:
    r = httpx.request(method, proxy.url + path, headers=proxy.headers("alice"))
    assert r.status_code == 403
    r = httpx.request(method, proxy.url + path, headers=proxy.headers("admin"))
    assert r.status_code == (200 if method == "GET" else 404)  # no ticket "abc"


def test_request_id_echoed(proxy: Proxy) -> None:
    r = httpx.get(proxy.url + "/healthz", headers={"X-Request-ID": "req-123"})
    assert r.headers["x-request-id"] == "req-123"
    r = httpx.get(proxy.url + "/healthz", headers={"X-Request-ID": "bad id\twith junk"})
    assert r.headers["x-request-id"] != "bad id\twith junk"


def test_hash_key_cli() -> None:
    from typer.testing import CliRunner

    from dpllm.cli import app
    from dpllm.config import hash_api_key

    result = CliRunner().invoke(app, ["serve", "hash-key", "abc"])
    assert result.exit_code == 0
    assert result.output.strip() == hash_api_key("abc")
    result = CliRunner().invoke(app, ["serve", "hash-key", "--new"])
    key = result.output.split()[1]
    assert hash_api_key(key) in result.output
