"""The bounding SQL against a Python reference, at the edges the bounds are made of.

The other engine tests compare engines with each other; these compare every engine with
the definitions in :mod:`dpllm.data.queries`' docstrings, written out again here:
records capped at M per user, users counted once, each rating mapped to its nearest star
(halves up; out of range clamped or rejected; NULL and NaN ignored), per-user means in
milli-stars rounded half up, histogram weights ``⌊c_k·M / max(n, M)⌋``, and the window
``[start, end)``. The records sit on those edges: a user with exactly M records and one
with M + 1, ratings at 1.5, 2.5, 3.5, 4.5 and just below, a mean of exactly x.5
milli-stars, times at the window's start and end.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from dpllm.data.engines import DuckDBEngine, Engine, PostgresEngine, SQLiteEngine
from dpllm.data.queries import (
    ActiveUsers,
    FeedbackCount,
    MeanRating,
    Query,
    RatingHistogram,
    Scope,
)
from dpllm.data.shared import measure_shared
from dpllm.data.sql import (
    ColumnMap,
    Dialect,
    Statement,
    histogram,
    quote_ident,
    records_and_users,
    user_summary,
    user_texts,
)
from dpllm.data.sql import SummaryPlan as Plan
from dpllm.errors import DataError, UnsafeIdentifier
from dpllm.windows import week_bounds
from tests.data._helpers import COLUMNS, MONDAY, WEEK, Rec, write_duckdb, write_pg, write_sqlite

START, END = week_bounds(WEEK)
SEC = dt.timedelta(seconds=1)


def _recs() -> list[Rec]:
    out: list[Rec] = []

    def add(user: str | None, ratings: Sequence[float | None], at: dt.datetime = MONDAY) -> None:
        for i, r in enumerate(ratings):
            out.append(Rec(user, r, "t", at + dt.timedelta(minutes=i + 1), "algebra"))

    add("exactly_m", [1.49, 1.5, 2.49])  # M = 3 records: 1, 2, 2
    add("m_plus_1", [2.5, 3.49, 3.5, 4.49])  # 3, 3, 4, 4
    add("heavy", [4.5, 5.0, 0.99, -1.0, 6.0, 1.0, 5.0, 1.0])  # 5 5 (1) (1) (5) 1 5 1
    add("half_milli", [1.0] * 15 + [2.0])  # mean 1.0625 → 1062.5 milli → 1063
    add("thirds", [1.0, 1.0, 2.0])  # 1333.3 → 1333
    add("two_thirds", [2.0, 2.0, 1.0])  # 1666.7 → 1667
    add("no_rating", [None, math.nan])  # a user, records, no valid rating
    add("only_outside", [0.0, 7.5, 5.5])  # clamped: 1, 5, 5; rejected: nothing
    add("one", [3.0])
    add(None, [5.0, 5.0])  # no user: not counted anywhere
    # The window is [start, end): a record at its start counts, one at its end does not.
    out.append(Rec("edges", 4.0, "t", START, "algebra"))
    out.append(Rec("edges", 1.0, "t", END, "algebra"))
    out.append(Rec("edges", 1.0, "t", START - SEC, "algebra"))
    out.append(Rec("late", 2.0, "t", END - SEC, "algebra"))
    out.append(Rec("outside", 2.0, "t", END + SEC, "algebra"))
    return out


RECS = _recs()


def _star(x: float | None, policy: str) -> int | None:
    if x is None or math.isnan(x):
        return None
    if x < 1 or x > 5:
        return (1 if x < 1 else 5) if policy == "clamp" else None
    return 1 if x < 1.5 else 2 if x < 2.5 else 3 if x < 3.5 else 4 if x < 4.5 else 5


def _per_user() -> dict[str, list[float | None]]:
    users: dict[str, list[float | None]] = defaultdict(list)
    for r in RECS:
        if r.user is not None and START <= r.ts < END:
            users[r.user].append(r.rating)
    return users


def ref_count(m: int) -> tuple[int, int]:
    users = _per_user()
    return len(users), sum(min(len(v), m) for v in users.values())


def ref_mean(policy: str) -> tuple[int, float]:
    c, s = 0, 0
    for ratings in _per_user().values():
        stars = [k for k in (_star(x, policy) for x in ratings) if k is not None]
        if stars:
            c += 1
            # round half up of 1000·Σ/n, in integers
            s += (2000 * sum(stars) + len(stars)) // (2 * len(stars)) - 3000
    return c, s / 1000


def ref_hist(policy: str, m: int) -> tuple[int, ...]:
    h = [0] * 5
    for ratings in _per_user().values():
        stars = [k for k in (_star(x, policy) for x in ratings) if k is not None]
        for k in range(1, 6):
            h[k - 1] += stars.count(k) * m // max(len(stars), m)
    return tuple(h)


def test_the_reference_is_not_vacuous() -> None:
    """The edges are hit: caps bite, rounding goes up, policies differ."""
    users, records = ref_count(3)
    assert users == 11 and records < ref_count(100)[1]
    assert ref_mean("clamp") != ref_mean("reject")
    assert ref_hist("clamp", 3) != ref_hist("reject", 3) != ref_hist("clamp", 1)


QUERIES: list[tuple[Query, Callable[[], tuple[float, ...]]]] = [
    (FeedbackCount(epsilon=1.0, max_records=1), lambda: (ref_count(1)[1],)),
    (FeedbackCount(epsilon=1.0, max_records=3), lambda: (ref_count(3)[1],)),
    (FeedbackCount(epsilon=1.0, max_records=4), lambda: (ref_count(4)[1],)),
    (FeedbackCount(epsilon=1.0, max_records=100), lambda: (ref_count(100)[1],)),
    (ActiveUsers(epsilon=1.0), lambda: (ref_count(1)[0],)),
    (MeanRating(epsilon=1.0), lambda: ref_mean("clamp")),
    (MeanRating(epsilon=1.0, out_of_range="reject"), lambda: ref_mean("reject")),
    (MeanRating(epsilon=1.0, out_of_range="drop"), lambda: ref_mean("reject")),
    (RatingHistogram(epsilon=1.0, max_records=3), lambda: ref_hist("clamp", 3)),
    (RatingHistogram(epsilon=1.0, max_records=1), lambda: ref_hist("clamp", 1)),
    (
        RatingHistogram(epsilon=1.0, max_records=4, out_of_range="reject"),
        lambda: ref_hist("reject", 4),
    ),
    (RatingHistogram(epsilon=1.0, max_records=100), lambda: ref_hist("clamp", 100)),
]


def _check(engine: Engine) -> None:
    scope = Scope(engine, COLUMNS, WEEK, START, END, b"salt")
    summary = measure_shared([q for q, _ in QUERIES], scope)
    for query, expected in QUERIES:
        assert query.measure(scope).values == expected(), query
        assert summary.exact(query).values == expected(), ("shared", query)


@pytest.fixture(scope="module")
def sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    engine = SQLiteEngine(write_sqlite(tmp_path_factory.mktemp("ref") / "f.db", RECS))
    yield engine
    engine.close()


def test_sqlite_equals_the_reference(sqlite: Engine) -> None:
    _check(sqlite)


def test_duckdb_equals_the_reference(tmp_path: Path) -> None:
    with DuckDBEngine(write_duckdb(tmp_path / "f.duckdb", RECS)) as engine:
        _check(engine)


@pytest.mark.postgres
def test_postgres_equals_the_reference(pg_dsn: str) -> None:
    with PostgresEngine(write_pg(pg_dsn, RECS)) as engine:
        _check(engine)


def test_an_empty_window_is_all_zeros(sqlite: Engine) -> None:
    start, end = week_bounds("2030-W01")
    scope = Scope(sqlite, COLUMNS, "2030-W01", start, end, b"salt")
    for query, _ in QUERIES:
        assert set(query.measure(scope).values) == {0}, query
    plan = Plan(record_caps=(3,), mean_policies=("clamp",), histograms=(("reject", 2),))
    row = sqlite.fetch(user_summary(COLUMNS, Dialect.SQLITE, scope.source, start, end, plan))[0]
    assert list(row) == [0] * len(plan.keys())


@pytest.mark.parametrize("bad", [0, -3, True, 2.0, "3"])
@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("max_records", lambda src, v: records_and_users(*_args(src), max_records=v)),
        ("max_records", lambda src, v: histogram(*_args(src), "clamp", max_records=v)),
        ("max_texts", lambda src, v: user_texts(*_args(src), max_texts=v)),
        ("max_chars", lambda src, v: user_texts(*_args(src), max_chars=v)),
        ("max_records", lambda src, v: user_summary(*_args(src), Plan(record_caps=(v,)))),
        (
            "max_records",
            lambda src, v: user_summary(*_args(src), Plan(histograms=(("clamp", v),))),
        ),
    ],
)
def test_a_bound_that_is_not_a_positive_int_never_reaches_the_sql(
    sqlite: Engine, name: str, build: Callable[[Statement, object], Statement], bad: object
) -> None:
    scope = Scope(sqlite, COLUMNS, WEEK, START, END, b"salt")
    with pytest.raises(DataError, match=rf"^{name} must be a positive int, got "):
        build(scope.source, bad)


def _args(source: Statement) -> tuple[ColumnMap, Dialect, Statement, dt.datetime, dt.datetime]:
    return COLUMNS, Dialect.SQLITE, source, START, END


def test_sqlite_has_no_regular_expressions() -> None:
    """Keyword matching by regex is for DuckDB, PostgreSQL and Spark; SQLite is refused
    (its queries match keywords another way) instead of getting another dialect's SQL."""
    with pytest.raises(DataError, match="^the sqlite dialect has no regular expressions here$"):
        Dialect.SQLITE.regex("x", "a")
    assert Dialect.SPARK.regex("x", "a") == "(x RLIKE 'a')"


