"""Releases the guard tests check against."""

from __future__ import annotations

import pytest

from dpllm.release import Release
from dpllm.testing.releases import fake_release


def make_release(
    name: str, value: float, lo: float, hi: float, *, kind: str = "count", unit: str = ""
) -> Release:
    """A synthetic scalar release (seeded: never published)."""
    return fake_release(name, value, lo, hi, kind=kind, unit=unit)


@pytest.fixture
def releases() -> dict[str, Release]:
    """responses 160 (150–170), mean_rating 4.31 (4.11–4.51), active_users 1234 (1199–1269),
    positive_share 0.62 (0.59–0.65)."""
    return {
        "responses": make_release("responses", 160.0, 150.0, 170.0, unit="responses"),
        "mean_rating": make_release("mean_rating", 4.31, 4.11, 4.51, kind="mean", unit="stars"),
        "active_users": make_release("active_users", 1234.0, 1199.0, 1269.0, unit="users"),
        "positive_share": make_release(
            "positive_share", 0.62, 0.59, 0.65, kind="proportion", unit="share"
        ),
    }
