"""Numbers written in words: English number words, Chinese numerals, fractions.

**English** cardinal runs ("one hundred fifty-seven", "twelve thousand eight
hundred forty") are found by a regular expression here, which gives their
spans, and turned into integers by ``text2num`` (PyPI ``text2num``, MIT, a
Rust extension: ~1 µs a run). We keep our own code around it for what
``text2num`` does not read: a leading "a" ("a hundred"), decimals ("four point
three one" — its ``alpha2digit`` reads them but returns a rewritten text
without spans, so a figure could not be pointed at), "a dozen"/"half a dozen",
and magnitudes after a decimal ("one point two million").

**Chinese** numerals keep our own parser (:func:`parse_zh_int`). ``cn2an``
(PyPI, MIT) was evaluated and not used: importing it takes ~0.2 s; its
``transform`` takes ~2.5 ms for 660 characters (the guard's whole budget is
2 ms for 1,000); it rewrites 统一 into 统1, cannot read 十二点八万 or 六成二,
reports failures through ``warnings`` (an error under our test settings), and,
like ``alpha2digit``, returns a rewritten text without spans.

Pure text processing; no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import NamedTuple

from text_to_num import text2num

__all__ = [
    "WordNumber",
    "english_fractions",
    "english_numbers",
    "fraction_step",
    "parse_zh_int",
]


class WordNumber(NamedTuple):
    """A number written in English words."""

    start: int
    end: int
    value: Decimal
    step: Decimal | None  # None: a literal zero (says nothing about precision)
    mixed: bool = False  # a whole number and a fraction ("four and a half")


_SMALL = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety"
).split()
_DIGIT_WORDS = {w: i for i, w in enumerate(_SMALL[:10])}
_DIGIT_WORDS["oh"] = 0
_MAGS = {"hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_W = "|".join([*_SMALL, *_MAGS])
_D = "|".join(_DIGIT_WORDS)
_EN_NUMBER = re.compile(
    rf"\b(?:(?P<half>half\s+a\s+dozen)|(?P<a>an?\s+(?=hundred|thousand|million|billion|dozen))?"
    rf"(?P<int>(?:{_W})(?:(?:\s+and\s+|\s+|-)(?:{_W}))*)?"
    rf"(?(int)|(?(a)|(?!)))"
    rf"(?:\s+point(?P<frac>(?:\s+(?:{_D}))+))?"
    rf"(?:\s+(?P<mag>thousand|million|billion))?"
    rf"(?P<dozen>\s*dozen)?)\b(?!-)"
)


def _at_word_start(word: str) -> str:
    """``\bword`` written as ``w(?<=\bw)ord``: a pattern whose branches all begin with a
    literal is scanned for those first characters in C; one that begins with ``\b``
    is tried at every position."""
    first = re.escape(word[0])
    return rf"{first}(?<=\b{first}){re.escape(word[1:])}"


# "\b(?:{_W}|a|an|half)\b", scanned fast (see _at_word_start).
_FIRST_WORD = re.compile(
    "|".join(rf"{_at_word_start(w)}\b" for w in [*_SMALL, *_MAGS, "a", "an", "half"])
)
# Where an _EN_NUMBER match can begin: a word start followed by one of its first words.
# ("a" only as the word "a"/"an" and a space, as _EN_NUMBER's "an?\s+": not every a-word.)
_NUMBER_START = re.compile(
    "|".join([*(_at_word_start(w) for w in [*_SMALL, *_MAGS, "half"]), r"a(?<=\ba)n?\s"])
)


def _number_matches(text: str) -> Iterator[re.Match[str]]:
    """``_EN_NUMBER.finditer(text)``, tried only where a number word begins.

    The same matches: finditer tries every position from the last match's end and
    yields the first that matches; here the positions where no number word begins
    (where _EN_NUMBER cannot match) are skipped by a fast scan.
    """
    pos = 0
    while (start := _NUMBER_START.search(text, pos)) is not None:
        m = _EN_NUMBER.match(text, start.start())
        if m is None:
            pos = start.start() + 1
            continue
        yield m
        pos = m.end()  # never empty: a match holds at least one word


def _int_words(words: str) -> int | None:
    try:
        return int(text2num(words, "en"))
    except ValueError:
        return None


def english_numbers(text: str) -> list[WordNumber]:
    """Every number written in English words in ``text`` (lower-cased), with its span.

    Precision: an integer's step is the place of its last non-zero digit ("one
    hundred sixty" → 10), a decimal's the place of its last written digit
    ("four point three zero" → 0.01); a magnitude scales both; dozens are exact.
    """
    out: list[WordNumber] = []
    if _FIRST_WORD.search(text) is None:  # most texts: no number word at all
        return out
    mixed = _mixed_fractions(text) if "and" in text else []
    for m in _number_matches(text):
        if mixed and any(w.start < m.end() and m.start() < w.end for w in mixed):
            continue  # a part of "four and a third", read whole
        if m.group("half"):
            out.append(WordNumber(m.start(), m.end(), Decimal(6), Decimal(1)))
            continue
        words = m.group("int")
        if words is None:
            if not m.group("a"):
                continue
            value, words = 1, "one"
        else:
            if words.split()[0].lower() in _MAGS:
                words = "one " + words
            parsed = _int_words(words.replace("-", " ").replace(" and ", " "))
            if parsed is None:
                parsed = _digit_by_digit(words)
            if parsed is None:
                continue
            value = parsed
        frac = m.group("frac")
        mag = _MAGS.get((m.group("mag") or "").lower(), 1)
        if frac and mag == 1 and words.split()[-1].lower() in ("thousand", "million", "billion"):
            continue  # "two million point five": not a way numbers are written
        if frac:
            digits = "".join(str(_DIGIT_WORDS[w.lower()]) for w in frac.split())
            number = Decimal(f"{value}.{digits}") * mag
            step: Decimal | None = Decimal(10) ** -len(digits) * mag
        else:
            number = Decimal(value) * mag
            step = int_step(int(number))
        if m.group("dozen"):
            number *= 12
            step = Decimal(1) if number else None
        if m.group("mag") and not frac and words is not None and mag > 1:
            step = int_step(int(number))
        out.append(WordNumber(m.start(), m.end(), number, step))
    if mixed:
        out.extend(mixed)
        out.sort()
    return out


def _digit_by_digit(words: str) -> int | None:
    """ "one-five-seven" → 157: three or more digits read out one by one, joined by hyphens.

    Only hyphens, and not two digits: "two-three times" and "two three times" are more
    likely "two or three" than 23.
    """
    parts = words.split("-")
    if len(parts) < 3 or not all(p in _DIGIT_WORDS for p in parts):
        return None
    return int("".join(str(_DIGIT_WORDS[p]) for p in parts))


_NUMERATORS = {"a": 1, "an": 1, **{w: i for w, i in _DIGIT_WORDS.items() if 0 < i < 10}}
_NUMERATORS.pop("oh", None)
_DENOMINATOR_WORDS = (
    "half halves third thirds quarter quarters fourth fourths fifth fifths tenth tenths".split()
)
# "four and a half", "eighteen and a half", "seven and three quarters": the whole part is a
# run of number words without "and" (its first word matched as in _FIRST_WORD: fast).
_MIXED = re.compile(
    rf"(?P<whole>(?:{'|'.join(_at_word_start(w) for w in [*_SMALL, *_MAGS])})"
    rf"(?:(?:\s+|-)(?:{_W}))*)"
    rf"\s+and\s+(?P<num>{'|'.join(_NUMERATORS)})[\s-]+(?P<den>{'|'.join(_DENOMINATOR_WORDS)})\b"
)


# The tail every _MIXED match holds, beginning with a literal.
_MIXED_ANCHOR = re.compile(
    rf"and\s+(?:{'|'.join(_NUMERATORS)})[\s-]+(?:{'|'.join(_DENOMINATOR_WORDS)})\b"
)


def _mixed_fractions(text: str) -> list[WordNumber]:
    """ "Four and a third" = 4.33…, stated to :func:`fraction_step` of its denominator
    (in units: a third, a half, a quarter → 0.1), the rule fractions of a share follow."""
    out: list[WordNumber] = []
    if _MIXED_ANCHOR.search(text) is None:  # (found by its literal "and": fast)
        return out
    for m in _MIXED.finditer(text):
        whole = _int_words(m.group("whole").replace("-", " "))
        num = _NUMERATORS[m.group("num")]
        den = _DENOMINATORS[m.group("den")]
        if whole is None or not 0 < num < den:
            continue
        value = Decimal(whole) + Decimal(num) / Decimal(den)
        step = Decimal(repr(fraction_step(den))) / 100
        out.append(WordNumber(m.start(), m.end(), value, step, mixed=True))
    return out


def int_step(value: int) -> Decimal | None:
    """The place value of an integer's last non-zero digit (``1600`` → 100); ``None`` for 0."""
    if value == 0:
        return None
    zeros = 0
    while value % 10 == 0:
        value //= 10
        zeros += 1
    return pow10(zeros)


