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
