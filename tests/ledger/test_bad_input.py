"""Bad input: each a clear error from dpllm's tree, and nothing recorded."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from dpllm.errors import (
    DataError,
    DPLLMError,
    InvalidPrivacyParameter,
    LedgerUnavailable,
    UnknownPool,
)
from dpllm.ledger.base import release_once
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost
from tests.ledger.conftest import WEEK, compute_for, pure_pool


def _snapshot(ledger: SQLiteLedger) -> tuple[Any, ...]:
    return (
        len(ledger.history()),
        ledger.balances(),
        ledger._query("SELECT COUNT(*) FROM charges"),
        ledger.pending(status=None),
    )


@pytest.mark.parametrize("amount", [-0.1, math.nan, math.inf, -math.inf, True, None])
def test_costs_that_cannot_exist(amount: Any) -> None:
    with pytest.raises(InvalidPrivacyParameter):
        Cost.pure(amount)
    with pytest.raises(InvalidPrivacyParameter):
        Cost.zcdp(amount)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"cost": 0.1}, InvalidPrivacyParameter, "must be a dpllm Cost"),
        ({"cost": Cost.zcdp(0.1)}, InvalidPrivacyParameter, "zCDP does not imply pure DP"),
        ({"pool": "nobody"}, UnknownPool, "unknown pool 'nobody'"),
        ({"window": "2026-47"}, DataError, "malformed window"),
        ({"window": "2025-W53"}, DataError, "2025 has ISO weeks 1–52"),
        ({"window": 202647}, DataError, "must be an ISO week"),
        ({"window": "２０２６-W４７"}, DataError, "malformed window"),
        ({"window": "2026-W47\n"}, DataError, "malformed window"),
        ({"query_id": ""}, InvalidPrivacyParameter, "query_id"),
        ({"analyst": ""}, InvalidPrivacyParameter, "analyst"),
    ],
)
def test_bad_charge_requests_record_nothing(
    ledger: SQLiteLedger, change: dict[str, Any], error: type[Exception], match: str
) -> None:
    ledger.ensure_pool(pure_pool("p", 1.0))
    before = _snapshot(ledger)
    request: dict[str, Any] = {"query_id": "q", "pool": "p", "window": WEEK, "cost": Cost.pure(0.1)}
    request.update(change)
    with pytest.raises(error, match=match) as info:
        release_once(ledger, compute=compute_for("q", Cost.pure(0.1)), **request)
    assert isinstance(info.value, DPLLMError)
    assert _snapshot(ledger) == before


def test_unknown_pool_in_balance(ledger: SQLiteLedger) -> None:
    with pytest.raises(UnknownPool, match="ensure_pool"):
        ledger.balance("nobody", WEEK)
    with pytest.raises(DataError):
        ledger.balance("nobody", "week 47")


def test_unknown_parent(ledger: SQLiteLedger) -> None:
    with pytest.raises(UnknownPool):
        ledger.ensure_pool(pure_pool("child", 1.0, parent="missing"))
    assert ledger.pools() == []


@pytest.mark.parametrize("where", ["directory", "under_a_file"])
def test_unwritable_database_file(tmp_path: Path, where: str) -> None:
    if where == "directory":
        path = tmp_path / "is_a_dir"
        path.mkdir()
    else:
        (tmp_path / "plain").write_text("not a directory")
        path = tmp_path / "plain" / "ledger.db"
    with pytest.raises(LedgerUnavailable) as info:
        SQLiteLedger(path)
    assert str(path.name) in str(info.value) or str(path.parent) in str(info.value)


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    path.write_bytes(b"this is not an SQLite file" * 200)
    with pytest.raises(LedgerUnavailable):
        SQLiteLedger(path)


def test_missing_ledger_without_create(tmp_path: Path) -> None:
    with pytest.raises(LedgerUnavailable, match="no ledger"):
        SQLiteLedger(tmp_path / "absent.db", create=False)
    assert not (tmp_path / "absent.db").exists()


def test_read_only_database_refuses_charges(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(path)
    ledger.ensure_pool(pure_pool("p", 1.0))
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    ledger._local.conn = conn  # simulate a file this process may not write
    with pytest.raises(LedgerUnavailable, match="Nothing was recorded"):
        release_once(ledger, query_id="q", pool="p", window=WEEK, cost=Cost.pure(0.1),
                     compute=compute_for("q", Cost.pure(0.1)))  # fmt: skip
    ledger._local.conn = None
    fresh = SQLiteLedger(path)
    assert fresh.balance("p", WEEK).spent == 0


@pytest.mark.parametrize("field", ["query_id", "analyst", "description"])
@pytest.mark.parametrize("bad", ["nul \x00 byte", "lone \ud800 surrogate"])
def test_unstorable_text_is_refused_before_anything_is_spent(
    ledger_factory: Any, field: str, bad: str
) -> None:
    ledger = ledger_factory()
    ledger.ensure_pool(pure_pool("p", 1.0))
    with ledger.charging(query_id="warm", pool="p", window=WEEK, cost=Cost.pure(0.1)):
        pass  # refunded; the pool's path is now cached (PostgreSQL's one-trip charge)
    events = len(ledger.history())
    request = {"query_id": "q", "analyst": "ana", "description": ""} | {field: bad}
    with pytest.raises(InvalidPrivacyParameter, match=field):
        with ledger.charging(pool="p", window=WEEK, cost=Cost.pure(0.1), **request):
            pass
    assert ledger.balance("p", WEEK).spent == 0
    assert len(ledger.history()) == events
