"""Hostile reports and hostile servers: local DP answers with dpllm's errors, never a 500.

Found by posting what an attacker would to ``POST /v1/ldp/reports`` (integers of
thousands of digits, arrays nested 100 000 deep, names with a trailing newline)
and by pointing :class:`LDPClient` at a server that answers 5xx or non-JSON.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from dpllm.errors import InvalidReport, InvalidWindow, LedgerUnavailable
from dpllm.ldp.ingest import LDPClient, LDPIngest, LDPStore, ldp_router
from dpllm.ldp.mechanisms import KRandomizedResponse, LDPReport

WEEK = "2026-W47"
KRR = KRandomizedResponse(epsilon=1.0)
GOOD = {
    "metric": "rating",
    "window": WEEK,
    "user": "u1",
    "mechanism": "krr",
    "epsilon": 1.0,
    "payload": [3],
}


@pytest.mark.parametrize(
    "body",
    [
        b'{"metric":"rating","window":"2026-W47","user":"u","mechanism":"krr",'
        b'"epsilon":1.0,"payload":[' + b"9" * 5000 + b"]}",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"epsilon": 1' + b"0" * 5000 + b"}",
    ],
    ids=["5000-digit int", "deep nesting", "5000-digit epsilon"],
)
def test_a_report_python_cannot_parse_is_an_invalid_report(body: bytes) -> None:
    with pytest.raises(InvalidReport):
        LDPReport.from_json(body)


def test_the_endpoint_answers_422_not_500(tmp_path: Path) -> None:
    ingest = LDPIngest(LDPStore(tmp_path / "ldp.db"), {"rating": KRR})
    app = FastAPI()
    app.include_router(ldp_router(ingest))
    with TestClient(app, raise_server_exceptions=False) as http:
        for body in (
            b'{"payload":[' + b"9" * 5000 + b"]}",
            b"[" * 100_000 + b"]" * 100_000,
        ):
            r = http.post("/v1/ldp/reports", content=body)
            assert r.status_code == 422, r.text
            assert r.json()["error"] == "invalid_report"
        # An estimate for a window that is not an ISO week says so (it said "0 reports").
        r = http.get("/v1/ldp/estimates/rating/2026-W99")
        assert r.status_code == 422 and "ISO week" in r.json()["detail"], r.text


@pytest.mark.parametrize(
    ("field", "value"),
    [("user", "u1\n"), ("metric", "rating\n"), ("user", "u1\n\n")],
)
def test_names_are_matched_whole(field: str, value: str) -> None:
    """``$`` matched before a trailing newline: ``"u1\\n"`` was a second pseudonym of u1."""
    with pytest.raises(InvalidReport):
        LDPReport.from_dict({**GOOD, field: value})


def test_estimate_refuses_a_malformed_window(tmp_path: Path) -> None:
    ingest = LDPIngest(LDPStore(tmp_path / "ldp.db"), {"rating": KRR})
    with pytest.raises(InvalidWindow):
        ingest.estimate("rating", "２０２６-W47")


def _client(handler: httpx.MockTransport) -> LDPClient:
    http = httpx.Client(base_url="http://ldp.test", transport=handler)
    return LDPClient("http://ldp.test", metric="rating", randomizer=KRR, client=http)


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_a_server_failure_is_retryable_and_resends_the_same_report(status: int) -> None:
    """A 5xx or 429 is the server's trouble, not a bad report: LedgerUnavailable, and
    the retry sends the kept report (it was InvalidReport "the server refused")."""
    bodies: list[bytes] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        if len(bodies) == 1:
            return httpx.Response(status, text="<html>busy</html>")
        return httpx.Response(201, json={"accepted": True})

    client = _client(httpx.MockTransport(flaky))
    with pytest.raises(LedgerUnavailable):
        client.report(user="u1", value=3, window=WEEK)
    client.report(user="u1", value=3, window=WEEK)
    assert bodies[0] == bodies[1]


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '"a string"'])
def test_a_duplicate_answer_that_is_not_json_is_still_a_duplicate(text: str) -> None:
    from dpllm.errors import DuplicateReport

    client = _client(httpx.MockTransport(lambda r: httpx.Response(409, text=text)))
    with pytest.raises(DuplicateReport):
        client.report(user="u1", value=3, window=WEEK)
