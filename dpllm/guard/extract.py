"""Find every number a text states, with the precision it is stated to.

:func:`extract_mentions` returns one :class:`NumberMention` per figure: ASCII and
full-width digits, decimals, thousands separators (``1,234``, ``1 234``),
percentages (``62%``, ``62 percent``, ``百分之六十二``), ranges (``150–170``,
``150-170``, ``150 to 170``, ``150到170``, ``150至170``, ``between 150 and
170``), bands (``4.3 ± 0.2``), bounds (``fewer than 5``, ``超过100``),
approximation words (about, around, roughly, approximately, ~, 约, 大约, 左右,
差不多 …), Chinese numerals (``一百五十七``, ``四点三``, ``两千``), magnitude
suffixes (``1.2k``, ``1.5万``, ``3千``) and units (条, 分, 星, 人, stars, users,
responses, ratings …).

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
ordinals and list numbering (``1.`` at a line start, ``第一``, ``3rd``, ``top 3``).

Pure text processing; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["NumberMention", "extract_mentions", "text_language"]

# One-to-one character mapping, so spans in the normalised text are spans in the original.
_FULLWIDTH = {ord("０") + i: ord("0") + i for i in range(10)}
_FULLWIDTH.update({ord(a): ord(b) for a, b in zip("．％～－＋：／", ".%~-+:/", strict=True)})


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
        category: ``"rating"``, ``"users"``, ``"count"``, ``"percent"`` or ``None``.
        bound: ``"<"`` (fewer than, 不到 …), ``">"`` (more than, 超过 …) or ``None``.
        constant: why the figure is a public constant (``"date"``, ``"week"``,
            ``"scale"``, ``"privacy-parameter"`` …), or ``None`` for a statistic.
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


# --------------------------------------------------------------------------- patterns
_ARABIC = re.compile(
    r"(?<![0-9A-Za-z.,])"
    r"(\d{1,3}(?:,\d{3})+|\d{1,3}(?:[ \u00a0\u202f\u2009]\d{3})+(?![0-9])|\d+)"
    r"(?:\.(\d+))?"
)
_ZH_DIGITS = "零〇一二两三四五六七八九"
_ZH_NUM = re.compile(rf"[{_ZH_DIGITS}十百千万亿]+(?:点[{_ZH_DIGITS}]+)?")
_ZH_STOP = (
    "一些 一般 一起 一直 一定 一样 一下 一致 一切 一旦 一方面 统一 唯一 万一 千万 十分 一点儿 "
    "一点点 有点 之一 一边 一面 一同 一共 一再 一向 一度 一味 一律 一时 一会 一番 一生 "
    "不一 同一 一般 一对一 三心二意 一五一十 百分百 万分"
).split()
_MAGNITUDE = re.compile(r"(?:([kK])(?![A-Za-z])|(千|万|亿)|\s+(thousand|million)\b)", re.IGNORECASE)
_MAGNITUDES = {"k": 1000, "千": 1000, "万": 10_000, "亿": 100_000_000}
_MAGNITUDES.update({"thousand": 1000, "million": 1_000_000})
_PERCENT = re.compile(
    r"\s*(?:%|percent\b|per cent\b|pct\b|个百分点|percentage points?\b)", re.IGNORECASE
)
_ZH_APPROX_SUFFIX = re.compile(r"(?:多|余)")
_ADJ = r"(?:(?:active|unique|distinct|new|total|written|individual|separate|valid|more)\s+)?"
_UNIT_EN = re.compile(
    rf"\s*{_ADJ}(stars?|points?|users?|people|persons|students?|learners?|participants?|"
    r"respondents?|members?|responses?|ratings?|reviews?|comments?|feedback|entries|"
    r"submissions?|messages?|mentions?|votes?)\b",
    re.IGNORECASE,
)
_UNIT_ZH = re.compile(r"\s*(颗星|星级|星|分(?!钟|之)|条|份|人次|个人|人|位|名)")
_UNIT_CATEGORY = {
    "rating": "star stars point points 颗星 星级 星 分",
    "users": "user users people persons student students learner learners participant "
    "participants respondent respondents member members 个人 人 位 名",
    "count": "response responses rating ratings review reviews comment comments feedback "
    "entries submission submissions message messages mention mentions vote votes 条 份 人次",
}
_CATEGORY_OF_UNIT = {w: cat for cat, words in _UNIT_CATEGORY.items() for w in words.split()}
_APPROX_BEFORE = re.compile(
    r"(?:\babout|\baround|\broughly|\bapproximately|\bapprox\.?|\bnearly|\balmost|\bsome|"
    r"\bcirca|\bca\.|\bestimated|~|≈|约|大约|大概|差不多|将近|接近|近)\s*$",
    re.IGNORECASE,
)
_APPROX_AFTER = re.compile(r"\s*(?:左右|上下)")
_BOUND_BEFORE = re.compile(
    r"(?:(fewer than|less than|under|below|at most|up to|少于|不到|不足|低于|至多)|"
    r"(more than|over|above|at least|exceeding|超过|多于|高于|至少|逾))\s*$",
    re.IGNORECASE,
)
_RANGE_SEP = re.compile(r"^\s*(?:–|—|-|~|〜|to|到|至|and)\s*$", re.IGNORECASE)
_BAND_SEP = re.compile(r"^\s*(?:±|\+/-|\+-)\s*$")
_BETWEEN = re.compile(r"(?:between|from)\s*$", re.IGNORECASE)
_CJK = re.compile(r"[\u4e00-\u9fff]")

_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_NUMLIKE = rf"[\d{_ZH_DIGITS}十百]+"
_CONSTANTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(pattern, re.IGNORECASE | re.MULTILINE))
    for reason, pattern in (
        ("week", r"\b\d{4}-W\d{1,2}(?:-\d)?\b"),
        ("date", r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"),
        ("date", r"\d{4}\s*年(?:\s*\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?)?"),
        ("date", r"\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?|\d{1,2}\s*[日号](?=[至到\-–~]|$|\s)"),
        ("date", rf"\b{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"),
        ("date", rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}(?:\s+\d{{4}})?"),
        ("time", r"\b\d{1,2}:\d{2}\b"),
        ("week", r"\b(?:week|wk)\s*#?\s*\d{1,2}\b|\bW\d{1,2}\b"),
        ("ordinal", rf"第\s*{_NUMLIKE}"),
        ("ordinal", r"\b\d+(?:st|nd|rd|th)\b|#\d+\b|\btop[- ]\d+\b|前\s*[\d一二三四五六七八九十]+"),
        ("list", r"^\s*\(?\d{1,2}[.)、:]\s|^\s*\(\d{1,2}\)"),
        (
            "duration",
            rf"{_NUMLIKE}(?:\.\d+)?\s*(?:days?|weeks?|months?|years?|hours?|minutes?|seconds?"
            r"|天|周|週|星期|个月|小时|分钟|秒)(?![A-Za-z])",
        ),
        (
            "privacy-parameter",
            r"(?:ε|ϵ|epsilon|ρ|rho|δ|delta)\s*(?:=|:|≈|of|为|是|＝)?\s*"
            r"\d+(?:\.\d+)?(?:e-?\d+)?",
        ),
        (
            "confidence-level",
            r"\b(?:80|90|95|99)\s*%\s*(?:CI\b|confidence|credible|interval|置信|可信|区间)|"
            r"(?:confidence(?: level)?|置信(?:水平|度|区间)?)\s*(?:of|为|是|:)?\s*(?:80|90|95|99)\s*%",
        ),
        (
            "scale",
            r"\b[01]\s*(?:–|—|-|~|to|到|至)\s*(?:5|10)\b(?!\s*(?:%|,\d|\.\d))"
            r"|out of\s*(?:5|10|five|ten)\b|/\s*(?:5|10)(?![\d.])|满分\s*(?:5|10|五|十)"
            r"|(?:5|10|五|十)\s*分制|\b(?:5|five|10|ten)[- ]star\b|(?:五|5)星级?",
        ),
    )
)


def text_language(text: str) -> str:
    """``"zh"`` when the text contains Han characters, else ``"en"``."""
    return "zh" if _CJK.search(text) else "en"


@dataclass(frozen=True, slots=True)
class _Raw:
    start: int
    end: int
    value: Decimal
    step: Decimal | None  # None: infinitely coarse (a literal zero)
    percent: bool
    plain: bool = False  # plain ASCII digits, no separator, decimal or magnitude


def _step_of_int(value: int) -> Decimal | None:
    if value == 0:
        return None
    zeros = 0
    while value % 10 == 0:
        value //= 10
        zeros += 1
    return Decimal(10) ** zeros


def _parse_zh_int(chars: str) -> int | None:
    digits = {c: i for i, c in enumerate("零一二三四五六七八九")}
    digits.update({"〇": 0, "两": 2})
    units = {"十": 10, "百": 100, "千": 1000}
    bigs = {"万": 10_000, "亿": 100_000_000}
    total = section = num = 0
    last_unit = 0
    for i, ch in enumerate(chars):
        if ch in digits:
            num = digits[ch]
            # Colloquial "一百五" = 150, "两千五" = 2500: a trailing digit after 百/千/万.
            if i == len(chars) - 1 and i > 0 and chars[i - 1] in "百千万" and last_unit >= 100:
                num *= last_unit // 10
        elif ch in units:
            section += (num or 1) * units[ch]
            last_unit = units[ch]
            num = 0
        elif ch in bigs:
            total = (total + section + num) * bigs[ch]
            last_unit = bigs[ch]
            section = num = 0
        else:
            return None
    return total + section + num


def _zh_stop(text: str, start: int, end: int) -> bool:
    for word in _ZH_STOP:
        lo = max(0, start - len(word) + 1)
        idx = text.find(word, lo, end + len(word) - 1)
        if idx != -1 and idx < end and idx + len(word) > start:
            return True
    return False


def _raw_numbers(norm: str) -> list[_Raw]:
    out: list[_Raw] = []
    for m in _ARABIC.finditer(norm):
        int_text = re.sub(r"[^\d]", "", m.group(1))
        frac = m.group(2) or ""
        value = Decimal(f"{int_text}.{frac}" if frac else int_text)
        step: Decimal | None
        step = Decimal(10) ** -len(frac) if frac else _step_of_int(int(int_text))
        end = m.end()
        mag = _MAGNITUDE.match(norm, end)
        if mag:
            factor = Decimal(_MAGNITUDES[(mag.group(1) or mag.group(2) or mag.group(3)).lower()])
            value *= factor
            step = None if step is None else step * factor
            end = mag.end()
        start = m.start()
        prefix = norm[max(0, start - 4) : start]
        percent = prefix.rstrip().endswith("百分之")
        if percent:
            start -= len(prefix) - prefix.rfind("百分之")
        plain = not mag and not frac and m.group(1).isdigit()
        out.append(_Raw(start, end, value, step, percent, plain))
    taken = [(r.start, r.end) for r in out]
    for m in _ZH_NUM.finditer(norm):
        start, end = m.start(), m.end()
        chars = m.group(0)
        if any(lo <= start < hi for lo, hi in taken) or not chars.strip("百千万亿"):
            continue  # a magnitude suffix of an Arabic number, or a lone multiplier
        percent = False
        if chars.startswith("百") and norm.startswith("百分之", start):
            continue  # handled below through the 之 prefix
        if norm[max(0, start - 3) : start] == "百分之":
            percent, start = True, start - 3
        int_part, _, frac = chars.partition("点")
        if not percent and _zh_stop(norm, m.start(), m.end()):
            continue
        parsed = _parse_zh_int(int_part) if int_part else 0
        if parsed is None:
            continue
        frac_digits = "".join(str("零一二三四五六七八九".find(c) if c != "〇" else 0) for c in frac)
        if frac and "-1" in frac_digits:
            continue
        value = Decimal(f"{parsed}.{frac_digits}") if frac else Decimal(parsed)
        step = Decimal(10) ** -len(frac) if frac else _step_of_int(parsed)
        out.append(_Raw(start, end, value, step, percent))
    return sorted(out, key=lambda r: r.start)


def _constant_spans(norm: str) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    for reason, pattern in _CONSTANTS:
        spans.extend((m.start(), m.end(), reason) for m in pattern.finditer(norm))
    return spans


def _constant_for(spans: list[tuple[int, int, str]], start: int, end: int) -> str | None:
    for lo, hi, reason in spans:
        if lo <= start and end <= hi:
            return reason
    return None


@dataclass(slots=True)
class _Draft:
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


def _decorate(norm: str, raw: _Raw, spans: list[tuple[int, int, str]]) -> _Draft:
    d = _Draft(raw.start, raw.end, raw.end, raw.value, raw.step, raw.percent, raw.plain)
    d.constant = _constant_for(spans, raw.start, raw.end)
    end = raw.end
    approx_after = _ZH_APPROX_SUFFIX.match(norm, end)
    if approx_after:
        d.approx, end = True, approx_after.end()
    pct = _PERCENT.match(norm, end)
    if pct:
        d.percent, end = True, pct.end()
    else:
        unit = _UNIT_EN.match(norm, end) or _UNIT_ZH.match(norm, end)
        if unit:
            d.unit, end = unit.group(1), unit.end()
    tail = _APPROX_AFTER.match(norm, end)
    if tail:
        d.approx, end = True, tail.end()
    d.end = end
    before = norm[max(0, raw.start - 24) : raw.start]
    approx = _APPROX_BEFORE.search(before)
    if (
        approx
        and approx.group(0).strip() in "~≈"
        and before[: approx.start()].rstrip()[-1:].isdigit()
    ):
        approx = None  # "150~170": a range separator, not "about"
    if approx:
        d.approx, d.start = True, raw.start - (len(before) - approx.start())
    bound = _BOUND_BEFORE.search(norm[max(0, d.start - 24) : d.start])
    if bound:
        d.bound = "<" if bound.group(1) else ">"
        d.start -= len(bound.group(0))
    return d


def _merge(norm: str, drafts: list[_Draft]) -> list[_Draft]:
    out: list[_Draft] = []
    i = 0
    while i < len(drafts):
        a = drafts[i]
        b = drafts[i + 1] if i + 1 < len(drafts) else None
        if b is not None and a.constant is None and b.constant is None:
            gap_range = norm[a.end : b.start] if a.end <= b.start else None
            gap_band = norm[a.num_end : b.start] if a.num_end <= b.start else None
            if gap_band is not None and not a.unit and _BAND_SEP.match(gap_band):
                merged = _Draft(a.start, b.end, a.num_end, a.value, a.step, a.percent or b.percent)
                merged.lo, merged.hi = a.value - b.value, a.value + b.value
                merged.unit, merged.approx = b.unit, True
                out.append(merged)
                i += 2
                continue
            if gap_range is not None and _RANGE_SEP.match(gap_range):
                is_and = gap_range.strip().lower() == "and"
                between = _BETWEEN.search(norm[max(0, a.start - 10) : a.start])
                if not is_and or between:
                    start = a.start - (len(between.group(0)) if between else 0)
                    step = (
                        a.step
                        if b.step is None
                        else b.step
                        if a.step is None
                        else min(a.step, b.step)
                    )
                    merged = _Draft(start, b.end, b.num_end, (a.value + b.value) / 2, step, False)
                    merged.lo, merged.hi = min(a.value, b.value), max(a.value, b.value)
                    merged.percent = a.percent or b.percent
                    merged.unit = b.unit or a.unit
                    merged.approx = a.approx or b.approx
                    out.append(merged)
                    i += 2
                    continue
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
    return None


def extract_mentions(text: str) -> list[NumberMention]:
    """Every number stated in ``text``, in order, with its stated precision.

    Args:
        text: any text, English or Chinese (or both).

    Returns:
        One :class:`NumberMention` per figure; a range or a band is one mention.
    """
    norm = text.translate(_FULLWIDTH)
    spans = _constant_spans(norm)
    drafts = [_decorate(norm, raw, spans) for raw in _raw_numbers(norm)]
    mentions: list[NumberMention] = []
    for d in _merge(norm, drafts):
        category = "percent" if d.percent else _CATEGORY_OF_UNIT.get(d.unit.lower())
        lo = d.value if d.lo is None else d.lo
        hi = d.value if d.hi is None else d.hi
        mentions.append(
            NumberMention(
                span=(d.start, d.end),
                text=text[d.start : d.end],
                value=float(d.value),
                step=float("inf") if d.step is None else float(d.step),
                is_range=d.lo is not None,
                lo=float(lo),
                hi=float(hi),
                approx=d.approx,
                percent=d.percent,
                unit=d.unit,
                category=category,
                bound=d.bound,
                constant=_public(d, category),
            )
        )
    return mentions
