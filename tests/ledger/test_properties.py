"""Property test: any interleaving of charges, reads, stores and failures keeps every cap.

A hypothesis state machine holds several ``charging`` blocks open at once and
closes them in any order (stored, failed before the read, failed after it, or
left without reading), against a model of the budget. Charges carry a δ as well
as an ε. After every step: no pool on any path is past its window or lifetime
cap, ε or δ, each balance equals the sum of the ledger's recorded charges, and
both equal the model.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from dpllm.errors import BudgetExceeded
from dpllm.ledger.base import to_delta_units
from dpllm.ledger.postgres import PostgresLedger
from dpllm.ledger.sqlite import SQLiteCharge, SQLiteLedger
from dpllm.release import Cost
from tests.ledger.conftest import make_release, parts_sum, pg_schema, pure_pool

WINDOWS = ("2026-W46", "2026-W47")
CAPS = {"global": 1.0, "a": 0.6, "b": 0.7}
LIFETIME = {"global": 1.5, "a": None, "b": 1.0}
PARENT = {"global": None, "a": "global", "b": "global"}
DELTA_CAPS = {"global": 8e-7, "a": 5e-7, "b": 6e-7}
DELTA_LIFETIME = {"global": 1.2e-6, "a": None, "b": 1e-6}


def path(pool: str) -> list[str]:
    out: list[str] = []
    current: str | None = pool
    while current is not None:
        out.append(current)
        current = PARENT[current]
    return out


@dataclass
class Open:
    cm: AbstractContextManager[SQLiteCharge]
    handle: SQLiteCharge
    pool: str
    window: str
    micro: int
    delta: int = 0
    read: bool = False


@dataclass
class Model:
    spent: dict[tuple[str, str], int] = field(default_factory=dict)
    delta: dict[tuple[str, str], int] = field(default_factory=dict)

    def lifetime(self, pool: str, book: dict[tuple[str, str], int] | None = None) -> int:
        return sum(v for (p, _), v in (self.spent if book is None else book).items() if p == pool)

    def fits(self, pool: str, window: str, micro: int, delta: int = 0) -> bool:
        for name in path(pool):
            if self.spent.get((name, window), 0) + micro > Cost.pure(CAPS[name]).micro:
                return False
            cap = LIFETIME[name]
            if cap is not None and self.lifetime(name) + micro > Cost.pure(cap).micro:
                return False
            if delta == 0:
                continue
            if self.delta.get((name, window), 0) + delta > to_delta_units(DELTA_CAPS[name]):
                return False
            dcap = DELTA_LIFETIME[name]
            if dcap is not None and self.lifetime(name, self.delta) + delta > to_delta_units(dcap):
                return False
        return True

    def add(self, pool: str, window: str, micro: int, delta: int = 0) -> None:
        for name in path(pool):
            self.spent[(name, window)] = self.spent.get((name, window), 0) + micro
            self.delta[(name, window)] = self.delta.get((name, window), 0) + delta


class LedgerMachine(RuleBasedStateMachine):
    pg_database: str | None = None
    """Set: run on a fresh schema of this PostgreSQL database instead of a SQLite file."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="dpllm-ledger-prop-")
        self.schema: AbstractContextManager[str] | None = None
        self.ledger: SQLiteLedger | PostgresLedger
        if self.pg_database is None:
            self.ledger = SQLiteLedger(Path(self.dir) / "ledger.db")
        else:
            self.schema = pg_schema(self.pg_database)
            self.ledger = PostgresLedger(self.schema.__enter__())
        for name in ("global", "a", "b"):
            dcap = DELTA_LIFETIME[name]
            self.ledger.ensure_pool(
                pure_pool(
                    name, CAPS[name], lifetime=LIFETIME[name], parent=PARENT[name],
                    delta_window_cap=to_delta_units(DELTA_CAPS[name]),
                    delta_lifetime_cap=None if dcap is None else to_delta_units(dcap),
                )
            )  # fmt: skip
        self.model = Model()
        self.open: list[Open] = []
        self.n = 0

    @rule(
        pool=st.sampled_from(["a", "b", "global"]),
        window=st.sampled_from(WINDOWS),
        epsilon=st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.4]),
        delta=st.sampled_from([0.0, 0.0, 1e-7, 3e-7, 5e-7]),
    )
    def charge(self, pool: str, window: str, epsilon: float, delta: float) -> None:
        cost = Cost.pure(epsilon)
        self.n += 1
        cm = self.ledger.charging(
            query_id=f"q{self.n}", pool=pool, window=window, cost=cost, delta=delta
        )
        units = to_delta_units(delta)
        expected = self.model.fits(pool, window, cost.micro, units)
        try:
            handle = cm.__enter__()
        except BudgetExceeded:
            assert not expected
            return
        assert expected
        self.model.add(pool, window, cost.micro, units)
        self.open.append(Open(cm, handle, pool, window, cost.micro, units))

    @precondition(lambda self: self.open)
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        item = data.draw(st.sampled_from(self.open))
        item.handle.data_read()
        item.read = True

    @precondition(lambda self: self.open)
    @rule(data=st.data(), how=st.sampled_from(["store", "error", "leave"]))
    def close(self, data: st.DataObject, how: str) -> None:
        item = data.draw(st.sampled_from(self.open))
        self.open.remove(item)
        if how == "store":
            if not item.read:
                item.handle.data_read()
                item.read = True
            item.handle.store(
                make_release(item.handle.query_id, Cost(Cost.pure(0).measure, item.micro))
            )  # a release claiming no δ: allowed under any δ charged
            item.cm.__exit__(None, None, None)
        elif how == "error":
            error = RuntimeError("boom")
            assert not item.cm.__exit__(RuntimeError, error, None)
        else:
            item.cm.__exit__(None, None, None)
        if not item.read:  # refunded: the data was never read
            self.model.add(item.pool, item.window, -item.micro, -item.delta)

    @invariant()
    def caps_hold_and_balances_match(self) -> None:
        for name in ("global", "a", "b"):
            lifetime = 0
            for window in WINDOWS:
                balance = self.ledger.balance(name, window)
                assert balance.spent <= balance.effective_cap
                assert balance.spent == parts_sum(self.ledger, name, window)
                assert balance.spent == self.model.spent.get((name, window), 0)
                lifetime += balance.spent
            assert self.ledger.lifetime_spent(name) == lifetime
            if LIFETIME[name] is not None:
                assert lifetime <= Cost.pure(LIFETIME[name]).micro  # type: ignore[arg-type]
            delta_lifetime = 0
            for window in WINDOWS:
                balance = self.ledger.balance(name, window)
                assert balance.delta_spent <= balance.delta_window_cap
                assert balance.delta_spent == self.model.delta.get((name, window), 0)
                delta_lifetime += balance.delta_spent
            assert self.ledger.delta_lifetime_spent(name) == delta_lifetime
            dcap = DELTA_LIFETIME[name]
            if dcap is not None:
                assert delta_lifetime <= to_delta_units(dcap)

    def teardown(self) -> None:
        for item in self.open:
            item.cm.__exit__(None, None, None)
        self.ledger.close()
        if self.schema is not None:
            self.schema.__exit__(None, None, None)
        shutil.rmtree(self.dir, ignore_errors=True)


SETTINGS = settings(max_examples=40, stateful_step_count=25, deadline=None, database=None)
LedgerMachine.TestCase.settings = SETTINGS
test_ledger_state_machine = LedgerMachine.TestCase


@pytest.mark.postgres
def test_ledger_state_machine_on_postgres(pg_database: str) -> None:
    class OnPostgres(LedgerMachine):
        pass

    OnPostgres.pg_database = pg_database
    # Fewer examples: each is a schema of its own, and a step costs round trips.
    run_state_machine_as_test(
        OnPostgres, settings=settings(SETTINGS, max_examples=12, stateful_step_count=20)
    )
