"""Many processes on one ledger file: exact caps, retry storms, and kill -9 at any moment.

Children are forked (``multiprocessing`` fork context) and open their own
ledger handle, i.e. their own SQLite connection, as separate programs would.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from multiprocessing.synchronize import Barrier

import pytest

from dpllm.errors import BudgetExceeded, QueryFailed
from dpllm.ledger.base import ChargeStatus, release_once
from dpllm.release import Cost
from tests.ledger.conftest import (
    WEEK,
    LedgerFactory,
    audit_count,
    make_release,
    parts_sum,
    pure_pool,
)

CTX = multiprocessing.get_context("fork")
TINY = Cost.pure(0.001)


# -- 16 processes × 200 charges against caps that admit exactly N ------------------------
def _charger(factory: LedgerFactory, worker: int, count: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    ledger = factory()
    won: list[str] = []
    refused = 0
    for i in range(count):
        qid = f"w{worker}-{i}"
        try:
            release_once(ledger, query_id=qid, pool=f"team{worker % 4}", window=WEEK, cost=TINY,
                         compute=lambda qid=qid: make_release(qid, TINY))  # type: ignore[misc]  # fmt: skip
            won.append(qid)
        except BudgetExceeded:
            refused += 1
    out.put((won, refused))


def test_sixteen_processes_exactly_n_succeed(ledger_factory: LedgerFactory) -> None:
    workers, per_worker, n = 16, 200, 1000
    ledger = ledger_factory()
    ledger.ensure_pool(pure_pool("global", n * 0.001, lifetime=5.0))
    for team in range(4):  # the teams could take 1,600 together: global admits exactly 1,000
        ledger.ensure_pool(pure_pool(f"team{team}", 0.4, parent="global"))
    out = CTX.Queue()
    procs = [
        CTX.Process(target=_charger, args=(ledger_factory, w, per_worker, out))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    won = [qid for w, _ in results for qid in w]
    assert len(won) == n
    assert len(set(won)) == n
    assert sum(r for _, r in results) == workers * per_worker - n
    assert (
        ledger.balance("global", WEEK).spent == n * TINY.micro == parts_sum(ledger, "global", WEEK)
    )
    for team in range(4):
        balance = ledger.balance(f"team{team}", WEEK)
        assert balance.spent <= balance.window_cap
        assert balance.spent == parts_sum(ledger, f"team{team}", WEEK)
    assert audit_count(ledger, "charge") == n
    assert {r.fingerprint for r in ledger.releases()} == set(won)


# -- retry storm: 16 concurrent requests for one query id --------------------------------
def _stormer(
    factory: LedgerFactory,
    barrier: Barrier,
    calls_file: str,
    out: multiprocessing.Queue,  # type: ignore[type-arg]
) -> None:
    ledger = factory()
    cost = Cost.pure(0.5)

    def compute() -> object:
        with open(calls_file, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(0.3)  # hold the charge open while the others arrive
        return make_release("storm", cost, value=float(os.getpid()))

    barrier.wait()
    release = release_once(ledger, query_id="storm", pool="p", window=WEEK, cost=cost,
                           compute=compute)  # type: ignore[arg-type]  # fmt: skip
    out.put(release.to_dict())


def test_retry_storm_charges_once_and_all_get_the_same_release(
    ledger_factory: LedgerFactory, tmp_path: os.PathLike[str]
) -> None:
    ledger = ledger_factory()
    ledger.ensure_pool(pure_pool("p", 1.0))
    calls = os.path.join(tmp_path, "calls.txt")
    barrier, out = CTX.Barrier(16), CTX.Queue()
    procs = [
        CTX.Process(target=_stormer, args=(ledger_factory, barrier, calls, out)) for _ in range(16)
    ]
    for p in procs:
        p.start()
    releases = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(r == releases[0] for r in releases)
    with open(calls) as fh:
        assert len(fh.read().split()) == 1  # the data was read once
    assert ledger.balance("p", WEEK).spent == Cost.pure(0.5).micro
    assert audit_count(ledger, "charge", "storm") == 1
    assert audit_count(ledger, "cache_hit", "storm") == 15


# -- crash safety: kill -9 at a random point of a charge, 50 times -------------------------
def _victim(factory: LedgerFactory, round_: int, receipts: str) -> None:
    ledger = factory()
    fd = os.open(receipts, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    rng = random.Random(round_)
    for i in range(10_000):
        qid = f"r{round_}-{i}"
        window = rng.choice(["2026-W46", "2026-W47"])
        cost = Cost.pure(rng.choice([0.001, 0.002, 0.003]))
        fail = rng.random() < 0.2
        try:
            with ledger.charging(query_id=qid, pool=rng.choice(["a", "b"]), window=window,
                                 cost=cost) as charge:  # fmt: skip
                if fail and rng.random() < 0.5:
                    raise KeyError("before the read")  # refunded
                charge.data_read()
                if fail:
                    raise KeyError("after the read")  # stays charged, not released
                charge.store(make_release(qid, cost))
        except (KeyError, BudgetExceeded):
            continue
        os.write(fd, f"{qid}\n".encode())  # the receipt: this release was returned


def _check_consistent(ledger: object, factory: LedgerFactory) -> None:
    led = factory()
    if factory.backend == "sqlite":
        assert led._query("PRAGMA integrity_check") == [("ok",)]
    for pool in ("a", "b", "global"):
        total = 0
        for window in ("2026-W46", "2026-W47"):
            balance = led.balance(pool, window)
            assert balance.spent == parts_sum(led, pool, window)
            assert balance.spent <= balance.effective_cap
            total += balance.spent
        assert led.lifetime_spent(pool) == total
    # every charge row has exactly its parts, one per pool on its path
    assert led._query(
        "SELECT COUNT(*) FROM charges c WHERE (SELECT COUNT(*) FROM charge_parts p "
        "WHERE p.query_id = c.query_id) != 2"
    ) == [(0,)]
    assert led._query("SELECT COUNT(*) FROM charge_parts WHERE query_id NOT IN "
                      "(SELECT query_id FROM charges)") == [(0,)]  # fmt: skip


@pytest.mark.timeout(300)
def test_kill_minus_nine_loses_and_doubles_nothing(
    ledger_factory: LedgerFactory, tmp_path: os.PathLike[str]
) -> None:
    ledger = ledger_factory()
    ledger.ensure_pool(pure_pool("global", 1000.0))
    ledger.ensure_pool(pure_pool("a", 600.0, parent="global"))
    ledger.ensure_pool(pure_pool("b", 600.0, parent="global"))
    receipts = os.path.join(tmp_path, "receipts.txt")
    rng = random.Random(20261129)
    for round_ in range(50):
        child = CTX.Process(target=_victim, args=(ledger_factory, round_, receipts))
        child.start()
        time.sleep(rng.uniform(0.02, 0.12))
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join(timeout=30)
        assert child.exitcode == -signal.SIGKILL
        if round_ % 10 == 9:
            _check_consistent(ledger, ledger_factory)
    _check_consistent(ledger, ledger_factory)

    with open(receipts) as fh:
        receipted = fh.read().split()
    assert receipted, "the children never got a release out; the test proved nothing"
    for qid in receipted:  # no receipted charge is missing
        assert ledger.get_release(qid) is not None, qid
    charges = Counter(e.query_id for e in ledger.history() if e.event == "charge")
    assert max(charges.values()) == 1  # none doubled
    refunds = {e.query_id for e in ledger.history() if e.event == "refund"}
    stored = {q for (q,) in ledger._query("SELECT query_id FROM charges")}
    assert stored == set(charges) - refunds

    # Charged-not-released rows left by the kills: a retry takes each over, no new charge;
    # rows of runs that raised after the read stay closed (QueryFailed), no new charge either.
    before = {(b.pool, b.window): b.spent for b in ledger.balances()}
    leftovers = ledger.unreleased()
    failed = {r.query_id for r in leftovers if r.status is ChargeStatus.FAILED}
    for record in leftovers:
        try:
            got = release_once(ledger, query_id=record.query_id, pool=record.pool, window=record.window,
                               cost=record.cost, compute=lambda r=record: make_release(r.query_id, r.cost))  # type: ignore[misc]  # fmt: skip
        except QueryFailed:
            assert record.query_id in failed
            continue
        assert got.fingerprint == record.query_id and record.query_id not in failed
    assert {(b.pool, b.window): b.spent for b in ledger.balances()} == before
    assert {r.query_id for r in ledger.unreleased()} == failed
    assert max(Counter(e.query_id for e in ledger.history() if e.event == "charge").values()) == 1


def test_a_refund_locks_the_pools_in_the_charges_order(
    ledger_factory: LedgerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Charges lock their path innermost first; a refund must too, or a refund and a
    charge of the same pools can deadlock (names chosen so that sorting by name, or
    SQLite's primary-key order, gives the opposite order)."""
    from contextlib import contextmanager
    from typing import Any

    from dpllm.ledger import sql

    ledger = ledger_factory()
    ledger.ensure_pool(pure_pool("aaa", 1.0))
    ledger.ensure_pool(pure_pool("mmm", 1.0, parent="aaa"))
    ledger.ensure_pool(pure_pool("zzz", 1.0, parent="mmm"))
    refunded: list[str] = []

    class Recorder:
        def __init__(self, conn: Any) -> None:
            self._conn = conn

        def execute(self, statement: str, params: Any = None, /) -> Any:
            if statement is sql.REFUND_WINDOW:
                refunded.append(params["pool"])
            if params is None:
                return self._conn.execute(statement)
            return self._conn.execute(statement, params)

    original = ledger._tx

    @contextmanager
    def recording_tx() -> Any:
        with original() as conn:
            yield Recorder(conn)

    with ledger.charging(query_id="q", pool="zzz", window=WEEK, cost=Cost.pure(0.1)):
        assert ledger.balance("aaa", WEEK).spent == Cost.pure(0.1).micro
        monkeypatch.setattr(ledger, "_tx", recording_tx)  # record the refund only
        # no data read: refunded on the way out
    assert refunded == ["zzz", "mmm", "aaa"]
    assert ledger.balance("aaa", WEEK).spent == 0
