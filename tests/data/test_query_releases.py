"""What each record and rating query publishes, and the parameters it refuses.

A release is read by people and by the precision guard: its window, unit, labels and
notes say what the number is. These are checked field by field (no data read; the
noise is seeded).
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from dpllm.data.engines import Row, SQLiteEngine
from dpllm.data.queries import (
    ActiveUsers,
    Exact,
    FeedbackCount,
    MeanRating,
    Query,
    RatingHistogram,
    Scope,
)
from dpllm.data.sql import Statement
from dpllm.errors import InvalidPrivacyParameter
from dpllm.privacy.noise import FloatArray, IntArray, SeededNoise
from dpllm.release import Cost
from dpllm.windows import week_bounds
from tests.data._helpers import COLUMNS, random_records, write_sqlite

WEEK = "2026-W47"  # the week of tests.data._helpers.WEEK


def _publish(query: object, exact: Exact) -> object:
    return query.publish(  # type: ignore[attr-defined]
        exact, fingerprint="fp-1", window=WEEK, confidence=0.9, noise=SeededNoise(3)
    )


@pytest.mark.parametrize(
    ("query", "exact", "unit", "labels"),
    [
        (FeedbackCount(epsilon=1.0), Exact((40,)), "records", ()),
        (ActiveUsers(epsilon=1.0), Exact((12,)), "users", ()),
        (ActiveUsers(rho=0.5), Exact((12,)), "users", ()),
        (
            RatingHistogram(epsilon=1.0),
            Exact((1, 2, 3, 4, 5), ("1", "2", "3", "4", "5")),
            "ratings",
            ("1", "2", "3", "4", "5"),
        ),
    ],
)
def test_a_count_release_says_what_it_counts(
    query: object, exact: Exact, unit: str, labels: tuple[str, ...]
) -> None:
    release = _publish(query, exact)
    assert release.name == query.name  # type: ignore[attr-defined]
    assert release.window == WEEK  # type: ignore[attr-defined]
    assert release.unit == unit  # type: ignore[attr-defined]
    assert release.labels == labels  # type: ignore[attr-defined]
    assert release.kind == "count"  # type: ignore[attr-defined]
    assert release.fingerprint == "fp-1"  # type: ignore[attr-defined]
    assert release.confidence == 0.9  # type: ignore[attr-defined]
    assert release.cost == query.cost  # type: ignore[attr-defined]


def test_the_mean_rating_release_names_its_parts() -> None:
    query = MeanRating(epsilon=1.0)
    release = _publish(query, Exact((30, 15.0)))
    assert release.name == "mean_rating"  # type: ignore[attr-defined]
    assert release.window == WEEK  # type: ignore[attr-defined]
    assert release.unit == "stars" and release.kind == "mean"  # type: ignore[attr-defined]
    assert release.cost == Cost.pure(1.0)  # type: ignore[attr-defined]
    (note,) = release.notes  # type: ignore[attr-defined]
    assert "mean_rating.centred_sum" in note and "mean_rating.users" in note


class ZeroNoise:
    """Every draw is 0: the release's value is the post-processed exact aggregate."""

    seeded = True

    def discrete_laplace(self, *, scale: float, size: int) -> IntArray:
        return np.zeros(size, dtype=np.int64)

    def discrete_gaussian(self, *, sigma: float, size: int) -> IntArray:
        return np.zeros(size, dtype=np.int64)

    def add_laplace(self, values: FloatArray, *, scale: float) -> FloatArray:
        return values + 0.0

    def add_gaussian(self, values: FloatArray, *, sigma: float) -> FloatArray:
        return values + 0.0

    def exponential_top_k(self, scores: FloatArray, *, scale: float, k: int) -> list[int]:
        raise AssertionError("not a top-k query")


@pytest.mark.parametrize("query", [MeanRating(epsilon=1.0), MeanRating(rho=0.5, count_share=0.3)])
@pytest.mark.parametrize(
    ("users", "centred", "mean"),
    [
        (4, 2.0, 3.5),  # 3 + S/C: the sum is centred at 3 stars
        (4, -6.0, 1.5),
        (4, 20.0, 5.0),  # clamped to the scale's top …
        (4, -20.0, 1.0),  # … and bottom
        (0, 0.0, 3.0),  # no user: the count's floor at 1 keeps the centre
    ],
)
def test_the_mean_is_the_centre_plus_the_ratio_clamped_to_the_scale(
    query: MeanRating, users: int, centred: float, mean: float
) -> None:
    release = query.publish(
        Exact((users, centred)), fingerprint="fp", window=WEEK, confidence=0.8, noise=ZeroNoise()
    )
    assert release.values == (mean,)
    (lo, hi) = release.intervals[0]
    assert 1.0 <= lo <= mean <= hi <= 5.0
    assert release.confidence == 0.8
    assert release.window == WEEK
    assert release.seeded


@pytest.mark.parametrize("cls", [FeedbackCount, RatingHistogram])
@pytest.mark.parametrize("bad", [0, -1, 1_000_001, 2.0, True])
def test_a_bad_records_bound_is_refused_by_name(cls: type, bad: object) -> None:
    with pytest.raises(InvalidPrivacyParameter, match=r"^max_records must be an int in \[1, "):
        cls(epsilon=1.0, max_records=bad)


@pytest.mark.parametrize("share", [0.0, 1.0, 1.5, -0.5, 1, "0.5"])
def test_count_share_must_be_a_float_strictly_between_0_and_1(share: object) -> None:
    with pytest.raises(InvalidPrivacyParameter, match=r"count_share must be a float in \(0, 1\)"):
        MeanRating(epsilon=1.0, count_share=share)  # type: ignore[arg-type]


@pytest.mark.parametrize("share", [0.01, 0.5, 0.99])
def test_count_share_inside_0_1_is_accepted(share: float) -> None:
    assert MeanRating(rho=0.5, count_share=share).count_share == share


class NamingEngine(SQLiteEngine):
    """SQLite, recording the query name each read is made for (errors carry that name)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.names: list[str] = []

    def fetch(self, statement: Statement, *, query: str = "a statistic") -> list[Row]:
        self.names.append(query)
        return super().fetch(statement, query=query)


def test_each_read_names_its_query(tmp_path: Path) -> None:
    """A failing read's error says which statistic failed: the engine is told its name."""
    path = write_sqlite(tmp_path / "f.db", random_records(random.Random(1), users=3, heavy=0))
    queries: list[Query] = [
        FeedbackCount(epsilon=1.0),
        ActiveUsers(epsilon=1.0),
        MeanRating(epsilon=1.0),
        RatingHistogram(epsilon=1.0),
    ]
    start, end = week_bounds(WEEK)
    with NamingEngine(path) as engine:
        scope = Scope(engine, COLUMNS, WEEK, start, end, b"salt")
        for q in queries:
            q.measure(scope)
    assert engine.names == [q.name for q in queries]
