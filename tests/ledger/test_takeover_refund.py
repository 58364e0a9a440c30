"""A charge taken over from a process that died is never refunded.

The dead process may have read the data before it died, so its charge must stand
whatever the process that takes it over does — even when that process fails before
it reads anything. (An approved charge that never ran is another matter: see
``test_approvals.py``.)
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dpllm.release import Cost
from tests.ledger.conftest import WEEK, LedgerFactory, pure_pool

COST = Cost.pure(0.3)
ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _died_holding_a_charge(factory: LedgerFactory, query_id: str, *, read: bool) -> None:
    """A child process charges, maybe marks the data read, and dies (``os._exit``) inside."""
    script = textwrap.dedent(
        f"""
        import os
        from dpllm.ledger.postgres import PostgresLedger
        from dpllm.ledger.sqlite import SQLiteLedger
        from dpllm.release import Cost
        cls = SQLiteLedger if {factory.backend!r} == "sqlite" else PostgresLedger
        ledger = cls({factory.location!r}, lease_seconds=5.0)
        with ledger.charging(query_id={query_id!r}, pool="p", window={WEEK!r},
                             cost=Cost.pure(0.3)) as charge:
            if {read!r}:
                charge.data_read()
            os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("read_before_dying", [False, True])
def test_a_taken_over_charge_that_fails_before_reading_is_not_refunded(
    ledger_factory: LedgerFactory, read_before_dying: bool
) -> None:
    clock = Clock()
    first = ledger_factory(clock=clock, lease_seconds=5.0, wait_seconds=0.5)
    first.ensure_pool(pure_pool("p", 1.0))
    _died_holding_a_charge(ledger_factory, "q", read=read_before_dying)
    spent = first.balance("p", WEEK).spent
    assert spent == COST.micro

    clock.now += 60  # the lease has expired: the owner is gone
    second = ledger_factory(clock=clock, lease_seconds=5.0, wait_seconds=0.5)
    with pytest.raises(RuntimeError, match="before reading"):
        with second.charging(query_id="q", pool="p", window=WEEK, cost=COST) as charge:
            assert charge.cached is None
            raise RuntimeError("failed before reading the data")

    after = second.balance("p", WEEK)
    assert after.spent == spent, "the dead process's charge was refunded"
    events = [e.event for e in second.history()]
    assert "takeover" in events and "refund" not in events


def test_a_taken_over_charge_exited_normally_is_not_refunded(
    ledger_factory: LedgerFactory,
) -> None:
    clock = Clock()
    first = ledger_factory(clock=clock, lease_seconds=5.0, wait_seconds=0.5)
    first.ensure_pool(pure_pool("p", 1.0))
    _died_holding_a_charge(ledger_factory, "q2", read=False)
    clock.now += 60
    second = ledger_factory(clock=clock, lease_seconds=5.0, wait_seconds=0.5)
    with second.charging(query_id="q2", pool="p", window=WEEK, cost=COST):
        pass  # gives up without reading
    assert second.balance("p", WEEK).spent == COST.micro
    assert "refund" not in [e.event for e in second.history()]


def test_a_fresh_charge_that_fails_before_reading_is_refunded(
    ledger_factory: LedgerFactory,
) -> None:
    # The contrast that makes the tests above meaningful: refunds do happen.
    ledger = ledger_factory()
    ledger.ensure_pool(pure_pool("p", 1.0))
    with pytest.raises(RuntimeError):
        with ledger.charging(query_id="q3", pool="p", window=WEEK, cost=COST):
            raise RuntimeError("before reading")
    assert ledger.balance("p", WEEK).spent == 0
    assert "refund" in [e.event for e in ledger.history()]
