"""LDP ingest: one report per user per metric per window, ε recorded, HTTP API, client."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from dpllm.errors import DuplicateReport, InvalidReport
from dpllm.ldp.ingest import LDPClient, LDPIngest, LDPStore, ldp_router, pseudonym
from dpllm.ldp.mechanisms import KRandomizedResponse, LDPReport, OptimisedUnaryEncoding
from dpllm.ledger.sqlite import SQLiteLedger

WEEK = "2026-W47"
KRR = KRandomizedResponse(epsilon=1.0)
OUE = OptimisedUnaryEncoding(epsilon=0.5, domain=tuple(range(1, 21)))


@pytest.fixture(params=["table", "ledger"])
def ingest(request: pytest.FixtureRequest, tmp_path: Path) -> LDPIngest:
    """Reports in the store's own table, or with their ε recorded through the ledger."""
    ledger = SQLiteLedger(tmp_path / "ledger.db") if request.param == "ledger" else None
    store = LDPStore(tmp_path / "ldp.db", ledger=ledger)
    return LDPIngest(store, {"rating": KRR, "minutes": OUE})


def _report(user: str, value: int = 4, metric: str = "rating", window: str = WEEK) -> LDPReport:
    r = KRR if metric == "rating" else OUE
    rng = np.random.default_rng(abs(hash(user)) % 2**32)
    return LDPReport(
        metric=metric,
        window=window,
        user=user,
        mechanism=r.name,
        epsilon=r.epsilon,
        payload=r.randomise(value, rng=rng),
    )


def test_one_report_per_user_metric_window(ingest: LDPIngest) -> None:
    ingest.submit(_report("u:1"))
    with pytest.raises(DuplicateReport):
        ingest.submit(_report("u:1", value=2))
    ingest.submit(_report("u:1", window="2026-W48"))  # another window
    ingest.submit(_report("u:1", metric="minutes", value=7))  # another metric
    assert ingest.store.count("rating", WEEK) == 1
    # the user's local ε in the window: 1.0 (rating) + 0.5 (minutes)
    assert ingest.store.user_epsilon("u:1", WEEK) == pytest.approx(1.5)
    assert ingest.store.user_epsilon("u:1", "2026-W48") == pytest.approx(1.0)


def test_limit_holds_under_concurrency(ingest: LDPIngest) -> None:
    errors: list[Exception] = []

    def send() -> None:
        try:
            ingest.submit(_report("u:race"))
        except DuplicateReport as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ingest.store.count("rating", WEEK) == 1
    assert len(errors) == 7


@pytest.mark.parametrize(
    "bad",
    [
        {"metric": "unknown"},
        {"mechanism": "oue"},
        {"epsilon": 2.0},
        {"payload": (9,)},
    ],
)
def test_mismatched_reports_are_refused(ingest: LDPIngest, bad: dict[str, object]) -> None:
    data = {**_report("u:2").to_dict(), **bad}
    with pytest.raises(InvalidReport):
        ingest.submit(LDPReport.from_dict(data))
    assert ingest.store.count("rating", WEEK) == 0


def test_estimate_from_store_is_unbiased(ingest: LDPIngest) -> None:
    rng = np.random.default_rng(4)
    truth = rng.choice([1, 2, 3, 4, 5], size=300, p=[0.1, 0.1, 0.2, 0.3, 0.3])
    for i, v in enumerate(truth):
        payload = KRR.randomise(int(v), rng=rng)
        ingest.submit(
            LDPReport(
                metric="rating",
                window=WEEK,
                user=f"u:{i}",
                mechanism="krr",
                epsilon=1.0,
                payload=payload,
            )
        )
    est = ingest.estimate("rating", WEEK, confidence=1 - 1e-6)
    assert est.n == 300
    assert est.mean_interval[0] <= truth.mean() <= est.mean_interval[1]


