"""The precision rules: every figure in a text checked against the releases it speaks of.

A :class:`Guard` holds the releases a text was written from. :meth:`Guard.check`
extracts every number (:func:`~dpllm.guard.extract.extract_mentions`), matches
each to a release, and applies these rules:

``over-precise``
    the figure is stated to a step finer than
    ``rounding.granularity(half_width, integer=kind == "count")`` — the same rule
    the template filters write with. Proportions are compared in percentage
    points (a proportion 0.62 ± 0.03 may be stated as "62%", not "62.4%").
``outside-band``
    the figure, read with the slack its own rounding allows (± half its stated
    step: "160" covers 155–165), does not overlap the released interval.
``unknown-reference``
    a ``[[reference]]`` (:mod:`.references`) that names no release: references to
    known releases are replaced by :meth:`Guard.resolve` before the check.
``unsupported``
    a statistic-like figure (a unit, a percentage, a decimal, a range, an
    approximation word, or a value ≥ 10) that matches no release. A violation or
    only a warning, by configuration.

**Matching**, in order (:meth:`Guard._match`):

1. *Named.* The releases the sentence names — by the label and synonyms a
   release declares (:attr:`~dpllm.release.Release.terms`, or a template's
   ``terms:`` lines), a component's own label ("refund"), or, for a release that
   declares none, the words of its name and unit — in the figure's clause, else
   the nearest in its sentence, or right after the figure ("about 160 feedback
   records"); :mod:`.targets`.
2. *Unit.* Else the releases of the figure's canonical unit (:mod:`.units`:
   "条"/"responses" → records, "小时" → hours, "¥"/"元" → yuan …). A percentage
   fits only proportions (in points); a decimal in [0, 1] ("0.62") fits a
   proportion too; a unit that contradicts a release's excludes it.
3. *Value.* Else every release the figure's form fits, the nearest interval
   first; a generic word ("average", "median", "share", "平均", "比例") breaks ties.

A match is accepted when the figure lies within ``match_tolerance`` half-widths
of the interval, or the sentence names the release; otherwise the figure is
unsupported ("about 40 students complained" is not a wrong total of 1,230 users,
it is a figure no release supports). A figure that breaks the rules for the
release it was matched to is still accepted when it faithfully states another
release of the same pool — the named releases when the sentence names any, so
"the refund process was mentioned around 50 times" is refused even when another
topic's band holds 50.

Public constants (dates, weeks, durations, ε values, the rating scale,
confidence levels, ordinals, list numbers, years) are never checked; integers
below 10 stated plainly ("3 themes", "两个方面") are wording, not statistics,
unless they match a release. Everything here is post-processing: free.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from dpllm.errors import GuardError
from dpllm.guard.extract import NumberMention, extract_mentions, text_language
from dpllm.guard.references import REFERENCE, Resolved, reference_name, resolve_references
from dpllm.guard.targets import Target, TermIndex, build_targets
from dpllm.guard.units import units_compatible
from dpllm.release import Release
from dpllm.rounding import format_number, is_as_coarse_as

__all__ = ["Guard", "GuardReport", "Rule", "Violation"]

DEFAULT_MATCH_TOLERANCE = 3.0
"""How many half-widths away from an interval a figure may lie and still be matched to it."""


class Rule(StrEnum):
    """The guard's rules."""

    OVER_PRECISE = "over-precise"
    OUTSIDE_BAND = "outside-band"
    UNSUPPORTED = "unsupported"
    UNKNOWN_REFERENCE = "unknown-reference"


@dataclass(frozen=True, slots=True)
class Violation:
    """One figure the guard refuses (or warns about).

    Attributes:
        span: ``(start, end)`` of the mention in the checked text.
        rule: which rule it breaks.
        release: the name of the release it was matched to (``None`` if unsupported).
        mention: the mention as written (``"157 条"``).
        allowed: the allowed form in the text's language (``"about 160 responses"``,
            ``"约160条"``), or ``None`` when nothing may be stated (unsupported).
        allowed_range: the released interval at the allowed precision (``"150–170"``).
        message: one sentence, in the text's language, saying what to write instead.
    """

    span: tuple[int, int]
    rule: Rule
    release: str | None
    mention: str
    allowed: str | None
    allowed_range: str | None
    message: str


