"""Fixtures for the template tests: hand-built (non-seeded) weekly releases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dpllm.release import Cost, Release
from dpllm.templates import PromptEnvironment

MakeRelease = Callable[..., Release]


def make_release(
    name: str = "x",
    value: float | tuple[float, ...] = 160.4,
    interval: tuple[float, float] | tuple[tuple[float, float], ...] = (150.3, 170.2),
    **changes: Any,
) -> Release:
    """A release with fixed numbers (no noise is drawn in these tests)."""
    values = value if isinstance(value, tuple) else (value,)
    intervals = interval if isinstance(interval[0], tuple) else (interval,)
    fields: dict[str, Any] = {
        "mechanism": "discrete_laplace",
        "noise_scale": 2.0,
        "cost": Cost.pure(0.5),
        "fingerprint": f"test:{name}",
        "window": "2026-W05",
    }
    fields.update(changes)
    return Release(name=name, values=values, intervals=intervals, **fields)  # type: ignore[arg-type]


@pytest.fixture
def release() -> MakeRelease:
    return make_release


def weekly(*, topics: bool = True) -> dict[str, object]:
    """The weekly job's releases with fixed figures, plus its metadata."""
    context: dict[str, object] = {
        "week": "2026-W05",
        "course_names": ["Linear Algebra", "Statistics 101"],
        "feedback_count": make_release(
            "feedback_count",
            212.6,
            (198.1, 227.4),
            kind="count",
            unit="records",
            estimand="feedback records, at most 5 per user",
        ),
        "active_users": make_release(
            "active_users",
            57.3,
            (50.2, 64.9),
            kind="count",
            unit="users",
            estimand="users with at least one record",
        ),
        "mean_rating": make_release(
            "mean_rating",
            3.87,
            (3.71, 4.02),
            kind="mean",
            unit="stars",
            estimand="mean of per-user mean ratings (clamped to 1–5; each user counts once)",
        ),
        "rating_histogram": make_release(
            "rating_histogram",
            (3.2, 14.8, 41.1, 88.7, 64.9),
            ((0.0, 4.6), (9.9, 19.7), (36.2, 46.0), (83.8, 93.6), (60.0, 69.8)),
            kind="count",
            unit="records",
            labels=("1", "2", "3", "4", "5"),
            estimand="ratings per star, at most 5 records per user",
        ),
        "share_positive": make_release("share_positive", 0.721, (0.664, 0.778), kind="proportion"),
        "share_negative": make_release("share_negative", 0.083, (0.047, 0.119), kind="proportion"),
    }
    if topics:
        context["topic_counts"] = make_release(
            "topic_counts",
            (48.4, 2.9, 19.6),
            ((42.0, 54.8), (0.0, 4.4), (13.2, 26.0)),
            kind="count",
            unit="users",
            labels=("workload", "exam dates", "lecture pace"),
            estimand="users mentioning each topic, at most 3 topics per user",
        )
    return context


@pytest.fixture
def weekly_context() -> dict[str, object]:
    return weekly()


@pytest.fixture
def weekly_context_without_topics() -> dict[str, object]:
    return weekly(topics=False)


@pytest.fixture
def env() -> PromptEnvironment:
    return PromptEnvironment()
