"""Engines: identical exact aggregates on SQLite, DuckDB (file and Parquet) and PostgreSQL."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

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
from dpllm.data.topics import NewKeywords, TopicCounts, TopTopics
from dpllm.errors import DataError, UnsafeIdentifier
from dpllm.windows import week_bounds
from tests.data._helpers import (
    COLUMNS,
    COURSES,
    WEEK,
    random_records,
    write_duckdb,
    write_parquet,
    write_pg,
    write_sqlite,
)

QUERIES: list[Query] = [
    FeedbackCount(epsilon=1.0, max_records=3),
    ActiveUsers(epsilon=1.0),
    MeanRating(epsilon=1.0),
    MeanRating(epsilon=1.0, out_of_range="drop"),
    RatingHistogram(epsilon=1.0, max_records=4),
    RatingHistogram(epsilon=1.0, max_records=4, out_of_range="drop"),
    CourseBreakdown(epsilon=1.0, courses=COURSES, max_courses=2, max_records=3),
    TopicCounts(epsilon=1.0, max_topics=2),
    TopTopics(epsilon=1.0, k=2),
    NewKeywords(epsilon=1.0),
]


def exact_all(
    engine: Engine, window: str = WEEK
) -> list[tuple[tuple[float, ...], tuple[str, ...]]]:
    start, end = week_bounds(window)
    scope = Scope(engine, COLUMNS, window, start, end, b"test-salt")
    out = []
    for q in QUERIES:
        e = q.measure(scope)
        out.append((e.values, e.labels))
    return out


@pytest.fixture(scope="module")
def records() -> list:  # type: ignore[type-arg]
    return random_records(random.Random(7), users=40, heavy=3)


@pytest.mark.postgres
def test_same_exact_aggregates_on_every_engine(
    tmp_path: Path,
    records: list,
    pg_dsn: str,  # type: ignore[type-arg]
) -> None:
    engines: dict[str, Engine] = {
        "sqlite": SQLiteEngine(write_sqlite(tmp_path / "f.db", records)),
        "duckdb": DuckDBEngine(write_duckdb(tmp_path / "f.duckdb", records)),
        "parquet": DuckDBEngine(write_parquet(tmp_path / "f.parquet", records)),
        "postgres": PostgresEngine(write_pg(pg_dsn, records)),
    }
    try:
        for window in (WEEK, "2026-W46", "2026-W49"):
            results = {name: exact_all(e, window) for name, e in engines.items()}
            assert results["sqlite"] == results["duckdb"] == results["parquet"]
            assert results["sqlite"] == results["postgres"]
        # Not vacuous: the week holds data and the bounds bite.
        sqlite_week = exact_all(engines["sqlite"])
    finally:
        for e in engines.values():
            e.close()  # type: ignore[attr-defined]
    assert sqlite_week[0][0][0] > 0
    assert sqlite_week[0][0][0] < sum(1 for r in records if r.user is not None)


def test_csv_engine_matches_sqlite(tmp_path: Path, records: list) -> None:  # type: ignore[type-arg]
    import duckdb

    pq = write_parquet(tmp_path / "f.parquet", records)
    csv = tmp_path / "f.csv"
    conn = duckdb.connect()
    conn.execute("COPY (SELECT * FROM read_parquet(?)) TO '" + str(csv) + "' (HEADER)", [str(pq)])
    conn.close()
    sqlite = exact_all(SQLiteEngine(write_sqlite(tmp_path / "f.db", records)))
    assert exact_all(DuckDBEngine(csv)) == sqlite


def test_missing_files_are_data_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        SQLiteEngine(tmp_path / "nope.db")
    with pytest.raises(DataError, match="does not exist"):
        DuckDBEngine(tmp_path / "nope.parquet")
    with pytest.raises(DataError, match="does not exist"):
        DuckDBEngine([str(tmp_path / "*.parquet")])


def test_sqlite_never_creates_or_writes(tmp_path: Path, records: list) -> None:  # type: ignore[type-arg]
    from dpllm.data.sql import Statement

    engine = SQLiteEngine(write_sqlite(tmp_path / "f.db", records))
    with pytest.raises(DataError, match="readonly|read-only"):
        engine.fetch(Statement("DELETE FROM feedback"))


def test_unknown_table_and_columns(tmp_path: Path, records: list) -> None:  # type: ignore[type-arg]
    engine = SQLiteEngine(write_sqlite(tmp_path / "f.db", records))
    assert engine.column_names("feedback") == {"user_id", "rating", "text", "ts", "course"}
    with pytest.raises(DataError, match="no such table"):
        engine.column_names("other")
    duck = DuckDBEngine(write_duckdb(tmp_path / "f.duckdb", records))
    with pytest.raises(DataError):
        duck.column_names("other")


@pytest.mark.postgres
def test_postgres_errors_are_data_errors(pg_dsn: str) -> None:
    with PostgresEngine(pg_dsn) as engine, pytest.raises(DataError, match="PostgreSQL"):
        engine.column_names("feedback")
    with pytest.raises(DataError, match="cannot connect"):
        PostgresEngine("postgresql://postgres@127.0.0.1:1/none", connect_timeout=1)


@pytest.mark.parametrize(
    "name",
    [
        'feedback"; DROP TABLE feedback; --',
        "user id",
        "ts)--",
        "a.b",
        "1abc",
        "",
        "rating'",
        "x" * 64,
        "名字",
    ],
)
def test_injection_in_identifiers_is_refused(name: str) -> None:
    from dpllm.data.sql import ColumnMap

    for field in ("table", "user", "rating", "text", "timestamp", "course"):
        with pytest.raises(UnsafeIdentifier):
            ColumnMap(**{field: name})
    with pytest.raises(UnsafeIdentifier):
        SQLiteEngine.relation(None, name)  # type: ignore[arg-type]