# Powers of ten as Decimals, built once.
_POW10 = {k: Decimal(10) ** k for k in range(-30, 30)}


def pow10(k: int) -> Decimal:
    """``Decimal(10) ** k``, from a table for the usual exponents."""
    return _POW10.get(k) or Decimal(10) ** k


_DENOMINATORS = {
    "half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4,
    "fourth": 4, "fourths": 4, "fifth": 5, "fifths": 5, "tenth": 10, "tenths": 10,
}  # fmt: skip
_PART_OF = ("the ", "first ", "second ", "latter ", "last ", "other ")
# What follows a fraction word that is a share: "of" ("two thirds of the ratings"), or a
# verb whose subject it is ("a third were positive", "half said …").
_SHARE_FOLLOWS = (
    r"(?=\s+(?:of|were|was|are|is|said|say|gave|give|rated|reported|mentioned|had|have|"
    r"felt|found|wanted|asked|ended|crashed|came|got|left|chose|preferred|agreed|liked)\b)"
)
# Every _EN_FRACTION match holds one of these: texts without any skip the full pattern.
_DENOMINATOR_OF = re.compile("|".join(rf"{d}{_SHARE_FOLLOWS}" for d in _DENOMINATORS))
_EN_FRACTION = re.compile(
    r"\b(?:(a|an|one|two|three|four|five|six|seven|eight|nine)[\s-]+)?"
    rf"({'|'.join(_DENOMINATORS)}){_SHARE_FOLLOWS}"
)


