"""Ledger fixtures, written against a backend-neutral factory.

Every ledger test takes ``ledger_factory`` (or ``ledger``), so the whole suite
runs on SQLite and on PostgreSQL. The ``postgres`` parameter gets a fresh
schema in a throwaway database made once per test session from ``pg_server``
(which skips on a laptop without PostgreSQL and fails when ``CI=true``): a
``CREATE DATABASE`` costs about a second and a schema a few milliseconds, and
the ledger sees an empty database either way (its tables are found through
``search_path``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dpllm.ledger.base import PoolSpec
from dpllm.ledger.postgres import PostgresLedger
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost, Measure, Release

BACKENDS = [
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
]
WEEK = "2026-W47"


@dataclass(frozen=True)
class LedgerFactory:
    """Opens ledgers on one shared store; call it again (in any process) for a new handle."""

    backend: str
    location: str

    def __call__(self, **kwargs: Any) -> Any:
        """A new handle: a :class:`SQLiteLedger` or a :class:`PostgresLedger`."""
        if self.backend == "sqlite":
            return SQLiteLedger(self.location, **kwargs)
        if self.backend == "postgres":
            return PostgresLedger(self.location, **kwargs)
        raise AssertionError(f"unknown backend {self.backend}")  # pragma: no cover


@pytest.fixture(scope="session")
def pg_database(pg_server: str) -> Iterator[str]:
    """A throwaway database for this test session; dropped at its end."""
    import psycopg

    name = f"dpllm_ledger_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield pg_server.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def pg_schema(database: str) -> Iterator[str]:
    """A fresh, empty schema in ``database``; the URL that makes it the ledger's."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{database}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def pg_ledger_url(pg_database: str) -> Iterator[str]:
    """A PostgreSQL ledger URL on an empty schema of its own."""
    with pg_schema(pg_database) as url:
        yield url


@pytest.fixture(params=BACKENDS)
def ledger_factory(request: pytest.FixtureRequest, tmp_path: Path) -> LedgerFactory:
    if request.param == "postgres":
        return LedgerFactory("postgres", request.getfixturevalue("pg_ledger_url"))
    return LedgerFactory(request.param, str(tmp_path / "ledger.db"))


@pytest.fixture
def ledger(ledger_factory: LedgerFactory) -> Any:
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
