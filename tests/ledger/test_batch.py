"""charging_many / store_many: one transaction for a batch, all or nothing."""

from __future__ import annotations

from typing import Any

import pytest

from dpllm.errors import BudgetExceeded, InvalidPrivacyParameter, LedgerError, QueryFailed
from dpllm.ledger._batch import ChargeRequest
from dpllm.release import Cost
from tests.ledger.conftest import audit_count, make_release, pure_pool

WEEKS = ["2026-W45", "2026-W46", "2026-W47"]
EPS = Cost.pure(0.4)


@pytest.fixture
def pool(ledger: Any) -> Any:
    ledger.ensure_pool(pure_pool("p", 1.0))
    return ledger


def _requests(prefix: str = "q", cost: Cost = EPS) -> list[ChargeRequest]:
    return [ChargeRequest(f"{prefix}-{w}", "p", w, cost) for w in WEEKS]


def _count_transactions(ledger: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = ledger._tx

    def counting() -> Any:
        calls[0] += 1
        return real()

    monkeypatch.setattr(ledger, "_tx", counting)
    return calls


def test_a_batch_is_one_transaction_for_charges_and_one_for_stores(
    pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_transactions(pool, monkeypatch)
    with pool.charging_many(_requests()) as charges:
        assert calls == [1]
        assert [c.query_id for c in charges] == [f"q-{w}" for w in WEEKS]
        assert [pool.balance("p", w).spent for w in WEEKS] == [400_000] * 3
        for c in charges:
            c.data_read()
        stored = pool.store_many([(c, make_release(c.query_id, EPS)) for c in charges])
        assert calls == [2]
    assert [r.fingerprint for r in stored] == [f"q-{w}" for w in WEEKS]
    assert calls == [2]  # leaving the block writes nothing more
    for w in WEEKS:
        assert pool.get_release(f"q-{w}") is not None
        assert audit_count(pool, "charge", f"q-{w}") == 1
        assert audit_count(pool, "release", f"q-{w}") == 1


def test_a_refusal_charges_nothing_of_the_batch(pool: Any) -> None:
    with pool.charging(query_id="early", pool="p", window=WEEKS[2], cost=Cost.pure(0.8)) as c:
        c.data_read()
        c.store(make_release("early", Cost.pure(0.8)))
    with pytest.raises(BudgetExceeded):
        with pool.charging_many(_requests()):
            pytest.fail("the batch must not be entered")  # pragma: no cover
    assert [pool.balance("p", w).spent for w in WEEKS] == [0, 0, 800_000]
    assert audit_count(pool, "refuse", f"q-{WEEKS[2]}") == 1  # judged one by one, recorded


def test_a_stored_release_is_answered_from_the_cache_in_the_batch(pool: Any) -> None:
    first = _requests()[0]
    with pool.charging(
        query_id=first.query_id, pool="p", window=first.window, cost=EPS
    ) as c:  # fmt: skip
        c.data_read()
        c.store(make_release(first.query_id, EPS))
    with pool.charging_many(_requests()) as charges:
        assert charges[0].cached is not None
        assert [c.cached for c in charges[1:]] == [None, None]
    # not read: the two new charges are refunded on leaving
    assert [pool.balance("p", w).spent for w in WEEKS] == [400_000, 0, 0]
    assert audit_count(pool, "cache_hit", first.query_id) == 1


def test_a_failed_query_id_sends_the_batch_one_by_one(pool: Any) -> None:
    with pytest.raises(ValueError):
        with pool.charging(query_id=f"q-{WEEKS[1]}", pool="p", window=WEEKS[1], cost=EPS) as c:
            c.data_read()
            raise ValueError("boom")
    with pytest.raises(QueryFailed):
        with pool.charging_many(_requests()):
            pytest.fail("the batch must not be entered")  # pragma: no cover
    assert [pool.balance("p", w).spent for w in WEEKS] == [0, 400_000, 0]


def test_a_failure_after_the_read_closes_every_query_id_of_the_batch(pool: Any) -> None:
    with pytest.raises(RuntimeError):
        with pool.charging_many(_requests()) as charges:
            for c in charges:
                c.data_read()
            raise RuntimeError("after the read")
    assert [pool.balance("p", w).spent for w in WEEKS] == [400_000] * 3
    with pytest.raises(QueryFailed):
        with pool.charging_many(_requests()):
            pass  # pragma: no cover


def test_bad_batches_are_refused_before_anything_is_written(pool: Any) -> None:
    twice = [*_requests(), _requests()[0]]
    with pytest.raises(InvalidPrivacyParameter, match="distinct"):
        with pool.charging_many(twice):
            pass  # pragma: no cover
    with pool.charging_many(_requests()) as charges:
        charges[0].data_read()
        pool.store_many([(charges[0], make_release(charges[0].query_id, EPS))])
        with pytest.raises(LedgerError, match="already stored"):
            pool.store_many([(charges[0], make_release(charges[0].query_id, EPS))])
        with pytest.raises(InvalidPrivacyParameter):  # claims more than was charged
            pool.store_many([(charges[1], make_release(charges[1].query_id, Cost.pure(0.9)))])
    assert [pool.balance("p", w).spent for w in WEEKS] == [400_000, 0, 0]
    with pool.charging_many([]) as none:
        assert none == []


def test_a_batch_charges_delta_against_the_delta_caps(ledger: Any) -> None:
    """A batch is one transaction, not a way around the δ caps: δ is charged per
    request, and a request over the δ cap refuses the whole batch (nothing spent)."""
    from dpllm.ledger.base import to_delta_units

    ledger.ensure_pool(pure_pool("p", 5.0, delta_window_cap=to_delta_units(1e-6, cap=True)))
    ok = [ChargeRequest(f"d-{w}", "p", w, EPS, delta=6e-7) for w in WEEKS]
    with ledger.charging_many(ok):
        pass  # no data read: refunded on leaving
    with ledger.charging_many(ok) as charges:
        for c in charges:
            c.data_read()
    assert [ledger.balance("p", w).delta_spent for w in WEEKS] == [to_delta_units(6e-7)] * 3
    over = [ChargeRequest(f"e-{w}", "p", w, EPS, delta=6e-7) for w in WEEKS]
    with pytest.raises(BudgetExceeded):
        with ledger.charging_many(over):
            pytest.fail("the batch must not be entered")  # pragma: no cover
    assert [ledger.balance("p", w).spent for w in WEEKS] == [400_000] * 3
    assert [ledger.balance("p", w).delta_spent for w in WEEKS] == [to_delta_units(6e-7)] * 3


def test_a_batch_store_refuses_a_release_claiming_more_delta_than_charged(ledger: Any) -> None:
    """As one-by-one ``store()``: the δ a stored release claims was charged for it."""
    import dataclasses

    ledger.ensure_pool(pure_pool("p", 5.0))
    with ledger.charging_many([ChargeRequest("b", "p", WEEKS[0], EPS)]) as charges:
        charges[0].data_read()
        release = dataclasses.replace(make_release("b", EPS), delta=1e-3)
        with pytest.raises(InvalidPrivacyParameter):
            ledger.store_many([(charges[0], release)])
    assert ledger.get_release("b") is None


@pytest.mark.parametrize("delta", [float("nan"), -1e-9, 2.0])
def test_a_bad_delta_in_a_batch_is_refused_before_any_charge(ledger: Any, delta: float) -> None:
    ledger.ensure_pool(pure_pool("p", 5.0))
    requests = [
        ChargeRequest("a", "p", WEEKS[0], EPS),
        ChargeRequest("z", "p", WEEKS[0], EPS, delta=delta),
    ]
    with pytest.raises(InvalidPrivacyParameter):
        with ledger.charging_many(requests):
            pytest.fail("the batch must not be entered")  # pragma: no cover
    assert ledger.balance("p", WEEKS[0]).spent == 0
    assert audit_count(ledger, "charge", "a") == 0
