"""``dpllm budget``: show, history, pending, approve, deny — through Typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpllm.cli import app
from dpllm.errors import BudgetPending
from dpllm.ledger.base import PoolSpec, release_once
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost, Measure, Release

WEEK = "2026-W47"
Q = Cost.pure(0.25)


def _release(qid: str, cost: Cost) -> Release:
    return Release(name="count", values=(3.0,), intervals=((1.0, 5.0),), mechanism="discrete_laplace",
                   noise_scale=1.0, cost=cost, fingerprint=qid, window=WEEK)  # fmt: skip


def _run(ledger: SQLiteLedger, qid: str, pool: str = "flex", cost: Cost = Q) -> None:
    release_once(ledger, query_id=qid, pool=pool, window=WEEK, cost=cost,
                 compute=lambda: _release(qid, cost), analyst="ana")  # fmt: skip


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(path)
    ledger.ensure_pool(PoolSpec("global", Measure.PURE, Cost.pure(2).micro,
                                lifetime_cap=Cost.pure(10).micro))  # fmt: skip
    ledger.ensure_pool(PoolSpec("reserve", Measure.PURE, Cost.pure(0.5).micro, parent="global"))
    ledger.ensure_pool(PoolSpec("flex", Measure.PURE, Cost.pure(0.5).micro, parent="global",
                                on_exceed="queue"))  # fmt: skip
    ledger.ensure_pool(PoolSpec("z", Measure.ZCDP, Cost.zcdp(1).micro,
                                lifetime_cap=Cost.zcdp(4).micro, delta=1e-6))  # fmt: skip
    _run(ledger, "f1")
    _run(ledger, "f2")
    _run(ledger, "z1", pool="z", cost=Cost.zcdp(0.5))
    return path


def _pending_ticket(db: Path) -> str:
    with pytest.raises(BudgetPending) as info:
        _run(SQLiteLedger(db), "f3")
    return info.value.ticket


runner = CliRunner()


def test_show_prints_balances_and_worst_case_loss(db: Path) -> None:
    result = runner.invoke(app, ["budget", "show", "--ledger", str(db)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "flex" in out and WEEK in out
    assert "ε 0.5 / no cap" in out  # flex: lifetime spent / cap
    assert "ε 1.5" in out  # global remaining in the window
    assert "Worst-case cumulative loss of a user present in every window" in out
    assert "ρ = 0.5 → (ε = 5.757" in out  # 0.5 + 2·√(0.5·ln 10⁶)
    assert "ε = 10" in out  # global's lifetime bound
    assert "unbounded" in out


def test_show_filters_and_lists_unreleased(db: Path) -> None:
    ledger = SQLiteLedger(db)
    with pytest.raises(KeyError):
        with ledger.charging(query_id="broken", pool="global", window=WEEK, cost=Q) as c:
            c.data_read()
            raise KeyError("engine crashed after reading")
    with ledger.charging(query_id="left", pool="global", window=WEEK, cost=Q) as c:
        c.data_read()  # left without a stored release
    result = runner.invoke(app, ["budget", "show", "--ledger", str(db), "--pool", "global"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Charged, not released" in out and "left" in out
    assert "flex" not in out.split("Worst-case")[0]
    failed = out.split("Failed after reading the data")[1]
    assert "broken" in failed and "KeyError" in failed and "crashed" not in failed


def test_history_json(db: Path) -> None:
    result = runner.invoke(app, ["budget", "history", "--ledger", str(db), "--json"])
    assert result.exit_code == 0, result.output
    events = json.loads(result.output)
    charges = [e for e in events if e["event"] == "charge"]
    assert [e["query_id"] for e in charges] == ["f1", "f2", "z1"]
    assert charges[0]["analyst"] == "ana" and charges[0]["micro"] == Q.micro
    limited = runner.invoke(
        app, ["budget", "history", "--ledger", str(db), "--json", "--limit", "1"]
    )
    assert len(json.loads(limited.output)) == 1
    table = runner.invoke(app, ["budget", "history", "--ledger", str(db)])
    assert table.exit_code == 0 and "cache_hit" not in table.output and "f2" in table.output


def test_pending_approve_flow(db: Path) -> None:
    ticket = _pending_ticket(db)
    listed = runner.invoke(app, ["budget", "pending", "--ledger", str(db)])
    assert listed.exit_code == 0 and ticket in listed.output and "f3" in listed.output
    approved = runner.invoke(
        app, ["budget", "approve", ticket, "--from", "reserve", "--by", "boss", "--ledger", str(db)]
    )
    assert approved.exit_code == 0, approved.output
    assert f"approved ticket {ticket}" in approved.output
    assert (
        "No requests are waiting"
        in runner.invoke(app, ["budget", "pending", "--ledger", str(db)]).output
    )
    _run(SQLiteLedger(db), "f3")  # now it runs once
    ledger = SQLiteLedger(db)
    assert ledger.get_release("f3") is not None
    assert ledger.balance("reserve", WEEK).granted == -Q.micro
    again = runner.invoke(app, ["budget", "approve", ticket, "--ledger", str(db)])
    assert again.exit_code == 3 and "already" in again.output  # refused


def test_deny(db: Path) -> None:
    ticket = _pending_ticket(db)
    result = runner.invoke(app, ["budget", "deny", ticket, "--reason", "no", "--ledger", str(db)])
    assert result.exit_code == 0 and "denied" in result.output
    everything = runner.invoke(app, ["budget", "pending", "--all", "--ledger", str(db)])
    assert "denied" in everything.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["budget", "approve", "nope"], "no approval ticket"),
        (["budget", "deny", "nope"], "no approval ticket"),
        (["budget", "show", "--pool", "nobody"], "unknown pool"),
    ],
)
def test_errors_are_clear_and_exit_2(db: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, [*args, "--ledger", str(db)])
    assert result.exit_code == 2  # usage or input error
    assert message in " ".join(result.output.split())


@pytest.mark.parametrize("window", ["week47", "２０２６-W４７", "2026-W47\n", "2026-w47"])
def test_a_malformed_window_is_a_usage_error(db: Path, window: str) -> None:
    result = runner.invoke(app, ["budget", "show", "--window", window, "--ledger", str(db)])
    assert result.exit_code == 2 and "malformed window" in result.output


def test_missing_ledger(tmp_path: Path) -> None:
    result = runner.invoke(app, ["budget", "show", "--ledger", str(tmp_path / "none.db")])
    assert result.exit_code == 4 and "no ledger at" in result.output  # ledger unavailable
    assert not (tmp_path / "none.db").exists()


def test_ledger_from_environment(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPLLM_LEDGER", str(db))
    result = runner.invoke(app, ["budget", "show"])
    assert result.exit_code == 0 and "flex" in result.output


def test_remaining_is_the_minimum_over_the_pool_path(tmp_path: Path) -> None:
    from dpllm.ledger.base import path_remaining

    path = tmp_path / "l.db"
    ledger = SQLiteLedger(path)
    ledger.ensure_pool(PoolSpec("root", Measure.PURE, Cost.pure(1).micro))
    ledger.ensure_pool(PoolSpec("a", Measure.PURE, Cost.pure(5).micro, parent="root"))
    ledger.ensure_pool(PoolSpec("b", Measure.PURE, Cost.pure(5).micro, parent="root"))
    _run(ledger, "q1", pool="a", cost=Cost.pure(1))  # exhausts the root
    pools = {p.name: p for p in ledger.pools()}

    def of(name: str):  # type: ignore[no-untyped-def]
        return ledger.balance(name, WEEK)

    assert of("b").remaining == Cost.pure(5).micro  # its own cap says 5 …
    assert path_remaining(pools, of, "b") == 0  # … but nothing can be charged to it
    result = runner.invoke(app, ["budget", "show", "--ledger", str(path), "--window", WEEK])
    assert result.exit_code == 0, result.output
    cells: dict[str, list[str]] = {}
    for line in result.output.splitlines():  # the balance table comes first
        if len(parts := line.split("│")) > 6:
            cells.setdefault(parts[1].strip(), [c.strip() for c in parts[2:]])
    assert cells["a"][2] == "ε 0"  # spent 1 of its own 5, but the root is exhausted
    assert cells["root"][2] == "ε 0"


def test_path_remaining_converts_a_zcdp_parent_for_a_pure_child(tmp_path: Path) -> None:
    from dpllm.ledger.base import path_remaining

    ledger = SQLiteLedger(tmp_path / "l.db")
    ledger.ensure_pool(PoolSpec("z", Measure.ZCDP, Cost.zcdp(0.5).micro))
    ledger.ensure_pool(PoolSpec("p", Measure.PURE, Cost.pure(3).micro, parent="z"))
    pools = {p.name: p for p in ledger.pools()}
    # ρ = 0.5 left admits ε ≤ √(2·0.5) = 1: a pure charge of ε 1 costs ρ 0.5.
    assert path_remaining(pools, lambda n: ledger.balance(n, WEEK), "p") == 1_000_000


def test_worst_case_loss_includes_local_dp(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    ledger = SQLiteLedger(path)
    ledger.ensure_pool(PoolSpec("root", Measure.PURE, Cost.pure(1).micro))
    for week in ("2026-W46", WEEK):
        ledger.record_local(user="u1", window=week, metric="rating", cost=Cost.pure(1.5))
    ledger.record_local(user="u2", window=WEEK, metric="rating", cost=Cost.pure(1.5))
    assert ledger.local_worst_case() == Cost.pure(3)
    result = runner.invoke(app, ["budget", "show", "--ledger", str(path)])
    assert result.exit_code == 0, result.output
    assert "local DP" in result.output and "ε 3" in result.output
