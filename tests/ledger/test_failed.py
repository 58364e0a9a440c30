"""Failures after the data was read: the charge stands and the query id is closed."""

from __future__ import annotations

from typing import Any

import pytest

from dpllm.errors import BudgetError, QueryFailed
from dpllm.ledger.base import ChargeStatus, release_once
from dpllm.ledger.migrations import MIGRATIONS, POSTGRES_MIGRATIONS
from dpllm.release import Cost, Release
from tests.ledger.conftest import WEEK, LedgerFactory, audit_count, compute_for, pure_pool

EPS = Cost.pure(0.25)
SECRET = "alice@example.com rated 1"  # what an exception message might leak


@pytest.fixture
def pool(ledger: Any) -> Any:
    ledger.ensure_pool(pure_pool("p", 1.0))
    return ledger


def _fail_after_read(ledger: Any, qid: str = "q") -> None:
    with pytest.raises(ValueError, match="alice"):
        with ledger.charging(query_id=qid, pool="p", window=WEEK, cost=EPS) as c:
            c.data_read()
            raise ValueError(SECRET)


def test_failure_after_the_read_marks_the_charge_failed(pool: Any) -> None:
    _fail_after_read(pool)
    assert pool.balance("p", WEEK).spent == EPS.micro
    [record] = pool.unreleased()
    assert (record.query_id, record.status, record.owner) == ("q", ChargeStatus.FAILED, None)
    assert record.error_class == "ValueError"
    assert audit_count(pool, "failed", "q") == 1
    # Only the class name is kept: the message may carry record contents.
    stored = pool._query("SELECT * FROM charges")
    assert "alice" not in repr(stored)
    assert all("alice" not in e.detail for e in pool.history())


def test_a_retry_of_a_failed_query_id_reads_nothing_and_charges_nothing(
    ledger_factory: LedgerFactory,
) -> None:
    first = ledger_factory()
    first.ensure_pool(pure_pool("p", 1.0))
    _fail_after_read(first)
    calls: list[int] = []

    def compute() -> Release:
        calls.append(1)  # pragma: no cover - must never run
        return compute_for("q", EPS)()  # pragma: no cover

    other = ledger_factory()  # another process or replica sees the same closed query id
    for ledger in (first, other):
        with pytest.raises(QueryFailed, match="failed after reading the data") as info:
            release_once(ledger, query_id="q", pool="p", window=WEEK, cost=EPS, compute=compute)
        assert isinstance(info.value, BudgetError) and isinstance(info.value, RuntimeError)
        assert (info.value.query_id, info.value.error_class) == ("q", "ValueError")
        assert "new query id" in str(info.value) and "stands" in str(info.value)
    assert calls == []
    assert first.balance("p", WEEK).spent == EPS.micro
    assert audit_count(first, "charge", "q") == 1
    assert audit_count(first, "takeover", "q") == 0
    assert audit_count(first, "refuse", "q") == 2
    # A changed query (or window) has a new id and is charged anew.
    release_once(first, query_id="q2", pool="p", window=WEEK, cost=EPS,
                 compute=compute_for("q2", EPS))  # fmt: skip
    assert first.balance("p", WEEK).spent == 2 * EPS.micro


def test_release_once_failing_in_compute_closes_the_query_id(pool: Any) -> None:
    def boom() -> Release:
        raise ZeroDivisionError(SECRET)

    with pytest.raises(ZeroDivisionError):
        release_once(pool, query_id="q", pool="p", window=WEEK, cost=EPS, compute=boom)
    with pytest.raises(QueryFailed, match="ZeroDivisionError"):
        release_once(pool, query_id="q", pool="p", window=WEEK, cost=EPS,
                     compute=compute_for("q", EPS))  # fmt: skip
    assert pool.get_release("q") is None


def test_an_interruption_after_the_read_is_taken_over_like_a_dead_process(pool: Any) -> None:
    with pytest.raises(KeyboardInterrupt):
        with pool.charging(query_id="q", pool="p", window=WEEK, cost=EPS) as c:
            c.data_read()
            raise KeyboardInterrupt
    [record] = pool.unreleased()
    assert (record.status, record.owner, record.error_class) == (ChargeStatus.DATA_READ, None, None)
    got = release_once(pool, query_id="q", pool="p", window=WEEK, cost=EPS,
                       compute=compute_for("q", EPS))  # fmt: skip
    assert got.fingerprint == "q"
    assert pool.balance("p", WEEK).spent == EPS.micro
    assert audit_count(pool, "takeover", "q") == 1


def test_failure_before_the_read_still_refunds(pool: Any) -> None:
    with pytest.raises(ValueError):
        with pool.charging(query_id="q", pool="p", window=WEEK, cost=EPS):
            raise ValueError(SECRET)
    assert pool.balance("p", WEEK).spent == 0
    assert pool.unreleased() == []


