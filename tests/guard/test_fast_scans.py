"""The guard's fast scans find exactly what the plain patterns they replace find.

Each pattern below was rewritten so that the regex engine can skip ahead in C (its
first character outside a look-behind or a word boundary), or a lookup was
replaced by a cheaper one. The plain forms are kept here as the reference and both
are run over texts built from the characters that matter (digits, separators,
letters, number words, Chinese numerals, stop words, spaces).
"""

from __future__ import annotations

import random
import re

import pytest

from dpllm.guard import constants, extract, numerals, reading, rules
from dpllm.guard.evalset import domain_releases
from dpllm.guard.targets import TermIndex, build_targets

PLAIN_ARABIC = re.compile(
    r"(?<![0-9A-Za-z.,])"
    r"(\d{1,3}(?:,\d{3})+|\d{1,3}(?:[ \u00a0\u202f\u2009]\d{3})+(?![0-9])|\d+)"
    r"(?:\.(\d+))?"
)
PLAIN_FULLWIDTH = {ord("０") + i: ord("0") + i for i in range(10)}
PLAIN_FULLWIDTH.update({ord(a): ord(b) for a, b in zip("．％～－＋：／", ".%~-+:/", strict=True)})
PLAIN_FULLWIDTH.update({ord(c): ord(c.lower()) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"})

PIECES = [
    *"0123456789", ",", ".", " ", "\u00a0", "-", "a", "x", "Z", "k", "%", "\n", "（", "１", "５",
    "．", "Ａ", "İ", "one", "two", "twenty", "hundred", "a", "an", "half", "and", "point",
    "dozen", "thousand", "someone", "often", " of", "third", "thirds", "quarter", "were",
    "一", "二", "十", "百", "〇", "统一", "一些", "一成不变", "之一", "万一", "七十一次", "分之",
    "week", "wk", "top", "refund", "refunds", "xrefund", "videos", "the refund process", "退款",
]  # fmt: skip


def texts(n: int = 400, seed: int = 19) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(PIECES) for _ in range(rnd.randint(1, 40))) for _ in range(n)]


def spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int, tuple[str | None, ...]]]:
    return [(m.start(), m.end(), m.groups()) for m in pattern.finditer(text)]


def test_arabic_digits() -> None:
    for text in texts():
        assert spans(reading._ARABIC, text) == spans(PLAIN_ARABIC, text)


def test_normalise_is_the_translation() -> None:
    for text in texts():
        lowered = text.lower()
        if len(lowered) == len(text) and not re.search(r"[\uff01-\uff5e]", text):
            assert reading.normalise(text) == lowered
        else:
            assert reading.normalise(text) == text.translate(PLAIN_FULLWIDTH)


def test_stop_words() -> None:
    words = sorted(set(reading._ZH_STOP), key=len, reverse=True)
    lookahead = re.compile("(?=(" + "|".join(words) + "))")
    for text in texts():
        covered: set[int] = set()
        for m in lookahead.finditer(text):
            covered.update(range(m.start(), m.start() + len(m.group(1))))
        assert reading._zh_stops(text) == covered


def test_number_words() -> None:
    plain_first = re.compile(rf"\b(?:{numerals._W}|a|an|half)\b")
    for text in texts():
        norm = text.lower()
        assert [m.span() for m in numerals._number_matches(norm)] == [
            m.span() for m in numerals._EN_NUMBER.finditer(norm)
        ]
        assert (numerals._FIRST_WORD.search(norm) is None) == (plain_first.search(norm) is None)


def test_naming_phrases() -> None:
    targets = build_targets(domain_releases("course"))
    index = TermIndex(targets)
    phrases = {p for t in targets for p in t.phrases}
    ascii_p = sorted((p for p in phrases if p.isascii()), key=len, reverse=True)
    other_p = sorted((p for p in phrases if not p.isascii()), key=len, reverse=True)
    plain = re.compile(
        rf"(?<![A-Za-z])(?:{'|'.join(map(re.escape, ascii_p))})(?:e?s)?(?![A-Za-z])|"
        + "|".join(map(re.escape, other_p))
    )
    ascii_lower = {ord(c): ord(c.lower()) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    for text in texts():
        found = index.find(text)._found
        lowered = text.translate(ascii_lower)
        assert [(s, e) for s, e, _ in found] == [m.span() for m in plain.finditer(lowered)]


@pytest.mark.parametrize("seed", range(20))
def test_constant_index_is_constant_for(seed: int) -> None:
    rnd = random.Random(seed)
    found = []
    for _ in range(rnd.randint(0, 12)):
        lo = rnd.randint(0, 60)
        found.append((lo, lo + rnd.randint(1, 25), rnd.choice("abcdef")))
    index = constants.ConstantIndex(found)
    for start in range(0, 70):
        for end in range(start + 1, start + 8):
            assert index.find(start, end) == constants.constant_for(found, start, end)


@pytest.mark.parametrize("seed", range(20))
def test_blanking_spans_at_once(seed: int) -> None:
    rnd = random.Random(seed)
    text = "".join(rnd.choice("ab 1。") for _ in range(50))
    spans_ = [(a, a + rnd.randint(0, 9)) for a in (rnd.randint(0, 45) for _ in range(6))]
    expected = text
    for a, b in spans_:
        expected = expected[:a] + " " * (b - a) + expected[b:]
    assert rules._blank(text, spans_) == expected


@pytest.mark.parametrize(
    ("pattern", "longest"),
    [
        (extract._CURRENCY_BEFORE, extract._CURRENCY_LONGEST),
        (extract._APPROX_BEFORE, extract._APPROX_LONGEST),
        (extract._BOUND_BEFORE, extract._BOUND_LONGEST),
    ],
)
def test_searches_before_a_number_start_late(pattern: re.Pattern[str], longest: int) -> None:
    words = re.findall(r"[^|()?:\\]+", pattern.pattern.replace(r"\b", "").replace(r"\s*$", ""))
    pieces = [*words, " ", "  ", "x", "1", "a", ".", "~", "约"]
    rnd = random.Random(19)
    for _ in range(3000):
        window = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6)))[-24:]
        full, late = pattern.search(window), extract._ending(pattern, window, longest)
        assert (full and (full.span(), full.groups())) == (late and (late.span(), late.groups()))


def test_words_after_a_number_begin_with_the_listed_characters() -> None:
    def first_chars(pattern: re.Pattern[str]) -> set[str]:
        source = re.sub(r"\(\?[!=<][^)]*\)|\\[sb]\*?|[?*+]", "", pattern.pattern)
        return {w[0] for w in re.findall(r"[^|()\\:]+", source) if w.strip()}

    assert first_chars(extract._PERCENT) <= extract._PERCENT_FIRST
    assert first_chars(extract._UNIT_ZH) <= extract._UNIT_ZH_FIRST
    assert all("a" <= c <= "z" for c in first_chars(extract._UNIT_EN))
