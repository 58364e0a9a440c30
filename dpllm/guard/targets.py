"""What the guard checks figures against: one :class:`Target` per scalar (component of a) release,
and the index of the words that name them.

A target knows its band in the unit readers see (proportions in percentage
points), the granularity the template filters write it with, its canonical
unit, and the phrases that name it: the release's declared ``terms`` (a label
and synonyms per language), a component's own label ("refund"), and — only for
a release that declares no terms — the words of its name and unit
(``active_users`` → "active", "users"). No vocabulary of any one domain is
built in.

Post-processing of released values only: free.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dpllm.errors import GuardError
from dpllm.guard.reading import ascii_lower
from dpllm.guard.units import canonical_unit
from dpllm.release import Release
from dpllm.rounding import granularity

__all__ = ["MEAN_KINDS", "PROPORTION_KINDS", "Target", "TermIndex", "build_targets"]

MEAN_KINDS = frozenset({"mean", "average", "median", "quantile", "rating"})
PROPORTION_KINDS = frozenset({"proportion", "share", "rate", "fraction"})
# Words of a release's name that say nothing about which release it is.
_NAME_STOP = frozenset(
    "count counts total number value values histogram share rate records record sum mean "
    "median the and per of".split()
)


@dataclass(frozen=True, slots=True)
class Target:
    """One scalar figure a text may state.

    Attributes:
        name: ``"mean_rating"`` or ``"topic_counts[refund]"`` for a component.
        release: the scalar release (a component is a scalar release).
        category: ``"proportion"``, ``"average"`` (mean-like kinds) or ``"count"``.
        unit_key: the canonical unit (``"records"``, ``"hours"`` …) or ``""``.
        value, lo, hi, half_width: in reader units (proportions in points).
        step: the granularity the figure may be stated to.
        scale: 100 for a proportion stated in points, else 1.
        phrases: the (lower-cased) phrases that name it.
        labels: the reader-facing label per language (``{"en": "mean rating"}``).
    """

    name: str
    release: Release
    category: str
    unit_key: str
    value: float
    lo: float
    hi: float
    half_width: float
    step: float
    scale: float
    small_threshold: float | None
    phrases: tuple[str, ...]
    labels: Mapping[str, str]

    @property
    def kind(self) -> str:
        return self.release.kind

    @property
    def is_count(self) -> bool:
        return self.release.kind == "count"


def _category(release: Release) -> str:
    kind = release.kind.lower()
    if kind in PROPORTION_KINDS:
        return "proportion"
    if kind in MEAN_KINDS:
        return "average"
    return "count"


def _phrases(name: str, release: Release, component: str | None) -> tuple[str, ...]:
    out = [p.lower() for _, p in release.terms]
    if component is not None and re.search(r"[A-Za-z\u4e00-\u9fff]", component):
        out.append(component.lower().replace("_", " "))
    if not release.terms:
        words = re.split(r"[^0-9a-z\u4e00-\u9fff]+", f"{name} {release.unit}".lower())
        out.extend(w for w in words if len(w) >= 3 and w not in _NAME_STOP and not w.isdigit())
    return tuple(dict.fromkeys(p for p in out if p))


def _target(name: str, release: Release, component: str | None) -> Target:
    category = _category(release)
    lo, hi = release.interval
    scale = 100.0 if category == "proportion" and max(abs(lo), abs(hi)) <= 1.0 else 1.0
    half_width = release.half_width * scale
    step = granularity(half_width, integer=release.kind == "count")
    labels: dict[str, str] = {}
    for lang, phrase in release.terms:
        labels.setdefault(lang, phrase)
    return Target(
        name=name,
        release=release,
        category=category,
        unit_key=canonical_unit(release.unit) if release.unit else "",
        value=release.value * scale,
        lo=lo * scale,
        hi=hi * scale,
        half_width=half_width,
        step=step,
        scale=scale,
        small_threshold=release.small_threshold if release.kind == "count" else None,
        phrases=_phrases(name, release, component),
        labels=labels,
    )


def build_targets(releases: Mapping[str, Release] | Sequence[Release]) -> tuple[Target, ...]:
    """One target per scalar release and per component of a vector release.

    Raises:
        GuardError: ``releases`` holds something that is not a Release.
    """
    if isinstance(releases, Mapping):
        pairs = list(releases.items())
    elif isinstance(releases, Sequence) and not isinstance(releases, str):
        pairs = [(r.name, r) for r in releases]
    else:
        raise GuardError("releases must be a mapping of name → Release or a sequence of Release")
    out: list[Target] = []
    for name, release in pairs:
        if not isinstance(release, Release):
            raise GuardError(f"{name!r} is not a Release (got {type(release).__name__})")
        if release.is_vector:
            for label, comp in release.components():
                out.append(_target(f"{name}[{label}]", comp, label))
        else:
            out.append(_target(name, release, None))
    return tuple(out)


class TermIndex:
    """Finds, in one pass over a text, every phrase that names a target.

    ASCII phrases match whole words, case-insensitively, with an optional plural
    ``s``/``es``; Chinese phrases match anywhere. The longest phrase wins
    ("reopened tickets" over "tickets").
    """

    def __init__(self, targets: Sequence[Target]) -> None:
        self._owners: dict[str, frozenset[int]] = {}
        owners: dict[str, set[int]] = {}
        for i, t in enumerate(targets):
            for p in t.phrases:
                owners.setdefault(p, set()).add(i)
        self._owners = {p: frozenset(s) for p, s in owners.items()}
        ascii_p = sorted((p for p in owners if p.isascii()), key=len, reverse=True)
        other_p = sorted((p for p in owners if not p.isascii()), key=len, reverse=True)
        # Read as "(?<![A-Za-z])(?:p1|p2…)(?:e?s)?(?![A-Za-z])|q1|q2…", written as one flat
        # alternation whose every branch begins with its first character (the look-behind
        # checked after it): the engine then scans for those characters in C instead of
        # trying the look-behind at every position. Same branches, same order.
        parts = [
            rf"{re.escape(p[0])}(?<![A-Za-z]{re.escape(p[0])}){re.escape(p[1:])}"
            r"(?:e?s)?(?![A-Za-z])"
            for p in ascii_p
        ]
        parts.extend(re.escape(p) for p in other_p)
        self._pattern = re.compile("|".join(parts)) if parts else None

    def find(self, text: str) -> Occurrences:
        """Every naming phrase in ``text``: (start, end, target indices), in order."""
        found: list[tuple[int, int, frozenset[int]]] = []
        if self._pattern is not None:
            # ASCII lower-casing keeps every offset (str.lower() may not: "İ" → "i̇").
            for m in self._pattern.finditer(ascii_lower(text)):
                word = m.group(0).lower()
                owners = self._owners.get(word)
                if owners is None:
                    owners = self._owners.get(word[:-1]) or self._owners.get(word[:-2])
                if owners:
                    found.append((m.start(), m.end(), owners))
        return Occurrences(text, found)


# A full stop ends a sentence only before a space or the end ("4.3" is a number).
# Written as alternatives of single characters (not a class then an alternative) so
# that the engine scans for their first characters in C.
_SENTENCE_END = re.compile(r"。|!|！|\?|？|;|；|\n|\.(?=\s|\Z)")
_CLAUSE_END = re.compile(r"。|!|！|\?|？|;|；|\n|，|、|\.(?=\s|\Z)|,(?=\s|\Z)|:(?=\s|\Z)")
_AFTER_GAP = re.compile(r"[^0-9.。!！?？;；\n,，]{0,24}\Z")


class Occurrences:
    """The naming phrases of one text, searchable by position."""

    def __init__(self, text: str, found: list[tuple[int, int, frozenset[int]]]) -> None:
        self._text = text
        self._found = found
        self._starts = [f[0] for f in found]
        self._ends = [f[1] for f in found]
        self._sentences = [m.end() for m in _SENTENCE_END.finditer(text)] if found else []
        self._clauses = [m.end() for m in _CLAUSE_END.finditer(text)] if found else []

    def naming(self, start: int, num_end: int, end: int) -> frozenset[int]:
        """Targets a figure at ``start``–``end`` is said of.

        Every naming phrase before it in its clause ("提及退款的反馈约23条" names the
        refund topic and the feedback), else the nearest one before it in its
        sentence; and one right after it ("about 160 feedback records").
        """
        if not self._found:
            return frozenset()
        out: set[int] = set()
        clause = _last_before(self._clauses, start)
        sentence = _last_before(self._sentences, start)
        i = bisect.bisect_right(self._ends, start) - 1
        while i >= 0 and self._found[i][1] > start:
            i -= 1  # a phrase overlapping the figure's own words is not before it
        if i >= 0 and self._found[i][0] >= sentence:
            out |= self._found[i][2]
            i -= 1
            while i >= 0 and self._found[i][0] >= clause:
                out |= self._found[i][2]
                i -= 1
        j = bisect.bisect_left(self._starts, num_end)
        if j < len(self._found):
            s, e, owners = self._found[j]
            if s <= end + 24 and _AFTER_GAP.match(self._text, num_end, s):
                out |= owners
        return frozenset(out)


def _last_before(ends: list[int], pos: int) -> int:
    """The last boundary at or before ``pos`` (0 when none)."""
    k = bisect.bisect_right(ends, pos) - 1
    return ends[k] if k >= 0 else 0