def test_migration_0002_keeps_older_charges(
    ledger_factory: LedgerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:
        m.setattr("dpllm.ledger._sqlite_base.MIGRATIONS", MIGRATIONS[:1])
        m.setattr("dpllm.ledger.postgres.POSTGRES_MIGRATIONS", POSTGRES_MIGRATIONS[:1])
        old = ledger_factory()
        assert old.schema_version() == ["0001_initial"]
        with old._tx() as conn:  # a pool and a charge left "data read" by a 0001-era process
            conn.execute(
                "INSERT INTO pools (name, measure, window_cap, delta, on_exceed, created_at, "
                "updated_at) VALUES ('p', 'pure', 1000000, 1e-6, 'refuse', 'x', 'x')",
                {},
            )
            conn.execute(
                "INSERT INTO charges (query_id, pool, window_key, measure, micro, analyst, "
                "description, status, created_at, updated_at) VALUES ('left', 'p', :w, 'pure', "
                ":micro, 'a', '', 'data_read', 'x', 'x')",
                {"w": WEEK, "micro": EPS.micro},
            )
            conn.execute(
                "INSERT INTO charge_parts VALUES ('left', 'p', :w, :micro)",
                {"w": WEEK, "micro": EPS.micro},
            )
        old.close()
    new = ledger_factory()
    assert new.schema_version()[:2] == ["0001_initial", "0002_failed_charges"]
    [record] = new.unreleased()
    assert (record.query_id, record.status, record.error_class) == (
        "left", ChargeStatus.DATA_READ, None,
    )  # fmt: skip
    _fail_after_read(new, "q3")
    assert {r.query_id: r.status for r in new.unreleased()}["q3"] is ChargeStatus.FAILED
    # The rebuilt table still refers to and from its neighbours.
    assert new._query("SELECT COUNT(*) FROM charge_parts")[0][0] == 2


def test_the_outcome_says_what_the_ledger_recorded(pool: Any) -> None:
    """Fresh: charged. Again: cached. A taken-over charge: neither (charged once, earlier)."""
    from dpllm.ledger.base import release_recorded

    def run(qid: str) -> Any:
        return release_recorded(pool, query_id=qid, pool="p", window=WEEK, cost=EPS,
                                compute=compute_for(qid, EPS))  # fmt: skip

    first = run("a")
    assert (first.cached, first.charged) == (False, True)
    again = run("a")
    assert (again.cached, again.charged) == (True, False) and again.release == first.release
    with pytest.raises(KeyboardInterrupt):
        with pool.charging(query_id="b", pool="p", window=WEEK, cost=EPS) as c:
            c.data_read()
            raise KeyboardInterrupt
    taken = run("b")
    assert (taken.cached, taken.charged) == (False, False)
    assert pool.balance("p", WEEK).spent == 2 * EPS.micro


def test_a_production_ledger_refuses_seeded_releases(
    ledger_factory: LedgerFactory, tmp_path: Any
) -> None:
    import dataclasses

    from dpllm.errors import InvalidPrivacyParameter, LedgerError

    prod = ledger_factory()
    prod.ensure_pool(pure_pool("p", 10.0))
    seeded = dataclasses.replace(compute_for("s", EPS)(), seeded=True)
    with pytest.raises(InvalidPrivacyParameter, match="seeded"):
        release_once(prod, query_id="s", pool="p", window=WEEK, cost=EPS, compute=lambda: seeded)
    assert prod.get_release("s") is None and not prod.is_test_ledger
    with pytest.raises(LedgerError, match="already holds charges"):
        prod.mark_test_ledger()  # a ledger with charges cannot become a test ledger
    from dpllm.ledger.sqlite import SQLiteLedger

    test = SQLiteLedger(tmp_path / "test-ledger.db")
    test.mark_test_ledger()
    test.ensure_pool(pure_pool("p", 10.0))
    got = release_once(test, query_id="s", pool="p", window=WEEK, cost=EPS, compute=lambda: seeded)
    assert got.seeded and test.is_test_ledger


def test_a_seeded_runner_is_refused_before_any_charge(ledger_factory: LedgerFactory) -> None:
    from dpllm.data.engines import SQLiteEngine
    from dpllm.data.stats import StatsRunner
    from dpllm.errors import InvalidPrivacyParameter
    from dpllm.privacy.noise import SeededNoise

    ledger = ledger_factory()
    with pytest.raises(InvalidPrivacyParameter, match="production"):
        StatsRunner(SQLiteEngine.__new__(SQLiteEngine), ledger, dataset_id="d", pool="p",
                    noise=SeededNoise(1))  # fmt: skip
