"""The approval queue end to end: queue → pending → approve/deny → run once, all audited."""

from __future__ import annotations

import pytest

from dpllm.errors import BudgetError, BudgetExceeded, BudgetPending, ConfigError, UnknownTicket
from dpllm.ledger.base import release_once
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost, Release
from tests.ledger.conftest import (
    WEEK,
    audit_count,
    compute_for,
    make_release,
    parts_sum,
    pure_pool,
)

Q = Cost.pure(0.25)


@pytest.fixture
def tiers(ledger: SQLiteLedger) -> SQLiteLedger:
    ledger.ensure_pool(pure_pool("global", 2.0))
    ledger.ensure_pool(pure_pool("key", 1.0, parent="global"))
    ledger.ensure_pool(pure_pool("reserve", 0.5, parent="global"))
    ledger.ensure_pool(
        pure_pool("flex", 0.5, parent="global", on_exceed="queue", reserve="reserve")
    )
    return ledger


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, qid: str) -> Release:
        self.calls += 1
        return make_release(qid, Q, float(self.calls))


def run(ledger: SQLiteLedger, qid: str, counter: Counter) -> Release:
    return release_once(ledger, query_id=qid, pool="flex", window=WEEK, cost=Q,
                        compute=lambda: counter(qid), analyst="ana")  # fmt: skip


def test_approval_flow_end_to_end(tiers: SQLiteLedger) -> None:
    counter = Counter()
    run(tiers, "f1", counter)
    run(tiers, "f2", counter)
    before = tiers.balance("global", WEEK).spent

    with pytest.raises(BudgetPending) as info:
        run(tiers, "f3", counter)
    ticket = info.value.ticket
    assert tiers.balance("global", WEEK).spent == before  # nothing spent
    with pytest.raises(BudgetPending) as again:
        run(tiers, "f3", counter)
    assert again.value.ticket == ticket  # one ticket per query id
    [pending] = tiers.pending()
    assert (pending.ticket, pending.query_id, pending.pool, pending.cost, pending.analyst) == (
        ticket, "f3", "flex", Q, "ana",
    )  # fmt: skip

    approved = tiers.approve(ticket, approver="boss", from_pool="reserve")
    assert approved.status == "approved"
    assert tiers.pending() == []
    flex, reserve = tiers.balance("flex", WEEK), tiers.balance("reserve", WEEK)
    assert (flex.granted, flex.spent, flex.remaining) == (Q.micro, 3 * Q.micro, 0)
    assert (reserve.granted, reserve.spent, reserve.remaining) == (-Q.micro, 0, Q.micro)
    assert tiers.balance("global", WEEK).spent == before + Q.micro
    assert counter.calls == 2  # approval charges, it does not compute

    result = run(tiers, "f3", counter)  # the analyst re-runs: it runs exactly once
    assert counter.calls == 3 and result.values == (3.0,)
    assert run(tiers, "f3", counter).values == (3.0,)  # then it is cached
    assert counter.calls == 3
    assert audit_count(tiers, "charge", "f3") == 1
    assert (
        tiers.balance("global", WEEK).spent == before + Q.micro == parts_sum(tiers, "global", WEEK)
    )
    assert [t.status for t in tiers.pending(status=None)] == ["used"]
    events = [e.event for e in tiers.history() if e.query_id == "f3"]
    assert events == ["queue", "queue", "charge", "approve", "takeover", "release", "cache_hit"]
    approve_event = next(e for e in tiers.history() if e.event == "approve")
    assert approve_event.analyst == "boss" and "reserve" in approve_event.detail


def test_deny_is_audited_and_sticks(tiers: SQLiteLedger) -> None:
    counter = Counter()
    run(tiers, "f1", counter)
    run(tiers, "f2", counter)
    with pytest.raises(BudgetPending) as info:
        run(tiers, "f3", counter)
    denied = tiers.deny(info.value.ticket, approver="boss", reason="not needed")
    assert denied.status == "denied"
    with pytest.raises(BudgetExceeded, match="denied"):
        run(tiers, "f3", counter)
    assert counter.calls == 2
    [deny] = [e for e in tiers.history() if e.event == "deny"]
    assert deny.analyst == "boss" and "not needed" in deny.detail
    with pytest.raises(BudgetError, match="already denied"):
        tiers.approve(info.value.ticket)