def test_sqlite_compares_times_as_utc_instants(tmp_path: Path) -> None:
    """ISO-8601 text with a 'T' or an offset is normalised to UTC before the window test:
    03:00+05:00 on the Monday is Sunday 22:00 UTC (the week before), while a plain text
    comparison would put it inside the week."""
    import sqlite3

    path = tmp_path / "iso.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE feedback (user_id TEXT, rating REAL, text TEXT, ts TEXT)")
    conn.executemany(
        "INSERT INTO feedback VALUES (?, 4, 't', ?)",
        [
            ("before", "2026-11-16T03:00:00+05:00"),  # 2026-11-15 22:00 UTC: outside
            ("inside", "2026-11-16T10:00:00+05:00"),  # 05:00 UTC: inside
            ("late", "2026-11-23T01:00:00+02:00"),  # 2026-11-22 23:00 UTC: inside
            ("early", "2026-11-16T00:30:00+01:00"),  # 2026-11-15 23:30 UTC: outside
        ],
    )
    conn.commit()
    conn.close()
    with SQLiteEngine(path) as engine:
        scope = Scope(engine, ColumnMap(), WEEK, START, END, b"salt")
        assert ActiveUsers(epsilon=1.0).measure(scope).values == (2,)  # inside, late


def test_spark_binds_times_as_utc_text() -> None:
    """Spark reads a text parameter in the session time zone, which SparkEngine sets to UTC."""
    moment = dt.datetime(2026, 11, 16, 8, 0, 0, 5, tzinfo=dt.timezone(dt.timedelta(hours=8)))
    assert Dialect.SPARK.time_param(moment) == "2026-11-16 00:00:00.000005"
    assert Dialect.SPARK.time_placeholder == "CAST(? AS TIMESTAMP)"


