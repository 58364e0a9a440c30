"""Engines: identical exact aggregates on SQLite, DuckDB (file and Parquet) and PostgreSQL."""

from __future__ import annotations

import os
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


@pytest.mark.parametrize("engine", [SQLiteEngine, DuckDBEngine])
def test_paths_that_exist_but_are_not_files_say_what_they_are(
    tmp_path: Path, engine: type[SQLiteEngine] | type[DuckDBEngine]
) -> None:
    with pytest.raises(DataError, match="is a directory") as directory:
        engine(tmp_path)
    with pytest.raises(DataError, match="not a regular file") as device:
        engine(os.devnull)
    for info in (directory, device):
        assert "does not exist" not in str(info.value)


def test_sqlite_never_creates_or_writes(tmp_path: Path, records: list) -> None:  # type: ignore[type-arg]
    from dpllm.data.sql import Statement

    engine = SQLiteEngine(write_sqlite(tmp_path / "f.db", records))
    with pytest.raises(DataError, match="OperationalError"):
        engine.fetch(Statement("DELETE FROM feedback"))
    assert engine.fetch(Statement("SELECT COUNT(*) FROM feedback")) == [(len(records),)]


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
    from dpllm.data.sql import ColumnMap, quote_ident

    for field in ("table", "user", "rating", "text", "timestamp", "course"):
        with pytest.raises(UnsafeIdentifier):
            ColumnMap(**{field: name})
    with pytest.raises(UnsafeIdentifier):
        quote_ident(name)


# -- engine errors never carry records; no record can fail a query -----------------------

VICTIM_LINE = "victim,n/a,ok,2026-11-17 10:00:00,algebra"


