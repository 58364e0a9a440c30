"""The granularity rule shared by templates and the guard."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpllm.rounding import decimals_for, format_number, granularity, round_to


@pytest.mark.parametrize(
    ("half_width", "integer", "expected"),
    [
        (0.2, False, 0.1),
        (0.1, False, 0.1),
        (0.099, False, 0.01),
        (10.0, True, 10.0),
        (7.0, True, 1.0),
        (0.4, True, 1.0),
        (99.9, True, 10.0),
        (100.0, True, 100.0),
        (0.0, True, 1.0),
        (1234.0, True, 1000.0),
    ],
)
def test_granularity_table(half_width: float, integer: bool, expected: float) -> None:
    assert granularity(half_width, integer=integer) == pytest.approx(expected)


@given(st.floats(min_value=1e-5, max_value=1e9))
def test_granularity_is_largest_power_of_ten_not_above(hw: float) -> None:
    g = granularity(hw)
    assert g <= hw * (1 + 1e-9)
    assert g * 10 > hw * (1 - 1e-9)


def test_round_and_format() -> None:
    assert round_to(157.0, 10.0) == 160.0
    assert round_to(4.3149, 0.1) == pytest.approx(4.3)
    assert format_number(1234.0, 10.0) == "1,230"
    assert format_number(4.349, 0.1) == "4.3"
    assert decimals_for(0.01) == 2
    assert decimals_for(10.0) == 0


def test_bad_half_width() -> None:
    with pytest.raises(ValueError):
        granularity(float("nan"))


@pytest.mark.parametrize(
    ("lo", "hi", "step", "text"),
    [
        (895.0, 925.0, 10.0, "890 – 930"),  # was "900 – 920": narrower than the band
        (169.0, 243.0, 10.0, "160 – 250"),  # was "170 – 240"
        (3.57, 3.62, 0.01, "3.57 – 3.62"),  # already on the step: unchanged
        (0.2, 0.6000000000000001, 0.1, "0.2 – 0.6"),  # float noise is not a step
        (-3.5, 12.2, 1.0, "-4 – 13"),
        (1234.0, 1691.0, 100.0, "1,200 – 1,700"),
    ],
)
def test_intervals_are_printed_outwards(lo: float, hi: float, step: float, text: str) -> None:
    from dpllm.rounding import format_interval, outward

    assert format_interval(lo, hi, step) == text
    a, b = outward(lo, hi, step)
    assert a <= lo + 1e-9 and b >= hi - 1e-9


def test_report_and_stats_tables_print_intervals_outwards() -> None:
    from dpllm.cli.stats import _rows
    from dpllm.release import Cost, Release
    from dpllm.weekly.report import _estimate

    count = Release(name="c", values=(910.0,), intervals=((895.0, 925.0),), mechanism="m",
                    noise_scale=1.0, cost=Cost.pure(0.1), fingerprint="f", kind="count")  # fmt: skip
    share = Release(name="s", values=(0.61,), intervals=((0.553, 0.667),), mechanism="m",
                    noise_scale=1.0, cost=Cost.pure(0.1), fingerprint="f", kind="proportion",
                    small_threshold=None)  # fmt: skip
    assert _estimate(count)[1] == "890 – 930"
    assert _rows("c", count, free=False)[0][3] == "890 – 930"
    assert _estimate(share)[1] == "55% – 67%"