def test_refusals_say_what_to_fix() -> None:
    with pytest.raises(DataError, match=r"^this query needs a course column; map it"):
        ColumnMap().q("course")
    with pytest.raises(DataError, match=r"^out_of_range must be 'clamp' or 'reject', got 'x'$"):
        MeanRating(epsilon=1.0, out_of_range="x")  # type: ignore[arg-type]


def test_a_plain_name_is_at_most_63_characters() -> None:
    """PostgreSQL truncates longer names silently; 63 is accepted, 64 refused."""
    assert quote_ident("a" * 63) == '"' + "a" * 63 + '"'
    with pytest.raises(UnsafeIdentifier) as info:
        quote_ident("a" * 64)
    assert str(info.value) == (
        f"{'a' * 64!r} is not a plain SQL name; use letters, digits and '_' only "
        "(rename the column, or create a view with plain names)"
    )
    with pytest.raises(UnsafeIdentifier, match=r"is not a plain SQL name"):
        quote_ident('x"; DROP TABLE feedback; --')


def test_time_parameters_are_utc_whatever_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    try:
        moment = dt.datetime(2026, 11, 16, 0, 0, tzinfo=dt.UTC)
        assert Dialect.SQLITE.time_param(moment) == "2026-11-16 00:00:00"
        assert Dialect.SPARK.time_param(moment) == "2026-11-16 00:00:00.000000"
        assert Dialect.DUCKDB.time_param(moment) == dt.datetime(2026, 11, 16)
    finally:
        monkeypatch.undo()
        time.tzset()
