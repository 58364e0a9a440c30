"""Many windows in one pass; topics and courses bounded in the engine's SQL.

Every engine's answer is compared with a plain-Python reference computed from the
records themselves (the texts bounded per user, the keywords matched by
:meth:`Vocabulary.matches`, the keyed choice of :func:`keyed_choice`).
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest

from dpllm.data import bounded, packed, sql
from dpllm.data.engines import DuckDBEngine, Engine, SQLiteEngine
from dpllm.data.queries import (
    ActiveUsers,
    CourseBreakdown,
    FeedbackCount,
    MeanRating,
    Query,
    RatingHistogram,
    Scope,
    keyed_choice,
)
from dpllm.data.shared import measure_windows, plan_for
from dpllm.data.sql import Dialect, Statement, SummaryPlan
from dpllm.data.topics import DEFAULT_VOCABULARY, TopicCounts, TopTopics, Vocabulary
from dpllm.errors import ConfigError, DataError
from dpllm.windows import week_bounds
from tests.data._helpers import (
    COLUMNS,
    COURSES,
    MONDAY,
    TEXTS,
    WEEK,
    Rec,
    random_record,
    random_records,
    write_parquet,
    write_sqlite,
)

SALT = b"test-salt"
WEEKS = ("2026-W45", "2026-W46", "2026-W47", "2026-W48", "2026-W50")  # W49 is a gap

HOSTILE_TEXTS = (
    "HomeWork is HARD",  # case
    "homework2 homeworks",  # not the word
    "作业homework",  # English next to Chinese
    "老师傅",  # the engines' rule: a substring (jieba keeps the longer word)
    "(exam)!pace;",
    "",
    "line\nbreak\nvideo\n",
    "emoji 🎥video🎥",
    "'; DROP TABLE feedback; --",
    "测验 % _ [ ] * ? \\",
)


def hostile_records(rng: random.Random) -> list[Rec]:
    """Random records, plus heavy users whose texts exceed the text bound, ties in time,
    and texts meant to break matching."""
    recs = random_records(rng, users=30, heavy=3)
    for i in range(12):
        t = MONDAY + dt.timedelta(days=rng.randrange(7), hours=rng.randrange(3))
        recs.append(Rec(f"h{i % 3}", 4.0, rng.choice(HOSTILE_TEXTS + TEXTS), t, "algebra"))
    same = MONDAY + dt.timedelta(days=2)
    recs += [Rec("tie", 3.0, text, same, "biology") for text in TEXTS + HOSTILE_TEXTS]
    recs += [Rec("lonely", None, None, same, "chemistry")]
    for week in range(-3, 4):
        recs.append(Rec("spread", 5.0, "exam video pace", MONDAY + dt.timedelta(weeks=week), None))
    return recs


def reference_topics(
    recs: Sequence[Rec], window: str, vocabulary: Vocabulary, *, max_texts: int, max_topics: int
) -> tuple[int, ...]:
    start, end = week_bounds(window)
    texts: dict[str, list[tuple[dt.datetime, str]]] = defaultdict(list)
    for r in recs:
        if r.user is not None and r.text is not None and start <= r.ts < end:
            texts[r.user].append((r.ts.replace(microsecond=0), r.text))
    counts: Counter[str] = Counter()
    limit = min(max_topics, len(vocabulary.topics))
    for user, items in texts.items():
        # The latest T texts, ties broken by the text's UTF-8 bytes.
        items.sort(key=lambda item: item[1].encode())
        items.sort(key=lambda item: item[0], reverse=True)
        found: set[str] = set()
        for _, text in items[:max_texts]:
            found |= vocabulary.matches(text)
        counts.update(keyed_choice(SALT, user, found, limit))
    return tuple(counts[n] for n in vocabulary.names)


def reference_courses(recs: Sequence[Rec], window: str, q: CourseBreakdown) -> tuple[int, ...]:
    start, end = week_bounds(window)
    per: dict[str, Counter[str]] = defaultdict(Counter)
    for r in recs:
        if r.user is not None and r.course in q.courses and start <= r.ts < end:
            per[r.user][r.course] += 1
    totals: Counter[str] = Counter()
    for user, counts in per.items():
        for c in keyed_choice(SALT, user, set(counts), q.groups_per_user):
            totals[c] += min(counts[c], q.max_records)
    return tuple(totals[c] for c in q.courses)


def _scope(engine: Engine, window: str = WEEK) -> Scope:
    start, end = week_bounds(window)
    return Scope(engine, COLUMNS, window, start, end, SALT)


@pytest.fixture(scope="module")
def recs() -> list[Rec]:
    return hostile_records(random.Random(11))


@pytest.fixture(scope="module")
def engines(recs: list[Rec], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Engine]:
    tmp = tmp_path_factory.mktemp("bounded")
    return {
        "sqlite": SQLiteEngine(write_sqlite(tmp / "f.db", recs)),
        "parquet": DuckDBEngine(write_parquet(tmp / "f.parquet", recs)),
    }


@pytest.mark.parametrize("engine_name", ["sqlite", "parquet"])
@pytest.mark.parametrize(("max_texts", "max_topics"), [(1, 1), (2, 2), (10, 3), (100, 9)])
def test_topics_in_the_engine_equal_the_python_reference(
    engines: dict[str, Engine], recs: list[Rec], engine_name: str, max_texts: int, max_topics: int
) -> None:
    q = TopicCounts(epsilon=1.0, max_texts=max_texts, max_topics=max_topics)
    for window in WEEKS:
        want = reference_topics(
            recs, window, DEFAULT_VOCABULARY, max_texts=max_texts, max_topics=max_topics
        )
        assert q.measure(_scope(engines[engine_name], window)).values == want


def test_the_bounds_bite(recs: list[Rec]) -> None:
    """Not vacuous: the text and topic bounds each change the reference's answer."""
    loose = reference_topics(recs, WEEK, DEFAULT_VOCABULARY, max_texts=1000, max_topics=9)
    assert reference_topics(recs, WEEK, DEFAULT_VOCABULARY, max_texts=1, max_topics=9) != loose
    assert reference_topics(recs, WEEK, DEFAULT_VOCABULARY, max_texts=1000, max_topics=1) != loose
    assert sum(loose) > 0


