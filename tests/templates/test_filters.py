"""Each DP filter's rounding against intervals, in English and Chinese."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpllm.errors import TemplateError
from dpllm.rounding import granularity
from dpllm.templates import FILTERS, approx, band, count, interval, pct

from .conftest import MakeRelease

# (value, interval, kind, filter, lang, expected)
CASES = [
    # half-width 9.95 -> step 1
    (160.4, (150.3, 170.2), "count", approx, "en", "about 160"),
    (160.4, (150.3, 170.2), "count", interval, "en", "150–171"),
    (160.4, (150.3, 170.2), "count", band, "en", "160 ± 10"),
    # half-width 20 -> step 10
    (163.0, (143.0, 183.0), "count", approx, "en", "about 160"),
    (163.0, (143.0, 183.0), "count", approx, "zh", "约 160"),
    (163.0, (143.0, 183.0), "count", interval, "en", "140–190"),
    (163.0, (143.0, 183.0), "count", band, "en", "160 ± 20"),
    # a mean: half-width 0.2 -> step 0.1; the ± is rounded up, never down
    (4.31, (4.11, 4.51), "mean", band, "en", "4.3 ± 0.2"),
    (4.31, (4.08, 4.54), "mean", band, "en", "4.3 ± 0.3"),
    (4.31, (4.11, 4.51), "mean", approx, "zh", "约 4.3"),
    (4.31, (4.11, 4.51), "mean", interval, "en", "4.1–4.6"),
    # a count never gets decimals, even with a tiny interval
    (12.4, (12.3, 12.5), "count", approx, "en", "about 12"),
    # counts are clipped at 0
    (-3.2, (-9.0, 2.6), "count", approx, "en", "about 0"),
    (-3.2, (-9.0, 2.6), "count", interval, "en", "0–3"),
    # proportions print as percentages, half-width 4 points -> step 1
    (0.62, (0.58, 0.66), "proportion", pct, "en", "about 62% (58–66%)"),
    (0.62, (0.58, 0.66), "proportion", pct, "zh", "约 62%（58–66%）"),
    (0.62, (0.58, 0.66), "proportion", approx, "en", "about 62%"),
    (0.62, (0.58, 0.66), "proportion", band, "en", "62% ± 4%"),
    # half-width 15 points -> step 10; clipped to 0-100 %
    (0.93, (0.78, 1.08), "proportion", pct, "en", "about 90% (70–100%)"),
    # thousands separators
    (3074185296.3, (3074185000.0, 3074185600.0), "count", approx, "en", "about 3,074,185,300"),
]


@pytest.mark.parametrize(("value", "bounds", "kind", "fn", "lang", "expected"), CASES)
def test_rounding_table(
    release: MakeRelease,
    value: float,
    bounds: tuple[float, float],
    kind: str,
    fn: object,
    lang: str,
    expected: str,
) -> None:
    assert callable(fn)
    assert fn(release("x", value, bounds, kind=kind), lang) == expected


@pytest.mark.parametrize(
    ("lang", "unit", "expected"),
    [
        ("en", None, "fewer than 5"),
        ("en", "records", "fewer than 5 records"),
        ("zh", None, "少于 5 条"),
        ("zh", "人", "少于 5 人"),
    ],
)
def test_count_suppresses_small_counts(
    release: MakeRelease, lang: str, unit: str | None, expected: str
) -> None:
    small = release("n", 2.1, (0.0, 4.2), kind="count", unit="records")
    assert small.small
    assert count(small, lang, unit) == expected


def test_count_large_and_at_threshold(release: MakeRelease) -> None:
    big = release("n", 160.4, (150.3, 170.2), kind="count", unit="records")
    assert count(big, "en") == "about 160"
    assert count(big, "zh") == "约 160 条"
    assert count(big, "en", "records") == "about 160 records"
    # An interval reaching the threshold is not "small": the count is shown.
    edge = release("n", 2.0, (0.0, 5.0), kind="count")
    assert count(edge, "en") == "about 2"
    users = release("u", 2.0, (0.0, 3.0), kind="count", unit="users")
    assert count(users, "zh") == "少于 5 人"


def test_figures_are_recorded(release: MakeRelease) -> None:
    phrase = pct(release("p", 0.62, (0.58, 0.66), kind="proportion"), "en")
    assert phrase.figures == ("62", "58", "66")
    big = approx(release("n", 3074185296.3, (3074185000.0, 3074185600.0)), "en")
    assert big.figures == ("3,074,185,300", "3074185300")


def test_vector_releases_index_by_label(release: MakeRelease) -> None:
    hist = release("h", (3.0, 40.0), ((0.0, 4.0), (30.0, 50.0)), kind="count", labels=("1", "5"))
    assert approx(hist["5"], "en") == "about 40"
    with pytest.raises(TemplateError, match=r'index it by label.*h\["1"\]'):
        approx(hist, "en")


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filters_refuse_non_releases(name: str) -> None:
    with pytest.raises(TemplateError, match="expects a Release"):
        FILTERS[name](160, "en")


def test_kind_and_language_checks(release: MakeRelease) -> None:
    with pytest.raises(TemplateError, match="proportion"):
        pct(release("m", 4.2, (4.0, 4.4), kind="mean"), "en")
    with pytest.raises(TemplateError, match="count release"):
        count(release("m", 4.2, (4.0, 4.4), kind="mean"), "en")
    with pytest.raises(TemplateError, match="unknown language"):
        approx(release(), "fr")


@given(
    centre=st.floats(-1e6, 1e6, allow_nan=False),
    half=st.floats(1e-4, 1e5, allow_nan=False),
    skew=st.floats(-0.9, 0.9),
    kind=st.sampled_from(["count", "mean", "sum"]),
)
def test_rounding_follows_the_granularity_rule(
    centre: float, half: float, skew: float, kind: str
) -> None:
    from .conftest import make_release

    value = centre + skew * half
    rel = make_release("x", value, (centre - half, centre + half), kind=kind)
    step = granularity(rel.half_width, integer=kind == "count")
    floor = 0.0 if kind == "count" else -math.inf

    shown = float(approx(rel, "en").removeprefix("about ").replace(",", ""))
    # The centre is the value rounded to the step (or clipped at 0 for counts).
    assert abs(shown - max(value, floor)) <= step / 2 + 1e-9 * max(1.0, abs(value)) or (
        shown == floor
    )
    assert math.isclose(shown / step, round(shown / step), abs_tol=1e-6)

    lo_text, hi_text = interval(rel, "en").split("–")
    lo, hi = float(lo_text.replace(",", "")), float(hi_text.replace(",", ""))
    # The printed range contains the release's interval (after clipping).
    tol = 1e-9 * max(1.0, abs(centre) + half)
    assert lo <= max(centre - half, floor) + tol
    assert hi >= centre + half - tol or hi == floor
    # ... and is no more than one step wider on each side.
    assert lo >= max(centre - half, floor) - step - tol
    assert hi <= max(centre + half, floor) + step + tol

    shown_half = float(band(rel, "en").split(" ± ")[1].replace(",", ""))
    assert rel.half_width - tol <= shown_half <= rel.half_width + step + tol
