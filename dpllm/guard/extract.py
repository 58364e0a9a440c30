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

Pure text processing; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from decimal import Decimal

from dpllm.guard.constants import ConstantIndex, constant_spans
from dpllm.guard.numerals import (
    english_fractions,
    english_numbers,
    fraction_step,
    parse_zh_int,
)
from dpllm.guard.units import CURRENCY_PREFIXES, canonical_unit

__all__ = ["NumberMention", "extract_mentions", "text_language"]

# One-to-one character mapping, so spans in the normalised text are spans in the original.
# Full-width forms folded and ASCII letters lower-cased, one character for one, so
# spans in the normalised text are spans in the original and no pattern needs
# re.IGNORECASE (which makes every comparison case-fold, at a cost).
_FULLWIDTH = {ord("０") + i: ord("0") + i for i in range(10)}
_FULLWIDTH.update({ord(a): ord(b) for a, b in zip("．％～－＋：／", ".%~-+:/", strict=True)})
_FULLWIDTH.update({ord(c): ord(c.lower()) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"})


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
# Read as "(?<![0-9A-Za-z.,])(\d{1,3}(?:,\d{3})+|\d{1,3}(?:[ …]\d{3})+(?![0-9])|\d+)",
# written with the first digit outside the alternation and the look-behind after it:
# a pattern that begins with a character class is scanned for that class in C, one
# that begins with a look-behind is tried at every position (~3× slower here).
_ARABIC = re.compile(
    r"(\d(?<![0-9A-Za-z.,]\d)"
    r"(?:\d{0,2}(?:,\d{3})+|\d{0,2}(?:[ \u00a0\u202f\u2009]\d{3})+(?![0-9])|\d*))"
    r"(?:\.(\d+))?"
)
_ZH_DIGITS = "零〇一二两三四五六七八九"
_ZH_NUM = re.compile(rf"[{_ZH_DIGITS}十百千万亿]+(?:点[{_ZH_DIGITS}]+)?")
_ZH_STOP = (
    "一些 一般 一起 一直 一定 一样 一下 一致 一切 一旦 一方面 统一 唯一 万一 千万 十分 一点儿 "
    "一点点 有点 之一 一边 一面 一同 一共 一再 一向 一度 一味 一律 一时 一会 一番 一生 "
    "不一 同一 一般 一对一 三心二意 一五一十 百分百 万分 一成不变 一次 一半"
).split()
# Every start position of a stop word (overlapping ones too), longest alternative first.
# Longest alternative first: at each position the first that matches is the longest.
_ZH_STOP_RE = re.compile("|".join(sorted(set(_ZH_STOP), key=len, reverse=True)))
_MAGNITUDE = re.compile(
    r"(?:(k|m|mn|b|bn)(?![A-Za-z])|(千|万|亿)|\s*(thousand|million|billion|mn|bn)\b)"
)
_MAGNITUDES = {"k": 1000, "千": 1000, "万": 10_000, "亿": 100_000_000, "m": 1_000_000}
_MAGNITUDES.update({"mn": 1_000_000, "b": 10**9, "bn": 10**9})
_MAGNITUDES.update({"thousand": 1000, "million": 1_000_000, "billion": 10**9})
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
_TENTHS = re.compile(r"(成|折)")
_ZH_CHARS = "零〇一二两三四五六七八九十百千万"
_FENZHI = re.compile(rf"([{_ZH_CHARS}]+|[0-9]+)分之([{_ZH_CHARS}]+|[0-9]+)")
_TENTHS_NOT = "员功绩就立果本交为长绩人年熟"
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
_CJK = re.compile(r"[\u4e00-\u9fff]")
_TIME_AFTER = re.compile(
    r"\s*(?:days?|weeks?|months?|years?|hours?|hrs?|minutes?|mins?|seconds?|secs?)\b"
)
# Constants that keep their unit and wording: a duration may be a figure after all
# ("18 hours" when a release is measured in hours), a scale point may be listed.
_DECORATED_CONSTANTS = frozenset({"duration", "scale"})
# Powers of ten as Decimals, built once.
_POW10 = {k: Decimal(10) ** k for k in range(-30, 30)}


def _pow10(k: int) -> Decimal:
    return _POW10.get(k) or Decimal(10) ** k


_DROP_SEPARATORS = {ord(c): None for c in ", \u00a0\u202f\u2009"}
# The last character each of the "before" patterns can end with (before trailing
# spaces): a window whose last character is none of them is not searched at all.
_CURRENCY_LAST = frozenset("¥￥$€bydr")
_APPROX_LAST = frozenset("tdyx.eae~≈约概多近")
_BOUND_LAST = frozenset("nrwtoe g于到足多过逾少".replace(" ", ""))


_FULLWIDTH_FORMS = re.compile(r"[\uff01-\uff5e]")
# The full-width characters _FULLWIDTH folds (a subset of _FULLWIDTH_FORMS).
_FOLDED = re.compile("[" + "".join(re.escape(chr(k)) for k in _FULLWIDTH if k > 0x7F) + "]")


def ascii_lower(text: str) -> str:
    """``text`` with only A–Z lower-cased (same length, same offsets).

    ``bytes.lower()`` touches ASCII letters only and UTF-8 leaves every other
    character's bytes ≥ 0x80, so this equals ``text.translate({A–Z → a–z})``
    at a fraction of its cost on non-ASCII text (``translate`` with a dict looks
    up every character).
    """
    if text.isascii():
        return text.lower()
    return text.encode("utf-8", "surrogatepass").lower().decode("utf-8", "surrogatepass")


def _fold_width(match: re.Match[str]) -> str:
    return chr(_FULLWIDTH[ord(match.group(0))])


def normalise(text: str) -> str:
    """Full-width forms folded, letters lower-cased: same length, same offsets."""
    if _FULLWIDTH_FORMS.search(text) is not None:
        # The same as text.translate(_FULLWIDTH): ASCII letters lower-cased, the
        # full-width digits and signs folded; other characters left as they are.
        lowered = ascii_lower(text)
        return _FOLDED.sub(_fold_width, lowered) if _FOLDED.search(lowered) else lowered
    lowered = text.lower()  # far faster than translate(); keeps offsets unless a
    # character lower-cases into two ("İ" → "i̇"), then fall back to ASCII only
    return lowered if len(lowered) == len(text) else ascii_lower(text)


def text_language(text: str) -> str:
    """``"zh"`` when the text contains Han characters, else ``"en"``."""
    return "zh" if _CJK.search(text) else "en"


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~5× more
class _Draft:
    """A number as read (its digits or words), then decorated (its words around) in place."""

    start: int
    end: int
    num_end: int
    value: Decimal
    step: Decimal | None
    percent: bool
    plain: bool = False
    approx: bool = False
    unit: str = ""
    bound: str | None = None
    constant: str | None = None
    lo: Decimal | None = None
    hi: Decimal | None = None
    factor: int = 1
    words: bool = False
    decimal: bool = False
    currency: str = ""
    quantity: bool = False


def _raw(
    start: int,
    end: int,
    value: Decimal,
    step: Decimal | None,  # None: infinitely coarse (a literal zero)
    percent: bool,
    plain: bool = False,  # plain ASCII digits, no separator, decimal or magnitude
    factor: int = 1,  # the magnitude written after it (1.2k → 1000)
    words: bool = False,  # written in words (English or Chinese)
    decimal: bool = False,  # a decimal fraction was written (0.62, 四点三)
    quantity: bool = False,  # a quantity word ("a dozen"), never mere wording
) -> _Draft:
    """A number as read, before :func:`_decorate` (positional: the cheapest construction)."""
    return _Draft(
        start, end, end, value, step, percent, plain, False, "", None, None, None, None,
        factor, words, decimal, "", quantity,
    )  # fmt: skip


def _step_of_int(value: int) -> Decimal | None:
    if value == 0:
        return None
    zeros = 0
    while value % 10 == 0:
        value //= 10
        zeros += 1
    return _pow10(zeros)


def _zh_stops(text: str) -> set[int]:
    """Every position some stop word covers, found in one pass.

    A numeral starting at a covered position is a stop word's ("统一", "一些"):
    the stop word begins at or before it and covers its first character; one that
    begins inside it ("七十一次" holds "一次") leaves it alone, as only positions
    from the stop word's start on are covered.
    """
    covered: set[int] = set()
    # Overlapping occurrences too: search again one character after each start (a
    # pattern of literals is scanned in C; a look-ahead finditer tries every position).
    m = _ZH_STOP_RE.search(text)
    while m is not None:
        p = m.start()
        covered.update(range(p, m.end()))
        m = _ZH_STOP_RE.search(text, p + 1)
    return covered


_DIGITS_READ: dict[tuple[str, str | None], tuple[Decimal, Decimal | None]] = {}


def _read_digits(digits: str, frac: str | None) -> tuple[Decimal, Decimal | None]:
    """The value and stated step of a digit run (remembered: texts repeat their figures)."""
    int_text = digits.translate(_DROP_SEPARATORS)
    value = Decimal(f"{int_text}.{frac}" if frac else int_text)
    step = _pow10(-len(frac)) if frac else _step_of_int(int(int_text))
    if len(_DIGITS_READ) >= 4096:
        _DIGITS_READ.clear()
    _DIGITS_READ[digits, frac] = (value, step)
    return value, step


def _arabic(norm: str) -> list[_Draft]:
    out: list[_Draft] = []
    for m in _ARABIC.finditer(norm):
        digits, frac = m.group(1, 2)
        read = _DIGITS_READ.get((digits, frac))
        if read is None:
            read = _read_digits(digits, frac)
        value, step = read
        frac = frac or ""
        end = m.end()
        mag = _MAGNITUDE.match(norm, end)
        factor = 1
        if mag:
            key = (mag.group(1) or mag.group(2) or mag.group(3)).lower()
            factor = _MAGNITUDES[key]
            value *= factor
            step = None if step is None else step * factor
            if frac == "" and step is not None:
                step = _step_of_int(int(value))
            end = mag.end()
        start = m.start()
        prefix = norm[max(0, start - 4) : start]
        percent = prefix.rstrip().endswith("百分之")
        if percent:
            start -= len(prefix) - prefix.rfind("百分之")
        plain = not mag and not frac and m.group(1).isdigit()
        out.append(_raw(start, end, value, step, percent, plain, factor, decimal=bool(frac)))
    return out


_NUMERALS_READ: dict[str, tuple[Decimal, Decimal | None] | None] = {}
_UNREAD: tuple[Decimal, Decimal | None] = (Decimal(0), None)  # (a marker: not looked up yet)


def _read_numeral(chars: str, int_part: str, frac: str) -> tuple[Decimal, Decimal | None] | None:
    """The value and step of a Chinese numeral ``chars`` (``None``: malformed), remembered."""
    read: tuple[Decimal, Decimal | None] | None = None
    parsed = parse_zh_int(int_part) if int_part else 0
    if parsed is not None:
        frac_digits = "".join(str("零一二三四五六七八九".find(c) if c != "〇" else 0) for c in frac)
        if not (frac and "-1" in frac_digits):
            value = Decimal(f"{parsed}.{frac_digits}") if frac else Decimal(parsed)
            read = (value, _pow10(-len(frac)) if frac else _step_of_int(parsed))
    if len(_NUMERALS_READ) >= 4096:
        _NUMERALS_READ.clear()
    _NUMERALS_READ[chars] = read
    return read


def _chinese(norm: str, taken: list[tuple[int, int]]) -> list[_Draft]:
    out: list[_Draft] = []
    stops: set[int] | None = None
    covered: set[int] | None = None
    for m in _ZH_NUM.finditer(norm):
        start, end = m.start(), m.end()
        chars = m.group(0)
        if covered is None:
            covered = {i for lo, hi in taken for i in range(lo, hi)}
        if start in covered or not chars.strip("百千万亿"):
            continue  # a magnitude suffix of an Arabic number, or a lone multiplier
        percent = False
        if chars.startswith("百") and norm.startswith("百分之", start):
            continue  # handled below through the 之 prefix
        per = norm[max(0, start - 3) : start]
        if per in ("百分之", "千分之"):
            percent, start = True, start - 3
        int_part, _, frac = chars.partition("点")
        if stops is None:
            stops = _zh_stops(norm)
        if not percent and m.start() in stops:
            continue
        read = _NUMERALS_READ.get(chars, _UNREAD)
        if read is _UNREAD:
            read = _read_numeral(chars, int_part, frac)
        if read is None:
            continue
        value, step = read
        if per == "千分之":  # per mille, read in points
            value /= 10
            step = None if step is None else step / 10
        raw = _raw(start, end, value, step, percent, words=True, decimal=bool(frac))
        out.append(_tenths(norm, raw, int_part) or raw)
    return out


def _tenths(norm: str, raw: _Draft, int_part: str) -> _Draft | None:
    """六成 = 60%, 六成二 = 62%, 八折 = 80%, 八五折 = 85%, 8.5折 = 85% (in points)."""
    if raw.percent or norm[raw.end : raw.end + 1] not in ("成", "折"):
        return None  # (the common case, without a regular expression)
    t = _TENTHS.match(norm, raw.end)
    after = norm[t.end() : t.end() + 1] if t else ""
    if t is None or (after and after in _TENTHS_NOT):
        return None
    value, step = raw.value, raw.step
    if len(int_part) == 2 and all(c in "零〇一二两三四五六七八九" for c in int_part):
        value = Decimal("零一二三四五六七八九".find(int_part[0].replace("两", "二")) * 10)
        value += Decimal(max(0, "零一二三四五六七八九".find(int_part[1].replace("两", "二"))))
        return _raw(raw.start, t.end(), value, Decimal(1), True, words=True)
    if value >= 10:
        return None
    end = t.end()
    value, step = value * 10, (Decimal(10) if step is None else step * 10)
    if t.group(1) == "成":
        after = norm[end : end + 1]
        digit = "一二三四五六七八九".find(after)
        if after and digit >= 0:
            value, step, end = value + digit + 1, Decimal(1), end + 1
    return _raw(raw.start, end, value, step, True, words=raw.words)


def _fenzhi(norm: str) -> list[_Draft]:
    """五分之三 = 60%, 3分之1 ≈ 33% (in points, to the precision :func:`fraction_step` gives)."""
    out: list[_Draft] = []
    for m in _FENZHI.finditer(norm):
        den_s, num_s = m.group(1), m.group(2)
        if den_s in ("百", "千", "万"):
            continue  # 百分之六十二: a percentage, read with the numbers
        den = int(den_s) if den_s.isdigit() else parse_zh_int(den_s)
        num = int(num_s) if num_s.isdigit() else parse_zh_int(num_s)
        if den is None or num is None or not 0 < num < den:
            continue
        value = Decimal(100 * num) / Decimal(den)
        step = Decimal(repr(fraction_step(den)))
        out.append(_raw(m.start(), m.end(), value, step, True, words=True))
    return out


def _raw_numbers(norm: str) -> list[_Draft]:
    out = _fenzhi(norm) if "分之" in norm else []
    taken = [(r.start, r.end) for r in out]
    out.extend(r for r in _arabic(norm) if not any(lo <= r.start < hi for lo, hi in taken))
    taken = [(r.start, r.end) for r in out]
    for w in english_fractions(norm):
        if not any(lo < w.end and w.start < hi for lo, hi in taken):
            out.append(_raw(w.start, w.end, w.value, w.step, True, words=True, quantity=True))
            taken.append((w.start, w.end))
    for w in english_numbers(norm):
        if not any(lo < w.end and w.start < hi for lo, hi in taken):
            decimal = w.step is not None and w.step < 1
            dozen = "dozen" in norm[w.start : w.end].lower()
            raw = _raw(w.start, w.end, w.value, w.step, False, words=True, decimal=decimal)
            if w.mixed and _TIME_AFTER.match(norm, w.end):
                raw.constant = "duration"  # "two and a half weeks", as "2.5 weeks" is
            out.append(replace(raw, quantity=True) if dozen else raw)
    out.extend(_chinese(norm, taken))
    # Arabic digits before 成/折 ("3成", "8.5折").
    for i, r in enumerate(out):
        if not r.words and not r.percent:
            t = _tenths(norm, r, "")
            if t is not None:
                out[i] = t
    out.sort(key=lambda r: r.start)
    # A digit swallowed by 成 ("六成二") is not a number of its own.
    kept: list[_Draft] = []
    for r in out:
        if kept and r.start < kept[-1].end:
            continue
        kept.append(r)
    return kept


def _decorate(norm: str, d: _Draft, spans: ConstantIndex) -> _Draft:
    """``d`` (as read) with its constant reason and the words around it, in place."""
    raw_start = d.start
    end = d.end
    # (A mixed fraction of a time unit comes in as a duration: keep it.)
    d.constant = spans.find(raw_start, end) or d.constant
    if d.constant is not None and d.constant not in _DECORATED_CONSTANTS:
        return d  # a date or a week: its neighbours' words do not matter
    approx_after = _ZH_APPROX_SUFFIX.match(norm, end)
    if approx_after:
        d.approx, end = True, approx_after.end()
    pct = None if d.percent and d.words else _PERCENT.match(norm, end)
    if pct:
        d.percent, end = True, pct.end()
    elif not d.percent:
        unit = _UNIT_EN.match(norm, end) or _UNIT_ZH.match(norm, end)
        if unit:
            d.unit, end = unit.group(1), unit.end()
            if d.unit == "万元":  # 128万元: the magnitude was not read with the digits
                d.unit = "元"
                if d.factor == 1:
                    d.value *= 10_000
                    d.step = None if d.step is None else d.step * 10_000
                    d.factor = 10_000
    tail = _APPROX_AFTER.match(norm, end)
    if tail:
        d.approx, end = True, tail.end()
    d.end = end
    before = norm[max(0, raw_start - 24) : raw_start]
    last = before.rstrip()[-1:]
    currency = _CURRENCY_BEFORE.search(before) if last in _CURRENCY_LAST else None
    if currency:
        d.currency = currency.group(0).strip()
        d.start = raw_start - (len(before) - currency.start())
        before = before[: currency.start()]
        last = before.rstrip()[-1:]
    approx = _APPROX_BEFORE.search(before) if last and last in _APPROX_LAST else None
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
    bound = _BOUND_BEFORE.search(window) if last and last in _BOUND_LAST else None
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
