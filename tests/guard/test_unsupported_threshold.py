"""A plain figure of 10 or more that matches no release is an unsupported statistic.

Below 10 a plain number is wording ("3 themes", "两个方面"); from 10 on, a number the
text states without an approximation word may be a statistic read straight from the
data ("37 students complained"), and with no release behind it nothing allows it.
"""

from __future__ import annotations

import pytest

from dpllm.guard import Guard, Rule
from dpllm.release import Release

from .conftest import make_release


@pytest.fixture
def guard() -> Guard:
    only: dict[str, Release] = {
        "responses": make_release("responses", 1600.0, 1500.0, 1700.0, unit="responses"),
    }
    return Guard(only)


@pytest.mark.parametrize("n", [10, 11, 37, 42, 64, 99, 250])
@pytest.mark.parametrize(
    "sentence",
    [
        "{n} students complained about the workload.",
        "有{n}名学生抱怨作业太多。",
        # No unit: only the figure's size makes it a statistic (a unit alone already
        # does, so the sentences above would pass with any threshold).
        "Of them, {n} complained.",
        "其中{n}抱怨了。",
    ],
)
def test_plain_two_digit_figures_are_unsupported(guard: Guard, n: int, sentence: str) -> None:
    report = guard.check(sentence.format(n=n))
    assert not report.ok
    assert [v.rule for v in report.violations] == [Rule.UNSUPPORTED]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 9])
@pytest.mark.parametrize(
    "sentence",
    ["Students raised {n} themes this week.", "Of them, {n} complained.", "其中{n}抱怨了。"],
)
def test_plain_single_digits_are_wording(guard: Guard, n: int, sentence: str) -> None:
    assert guard.check(sentence.format(n=n)).ok
