"""report.md and report.json show δ beside ε, and say what each figure estimates."""

from __future__ import annotations

import dataclasses

from dpllm.ledger.base import Balance, to_delta_units
from dpllm.release import Measure
from dpllm.weekly.job import PoolBudget
from dpllm.weekly.report import render_markdown, report_dict
from tests.weekly.test_report_and_charts import FALLBACK_TEXT, WEEK, _count, _mean, _report


def _budget() -> PoolBudget:
    balance = Balance(
        "weekly", Measure.PURE, WEEK, 400_000, 1_800_000, 400_000, None,
        delta_spent=to_delta_units(3e-7),
        delta_window_cap=to_delta_units(1e-6),
        delta_lifetime_spent=to_delta_units(9e-7),
        delta_lifetime_cap=to_delta_units(1e-5),
    )  # fmt: skip
    return PoolBudget.from_balance(balance)


def _weekly_report() -> object:
    mean = dataclasses.replace(
        _mean(WEEK, 3.62), estimand="mean of per-user mean ratings (clamped to 1–5)"
    )
    count = dataclasses.replace(
        _count(WEEK, 212.0), kind="count", estimand="feedback records, at most 5 per user"
    )
    report = _report(source="fallback", model="offline", text=FALLBACK_TEXT)
    return dataclasses.replace(
        report,
        releases={"mean_rating": mean, "feedback_count": count},
        fresh=("mean_rating", "feedback_count"),
        budget=(_budget(),),
    )


def test_report_md_shows_delta_beside_epsilon() -> None:
    md = render_markdown(_weekly_report())  # type: ignore[arg-type]
    header = next(line for line in md.splitlines() if line.startswith("| pool |"))
    assert "δ spent / cap" in header and "δ remaining" in header
    row = next(line for line in md.splitlines() if line.startswith("| weekly |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[6:] == ["δ 3e-07 / 1e-06", "δ 7e-07", "δ 9e-07 / 1e-05"]


def test_report_md_says_what_each_figure_estimates() -> None:
    md = render_markdown(_weekly_report())  # type: ignore[arg-type]
    assert "- feedback_count: feedback records, at most 5 per user" in md
    assert "- mean_rating: mean of per-user mean ratings (clamped to 1–5)" in md
    assert "below the raw" in md  # the bias is named, not only the noise


def test_report_json_budget_has_delta() -> None:
    budget = report_dict(_weekly_report())["budget"][0]  # type: ignore[arg-type]
    assert budget["delta_spent"] == 3e-7 and budget["delta_remaining"] == 7e-7
    assert budget["delta_window_cap"] == 1e-6 and budget["delta_lifetime_cap"] == 1e-5
