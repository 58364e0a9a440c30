"""Public constants in a text: dates and date ranges, weeks, times, ordinals, list numbers,
durations, privacy parameters, confidence levels and the rating scale.

A figure that lies wholly inside one of these spans is not a statistic. All the
patterns run as **one** alternation in one pass over the text (a pass per
pattern took about a third of the guard's time).

Pure text processing; no I/O.
"""

from __future__ import annotations

import re

__all__ = ["constant_for", "constant_spans"]

_ZH_DIGITS = "零〇一二两三四五六七八九"
_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_NUMLIKE = rf"[\d{_ZH_DIGITS}十百]+"
_CONSTANTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(pattern, re.IGNORECASE | re.MULTILINE))
    for reason, pattern in (
        ("week", r"\b\d{4}-W\d{1,2}(?:-\d)?\b"),
        ("date", r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"),
        ("date", r"\d{4}\s*年(?:\s*\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?)?"),
        ("date", r"\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?|\d{1,2}\s*[日号](?=[至到\-–~]|$|\s)"),
        (
            "date",
            rf"\b{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?"
            rf"(?:\s*(?:–|—|-|to|until|through)\s*(?:{_MONTHS}\s+)?\d{{1,2}}(?:st|nd|rd|th)?)?"
            r"(?:,?\s+\d{4})?\b",
        ),
        (
            "date",
            r"\b\d{1,2}(?:st|nd|rd|th)?(?:\s*(?:–|—|-|to)\s*\d{1,2}(?:st|nd|rd|th)?)?"
            rf"\s+{_MONTHS}(?:\s+\d{{4}})?",
        ),
        ("date", r"(?:[—–\-~至到]\s*)\d{1,2}\s*[日号]"),
        ("date", r"\b\d{1,2}/\d{1,2}\s*(?:–|—|-|~|至|到|to)\s*\d{1,2}/\d{1,2}\b"),
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


_CONSTANT_ALL = re.compile(
    "|".join(f"(?P<c{i}>{p.pattern})" for i, (_, p) in enumerate(_CONSTANTS)),
    re.IGNORECASE | re.MULTILINE,
)
_CONSTANT_REASON = {f"c{i}": reason for i, (reason, _) in enumerate(_CONSTANTS)}


def constant_spans(norm: str) -> list[tuple[int, int, str]]:
    """Every constant span of ``norm``: (start, end, reason)."""
    # One pass of one alternation instead of a pass per pattern: spans of different
    # reasons do not overlap in practice, and a figure needs only the span that holds it.
    return [
        (m.start(), m.end(), _CONSTANT_REASON[m.lastgroup or ""])
        for m in _CONSTANT_ALL.finditer(norm)
    ]


def constant_for(spans: list[tuple[int, int, str]], start: int, end: int) -> str | None:
    """The reason of the span holding ``start``–``end``, or ``None``."""
    for lo, hi, reason in spans:
        if lo <= start and end <= hi:
            return reason
    return None
