"""PNG charts of a weekly report, drawn with matplotlib's Agg backend (no display).

* ``rating_histogram.png`` — the week's noisy rating histogram, with each bucket's
  confidence interval as an error bar;
* ``trend.png`` — the mean rating and the feedback count over the past weeks, each
  with its interval as a band, drawn from **cached releases only** (the report's
  ``history``, read from the ledger's release cache). Drawing spends nothing;
  weeks without a stored release are skipped, never computed.

Labels are plain ASCII (English), whatever the report's language, so no CJK font
is needed. The PNG metadata holds a title and nothing else (no software
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

__all__ = ["HISTOGRAM_PNG", "TREND_PNG", "draw_charts", "histogram_png", "trend_png"]

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


def histogram_png(histogram: Release, *, week: str) -> bytes:
    """The rating histogram with error bars (interval of each bucket)."""
    fig = _figure(6.0, 3.6)
    ax = fig.add_subplot()
    labels = list(histogram.labels)
    values = [max(0.0, v) for v in histogram.values]
    lower = [max(0.0, v - lo) for v, (lo, _) in zip(values, histogram.intervals, strict=True)]
    upper = [max(0.0, hi - v) for v, (_, hi) in zip(values, histogram.intervals, strict=True)]
    ax.bar(labels, values, color=_BLUE, alpha=0.85)
    ax.errorbar(labels, values, yerr=[lower, upper], fmt="none", ecolor="black", capsize=5)
    level = f"{histogram.confidence:.0%}"
    ax.set_title(f"Ratings, {week} (DP estimates, {level} intervals)")
    ax.set_xlabel("stars")
    ax.set_ylabel("ratings (noisy)")
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig, f"dpllm rating histogram {week}")


def _band(ax: Any, series: Mapping[str, Release], color: str, label: str) -> None:
    weeks = sorted(series)
    x = list(range(len(weeks)))
    values = [series[w].value for w in weeks]
    lo = [series[w].interval[0] for w in weeks]
    hi = [series[w].interval[1] for w in weeks]
    ax.fill_between(x, lo, hi, color=color, alpha=0.25, linewidth=0, label="interval")
    ax.plot(x, values, marker="o", color=color, label=label)
    ax.set_xticks(x, weeks, rotation=30, ha="right", fontsize=8)
    ax.grid(alpha=0.3)


def trend_png(history: Mapping[str, Mapping[str, Release]], *, week: str) -> bytes:
    """Mean rating and feedback count over past weeks, with interval bands."""
    panels = [(n, s) for n, s in history.items() if s]
    fig = _figure(7.0, 2.8 * max(1, len(panels)))
    if not panels:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no cached releases yet", ha="center", va="center")
        ax.set_axis_off()
    titles = {
        "mean_rating": ("Mean rating (stars)", _BLUE),
        "feedback_count": ("Feedback", _ORANGE),
    }
    for i, (name, series) in enumerate(panels, start=1):
        ax = fig.add_subplot(len(panels), 1, i)
        title, color = titles.get(name, (name, _BLUE))
        _band(ax, series, color, title)
        ax.set_title(f"{title}: weeks with a stored release, up to {week}", fontsize=10)
        ax.legend(loc="best", fontsize=8)
    return _png(fig, f"dpllm trend {week}")


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
