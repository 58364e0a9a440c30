"""Every wording of a number: English words, fractions, 成/折/分之, magnitudes, currency, dates."""

from __future__ import annotations

import math

import pytest

from dpllm.guard import extract_mentions

# (text, mention text, value, step, unit key)
WORDINGS: list[tuple[str, str, float, float, str]] = [
    (
        "one hundred fifty-seven feedback items",
        "one hundred fifty-seven feedback",
        157,
        1,
        "records",
    ),
    ("one hundred and sixty responses", "one hundred and sixty responses", 160, 10, "records"),
    ("four point three one out of five", "four point three one", 4.31, 0.01, ""),
    ("sixty-two point three percent", "sixty-two point three percent", 62.3, 0.1, "share"),
    ("eighty-eight active users", "eighty-eight active users", 88, 1, "users"),
    ("twenty-three times", "twenty-three times", 23, 1, "times"),
    (
        "twelve thousand eight hundred forty sessions",
        "twelve thousand eight hundred forty sessions",
        12840,
        10,
        "sessions",
    ),
    ("a dozen refunds", "a dozen", 12, 1, ""),
    ("two dozen", "two dozen", 24, 1, ""),
    ("half a dozen", "half a dozen", 6, 1, ""),
    ("one point two million yuan", "one point two million yuan", 1_200_000, 100_000, "yuan"),
    ("three in five", "three in five", 60, 10, "share"),
    ("one out of four", "one out of four", 25, 10, "share"),
    ("one in thirty", "one in thirty", 100 / 30, 1, "share"),
    ("六成", "六成", 60, 10, "share"),
    ("六成二", "六成二", 62, 1, "share"),
    ("八折", "八折", 80, 10, "share"),
    ("八五折", "八五折", 85, 1, "share"),
    ("8.5折", "8.5折", 85, 1, "share"),
    ("五分之三", "五分之三", 60, 10, "share"),
    ("三十分之一", "三十分之一", 100 / 30, 1, "share"),
    ("千分之五", "千分之五", 0.5, 0.1, "share"),
    ("¥1.28M", "¥1.28M", 1_280_000, 10_000, "yuan"),
    ("1.3M sessions", "1.3M sessions", 1_300_000, 100_000, "sessions"),
    ("RMB 1.3 million", "RMB 1.3 million", 1_300_000, 100_000, "yuan"),
    ("$12.8k", "$12.8k", 12_800, 100, "dollars"),
    ("128万元", "128万元", 1_280_000, 10_000, "yuan"),
    ("1.28万次", "1.28万次", 12_800, 100, "times"),
    ("约0.13亿", "约0.13亿", 13_000_000, 1_000_000, ""),
    ("一百二十八万", "一百二十八万", 1_280_000, 10_000, ""),
    ("七十一次", "七十一次", 71, 1, "times"),
    ("0.62", "0.62", 0.62, 0.01, ""),
    ("two thirds of ratings", "two thirds", 200 / 3, 10, "share"),
    ("about half of the students", "about half", 50, 10, "share"),
    ("a quarter of orders", "a quarter", 25, 10, "share"),
]


@pytest.mark.parametrize(("text", "mention", "value", "step", "unit"), WORDINGS)
def test_wordings(text: str, mention: str, value: float, step: float, unit: str) -> None:
    [m] = [m for m in extract_mentions(text) if m.constant is None]
    assert m.text == mention
    assert m.value == pytest.approx(value) and m.step == pytest.approx(step)
    assert m.unit_key == unit


def test_a_decimal_is_marked_as_one() -> None:
    [m] = extract_mentions("0.62")
    assert m.decimal and not m.percent
    [p] = extract_mentions("62%")
    assert not p.decimal


@pytest.mark.parametrize(
    ("text", "lo", "hi"),
    [("¥1.2M–1.35M", 1_200_000, 1_350_000), ("1.2–1.35M", 1_200_000, 1_350_000),
     ("about 16 to 20 hours", 16, 20), ("1.2到1.5万", 12_000, 15_000)],
)  # fmt: skip
def test_magnitude_ranges(text: str, lo: float, hi: float) -> None:
    [m] = extract_mentions(text)
    assert m.is_range and (m.lo, m.hi) == pytest.approx((lo, hi))


@pytest.mark.parametrize(
    "text",
    [
        "November 16–22, 2026",
        "16–22 Nov 2026",
        "Nov 16 to Nov 22",
        "11 月 16 日—22 日",
        "2026年11月16日至22日",
        "本周（11/16–11/22）",
        "between 2026-11-16 and 2026-11-22",
    ],
)
def test_date_ranges_are_constants(text: str) -> None:
    mentions = extract_mentions(text)
    assert mentions and all(m.constant is not None for m in mentions)


@pytest.mark.parametrize(
    "text",
    [
        "one of the topics",
        "two themes stood out",
        "一成不变",
        "统一安排",
        "someone alone",
        "the second half of the week",
        "on the third of May",
    ],
)
def test_words_that_are_not_figures(text: str) -> None:
    assert all(m.constant is not None for m in extract_mentions(text))


def test_rating_out_of_five_is_not_a_fraction() -> None:
    [m, scale] = extract_mentions("rated 4 out of 5 stars")
    assert not m.percent and scale.constant == "scale"


def test_zero_in_words_is_infinitely_coarse() -> None:
    [m] = extract_mentions("zero complaints about refunds")
    assert math.isinf(m.step)


@pytest.mark.parametrize("text", ["İstanbul: 157 responses", "Ünits: １５７条", "ΣΑΣ 157 USERS"])
def test_normalising_keeps_offsets(text: str) -> None:
    [m] = [m for m in extract_mentions(text) if m.value == 157]
    assert "157" in m.text or "１５７" in m.text
    assert text[m.span[0] : m.span[1]] == m.text
