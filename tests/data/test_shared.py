"""The shared per-user summary: the same exact aggregates as the per-query SQL on every
engine, and a batched ``release_all`` that keeps the ledger order for each query."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpllm.data.engines import DuckDBEngine, Engine, PostgresEngine, SQLiteEngine
from dpllm.data.queries import (
    ActiveUsers,
    CourseBreakdown,
    FeedbackCount,
    MeanRating,
    Query,
    RatingHistogram,
    Scope,
)
from dpllm.data.shared import is_shareable, measure_shared, plan_for
from dpllm.data.sql import ColumnMap, Statement
from dpllm.data.stats import StatsRunner
from dpllm.data.topics import TopicCounts
from dpllm.errors import BudgetExceeded, DataError
from dpllm.ledger.base import PoolSpec
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.privacy.noise import SeededNoise
from dpllm.release import Measure
from tests.data._helpers import (
    COLUMNS,
    COURSES,
    WEEK,
    max_user,
    random_records,
    write_duckdb,
    write_parquet,
    write_pg,
    write_sqlite,
)

SHARED: list[Query] = [
    FeedbackCount(epsilon=0.1, max_records=3),
    FeedbackCount(epsilon=0.1),
    ActiveUsers(epsilon=0.1),
    MeanRating(epsilon=0.2),
    MeanRating(epsilon=0.2, out_of_range="drop"),
    MeanRating(epsilon=0.2, out_of_range="reject"),
    RatingHistogram(epsilon=0.1, max_records=4),
    RatingHistogram(epsilon=0.1, out_of_range="drop"),
    RatingHistogram(epsilon=0.1, max_records=2, out_of_range="reject"),
]
WEEKLY: dict[str, Query] = {
    "feedback_count": FeedbackCount(epsilon=0.1),
    "active_users": ActiveUsers(epsilon=0.1),
    "mean_rating": MeanRating(epsilon=0.3),
    "rating_histogram": RatingHistogram(epsilon=0.2),
}
WINDOWS = (WEEK, "2026-W46", "2026-W48", "2030-W01")  # the last one is empty


def _outcome(fn: object) -> object:
    """The exact values, or the refusal's message (the 'reject' queries)."""
    try:
        return fn().values  # type: ignore[operator]
    except DataError as exc:
        return f"DataError: {exc}"


def _compare(engine: Engine, window: str) -> tuple[list[object], list[object]]:
    from dpllm.windows import week_bounds

    start, end = week_bounds(window)
    scope = Scope(engine, COLUMNS, window, start, end, b"salt")
    summary = measure_shared(SHARED, scope)
    per_query = [_outcome(lambda q=q: q.measure(scope)) for q in SHARED]
    shared = [_outcome(lambda q=q: summary.exact(q)) for q in SHARED]
    return per_query, shared


@pytest.fixture(scope="module")
def records() -> list:  # type: ignore[type-arg]
    return random_records(random.Random(5), users=40, heavy=3)


def _engines(tmp: Path, records: list, pg_dsn: str | None) -> dict[str, Engine]:  # type: ignore[type-arg]
    engines: dict[str, Engine] = {
        "sqlite": SQLiteEngine(write_sqlite(tmp / "f.db", records)),
        "duckdb": DuckDBEngine(write_duckdb(tmp / "f.duckdb", records)),
        "parquet": DuckDBEngine(write_parquet(tmp / "f.parquet", records)),
    }
    if pg_dsn is not None:
        engines["postgres"] = PostgresEngine(write_pg(pg_dsn, records))
    return engines


@pytest.mark.postgres
def test_shared_summary_equals_the_per_query_sql_on_every_engine(
    tmp_path: Path,
    records: list,  # type: ignore[type-arg]
    pg_dsn: str,
) -> None:
    engines = _engines(tmp_path, records, pg_dsn)
    try:
        outcomes = {}
        for name, engine in engines.items():
            for window in WINDOWS:
                per_query, shared = _compare(engine, window)
                assert shared == per_query, (name, window)
                outcomes[name, window] = shared
        for window in WINDOWS:
            assert len({repr(outcomes[name, window]) for name in engines}) == 1
    finally:
        for e in engines.values():
            e.close()  # type: ignore[attr-defined]
    # Not vacuous: the week has data and bounds bite; 'reject' excludes the
    # out-of-range ratings exactly as 'drop' does, and nothing is refused.
    week = outcomes["sqlite", WEEK]
    assert week[0][0] < week[1][0]  # type: ignore[index]
    assert week[5] == week[4] != week[3]
    assert not any(str(v).startswith("DataError") for v in week)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), heavy=st.booleans())
