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
from dpllm.redact.units import (
    DEFAULT_MAX_UNIT,
    DEFAULT_MIN_UNIT,
    TOKEN_PATTERN,
    split_units,
    unit_end,
)

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

DEFAULT_MIN_RELEASE = DEFAULT_MIN_UNIT
"""The least length of a redaction unit: a unit ends at a sentence end only past it."""

DEFAULT_MAX_HOLD = DEFAULT_MAX_UNIT
"""Unit length after which a white-space cut is taken when no sentence ends."""

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
