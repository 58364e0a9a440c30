"""Statistics, budget and approvals over a real SQLite ledger and demo data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from dpllm.chat.wrapper import NoRedaction
from dpllm.errors import LedgerUnavailable
from dpllm.ledger.sqlite import SQLiteLedger
from tests.server.conftest import WEEK, Proxy, make_settings


def _get(proxy: Proxy, path: str, who: str = "alice", **params: str) -> httpx.Response:
    return httpx.get(proxy.url + path, params=params, headers=proxy.headers(who), timeout=30)


def _spent(proxy: Proxy, pool: str, week: str = WEEK) -> int:
    return SQLiteLedger(proxy.ledger_path, create=False).balance(pool, week).spent


def test_release_then_cached_for_free(proxy: Proxy) -> None:
    week = "2026-W44"  # a week no other test of this module (one server) releases
    first = _get(proxy, "/v1/stats/feedback_count", week=week)
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["cached"] is False and body["pool"] == "weekly"
    assert body["release"]["window"] == week and body["charged"]["measure"] == "pure"
    spent = _spent(proxy, "weekly", week)
    assert spent == 200_000
    again = _get(proxy, "/v1/stats/feedback_count", week=week)
    assert again.json()["cached"] is True and again.json()["charged"] is None
    assert again.json()["release"] == body["release"]
    assert _spent(proxy, "weekly", week) == spent


def test_exhausted_budget_429_spends_nothing(proxy: Proxy) -> None:
    assert _get(proxy, "/v1/budget", week=WEEK).status_code == 200  # the ledger is open
    ledger = SQLiteLedger(proxy.ledger_path, create=False)
    before = ledger.balance("tiny", WEEK)
    events = len(ledger.history())
    r = _get(proxy, "/v1/stats/mean_rating", week=WEEK, pool="tiny")
    assert r.status_code == 429
    err = r.json()["error"]
    assert err["type"] == "budget_exceeded" and err["charged"] == 0 and err["pool"] == "tiny"
    assert "Nothing was spent" in err["message"]
    after = ledger.balance("tiny", WEEK)
    assert (after.spent, after.lifetime_spent) == (before.spent, before.lifetime_spent)
    new = ledger.history()[events:]
    assert [e.event for e in new] == ["refuse"]


def test_queue_202_then_approve(proxy: Proxy) -> None:
    r = _get(proxy, "/v1/stats/active_users", week=WEEK, pool="queued")
    assert r.status_code == 202
    ticket = r.json()["ticket"]
    pending = _get(proxy, "/v1/admin/pending", who="admin").json()["tickets"]
    assert ticket in [t["ticket"] for t in pending]
    a = httpx.post(
        f"{proxy.url}/v1/admin/tickets/{ticket}/approve",
        json={"from_pool": "reserve"},
        headers=proxy.headers("admin"),
    )
    assert a.status_code == 200 and a.json()["status"] == "approved"
    again = httpx.post(
        f"{proxy.url}/v1/admin/tickets/{ticket}/approve", headers=proxy.headers("admin")
    )
    assert again.status_code == 409
    done = _get(proxy, "/v1/stats/active_users", week=WEEK, pool="queued")
    assert done.status_code == 200 and done.json()["release"]["name"] == "active_users"


def test_queue_then_deny_is_429(proxy: Proxy) -> None:
    r = _get(proxy, "/v1/stats/mean_rating", week="2026-W46", pool="queued")
    assert r.status_code == 202
    ticket = r.json()["ticket"]
    d = httpx.post(
        f"{proxy.url}/v1/admin/tickets/{ticket}/deny",
        json={"reason": "not this week"},
        headers=proxy.headers("admin"),
    )
    assert d.status_code == 200 and d.json()["status"] == "denied"
    r = _get(proxy, "/v1/stats/mean_rating", week="2026-W46", pool="queued")
    assert r.status_code == 429


def test_bad_requests(proxy: Proxy) -> None:
    assert _get(proxy, "/v1/stats/raw_rows", week=WEEK).status_code == 404
    assert _get(proxy, "/v1/stats/feedback_count", week="2026-47").status_code == 400
    assert _get(proxy, "/v1/stats/feedback_count", week="2026-W99").status_code == 400


def test_budget_shows_own_pools(proxy: Proxy) -> None:
    _get(proxy, "/v1/stats/feedback_count", week=WEEK)
    body = _get(proxy, "/v1/budget", week=WEEK).json()
    assert body["analyst"] == "alice"
    pools = {p["pool"]: p for p in body["pools"]}
    assert set(pools) == {"weekly", "tiny", "queued"}
    assert pools["weekly"]["spent"] == pytest.approx(0.2)
    assert pools["weekly"]["remaining"] == pytest.approx(0.8)
    assert all(e["pool"] in pools for e in body["history"])
    bob = _get(proxy, "/v1/budget", who="bob", week=WEEK).json()
    assert [p["pool"] for p in bob["pools"]] == ["team"]
    assert {e["event"] for e in bob["history"]} <= {"pool"}  # only its creation


@pytest.fixture
def down(tmp_path: Path) -> Iterator[TestClient]:
    from dpllm.server import create_app

    def unavailable(url: str) -> SQLiteLedger:
        raise LedgerUnavailable("the database is down")

    settings = make_settings(tmp_path, "http://127.0.0.1:9/v1")
    app = create_app(settings, redactor=NoRedaction(), ledger_opener=unavailable)
    with TestClient(app) as client:
        yield client


def test_ledger_unavailable_is_503(down: TestClient) -> None:
    from tests.server.conftest import KEYS

    headers = {"Authorization": f"Bearer {KEYS['alice']}"}
    r = down.get("/v1/stats/feedback_count", params={"week": WEEK}, headers=headers)
    assert r.status_code == 503 and r.json()["error"]["type"] == "ledger_unavailable"
    assert down.get("/v1/budget", headers=headers).status_code == 503
    assert down.get("/healthz").status_code == 503
