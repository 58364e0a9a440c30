"""δ is budgeted like ε: caps per window and lifetime, on every pool of the path, on both ledgers.

A charge may carry the δ of an approximate-DP release (``charging(..., delta=...)``).
A δ that does not fit a cap on the path is refused exactly as an ε overspend is:
:class:`~dpllm.errors.BudgetExceeded`, nothing spent, the data never read. Every
test runs on SQLite and on PostgreSQL (``ledger_factory``; PostgreSQL fails, not
skips, when ``CI=true``).
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from dpllm.errors import BudgetExceeded, InvalidPrivacyParameter
from dpllm.ledger.base import DELTA_UNIT, release_once, to_delta_units
from dpllm.ledger.migrations import MIGRATIONS, POSTGRES_MIGRATIONS
from dpllm.release import Cost
from tests.ledger.conftest import (
    WEEK,
    LedgerFactory,
    audit_count,
    compute_for,
    make_release,
    pure_pool,
)

EPS = Cost.pure(0.1)
NEXT = "2026-W48"
CTX = multiprocessing.get_context("fork")


def units(delta: float) -> int:
    return to_delta_units(delta)


def delta_parts_sum(ledger: Any, pool: str, window: str) -> int:
    rows = ledger._query(
        "SELECT COALESCE(SUM(delta), 0) FROM charge_parts WHERE pool = :p AND window_key = :w",
        {"p": pool, "w": window},
    )
    return int(rows[0][0])


def never_read() -> Any:
    raise AssertionError("the data was read although the charge was refused")


def test_units_are_exact_and_round_up_for_charges() -> None:
    assert to_delta_units(1e-6) == 10**9 == to_delta_units(1e-6, cap=True)
    assert to_delta_units(1e-16) == 1  # rounded up: never understated
    assert to_delta_units(1e-16, cap=True) == 0  # a cap is never overstated
    assert to_delta_units(0) == 0 and to_delta_units(1) == DELTA_UNIT
    for bad in (-1e-9, 1.5, float("nan"), float("inf"), True, "1e-6"):
        with pytest.raises(InvalidPrivacyParameter):
            to_delta_units(bad)  # type: ignore[arg-type]


def test_a_delta_overspend_is_refused_with_nothing_spent(ledger: Any) -> None:
    ledger.ensure_pool(pure_pool("p", 1.0, delta_window_cap=units(1e-6)))
    release_once(ledger, query_id="a", pool="p", window=WEEK, cost=EPS,
                 compute=compute_for("a", EPS), delta=6e-7)  # fmt: skip
    before = ledger.balance("p", WEEK)
    assert (before.spent, before.delta_spent) == (EPS.micro, units(6e-7))
    with pytest.raises(BudgetExceeded) as info:
        release_once(ledger, query_id="b", pool="p", window=WEEK, cost=EPS,
                     compute=never_read, delta=6e-7)  # fmt: skip
    assert "δ" in str(info.value) and "Nothing was spent" in str(info.value)
    assert info.value.pool == "p" and info.value.requested == pytest.approx(6e-7)
    assert info.value.remaining == pytest.approx(4e-7)
    after = ledger.balance("p", WEEK)
    assert after == before  # neither ε nor δ moved
    assert ledger.lifetime_spent("p") == EPS.micro
    assert ledger.delta_lifetime_spent("p") == units(6e-7)
    assert ledger.get_release("b") is None and ledger.unreleased() == []
    assert ledger._query("SELECT COUNT(*) FROM charges WHERE query_id = 'b'")[0][0] == 0
    assert audit_count(ledger, "refuse", "b") == 1
    assert audit_count(ledger, "charge", "b") == 0
    # What is left still fits, exactly.
    release_once(ledger, query_id="c", pool="p", window=WEEK, cost=EPS,
                 compute=compute_for("c", EPS), delta=4e-7)  # fmt: skip
    assert (
        ledger.balance("p", WEEK).delta_spent == units(1e-6) == delta_parts_sum(ledger, "p", WEEK)
    )
    assert ledger.balance("p", WEEK).delta_remaining == 0


def test_the_delta_lifetime_cap_binds_across_windows(ledger: Any) -> None:
    ledger.ensure_pool(
        pure_pool("p", 1.0, delta_window_cap=units(1e-6), delta_lifetime_cap=units(1.5e-6))
    )
    release_once(ledger, query_id="a", pool="p", window=WEEK, cost=EPS,
                 compute=compute_for("a", EPS), delta=1e-6)  # fmt: skip
    with pytest.raises(BudgetExceeded, match="δ lifetime cap"):
        release_once(ledger, query_id="b", pool="p", window=NEXT, cost=EPS,
                     compute=never_read, delta=1e-6)  # fmt: skip
    assert ledger.balance("p", NEXT).spent == 0
    release_once(ledger, query_id="c", pool="p", window=NEXT, cost=EPS,
                 compute=compute_for("c", EPS), delta=5e-7)  # fmt: skip
    assert ledger.delta_lifetime_spent("p") == units(1.5e-6)


def test_a_parent_delta_cap_refuses_for_its_children(ledger: Any) -> None:
    ledger.ensure_pool(pure_pool("root", 5.0, delta_window_cap=units(5e-7)))
    ledger.ensure_pool(pure_pool("child", 1.0, parent="root", delta_window_cap=units(1e-6)))
    with pytest.raises(BudgetExceeded) as info:
        release_once(ledger, query_id="a", pool="child", window=WEEK, cost=EPS,
                     compute=never_read, delta=6e-7)  # fmt: skip
    assert info.value.pool == "root"
    for pool in ("root", "child"):
        b = ledger.balance(pool, WEEK)
        assert (b.spent, b.delta_spent) == (0, 0)


def test_a_refund_gives_delta_back(ledger: Any) -> None:
    ledger.ensure_pool(pure_pool("p", 1.0))
    with pytest.raises(RuntimeError):
        with ledger.charging(query_id="a", pool="p", window=WEEK, cost=EPS, delta=1e-6):
            raise RuntimeError("before the read")
    b = ledger.balance("p", WEEK)
    assert (b.spent, b.delta_spent, ledger.delta_lifetime_spent("p")) == (0, 0, 0)


def test_a_release_may_not_claim_more_delta_than_was_charged(ledger: Any) -> None:
    import dataclasses

    ledger.ensure_pool(pure_pool("p", 1.0))
    claims = dataclasses.replace(make_release("a", EPS), delta=1e-6)
    with pytest.raises(InvalidPrivacyParameter, match="δ"):
        release_once(ledger, query_id="a", pool="p", window=WEEK, cost=EPS, compute=lambda: claims)
    release_once(ledger, query_id="b", pool="p", window=WEEK, cost=EPS,
                 compute=lambda: dataclasses.replace(claims, fingerprint="b"), delta=1e-6)  # fmt: skip
    assert ledger.get_release("b") is not None


def test_pure_charges_are_not_refused_by_a_lowered_delta_cap(ledger: Any) -> None:
    ledger.ensure_pool(pure_pool("p", 1.0))
    release_once(ledger, query_id="a", pool="p", window=WEEK, cost=EPS,
                 compute=compute_for("a", EPS), delta=1e-6)  # fmt: skip
    ledger.ensure_pool(pure_pool("p", 1.0, delta_window_cap=0))  # lowered below what is spent
    release_once(ledger, query_id="b", pool="p", window=WEEK, cost=EPS,
                 compute=compute_for("b", EPS))  # fmt: skip
    with pytest.raises(BudgetExceeded, match="δ window cap"):
        release_once(ledger, query_id="c", pool="p", window=WEEK, cost=EPS,
                     compute=never_read, delta=1e-9)  # fmt: skip
    assert ledger.balance("p", WEEK).spent == 2 * EPS.micro


def test_delta_is_never_queued_for_approval(ledger: Any) -> None:
    ledger.ensure_pool(pure_pool("p", 1.0, on_exceed="queue", delta_window_cap=units(1e-7)))
    with pytest.raises(BudgetExceeded):  # not BudgetPending: approvals move ε, not δ
        release_once(ledger, query_id="a", pool="p", window=WEEK, cost=EPS,
                     compute=never_read, delta=1e-6)  # fmt: skip
    assert ledger.pending() == []


def test_a_retry_with_another_delta_is_not_the_same_charge(ledger: Any) -> None:
    from dpllm.errors import LedgerError

    ledger.ensure_pool(pure_pool("p", 1.0))
    with pytest.raises(KeyboardInterrupt):  # charged, read, unreleased: a retry takes it over
        with ledger.charging(query_id="a", pool="p", window=WEEK, cost=EPS, delta=1e-7) as c:
            c.data_read()
            raise KeyboardInterrupt
    with pytest.raises(LedgerError, match="δ"):
        with ledger.charging(query_id="a", pool="p", window=WEEK, cost=EPS, delta=0.0):
            pass  # pragma: no cover - refused before


def test_cached_answers_charge_no_delta(ledger: Any) -> None:
    ledger.ensure_pool(pure_pool("p", 1.0))
    for _ in range(3):
        release_once(ledger, query_id="a", pool="p", window=WEEK, cost=EPS,
                     compute=compute_for("a", EPS), delta=1e-6)  # fmt: skip
    assert ledger.balance("p", WEEK).delta_spent == units(1e-6)


# -- an old ledger opens and upgrades in place ---------------------------------------------
def test_an_old_schema_ledger_upgrades_and_keeps_its_charges(
    ledger_factory: LedgerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = [m.name for m in MIGRATIONS[:5]]
    with monkeypatch.context() as m:
        m.setattr("dpllm.ledger._sqlite_base.MIGRATIONS", MIGRATIONS[:5])
        m.setattr("dpllm.ledger.postgres.POSTGRES_MIGRATIONS", POSTGRES_MIGRATIONS[:5])
        old = ledger_factory()
        assert old.schema_version() == before
        release = make_release("old", EPS)
        from dpllm.ledger._rows import release_to_json

        with old._tx() as conn:  # what dpllm before δ budgeting wrote: no δ columns anywhere
            conn.execute(
                "INSERT INTO pools (name, measure, window_cap, lifetime_cap, delta, on_exceed, "
                "lifetime_spent, created_at, updated_at) VALUES ('p', 'pure', 1000000, 5000000, "
                "1e-6, 'refuse', :micro, 'x', 'x')",
                {"micro": EPS.micro},
            )
            conn.execute(
                "INSERT INTO pool_windows (pool, window_key, spent) VALUES ('p', :w, :micro)",
                {"w": WEEK, "micro": EPS.micro},
            )
            conn.execute(
                "INSERT INTO charges (query_id, pool, window_key, measure, micro, analyst, "
                "description, status, release_name, release_json, created_at, updated_at) "
                "VALUES ('old', 'p', :w, 'pure', :micro, 'a', '', 'released', 'count', :json, "
                "'x', 'x')",
                {"w": WEEK, "micro": EPS.micro, "json": release_to_json(release)},
            )
            conn.execute(
                "INSERT INTO charge_parts (query_id, pool, window_key, micro) "
                "VALUES ('old', 'p', :w, :micro)",
                {"w": WEEK, "micro": EPS.micro},
            )
        old.close()
    new = ledger_factory()
    assert new.schema_version() == [*before, "0006_delta_budget"]
    b = new.balance("p", WEEK)
    assert (b.spent, b.lifetime_spent, b.delta_spent, b.delta_lifetime_spent) == (
        EPS.micro, EPS.micro, 0, 0,
    )  # fmt: skip
    assert b.delta_window_cap == units(1e-6)  # the documented default
    assert new.get_release("old") == release  # still served from the cache
    [pool] = new.pools()
    assert pool.delta_window_cap == units(1e-6) and pool.delta_lifetime_cap is None
    release_once(new, query_id="new", pool="p", window=WEEK, cost=EPS,
                 compute=compute_for("new", EPS), delta=1e-6)  # fmt: skip
    with pytest.raises(BudgetExceeded, match="δ"):
        release_once(new, query_id="more", pool="p", window=WEEK, cost=EPS,
                     compute=never_read, delta=1e-6)  # fmt: skip
    new.close()
    again = ledger_factory()  # opening once more applies nothing twice
    assert again.schema_version()[-1] == "0006_delta_budget"
    assert again.balance("p", WEEK).delta_spent == units(1e-6)


def test_both_backends_name_the_same_migrations() -> None:
    assert [m.name for m in MIGRATIONS] == [m.name for m in POSTGRES_MIGRATIONS]
    assert MIGRATIONS[-1].name == "0006_delta_budget"


# -- many processes never pass a δ cap ------------------------------------------------------
def _delta_charger(
    factory: LedgerFactory,
    worker: int,
    count: int,
    out: multiprocessing.Queue,  # type: ignore[type-arg]
) -> None:
    ledger = factory()
    won: list[str] = []
    plain = 0
    for i in range(count):
        qid = f"w{worker}-{i}"
        # Every third charge carries no δ: it must never be refused by the δ caps.
        delta = 0.0 if i % 3 == 2 else 1e-8
        try:
            release_once(ledger, query_id=qid, pool=f"team{worker % 2}", window=WEEK, cost=TINY,
                         compute=lambda qid=qid: make_release(qid, TINY), delta=delta)  # type: ignore[misc]  # fmt: skip
            if delta:
                won.append(qid)
            else:
                plain += 1
        except BudgetExceeded:
            assert delta, "a charge without δ was refused"
    out.put((won, plain))
    ledger.close()


TINY = Cost.pure(0.0001)


def test_concurrent_charges_never_pass_the_delta_cap(ledger_factory: LedgerFactory) -> None:
    workers, per_worker, admitted = 8, 45, 100  # 240 δ charges race for room for 100
    ledger = ledger_factory()
    ledger.ensure_pool(pure_pool("global", 1.0, delta_window_cap=units(admitted * 1e-8)))
    for team in range(2):  # each team alone could take 150
        ledger.ensure_pool(
            pure_pool(f"team{team}", 1.0, parent="global", delta_window_cap=units(150 * 1e-8))
        )
    out = CTX.Queue()
    procs = [
        CTX.Process(target=_delta_charger, args=(ledger_factory, w, per_worker, out))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    won = [qid for w, _ in results for qid in w]
    plain = sum(n for _, n in results)
    assert len(won) == admitted == len(set(won))
    assert plain == workers * (per_worker // 3)  # none of the δ-free charges was refused
    top = ledger.balance("global", WEEK)
    assert top.delta_spent == units(admitted * 1e-8) == delta_parts_sum(ledger, "global", WEEK)
    assert top.spent == (admitted + plain) * TINY.micro
    for team in range(2):
        b = ledger.balance(f"team{team}", WEEK)
        assert b.delta_spent <= b.delta_window_cap
        assert b.delta_spent == delta_parts_sum(ledger, f"team{team}", WEEK)
    assert sum(ledger.balance(f"team{t}", WEEK).delta_spent for t in range(2)) == top.delta_spent
