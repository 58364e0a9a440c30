"""Sensitivity, checked empirically: one user more or less moves each exact
aggregate by at most the sensitivity its docstring proves."""

from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dpllm.data.engines import SQLiteEngine
from dpllm.data.queries import (
    ActiveUsers,
    CourseBreakdown,
    Exact,
    FeedbackCount,
    MeanRating,
    Query,
    RatingHistogram,
    Scope,
)
from dpllm.data.topics import TopicCounts, TopTopics
from dpllm.windows import week_bounds
from tests.data._helpers import (
    COLUMNS,
    COURSES,
    TEXTS,
    WEEK,
    Rec,
    max_user,
    random_records,
    write_sqlite,
)

M, G, L = 4, 2, 3

# (query, stated L1 bound, stated L∞ bound per component)
CASES: list[tuple[Query, float, float]] = [
    (FeedbackCount(epsilon=1.0, max_records=M), M, M),
    (ActiveUsers(epsilon=1.0), 1, 1),
    (RatingHistogram(epsilon=1.0, max_records=M), M, M),
    (CourseBreakdown(epsilon=1.0, courses=COURSES, max_courses=G, max_records=M), G * M, M),
    (TopicCounts(epsilon=1.0, max_topics=L), L, 1),
    (TopTopics(epsilon=1.0, k=2, max_topics=L), L, 1),
]
MEAN = MeanRating(epsilon=1.0)


def _exact(path: Path) -> list[Exact]:
    start, end = week_bounds(WEEK)
    with SQLiteEngine(path) as engine:
        scope = Scope(engine, COLUMNS, WEEK, start, end, b"salt")
        return [q.measure(scope) for q, _, _ in CASES] + [MEAN.measure(scope)]


def _heavy(rng: random.Random, user: str) -> list[Rec]:
    recs = max_user(rng, user, n=rng.randint(M + 1, 60))
    # Every topic, every course, extreme ratings: the most one user can do.
    every_topic = " ".join(TEXTS)
    return [
        r._replace(text=every_topic if i % 2 else r.text, rating=rng.choice([1.0, 5.0, 99.0]))
        for i, r in enumerate(recs)
    ]


def _check(before: list[Exact], after: list[Exact]) -> None:
    for (query, l1, linf), b, a in zip(CASES, before[:-1], after[:-1], strict=True):
        diffs = [abs(x - y) for x, y in zip(a.values, b.values, strict=True)]
        assert sum(diffs) <= l1, query.name
        assert max(diffs) <= linf, query.name
    (c0, s0), (c1, s1) = before[-1].values, after[-1].values
    assert abs(c1 - c0) <= 1
    assert abs(s1 - s0) <= 2.0 + 1e-12


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), remove=st.booleans())
def test_one_user_moves_each_aggregate_by_at_most_its_sensitivity(seed: int, remove: bool) -> None:
    rng = random.Random(seed)
    recs = random_records(rng, users=rng.randint(0, 12), heavy=rng.randint(0, 2))
    if remove and any(r.user for r in recs):
        victim = rng.choice([r.user for r in recs if r.user])
        neighbour = [r for r in recs if r.user != victim]
    else:
        neighbour = recs + _heavy(rng, "newcomer")
    with tempfile.TemporaryDirectory() as tmp:
        d0 = write_sqlite(Path(tmp) / "d0.db", recs)
        d1 = write_sqlite(Path(tmp) / "d1.db", neighbour)
        _check(_exact(d0), _exact(d1))


def test_the_mechanisms_use_the_stated_sensitivities() -> None:
    for query, l1, _ in CASES[:-1]:
        (mech,) = query.mechanisms()
        assert mech.sensitivity == l1  # type: ignore[attr-defined]
    rho_cases = [
        (FeedbackCount(rho=0.5, max_records=M), M),
        (RatingHistogram(rho=0.5, max_records=M), M),
        (CourseBreakdown(rho=0.5, courses=COURSES, max_courses=G, max_records=M), math.sqrt(G) * M),
        (TopicCounts(rho=0.5, max_topics=L), math.sqrt(L)),
    ]
    for query, l2 in rho_cases:
        (mech,) = query.mechanisms()
        assert mech.sensitivity == l2  # type: ignore[attr-defined]
    count, total = MEAN.mechanisms()
    assert count.sensitivity == 1  # type: ignore[attr-defined]
    assert total.sensitivity == 2  # type: ignore[attr-defined]
    assert MEAN.cost == count.cost + total.cost


def _untyped_sqlite(path: Path, recs: list[Rec], ids: list[object]) -> Path:
    """Like ``write_sqlite``, but the user column has no type affinity, so SQLite
    keeps each id's own storage class (integer 7, text '7', blob x'37')."""
    import sqlite3

    write_sqlite(path, [])
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE feedback")
    conn.execute("CREATE TABLE feedback (user_id, rating REAL, text TEXT, ts TEXT, course TEXT)")
    conn.executemany(
        "INSERT INTO feedback VALUES (?, ?, ?, ?, ?)",
        [
            (uid, r.rating, r.text, r.ts.strftime("%Y-%m-%d %H:%M:%S"), r.course)
            for uid, r in zip(ids, recs, strict=True)
        ],
    )
    conn.commit()
    conn.close()
    return path


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_user_stored_under_mixed_types_is_one_user(seed: int) -> None:
    """One user whose id SQLite stores as 7, '7' and x'37' moves each aggregate by at
    most its stated sensitivity: every query groups by the same key, CAST(user AS TEXT)."""
    rng = random.Random(seed)
    base = [r for r in random_records(rng, users=rng.randint(0, 8), heavy=1) if r.user]
    newcomer = _heavy(rng, "7")
    forms: list[object] = [7, "7", b"7"]
    ids = [forms[i % 3] for i in range(len(newcomer))]
    with tempfile.TemporaryDirectory() as tmp:
        d0 = _untyped_sqlite(Path(tmp) / "d0.db", base, [r.user for r in base])
        d1 = _untyped_sqlite(Path(tmp) / "d1.db", base + newcomer, [r.user for r in base] + ids)
        before, after = _exact(d0), _exact(d1)
    _check(before, after)
    # ActiveUsers moves by exactly one: the three storage forms are one user key.
    active = [q.name for q, _, _ in CASES].index("active_users")
    assert after[active].values[0] - before[active].values[0] == 1