def test_shared_summary_equals_the_per_query_sql_on_random_data(seed: int, heavy: bool) -> None:
    rng = random.Random(seed)
    recs = random_records(rng, users=rng.randint(0, 12), heavy=rng.randint(0, 2))
    if heavy:
        recs += max_user(rng, "heavy", n=rng.randint(5, 60))
    with (
        tempfile.TemporaryDirectory() as tmp,
        SQLiteEngine(write_sqlite(Path(tmp) / "d.db", recs)) as e,
    ):
        per_query, shared = _compare(e, WEEK)
    assert shared == per_query


def test_only_the_exact_query_types_share() -> None:
    class Sub(FeedbackCount):
        pass

    assert all(is_shareable(q) for q in SHARED)
    for q in (
        Sub(epsilon=1.0),
        TopicCounts(epsilon=1.0),
        CourseBreakdown(epsilon=1.0, courses=COURSES),
    ):
        assert not is_shareable(q)
        with pytest.raises(TypeError):
            plan_for([q])
    plan = plan_for([FeedbackCount(epsilon=1.0), FeedbackCount(epsilon=2.0), *SHARED])
    assert plan.record_caps == (5, 3)


def test_the_summary_hides_its_numbers() -> None:
    from dpllm.data.shared import SharedSummary

    assert "42" not in repr(SharedSummary({("users",): 42}))


# -- the batched runner -----------------------------------------------------------------