@pytest.mark.parametrize("engine_name", ["sqlite", "parquet"])
def test_courses_in_the_engine_equal_the_python_reference(
    engines: dict[str, Engine], recs: list[Rec], engine_name: str
) -> None:
    for g, m in ((1, 1), (2, 3), (4, 100)):
        q = CourseBreakdown(epsilon=1.0, courses=COURSES, max_courses=g, max_records=m)
        for window in WEEKS:
            got = q.measure(_scope(engines[engine_name], window)).values
            assert got == reference_courses(recs, window, q)


MANY: list[Query] = [
    FeedbackCount(epsilon=1.0, max_records=3),
    ActiveUsers(epsilon=1.0),
    MeanRating(epsilon=1.0),
    MeanRating(epsilon=1.0, out_of_range="drop"),
    RatingHistogram(epsilon=1.0, max_records=4),
    CourseBreakdown(epsilon=1.0, courses=COURSES, max_courses=2, max_records=3),
    TopicCounts(epsilon=1.0, max_topics=2, max_texts=3),
    TopTopics(epsilon=1.0, k=2),
]


CONTIGUOUS = ["2026-W44", "2026-W45", "2026-W46", "2026-W47", "2026-W48", "2026-W49"]


@pytest.mark.parametrize("engine_name", ["sqlite", "parquet"])
@pytest.mark.parametrize(
    "windows",
    [
        [*WEEKS, "2025-W01"],  # out of order, a gap, a week with no records: CASE index
        CONTIGUOUS,  # a run of weeks: arithmetic index
    ],
)
def test_many_windows_in_one_pass_equal_each_window_alone(
    engines: dict[str, Engine], engine_name: str, windows: list[str]
) -> None:
    engine = engines[engine_name]
    many = measure_windows(MANY, _scope(engine), windows)
    for i, q in enumerate(MANY):
        for w in windows:
            assert many[(i, w)].values == q.measure(_scope(engine, w)).values, (q.name, w)
            assert many[(i, w)].labels == q.measure(_scope(engine, w)).labels
    assert many[(0, WEEK)].values[0] > 0
    assert sum(many[(1, w)].values[0] for w in windows) > many[(1, WEEK)].values[0]


def test_many_windows_read_once(engines: dict[str, Engine]) -> None:
    """One statement per kind of query, however many windows."""

    class Counting:
        def __init__(self, inner: Engine) -> None:
            self.inner = inner
            self.dialect = inner.dialect
            self.calls = 0

        def relation(self, columns):  # type: ignore[no-untyped-def]
            return self.inner.relation(columns)

        def column_names(self, table: str) -> frozenset[str]:
            return self.inner.column_names(table)

        def fetch(self, statement, *, query="a statistic"):  # type: ignore[no-untyped-def]
            self.calls += 1
            return self.inner.fetch(statement, query=query)

    engine = Counting(engines["sqlite"])
    measure_windows(MANY, _scope(engine), WEEKS)  # type: ignore[arg-type]
    assert engine.calls == 4  # summary, courses, topic counts, top topics


