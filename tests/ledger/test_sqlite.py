"""Semantics of the SQLite ledger: charges, paths, caps, cache, refunds, leases, schema."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dpllm.errors import (
    BudgetExceeded,
    ChargeInProgress,
    InvalidPrivacyParameter,
    LedgerError,
)
from dpllm.ledger.base import ChargeStatus, Ledger, PoolSpec, release_once
from dpllm.ledger.migrations import MIGRATIONS
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost, Measure
from tests.ledger.conftest import (
    WEEK,
    LedgerFactory,
    audit_count,
    compute_for,
    make_release,
    parts_sum,
    pure_pool,
)

EPS = Cost.pure(0.25)


@pytest.fixture
def tree(ledger: SQLiteLedger) -> SQLiteLedger:
    ledger.ensure_pool(pure_pool("global", 1.0, lifetime=2.0))
    ledger.ensure_pool(pure_pool("alice", 0.75, parent="global"))
    ledger.ensure_pool(pure_pool("bob", 0.75, parent="global"))
    return ledger


def charge(ledger: SQLiteLedger, qid: str, pool: str = "alice", window: str = WEEK,
           cost: Cost = EPS) -> None:  # fmt: skip
    release_once(ledger, query_id=qid, pool=pool, window=window, cost=cost,
                 compute=compute_for(qid, cost))  # fmt: skip


def test_is_a_ledger(ledger: SQLiteLedger) -> None:
    assert isinstance(ledger, Ledger)


def test_charge_hits_every_pool_on_the_path(tree: SQLiteLedger) -> None:
    charge(tree, "q1")
    assert tree.balance("alice", WEEK).spent == EPS.micro
    assert tree.balance("global", WEEK).spent == EPS.micro
    assert tree.balance("bob", WEEK).spent == 0
    assert tree.balance("global", WEEK).remaining == Cost.pure(0.75).micro


def test_parent_cap_refuses_atomically(tree: SQLiteLedger) -> None:
    charge(tree, "a1", "alice")
    charge(tree, "a2", "alice")
    charge(tree, "b1", "bob")
    charge(tree, "b2", "bob")  # global is now full (1.0); each child at 0.5
    with pytest.raises(BudgetExceeded) as info:
        charge(tree, "b3", "bob")
    assert info.value.pool == "global"
    assert info.value.window == WEEK
    # bob had room himself, but nothing was taken from him either
    assert tree.balance("bob", WEEK).spent == Cost.pure(0.5).micro
    assert tree.get_release("b3") is None
    assert audit_count(tree, "refuse", "b3") == 1


def test_window_cap_is_per_window_and_lifetime_cap_spans_windows(tree: SQLiteLedger) -> None:
    for week, n in (("2026-W45", 4), ("2026-W46", 4)):
        for i in range(n):
            charge(tree, f"{week}-{i}", "alice" if i < 2 else "bob", window=week)
    assert tree.lifetime_spent("global") == Cost.pure(2.0).micro
    with pytest.raises(BudgetExceeded, match="lifetime cap") as info:
        charge(tree, "w47", "alice", window="2026-W47")
    assert info.value.pool == "global"
    assert tree.balance("global", "2026-W47").remaining == 0
    assert tree.balance("alice", "2026-W47").spent == 0


def test_cached_release_costs_nothing(tree: SQLiteLedger) -> None:
    first = release_once(tree, query_id="q", pool="alice", window=WEEK, cost=EPS,
                         compute=compute_for("q", EPS, 10.0))  # fmt: skip
    second = release_once(tree, query_id="q", pool="alice", window=WEEK, cost=EPS,
                          compute=compute_for("q", EPS, 99.0))  # fmt: skip
    assert second.values == first.values == (10.0,)
    assert tree.balance("alice", WEEK).spent == EPS.micro
    assert audit_count(tree, "cache_hit", "q") == 1
    assert audit_count(tree, "charge", "q") == 1
    assert [r.fingerprint for r in tree.releases(name="count", window=WEEK)] == ["q"]
    assert tree.releases(window="2026-W01") == []


def test_refund_when_an_error_comes_before_the_data_is_read(tree: SQLiteLedger) -> None:
    with pytest.raises(RuntimeError, match="engine not ready"):
        with tree.charging(query_id="q", pool="alice", window=WEEK, cost=EPS):
            raise RuntimeError("engine not ready")
    assert tree.balance("alice", WEEK).spent == 0
    assert tree.balance("global", WEEK).spent == 0
    assert audit_count(tree, "refund", "q") == 1
    charge(tree, "q")  # the query id is free again
    assert tree.balance("alice", WEEK).spent == EPS.micro


def test_refund_on_normal_exit_without_reading(tree: SQLiteLedger) -> None:
    with tree.charging(query_id="q", pool="alice", window=WEEK, cost=EPS) as c:
        assert c.cached is None
    assert tree.balance("global", WEEK).spent == 0
    assert tree.unreleased() == []


def test_no_refund_after_the_data_was_read(tree: SQLiteLedger) -> None:
    with tree.charging(query_id="q", pool="alice", window=WEEK, cost=EPS) as c:
        c.data_read()  # … and leaves without storing (as a process that died would)
    assert tree.balance("alice", WEEK).spent == EPS.micro
    [record] = tree.unreleased()
    assert (record.query_id, record.status, record.owner) == ("q", ChargeStatus.DATA_READ, None)
    # A retry takes the existing charge over instead of charging again.
    charge(tree, "q")
    assert tree.balance("alice", WEEK).spent == EPS.micro
    assert audit_count(tree, "charge", "q") == 1
    assert audit_count(tree, "takeover", "q") == 1
    assert tree.unreleased() == []
    assert tree.get_release("q") is not None


def test_concurrent_owner_makes_a_caller_wait_then_fail(ledger_factory: LedgerFactory) -> None:
    owner = ledger_factory()
    owner.ensure_pool(pure_pool("p", 1.0))
    waiter = ledger_factory(wait_seconds=0.2)
    with owner.charging(query_id="q", pool="p", window=WEEK, cost=EPS) as c:
        c.data_read()
        with pytest.raises(ChargeInProgress, match="no second charge"):
            with waiter.charging(query_id="q", pool="p", window=WEEK, cost=EPS):
                pass  # pragma: no cover
        c.store(make_release("q", EPS))
    assert owner.balance("p", WEEK).spent == EPS.micro
    with waiter.charging(query_id="q", pool="p", window=WEEK, cost=EPS) as c2:
        assert c2.cached is not None


def test_expired_lease_is_taken_over(ledger_factory: LedgerFactory) -> None:
    now = [1_000_000.0]
    first = ledger_factory(lease_seconds=10, clock=lambda: now[0])
    first.ensure_pool(pure_pool("p", 1.0))
    second = ledger_factory(lease_seconds=10, clock=lambda: now[0])
    cm = first.charging(query_id="q", pool="p", window=WEEK, cost=EPS)
    handle = cm.__enter__()
    handle.data_read()  # the owner "hangs" here and never stores in time
    now[0] += 11
    got = release_once(second, query_id="q", pool="p", window=WEEK, cost=EPS,
                       compute=compute_for("q", EPS, 7.0))  # fmt: skip
    assert got.values == (7.0,)
    # The late owner's store loses; release_once would hand it the stored release.
    with pytest.raises(ChargeInProgress, match="first"):
        handle.store(make_release("q", EPS, 8.0))
    cm.__exit__(None, None, None)
    assert second.get_release("q").values == (7.0,)  # type: ignore[union-attr]
    assert first.balance("p", WEEK).spent == EPS.micro


def test_pure_cost_into_zcdp_pool_converts(ledger: SQLiteLedger) -> None:
    ledger.ensure_pool(PoolSpec("z", Measure.ZCDP, Cost.zcdp(1.0).micro))
    charge(ledger, "q", "z", cost=Cost.pure(0.5))
    assert ledger.balance("z", WEEK).spent == Cost.zcdp(0.125).micro


def test_zcdp_cost_into_pure_pool_is_refused(tree: SQLiteLedger) -> None:
    with pytest.raises(InvalidPrivacyParameter, match="pure"):
        charge(tree, "q", "alice", cost=Cost.zcdp(0.1))
    assert tree.history()[-1].event == "pool"


def test_mixed_path_converts_per_pool(ledger: SQLiteLedger) -> None:
    ledger.ensure_pool(PoolSpec("zroot", Measure.ZCDP, Cost.zcdp(1.0).micro))
    ledger.ensure_pool(pure_pool("leaf", 2.0, parent="zroot"))
    charge(ledger, "q", "leaf", cost=Cost.pure(1.0))
    assert ledger.balance("leaf", WEEK).spent == Cost.pure(1.0).micro
    assert ledger.balance("zroot", WEEK).spent == Cost.zcdp(0.5).micro
    assert parts_sum(ledger, "zroot", WEEK) == Cost.zcdp(0.5).micro


def test_release_claiming_more_than_charged_is_refused(tree: SQLiteLedger) -> None:
    with pytest.raises(InvalidPrivacyParameter, match="charge the release's full cost"):
        with tree.charging(query_id="q", pool="alice", window=WEEK, cost=EPS) as c:
            c.data_read()
            c.store(make_release("q", Cost.pure(0.5)))
    assert tree.get_release("q") is None
    assert tree.balance("alice", WEEK).spent == EPS.micro


def test_audit_log_records_who_what_where(tree: SQLiteLedger) -> None:
    release_once(tree, query_id="q", pool="alice", window=WEEK, cost=EPS, analyst="ana",
                 compute=compute_for("q", EPS), description="weekly count")  # fmt: skip
    events = [e for e in tree.history() if e.query_id == "q"]
    assert [e.event for e in events] == ["charge", "release"]
    assert (events[0].analyst, events[0].pool, events[0].window, events[0].micro) == (
        "ana", "alice", WEEK, EPS.micro,
    )  # fmt: skip
    assert "weekly count" in events[0].detail
    assert len(tree.history(limit=1)) == 1


def test_connection_pragmas(tmp_path: Path) -> None:
    """SQLite only; tests/ledger/test_postgres.py checks the PostgreSQL session settings."""
    conn = SQLiteLedger(tmp_path / "ledger.db")._conn()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0


def test_migrations_are_recorded_and_reopening_is_idempotent(
    ledger_factory: LedgerFactory,
) -> None:
    first = ledger_factory()
    first.ensure_pool(pure_pool("p", 1.0))
    again = ledger_factory()
    assert again.schema_version() == [m.name for m in MIGRATIONS]
    assert [p.name for p in again.pools()] == ["p"]


def test_database_from_a_newer_dpllm_is_refused(ledger_factory: LedgerFactory) -> None:
    ledger = ledger_factory()
    if ledger_factory.backend == "sqlite":
        with sqlite3.connect(ledger_factory.location) as conn:
            conn.execute("INSERT INTO dpllm_migrations VALUES ('9999_future', 'x')")
    else:
        with ledger._tx() as conn:
            conn.execute("INSERT INTO dpllm_migrations VALUES ('9999_future', 'x')")
    with pytest.raises(LedgerError, match="upgrade dpllm"):
        ledger_factory()


def test_pool_settings_update_and_measure_is_fixed_once_spent(tree: SQLiteLedger) -> None:
    from dpllm.errors import ConfigError

    tree.ensure_pool(pure_pool("alice", 0.5, parent="global"))
    assert tree.balance("alice", WEEK).window_cap == Cost.pure(0.5).micro
    charge(tree, "q")
    with pytest.raises(ConfigError, match="measure cannot change"):
        tree.ensure_pool(PoolSpec("alice", Measure.ZCDP, 10, parent="global"))
    with pytest.raises(ConfigError, match="parent"):
        tree.ensure_pool(PoolSpec("zkid", Measure.ZCDP, 10, parent="global"))
    with pytest.raises(ConfigError, match="cycle"):
        tree.ensure_pool(pure_pool("global", 1.0, parent="alice"))


def test_a_path_changed_by_another_handle_is_caught(ledger_factory: LedgerFactory) -> None:
    """Each handle caches pool paths; a charge verifies them and re-reads a stale one."""
    first = ledger_factory()
    first.ensure_pool(pure_pool("g1", 1.0))
    first.ensure_pool(pure_pool("g2", 1.0))
    first.ensure_pool(pure_pool("t", 1.0, parent="g1"))
    charge(first, "a", pool="t")  # first caches t → g1
    ledger_factory().ensure_pool(pure_pool("t", 1.0, parent="g2"))  # another process moves t
    charge(first, "b", pool="t")
    assert (first.balance("g1", WEEK).spent, first.balance("g2", WEEK).spent) == (
        EPS.micro, EPS.micro,
    )  # fmt: skip
    ledger_factory().ensure_pool(pure_pool("g2", 0.25))  # full now: b took 0.25
    with pytest.raises(BudgetExceeded, match="'g2'"):
        charge(first, "c", pool="t")
    assert parts_sum(first, "g2", WEEK) == EPS.micro