def _csv(path: Path, lines: list[str]) -> Path:
    path.write_text("user_id,rating,text,ts,course\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def _assert_withheld(exc: DataError, secret: str, caplog: pytest.LogCaptureFixture) -> None:
    from dpllm.data.engines import DETAIL_LOGGER

    message = str(exc)
    assert secret not in message and "incident" in message and "withheld" in message
    # Nothing attached that a printed traceback would show.
    assert exc.__cause__ is None and exc.__context__ is None
    incident = message.split("incident ")[1].split(")")[0]
    detail = [r for r in caplog.records if r.name == DETAIL_LOGGER]
    assert detail and all(r.levelname == "DEBUG" for r in detail)
    assert incident in detail[-1].getMessage() and secret in detail[-1].getMessage()


def test_duckdb_errors_after_the_read_withhold_the_database_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from dpllm.data.engines import DETAIL_LOGGER
    from dpllm.data.sql import Statement

    csv = _csv(tmp_path / "f.csv", ["alice,4,fine,2026-11-16 09:00:00,algebra", VICTIM_LINE])
    engine = DuckDBEngine(csv)
    # A strict read (what read_csv_auto did when it sniffed an INTEGER column):
    # DuckDB's conversion error quotes the whole input line.
    strict = Statement(
        "SELECT SUM(rating) FROM read_csv(?, header = true, columns = {'user_id': 'VARCHAR', "
        "'rating': 'INTEGER', 'text': 'VARCHAR', 'ts': 'VARCHAR', 'course': 'VARCHAR'})",
        (str(csv),),
    )
    caplog.set_level(logging.DEBUG, logger=DETAIL_LOGGER)
    with pytest.raises(DataError) as info:
        engine.fetch(strict, query="feedback_count")
    assert "'feedback_count'" in str(info.value) and "DuckDB" in str(info.value)
    _assert_withheld(info.value, "victim", caplog)


def test_sqlite_errors_after_the_read_withhold_the_database_text(
    tmp_path: Path,
    records: list,
    caplog: pytest.LogCaptureFixture,  # type: ignore[type-arg]
) -> None:
    import logging

    from dpllm.data.engines import DETAIL_LOGGER
    from dpllm.data.sql import Statement

    engine = SQLiteEngine(write_sqlite(tmp_path / "f.db", records))
    caplog.set_level(logging.DEBUG, logger=DETAIL_LOGGER)
    # An error message built from a record's value.
    with pytest.raises(DataError) as info:
        engine.fetch(Statement("SELECT json(text) FROM feedback WHERE user_id = 'u1'"), query="q")
    _assert_withheld(info.value, "malformed JSON", caplog)


@pytest.mark.postgres
def test_postgres_errors_after_the_read_withhold_the_database_text(
    pg_dsn: str,
    records: list,  # type: ignore[type-arg]
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    from dpllm.data.engines import DETAIL_LOGGER
    from dpllm.data.sql import Statement

    write_pg(pg_dsn, records)
    caplog.set_level(logging.DEBUG, logger=DETAIL_LOGGER)
    with PostgresEngine(pg_dsn) as engine, pytest.raises(DataError) as info:
        # 'invalid input syntax for type integer: "u…"' quotes a user id.
        engine.fetch(Statement("SELECT SUM(CAST(user_id AS INTEGER)) FROM feedback"), query="q")
    _assert_withheld(info.value, '"u', caplog)


def test_a_malformed_csv_value_cannot_fail_a_query(tmp_path: Path) -> None:
    """Bad ratings, times and lines in one user's records: every query still answers,
    and a malformed rating is ignored like a NULL one (the same aggregates as SQLite
    holding NULL there)."""
    import datetime as dt

    from tests.data._helpers import MONDAY, Rec

    good = [
        Rec(f"u{i}", float(1 + i % 5), "老师讲解很清楚 homework", MONDAY + dt.timedelta(hours=i), c)
        for i, c in enumerate(COURSES * 3)
    ]
    lines = [f"{r.user},{r.rating},{r.text},{r.ts:%Y-%m-%d %H:%M:%S},{r.course}" for r in good]
    bad = [
        VICTIM_LINE,  # rating 'n/a': NULL
        "victim,4,late,not a time,algebra",  # timestamp that does not parse: in no week
        "victim,4,x,2026-11-17 10:00:00,algebra,extra,fields",  # malformed line: skipped
        "victim,3,short",  # too few fields: padded with NULLs, no timestamp, in no week
    ]
    # An unterminated quote hides the lines after it (CSV itself), so it goes last.
    csv = _csv(tmp_path / "f.csv", [*lines[:3], *bad, *lines[3:], 'victim,"5,unterminated'])
    null_rating = Rec("victim", None, "ok", MONDAY + dt.timedelta(days=1, hours=10), "algebra")
    sqlite = exact_all(SQLiteEngine(write_sqlite(tmp_path / "f.db", [*good, null_rating])))
    assert exact_all(DuckDBEngine(csv)) == sqlite


def test_duckdb_text_columns_are_read_without_failing(tmp_path: Path) -> None:
    """A .duckdb table whose rating and time columns are VARCHAR (values that do not parse)."""
    import duckdb

    path = tmp_path / "t.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(
        "CREATE TABLE feedback (user_id VARCHAR, rating VARCHAR, text VARCHAR, ts VARCHAR, "
        "course VARCHAR)"
    )
    conn.execute(
        "INSERT INTO feedback VALUES ('a', '4', 'x', '2026-11-16 10:00:00', 'algebra'), "
        "('b', 'n/a', 'x', '2026-11-16 11:00:00', 'algebra'), "
        "('c', '5', 'x', 'yesterday', 'algebra')"
    )
    conn.close()
    start, end = week_bounds(WEEK)
    scope = Scope(DuckDBEngine(path), COLUMNS, WEEK, start, end, b"s")
    assert FeedbackCount(epsilon=1.0).measure(scope).values == (2,)
    assert MeanRating(epsilon=1.0).measure(scope).values == (1, 1.0)  # a's 4, centred


def test_undecodable_sqlite_text_cannot_fail_a_query(tmp_path: Path) -> None:
    import sqlite3

    path = write_sqlite(tmp_path / "f.db", [])
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO feedback VALUES (?, 4, ?, '2026-11-16 10:00:00', 'algebra')",
        (b"\xff\xfeuser", b"\xff homework \xfe"),
    )
    conn.commit()
    conn.close()
    start, end = week_bounds(WEEK)
    scope = Scope(SQLiteEngine(path), COLUMNS, WEEK, start, end, b"s")
    assert TopicCounts(epsilon=1.0).measure(scope).values[2] == 1  # homework
    assert NewKeywords(epsilon=1.0).measure(scope).values == ()


