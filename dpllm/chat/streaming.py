"""The hold-back buffer: streamed model text leaves only after redaction and the guard.

A streamed answer arrives in small deltas. Emitting each delta at once would let
a phone number, a name or an over-precise figure out before anything could look
at it, because a personal-data span or a number is usually cut across deltas
(``"138"``, ``"1234 5"``, ``"678"``). :class:`HoldBack` keeps the deltas and
releases text only up to a **safe cut**:

* a sentence boundary (``. ! ? …`` followed by white space, ``。！？；``, or a
  line break), once at least ``min_release`` characters can go, so each released
  segment is a whole sentence: the redactor sees a span whole and the guard sees
  the wording that tells it which statistic a figure speaks of;
* failing that, when more than ``max_hold`` characters are held, the last white
  space whose neighbours are not part of a candidate span (a digit, ``@``, ``+``,
  ``-``, ``/``, ``.``, ``:`` or a pseudonym token) — so a spaced phone number
  ``138 1234 5678`` or an e-mail address is never split;
* the end of the stream (``flush``), only after the upstream said it finished.

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
]

DEFAULT_MIN_RELEASE = 48
"""Characters a releasable prefix must reach before it is processed and emitted."""

DEFAULT_MAX_HOLD = 480
"""Held characters after which a white-space cut is taken when no sentence ends."""

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


def safe_cut(
    text: str, *, min_release: int = DEFAULT_MIN_RELEASE, max_hold: int = DEFAULT_MAX_HOLD
) -> int:
    """How many leading characters of ``text`` may be released now (0: hold everything).

    Args:
        text: the held text.
        min_release: a sentence-boundary cut is taken only when it releases at
            least this many characters.
        max_hold: beyond this many held characters, cut at a safe white space.

    Returns:
        An index ``i``: ``text[:i]`` ends at a safe cut (never inside a
        candidate span or a pseudonym token).
    """
    best = 0
    for m in _SENTENCE_END.finditer(text):
        if not _inside_token(text, m.end()):
            best = m.end()
    if best >= min_release:
        return best
    if len(text) <= max_hold:
        return 0
    for i in range(len(text) - 1, 0, -1):
        if not text[i].isspace():
            continue
        before, after = text[i - 1], text[i + 1] if i + 1 < len(text) else ""
        if _span_char(before) or (after and _span_char(after)):
            continue
        if _inside_token(text, i):
            continue
        return i + 1
    return 0  # one unbroken run (a very long token): keep holding until the stream ends


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
