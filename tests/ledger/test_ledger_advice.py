"""What a refused ledger operation tells the user to do: the advice fits the situation."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dpllm.errors import BudgetExceeded, BudgetPending, LedgerError, LedgerUnavailable
from dpllm.ledger.base import release_once
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost
from tests.ledger.conftest import WEEK, make_release, pure_pool

Q = Cost.pure(0.25)


def test_a_locked_ledger_says_another_process_holds_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(path, busy_seconds=0.05)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer keeps the write lock
        with pytest.raises(LedgerUnavailable) as info:
            ledger.record_local(user="u:1", window=WEEK, metric="m", cost=Q)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    message = str(info.value)
    assert isinstance(info.value, LedgerError)  # CLI exit 4, as before
    assert "another process holds" in message and "retry" in message
    assert "permissions" not in message and "free space" not in message
    ledger.record_local(
        user="u:1", window=WEEK, metric="m", cost=Q
    )  # the lock released: it goes through


def test_approve_without_a_reserve_names_from_pool(tmp_path: Path) -> None:
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    ledger.ensure_pool(pure_pool("global", 2.0))
    ledger.ensure_pool(pure_pool("flex", 0.5, parent="global", on_exceed="queue"))
    for qid in ("f1", "f2"):
        release_once(ledger, query_id=qid, pool="flex", window=WEEK, cost=Q,
                     compute=lambda qid=qid: make_release(qid, Q))  # fmt: skip
    with pytest.raises(BudgetPending) as queued:
        release_once(ledger, query_id="f3", pool="flex", window=WEEK, cost=Q,
                     compute=lambda: make_release("f3", Q))  # fmt: skip
    with pytest.raises(BudgetExceeded) as refused:
        ledger.approve(queued.value.ticket)
    message = str(refused.value)
    assert "--from POOL" in message and "reserve" in message
    assert "ask for approval" not in message
    assert refused.value.pool == "flex"