def english_fractions(text: str) -> list[WordNumber]:
    """ "Two thirds of", "a quarter of", "half of", "a third were": a share in percentage points.

    Only before "of" or a verb it is the subject of ("the second half of the week" is
    no share… but "half of the students" and "a third were positive" are; the guard
    then matches it to a proportion or calls it unsupported).
    The precision is :func:`fraction_step` of the denominator.
    """
    out: list[WordNumber] = []
    if _DENOMINATOR_OF.search(text) is None:
        return out
    for m in _EN_FRACTION.finditer(text):
        word = m.group(1)
        num = 1 if word in (None, "a", "an", "one") else _DIGIT_WORDS[word]
        den = _DENOMINATORS[m.group(2)]
        if not 0 < num < den:
            continue
        if m.group(1) is None and den != 2:
            continue  # "third of" alone is an ordinal ("the third of May")
        if m.group(1) is None and text[max(0, m.start() - 8) : m.start()].endswith(_PART_OF):
            continue  # "the second half of the week": a part of time, not a share
        value = Decimal(100 * num) / Decimal(den)
        out.append(WordNumber(m.start(), m.end(), value, Decimal(repr(fraction_step(den)))))
    return out


def fraction_step(denominator: int) -> float:
    """The precision, in percentage points, a fraction "n in d" states a share to.

    "Three in five" says 60% to about a fifth: the largest power of ten not above
    100/d (d = 5 → 10 points, d = 30 → 1 point), the same rule the template
    filters use for a band's half-width.
    """
    return 10.0 ** math.floor(math.log10(100 / denominator) + 1e-12)


_ZH_DIGIT = {c: i for i, c in enumerate("零一二三四五六七八九")}
_ZH_DIGIT.update({"〇": 0, "两": 2})
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000}
_ZH_BIGS = {"万": 10_000, "亿": 100_000_000}


_ZH_POSITIONAL = frozenset("〇零一二三四五六七八九")


def parse_zh_int(chars: str) -> int | None:
    """A Chinese integer (一百五十七, 两千五, 一万二千八百四十), or ``None`` if malformed.

    Three or more digits without 十/百/千 are read one by one, as a year or a code is
    written (一五七 = 157, 二〇二六 = 2026). Two are not: 三四 is "three or four" and 九〇
    (后) a decade, so they keep the old reading (the last digit, plain wording).
    """
    if len(chars) > 2 and all(c in _ZH_POSITIONAL for c in chars):
        return int("".join(str(_ZH_DIGIT[c]) for c in chars))
    total = section = num = 0
    last_unit = 0
    for i, ch in enumerate(chars):
        if ch in _ZH_DIGIT:
            num = _ZH_DIGIT[ch]
            # Colloquial "一百五" = 150, "两千五" = 2500: a trailing digit after 百/千/万.
            if i == len(chars) - 1 and i > 0 and chars[i - 1] in "百千万" and last_unit >= 100:
                num *= last_unit // 10
        elif ch in _ZH_UNITS:
            section += (num or 1) * _ZH_UNITS[ch]
            last_unit = _ZH_UNITS[ch]
            num = 0
        elif ch in _ZH_BIGS:
            total = (total + section + num) * _ZH_BIGS[ch]
            last_unit = _ZH_BIGS[ch]
            section = num = 0
        else:
            return None
    return total + section + num
