"""``dpllm backfill``: release the weekly plan for past weeks, from one read of the data.

Shows what the run would charge — per week and in total, against each pool's
weekly and lifetime caps — and asks before spending (``--yes`` skips the
question). Each (query, week) is then its own release, charged to its own week
and cached, exactly as ``dpllm weekly`` would have charged it; weeks already
released are free and not read again. Exit codes as ``dpllm weekly``.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from dpllm.weekly.job import WeeklyJob

__all__ = ["register"]


def _weeks(weeks: str | None, last: int | None) -> list[str]:
    from dpllm.cli.stats import parse_weeks
    from dpllm.cli.weekly import last_complete_week
    from dpllm.windows import previous_weeks

    if (weeks is None) == (last is None):
        raise typer.BadParameter("give --weeks FIRST..LAST or --last N", param_hint="--weeks")
    if weeks is not None:
        return parse_weeks(weeks)
    assert last is not None
    if not 1 <= last <= 520:
        raise typer.BadParameter("must be 1 to 520", param_hint="--last")
    return previous_weeks(last_complete_week(dt.datetime.now(dt.UTC).date()), last)


def _plan_lines(job: WeeklyJob, weeks: list[str]) -> tuple[list[str], int]:
    """One line per week with something to release, and the number of new releases."""
    from dpllm.release import MICRO
    from dpllm.weekly.wiring import pool_path

    lines: list[str] = []
    fresh = 0
    total = 0
    measure = pool_path(job.settings)[0].measure
    sym = "ε" if measure.value == "pure" else "ρ"
    for week in weeks:
        todo = job.uncached(week)
        if not todo:
            continue
        fresh += len(todo)
        cost = sum(q.cost.to_measure(measure).micro for q in todo.values())
        total += cost
        lines.append(f"  {week}: {', '.join(todo)} — {sym} {cost / MICRO:g}")
    if fresh:
        lines.append(
            f"  in all: {fresh} release(s), {sym} {total / MICRO:g} summed over weeks; each week "
            "is charged to its own window (ISO weeks are disjoint, so per week a user loses at "
            "most that week's share; the pool's lifetime cap bounds the sum)"
        )
    for spec in pool_path(job.settings):
        if spec.lifetime_cap is not None:
            b = job.ledger.balance(spec.name, weeks[-1])
            left = (spec.lifetime_cap - b.lifetime_spent) / MICRO
            lines.append(f"  pool {spec.name!r}: lifetime {sym} {left:g} left before this run")
    return lines, fresh


def backfill(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="The dpllm.toml (default: ./dpllm.toml)."),
    ] = None,
    weeks: Annotated[
        str | None, typer.Option("--weeks", help="ISO weeks FIRST..LAST, e.g. 2026-W01..2026-W40.")
    ] = None,
    last: Annotated[int | None, typer.Option("--last", help="The last N complete weeks.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before spending.")] = False,
) -> None:
    """Release the weekly plan for past weeks in one read; shows the cost and asks first."""
    from rich.console import Console

    from dpllm.cli.weekly import EXIT_BUDGET, EXIT_CONFIG, EXIT_DATA, EXIT_ERROR, _fail
    from dpllm.config import Settings
    from dpllm.errors import BudgetError, ConfigError, DataError, DPLLMError
    from dpllm.weekly.job import WeeklyJob

    console = Console(stderr=True)
    wanted = _weeks(weeks, last)
    try:
        settings = Settings.load(config or Path("dpllm.toml")).from_env(os.environ)
    except ConfigError as exc:
        raise _fail(console, EXIT_CONFIG, str(exc)) from None
    try:
        with WeeklyJob(settings) as job:
            job.ensure_pools()
            lines, fresh = _plan_lines(job, wanted)
            out = Console(highlight=False)
            if not fresh:
                out.print(f"{wanted[0]}..{wanted[-1]}: every release is cached; nothing to spend.")
                return
            out.print(f"backfill {wanted[0]}..{wanted[-1]} would charge:", markup=False)
            for line in lines:
                out.print(line, markup=False)
            if not yes and not typer.confirm("Spend this budget?", default=False):
                out.print("nothing was spent.")
                raise typer.Exit(0)
            released = job.release_weeks(wanted)
            out.print(
                f"released {sum(len(r) for r in released.values())} figure(s) for "
                f"{len(released)} week(s) from one read of the data; reruns are free.",
                markup=False,
            )
    except ConfigError as exc:
        raise _fail(console, EXIT_CONFIG, str(exc)) from None
    except BudgetError as exc:
        raise _fail(console, EXIT_BUDGET, f"privacy budget: {exc}") from None
    except DataError as exc:
        raise _fail(console, EXIT_DATA, str(exc)) from None
    except DPLLMError as exc:
        raise _fail(console, EXIT_ERROR, str(exc)) from None


def register(app: typer.Typer) -> None:
    """Add ``backfill`` to the ``dpllm`` app."""
    app.command("backfill")(backfill)
