"""report.md, the writer summary and trend.png: one test per fix of issue 18.

Charts are checked by rendering them and reading their text elements (legend,
axis labels, limits) back from the matplotlib figure.
"""

from __future__ import annotations

from typing import Any

import pytest

from dpllm.chat.generate import Attempt, GenerationResult
from dpllm.guard import Guard
from dpllm.release import Cost, Release
from dpllm.weekly.charts import RATING_SCALE, trend_figure, trend_png
from dpllm.weekly.job import WeeklyReport
from dpllm.weekly.report import describe_source, guard_summary, render_markdown

WEEK = "2026-W47"


def _release(name: str, value: float, lo: float, hi: float, week: str, **kw: Any) -> Release:
    return Release(
        name=name,
        values=(value,),
        intervals=((lo, hi),),
        mechanism="laplace",
        noise_scale=0.02,
        cost=Cost.pure(0.2),
        fingerprint=f"fp-{name}-{week}",
        window=week,
        **kw,
    )


def _mean(week: str, value: float) -> Release:
    return _release("mean_rating", value, value - 0.06, value + 0.06, week, kind="mean")


def _count(week: str, value: float) -> Release:
    return _release("feedback_count", value, value - 12, value + 12, week, unit="records")


def _violations() -> tuple[Any, ...]:
    rel = _release("responses", 160.0, 150.0, 170.0, WEEK, unit="responses")
    found = Guard([rel]).check("We got 157 responses.").violations
    assert found
    return tuple(found)


def _report(*, source: str, model: str, text: str, error: str | None = None) -> WeeklyReport:
    attempts = [Attempt(number=1, source="model", text="157 responses", violations=_violations())]
    if source == "fallback":
        attempts.append(Attempt(number=2, source="fallback", text=text, error=error))
    return WeeklyReport(
        week=WEEK,
        lang="en",
        prompt="weekly",
        course_names=("Algebra",),
        releases={"mean_rating": _mean(WEEK, 3.62)},
        derived={},
        fresh=("mean_rating",),
        spent=Cost.pure(0.2),
        budget=(),
        generation=GenerationResult(text=text, source=source, attempts=tuple(attempts)),
        model=model,
        timings={},
    )


FALLBACK_TEXT = (
    f"Weekly feedback summary — {WEEK}\nCourses: Algebra\n\nThe mean rating was about 3.6."
)


def test_report_md_states_its_title_once() -> None:
    md = render_markdown(_report(source="fallback", model="offline", text=FALLBACK_TEXT))
    assert md.count("Weekly feedback summary") == 1
    assert md.startswith(f"# Weekly feedback summary — {WEEK}\n\nCourses: Algebra")


def test_report_md_keeps_a_first_line_that_is_not_the_title() -> None:
    md = render_markdown(_report(source="model", model="gpt", text="Ratings rose.\nMore."))
    assert "\n\nRatings rose.\nMore.\n" in md


def test_guard_violations_are_not_called_fixed_when_the_fallback_was_used() -> None:
    used_fallback = _report(source="fallback", model="gpt", text=FALLBACK_TEXT)
    assert "fixed" not in guard_summary(used_fallback)
    assert guard_summary(used_fallback) == "1 guard violation(s) found in the model's answers"
    assert "the fallback text was used" in render_markdown(used_fallback)
    fixed = _report(source="model", model="gpt", text="About 160 responses.")
    assert guard_summary(fixed) == "1 guard violation(s) fixed"


@pytest.mark.parametrize(
    ("source", "model", "error", "expected"),
    [
        ("model", "offline", None, "offline writer, no language model"),
        ("fallback", "gpt", None, "fallback text (no answer passed the guard)"),
        ("fallback", "gpt", "ModelTimeout: slow", "fallback text (the model failed)"),
        ("model", "gpt", None, "the model (gpt)"),
    ],
)
def test_the_text_source_is_named_truthfully(
    source: str, model: str, error: str | None, expected: str
) -> None:
    report = _report(source=source, model=model, text="About 160.", error=error)
    assert expected in describe_source(report)
    if model == "offline" or source == "fallback":
        assert "the model (" not in describe_source(report)


def _texts(fig: Any) -> dict[str, Any]:
    fig.canvas.draw()
    axes = [ax for ax in fig.axes if ax.get_legend() is not None]
    return {
        "legends": [[t.get_text() for t in ax.get_legend().get_texts()] for ax in axes],
        "xlabels": [ax.get_xlabel() for ax in axes],
        "ylabels": [ax.get_ylabel() for ax in axes],
        "ylims": [ax.get_ylim() for ax in axes],
    }


WEEKS = ["2026-W45", "2026-W46", "2026-W47"]
HISTORY = {
    "mean_rating": {w: _mean(w, v) for w, v in zip(WEEKS, (3.58, 3.66, 3.61), strict=True)},
    "feedback_count": {w: _count(w, v) for w, v in zip(WEEKS, (150, 171, 160), strict=True)},
}


def test_trend_legend_says_95_percent_interval_and_axes_are_labelled() -> None:
    got = _texts(trend_figure(HISTORY, week=WEEK))
    assert len(got["legends"]) == 2
    for legend in got["legends"]:
        assert "95% interval" in legend and "interval" not in [
            t for t in legend if t != "95% interval"
        ]
    assert got["xlabels"] == ["ISO week", "ISO week"]
    assert got["ylabels"][0].startswith("mean rating (stars")
    assert got["ylabels"][1].startswith("feedback records")


def test_mean_rating_axis_spans_the_rating_scale() -> None:
    got = _texts(trend_figure(HISTORY, week=WEEK))
    assert got["ylims"][0] == pytest.approx(RATING_SCALE)  # 1–5, not 3.52–3.72
    low, high = got["ylims"][1]
    assert low == 0 and high > 171


def test_a_single_stored_week_is_drawn_with_its_interval() -> None:
    one = {"mean_rating": {WEEK: _mean(WEEK, 3.62)}}
    fig = trend_figure(one, week=WEEK)
    got = _texts(fig)
    assert any("95% interval" in t for t in got["legends"][0])
    ax = fig.axes[0]
    # The error bar's vertical segment runs from the interval's low to its high end.
    segments = [
        seg
        for coll in ax.collections
        if hasattr(coll, "get_segments")
        for seg in coll.get_segments()
    ]
    spans = [(min(s[:, 1]), max(s[:, 1])) for s in segments if len(s) == 2]
    assert any(lo == pytest.approx(3.56) and hi == pytest.approx(3.68) for lo, hi in spans)
    assert trend_png(one, week=WEEK).startswith(b"\x89PNG")