def test_jieba_and_the_engine_rule_agree_on_the_corpus() -> None:
    from dpllm.data.demo import _PHRASES

    corpus = list(TEXTS)
    for lang in _PHRASES.values():
        for good, bad in lang.values():
            corpus += [*good, *bad]
    differ = {
        text
        for text in corpus
        if DEFAULT_VOCABULARY.topics_in(text) != DEFAULT_VOCABULARY.matches(text)
    }
    # The one documented difference: a Chinese keyword inside a longer dictionary
    # word (练习 in 练习题, "exercise problems"; 老师 in 老师傅) matches in the engine.
    assert differ == {"练习题设计得好"}
    assert DEFAULT_VOCABULARY.matches("练习题设计得好") == {"homework"}
    assert DEFAULT_VOCABULARY.matches("老师傅") == {"teaching"}
    assert DEFAULT_VOCABULARY.topics_in("老师傅") == set()
    assert len(corpus) > 80


@pytest.mark.parametrize(
    ("text", "topics"),
    [
        ("HomeWork is HARD", {"homework", "difficulty"}),
        ("homework2 homeworks", set()),
        ("作业homework", {"homework"}),
        ("(exam)!pace;", {"exam", "pace"}),
        ("line\nbreak\nvideo\n", {"video"}),
        ("emoji 🎥video🎥", {"video"}),
        ("", set()),
    ],
)
def test_the_engine_rule(text: str, topics: set[str]) -> None:
    assert DEFAULT_VOCABULARY.matches(text) == topics


@pytest.mark.parametrize("word", ["e-learning", "c++", "it's", "a%b", "x_y"])
def test_keywords_that_cannot_be_matched_safely_are_refused(word: str) -> None:
    with pytest.raises(ConfigError, match="keyword"):
        Vocabulary.from_mapping({"t": {"en": [word]}})
    with pytest.raises(ConfigError, match="keyword"):
        Vocabulary.from_mapping({"t": {"zh": [f"作业{word}"]}})


def test_spans_must_be_sorted_and_disjoint() -> None:
    a, b = week_bounds("2026-W46"), week_bounds("2026-W47")
    assert bounded.check_spans([a, b]) == (a, b)
    with pytest.raises(DataError):
        bounded.check_spans([b, a])
    with pytest.raises(DataError):
        bounded.check_spans([(a[0], b[1]), b])
    with pytest.raises(DataError):
        bounded.check_spans([])


def test_sqlite_hash_is_sha256(tmp_path: Path) -> None:
    import hashlib

    from dpllm.data.sql import Statement

    engine = SQLiteEngine(write_sqlite(tmp_path / "f.db", []))
    got = engine.fetch(Statement("SELECT dpllm_sha256(CAST('ab:é' AS BLOB)), dpllm_sha256(NULL)"))
    assert got == [(hashlib.sha256("ab:é".encode()).hexdigest(), None)]


@pytest.mark.postgres
def test_many_windows_on_postgres(recs: list[Rec], engines: dict[str, Engine], pg_dsn: str) -> None:
    from dpllm.data.engines import PostgresEngine
    from tests.data._helpers import write_pg

    with PostgresEngine(write_pg(pg_dsn, recs)) as pg:
        for windows in ([*WEEKS, "2025-W01"], CONTIGUOUS):
            got = measure_windows(MANY, _scope(pg), windows)
            want = measure_windows(MANY, _scope(engines["sqlite"]), windows)
            assert {k: v.values for k, v in got.items()} == {k: v.values for k, v in want.items()}


def _summary_rows(
    engine: Engine, plan: SummaryPlan, windows: Sequence[str], bits: int | None = None
) -> dict[int, tuple[int, ...]]:
    spans = [week_bounds(w) for w in sorted(windows, key=week_bounds)]
    cols, dialect = COLUMNS, engine.dialect
    if bits is not None:
        stmt = packed.summaries(cols, dialect, engine.relation(cols), spans, plan, bits=bits)
    else:
        stmt = bounded.summaries(cols, dialect, engine.relation(cols), spans, plan)
    return {int(r[0]): tuple(int(v) for v in r[1:]) for r in engine.fetch(stmt)}


PLANS = [
    plan_for(MANY[:5]),  # seven cells (clamp and drop), two caps
    plan_for([MANY[0], MANY[2], MANY[4]]),  # five cells
    plan_for(MANY[:2]),  # no cell: records and users only
]


@pytest.mark.parametrize("plan", PLANS, ids=["7 cells", "5 cells", "0 cells"])
@pytest.mark.parametrize("bits", [1, 2, 3, None])
def test_the_packed_summary_equals_the_plain_one(
    engines: dict[str, Engine], plan: SummaryPlan, bits: int | None
) -> None:
    """DuckDB's one-aggregate summary returns the plain statement's integers, also
    when most groups are over the field bound and take the plain count (small F)."""
    windows = [*WEEKS, "2025-W01"]
    want = _summary_rows(engines["sqlite"], plan, windows)
    got = _summary_rows(engines["parquet"], plan, windows, bits)
    assert got == want
    assert want  # the data has records in these weeks


