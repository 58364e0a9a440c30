"""``dpllm weekly --dry-run`` and ``dpllm stats --dry-run``: the plan priced and printed.

The pricing itself is :func:`dpllm.weekly.dryrun.dry_run` (reads column names and the
ledger only; spends and writes nothing); this module adds the public population guess
for expected intervals, the demo's trend weeks, and the table / JSON output.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING

import typer

from dpllm.cli._common import EXIT_BUDGET, EXIT_ERROR, print_json

if TYPE_CHECKING:
    from dpllm.config import Settings
    from dpllm.data.queries import Query
    from dpllm.release import Cost
    from dpllm.weekly.dryrun import DryRun
    from dpllm.weekly.job import WeeklyJob
    from dpllm.windows import Window

__all__ = [
    "TREND_QUERIES",
    "dry_run_of",
    "print_dry_run",
    "run_dry",
    "trend_plan",
    "trend_to_pay",
    "trend_weeks",
]

TREND_QUERIES = ("mean_rating", "feedback_count")
"""What the demo also releases for the weeks before the report week (the trend chart)."""


def dry_run_of(job: WeeklyJob, week: Window | str) -> tuple[DryRun, int]:
    """The dry run of ``job`` for ``week``, expected intervals from a public guess."""
    from dpllm.assess.planning import Population, expected_exact, predicted_half_width
    from dpllm.weekly.dryrun import dry_run

    population = Population()

    def half_width(q: Query) -> float:
        exact, _ = expected_exact(q, population)
        return predicted_half_width(q, exact, confidence=job.settings.confidence)

    return dry_run(job, week, half_width=half_width), population.users


def run_dry(
    settings: Settings,
    week: Window,
    *,
    courses: tuple[str, ...],
    today: dt.date,
    allow_incomplete: bool,
    as_json: bool = False,
    demo: bool = False,
) -> None:
    from dpllm.weekly.job import WeeklyJob

    with WeeklyJob(
        settings, courses=courses, today=today, allow_incomplete=allow_incomplete
    ) as job:
        result, users = dry_run_of(job, week)
        trend = trend_to_pay(job, week) if demo else None
    print_dry_run(result, settings, users, as_json=as_json, trend=trend)
    if result.lint:
        raise typer.Exit(EXIT_ERROR)
    if not result.fits:
        raise typer.Exit(EXIT_BUDGET)


def trend_weeks(week: Window) -> tuple[Window, ...]:
    """The earlier weeks whose trend figures the demo releases beside ``week``."""
    return week.previous(8)[:-1]


def trend_plan(job: WeeklyJob) -> dict[str, Query]:
    """The plan's queries the demo also releases for the trend weeks."""
    return {n: job.plan[n] for n in TREND_QUERIES if n in job.plan}


def trend_to_pay(job: WeeklyJob, week: Window) -> dict[str, Cost]:
    """What the demo's trend releases would charge, by week (weeks with nothing new left out)."""
    from dpllm.release import Cost

    trend = trend_plan(job)
    if not trend:
        return {}
    measure = next(iter(trend.values())).cost.measure
    out: dict[str, Cost] = {}
    for earlier in trend_weeks(week):
        new = job.to_pay(earlier, trend)
        if new:
            out[earlier.key] = sum((q.cost for q in new.values()), Cost.zero(measure))
    return out


def print_dry_run(
    result: DryRun,
    settings: Settings,
    users: int,
    *,
    as_json: bool = False,
    trend: Mapping[str, Cost] | None = None,
) -> None:
    from rich.console import Console
    from rich.table import Table

    if as_json:
        print_json(
            {
                "week": result.week,
                "fits": result.fits,
                "cost": result.cost.to_dict(),
                "charged_nothing": True,
                "assumed_active_users": users,
                "confidence": settings.confidence,
                "queries": [
                    {
                        "name": q.name,
                        "cost": q.cost.to_dict(),
                        "state": q.state,
                        "expected_half_width": q.half_width,
                        "stored_interval": None if q.interval is None else list(q.interval),
                    }
                    for q in result.queries
                ],
                "pools": [
                    {
                        "pool": p.now.pool,
                        "remaining_now": p.now.remaining,
                        "this_run": p.needed,
                        "remaining_after": p.after,
                        "fits": p.fits,
                    }
                    for p in result.pools
                ],
                "lint": list(result.lint),
                **(
                    {}
                    if trend is None
                    else {"trend_weeks": {w: c.to_dict() for w, c in trend.items()}}
                ),
            }
        )
        return

    out = Console(highlight=False) if Console().is_terminal else Console(width=150)
    level = f"{settings.confidence:.0%}"
    table = Table(title=f"dry run of {result.week}: nothing is charged or written")
    for col in ("query", "cost", "state", f"expected {level} ±", "stored interval"):
        table.add_column(col)
    notes = {
        "released": "stored: free",
        "paid": "paid earlier: taken over, free",
        "failed": "failed after the read: closed",
        "new": "would be charged",
    }
    for q in result.queries:
        table.add_row(
            q.name,
            q.cost.describe(),
            notes.get(q.state, q.state),
            "" if q.half_width is None else f"{q.half_width:.3g}",
            "" if q.interval is None else f"{q.interval[0]:.3g} – {q.interval[1]:.3g}",
        )
    out.print(table)
    pools = Table(title="pools on the plan's path, this week")
    for col in ("pool", "remaining now", "this run", "remaining after", "fits"):
        pools.add_column(col)
    for p in result.pools:
        sym = p.now.symbol
        pools.add_row(
            p.now.pool,
            f"{sym} {p.now.remaining:g}",
            f"{sym} {p.needed:g}",
            f"{sym} {p.after:g}",
            "yes" if p.fits else "NO",
        )
    out.print(pools)
    for finding in result.lint:
        out.print(finding, markup=False)
    verdict = "fits" if result.fits else "does NOT fit (the run would be refused or queued)"
    out.print(
        f"the run would charge {result.cost.describe()} and {verdict}; templates: "
        + (f"{len(result.lint)} lint finding(s)" if result.lint else "lint clean")
        + f". Expected intervals assume {users} active users (a public guess, not the data)."
    )
    if trend is not None:
        out.print(
            f"the demo also releases the trend figures ({', '.join(TREND_QUERIES)}) of the "
            f"7 weeks before, each charged to its own week: {_describe_trend(trend)}."
        )


def _describe_trend(trend: Mapping[str, Cost]) -> str:
    if not trend:
        return "all stored already, nothing to charge"
    costs = {c.describe() for c in trend.values()}
    if len(costs) == 1:
        weeks = list(trend)
        span = weeks[0] if len(weeks) == 1 else f"{weeks[0]}…{weeks[-1]}"
        return f"{span} ({len(weeks)} week(s)), {costs.pop()} each"
    return "; ".join(f"{w} {c.describe()}" for w, c in trend.items())