@dataclass(frozen=True, slots=True)
class GuardReport:
    """The result of :meth:`Guard.check`.

    Attributes:
        text: the text that was checked.
        language: ``"en"`` or ``"zh"`` (the language of the allowed forms).
        mentions: every number mention found.
        matches: the release name each mention was matched to (``None``: none/constant).
        violations: mentions the text must not contain.
        warnings: unsupported figures when the guard runs with ``unsupported="warning"``.
    """

    text: str
    language: str
    mentions: tuple[NumberMention, ...]
    matches: tuple[str | None, ...]
    violations: tuple[Violation, ...]
    warnings: tuple[Violation, ...]

    @property
    def ok(self) -> bool:
        """True when there is no violation (warnings allowed)."""
        return not self.violations


_STAT_WORDS: tuple[tuple[str, str], ...] = tuple(
    (word, cat)
    for cat, words in (
        # Generic statistical wording (not any domain's vocabulary): which kind of
        # release a figure that names none is likely about.
        ("average", "average mean median typical 平均 均值 中位"),
        ("proportion", "share proportion percent fraction 比例 占比 比率"),
    )
    for word in words.split()
)
_SENTENCE_END = re.compile(r"[.。!！?？;；\n]")


def _context(text: str, start: int) -> str:
    before = text[max(0, start - 60) : start]
    ends = list(_SENTENCE_END.finditer(before))
    return (before[ends[-1].end() :] if ends else before).lower()


