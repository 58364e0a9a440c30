"""The order of a release: charge (durable) → read → noise → store → return.

A spy engine counts every row read (``fetch``) and, at each read, looks at the ledger:
the query's charge must already be committed. A query the budget refuses or queues
reads nothing at all (the schema check reads column names, never rows).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from dpllm.data.engines import SQLiteEngine
from dpllm.data.queries import FeedbackCount, MeanRating, RatingHistogram
from dpllm.data.stats import StatsRunner
from dpllm.errors import BudgetExceeded, BudgetPending
from dpllm.ledger import PoolSpec, SQLiteLedger
from dpllm.release import Measure
from tests.data._helpers import COLUMNS, WEEK, random_records, write_sqlite


class SpyEngine(SQLiteEngine):
    """SQLite, counting row reads and recording the pool's spend at each one."""

    def __init__(self, path: Path, ledger: SQLiteLedger, pool: str) -> None:
        super().__init__(path)
        self.reads = 0
        self.spent_at_read: list[int] = []
        self._ledger, self._pool = ledger, pool

    def fetch(self, statement: Any, *, query: str = "a statistic") -> Any:
        self.reads += 1
        self.spent_at_read.append(self._ledger.balance(self._pool, WEEK).spent)
        return super().fetch(statement, query=query)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_sqlite(tmp_path / "f.db", random_records(random.Random(5), users=20, heavy=1))


def _setup(tmp_path: Path, data: Path, pool: PoolSpec) -> tuple[SpyEngine, StatsRunner]:
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    ledger.ensure_pool(pool)
    engine = SpyEngine(data, ledger, pool.name)
    runner = StatsRunner(engine, ledger, dataset_id="t", pool=pool.name, columns=COLUMNS, salt=b"s")
    return engine, runner


def test_a_query_refused_for_budget_reads_no_row(tmp_path: Path, data: Path) -> None:
    engine, runner = _setup(tmp_path, data, PoolSpec("p", Measure.PURE, window_cap=100_000))
    with pytest.raises(BudgetExceeded):
        runner.release(FeedbackCount(epsilon=0.5), WEEK)
    assert engine.reads == 0


def test_a_batch_refused_for_budget_reads_no_row(tmp_path: Path, data: Path) -> None:
    engine, runner = _setup(tmp_path, data, PoolSpec("p", Measure.PURE, window_cap=600_000))
    queries = {
        "count": FeedbackCount(epsilon=0.3),
        "mean": MeanRating(epsilon=0.3),
        "hist": RatingHistogram(epsilon=0.3),
    }
    with pytest.raises(BudgetExceeded):
        runner.release_all(queries, WEEK)
    assert engine.reads == 0


def test_a_queued_query_reads_no_row(tmp_path: Path, data: Path) -> None:
    pool = PoolSpec("p", Measure.PURE, window_cap=100_000, on_exceed="queue")
    engine, runner = _setup(tmp_path, data, pool)
    with pytest.raises(BudgetPending):
        runner.release(FeedbackCount(epsilon=0.5), WEEK)
    assert engine.reads == 0


def test_every_read_comes_after_its_charge(tmp_path: Path, data: Path) -> None:
    engine, runner = _setup(tmp_path, data, PoolSpec("p", Measure.PURE, window_cap=3_000_000))
    runner.release(FeedbackCount(epsilon=0.5), WEEK)
    assert engine.spent_at_read == [500_000]
    runner.release(FeedbackCount(epsilon=0.5), WEEK)  # cached: no read, no charge
    assert engine.reads == 1
    runner.release_all({"m": MeanRating(epsilon=0.5), "h": RatingHistogram(epsilon=0.5)}, WEEK)
    # One shared read for the batch, after both of its charges.
    assert engine.spent_at_read[1:] == [1_500_000]
