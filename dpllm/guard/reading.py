"""Reading numbers: every digit run, Chinese numeral and English number word of a text,
with its value and the precision it is stated to (before :mod:`.extract` looks at the
words around it).

Also the text's normalisation (full-width folded, ASCII lower-cased, offsets kept) and
its language. Split from :mod:`.extract` (module size); private to the guard.

Pure text processing; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import Decimal

from dpllm.guard.numerals import (
    english_fractions,
    english_numbers,
    fraction_step,
    int_step,
    parse_zh_int,
    pow10,
)

__all__ = ["ascii_lower", "normalise", "text_language"]

# One-to-one character mapping, so spans in the normalised text are spans in the original.
# Full-width forms folded and ASCII letters lower-cased, one character for one, so
# spans in the normalised text are spans in the original and no pattern needs
# re.IGNORECASE (which makes every comparison case-fold, at a cost).
_FULLWIDTH = {ord("０") + i: ord("0") + i for i in range(10)}
_FULLWIDTH.update({ord(a): ord(b) for a, b in zip("．％～－＋：／", ".%~-+:/", strict=True)})
_FULLWIDTH.update({ord(c): ord(c.lower()) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"})

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

_TENTHS = re.compile(r"(成|折)")
_ZH_CHARS = "零〇一二两三四五六七八九十百千万"
_FENZHI = re.compile(rf"([{_ZH_CHARS}]+|[0-9]+)分之([{_ZH_CHARS}]+|[0-9]+)")
_TENTHS_NOT = "员功绩就立果本交为长绩人年熟"

_CJK = re.compile(r"[\u4e00-\u9fff]")
_TIME_AFTER = re.compile(
    r"\s*(?:days?|weeks?|months?|years?|hours?|hrs?|minutes?|mins?|seconds?|secs?)\b"
)

_DROP_SEPARATORS = {ord(c): None for c in ", \u00a0\u202f\u2009"}

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
    step = pow10(-len(frac)) if frac else int_step(int(int_text))
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
                step = int_step(int(value))
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
            read = (value, pow10(-len(frac)) if frac else int_step(parsed))
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