def test_approval_that_does_not_fit_changes_nothing(tiers: SQLiteLedger) -> None:
    counter = Counter()
    run(tiers, "f1", counter)
    run(tiers, "f2", counter)
    tickets = []
    for qid in ("f3", "f4", "f5"):
        with pytest.raises(BudgetPending) as info:
            run(tiers, qid, counter)
        tickets.append(info.value.ticket)
    tiers.approve(tickets[0])  # default reserve from the pool's settings
    tiers.approve(tickets[1])
    snapshot = (tiers.balances(), len(tiers.history()))
    with pytest.raises(BudgetExceeded) as used_up:  # the reserve (0.5) is used up
        tiers.approve(tickets[2])
    assert used_up.value.pool == "reserve"
    assert (tiers.balances(), len(tiers.history())) == snapshot
    assert [t.ticket for t in tiers.pending()] == [tickets[2]]


def test_approval_cannot_lift_a_common_parent(ledger: SQLiteLedger) -> None:
    ledger.ensure_pool(pure_pool("global", 0.5))
    ledger.ensure_pool(pure_pool("reserve", 0.5, parent="global"))
    ledger.ensure_pool(pure_pool("flex", 0.5, parent="global", on_exceed="queue"))
    counter = Counter()
    run(ledger, "f1", counter)
    run(ledger, "f2", counter)  # flex and global are both full now
    with pytest.raises(BudgetPending) as info:  # flex queues
        run(ledger, "f3", counter)
    with pytest.raises(BudgetExceeded) as refused:
        ledger.approve(info.value.ticket, from_pool="reserve")
    assert refused.value.pool == "global"  # the hard cap above both holds
    assert ledger.balance("reserve", WEEK).granted == 0
    ledger.ensure_pool(pure_pool("flex", 1.0, parent="global", on_exceed="queue"))
    with pytest.raises(BudgetExceeded) as hard:  # flex has room; global refuses, no queue
        run(ledger, "f4", counter)
    assert hard.value.pool == "global"


def test_bad_approvals(tiers: SQLiteLedger) -> None:
    with pytest.raises(UnknownTicket):
        tiers.approve("nope")
    with pytest.raises(UnknownTicket):
        tiers.deny("nope")
    counter = Counter()
    run(tiers, "f1", counter)
    run(tiers, "f2", counter)
    with pytest.raises(BudgetPending) as info:
        run(tiers, "f3", counter)
    with pytest.raises(ConfigError, match="path"):
        tiers.approve(info.value.ticket, from_pool="global")
    assert tiers.pending()[0].status == "pending"


def test_an_approved_run_that_fails_before_reading_is_refunded(tiers: SQLiteLedger) -> None:
    counter = Counter()
    run(tiers, "f1", counter)
    run(tiers, "f2", counter)
    with pytest.raises(BudgetPending) as info:
        run(tiers, "f3", counter)
    tiers.approve(info.value.ticket)
    with pytest.raises(RuntimeError):
        with tiers.charging(query_id="f3", pool="flex", window=WEEK, cost=Q):
            raise RuntimeError("engine offline")
    assert tiers.balance("flex", WEEK).spent == 2 * Q.micro
    assert audit_count(tiers, "refund", "f3") == 1


def test_a_grant_beyond_the_bare_cap_lets_the_first_charge_of_a_window_in(
    ledger: SQLiteLedger,
) -> None:
    """A window row that exists only through a grant still takes a charge above the bare cap."""
    ledger.ensure_pool(pure_pool("g", 10.0))
    ledger.ensure_pool(pure_pool("spare", 1.0, parent="g"))
    ledger.ensure_pool(pure_pool("q", 0.1, parent="g", on_exceed="queue", reserve="spare"))
    with pytest.raises(BudgetPending) as info:
        release_once(ledger, query_id="big", pool="q", window=WEEK, cost=Cost.pure(0.5),
                     compute=compute_for("big", Cost.pure(0.5)))  # fmt: skip
    ledger.approve(info.value.ticket)
    assert ledger.balance("q", WEEK).spent == Cost.pure(0.5).micro
