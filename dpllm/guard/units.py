"""Units as readers write them, each mapped to one canonical unit.

The vocabulary is generic (people, records, time, money, sessions …), in English
and Chinese; it says what a *word* measures, never which release a sentence
speaks of — that is decided by the terms a release declares
(:attr:`dpllm.release.Release.terms`). A release's own ``unit`` is read through
the same table (``"responses"`` → ``records``), and a unit the table does not
know is compared as written (singular and plural alike).

Pure data and lookups; no I/O.
"""

from __future__ import annotations

__all__ = ["CURRENCY_PREFIXES", "TIME_UNITS", "canonical_unit", "units_compatible"]

_UNITS: dict[str, str] = {
    "users": "users user people persons person students student learners learner "
    "participants participant respondents respondent members member customers customer "
    "visitors visitor 人 位 名 个人 名用户 位用户 个用户",
    "records": "records record responses response feedback comments comment reviews review "
    "submissions submission entries entry items item messages message ratings mentions "
    "mention votes vote 条 份",
    "stars": "stars star points point 星 颗星 星级 分",
    "hours": "hours hour hrs hr h 小时 个小时 钟头",
    "minutes": "minutes minute mins min 分钟",
    "seconds": "seconds second secs sec 秒 秒钟",
    "days": "days day 天",
    "sessions": "sessions session visits visit 次会话",
    "times": "times 次 回",
    "yuan": "yuan rmb cny 元 块 ¥ ￥ 元钱",
    "dollars": "dollars dollar usd $ us$",
    "euros": "euros euro eur €",
    "tickets": "tickets ticket 张",
    "orders": "orders order purchases purchase 笔 单",
}
_CANONICAL: dict[str, str] = {w: unit for unit, words in _UNITS.items() for w in words.split()}
_CANONICAL.update({"share": "share", "proportion": "share", "rate": "share", "percent": "share"})

TIME_UNITS = frozenset({"hours", "minutes", "seconds", "days"})
"""Canonical units a duration is written in ("7 days" is a constant unless a release counts days)."""

CURRENCY_PREFIXES: dict[str, str] = {
    "¥": "yuan",
    "￥": "yuan",
    "rmb": "yuan",
    "cny": "yuan",
    "$": "dollars",
    "us$": "dollars",
    "usd": "dollars",
    "€": "euros",
    "eur": "euros",
}
"""Currency signs and codes written before a number, and their canonical unit."""

# Units that only say "how many" and fit any count ("mentioned 23 times", "23 次").
_GENERIC_COUNT = frozenset({"times"})
# Pairs a careless writer swaps without changing what is counted.
_NEAR = frozenset({frozenset({"users", "records"}), frozenset({"sessions", "times"})})


def canonical_unit(word: str) -> str:
    """The canonical unit of ``word`` (``"responses"`` → ``"records"``, ``"小时"`` → ``"hours"``).

    A word the table does not know is returned lower-cased without a plural ``s``.
    """
    w = word.strip().lower()
    if not w:
        return ""
    found = _CANONICAL.get(w)
    if found is not None:
        return found
    last = w.split()[-1]
    found = _CANONICAL.get(last)
    if found is not None:
        return found
    return w[:-1] if w.endswith("s") and len(w) > 3 else w


def units_compatible(mention_unit: str, release_unit: str, *, count: bool) -> int:
    """How well a figure's unit fits a release's: 2 same, 1 near, 0 unknown, -1 different.

    Args:
        mention_unit: the canonical unit written with the figure (``""``: none).
        release_unit: the canonical unit of the release (``""``: none declared).
        count: the release is a count (generic "times" fits it).
    """
    if not mention_unit or not release_unit:
        return 0
    if mention_unit == release_unit:
        return 2
    if mention_unit in _GENERIC_COUNT and count:
        return 1
    if frozenset({mention_unit, release_unit}) in _NEAR:
        return 1
    if mention_unit in _CANONICAL.values() and release_unit in _CANONICAL.values():
        return -1
    return 0