def test_a_user_past_the_field_bound_is_counted_exactly(tmp_path: Path) -> None:
    """1,100 records of one user in one week (over 2^10, the five-cell bound) and a
    few light users: every aggregate equals SQLite's plain statement."""
    rng = random.Random(5)
    recs = [random_record(rng, "bot", week_offset=0) for _ in range(1100)]
    recs += [random_record(rng, f"u{i}") for i in range(40)]
    recs += [Rec("bot", 5.0, None, MONDAY + dt.timedelta(weeks=1), None)]
    duck = DuckDBEngine(write_parquet(tmp_path / "f.parquet", recs))
    lite = SQLiteEngine(write_sqlite(tmp_path / "f.db", recs))
    for plan in PLANS:
        windows = ["2026-W46", WEEK, "2026-W48"]
        assert _summary_rows(duck, plan, windows) == _summary_rows(lite, plan, windows)
    # five cells: fields of 10 bits, so the bot's 1,100 records are over the bound
    assert (
        packed.field_bits(len(sql.summary_cell_predicates(COLUMNS, duck.dialect, PLANS[1]))) == 10
    )


def test_the_packed_field_width_is_checked() -> None:
    plan = PLANS[1]
    span = [week_bounds(WEEK)]
    for bits in (0, 11):
        with pytest.raises(ValueError, match="field width"):
            packed.summaries(COLUMNS, Dialect.DUCKDB, Statement("t"), span, plan, bits=bits)
    with pytest.raises(ValueError, match="DuckDB"):
        packed.summaries(COLUMNS, Dialect.SQLITE, Statement("t"), span, plan)


def test_a_week_without_a_rating_in_range_sums_to_zero_not_null(tmp_path: Path) -> None:
    """A week whose users left no rating in range: the weighted (packed) counts of users
    with a rating are 0, as in the plain statement, never NULL (which no reader takes)."""
    recs = [
        Rec(f"u{i}", None, "no rating", MONDAY + dt.timedelta(days=i % 7), None) for i in range(6)
    ]
    recs += [Rec("u0", 4.0, "rated", MONDAY + dt.timedelta(weeks=1), None)]
    duck = DuckDBEngine(write_parquet(tmp_path / "f.parquet", recs))
    lite = SQLiteEngine(write_sqlite(tmp_path / "f.db", recs))
    windows = [WEEK, "2026-W48"]
    for plan in PLANS[:2]:
        want = _summary_rows(lite, plan, windows)
        for bits in (1, 3, None):
            assert _summary_rows(duck, plan, windows, bits) == want
        assert want[0][0] == 6 and 0 in want[0]  # six users, none with a rating


@pytest.mark.postgres
def test_tied_texts_are_chosen_by_their_bytes_under_a_locale_collation(
    tmp_path: Path, pg_dsn: str
) -> None:
    """The latest texts of a user, ties broken by the text's bytes — also on a PostgreSQL
    column whose collation is a locale's (ICU en-US puts "exam" before "Video"; the bytes
    put "Video" first), so the topics chosen are the same on every engine."""
    import psycopg

    from dpllm.data.engines import PostgresEngine
    from tests.data._helpers import write_pg

    same = MONDAY + dt.timedelta(days=2)
    recs = [Rec("tie", 4.0, text, same, None) for text in ("exam was hard", "Video was good")]
    recs += [Rec(f"u{i}", 3.0, "pace is fine", same, None) for i in range(3)]
    q = TopicCounts(epsilon=1.0, max_texts=1, max_topics=2)
    dsn = write_pg(pg_dsn, recs, text_collation="en-US-x-icu")
    with psycopg.connect(dsn) as conn:  # the column really sorts by the locale here
        first = conn.execute("SELECT text FROM feedback WHERE user_id = 'tie' ORDER BY text")
        assert first.fetchone() == ("exam was hard",)
    lite = SQLiteEngine(write_sqlite(tmp_path / "f.db", recs))
    with PostgresEngine(dsn) as pg:
        got = measure_windows([q], _scope(pg), [WEEK])
    want = measure_windows([q], _scope(lite), [WEEK])
    assert {k: v.values for k, v in got.items()} == {k: v.values for k, v in want.items()}
    assert want[(0, WEEK)].values == reference_topics(
        recs, WEEK, DEFAULT_VOCABULARY, max_texts=1, max_topics=2
    )
