"""Ledger fixtures, written against a backend-neutral factory.

Every ledger test takes ``ledger_factory`` (or ``ledger``), so the same suite can
be parametrised over PostgreSQL when that backend lands (issue 10): add
``"postgres"`` to ``BACKENDS`` and a branch in :meth:`LedgerFactory.__call__`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dpllm.ledger.base import PoolSpec
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost, Measure, Release

BACKENDS = ["sqlite"]
WEEK = "2026-W47"


@dataclass(frozen=True)
class LedgerFactory:
    """Opens ledgers on one shared store; call it again (in any process) for a new handle."""

    backend: str
    location: str

    def __call__(self, **kwargs: Any) -> SQLiteLedger:
        if self.backend == "sqlite":
            return SQLiteLedger(self.location, **kwargs)
        raise AssertionError(f"unknown backend {self.backend}")  # pragma: no cover


@pytest.fixture(params=BACKENDS)
def ledger_factory(request: pytest.FixtureRequest, tmp_path: Path) -> LedgerFactory:
    return LedgerFactory(request.param, str(tmp_path / "ledger.db"))


@pytest.fixture
def ledger(ledger_factory: LedgerFactory) -> SQLiteLedger:
    return ledger_factory()


def pure_pool(name: str, cap: float, **kwargs: Any) -> PoolSpec:
    """A pure ε pool with window cap ``cap`` (ε)."""
    lifetime = kwargs.pop("lifetime", None)
    return PoolSpec(
        name,
        Measure.PURE,
        Cost.pure(cap).micro,
        lifetime_cap=None if lifetime is None else Cost.pure(lifetime).micro,
        **kwargs,
    )


def make_release(query_id: str, cost: Cost, value: float = 42.0, name: str = "count") -> Release:
    return Release(
        name=name,
        values=(value,),
        intervals=((value - 5.0, value + 5.0),),
        mechanism="discrete_laplace",
        noise_scale=2.0,
        cost=cost,
        fingerprint=query_id,
        window=WEEK,
    )


def compute_for(query_id: str, cost: Cost, value: float = 42.0) -> Callable[[], Release]:
    return lambda: make_release(query_id, cost, value)


def parts_sum(ledger: SQLiteLedger, pool: str, window: str) -> int:
    """Σ of the recorded charge parts of ``pool`` in ``window`` (the ledger's own rows)."""
    rows = ledger._query(
        "SELECT COALESCE(SUM(micro), 0) FROM charge_parts WHERE pool = :p AND window_key = :w",
        {"p": pool, "w": window},
    )
    return int(rows[0][0])


def audit_count(ledger: SQLiteLedger, event: str, query_id: str | None = None) -> int:
    return sum(
        1
        for e in ledger.history()
        if e.event == event and (query_id is None or e.query_id == query_id)
    )