class Spy:
    """An engine that counts the statements it runs (metadata probes included)."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self.fetches = 0

    @property
    def dialect(self):  # type: ignore[no-untyped-def]
        return self.inner.dialect

    @property
    def identity(self) -> object:
        return getattr(self.inner, "identity", None)  # the same data: the same query ids

    def relation(self, columns: ColumnMap) -> Statement:
        return self.inner.relation(columns)

    def fetch(self, statement: Statement, *, query: str = "?") -> list[tuple[object, ...]]:
        self.fetches += 1
        return self.inner.fetch(statement, query=query)

    def column_names(self, table: str) -> frozenset[str]:
        return self.inner.column_names(table)


def _ledger(path: Path, cap: int = 10_000_000) -> SQLiteLedger:
    led = SQLiteLedger(path)
    led.mark_test_ledger()  # the runners here use seeded noise
    led.ensure_pool(PoolSpec("stats", Measure.PURE, window_cap=cap))
    return led


def _runner(engine: Engine, ledger: SQLiteLedger, seed: int = 1) -> StatsRunner:
    return StatsRunner(
        engine,
        ledger,
        dataset_id="t",
        pool="stats",
        columns=COLUMNS,
        salt=b"s",
        noise=SeededNoise(seed),
    )


@pytest.fixture
def data(tmp_path: Path, records: list) -> Path:  # type: ignore[type-arg]
    return write_sqlite(tmp_path / "f.db", records)


@pytest.mark.postgres
def test_batched_release_all_equals_the_per_query_path_on_every_engine(
    tmp_path: Path,
    records: list,  # type: ignore[type-arg]
    pg_dsn: str,
) -> None:
    queries = {**WEEKLY, "topic_counts": TopicCounts(epsilon=0.3)}
    engines = _engines(tmp_path, records, pg_dsn)
    try:
        for name, engine in engines.items():
            spy = Spy(engine)
            one = _ledger(tmp_path / f"{name}-1.db")
            two = _ledger(tmp_path / f"{name}-2.db")
            batched = _runner(spy, one).release_all(queries, WEEK)
            assert spy.fetches == 2, name  # one shared summary + the topic query
            per_query = _runner(engine, two).release_all(queries, WEEK, shared=False)
            assert list(batched) == list(queries)
            assert {k: r.to_dict() for k, r in batched.items()} == {
                k: r.to_dict() for k, r in per_query.items()
            }, name
            assert one.balance("stats", WEEK) == two.balance("stats", WEEK)
            events = [e.event for e in one.history()]
            assert sorted(events) == sorted(e.event for e in two.history())
            # The batch charges all four before it stores any (then the topic query).
            shared = [e for e in events if e in ("charge", "release")][:8]
            assert shared == ["charge"] * 4 + ["release"] * 4
    finally:
        for e in engines.values():
            e.close()  # type: ignore[attr-defined]


def test_a_refused_charge_in_a_batch_reads_nothing_and_charges_nothing(
    tmp_path: Path, data: Path
) -> None:
    total = sum(q.cost.micro for q in WEEKLY.values())
    ledger = _ledger(tmp_path / "ledger.db", cap=total - 1)
    spy = Spy(SQLiteEngine(data))
    with pytest.raises(BudgetExceeded):
        _runner(spy, ledger).release_all(WEEKLY, WEEK)
    assert spy.fetches == 0
    assert ledger.balance("stats", WEEK).spent == 0
    assert ledger.unreleased() == []
    events = [e.event for e in ledger.history()]
    assert events.count("charge") == events.count("refund") == len(WEEKLY) - 1
    assert events.count("refuse") == 1
    for q in WEEKLY.values():
        assert ledger.get_release(_runner(spy, ledger).query_id(q, WEEK)) is None


def test_cached_queries_are_neither_charged_nor_read_again(tmp_path: Path, data: Path) -> None:
    ledger = _ledger(tmp_path / "ledger.db")
    spy = Spy(SQLiteEngine(data))
    runner = _runner(spy, ledger)
    count = runner.release(WEEKLY["feedback_count"], WEEK)
    assert spy.fetches == 1
    out = runner.release_all(WEEKLY, WEEK)
    assert spy.fetches == 2  # one shared read for the three uncached queries
    assert out["feedback_count"].to_dict() == count.to_dict()
    assert ledger.balance("stats", WEEK).spent == sum(q.cost.micro for q in WEEKLY.values())
    again = runner.release_all(WEEKLY, WEEK)
    assert spy.fetches == 2
    assert {k: r.to_dict() for k, r in again.items()} == {k: r.to_dict() for k, r in out.items()}


def test_one_charge_per_query_id_in_a_batch(tmp_path: Path, data: Path) -> None:
    ledger = _ledger(tmp_path / "ledger.db")
    q = MeanRating(epsilon=0.3)
    out = _runner(SQLiteEngine(data), ledger).release_all(
        {"a": q, "b": MeanRating(epsilon=0.3), "c": ActiveUsers(epsilon=0.1)}, WEEK
    )
    assert out["a"] is out["b"]
    assert ledger.balance("stats", WEEK).spent == q.cost.micro + 100_000


def test_reject_in_a_batch_releases_everything(tmp_path: Path, data: Path) -> None:
    # The fixture week holds ratings such as 0, 6 and 9.5: 'reject' excludes them
    # as records (like NULLs) and every query of the batch is released and stored.
    ledger = _ledger(tmp_path / "ledger.db")
    queries = {
        **WEEKLY,
        "strict": RatingHistogram(epsilon=0.2, out_of_range="reject"),
        "strict_mean": MeanRating(epsilon=0.2, out_of_range="reject"),
    }
    runner = _runner(SQLiteEngine(data), ledger)
    out = runner.release_all(queries, WEEK)
    assert set(out) == set(queries)
    for q in queries.values():
        assert ledger.get_release(runner.query_id(q, WEEK)) is not None
    assert list(ledger.unreleased()) == []


def test_failures_before_the_read_charge_nothing_in_a_batch(tmp_path: Path, data: Path) -> None:
    from dpllm.data.sql import ColumnMap

    ledger = _ledger(tmp_path / "ledger.db")
    runner = StatsRunner(
        SQLiteEngine(data), ledger, dataset_id="t", pool="stats", columns=ColumnMap(rating="stars")
    )
    with pytest.raises(DataError, match="unknown column 'stars'"):
        runner.release_all(WEEKLY, WEEK)
    with pytest.raises(DataError, match="ISO week"):
        runner.release_all(WEEKLY, "last week")
    assert ledger.balance("stats", WEEK).spent == 0
