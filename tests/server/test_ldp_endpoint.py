"""``[ldp.metrics]`` turns on ``POST /v1/ldp/reports`` in ``dpllm serve``; the ledger records each user's local ε."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

from dpllm.config import Settings, hash_api_key
from dpllm.ldp.mechanisms import KRandomizedResponse, LDPReport
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost

KEY = "key-ldp-device-0123"


def _settings(tmp_path: Path) -> Settings:
    text = f"""
[ledger]
url = "ledger.db"

[redaction]
enabled = false

[ldp]
store = "ldp.db"

[ldp.metrics.course_rating]
mechanism = "krr"
epsilon = 1.0

[[server.keys]]
hash = "{hash_api_key(KEY)}"
analyst = "devices"
pools = []
"""
    return Settings.parse(text, base_dir=str(tmp_path))


def test_reports_are_accepted_once_and_charged_in_the_ledger(tmp_path: Path) -> None:
    from dpllm.server import create_app

    app = create_app(_settings(tmp_path))
    krr = KRandomizedResponse(epsilon=1.0)
    rng = np.random.default_rng(3)
    headers = {"Authorization": f"Bearer {KEY}"}
    with TestClient(app) as client:
        assert client.post("/v1/ldp/reports", content=b"{}").status_code == 401
        for i in range(300):
            report = LDPReport(
                metric="course_rating",
                window="2026-W47",
                user=f"device-{i}",
                mechanism="krr",
                epsilon=1.0,
                payload=krr.randomise(int(rng.integers(1, 6)), rng=rng),
            )
            r = client.post("/v1/ldp/reports", content=report.to_json(), headers=headers)
            assert r.status_code == 201, r.text
        again = client.post("/v1/ldp/reports", content=report.to_json(), headers=headers)
        assert again.status_code == 409
        est = client.get("/v1/ldp/estimates/course_rating/2026-W47", headers=headers).json()
        assert est["n"] == 300 and len(est["frequencies"]) == 5
        assert client.get("/healthz").json()["ledger"] == "ok"
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    assert ledger.local_spent("device-0", "2026-W47") == Cost.pure(1.0)
    assert ledger.local_spent("device-0", "2026-W48") == Cost.pure(0)
