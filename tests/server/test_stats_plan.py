"""One plan, one pool tree: ``dpllm weekly``, ``dpllm stats`` and ``/v1/stats`` charge a
statistic once per week; ``/v1/stats`` needs a complete week and never assumes one.

The app runs in-process with an injected ``today``; the CLI runs through Typer's
runner (it reads the clock itself, so the data weeks are long past).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dpllm.chat.wrapper import NoRedaction
from dpllm.cli import app as cli_app
from dpllm.config import Settings, hash_api_key
from dpllm.data.demo import generate_demo, write_demo
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.weekly.job import run_weekly
from dpllm.weekly.wiring import build_plan

WEEK = "2024-W10"
KEY = "key-alice-0123456789"

# Non-default bounds, policy, vocabulary and a zCDP plan: a /v1/stats that ignored
# them (the catalogue's defaults) would ask other questions under other query ids.
CONFIG = f"""
[data]
path = "demo.db"
dataset_id = "demo"
[bounds]
max_records_per_user = 3
max_topics_per_user = 2
out_of_range = "reject"
[topics]
pace = ["pace", "fast", "slow", "进度"]
exam = ["exam", "test", "考试"]
homework = ["homework", "assignment", "作业"]
[ledger]
url = "ledger.db"
[[pools]]
name = "global"
measure = "zcdp"
window_cap = 4.0
[[pools]]
name = "weekly"
measure = "zcdp"
parent = "global"
window_cap = 2.0
[plan]
pool = "weekly"
[plan.queries]
feedback_count = 0.1
active_users = 0.1
mean_rating = 0.2
rating_histogram = 0.2
topic_counts = 0.1
[templates]
lang = "en"
[redaction]
enabled = false
[[server.keys]]
hash = "{hash_api_key(KEY)}"
analyst = "alice"
pools = ["weekly"]
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_demo(generate_demo(users=60, weeks=2, seed=7, end_week=WEEK), tmp_path / "demo.db")
    (tmp_path / "dpllm.toml").write_text(CONFIG, encoding="utf-8")
    return tmp_path


def _client(settings: Settings, today: dt.date) -> TestClient:
    from dpllm.server import create_app

    app = create_app(settings, redactor=NoRedaction(), today=lambda: today)
    return TestClient(app, raise_server_exceptions=False)


HEADERS = {"Authorization": f"Bearer {KEY}"}


def _ledger(root: Path) -> SQLiteLedger:
    return SQLiteLedger(root / "ledger.db", create=False)


def test_weekly_then_stats_then_http_charge_once(root: Path) -> None:
    settings = Settings.load(root / "dpllm.toml")
    plan = build_plan(settings)
    total = sum(q.cost.micro for q in plan.values())

    weekly = CliRunner().invoke(cli_app, ["weekly", "-c", str(root / "dpllm.toml"), "--week", WEEK])
    assert weekly.exit_code == 0, weekly.output
    ledger = _ledger(root)
    assert ledger.balance("weekly", WEEK).spent == total

    stats = CliRunner().invoke(
        cli_app, ["stats", "-c", str(root / "dpllm.toml"), "--week", WEEK, "--json"]
    )
    assert stats.exit_code == 0, stats.output
    assert ledger.balance("weekly", WEEK).spent == total  # all served from the cache
    assert {p.name for p in ledger.pools()} == {"global", "weekly"}  # no pool on the side

    with _client(settings, dt.date(2024, 6, 3)) as client:
        for name in plan:
            r = client.get(f"/v1/stats/{name}", params={"week": WEEK}, headers=HEADERS)
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["cached"] is True and body["charged"] is None, name
    assert ledger.balance("weekly", WEEK).spent == total
    charges = [e for e in ledger.history() if e.event == "charge"]
    assert len(charges) == len(plan)
    # And the Python API asks the same questions: a rerun is free.
    again = run_weekly(settings, WEEK, today=dt.date(2024, 6, 3))
    assert again.fresh == () and ledger.balance("weekly", WEEK).spent == total


