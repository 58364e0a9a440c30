"""``dpllm stats``: release the weekly feedback statistics, charged to the ledger.

It reads the same configuration as every command (``-c``, ``./dpllm.toml``,
``$DPLLM_CONFIG``; see :mod:`dpllm.cli._common`): the same data, plan (ε and
bounds per query), pools, dataset id and ledger as ``dpllm weekly``, so a figure
``stats`` released is the one the weekly job finds in the cache, and the other way
round. ``--data``, ``--table``, ``--courses``, ``--pool`` and ``--ledger`` override
the configuration (``--data`` names the dataset by its absolute path).

Reruns are free: each (query, dataset, week) is released once and then served
from the ledger's release cache. ``--weeks 2026-W01..2026-W52`` (or ``--since``)
releases many weeks from one read of the data, each week its own releases and
its own charges.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dpllm.cli._common import (
    ConfigOption,
    ExitCode,
    JsonOption,
    emit,
    exit_code_for,
    fail,
    load_settings,
    print_json,
    status,
)

if TYPE_CHECKING:
    from dpllm.config import Settings
    from dpllm.release import Release

__all__ = ["parse_weeks", "register"]


def parse_weeks(spec: str) -> list[str]:
    """``"2026-W01..2026-W52"`` → every ISO week from the first to the last, inclusive.

    Raises:
        InvalidWindow: a malformed week. DataError: a range that runs backwards or
            spans more than 520 weeks.
    """
    from dpllm.errors import DataError
    from dpllm.windows import Window

    first, sep, last = spec.partition("..")
    if not sep:
        raise DataError(
            f"--weeks takes a range FIRST..LAST such as 2026-W01..2026-W52, got {spec!r}"
        )
    start, end = Window.parse(first), Window.parse(last)
    count = (end.start - start.start).days // 7 + 1
    if count < 1:
        raise DataError(f"the range {spec!r} ends before it starts")
    if count > 520:
        raise DataError(f"the range {spec!r} spans {count} weeks; at most 520 at once")
    return [w.key for w in end.previous(count)]


def _with_data(settings: Settings, data: str) -> Settings:
    """``settings`` reading ``data``: a postgresql:// DSN, a DuckDB/Parquet/CSV or SQLite file."""
    if data.startswith(("postgresql://", "postgres://")):
        d = dataclasses.replace(settings.data, source="postgres", dsn=data, dataset_id=data)
    else:
        source = (
            "duckdb" if data.lower().endswith((".duckdb", ".parquet", ".csv", ".tsv")) else "sqlite"
        )
        path = os.path.abspath(data)
        d = dataclasses.replace(settings.data, source=source, path=path, dataset_id=path)
    return dataclasses.replace(settings, data=d)


def _rows(name: str, rel: Release, *, free: bool) -> list[tuple[str, str, str, str, str, str]]:
    from dpllm.rounding import format_interval, format_number, granularity

    out: list[tuple[str, str, str, str, str, str]] = []
    parts = list(rel.components()) if rel.is_vector else [("", rel)]
    for label, part in parts:
        lo, hi = part.interval
        step = granularity((hi - lo) / 2.0, integer=part.kind == "count")
        if part.kind == "rank":
            estimate = f"#{int(part.value)}"
            interval = "selection only"
        elif part.small:
            estimate = f"< {part.small_threshold:g}"
            interval = "small"
        else:
            estimate = format_number(part.value, step)
            interval = format_interval(lo, hi, step)  # outwards: never narrower
        cost = rel.cost.describe() + (f", δ = {rel.delta:g}" if rel.delta else "")
        if free:
            cost = "free (post-processing)"
        out.append((name if not out else "", label, estimate, interval, rel.mechanism, cost))
    return out


