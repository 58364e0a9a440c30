"""StatsRunner.release_many: N windows, one read, one charge and one cache entry each."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dpllm.data import stats as stats_module
from dpllm.data.engines import SQLiteEngine
from dpllm.data.queries import FeedbackCount, MeanRating, Query
from dpllm.data.stats import StatsRunner, default_catalogue
from dpllm.errors import BudgetExceeded, DataError
from dpllm.ledger.base import PoolSpec
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Measure
from tests.data._helpers import COLUMNS, COURSES, random_records, write_sqlite

WEEKS = ["2026-W46", "2026-W47", "2026-W48"]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_sqlite(tmp_path / "f.db", random_records(random.Random(5), users=30, heavy=2))


@pytest.fixture
def ledger(tmp_path: Path) -> SQLiteLedger:
    led = SQLiteLedger(tmp_path / "ledger.db")
    led.ensure_pool(PoolSpec("stats", Measure.PURE, window_cap=3_000_000))
    return led


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The windows of every read measure_windows makes."""
    seen: list[list[str]] = []
    real = stats_module.measure_windows

    def spy(queries: Sequence[Query], scope: Any, windows: Sequence[str]) -> Any:
        seen.append(list(windows))
        return real(queries, scope, windows)

    monkeypatch.setattr(stats_module, "measure_windows", spy)
    return seen


def runner(data: Path, ledger: SQLiteLedger) -> StatsRunner:
    return StatsRunner(
        SQLiteEngine(data), ledger, dataset_id="test", pool="stats", columns=COLUMNS, salt=b"s"
    )


def test_each_window_is_its_own_charge_and_cache_entry(
    data: Path, ledger: SQLiteLedger, reads: list[list[str]]
) -> None:
    cat = default_catalogue(courses=COURSES)
    out = runner(data, ledger).release_many(cat, WEEKS)
    assert list(out) == WEEKS and all(set(rels) == set(cat) for rels in out.values())
    assert reads == [WEEKS]  # one read for all windows and queries
    total = sum(q.cost.micro for q in cat.values())
    assert [ledger.balance("stats", w).spent for w in WEEKS] == [total] * 3
    for w in WEEKS:
        for name, rel in out[w].items():
            assert rel.window == w
            # The same release as a one-window call, from the cache, at no cost.
            assert runner(data, ledger).release(cat[name], w).to_dict() == rel.to_dict()
    assert [ledger.balance("stats", w).spent for w in WEEKS] == [total] * 3
    again = runner(data, ledger).release_many(cat, WEEKS)
    assert reads == [WEEKS]  # all cached: nothing read
    assert {w: {n: r.to_dict() for n, r in rels.items()} for w, rels in again.items()} == {
        w: {n: r.to_dict() for n, r in rels.items()} for w, rels in out.items()
    }


def test_a_cached_window_is_not_read_again(
    data: Path, ledger: SQLiteLedger, reads: list[list[str]]
) -> None:
    q = {"mean_rating": MeanRating(epsilon=0.5)}
    first = runner(data, ledger).release_many(q, ["2026-W47"])
    out = runner(data, ledger).release_many(q, WEEKS)
    assert reads == [["2026-W47"], ["2026-W46", "2026-W48"]]
    assert out["2026-W47"]["mean_rating"].to_dict() == first["2026-W47"]["mean_rating"].to_dict()
    assert ledger.balance("stats", "2026-W47").spent == 500_000


def test_a_refusal_in_one_window_charges_nothing_anywhere(
    data: Path, ledger: SQLiteLedger, reads: list[list[str]]
) -> None:
    r = runner(data, ledger)
    r.release(FeedbackCount(epsilon=2.5), "2026-W48")  # leaves 0.5 in W48
    with pytest.raises(BudgetExceeded):
        r.release_many({"m": MeanRating(epsilon=1.0)}, WEEKS)
    assert [ledger.balance("stats", w).spent for w in WEEKS] == [0, 0, 2_500_000]
    assert reads == []


def test_bad_windows_charge_nothing(data: Path, ledger: SQLiteLedger) -> None:
    r = runner(data, ledger)
    with pytest.raises(DataError):
        r.release_many({"m": MeanRating(epsilon=1.0)}, ["2026-W47", "2026-W60"])
    with pytest.raises(DataError):
        r.release_many({"m": MeanRating(epsilon=1.0)}, [])
    assert ledger.balance("stats", "2026-W47").spent == 0


def test_trend_reads_once(data: Path, ledger: SQLiteLedger, reads: list[list[str]]) -> None:
    out = runner(data, ledger).trend(FeedbackCount(epsilon=0.5), WEEKS)
    assert list(out) == WEEKS and reads == [WEEKS]
    assert all(ledger.balance("stats", w).spent == 500_000 for w in WEEKS)
