"""PNG charts of a weekly report, drawn with matplotlib's Agg backend (no display).

* ``rating_histogram.png`` — the week's noisy rating histogram, with each bucket's
  confidence interval as an error bar;
* ``trend.png`` — the mean rating (on the whole 1–5 scale) and the feedback count
  over the past weeks, each with its interval as a band (an error bar for a single
  week), drawn from **cached releases only** (the report's
  ``history``, read from the ledger's release cache). Drawing spends nothing;
  weeks without a stored release are skipped, never computed.

Labels are plain ASCII (English), whatever the report's language, so no CJK font
is needed. Interval labels (each histogram bar's, the trend's latest week) are
rounded **outwards** like every other output (:func:`interval_label`): a band
never looks narrower than the released interval. The PNG metadata holds a title and nothing else (no software
version, no timestamp), so a rerun of the same releases gives the same bytes.

Privacy: post-processing of releases: free.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from dpllm._extras import require
from dpllm.release import Release
from dpllm.weekly.job import WeeklyReport

__all__ = [
    "HISTOGRAM_PNG",
    "RATING_SCALE",
    "TREND_PNG",
    "draw_charts",
    "histogram_figure",
    "histogram_png",
    "interval_label",
    "trend_figure",
    "trend_png",
]

HISTOGRAM_PNG = "rating_histogram.png"
TREND_PNG = "trend.png"
_BLUE = "#3a6ea5"
_ORANGE = "#d9822b"


def _figure(width: float, height: float) -> Any:
    require("matplotlib", extra="charts", feature="the weekly report's charts")
    from matplotlib.figure import Figure

    # A bare Figure (not pyplot): no global state, no GUI backend, thread-safe.
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig: Any, title: str) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Title": title, "Software": None})
    return buf.getvalue()


def interval_label(part: Release, *, sep: str = "–") -> str:
    """A scalar release's interval as chart text, rounded outwards to the step its
    half-width supports (counts never below 0); ``"< N"`` for a suppressed count."""
    from dpllm.rounding import format_interval, granularity

    if part.small:
        return f"< {part.small_threshold:g}"
    lo, hi = part.interval
    count = part.kind == "count"
    step = granularity((hi - lo) / 2.0, integer=count)
    return format_interval(max(lo, 0.0) if count else lo, hi, step, sep=sep)


def histogram_png(histogram: Release, *, week: str) -> bytes:
    """The rating histogram with error bars (interval of each bucket)."""
    return _png(histogram_figure(histogram, week=week), f"dpllm rating histogram {week}")


def histogram_figure(histogram: Release, *, week: str) -> Any:
    """The rating histogram as a matplotlib ``Figure`` (tests read its labels back).

    Each bar is labelled with its interval, rounded outwards.
    """
    fig = _figure(6.0, 3.6)
    ax = fig.add_subplot()
    labels = list(histogram.labels)
    values = [max(0.0, v) for v in histogram.values]
    lower = [max(0.0, v - lo) for v, (lo, _) in zip(values, histogram.intervals, strict=True)]
    upper = [max(0.0, hi - v) for v, (_, hi) in zip(values, histogram.intervals, strict=True)]
    bars = ax.bar(labels, values, color=_BLUE, alpha=0.85)
    texts = [interval_label(part) for _, part in histogram.components()]
    ax.bar_label(bars, labels=texts, padding=12, fontsize=8)
    ax.errorbar(labels, values, yerr=[lower, upper], fmt="none", ecolor="black", capsize=5)
    level = f"{histogram.confidence:.0%}"
    ax.set_title(f"Ratings, {week} (DP estimates, {level} intervals)")
    ax.set_xlabel("stars")
    ax.set_ylabel("ratings (noisy)")
    ax.set_ylim(bottom=0, top=max([1.0, *(hi for _, hi in histogram.intervals)]) * 1.2)
    ax.grid(axis="y", alpha=0.3)
    return fig


RATING_SCALE = (1.0, 5.0)
"""The rating scale (stars): the mean-rating axis spans all of it, so noise of a
tenth of a star does not look like a change."""

_PANELS: Mapping[str, tuple[str, str, str, tuple[float, float] | None]] = {
    # name: (title, y-axis label, colour, fixed y range)
    "mean_rating": ("Mean rating", "mean rating (stars, 1–5)", _BLUE, RATING_SCALE),
    "feedback_count": ("Feedback", "feedback records (noisy)", _ORANGE, None),
}


def _band(ax: Any, series: Mapping[str, Release], color: str, label: str) -> None:
    """Values as a line, each week's interval as a band (error bars for a single week)."""
    weeks = sorted(series)
    x = list(range(len(weeks)))
    values = [series[w].value for w in weeks]
    lo = [series[w].interval[0] for w in weeks]
    hi = [series[w].interval[1] for w in weeks]
    level = f"{series[weeks[-1]].confidence:.0%} interval"
    if len(weeks) == 1:
        # A band over one x has no width: draw the interval as an error bar.
        ax.errorbar(
            x,
            values,
            yerr=[[values[0] - lo[0]], [hi[0] - values[0]]],
            fmt="o",
            color=color,
            ecolor=color,
            capsize=8,
            label=f"{label} with its {level}",
        )
        ax.set_xlim(-1, 1)
    else:
        ax.fill_between(x, lo, hi, color=color, alpha=0.25, linewidth=0, label=level)
        ax.plot(x, values, marker="o", color=color, label=label)
    ax.annotate(  # the latest week's interval, rounded outwards like every output
        interval_label(series[weeks[-1]]),
        (x[-1], values[-1]),
        xytext=(6, 6),
        textcoords="offset points",
        fontsize=8,
        color=color,
    )
    ax.set_xticks(x, weeks, rotation=30, ha="right", fontsize=8)
    ax.grid(alpha=0.3)


def trend_png(history: Mapping[str, Mapping[str, Release]], *, week: str) -> bytes:
    """Mean rating and feedback count over past weeks, with interval bands."""
    return _png(trend_figure(history, week=week), f"dpllm trend {week}")


def trend_figure(history: Mapping[str, Mapping[str, Release]], *, week: str) -> Any:
    """The trend chart as a matplotlib ``Figure`` (tests read its texts back)."""
    panels = [(n, s) for n, s in history.items() if s]
    fig = _figure(7.0, 2.8 * max(1, len(panels)))
    if not panels:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no cached releases yet", ha="center", va="center")
        ax.set_axis_off()
    for i, (name, series) in enumerate(panels, start=1):
        ax = fig.add_subplot(len(panels), 1, i)
        title, ylabel, color, scale = _PANELS.get(name, (name, name, _BLUE, None))
        _band(ax, series, color, f"{title} (DP estimate)")
        ax.set_title(f"{title}: weeks with a stored release, up to {week}", fontsize=10)
        ax.set_xlabel("ISO week")
        ax.set_ylabel(ylabel, fontsize=8)
        if scale is not None:
            ax.set_ylim(*scale)
        else:
            ax.set_ylim(bottom=0)
        ax.legend(loc="best", fontsize=8)
    return fig


def draw_charts(report: WeeklyReport) -> dict[str, bytes]:
    """``{file name: PNG bytes}`` for the report's charts.

    Privacy: reads the report's releases and its cached history only; spends nothing.
    """
    charts: dict[str, bytes] = {}
    hist = report.releases.get("rating_histogram")
    if hist is not None:
        charts[HISTOGRAM_PNG] = histogram_png(hist, week=report.week)
    charts[TREND_PNG] = trend_png(report.history, week=report.week)
    return charts