def stats(
    week: Annotated[
        str | None,
        typer.Option("--week", help="ISO week, written exactly like 2026-W47 (complete)."),
    ] = None,
    weeks: Annotated[
        str | None,
        typer.Option(
            "--weeks",
            help="A range of ISO weeks, e.g. 2026-W01..2026-W52: one read for all, "
            "each week charged to its own window.",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Every week from this one to the last complete week."),
    ] = None,
    config: ConfigOption = None,
    data: Annotated[
        str | None,
        typer.Option(
            "--data",
            help="SQLite/DuckDB/Parquet/CSV file, or a postgresql:// DSN (default: [data]).",
        ),
    ] = None,
    ledger: Annotated[
        str | None,
        typer.Option(
            "--ledger",
            help="Ledger URL: a file path, sqlite:///path or postgresql://user@host/db "
            "(default: [ledger] url, or $DPLLM_LEDGER).",
        ),
    ] = None,
    query: Annotated[
        list[str] | None, typer.Option("--query", help="Only this query (repeatable).")
    ] = None,
    pool: Annotated[
        str | None, typer.Option("--pool", help="The pool to charge (default: [plan] pool).")
    ] = None,
    table: Annotated[
        str | None, typer.Option("--table", help="The feedback table (default: [data] table).")
    ] = None,
    courses: Annotated[
        str | None, typer.Option("--courses", help="Public course list (comma-separated).")
    ] = None,
    allow_incomplete: Annotated[
        bool,
        typer.Option(
            "--allow-incomplete", help="Also release the current, unfinished week (marked so)."
        ),
    ] = False,
    as_json: JsonOption = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Open the data and the ledger and print each query's cost, expected "
            "interval and the pools' balance after the run; spend nothing.",
        ),
    ] = False,
) -> None:
    """Release the weekly statistics of WEEK (or of many weeks) with intervals and costs.

    The statistics are the configured plan's (the same queries, bounds, pools and
    query ids as ``dpllm weekly``), charged to the plan's pool: a statistic the
    weekly job already released for WEEK is served from the cache, free.

    With --json: a releases document (schema dpllm.releases/1, the format
    dpllm guard check -r reads), with the pool's budget under "budget".
    """
    from dpllm.cli.weekly import parse_window_option, utc_today
    from dpllm.config import PlanQuery
    from dpllm.data.stats import COURSE_FEEDBACK_EPSILON, rating_shares
    from dpllm.errors import DataError, DPLLMError, InvalidWindow, WindowNotReady
    from dpllm.release import releases_document
    from dpllm.weekly.job import WeeklyJob
    from dpllm.windows import Window

    if sum(x is not None for x in (week, weeks, since)) != 1:
        raise typer.BadParameter("give one of --week, --weeks or --since", param_hint="--week")
    if dry_run and week is None:
        raise typer.BadParameter(
            "--dry-run prices one week: give --week (or run dpllm backfill, which shows the "
            "cost of many weeks and asks before spending)",
            param_hint="--dry-run",
        )
    today = utc_today()
    wanted_weeks: list[str] = []
    window = parse_window_option(week)
    try:
        if window is not None:
            window.require_ready(today, allow_incomplete=allow_incomplete)
        elif weeks is not None:
            wanted_weeks = parse_weeks(weeks)
        else:
            from dpllm.cli.weekly import last_complete_week

            wanted_weeks = parse_weeks(f"{since}..{last_complete_week(today)}")
        for w in wanted_weeks:  # every week complete (or opted in) before anything opens
            Window.parse(w).require_ready(today, allow_incomplete=allow_incomplete)
    except (WindowNotReady, InvalidWindow, DataError) as exc:
        raise typer.BadParameter(
            str(exc), param_hint="--weeks" if week is None else "--week"
        ) from None
    try:
        settings = load_settings(config, ledger=ledger)
        if data is not None:
            settings = _with_data(settings, data)
        if table is not None:
            settings = dataclasses.replace(
                settings, data=dataclasses.replace(settings.data, table=table)
            )
        course_list = settings.data.courses
        if courses is not None:
            course_list = tuple(c.strip() for c in courses.split(",") if c.strip())
            settings = dataclasses.replace(
                settings, data=dataclasses.replace(settings.data, courses=course_list)
            )
        names = [q.name for q in settings.plan]
        if course_list and "course_feedback" not in names:
            plan = (*settings.plan, PlanQuery("course_feedback", COURSE_FEEDBACK_EPSILON))
            settings = dataclasses.replace(settings, plan=plan)
            names.append("course_feedback")
        if pool is not None:
            settings = dataclasses.replace(settings, plan_pool=pool)
        salt = os.environ.get("DPLLM_SALT", "")
        if salt and not settings.bounds.salt:  # the key of the per-user choices (a secret)
            settings = dataclasses.replace(
                settings, bounds=dataclasses.replace(settings.bounds, salt=salt)
            )
    except DPLLMError as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    wanted = query or names
    unknown = [q for q in wanted if q not in names]
    if unknown:
        raise typer.BadParameter(
            f"unknown query {', '.join(unknown)}; the plan has {', '.join(names)}",
            param_hint="--query",
        )
    try:
        with WeeklyJob(
            settings, courses=course_list, today=today, allow_incomplete=allow_incomplete
        ) as job:
            job.plan = {n: job.plan[n] for n in wanted}
            if window is None:  # many weeks: one read, each week its own charge
                with status(f"computing DP statistics for {len(wanted_weeks)} weeks"):
                    by_week = job.release_weeks(wanted_weeks)
                balances = {w: job.ledger.balance(settings.plan_pool, w) for w in by_week}
                _print_many(
                    by_week,
                    balances,
                    settings.plan_pool,
                    as_json=as_json,
                    confidence=settings.confidence,
                )
                return
            if dry_run:
                from dpllm.cli._dryrun import dry_run_of, print_dry_run

                result, users = dry_run_of(job, window)
                print_dry_run(result, settings, users, as_json=as_json)
                if not result.fits:
                    raise typer.Exit(ExitCode.BUDGET)
                return
            with status(f"computing DP statistics for {window} (cached releases are free)"):
                releases = job.release(window)
            balance = job.ledger.balance(settings.plan_pool, window)
            source = str(getattr(job.engine, "identity", settings.data.dataset_id))
    except DPLLMError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None
    pool = settings.plan_pool
    derived: dict[str, Release] = {}
    if "rating_histogram" in releases:
        derived = rating_shares(releases["rating_histogram"])
    if as_json:
        payload = releases_document(releases, derived, window=window.key)
        payload["budget"] = {
            "pool": pool,
            "window": window.key,
            "spent_micro": balance.spent,
            "window_cap_micro": balance.effective_cap,
        }
        payload["data"] = {"dataset_id": settings.data.dataset_id, "source": source}
        print_json(payload)
        return
    from rich.table import Table

    t = Table(title=f"DP feedback statistics, {window} (privacy unit: user)")
    level = f"{settings.confidence * 100:g}% interval"
    for col in ("query", "component", "estimate", level, "mechanism", "cost"):
        t.add_column(col)
    for name, rel in {**releases, **derived}.items():
        for row in _rows(name, rel, free=name in derived):
            t.add_row(*row)
    emit(t)
    spent = balance.spent / 1e6
    cap = balance.effective_cap / 1e6
    typer.echo(
        f"pool {pool!r}, window {window}: ε spent {spent:g} of {cap:g} "
        "(shares are post-processing of the histogram: free; reruns are served from the cache)"
    )
    typer.echo(
        f"data: {settings.data.dataset_id} at {source} (other data is another query, charged "
        "anew). Each figure estimates a bounded statistic:"
    )
    for name, rel in {**releases, **derived}.items():
        if rel.estimand:
            typer.echo(f"  {name}: {rel.estimand}")


