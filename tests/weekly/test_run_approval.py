"""Approvals for a whole run: one ticket per plan, approve → exactly that plan runs once.

A weekly plan that does not fit a queueing pool files ONE ticket listing each query
and its cost; approving it funds every query of the plan (from a reserve) and the
next run takes those charges over; deny, expiry and re-filing are covered, and the
refusal states the same remaining figure ``dpllm budget show`` prints.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dpllm.cli import app
from dpllm.config import Settings
from dpllm.data.demo import DemoData
from dpllm.errors import BudgetError, BudgetExceeded, BudgetPending
from dpllm.ledger.base import PoolSpec
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Measure, to_micro
from dpllm.weekly.job import WeeklyJob
from dpllm.weekly.wiring import _NoRedaction, build_plan
from tests.weekly.helpers import WEEK, make_demo, settings_for

DAY = 86400.0


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DemoData]:
    return make_demo(tmp_path_factory.mktemp("demo-approval"))


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


def _settings(root: Path, db: Path, *, on_exceed: str = "queue", cap: float = 1.0) -> Settings:
    s = settings_for(root, db, redaction_enabled=False)
    pools = (
        PoolSpec("global", Measure.PURE, to_micro(5.0), lifetime_cap=to_micro(50.0)),
        PoolSpec("reserve", Measure.PURE, to_micro(2.0), parent="global"),
        PoolSpec("weekly", Measure.PURE, to_micro(cap), parent="global", on_exceed=on_exceed),
    )
    return dataclasses.replace(s, pools=pools, plan_pool="weekly")


def _ledger(settings: Settings, clock: Clock | None = None) -> SQLiteLedger:
    path = settings.resolve(settings.ledger)
    return SQLiteLedger(path) if clock is None else SQLiteLedger(path, clock=clock)


def _run(settings: Settings, ledger: Any) -> None:
    with WeeklyJob(settings, ledger=ledger, redactor=_NoRedaction()) as job:
        job.run(WEEK)


def _plan_cost(settings: Settings) -> int:
    return sum(q.cost.micro for q in build_plan(settings).values())


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_one_ticket_for_the_whole_plan_and_approval_runs_it_once(
    tmp_path: Path, demo: tuple[Path, DemoData], backend: str, request: pytest.FixtureRequest
) -> None:
    settings = _settings(tmp_path, demo[0])
    ledger: Any = _ledger(settings)
    if backend == "postgresql":
        from dpllm.ledger.postgres import PostgresLedger

        ledger.close()
        ledger = PostgresLedger(request.getfixturevalue("pg_dsn"))
    with pytest.raises(BudgetPending) as first:
        _run(settings, ledger)
    message = str(first.value)
    for name in ("feedback_count", "active_users", "mean_rating", "rating_histogram",
                 "topic_counts"):  # fmt: skip
        assert name in message  # each query and its cost is listed
    assert "ε = 1.6" in message and "this plan runs once" in message
    with pytest.raises(BudgetPending) as again:  # still pending: the same ticket
        _run(settings, ledger)
    assert again.value.ticket == first.value.ticket
    tickets = ledger.pending()
    assert [t.ticket for t in tickets] == [first.value.ticket]  # ONE ticket, not one per query
    items = ledger.run_items(first.value.ticket)
    assert len(items) == 5 and sum(i.cost.micro for i in items) == _plan_cost(settings)
    assert ledger.balance("weekly", WEEK).spent == 0  # asking spent nothing

    ledger.approve(first.value.ticket, from_pool="reserve", approver="dpo")
    assert ledger.balance("reserve", WEEK).granted == -_plan_cost(settings)
    assert len(ledger.unreleased()) == 5  # funded, waiting for their run
    _run(settings, ledger)  # the same run: takes the 5 approved charges over
    assert ledger.balance("weekly", WEEK).spent == _plan_cost(settings)
    assert ledger.balance("global", WEEK).spent == _plan_cost(settings)
    assert ledger.unreleased() == []
    assert ledger.pending(status=None)[0].status == "used"
    _run(settings, ledger)  # once: a rerun is served from the cache, spends nothing
    assert ledger.balance("weekly", WEEK).spent == _plan_cost(settings)
    takeovers = [e for e in ledger.history() if e.event == "takeover"]
    assert len(takeovers) == 5 and all(e.micro == 0 for e in takeovers)
    ledger.close()


def test_an_approval_funds_only_that_plan(tmp_path: Path, demo: tuple[Path, DemoData]) -> None:
    settings = _settings(tmp_path, demo[0])
    ledger = _ledger(settings)
    with pytest.raises(BudgetPending) as info:
        _run(settings, ledger)
    ledger.approve(info.value.ticket, from_pool="reserve")
    # A changed plan (ε 1.5 for the mean) has another query id for the mean: the
    # approval funded the approved query ids only, so the new mean needs budget of
    # its own (1.5 > the pool's own 1.0) and the changed run files its own ticket,
    # for that query alone — the four unchanged queries are paid.
    plan = tuple(
        dataclasses.replace(q, epsilon=1.5) if q.name == "mean_rating" else q for q in settings.plan
    )
    changed = dataclasses.replace(settings, plan=plan)
    with pytest.raises(BudgetPending) as other:
        _run(changed, ledger)
    assert other.value.ticket != info.value.ticket
    items = ledger.run_items(other.value.ticket)
    assert [(i.description, i.cost.micro) for i in items] == [
        (f"mean_rating ({WEEK})", to_micro(1.5))
    ]
    assert ledger.balance("weekly", WEEK).spent == _plan_cost(settings)  # nothing more


def test_a_denied_run_is_refused_and_files_nothing_new(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    settings = _settings(tmp_path, demo[0])
    ledger = _ledger(settings)
    with pytest.raises(BudgetPending) as info:
        _run(settings, ledger)
    ledger.deny(info.value.ticket, approver="dpo", reason="not this week")
    with pytest.raises(BudgetExceeded) as refused:
        _run(settings, ledger)
    assert "was denied" in str(refused.value) and info.value.ticket in str(refused.value)
    assert len(ledger.pending(status=None)) == 1
    with pytest.raises(BudgetError, match="already denied"):
        ledger.approve(info.value.ticket, from_pool="reserve")
    assert ledger.balance("weekly", WEEK).spent == 0


def test_an_expired_ticket_cannot_be_approved_and_the_run_files_a_fresh_one(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    settings = _settings(tmp_path, demo[0])
    clock = Clock()
    ledger = _ledger(settings, clock)
    with pytest.raises(BudgetPending) as old:
        _run(settings, ledger)
    clock.now += 8 * DAY  # older than the default one week
    with pytest.raises(BudgetError, match="expired"):
        ledger.approve(old.value.ticket, from_pool="reserve")
    assert ledger.balance("reserve", WEEK).granted == 0  # nothing moved
    with pytest.raises(BudgetPending) as new:
        _run(settings, ledger)  # re-filing
    assert new.value.ticket != old.value.ticket
    assert [t.ticket for t in ledger.pending()] == [new.value.ticket]
    # A pending ticket left to age also expires when the run asks again.
    clock.now += 8 * DAY
    with pytest.raises(BudgetPending) as newest:
        _run(settings, ledger)
    assert newest.value.ticket not in (old.value.ticket, new.value.ticket)
    ledger.approve(newest.value.ticket, from_pool="reserve")
    _run(settings, ledger)
    assert ledger.balance("weekly", WEEK).spent == _plan_cost(settings)


def test_refusal_and_budget_show_state_the_same_remaining(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    settings = _settings(tmp_path, demo[0], on_exceed="refuse", cap=1.9)
    ledger = _ledger(settings)
    _run(settings, ledger)  # 1.6 of 1.9: 0.3 left
    # Another dataset id: the same plan is new again and asks 1.6 of the 0.3 left.
    other = dataclasses.replace(
        settings, data=dataclasses.replace(settings.data, dataset_id="other")
    )
    with pytest.raises(BudgetExceeded) as info:
        _run(other, ledger)
    assert info.value.remaining == pytest.approx(0.3)
    assert "has ε 0.3 left" in str(info.value)
    out = CliRunner().invoke(
        app, ["budget", "show", "--ledger", str(settings.resolve(settings.ledger)),
              "--window", WEEK, "--pool", "weekly"],
    ).output  # fmt: skip
    row = next(line for line in out.splitlines() if line.strip("│ ").startswith("weekly"))
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells[3] == "ε 0.3"  # the "remaining" column
