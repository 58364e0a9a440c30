"""Public constants in a text: dates and date ranges, weeks, times, ordinals, list numbers,
durations, privacy parameters, confidence levels and the rating scale.

A figure that lies wholly inside one of these spans is not a statistic.

Speed (a pass of every pattern over the whole text took about a third of the
guard's time): patterns that begin with a number are only *matched at the start
of each number found* (``Pattern.match(text, pos)``), and patterns that begin
with a word run only when the text holds that word. The text is the extractor's
normalised one: full-width forms folded and ASCII lower-cased (same length, so
spans are the original's), and no pattern needs ``re.IGNORECASE``.

Pure text processing; no I/O.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable

__all__ = ["ConstantIndex", "constant_for", "constant_spans"]

_ZH_DIGITS = "零〇一二两三四五六七八九"
# Dates in Chinese numerals: a year read digit by digit (二〇二六), a month or a day (十一, 二十二).
_ZH_YEAR = "[〇零一二三四五六七八九]{4}"
_ZH_MD = "[一二三四五六七八九十]{1,3}"
_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_NUMLIKE = rf"[\d{_ZH_DIGITS}十百]+"
_ORD = r"(?:st|nd|rd|th)?"

# Tried with .match() at the start of every number.
_AT_NUMBER: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(pattern))
    for reason, pattern in (
        ("week", r"\d{4}-w\d{1,2}(?:-\d)?\b"),
        ("date", r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b|\d{1,2}/\d{1,2}/\d{2,4}\b"),
        ("date", r"\d{4}\s*年(?:\s*\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?)?"),
        ("date", r"\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?|\d{1,2}\s*[日号](?=[至到\-–~]|$|\s)"),
        ("date", rf"{_ZH_YEAR}\s*年(?:\s*{_ZH_MD}\s*月(?:\s*{_ZH_MD}\s*[日号])?)?"),
        (
            "date",
            rf"{_ZH_MD}\s*月(?:\s*{_ZH_MD}\s*[日号])?|{_ZH_MD}\s*[日号](?=[至到\-–~]|$|\s)"
            rf"|(?<=[—–\-~至到]){_ZH_MD}\s*[日号]",
        ),
        (
            "date",
            rf"\d{{1,2}}{_ORD}(?:\s*(?:–|—|-|to)\s*\d{{1,2}}{_ORD})?\s+{_MONTHS}(?:\s+\d{{4}})?",
        ),
        ("date", r"(?<=[—–\-~至到])\d{1,2}\s*[日号]|(?<=[—–\-~至到]\s)\d{1,2}\s*[日号]"),
        ("date", r"\d{1,2}/\d{1,2}\s*(?:–|—|-|~|至|到|to)\s*\d{1,2}/\d{1,2}\b"),
        ("time", r"\d{1,2}:\d{2}\b"),
        ("week", r"(?<=\bw)\d{1,2}\b"),
        ("ordinal", r"\d+(?:st|nd|rd|th)\b"),
        (
            "duration",
            rf"{_NUMLIKE}(?:\.\d+)?\s*(?:days?|weeks?|months?|years?|hours?|minutes?|seconds?"
            r"|天|周|週|星期|个月|小时|分钟|秒)(?![a-z])",
        ),
        (
            "confidence-level",
            r"(?:80|90|95|99)\s*%\s*(?:ci\b|confidence|credible|interval|置信|可信|区间)",
        ),
        (
            "scale",
            r"[01]\s*(?:–|—|-|~|to|到|至)\s*(?:5|10)\b(?!\s*(?:%|,\d|\.\d))"
            r"|(?:5|10|五|十)\s*分制|(?:5|five|10|ten)[- ]star\b|(?:五|5)星级?",
        ),
    )
)
# All of them as one alternation, most specific first: one .match() per number.
_AT_NUMBER_ALL = re.compile(
    "|".join(f"(?P<n{i}>{p.pattern})" for i, (_, p) in enumerate(_AT_NUMBER))
)
_AT_NUMBER_REASON = {f"n{i}": reason for i, (reason, _) in enumerate(_AT_NUMBER)}
_LIST = re.compile(r"\s*\(?\d{1,2}[.)、:]\s|\s*\(\d{1,2}\)")

# Run over the text only when it holds one of the trigger words.
_AFTER_WORD: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (reason, re.compile(pattern), triggers)
    for reason, pattern, triggers in (
        (
            "date",
            rf"{_MONTHS}\s+\d{{1,2}}{_ORD}"
            rf"(?:\s*(?:–|—|-|to|until|through)\s*(?:{_MONTHS}\s+)?\d{{1,2}}{_ORD})?"
            r"(?:,?\s+\d{4})?\b",
            ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        ),
        # "\b(?:week|wk)…" with the word boundary checked after the "w" (scanned in C).
        ("week", r"w(?<=\bw)(?:eek|k)\s*#?\s*\d{1,2}\b", ("week", "wk")),
        ("ordinal", rf"第\s*{_NUMLIKE}", ("第",)),
        ("ordinal", r"#\d+\b|t(?<=\bt)op[- ]\d+\b", ("#", "top")),
        ("ordinal", r"前\s*[\d一二三四五六七八九十]+", ("前",)),
        (
            "privacy-parameter",
            r"(?:ε|ϵ|epsilon|ρ|rho|δ|delta)\s*(?:=|:|≈|of|为|是|＝)?\s*"
            r"\d+(?:\.\d+)?(?:e-?\d+)?",
            ("ε", "ϵ", "epsilon", "ρ", "rho", "δ", "delta"),
        ),
        (
            "confidence-level",
            r"(?:confidence(?: level)?|置信(?:水平|度|区间)?)\s*(?:of|为|是|:)?\s*(?:80|90|95|99)\s*%",
            ("confidence", "置信"),
        ),
        (
            "scale",
            r"out of\s*(?:5|10|five|ten)\b|/\s*(?:5|10)(?![\d.])|满分\s*(?:5|10|五|十)",
            ("out of", "/", "满分"),
        ),
    )
)


def constant_spans(norm: str, starts: Iterable[int]) -> list[tuple[int, int, str]]:
    """The constant spans of ``norm`` that may hold a number: (start, end, reason).

    Args:
        norm: the normalised text (full-width folded, ASCII lower-cased).
        starts: where each number found in it starts.
    """
    spans: list[tuple[int, int, str]] = []
    for reason, pattern, triggers in _AFTER_WORD:
        if any(map(norm.__contains__, triggers)):
            spans.extend((m.start(), m.end(), reason) for m in pattern.finditer(norm))
    for pos in starts:
        m = _AT_NUMBER_ALL.match(norm, pos)
        if m is not None:
            spans.append((pos, m.end(), _AT_NUMBER_REASON[m.lastgroup or ""]))
        line = norm.rfind("\n", 0, pos) + 1
        if not norm[line:pos].strip(" \t("):
            m = _LIST.match(norm, line)
            if m is not None and m.end() > pos:
                spans.append((line, m.end(), "list"))
    return spans


def constant_for(spans: list[tuple[int, int, str]], start: int, end: int) -> str | None:
    """The reason of the span holding ``start``–``end``, or ``None``."""
    for lo, hi, reason in spans:
        if lo <= start and end <= hi:
            return reason
    return None


class ConstantIndex:
    """:func:`constant_for` over many figures: the spans sorted once, each lookup a bisection.

    A span holding ``start``–``end`` begins in ``[end - longest span, start]``, so only
    those few are looked at; among them the first in ``spans`` order wins, as in
    :func:`constant_for`.
    """

    __slots__ = ("_his", "_longest", "_los", "_order", "_reasons")

    def __init__(self, spans: list[tuple[int, int, str]]) -> None:
        order = sorted(range(len(spans)), key=lambda i: spans[i][0])
        self._order = order
        self._los = [spans[i][0] for i in order]
        self._his = [spans[i][1] for i in order]
        self._reasons = [spans[i][2] for i in order]
        self._longest = max((hi - lo for lo, hi, _ in spans), default=0)

    def find(self, start: int, end: int) -> str | None:
        """The reason of the first span holding ``start``–``end``, or ``None``."""
        los = self._los
        k = bisect.bisect_left(los, end - self._longest)
        stop = bisect.bisect_right(los, start, k)
        best = -1
        for j in range(k, stop):
            if end <= self._his[j] and (best < 0 or self._order[j] < self._order[best]):
                best = j
        return None if best < 0 else self._reasons[best]