@pytest.mark.parametrize("quoted", [False, True])
@pytest.mark.parametrize(
    "hostile",
    [
        ['victim,5,"unterminated,2026-11-17 10:00:00,algebra'],
        ['victim,5,"a""b"c",2026-11-17 10:00:00,algebra'],
        ['victim,5,"x","2026-11-17 10:00:00,algebra'],
        ['victim,5,unter"minated,2026-11-17 10:00:00,algebra,extra'],
        ['"victim,5,x,2026-11-17 10:00:00,algebra', "\x00\x00", '"', '""', ",,,,", ""],
        ['victim,5,"' + "line\n" * 40 + '",2026-11-17 10:00:00,algebra'],  # too long a span
    ],
)
def test_a_hostile_csv_record_never_hides_the_rows_after_it(
    tmp_path: Path, hostile: list[str], quoted: bool
) -> None:
    """One user's malformed lines in the middle of the file: they are dropped, every
    other row is read (whatever the quoting of the rows after it), and the query
    answers as if the victim's malformed lines were not there."""
    import datetime as dt

    from tests.data._helpers import MONDAY, Rec

    good = [
        Rec(f"u{i}", float(1 + i % 5), "讲解很清楚 homework", MONDAY + dt.timedelta(hours=i), c)
        for i, c in enumerate(COURSES * 4)
    ]
    q = '"' if quoted else ""
    lines = [
        f"{r.user},{r.rating},{q}{r.text}{q},{r.ts:%Y-%m-%d %H:%M:%S},{r.course}" for r in good
    ]
    csv = _csv(tmp_path / "f.csv", [*lines[:4], *hostile, *lines[4:]])
    sqlite = exact_all(SQLiteEngine(write_sqlite(tmp_path / "f.db", good)))
    assert exact_all(DuckDBEngine(csv)) == sqlite


def test_quoted_line_breaks_in_a_csv_text_are_one_record(tmp_path: Path) -> None:
    """A text with line breaks (written by a CSV writer) is read as the record it is."""
    import csv as csvlib
    import datetime as dt

    from tests.data._helpers import MONDAY, Rec

    recs = [
        Rec(f"u{i}", float(1 + i % 5), t, MONDAY + dt.timedelta(hours=i), COURSES[i % 3])
        for i, t in enumerate(
            ["第一行\n第二行 homework", 'she said "ok",\r\nthen left', "plain"] * 5
        )
    ]
    path = tmp_path / "f.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csvlib.writer(f)
        w.writerow(["user_id", "rating", "text", "ts", "course"])
        for r in recs:
            w.writerow([r.user, r.rating, r.text, f"{r.ts:%Y-%m-%d %H:%M:%S}", r.course])
    engine = DuckDBEngine(path)
    assert exact_all(engine) == exact_all(SQLiteEngine(write_sqlite(tmp_path / "f.db", recs)))
    # The engine re-reads a source that changed (the server keeps its engine).
    with open(path, "a", encoding="utf-8", newline="") as f:
        csvlib.writer(f).writerow(["late", 5, "x", f"{MONDAY:%Y-%m-%d} 12:00:00", COURSES[0]])
    late = Rec("late", 5.0, "x", MONDAY + dt.timedelta(hours=12), COURSES[0])
    assert exact_all(engine) == exact_all(
        SQLiteEngine(write_sqlite(tmp_path / "g.db", [*recs, late]))
    )
