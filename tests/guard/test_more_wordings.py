"""Wordings read since the speed work: mixed fractions, digits read out one by one, fraction
words without "of", dates in Chinese numerals — each in a compliant and a violating version."""

from __future__ import annotations

import pytest

from dpllm.guard import Guard, extract_mentions
from dpllm.release import Release

from .conftest import make_release

# (text, mention text, value, step, unit key)
WORDINGS: list[tuple[str, str, float, float, str]] = [
    ("four and a third", "four and a third", 4 + 1 / 3, 0.1, ""),
    ("four and a half stars", "four and a half stars", 4.5, 0.1, "stars"),
    ("seven and three quarters", "seven and three quarters", 7.75, 0.1, ""),
    ("four and one third", "four and one third", 4 + 1 / 3, 0.1, ""),
    ("one-five-seven responses", "one-five-seven responses", 157, 1, "records"),
    ("one-six-zero responses", "one-six-zero responses", 160, 10, "records"),
    ("一五七条", "一五七条", 157, 1, "records"),
    ("一六〇条", "一六〇条", 160, 10, "records"),
    ("a third were positive", "a third", 100 / 3, 10, "share"),
    ("two thirds said yes", "two thirds", 200 / 3, 10, "share"),
    ("half were returned", "half", 50, 10, "share"),
]


@pytest.mark.parametrize(("text", "mention", "value", "step", "unit"), WORDINGS)
def test_more_wordings(text: str, mention: str, value: float, step: float, unit: str) -> None:
    [m] = [m for m in extract_mentions(text) if m.constant is None]
    assert m.text == mention
    assert m.value == pytest.approx(value) and m.step == pytest.approx(step)
    assert m.unit_key == unit


@pytest.mark.parametrize(
    "text",
    [
        "二〇二六年十一月十六日至二十二日",
        "十一月十六日",
        "五月份",
        "over the past two and a half weeks",
        "the second half was slower",
        "a third time",
        "一成不变",
    ],
)
def test_not_figures(text: str) -> None:
    assert all(m.constant is not None for m in extract_mentions(text))


def test_a_mixed_fraction_of_hours_is_a_figure_only_when_a_release_is_in_hours() -> None:
    [m] = extract_mentions("It took two and a half hours.")
    assert m.constant == "duration" and m.unit_key == "hours"
    median = make_release("median_hours", 18.4, 17.9, 18.9, kind="median", unit="hours")
    guard = Guard([median])
    assert guard.check("The median took eighteen and a half hours.").ok
    assert not guard.check("The median took twenty and a half hours.").ok
    assert not guard.check("Setup takes two and a half hours.").ok  # a figure in hours here
    assert Guard([make_release("n", 160, 150, 170)]).check("It took two and a half hours.").ok


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("The mean rating was four and a third.", True),  # 4.33 to a tenth, in 4.11–4.51
        ("The mean rating was four and a half stars.", True),
        ("The mean rating was three and a half.", False),
        ("We received one-six-zero responses.", True),
        ("We received one-five-seven responses.", False),  # over-precise (step 1 < 10)
        ("We received two-four-zero responses.", False),
        ("本周共有一六〇条反馈。", True),
        ("本周共有一五七条反馈。", False),
        ("二〇二六年十一月十六日至二十二日，本周共有约一百六十条反馈。", True),
        ("Of all ratings, two thirds were positive.", True),  # 66.7 ± 5 meets 59–65
        ("Of all ratings, a third were positive.", False),
        ("Half were positive.", False),  # 50 ± 5 (a share, read) misses 59–65
    ],
)
def test_compliant_and_violating(releases: dict[str, Release], text: str, ok: bool) -> None:
    assert Guard(releases).check(text).ok is ok


@pytest.mark.parametrize("text", ["two-three times a week", "三四次", "九〇后的学生"])
def test_two_digits_in_a_row_are_not_a_number(text: str) -> None:
    assert all(m.value < 10 for m in extract_mentions(text))
