"""Find every number a text states, with the precision it is stated to.

:func:`extract_mentions` returns one :class:`NumberMention` per figure: ASCII and
full-width digits, decimals, thousands separators (``1,234``, ``1 234``),
percentages (``62%``, ``62 percent``, ``百分之六十二``), ranges (``150–170``,
``150-170``, ``150 to 170``, ``150到170``, ``150至170``, ``between 150 and
170``), bands (``4.3 ± 0.2``), bounds (``fewer than 5``, ``超过100``),
approximation words (about, around, roughly, approximately, ~, 约, 大约, 左右,
差不多 …), Chinese numerals (``一百五十七``, ``四点三``, ``两千``), magnitude
suffixes (``1.2k``, ``1.28M``, ``1.5万``, ``3千``, ``1.3 million``), currency signs and
codes (``¥1.28M``, ``RMB 1.3 million``, ``128万元``), English number words
(``one hundred fifty-seven``, ``four point three one``, ``a dozen``; see
:mod:`.numerals`), fractions (``three in five``, ``五分之三``), Chinese tenths
(``六成``, ``六成二``, ``八折``) and units (:mod:`.units`: 条, 分, 星, 人, 小时, 元,
stars, users, responses, hours, sessions, yuan …).

**Stated precision** (``step``) is the place value of the last significant
digit: ``4.37`` → 0.01, ``4.30`` → 0.01 (a written trailing decimal zero is
significant), ``157`` → 1, ``160`` → 10 (trailing zeros of an integer are read
as rounding), ``1.2k`` → 100, ``一百六十`` → 10, ``0`` → ∞ (zero says nothing
about precision).

Public constants are recognised by their context and carry a ``constant``
reason instead of being treated as statistics: dates and years, ISO weeks
(``2026-W47``) and week numbers (``week 47``, ``第47周``), durations (``7 days``,
``7天``), privacy parameters (``ε = 0.5``), the rating scale (``1–5``, ``out of
5``, ``满分5分``, ``5 stars`` as a scale point), confidence levels (``95% CI``),
ordinals and list numbering (``1.`` at a line start, ``第一``, ``3rd``, ``top 3``),
date ranges (``November 16–22, 2026``, ``16–22 Nov``, ``11 月 16 日—22 日``,
``11/16–11/22``). A duration keeps its unit (``18 hours``): the guard treats it as
a figure when a release is measured in that unit. Integers below ten written in
words without a unit ("one of the topics") are wording.

The numbers themselves are read by :mod:`.reading`; this module adds the words
around them, merges ranges, fractions and bands, and tells constants apart.

Pure text processing; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from decimal import Decimal

from dpllm.guard.constants import ConstantIndex, constant_spans
from dpllm.guard.numerals import fraction_step
from dpllm.guard.reading import (
    _Draft,
    _raw_numbers,
    normalise,
    text_language,
)
from dpllm.guard.units import CURRENCY_PREFIXES, canonical_unit

__all__ = ["NumberMention", "extract_mentions", "text_language"]


@dataclass(frozen=True, slots=True)
class NumberMention:
    """One figure stated in a text.

    Attributes:
        span: ``(start, end)`` character offsets in the original text, covering the
            number and the words that belong to it (approximation word, unit).
        text: ``text[start:end]``.
        value: the stated value (the midpoint of a range); percentages in points (62 for 62%).
        step: the stated precision (place value of the last significant digit).
        is_range: a range or a band (``150–170``, ``4.3 ± 0.2``); ``lo``/``hi`` are its ends.
        lo: lower end (``value`` for a point).
        hi: upper end (``value`` for a point).
        approx: an approximation word (about, ~, 约, 左右 …) goes with it.
        percent: stated as a percentage.
        unit: the unit word as written (``"responses"``, ``"条"``), or ``""``.
        category: ``"percent"``, ``"rating"`` (stars, points), ``"users"``, ``"count"``
            (records), another canonical unit (``"hours"``, ``"yuan"`` …) or ``None``.
        bound: ``"<"`` (fewer than, 不到 …), ``">"`` (more than, 超过 …) or ``None``.
        constant: why the figure is a public constant (``"date"``, ``"week"``,
            ``"scale"``, ``"privacy-parameter"`` …), or ``None`` for a statistic.
        unit_key: the canonical unit (:func:`~dpllm.guard.units.canonical_unit`), or ``""``.
        decimal: written with a decimal fraction and no percent sign (``0.62``): a
            proportion when the release it speaks of is one.
        num_end: where the number itself ends (before its unit word).
    """

    span: tuple[int, int]
    text: str
    value: float
    step: float
    is_range: bool = False
    lo: float = 0.0
    hi: float = 0.0
    approx: bool = False
    percent: bool = False
    unit: str = ""
    category: str | None = None
    bound: str | None = None
    constant: str | None = None
    unit_key: str = ""
    decimal: bool = False
    num_end: int = 0


# --------------------------------------------------------------------------- patterns
_PERCENT = re.compile(r"\s*(?:%|percent\b|per cent\b|pct\b|个百分点|percentage points?\b)")
_ZH_APPROX_SUFFIX = re.compile(r"(?:多|余)")
_ADJ = r"(?:(?:active|unique|distinct|new|total|written|individual|separate|valid|more)\s+)?"
_UNIT_EN = re.compile(
    rf"\s*{_ADJ}(stars?|points?|users?|people|persons|students?|learners?|participants?|"
    r"respondents?|members?|responses?|ratings?|reviews?|comments?|feedback|entries|"
    r"submissions?|messages?|mentions?|votes?|hours?|hrs?|minutes?|mins?|seconds?|days?|"
    r"sessions?|visits?|times|yuan|rmb|cny|dollars?|euros?|tickets?|orders?|purchases?|"
    r"customers?|visitors?|items?|records?)\b",
)
_UNIT_ZH = re.compile(
    r"\s*(颗星|星级|星|分钟|分(?!钟|之)|条|份|人次|个人|人|位|名|个小时|小时|秒钟|秒|天|"
    r"万元|元|块|次|张|笔|单)"
)
_CATEGORY_OF_KEY = {"stars": "rating", "users": "users", "records": "count"}
_CURRENCY_BEFORE = re.compile(r"(?:¥|￥|\$|€|us\$|\brmb|\bcny|\busd|\beur)\s*$")
_FRACTION_SEP = re.compile(r"^\s+(?:in(?: every)?|out of)\s+$")
_FRACTION_NOT = re.compile(r"\s*(?:stars?|points?|星|分)")
_APPROX_BEFORE = re.compile(
    r"(?:\babout|\baround|\broughly|\bapproximately|\bapprox\.?|\bnearly|\balmost|\bsome|"
    r"\bcirca|\bca\.|\bestimated|~|≈|约|大约|大概|差不多|将近|接近|近)\s*$",
)
_APPROX_AFTER = re.compile(r"\s*(?:左右|上下)")
_BOUND_BEFORE = re.compile(
    r"(?:(fewer than|less than|under|below|at most|up to|少于|不到|不足|低于|至多)|"
    r"(more than|over|above|at least|exceeding|超过|多于|高于|至少|逾))\s*$",
)
_RANGE_SEP = re.compile(r"^\s*(?:–|—|-|~|〜|to|到|至|and)\s*(?:¥|￥|\$|€)?$")
_BAND_SEP = re.compile(r"^\s*(?:±|\+/-|\+-)\s*$")
_SCALE_LIST = re.compile(r"^\s*(?:or|and|,|、|或|和|与)\s*$")
_BETWEEN = re.compile(r"(?:between|from)\s*$")
# Constants that keep their unit and wording: a duration may be a figure after all
# ("18 hours" when a release is measured in hours), a scale point may be listed.
_DECORATED_CONSTANTS = frozenset({"duration", "scale"})
# The last character each of the "before" patterns can end with (before trailing
# spaces): a window whose last character is none of them is not searched at all.
_CURRENCY_LAST = frozenset("¥￥$€bydr")
_APPROX_LAST = frozenset("tdyx.eae~≈约概多近")
_BOUND_LAST = frozenset("nrwtoe g于到足多过逾少".replace(" ", ""))


# The characters _PERCENT and _UNIT_ZH can begin with after their leading spaces
# (_UNIT_EN's are ASCII letters a–z).
_PERCENT_FIRST = frozenset("%p个")
_UNIT_ZH_FIRST = frozenset("颗星分条份人个位名小秒天万元块次张笔单")
# The longest alternative of each (before "\s*$"): "us$", "approximately", "fewer than".
_CURRENCY_LONGEST, _APPROX_LONGEST, _BOUND_LONGEST = 3, 13, 10


def _ending(pattern: re.Pattern[str], window: str, longest: int) -> re.Match[str] | None:
    """``pattern.search(window)`` for a pattern of alternatives (``longest`` characters at
    most, each ending in a non-space) then ``\\s*$``: started where a match can begin.

    Such a match ends where ``window.rstrip()`` ends, so it begins no earlier than
    ``longest`` characters before; a search from there finds the same leftmost match
    (a look-behind or ``\\b`` still sees the characters before the start), without
    trying every position of the window.
    """
    return pattern.search(window, max(0, len(window.rstrip()) - longest))


def _decorate(norm: str, d: _Draft, spans: ConstantIndex) -> _Draft:
    """``d`` (as read) with its constant reason and the words around it, in place."""
    raw_start = d.start
    end = d.end
    # (A mixed fraction of a time unit comes in as a duration: keep it.)
    d.constant = spans.find(raw_start, end) or d.constant
    if d.constant is not None and d.constant not in _DECORATED_CONSTANTS:
        return d  # a date or a week: its neighbours' words do not matter
    # Each pattern after the number is tried only when the next character can begin it
    # (a space, or one of its first characters): most numbers are followed by neither.
    nxt = norm[end : end + 1]
    if nxt == "多" or nxt == "余":  # _ZH_APPROX_SUFFIX
        d.approx, end = True, end + 1
        nxt = norm[end : end + 1]
    space = nxt.isspace()
    pct = None
    if not (d.percent and d.words) and (space or nxt in _PERCENT_FIRST):
        pct = _PERCENT.match(norm, end)
    if pct:
        d.percent, end = True, pct.end()
    elif not d.percent:
        unit = None
        if space or "a" <= nxt <= "z":
            unit = _UNIT_EN.match(norm, end)
        if unit is None and (space or nxt in _UNIT_ZH_FIRST):
            unit = _UNIT_ZH.match(norm, end)
        if unit:
            d.unit, end = unit.group(1), unit.end()
            if d.unit == "万元":  # 128万元: the magnitude was not read with the digits
                d.unit = "元"
                if d.factor == 1:
                    d.value *= 10_000
                    d.step = None if d.step is None else d.step * 10_000
                    d.factor = 10_000
    nxt = norm[end : end + 1]
    tail = _APPROX_AFTER.match(norm, end) if nxt == "左" or nxt == "上" or nxt.isspace() else None
    if tail:
        d.approx, end = True, tail.end()
    d.end = end
    before = norm[max(0, raw_start - 24) : raw_start]
    last = before.rstrip()[-1:]
    currency = (
        _ending(_CURRENCY_BEFORE, before, _CURRENCY_LONGEST) if last in _CURRENCY_LAST else None
    )
    if currency:
        d.currency = currency.group(0).strip()
        d.start = raw_start - (len(before) - currency.start())
        before = before[: currency.start()]
        last = before.rstrip()[-1:]
    approx = (
        _ending(_APPROX_BEFORE, before, _APPROX_LONGEST) if last and last in _APPROX_LAST else None
    )
    if (
        approx
        and approx.group(0).strip() in "~≈"
        and before[: approx.start()].rstrip()[-1:].isdigit()
    ):
        approx = None  # "150~170": a range separator, not "about"
    if approx:
        d.approx, d.start = True, d.start - (len(before) - approx.start())
    window = norm[max(0, d.start - 24) : d.start]
    last = window.rstrip()[-1:]
    bound = _ending(_BOUND_BEFORE, window, _BOUND_LONGEST) if last and last in _BOUND_LAST else None
    if bound:
        d.bound = "<" if bound.group(1) else ">"
        d.start -= len(bound.group(0))
    return d


def _fraction(norm: str, a: _Draft, b: _Draft) -> _Draft | None:
    """ "three in five", "3 out of 10", "五分之三": a share, in points."""
    if a.constant is not None or a.percent or b.percent or a.lo is not None:
        return None
    if norm[a.num_end : a.num_end + 2] == "分之" and b.start == a.num_end + 2:
        num, den = b, a
    elif a.end <= b.start and _FRACTION_SEP.match(norm[a.end : b.start]):
        num, den = a, b
        if _FRACTION_NOT.match(norm, b.num_end):
            return None  # "4 out of 5 stars": a rating on the scale
    else:
        return None
    if num.step is None or num.step < 1 or den.step is None or den.step < 1 or a.unit:
        return None
    n, dd = int(num.value), int(den.value)
    if not 0 < n < dd:
        return None
    start, end = min(a.start, b.start), max(a.end, b.end)
    merged = _Draft(start, end, end, Decimal(100 * n) / Decimal(dd), None, True)
    merged.step = Decimal(repr(fraction_step(dd)))
    merged.approx, merged.words = a.approx, True
    return merged


def _merge(norm: str, drafts: list[_Draft]) -> list[_Draft]:
    out: list[_Draft] = []
    i = 0
    while i < len(drafts):
        a = drafts[i]
        b = drafts[i + 1] if i + 1 < len(drafts) else None
        if b is not None:
            frac = _fraction(norm, a, b)
            if frac is not None:
                out.append(frac)
                i += 2
                continue
        # "16 to 20 hours": a range of a unit that is a constant unless a release uses it.
        b_free = b is not None and (b.constant is None or b.constant == "duration")
        if b is not None and a.constant is None and b_free:
            gap_range = norm[a.end : b.start] if a.end <= b.start else None
            gap_band = norm[a.num_end : b.start] if a.num_end <= b.start else None
            if gap_band is not None and not a.unit and _BAND_SEP.match(gap_band):
                merged = _Draft(a.start, b.end, a.num_end, a.value, a.step, a.percent or b.percent)
                merged.lo, merged.hi = a.value - b.value, a.value + b.value
                merged.unit, merged.approx = b.unit, True
                merged.currency, merged.decimal = a.currency, a.decimal
                out.append(merged)
                i += 2
                continue
            if gap_range is not None and _RANGE_SEP.match(gap_range):
                is_and = gap_range.strip().lower() == "and"
                between = _BETWEEN.search(norm[max(0, a.start - 10) : a.start])
                if not is_and or between:
                    out.append(_range(norm, a, b, between))
                    i += 2
                    continue
        if (
            b is not None
            and _scale_point(b)
            and a.constant is None
            and not a.approx
            and a.step is not None
            and a.step >= 1
            and 0 <= a.value <= 5
            and a.end <= b.start
            and _SCALE_LIST.match(norm[a.end : b.start])
        ):
            a.constant = "scale"  # "4 or 5 stars", "4、5 星": scale points listed
        if (
            norm[a.start : a.start + 1] in "0123456789"
            and a.start > 0
            and norm[a.start - 1] in "-−"
        ):
            if a.start < 2 or not norm[a.start - 2].isalnum():
                a.value, a.start = -a.value, a.start - 1
        if norm[a.start - 1 : a.start] == "±" and a.constant is None:
            a.constant = "band-width"
        out.append(a)
        i += 1
    return out


def _scale_point(d: _Draft) -> bool:
    """A point of the rating scale ("5 stars", "5 星"), not a mean."""
    if d.constant == "scale":
        return True
    if not d.unit or d.approx or d.lo is not None or not 0 <= d.value <= 5:
        return False  # (the cheap tests first)
    integer = d.step is None or d.step >= 1
    return integer and canonical_unit(d.unit) == "stars"


def _range(norm: str, a: _Draft, b: _Draft, between: re.Match[str] | None) -> _Draft:
    if b.factor > 1 and a.factor == 1 and a.value * b.factor <= b.value * 10:
        # "1.2–1.35M", "1.2到1.5万": the magnitude written once applies to both ends.
        a.value *= b.factor
        a.step = None if a.step is None else a.step * b.factor
    start = a.start - (len(between.group(0)) if between else 0)
    step = a.step if b.step is None else b.step if a.step is None else min(a.step, b.step)
    merged = _Draft(start, b.end, b.num_end, (a.value + b.value) / 2, step, False)
    merged.lo, merged.hi = min(a.value, b.value), max(a.value, b.value)
    merged.percent = a.percent or b.percent
    merged.unit = b.unit or a.unit
    merged.approx = a.approx or b.approx
    merged.currency = a.currency or b.currency
    merged.decimal = a.decimal or b.decimal
    merged.constant = b.constant
    return merged


def _public(d: _Draft, category: str | None) -> str | None:
    if d.constant is not None:
        return d.constant
    integer = d.step is None or d.step >= 1
    if d.lo is None and d.plain and not d.percent and not d.unit and 1900 <= d.value <= 2100:
        return "year"
    if d.lo is None and category == "rating" and integer and 0 <= d.value <= 5 and not d.approx:
        return "scale"
    if (
        d.lo is not None
        and d.hi is not None
        and category == "rating"
        and integer
        and 0 <= d.lo
        and d.hi <= 5
        and not d.approx
    ):
        return "scale"  # a span of scale points ("4–5 stars"), not a mean
    if (
        d.words
        and d.lo is None
        and integer
        and abs(d.value) < 10
        and not (d.unit or d.percent or d.approx or d.bound or d.currency or d.quantity)
    ):
        return "wording"  # "one of the topics", "两个方面"
    if d.words and d.lo is None and d.value == 1 and not d.percent and not d.decimal:
        return "wording"  # "至少一条反馈", "at least one record": one is not a statistic
    return None


def extract_mentions(text: str) -> list[NumberMention]:
    """Every number stated in ``text``, in order, with its stated precision.

    Args:
        text: any text, English or Chinese (or both).

    Returns:
        One :class:`NumberMention` per figure; a range or a band is one mention.
    """
    norm = normalise(text)
    raws = _raw_numbers(norm)
    if not raws:
        return []
    spans = ConstantIndex(constant_spans(norm, [r.start for r in raws]))
    drafts = [_decorate(norm, raw, spans) for raw in raws]
    mentions: list[NumberMention] = []
    for d in _merge(norm, drafts):
        key = canonical_unit(d.unit) if d.unit else ""
        if d.currency:
            key = CURRENCY_PREFIXES.get(d.currency.lower(), key)
        category = "percent" if d.percent else _CATEGORY_OF_KEY.get(key, key or None)
        value = _float(d.value)
        mentions.append(
            _new_mention(
                (d.start, d.end),
                text[d.start : d.end],
                value,
                _INF if d.step is None else _float(d.step),
                d.lo is not None,
                value if d.lo is None else _float(d.lo),
                value if d.hi is None else _float(d.hi),
                d.approx,
                d.percent,
                d.unit or d.currency,
                category,
                d.bound,
                _public(d, category),
                "share" if d.percent else key,
                d.decimal and not d.percent,
                d.num_end,
            )
        )
    return mentions


_INF = float("inf")
_FLOATS: dict[Decimal, float] = {}


def _float(value: Decimal) -> float:
    """``float(value)``, remembered: ``Decimal.__float__`` goes through a string (~1 µs).

    Zero is not remembered (``-0`` and ``0`` are equal keys but different floats).
    """
    f = _FLOATS.get(value)
    if f is None:
        f = float(value)
        if value:
            if len(_FLOATS) >= 4096:
                _FLOATS.clear()
            _FLOATS[value] = f
    return f


# NumberMention's slots, set directly: a frozen dataclass's __init__ goes through
# object.__setattr__ for every field (~5× the cost), and extraction builds one per figure.
_MENTION_SLOTS = tuple(getattr(NumberMention, f.name).__set__ for f in fields(NumberMention))


def _new_mention(*values: object) -> NumberMention:
    """A :class:`NumberMention` from all its fields, in declaration order."""
    m = object.__new__(NumberMention)
    for put, v in zip(_MENTION_SLOTS, values, strict=True):
        put(m, v)
    return m
