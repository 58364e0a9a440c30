"""Redaction units: where a text may be cut so that each piece can be redacted on its own.

The streaming hold-back (:mod:`dpllm.chat.streaming`) releases whole units, the
protected chat call redacts answers unit by unit, and the redactor analyses a
very long text in large units: a cut never falls inside a candidate span (a
phone number, an e-mail address, a pseudonym token) nor between two words of
one name, and where a unit ends depends only on the text that precedes the cut
(plus a bounded look-ahead), never on how the text arrived. Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = [
    "DEFAULT_MAX_UNIT",
    "DEFAULT_MIN_UNIT",
    "TOKEN_PATTERN",
    "iter_units",
    "split_units",
    "unit_end",
]

DEFAULT_MIN_UNIT = 400
"""The least length of a unit: a unit ends at a sentence end only past it."""

DEFAULT_MAX_UNIT = 1200
"""Unit length after which a white-space cut is taken when no sentence ends."""

TOKEN_PATTERN = re.compile(r"(?:<[A-Z][A-Z_]*|\[[^\[\]\s]{1,16})_[0-9a-f]{10,64}[>\]]")
"""A pseudonym token of :class:`dpllm.redact.Vault` (``<PERSON_3f2a9c1b0d>``, ``[姓名_…]``)."""

_SENTENCE_END = re.compile(r"[.!?…](?:[\"'”’)\]]*)\s+|[。！？；]+[”’」』）)]*|\n+")
_SPAN_CHARS = frozenset("@+-/.:%#_<>[]")


def _inside_token(text: str, pos: int) -> bool:
    for m in TOKEN_PATTERN.finditer(text, max(0, pos - 90), min(len(text), pos + 90)):
        if m.start() < pos < m.end():
            return True
    return False


def _span_char(ch: str) -> bool:
    return ch.isdigit() or ch in _SPAN_CHARS


# Words that join the parts of a Latin-script name ("Ludwig van Beethoven", "Ibn al Haytham").
_NAME_PARTICLES = frozenset(
    "van von der den de da del della di du la le bin ibn al el dos das st st. mc mac o".split()
)
_SOFT_PUNCT = frozenset("，、：,;；")


def _word_before(text: str, i: int) -> str:
    j = i
    while j > 0 and not text[j - 1].isspace():
        j -= 1
    return text[j:i]


def _word_after(text: str, i: int) -> str:
    j = i
    while j < len(text) and not text[j].isspace():
        j += 1
    return text[i:j]


def _name_part(word: str) -> bool:
    """A word that may be part of a Latin-script name or an address (capitalised, initial …)."""
    core = word.strip("\"'“”‘’([{")
    return bool(core) and (any(c.isupper() for c in core) or core.lower() in _NAME_PARTICLES)


def _soft_cut_ok(text: str, i: int, *, strict: bool = False) -> bool:
    """Whether a unit may end just after ``text[i]`` (a white space or a soft punctuation).

    Never next to a character of a candidate span (digits, ``@`` …), never inside a
    pseudonym token, never between two words that may both belong to one name or
    address (``Emily | Clark``, ``van | Beethoven``, ``Baker | Street``). ``strict``:
    neither neighbour may be a name part, so a name keeps its context on both sides
    (the English NER misses a name that ends a text more often).
    """
    ch = text[i]
    before = text[i - 1] if i > 0 else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    if not after or (before and _span_char(before)) or _span_char(after):
        return False
    if ch not in _SOFT_PUNCT and (not ch.isspace() or (before and before.isspace())):
        return False
    left, right = _name_part(_word_before(text, i)), _name_part(_word_after(text, i + 1).lstrip())
    if (left or right) if strict else (left and right):
        return False
    return not _inside_token(text, i + 1)


def unit_end(
    text: str,
    start: int = 0,
    *,
    min_unit: int = DEFAULT_MIN_UNIT,
    max_unit: int = DEFAULT_MAX_UNIT,
    final: bool = False,
) -> int | None:
    """Where the redaction unit beginning at ``start`` ends; ``None``: not known yet.

    Units are the pieces the answer is redacted in, alike whether it streams or
    not, so a stream's text equals the non-streamed redaction (each unit is
    redacted on its own, and a stream releases whole units only). The end
    depends only on ``text[start : start + 8 * max_unit + 1]``, never on how
    the text arrived:

    1. the first closed sentence end (``. ! ? …`` + white space, ``。！？；``, a
       line break; closed: a character follows it) at least ``min_unit``
       characters in, if it lies within ``max_unit`` characters;
    2. else, once more than ``max_unit`` characters are known, the last white
       space or soft punctuation (``，、：,;``) within ``[min_unit, max_unit]``
       that :func:`_soft_cut_ok` allows (never between a first name and a
       surname, never beside a digit);
    3. else the next closed sentence end, however far;
    4. else, beyond ``8 * max_unit`` characters (a run with no break at all), a
       hard cut there, so memory stays bounded.

    Args:
        text: the text (the held text of a stream, or a whole answer).
        start: a unit boundary.
        min_unit, max_unit: see above.
        final: the text is complete (the stream ended): the rest is one unit.

    Returns:
        The end offset, or ``None`` when more text is needed to decide.
    """
    hard = 8 * max_unit
    n = len(text)
    first_far: int | None = None
    for m in _SENTENCE_END.finditer(text, start, min(n, start + hard)):
        end = m.end()
        if end >= n:
            break  # not closed: more white space or marks may follow
        if end - start < min_unit or _inside_token(text, end):
            continue
        if end - start <= max_unit:
            return end
        first_far = end
        break
    if n - start > max_unit:
        window = text[start : start + max_unit + 1]
        for strict in (True, False):
            for i in range(max_unit - 1, max(0, min_unit - 1) - 1, -1):
                if (window[i].isspace() or window[i] in _SOFT_PUNCT) and _soft_cut_ok(
                    window, i, strict=strict
                ):
                    return start + i + 1
        if first_far is not None:
            return first_far
        if n - start > hard:
            return start + hard
    if final:
        return n
    return None


def split_units(
    text: str, *, min_unit: int = DEFAULT_MIN_UNIT, max_unit: int = DEFAULT_MAX_UNIT
) -> list[str]:
    """``text`` cut into its redaction units (see :func:`unit_end`); they join to ``text``."""
    return list(iter_units(text, min_unit=min_unit, max_unit=max_unit))


def iter_units(
    text: str, *, min_unit: int = DEFAULT_MIN_UNIT, max_unit: int = DEFAULT_MAX_UNIT
) -> Iterator[str]:
    """:func:`split_units`, one unit at a time (a long text is never copied whole)."""
    at = 0
    while at < len(text):
        end = unit_end(text, at, min_unit=min_unit, max_unit=max_unit, final=True)
        assert end is not None and end > at
        yield text[at:end]
        at = end
