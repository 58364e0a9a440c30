"""The hold-back buffer: streamed model text leaves only after redaction and the guard.

A streamed answer arrives in small deltas. Emitting each delta at once would let
a phone number, a name or an over-precise figure out before anything could look
at it, because a personal-data span or a number is usually cut across deltas
(``"138"``, ``"1234 5"``, ``"678"``). :class:`HoldBack` keeps the deltas and
releases **whole redaction units** only (see :func:`unit_end`): a unit ends at
the first sentence end past ``min_release`` characters, or — in a run longer
than ``max_hold`` without one — at a white space or soft punctuation that is
never beside a digit or inside a pseudonym token and never between two words
that may belong to one name (``Emily | Clark``, ``van | Beethoven``); a run with
no break at all is cut at ``8 × max_hold``. Where a unit ends depends only on
the text, never on how it arrived, and the non-streamed answer is redacted in
the same units (:meth:`dpllm.chat.protection.CallState.finish`), so a stream,
concatenated, equals the non-streamed redaction for any delta sizes.

Each released segment goes through a ``process`` function (redact → guard →
restore, see :mod:`dpllm.chat.wrapper`) before the caller sees it. An upstream error
mid-stream must end with :meth:`HoldBack.discard`: the held text is dropped,
never emitted, and the caller reports the error (fail closed).

Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from dpllm.guard import Violation

__all__ = [
    "DEFAULT_MAX_HOLD",
    "DEFAULT_MIN_RELEASE",
    "TOKEN_PATTERN",
    "HoldBack",
    "blind_tokens",
    "rewrite_violations",
    "safe_cut",
    "split_units",
    "unit_end",
]

DEFAULT_MIN_RELEASE = 160
"""The least length of a redaction unit: a unit ends at a sentence end only past it."""

DEFAULT_MAX_HOLD = 480
"""Unit length after which a white-space cut is taken when no sentence ends."""

TOKEN_PATTERN = re.compile(r"(?:<[A-Z][A-Z_]*|\[[^\[\]\s]{1,16})_[0-9a-f]{10,64}[>\]]")
"""A pseudonym token of :class:`dpllm.redact.Vault` (``<PERSON_3f2a9c1b0d>``, ``[姓名_…]``)."""

_SENTENCE_END = re.compile(r"[.!?…](?:[\"'”’)\]]*)\s+|[。！？；]+[”’」』）)]*|\n+")
_SPAN_CHARS = frozenset("@+-/.:%#_<>[]")
_WITHHELD = {"en": "[figure withheld]", "zh": "[数字已略去]"}


def blind_tokens(text: str) -> str:
    """``text`` with the digits inside pseudonym tokens turned into letters (same length).

    The guard reads digits as figures; a token's hex tail is not one. Offsets are
    unchanged, so spans found in the blinded text apply to the original.
    """

    def letters(m: re.Match[str]) -> str:
        return m.group(0).translate(_DIGITS_TO_LETTERS)

    return TOKEN_PATTERN.sub(letters, text)


_DIGITS_TO_LETTERS = str.maketrans("0123456789", "ghijklmnop")


def rewrite_violations(text: str, violations: Sequence[Violation], *, language: str) -> str:
    """Replace each violating figure by its allowed form (or a withheld marker).

    Used where regenerating is impossible (text already streamed) or after the
    last attempt: the result states no figure more precisely than its release.

    Args:
        text: the checked (redacted) text; the violations' spans index into it.
        violations: the guard's violations of ``text``.
        language: ``"en"`` or ``"zh"``, for the withheld marker.

    Returns:
        The rewritten text.
    """
    out = text
    for v in sorted(violations, key=lambda v: v.span[0], reverse=True):
        start, end = v.span
        replacement = v.allowed if v.allowed else _WITHHELD.get(language, _WITHHELD["en"])
        out = out[:start] + replacement + out[end:]
    return out


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
    min_unit: int = DEFAULT_MIN_RELEASE,
    max_unit: int = DEFAULT_MAX_HOLD,
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
    text: str, *, min_unit: int = DEFAULT_MIN_RELEASE, max_unit: int = DEFAULT_MAX_HOLD
) -> list[str]:
    """``text`` cut into its redaction units (see :func:`unit_end`); they join to ``text``."""
    out = []
    at = 0
    while at < len(text):
        end = unit_end(text, at, min_unit=min_unit, max_unit=max_unit, final=True)
        assert end is not None and end > at
        out.append(text[at:end])
        at = end
    return out


def safe_cut(
    text: str, *, min_release: int = DEFAULT_MIN_RELEASE, max_hold: int = DEFAULT_MAX_HOLD
) -> int:
    """How many leading characters of ``text`` may be released now (0: hold everything).

    ``text`` begins at a unit boundary; the result is the end of the last unit
    whose end is already known (see :func:`unit_end`), so released text is made
    of whole units.

    Args:
        text: the held text.
        min_release: the least length of a unit (a unit ends at a sentence end
            only once it is this long).
        max_hold: the greatest length of a unit before a white-space cut.

    Returns:
        An index ``i``: ``text[:i]`` is whole units.
    """
    at = 0
    while at < len(text):
        end = unit_end(text, at, min_unit=min_release, max_unit=max_hold)
        if end is None:
            break
        at = end
    return at


class HoldBack:
    """Holds streamed text until a safe cut, then releases it through ``process``.

    Args:
        process: turns a raw segment into the text the reader may see
            (redact → guard → restore). It is called once per released segment.
        min_release: see :func:`safe_cut`.
        max_hold: see :func:`safe_cut`.

    Privacy: no raw model text is returned except through ``process``; on an
    upstream error :meth:`discard` drops what is held.
    """

    def __init__(
        self,
        process: Callable[[str], str],
        *,
        min_release: int = DEFAULT_MIN_RELEASE,
        max_hold: int = DEFAULT_MAX_HOLD,
    ) -> None:
        if min_release < 1 or max_hold < min_release:
            raise ValueError("need 1 ≤ min_release ≤ max_hold")
        self._process = process
        self._min = min_release
        self._max = max_hold
        self._held = ""
        self._closed = False

    @property
    def held(self) -> int:
        """Characters held back right now."""
        return len(self._held)

    def feed(self, delta: str) -> str:
        """Add a delta; return the processed text that may be emitted now ("" if none)."""
        segment = self.push(delta)
        return self._process(segment) if segment else ""

    def flush(self) -> str:
        """The upstream finished cleanly: process and return everything held."""
        segment = self.rest()
        return self._process(segment) if segment else ""

    def push(self, delta: str) -> str:
        """Add a delta; return the raw segment that is ready (``""`` if none).

        For callers that run ``process`` elsewhere (an async caller off its event
        loop): the segment must go through ``process`` before anyone reads it.
        """
        if self._closed:
            raise ValueError("this hold-back buffer is finished")
        if not delta:
            return ""
        self._held += delta
        cut = safe_cut(self._held, min_release=self._min, max_hold=self._max)
        if cut == 0:
            return ""
        segment, self._held = self._held[:cut], self._held[cut:]
        return segment

    def rest(self) -> str:
        """The upstream finished cleanly: the raw held text (to ``process``), and close."""
        self._closed = True
        segment, self._held = self._held, ""
        return segment

    def process(self, segment: str) -> str:
        """Run this buffer's ``process`` on a segment from :meth:`push` or :meth:`rest`."""
        return self._process(segment) if segment else ""

    def discard(self) -> int:
        """The upstream failed: drop the held text unseen; return how many characters."""
        self._closed = True
        dropped, self._held = len(self._held), ""
        return dropped
