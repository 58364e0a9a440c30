"""``dpllm backfill``: release the weekly plan for past weeks, from one read of the data.

Shows what the run would charge — per week and in total, against each pool's
weekly and lifetime caps — and asks before spending (``--yes`` skips the
question). Each (query, week) is then its own release, charged to its own week
and cached, exactly as ``dpllm weekly`` would have charged it; weeks already
released are free and not read again. Exit codes: the table every command uses (``docs/cli-conventions.md``).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Annotated

import typer

from dpllm.cli._common import (
    ConfigOption,
    JsonOption,
    LedgerOverride,
    exit_code_for,
    fail,
    info,
    load_settings,
    print_json,
)
from dpllm.windows import Window

if TYPE_CHECKING:
    from dpllm.weekly.job import WeeklyJob

__all__ = ["register"]


def _weeks(weeks: str | None, last: int | None) -> list[str]:
    from dpllm.cli.stats import parse_weeks
    from dpllm.cli.weekly import last_complete_week
    from dpllm.windows import previous_weeks

    if (weeks is None) == (last is None):
        raise typer.BadParameter("give --weeks FIRST..LAST or --last N", param_hint="--weeks")
    today = dt.datetime.now(dt.UTC).date()
    if weeks is not None:
        wanted = parse_weeks(weeks)
    else:
        assert last is not None
        if not 1 <= last <= 520:
            raise typer.BadParameter("must be 1 to 520", param_hint="--last")
        wanted = previous_weeks(last_complete_week(today), last)
    for w in wanted:  # complete weeks only, refused before anything is opened or asked
        Window.parse(w).require_ready(today)
    return wanted


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
        todo = job.to_pay(Window.parse(week))
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
    config: ConfigOption = None,
    weeks: Annotated[
        str | None, typer.Option("--weeks", help="ISO weeks FIRST..LAST, e.g. 2026-W01..2026-W40.")
    ] = None,
    last: Annotated[int | None, typer.Option("--last", help="The last N complete weeks.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before spending.")] = False,
    ledger: LedgerOverride = None,
    as_json: JsonOption = False,
) -> None:
    """Release the weekly plan for past weeks in one read; shows the cost and asks first."""
    from dpllm.errors import DataError, DPLLMError, InvalidWindow
    from dpllm.weekly.job import WeeklyJob

    try:
        wanted = _weeks(weeks, last)
    except (InvalidWindow, DataError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--weeks") from None
    try:
        settings = load_settings(config, ledger=ledger)
        with WeeklyJob(settings) as job:
            job.ensure_pools()
            lines, fresh = _plan_lines(job, wanted)
            if not fresh:
                if as_json:
                    print_json({"weeks": wanted, "released": 0, "charged": False})
                else:
                    typer.echo(
                        f"{wanted[0]}..{wanted[-1]}: every release is cached; nothing to spend."
                    )
                return
            if not as_json or not yes:
                typer.echo(f"backfill {wanted[0]}..{wanted[-1]} would charge:", err=as_json)
                for line in lines:
                    typer.echo(line, err=as_json)
            if not yes and not typer.confirm("Spend this budget?", default=False, err=as_json):
                info("nothing was spent.")
                raise typer.Exit(0)
            released = job.release_weeks(wanted)
    except DPLLMError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None
    count = sum(len(r) for r in released.values())
    if as_json:
        print_json({"weeks": list(released), "released": count, "charged": True})
        return
    typer.echo(
        f"released {count} figure(s) for {len(released)} week(s) from one read of the data; "
        "reruns are free."
    )


def register(app: typer.Typer) -> None:
    """Add ``backfill`` to the ``dpllm`` app."""
    app.command("backfill")(backfill)
