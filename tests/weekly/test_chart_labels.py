"""The charts' interval labels are rounded outwards, read back from the matplotlib Figure.

A label is only honest when the band it prints contains the released interval:
``[169, 243]`` printed ``170–240`` (rounded to nearest) looks narrower than it
is; outwards it is ``160–250``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from dpllm.weekly.charts import histogram_figure, interval_label, trend_figure
from tests.templates.conftest import make_release

pytest.importorskip("matplotlib")

WEEK = "2026-W05"
# Intervals whose nearest rounding is inward at their step (the failure before the fix).
HISTOGRAM = make_release(
    "rating_histogram",
    (3.2, 206.0, 910.0, 41.1, 64.9),
    ((0.0, 4.6), (169.0, 243.0), (895.0, 925.0), (36.2, 46.0), (-3.5, 69.8)),
    kind="count",
    unit="records",
    labels=("1", "2", "3", "4", "5"),
)


def _bounds(text: str) -> tuple[Decimal, Decimal]:
    lo, _, hi = text.replace(",", "").partition("–")
    return Decimal(lo.strip()), Decimal(hi.strip())


def _contains(text: str, lo: float, hi: float) -> bool:
    a, b = _bounds(text)
    return a <= Decimal(repr(lo)) and Decimal(repr(hi)) <= b


def _labels(fig: Any) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_histogram_bar_labels_are_rounded_outwards() -> None:
    labels = _labels(histogram_figure(HISTOGRAM, week=WEEK))
    assert labels == ["< 5", "160–250", "890–930", "36–46", "0–70"]
    for text, (_, part) in zip(labels[1:], list(HISTOGRAM.components())[1:], strict=True):
        lo, hi = part.interval
        assert _contains(text, max(lo, 0.0), hi), (text, part.interval)


def test_trend_labels_are_rounded_outwards() -> None:
    history = {
        "mean_rating": {
            "2026-W04": make_release(
                "mean_rating", 3.9, (3.71, 4.02), kind="mean", small_threshold=None
            ),
            WEEK: make_release(
                "mean_rating", 3.87, (3.749, 3.951), kind="mean", small_threshold=None
            ),
        },
        "feedback_count": {
            WEEK: make_release("feedback_count", 206.0, (169.0, 243.0), kind="count"),
        },
    }
    fig = trend_figure(history, week=WEEK)
    labels = [t for t in _labels(fig) if "–" in t]
    assert labels == ["3.7–4.0", "160–250"]
    assert _contains(labels[0], 3.749, 3.951) and _contains(labels[1], 169.0, 243.0)


@pytest.mark.parametrize(
    ("interval", "kind"),
    [((895.0, 925.0), "count"), ((169.0, 243.0), "count"), ((3.749, 3.951), "mean"),
     ((0.1234, 0.1299), "mean"), ((1234.5, 1301.2), "count"), ((-0.4, 0.4), "mean")],
)  # fmt: skip
def test_every_interval_label_contains_its_interval(
    interval: tuple[float, float], kind: str
) -> None:
    release = make_release("x", sum(interval) / 2, interval, kind=kind, small_threshold=None)
    lo, hi = interval
    assert _contains(interval_label(release), max(lo, 0.0) if kind == "count" else lo, hi)
