"""Number extraction: digits, Chinese numerals, ranges, units, approximation words, constants."""

from __future__ import annotations

import math

import pytest

from dpllm.guard import extract_mentions, text_language

# (text, mention text, value, step, category)
SINGLE: list[tuple[str, str, float, float, str | None]] = [
    ("157 responses", "157 responses", 157, 1, "count"),
    ("160 responses", "160 responses", 160, 10, "count"),
    ("4.37 stars", "4.37 stars", 4.37, 0.01, "rating"),
    ("4.30 stars", "4.30 stars", 4.3, 0.01, "rating"),
    ("1,234 users", "1,234 users", 1234, 1, "users"),
    ("1 234 users", "1 234 users", 1234, 1, "users"),
    ("1.2k users", "1.2k users", 1200, 100, "users"),
    ("62.4%", "62.4%", 62.4, 0.1, "percent"),
    ("62 percent", "62 percent", 62, 1, "percent"),
    ("about 160", "about 160", 160, 10, None),
    ("~4.3", "~4.3", 4.3, 0.1, None),
    ("157条", "157条", 157, 1, "count"),
    ("１５７条", "１５７条", 157, 1, "count"),
    ("４．３７分", "４．３７分", 4.37, 0.01, "rating"),
    ("62％", "62％", 62, 1, "percent"),
    ("一百五十七人", "一百五十七人", 157, 1, "users"),
    ("一百六十条", "一百六十条", 160, 10, "count"),
    ("四点三分", "四点三分", 4.3, 0.1, "rating"),
    ("百分之六十二", "百分之六十二", 62, 1, "percent"),
    ("两千条", "两千条", 2000, 1000, "count"),
    ("约1.5万人", "约1.5万人", 15000, 1000, "users"),
    ("160左右", "160左右", 160, 10, None),
    ("150多条", "150多条", 150, 10, "count"),
    ("大约160人", "大约160人", 160, 10, "users"),
    ("差不多60%", "差不多60%", 60, 10, "percent"),
]


@pytest.mark.parametrize(("text", "mention", "value", "step", "category"), SINGLE)
def test_single_mentions(
    text: str, mention: str, value: float, step: float, category: str | None
) -> None:
    [m] = extract_mentions(text)
    assert (m.text, m.category, m.constant) == (mention, category, None)
    assert m.value == pytest.approx(value) and m.step == pytest.approx(step)
    assert text[m.span[0] : m.span[1]] == m.text


@pytest.mark.parametrize(
    "text",
    [
        "150–170 responses",
        "150-170 responses",
        "150 to 170 responses",
        "between 150 and 170 responses",
        "150到170条",
        "150至170条",
        "150~170条",
    ],
)
def test_ranges(text: str) -> None:
    [m] = extract_mentions(text)
    assert m.is_range and (m.lo, m.hi, m.value, m.step) == (150, 170, 160, 10)
    assert m.category == "count"


def test_band_and_bounds() -> None:
    [band] = extract_mentions("4.3 ± 0.2 stars")
    assert band.is_range and band.approx and band.step == pytest.approx(0.1)
    assert (band.lo, band.hi) == pytest.approx((4.1, 4.5))
    [less] = extract_mentions("fewer than 5 responses")
    assert less.bound == "<"
    [more] = extract_mentions("超过100人")
    assert more.bound == ">" and more.category == "users"


def test_zero_is_infinitely_coarse() -> None:
    [m] = extract_mentions("0 responses")
    assert math.isinf(m.step)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("in week 47", "week"),
        ("2026-W47", "week"),
        ("第47周", "ordinal"),
        ("on 2026-11-20", "date"),
        ("11月20日", "date"),
        ("Nov 20", "date"),
        ("in 2026", "year"),
        ("ε = 0.5", "privacy-parameter"),
        ("epsilon 1.5", "privacy-parameter"),
        ("a 1–5 scale", "scale"),
        ("rated out of 5", "scale"),
        ("满分5分", "scale"),
        ("5 stars", "scale"),
        ("95% CI", "confidence-level"),
        ("1. Pacing", "list"),
        ("the 3rd week", "ordinal"),
        ("7 days", "duration"),
        ("过去7天", "duration"),
        ("3.5 hours", "duration"),
    ],
)
def test_public_constants(text: str, reason: str) -> None:
    mentions = extract_mentions(text)
    assert mentions and all(m.constant is not None for m in mentions)
    assert reason in {m.constant for m in mentions}


@pytest.mark.parametrize(
    "text", ["十分满意", "一些同学", "一般般", "统一安排", "万一下雨", "千万别迟到"]
)
def test_chinese_words_with_numeral_characters_are_not_numbers(text: str) -> None:
    assert extract_mentions(text) == []


def test_language() -> None:
    assert text_language("about 160") == "en"
    assert text_language("约160条") == "zh"