def _stat_hint(context: str) -> str | None:
    best, where = None, -1
    for word, cat in _STAT_WORDS:
        i = context.rfind(word)
        if i > where:
            best, where = cat, i
    return best


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with every character of the spans (the union) replaced by a space."""
    if not spans:
        return text
    parts: list[str] = []
    done = 0  # text[:done] is in parts
    for a, b in sorted(spans):
        if b <= done:
            continue
        a = max(a, done)
        parts.append(text[done:a])
        parts.append(" " * (b - a))
        done = b
    parts.append(text[done:])
    return "".join(parts)


def _line_language(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text_language(text[start : end if end != -1 else len(text)])


def _stated_interval(m: NumberMention) -> tuple[float, float]:
    if m.bound == "<":
        return -math.inf, m.value
    if m.bound == ">":
        return m.value, math.inf
    if m.is_range:
        return m.lo, m.hi
    slack = 0.0 if math.isinf(m.step) else m.step / 2
    return m.value - slack, m.value + slack


def _gap(a: tuple[float, float], lo: float, hi: float) -> float:
    """Distance between interval ``a`` and ``[lo, hi]`` (0 when they overlap)."""
    eps = 1e-9 * max(1.0, abs(lo), abs(hi))
    if a[1] < lo - eps:
        return lo - a[1]
    if a[0] > hi + eps:
        return a[0] - hi
    return 0.0


def _as_points(m: NumberMention) -> NumberMention:
    """A proportion written as a decimal (``0.62``), read in percentage points."""
    step = m.step * 100 if math.isfinite(m.step) else m.step
    return replace(m, value=m.value * 100, lo=m.lo * 100, hi=m.hi * 100, step=step)


def _fit_key(m: NumberMention) -> tuple[bool, bool, str, bool]:
    """Everything of ``m`` that :func:`_fit` reads."""
    return (
        m.percent,
        bool(m.decimal and not m.unit_key and 0 <= m.lo and m.hi <= 1),
        m.unit_key,
        m.category == "rating",
    )


def _fit(m: NumberMention, t: Target) -> int | None:
    """How well mention ``m`` can speak of ``t`` (higher is better), ``None`` if it cannot."""
    if m.percent:
        return 1 if t.category == "proportion" else None
    if t.category == "proportion":
        # "0.62" of a proportion; never a plain integer or a figure with a unit.
        ok = m.decimal and not m.unit_key and 0 <= m.lo and m.hi <= 1 and t.scale == 100
        return 0 if ok else None
    fit = units_compatible(m.unit_key, t.unit_key, count=t.is_count)
    if fit < 0:
        return None
    if m.category == "rating" and t.unit_key == "" and t.category != "average":
        return None  # "4.3 stars" is not a count without a unit
    return fit


class Guard:
    """Checks texts against the releases they were written from.

    Args:
        releases: the releases (a mapping name → Release, as the template saw
            them, or a sequence named by ``Release.name``). Vector releases are
            checked per component (``hist[5]``).
        unsupported: ``"violation"`` (default) or ``"warning"`` for figures that
            match no release.
        allowed_constants: further values that are never reported as
            unsupported (e.g. a course size the text may quote).
        match_tolerance: half-widths beyond the interval within which a figure
            still matches a release.

    Raises:
        GuardError: ``releases`` holds something that is not a Release, or an
            option is out of range.

    Privacy: reads released values only (post-processing); spends nothing.
    """

    def __init__(
        self,
        releases: Mapping[str, Release] | Sequence[Release],
        *,
        unsupported: str = "violation",
        allowed_constants: Collection[float] = (),
        match_tolerance: float = DEFAULT_MATCH_TOLERANCE,
    ) -> None:
        if unsupported not in ("violation", "warning"):
            raise GuardError(f"unsupported must be 'violation' or 'warning', got {unsupported!r}")
        if not (math.isfinite(match_tolerance) and match_tolerance >= 0):
            raise GuardError(f"match_tolerance must be finite and ≥ 0, got {match_tolerance!r}")
        self._targets = build_targets(releases)
        self._terms = TermIndex(self._targets)
        self._units = frozenset(t.unit_key for t in self._targets if t.unit_key)
        self._unsupported = unsupported
        self._constants = frozenset(float(c) for c in allowed_constants)
        self._tolerance = float(match_tolerance)
        # _fit depends on a mention only through _fit_key: its fits against every target
        # are computed once per key and kept (a handful of keys per guard).
        self._fits: dict[tuple[bool, bool, str, bool], tuple[tuple[int, Target, int], ...]] = {}

    @property
    def release_names(self) -> tuple[str, ...]:
        """The names of the (scalar components of the) releases checked against."""
        return tuple(t.name for t in self._targets)

    @property
    def targets(self) -> tuple[Target, ...]:
        """The scalar figures checked against (one per component of a vector release)."""
        return self._targets

    def check(self, text: str, *, language: str = "auto") -> GuardReport:
        """Check every figure in ``text``.

        Args:
            text: the (already redacted) text.
            language: ``"en"``, ``"zh"`` or ``"auto"``; the language of the allowed
                forms and messages. ``"auto"`` decides per line (Han characters → zh),
                so a bilingual text gets each message in its line's language.

        Returns:
            A :class:`GuardReport`; ``report.ok`` when nothing is violated.

        Raises:
            GuardError: ``text`` is not a string or ``language`` is unknown.
        """
        if not isinstance(text, str):
            raise GuardError(f"the guard checks text, got {type(text).__name__}")
        auto = language == "auto"
        if auto:
            language = text_language(text)
        if language not in ("en", "zh"):
            raise GuardError(f"language must be 'en', 'zh' or 'auto', got {language!r}")
        refs = list(REFERENCE.finditer(text)) if "[[" in text else []
        readable = text
        for r in refs:  # a reference's own characters are not figures ("[[hist.5]]")
            readable = readable[: r.start()] + " " * (r.end() - r.start()) + readable[r.end() :]
        mentions = tuple(self._reopen(m) for m in extract_mentions(readable))
        # A public constant's words are not context for the figures after it ("2 stars:
        # about 210" speaks of a count, not of the mean rating in stars).
        blanked = _blank(readable, [c.span for c in mentions if c.constant is not None])
        occurrences = self._terms.find(blanked) if mentions else None
        matches: list[str | None] = []
        violations: list[Violation] = [
            self._unknown_reference(r, text, language, auto) for r in refs
        ]
        warnings: list[Violation] = []
        for m in mentions:
            if m.constant is not None or (m.bound == "<" and m.value in self._constants):
                matches.append(None)  # a bound at an allowed constant: a public threshold
                continue
            assert occurrences is not None
            named = occurrences.naming(m.span[0], m.num_end, m.span[1])
            lang = language
            if auto and "\n" in text:  # one text without a line break: its language
                lang = _line_language(text, m.span[0])
            target, pool, is_named = self._match(blanked, m, named)
            if target is not None:
                found = _judge(_read(m, target), target, lang)
                if found:
                    # Several releases a figure could speak of may overlap. A figure that
                    # faithfully states one of them (inside its band, no finer than its
                    # granularity) reveals nothing beyond that release: accept it — among
                    # the releases the sentence names when it names any, else among those
                    # of the figure's unit and kind.
                    alternative = self._faithful_alternative(m, target, pool, lang)
                    if alternative is not None:
                        target, found = alternative, []
                violations.extend(found)
            elif self._statistic_like(m):
                v = _unsupported(m, lang, self.release_names)
                (violations if self._unsupported == "violation" else warnings).append(v)
            matches.append(target.name if target else None)
        return GuardReport(
            text, language, mentions, tuple(matches), tuple(violations), tuple(warnings)
        )

    def resolve(self, text: str, *, language: str = "auto") -> Resolved:
        """Replace each ``[[reference]]`` to a known release by its allowed phrase.

        See :mod:`dpllm.guard.references`; unknown references stay in the text and
        :meth:`check` reports them.
        """
        if not isinstance(text, str):
            raise GuardError(f"the guard resolves text, got {type(text).__name__}")
        return resolve_references(text, self._targets, language=language)

    @property
    def references(self) -> tuple[str, ...]:
        """Every reference a text may cite (``"mean_rating"``, ``"topic_counts.refund"``)."""
        return tuple(reference_name(t.name) for t in self._targets)

    def _unknown_reference(
        self, r: re.Match[str], text: str, language: str, auto: bool
    ) -> Violation:
        lang = _line_language(text, r.start()) if auto else language
        known = ", ".join(f"[[{n}]]" for n in self.references) or "—"
        if lang == "zh":
            msg = f"“{r.group(0)}”不是已发布的统计量；可用的引用：{known}。"
        else:
            msg = f'"{r.group(0)}" names no released statistic; the references are: {known}.'
        return Violation(r.span(), Rule.UNKNOWN_REFERENCE, None, r.group(0), None, None, msg)

    def _reopen(self, m: NumberMention) -> NumberMention:
        # "18 hours" is a public duration unless a release is measured in hours.
        if m.constant == "duration" and m.unit_key and m.unit_key in self._units:
            return replace(m, constant=None)
        return m

    def _faithful_alternative(
        self, m: NumberMention, chosen: Target, pool: Sequence[Target], language: str
    ) -> Target | None:
        for t in pool:
            if t is chosen or t.category != chosen.category:
                continue
            if _faithful(_read(m, t), t):
                return t
        return None

    def _statistic_like(self, m: NumberMention) -> bool:
        if m.value in self._constants and not m.is_range:
            return False
        return bool(
            m.percent
            or m.approx
            or m.is_range
            or m.bound
            or m.step < 1
            or abs(m.value) >= 10
            or m.unit_key
        )

    def _match(
        self, text: str, m: NumberMention, named: frozenset[int]
    ) -> tuple[Target | None, list[Target], bool]:
        """The target ``m`` speaks of, the pool of its alternatives, and whether it was named.

        Order: the releases the sentence names (their declared label or synonyms),
        then the releases of the figure's unit, then every release the figure's
        form fits, nearest by value (a generic word — "average", "share" — breaks ties).
        """
        form = _fit_key(m)
        fitting = self._fits.get(form)
        if fitting is None:
            fitting = tuple(
                (i, t, f) for i, t in enumerate(self._targets) if (f := _fit(m, t)) is not None
            )
            if len(self._fits) >= 256:  # unit words are open-ended: keep it bounded
                self._fits.clear()
            self._fits[form] = fitting
        if not fitting:
            return None, [], False
        fits = [(t, f) for _, t, f in fitting]
        by_name = [(t, f) for i, t, f in fitting if i in named] if named else []
        if by_name:
            pool = by_name
        else:
            same_unit = [(t, f) for t, f in fits if f == 2]
            pool = same_unit or fits
        hint = None if by_name or len(pool) == 1 else _stat_hint(_context(text, m.span[0]))
        best: tuple[tuple[bool, bool, bool, int, float], Target] | None = None
        for t, f in pool:
            read = _read(m, t)
            d = _gap(_stated_interval(read), t.lo, t.hi) / max(t.half_width, t.step)
            key = (d > self._tolerance, hint is not None and t.category != hint, d > 0, -f, d)
            if best is None or key < best[0]:
                best = (key, t)
        assert best is not None
        target = best[1]
        within = not best[0][0]
        targets = [t for t, _ in pool]
        if by_name or within:
            return target, targets, bool(by_name)
        return None, targets, False


def _read(m: NumberMention, t: Target) -> NumberMention:
    """``m`` in the units of ``t``: a decimal proportion (``0.62``) in points."""
    if t.category == "proportion" and not m.percent and t.scale == 100:
        return _as_points(m)
    return m


# --------------------------------------------------------------------------- verdicts
def _fmt(value: float, step: float) -> str:
    return format_number(value, step)


def _unit_suffix(m: NumberMention, language: str) -> str:
    if m.percent:
        return "%"
    if not m.unit:
        return ""
    return m.unit if language == "zh" and not m.unit.isascii() else f" {m.unit}"


def _allowed_forms(m: NumberMention, t: Target, language: str) -> tuple[str, str]:
    suffix = _unit_suffix(m, language)
    lo = math.floor(t.lo / t.step + 1e-9) * t.step
    hi = math.ceil(t.hi / t.step - 1e-9) * t.step
    if t.kind == "count":
        lo = max(lo, 0.0)
    band = f"{_fmt(lo, t.step)}–{_fmt(hi, t.step)}{suffix}"
    if t.small_threshold is not None and t.hi < t.small_threshold:
        n = _fmt(t.small_threshold, 1.0)
        return (f"少于{n}{suffix}" if language == "zh" else f"fewer than {n}{suffix}"), band
    approx = _fmt(t.value, t.step)
    return (f"约{approx}{suffix}" if language == "zh" else f"about {approx}{suffix}"), band


def _faithful(m: NumberMention, t: Target) -> bool:
    """No rule broken: as coarse as ``t``'s granularity and overlapping its band."""
    return is_as_coarse_as(m.step, t.step) and _gap(_stated_interval(m), t.lo, t.hi) == 0


