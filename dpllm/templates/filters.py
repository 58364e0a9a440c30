"""DP filters: the only way a :class:`~dpllm.release.Release` becomes words in a prompt.

Each filter is a plain function ``f(release, lang="en", ...) -> Phrase`` collected in
:data:`FILTERS` (as jinja's own ``filters.py`` does); the template environment binds
``lang`` and records the figures each filter emits. A :class:`Phrase` is a ``str``
that also carries the number strings it contains (``.figures``), so the redactor
can allow-list figures that came from releases.

The granularity rule (from :mod:`dpllm.rounding`, shared with the precision guard):

    **A figure is stated to the largest power of ten not above its interval's
    half-width**, never finer than 1 for a count. The centre is rounded half-even to
    that step; interval ends are rounded *outwards* (low end down, high end up) and a
    ``±`` half-width *up*, so a stated band never claims less uncertainty than the
    release has. Counts are clipped at 0 and proportions to 0–100 %, which is
    post-processing of a release, like all rounding here.

Examples (95 % intervals):

========================  ===========  ==============================
release                   filter       English / Chinese
========================  ===========  ==============================
160.4, 150.3–170.2        ``approx``   about 160 / 约 160
160.4, 150.3–170.2        ``interval`` 150–171 (half-width 9.95 → step 1)
4.31, 4.11–4.51           ``band``     4.3 ± 0.2
0.62, 0.58–0.66           ``pct``      about 62% (58–66%) / 约 62%（58–66%）
2.1, 0–4.2 (threshold 5)  ``count``    fewer than 5 / 少于 5 条
========================  ===========  ==============================

Privacy: every filter reads one Release and nothing else: post-processing, free
(no privacy cost; the release's own ε-DP per user guarantee is unchanged).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import ROUND_CEILING, ROUND_FLOOR

from dpllm.errors import TemplateError
from dpllm.release import Release
from dpllm.rounding import decimals_for, granularity, round_directed, round_to

__all__ = [
    "DP_FILTER_NAMES",
    "FILTERS",
    "LANGS",
    "Phrase",
    "approx",
    "band",
    "count",
    "interval",
    "pct",
]

LANGS = ("en", "zh")
"""Languages the filters write."""

#: Chinese measure words for a count, by the release's ``unit``.
ZH_MEASURE_WORDS = {"records": "条", "feedback": "条", "ratings": "条", "users": "人"}
ZH_DEFAULT_MEASURE_WORD = "个"


class Phrase(str):
    """Text written by a DP filter; ``figures`` lists the number strings in it.

    Concatenating a Phrase gives a plain ``str``; read ``figures`` right after the
    filter call (the template environment does).
    """

    figures: tuple[str, ...]

    def __new__(cls, text: str, figures: tuple[str, ...] = ()) -> Phrase:
        self = super().__new__(cls, text)
        self.figures = figures
        return self


# -- helpers -----------------------------------------------------------------------


def _check_lang(lang: str) -> str:
    if lang not in LANGS:
        raise TemplateError(f"unknown language {lang!r}; use one of {', '.join(LANGS)}")
    return lang


def _scalar(release: object, filter_name: str) -> Release:
    if not isinstance(release, Release):
        raise TemplateError(
            f"filter {filter_name!r} expects a Release, got {type(release).__name__}; "
            "public metadata is printed as is, statistics must be Releases"
        )
    if release.is_vector:
        raise TemplateError(
            f"release {release.name!r} is a vector ({', '.join(release.labels)}); "
            f'index it by label before |{filter_name}, e.g. {release.name}["{release.labels[0]}"]'
        )
    return release


def _fmt(value: float, step: float) -> str:
    # ``+ 0.0`` turns a negative zero into zero, so nothing prints "-0".
    return f"{value + 0.0:,.{decimals_for(step)}f}"


class _Figures:
    """The rounded numbers of one scalar release, in its display scale."""

    def __init__(self, release: Release) -> None:
        self.percent = release.kind == "proportion"
        scale = 100.0 if self.percent else 1.0
        lo, hi = release.interval
        value, lo, hi = release.value * scale, lo * scale, hi * scale
        half = (hi - lo) / 2.0
        self.step = granularity(half, integer=release.kind == "count")
        floor, ceil = (0.0, 100.0) if self.percent else (-math.inf, math.inf)
        if release.kind == "count":
            floor = 0.0
        self.value = min(max(round_to(value, self.step), floor), ceil)
        self.lo = min(max(round_directed(lo, self.step, ROUND_FLOOR), floor), ceil)
        self.hi = max(min(round_directed(hi, self.step, ROUND_CEILING), ceil), floor)
        self.half = round_directed(half, self.step, ROUND_CEILING)
        self.suffix = "%" if self.percent else ""

    def v(self) -> str:
        return _fmt(self.value, self.step)

    def lo_s(self) -> str:
        return _fmt(self.lo, self.step)

    def hi_s(self) -> str:
        return _fmt(self.hi, self.step)

    def half_s(self) -> str:
        return _fmt(self.half, self.step)


def _phrase(text: str, *numbers: str) -> Phrase:
    figures: list[str] = []
    for number in numbers:
        figures.append(number)
        bare = number.replace(",", "")
        if bare != number:
            figures.append(bare)
    return Phrase(text, tuple(dict.fromkeys(figures)))


# -- the filters ---------------------------------------------------------------


def band(release: Release, lang: str = "en") -> Phrase:
    """The value with its ± half-width: ``4.3 ± 0.2`` (proportions: ``62% ± 4%``).

    The value is rounded to the granularity (largest power of ten not above the
    half-width, ≥ 1 for counts); the half-width is rounded *up* to the same step.

    Args:
        release: a scalar Release (index a vector first: ``hist["5"]|band``).
        lang: ``"en"`` or ``"zh"`` (the same notation in both).

    Returns:
        A :class:`Phrase` such as ``4.3 ± 0.2``.

    Raises:
        TemplateError: not a Release, a vector release, or an unknown language.

    Privacy: post-processing of one Release; free.
    """
    _check_lang(lang)
    f = _Figures(_scalar(release, "band"))
    value, half = f.v(), f.half_s()
    return _phrase(f"{value}{f.suffix} ± {half}{f.suffix}", value, half)


def approx(release: Release, lang: str = "en") -> Phrase:
    """The value as an approximation: ``about 160`` / ``约 160``.

    Rounded half-even to the granularity: the largest power of ten not above the
    interval's half-width (≥ 1 for counts). Counts are clipped at 0.

    Args:
        release: a scalar Release.
        lang: ``"en"`` or ``"zh"``.

    Returns:
        A :class:`Phrase` such as ``about 160``.

    Raises:
        TemplateError: not a Release, a vector release, or an unknown language.

    Privacy: post-processing of one Release; free.
    """
    _check_lang(lang)
    f = _Figures(_scalar(release, "approx"))
    value = f.v()
    word = "约 " if lang == "zh" else "about "
    return _phrase(f"{word}{value}{f.suffix}", value)


def interval(release: Release, lang: str = "en") -> Phrase:
    """The confidence interval: ``150–170`` (proportions: ``58–66%``).

    The low end is rounded down and the high end up, to the granularity (largest
    power of ten not above the half-width, ≥ 1 for counts), so the printed range
    always contains the release's interval.

    Args:
        release: a scalar Release.
        lang: ``"en"`` or ``"zh"`` (the same notation in both).

    Returns:
        A :class:`Phrase` such as ``150–170``.

    Raises:
        TemplateError: not a Release, a vector release, or an unknown language.

    Privacy: post-processing of one Release; free.
    """
    _check_lang(lang)
    f = _Figures(_scalar(release, "interval"))
    lo, hi = f.lo_s(), f.hi_s()
    return _phrase(f"{lo}–{hi}{f.suffix}", lo, hi)


def pct(release: Release, lang: str = "en") -> Phrase:
    """A proportion as a percentage with its interval: ``about 62% (58–66%)``.

    The release must have ``kind="proportion"`` with values in [0, 1]. Percentages
    are rounded to the granularity of the interval's half-width in percentage points
    (centre half-even, ends outwards) and clipped to 0–100 %.

    Args:
        release: a scalar proportion Release.
        lang: ``"en"`` (``about 62% (58–66%)``) or ``"zh"`` (``约 62%（58–66%）``).

    Returns:
        A :class:`Phrase`.

    Raises:
        TemplateError: not a proportion Release, a vector, or an unknown language.

    Privacy: post-processing of one Release; free.
    """
    _check_lang(lang)
    rel = _scalar(release, "pct")
    if rel.kind != "proportion":
        raise TemplateError(
            f"|pct needs a proportion release; {rel.name!r} is a {rel.kind}: use |approx or |band"
        )
    f = _Figures(rel)
    value, lo, hi = f.v(), f.lo_s(), f.hi_s()
    if lang == "zh":
        text = f"约 {value}%（{lo}–{hi}%）"
    else:
        text = f"about {value}% ({lo}–{hi}%)"
    return _phrase(text, value, lo, hi)


def count(release: Release, lang: str = "en", unit: str | None = None) -> Phrase:
    """A count, with small counts suppressed: ``about 160`` or ``fewer than 5``.

    When the release's whole interval lies below its ``small_threshold`` the count
    is written as "fewer than <threshold>"; otherwise as :func:`approx` (rounded to
    the granularity, at least 1, clipped at 0).

    Args:
        release: a scalar count Release.
        lang: ``"en"`` (``fewer than 5``) or ``"zh"`` (``少于 5 条``).
        unit: English: a word appended (``records``); Chinese: the measure word
            (default from the release's unit: records → 条, users → 人, else 个).

    Returns:
        A :class:`Phrase`.

    Raises:
        TemplateError: not a count Release, a vector, or an unknown language.

    Privacy: post-processing of one Release; free. Suppressing small counts adds
    no privacy (the count is already DP); it keeps noise-dominated figures out of text.
    """
    _check_lang(lang)
    rel = _scalar(release, "count")
    if rel.kind != "count":
        raise TemplateError(f"|count needs a count release; {rel.name!r} is a {rel.kind}")
    if lang == "zh":
        word = unit if unit is not None else ZH_MEASURE_WORDS.get(rel.unit, ZH_DEFAULT_MEASURE_WORD)
        tail = f" {word}" if word else ""
    else:
        tail = f" {unit}" if unit else ""
    if rel.small and rel.small_threshold is not None:
        threshold = f"{rel.small_threshold:g}"
        text = f"少于 {threshold}{tail}" if lang == "zh" else f"fewer than {threshold}{tail}"
        return _phrase(text, threshold)
    f = _Figures(rel)
    value = f.v()
    text = f"约 {value}{tail}" if lang == "zh" else f"about {value}{tail}"
    return _phrase(text, value)


FILTERS: dict[str, Callable[..., Phrase]] = {
    "approx": approx,
    "band": band,
    "count": count,
    "interval": interval,
    "pct": pct,
}
"""The DP filters by name. The environment copies this table per instance."""

DP_FILTER_NAMES = frozenset(FILTERS)
"""Filters whose output is safe text for a Release (the linter's sinks)."""
