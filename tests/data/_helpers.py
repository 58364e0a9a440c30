"""Synthetic feedback records written to SQLite, DuckDB, Parquet and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from dpllm.data.sql import ColumnMap

COLUMNS = ColumnMap(course="course")
WEEK = "2026-W47"
MONDAY = dt.datetime(2026, 11, 16, tzinfo=dt.UTC)
COURSES = ("algebra", "biology", "chemistry", "databases")

TEXTS = (
    "老师讲解很清楚，作业有点多",
    "The pace is too fast and the homework is hard",
    "视频音质不好，平台经常卡顿",
    "Great examples, the slides help a lot",
    "考试难度太难了",
    "I liked the teacher and the exercises",
    "课件和资料都很好，例子丰富",
    "login to the platform fails, video lag",
    "nothing special",
    "节奏刚好",
)


class Rec(NamedTuple):
    user: str | None
    rating: float | None
    text: str | None
    ts: dt.datetime
    course: str | None


def random_records(rng: random.Random, *, users: int = 25, heavy: int = 2) -> list[Rec]:
    """Mixed records: heavy users, NULL/NaN/out-of-range ratings, two weeks of times."""
    recs: list[Rec] = []
    for i in range(users):
        n = rng.randint(30, 60) if i < heavy else rng.randint(1, 6)
        for _ in range(n):
            recs.append(random_record(rng, f"u{i}"))
    recs.append(Rec(None, 5.0, "anonymous", MONDAY + dt.timedelta(hours=3), "algebra"))
    return recs


def random_record(rng: random.Random, user: str, *, week_offset: int | None = None) -> Rec:
    r = rng.random()
    rating: float | None
    if r < 0.05:
        rating = None
    elif r < 0.08:
        rating = float("nan")
    elif r < 0.13:
        rating = rng.choice([0.0, -3.0, 6.0, 9.5, 2.5, 4.49])
    else:
        rating = float(rng.randint(1, 5))
    offset = rng.choice([-1, 0, 0, 0, 1]) if week_offset is None else week_offset
    ts = MONDAY + dt.timedelta(weeks=offset, seconds=rng.randrange(7 * 86400))
    return Rec(user, rating, rng.choice(TEXTS), ts, rng.choice(COURSES))


def max_user(rng: random.Random, user: str, n: int = 80) -> list[Rec]:
    """A user contributing as much as possible in the test week."""
    return [random_record(rng, user, week_offset=0) for _ in range(n)]


def _iso(ts: dt.datetime) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def write_sqlite(path: Path, recs: Sequence[Rec]) -> Path:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE feedback (user_id TEXT, rating REAL, text TEXT, ts TEXT, course TEXT)"
    )
    conn.executemany(
        "INSERT INTO feedback VALUES (?, ?, ?, ?, ?)",
        [(r.user, r.rating, r.text, _iso(r.ts), r.course) for r in recs],
    )
    conn.commit()
    conn.close()
    return path


def _arrow_table(recs: Sequence[Rec]):  # type: ignore[no-untyped-def]
    import pyarrow as pa

    return pa.table(
        {
            "user_id": pa.array([r.user for r in recs], pa.string()),
            "rating": pa.array([r.rating for r in recs], pa.float64()),
            "text": pa.array([r.text for r in recs], pa.string()),
            "ts": pa.array([r.ts.replace(tzinfo=None) for r in recs], pa.timestamp("us")),
            "course": pa.array([r.course for r in recs], pa.string()),
        }
    )


def write_parquet(path: Path, recs: Sequence[Rec]) -> Path:
    import pyarrow.parquet as pq

    pq.write_table(_arrow_table(recs), path)
    return path


def write_duckdb(path: Path, recs: Sequence[Rec]) -> Path:
    import duckdb

    arrow_recs = _arrow_table(recs)  # noqa: F841 - read by DuckDB's replacement scan
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE feedback AS SELECT * FROM arrow_recs")
    conn.close()
    return path


def write_pg(dsn: str, recs: Sequence[Rec], *, text_collation: str | None = None) -> str:
    """``recs`` as table ``feedback``; ``text_collation`` (e.g. ``"en-US-x-icu"``) gives the
    text column a locale's order instead of the database default."""
    import psycopg

    collate = f' COLLATE "{text_collation}"' if text_collation else ""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS feedback")
        conn.execute(
            "CREATE TABLE feedback (user_id TEXT, rating DOUBLE PRECISION, "
            f"text TEXT{collate}, ts TIMESTAMPTZ, course TEXT)"
        )
        with (
            conn.cursor() as cur,
            cur.copy("COPY feedback (user_id, rating, text, ts, course) FROM STDIN") as copy,
        ):
            for r in recs:
                copy.write_row((r.user, r.rating, r.text, r.ts, r.course))
    return dsn