def _judge(m: NumberMention, t: Target, language: str) -> list[Violation]:
    out: list[Violation] = []
    if _faithful(m, t):
        return out  # the common case: no wording to build
    allowed, band = _allowed_forms(m, t, language)
    if not is_as_coarse_as(m.step, t.step):
        if language == "zh":
            msg = f"“{m.text}”比{t.name}的误差范围允许的更精确；请写成“{allowed}”或“{band}”。"
        else:
            msg = (
                f'"{m.text}" is more precise than {t.name}\'s error band allows; '
                f'write "{allowed}" or "{band}".'
            )
        out.append(Violation(m.span, Rule.OVER_PRECISE, t.name, m.text, allowed, band, msg))
    if _gap(_stated_interval(m), t.lo, t.hi) > 0:
        if language == "zh":
            msg = f"“{m.text}”与{t.name}的发布区间{band}不符；请写成“{allowed}”或“{band}”。"
        else:
            msg = (
                f'"{m.text}" is inconsistent with {t.name}\'s released interval {band}; '
                f'write "{allowed}" or "{band}".'
            )
        out.append(Violation(m.span, Rule.OUTSIDE_BAND, t.name, m.text, allowed, band, msg))
    return out


def _unsupported(m: NumberMention, language: str, names: Sequence[str]) -> Violation:
    listed = ", ".join(names) if names else "—"
    if language == "zh":
        msg = f"“{m.text}”不对应任何已发布的统计量（{listed}）；请删去该数字。"
    else:
        msg = f'"{m.text}" matches none of the released statistics ({listed}); remove it.'
    return Violation(m.span, Rule.UNSUPPORTED, None, m.text, None, None, msg)