def test_http_api_and_client(tmp_path: Path) -> None:
    ingest = LDPIngest(LDPStore(tmp_path / "ldp.db"), {"rating": KRR})
    app = FastAPI()
    app.include_router(ldp_router(ingest))
    with TestClient(app) as http:
        client = LDPClient("http://test", metric="rating", randomizer=KRR, client=http)
        users = [pseudonym(b"secret", f"student-{i}") for i in range(40)]
        for i, user in enumerate(users):
            sent = client.report(user=user, value=1 + i % 5, window=WEEK)
            assert sent.payload[0] in KRR.domain
        with pytest.raises(DuplicateReport):
            client.report(user=users[0], value=3, window=WEEK)
        bad = http.post("/v1/ldp/reports", content=b'{"metric": "rating"}')
        assert bad.status_code == 422 and bad.json()["error"] == "invalid_report"
        est = http.get(f"/v1/ldp/estimates/rating/{WEEK}")
        assert est.status_code == 200 and est.json()["n"] == 40
        assert http.get("/v1/ldp/estimates/nope/2026-W47").status_code == 422
    assert ingest.store.count("rating", WEEK) == 40


def test_pseudonym_is_stable_and_opaque() -> None:
    a = pseudonym(b"k", "alice@example.com")
    assert a == pseudonym(b"k", "alice@example.com") != pseudonym(b"k2", "alice@example.com")
    assert "alice" not in a
    LDPReport(metric="m", window=WEEK, user=a, mechanism="krr", epsilon=1.0, payload=(1,))
    with pytest.raises(InvalidReport):
        pseudonym(b"", "x")


def test_module_router_uses_app_state(tmp_path: Path) -> None:
    from dpllm.ldp import ingest as ldp_api

    app = FastAPI()
    app.include_router(ldp_api.router)
    with TestClient(app) as http:
        body = _report("u:9").to_json()
        assert http.post("/v1/ldp/reports", content=body).status_code == 503
        app.state.ldp_ingest = LDPIngest(LDPStore(tmp_path / "s.db"), {"rating": KRR})
        assert http.post("/v1/ldp/reports", content=body).status_code == 201
        assert http.post("/v1/ldp/reports", content=body).status_code == 409


def test_reports_through_the_ledger_are_audited_without_the_user(tmp_path: Path) -> None:
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    ingest = LDPIngest(LDPStore(tmp_path / "ldp.db", ledger=ledger), {"rating": KRR})
    user = pseudonym(b"secret", "student-7")
    ingest.submit(_report(user))
    with pytest.raises(DuplicateReport):
        ingest.submit(_report(user, value=1))
    assert ingest.store.count("rating", WEEK) == 1
    assert ledger.local_spent(user, WEEK).micro == 1_000_000
    [event] = [e for e in ledger.history() if e.event == "ldp_report"]
    assert (event.analyst, event.window, event.micro) == ("ldp", WEEK, 1_000_000)
    assert user not in repr(ledger.history()) and user not in repr(ledger._query(
        "SELECT * FROM local_reports"))  # fmt: skip


def test_sixty_retries_send_the_same_report() -> None:
    """A retrying app re-sends one randomised report; a majority vote learns nothing new."""
    import httpx

    bodies: list[bytes] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        if len(bodies) >= 60:
            return httpx.Response(201)
        if len(bodies) % 3 == 0:
            raise httpx.ConnectTimeout("lost", request=request)
        return httpx.Response(503)

    http = httpx.Client(base_url="http://test", transport=httpx.MockTransport(flaky))
    client = LDPClient("http://test", metric="rating", randomizer=KRR, client=http)
    sent = []
    for _ in range(60):
        try:
            sent.append(client.report(user="u-1", value=4, window=WEEK))
        except (InvalidReport, Exception) as exc:  # noqa: BLE001 - the app retries on anything
            assert "503" in str(exc) or "cannot reach" in str(exc)
    assert len(bodies) == 60 and len(set(bodies)) == 1
    assert sent == [LDPReport.from_json(bodies[0])]
    # A different value for the same key is refused locally, nothing sent.
    with pytest.raises(DuplicateReport, match="nothing was sent"):
        client.report(user="u-1", value=2, window=WEEK)
    assert len(bodies) == 60
    # Another user, metric or week is another report.
    client.report(user="u-2", value=4, window=WEEK)
    assert len(bodies) == 61


def test_the_client_parses_the_week_strictly() -> None:
    from dpllm.errors import InvalidWindow

    client = LDPClient("http://test", metric="rating", randomizer=KRR)
    for bad in ("２０２６-W４７", "2026-W47\n", "2026-w47"):
        with pytest.raises(InvalidWindow):
            client.report(user="u", value=3, window=bad)
