"""A local-DP report for a week that has not begun is refused, its ε recorded nowhere."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from dpllm.errors import WindowNotReady
from dpllm.ldp.ingest import LDPClient, LDPIngest, LDPStore, ldp_router
from dpllm.ldp.mechanisms import KRandomizedResponse, LDPReport
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost

KRR = KRandomizedResponse(epsilon=1.0)
TODAY = dt.date(2026, 12, 1)  # a Tuesday of 2026-W49
SUNDAY = dt.date(2026, 12, 6)  # the last day of 2026-W49


def _report(window: str, user: str = "u:1") -> LDPReport:
    payload = KRR.randomise(3, rng=np.random.default_rng(0))
    return LDPReport(
        metric="rating", window=window, user=user, mechanism="krr", epsilon=1.0, payload=payload
    )


def _ingest(tmp_path: Path, today: dt.date) -> tuple[LDPIngest, SQLiteLedger]:
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    store = LDPStore(tmp_path / "ldp.db", ledger=ledger)
    return LDPIngest(store, {"rating": KRR}, today=lambda: today), ledger


@pytest.mark.parametrize("window", ["2099-W01", "2026-W51", "2026-W50"])
def test_ingest_refuses_weeks_that_have_not_begun(tmp_path: Path, window: str) -> None:
    ingest, ledger = _ingest(tmp_path, TODAY)
    with pytest.raises(WindowNotReady, match="has not begun"):
        ingest.submit(_report(window))
    assert ledger.local_spent("u:1", window) == Cost.pure(0)
    assert ingest.store.count("rating", window) == 0


def test_current_and_past_weeks_and_a_day_of_clock_skew_are_accepted(tmp_path: Path) -> None:
    ingest, ledger = _ingest(tmp_path, TODAY)
    ingest.submit(_report("2026-W49"))  # the current week: collection happens during it
    ingest.submit(_report("2026-W47"))
    assert ledger.local_spent("u:1", "2026-W49") == Cost.pure(1.0)
    # On the week's last day, a device a day ahead may already report the next week.
    late, _ = _ingest(tmp_path / "late", SUNDAY)
    late.submit(_report("2026-W50"))


def test_http_endpoint_answers_422_for_a_future_week(tmp_path: Path) -> None:
    ingest, ledger = _ingest(tmp_path, TODAY)
    app = FastAPI()
    app.include_router(ldp_router(ingest))
    with TestClient(app) as http:
        r = http.post("/v1/ldp/reports", content=_report("2099-W01").to_json())
        assert r.status_code == 422, r.text
        assert r.json()["error"] == "window_not_ready"
        assert "2099-W01" in r.json()["detail"]
    assert ledger.local_spent("u:1", "2099-W01") == Cost.pure(0)


def test_client_refuses_a_future_week_without_sending(tmp_path: Path) -> None:
    sent: list[bytes] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(201)

    http = httpx.Client(base_url="http://test", transport=httpx.MockTransport(record))
    client = LDPClient(
        "http://test", metric="rating", randomizer=KRR, client=http, today=lambda: TODAY
    )
    with pytest.raises(WindowNotReady):
        client.report(user="u:1", value=3, window="2099-W01")
    assert sent == []
    client.report(user="u:1", value=3, window="2026-W49")
    assert len(sent) == 1


def test_dpllm_serve_uses_the_server_clock(tmp_path: Path) -> None:
    from dpllm.config import Settings, hash_api_key
    from dpllm.server import create_app

    key = "key-ldp-device-future"
    settings = Settings.parse(
        '[ledger]\nurl = "ledger.db"\n[redaction]\nenabled = false\n[ldp]\nstore = "ldp.db"\n'
        '[ldp.metrics.rating]\nmechanism = "krr"\nepsilon = 1.0\n'
        f'[[server.keys]]\nhash = "{hash_api_key(key)}"\nanalyst = "devices"\npools = []\n',
        base_dir=str(tmp_path),
    )
    app = create_app(settings, today=lambda: TODAY)
    auth = {"Authorization": f"Bearer {key}"}
    with TestClient(app) as http:
        future = http.post("/v1/ldp/reports", content=_report("2026-W51").to_json(), headers=auth)
        current = http.post("/v1/ldp/reports", content=_report("2026-W49").to_json(), headers=auth)
    assert (future.status_code, current.status_code) == (422, 201), (future.text, current.text)