def test_http_needs_a_complete_week_and_never_assumes_one(root: Path) -> None:
    settings = Settings.load(root / "dpllm.toml")
    thursday = dt.date(2024, 3, 7)  # inside 2024-W10
    with _client(settings, thursday) as client:
        r = client.get("/v1/stats/feedback_count", headers=HEADERS)
        assert r.status_code == 400 and "week" in r.text and "required" in r.text.lower()
        r = client.get("/v1/stats/feedback_count", params={"week": WEEK}, headers=HEADERS)
        assert r.status_code == 400 and "not complete" in r.text
        r = client.get("/v1/stats/feedback_count", params={"week": "2024-W11"}, headers=HEADERS)
        assert r.status_code == 400 and "has not begun" in r.text
        for bad in ("9999-W52", "2024-W10\n", "２０２４-W１０", "2024-W54"):
            r = client.get("/v1/stats/feedback_count", params={"week": bad}, headers=HEADERS)
            assert r.status_code == 400, (bad, r.text)
        assert not (root / "ledger.db").exists() or _ledger(root).balance("weekly", WEEK).spent == 0
        r = client.get(
            "/v1/stats/feedback_count",
            params={"week": WEEK, "allow_incomplete": "true"},
            headers=HEADERS,
        )
        assert r.status_code == 200, r.text
        assert r.json()["release"]["complete"] is False
        assert any("not complete" in n for n in r.json()["release"]["notes"])


def test_cli_refuses_future_and_unfinished_weeks_with_exit_2(root: Path) -> None:
    config = str(root / "dpllm.toml")
    for args in (
        ["weekly", "-c", config, "--week", "2099-W01"],
        ["stats", "-c", config, "--week", "2099-W01"],
        ["stats", "-c", config, "--week", "2024-W10 "],
    ):
        result = CliRunner().invoke(cli_app, args)
        assert result.exit_code == 2, (args, result.output)
    assert not (root / "ledger.db").exists()


def test_budget_remaining_is_the_minimum_over_the_path(root: Path) -> None:
    from dataclasses import replace

    from dpllm.ledger.base import release_once
    from dpllm.release import Cost
    from dpllm.testing.releases import fake_release

    settings = Settings.load(root / "dpllm.toml")
    with _client(settings, dt.date(2024, 6, 3)) as client:
        assert client.get("/v1/budget", params={"week": WEEK}, headers=HEADERS).status_code == 200
        ledger = _ledger(root)
        cost = Cost.zcdp(4.0)
        fake = fake_release("x", 1.0, 0.0, 2.0, window=WEEK)
        release_once(
            ledger, query_id="other", pool="global", window=WEEK, cost=cost,
            compute=lambda: replace(fake, cost=cost, seeded=False),
        )  # fmt: skip
        body = client.get("/v1/budget", params={"week": WEEK}, headers=HEADERS).json()
    weekly = next(p for p in body["pools"] if p["pool"] == "weekly")
    assert weekly["pool_remaining"] == 2.0 and weekly["remaining"] == 0.0


def test_budget_shows_delta_spent_and_remaining_over_the_path(root: Path) -> None:
    from dataclasses import replace

    from dpllm.ledger.base import release_once, to_delta_units
    from dpllm.release import Cost
    from dpllm.testing.releases import fake_release

    settings = Settings.load(root / "dpllm.toml")
    with _client(settings, dt.date(2024, 6, 3)) as client:
        first = client.get("/v1/budget", params={"week": WEEK}, headers=HEADERS).json()
        weekly = next(p for p in first["pools"] if p["pool"] == "weekly")
        assert weekly["delta"]["spent"] == 0.0 and weekly["delta"]["remaining"] == 1e-6
        ledger = _ledger(root)
        cost = Cost.pure(0.1)
        fake = replace(fake_release("kw", 1.0, 0.0, 2.0, window=WEEK), cost=cost, seeded=False)
        release_once(ledger, query_id="kw", pool="weekly", window=WEEK, cost=cost,
                     compute=lambda: replace(fake, delta=4e-7), delta=4e-7)  # fmt: skip
        body = client.get("/v1/budget", params={"week": WEEK}, headers=HEADERS).json()
    weekly = next(p for p in body["pools"] if p["pool"] == "weekly")
    assert weekly["delta"]["spent"] == pytest.approx(4e-7)
    assert weekly["delta"]["remaining"] == pytest.approx(6e-7)
    assert weekly["delta"]["units"]["spent"] == to_delta_units(4e-7)
    assert weekly["delta"]["window_cap"] == 1e-6