def _print_many(
    by_week: dict[str, dict[str, Release]],
    balances: dict[str, Any],
    pool: str,
    *,
    as_json: bool,
    confidence: float = 0.95,
) -> None:
    """Many weeks: one JSON object per week, or one table with a row per week and query."""
    if as_json:
        from dpllm.release import releases_document

        print_json(
            {
                "schema": "dpllm.releases-by-week/1",
                "weeks": {w: releases_document(rels, {}, window=w) for w, rels in by_week.items()},
                "budget": {
                    "pool": pool,
                    "spent_micro": {w: b.spent for w, b in balances.items()},
                },
            }
        )
        return
    from rich.table import Table

    first, last = next(iter(by_week)), list(by_week)[-1]
    t = Table(title=f"DP feedback statistics, {first} to {last} (privacy unit: user)")
    level = f"{confidence * 100:g}% interval"
    for col in ("week", "query", "component", "estimate", level, "mechanism", "cost"):
        t.add_column(col)
    for w, rels in by_week.items():
        for i, (name, rel) in enumerate(rels.items()):
            for row in _rows(name, rel, free=False):
                t.add_row(w if i == 0 and row[0] else "", *row)
    emit(t)
    spent = {b.spent for b in balances.values()}
    each = f"ε spent {max(spent) / 1e6:g}" if len(spent) == 1 else "ε spent varies"
    typer.echo(
        f"pool {pool!r}: {len(by_week)} weeks, {each} per week, each week charged to its own "
        "window (ISO weeks are disjoint: the costs do not add up across weeks, the pool's "
        "lifetime cap bounds them); reruns are served from the cache"
    )


def register(app: typer.Typer) -> None:
    """Add ``stats`` to the ``dpllm`` app."""
    app.command("stats")(stats)
