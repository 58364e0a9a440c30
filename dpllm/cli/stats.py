"""``dpllm stats``: release the weekly feedback statistics, charged to the ledger.

One plan, one pool tree: ``dpllm stats`` releases the configured plan's queries
(the same bounds, vocabulary, policies, pools and query ids as ``dpllm weekly``),
so a statistic is charged once per week whichever command asks first; it never
creates a pool of its own. Reruns are free: each (query, dataset, week) is
released once and then served from the ledger's release cache.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from dpllm.config import Settings
    from dpllm.release import Release

__all__ = ["register"]

_DUCKDB_SUFFIXES = (".duckdb", ".parquet", ".csv", ".tsv")


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


def _settings(
    config: Path | None, data: str | None, ledger_path: str | None, table: str | None
) -> Settings:
    """The configuration ``dpllm weekly`` uses, with ``--data``/``--ledger``/``--table`` over it.

    Without ``--config`` and without ``./dpllm.toml``, the built-in example
    configuration (its pools and plan) rooted at the working directory.
    """
    from dpllm.cli.weekly import example_config
    from dpllm.config import Settings

    if config is not None or Path("dpllm.toml").is_file():
        settings = Settings.load(config or Path("dpllm.toml"))
    else:
        settings = Settings.parse(example_config(), base_dir=str(Path.cwd()))
    settings = settings.from_env(os.environ)
    d = settings.data
    if data is not None:
        if data.startswith(("postgresql://", "postgres://")):
            d = dataclasses.replace(d, source="postgres", dsn=data)
        else:
            lower = data.lower()
            source = "duckdb" if lower.endswith(_DUCKDB_SUFFIXES) else "sqlite"
            d = dataclasses.replace(d, source=source, path=str(Path(data).resolve()))
    if table is not None:
        d = dataclasses.replace(d, table=table)
    settings = dataclasses.replace(settings, data=d)
    if ledger_path is not None:
        settings = dataclasses.replace(settings, ledger=str(Path(ledger_path).resolve()))
    return settings


def stats(
    week: Annotated[
        str, typer.Option("--week", help="ISO week, written exactly like 2026-W47 (complete).")
    ],
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="The dpllm.toml (default: ./dpllm.toml if present)."),
    ] = None,
    data: Annotated[
        str | None,
        typer.Option(
            "--data",
            help="Override [data]: SQLite/DuckDB/Parquet/CSV file, or a postgresql:// DSN.",
        ),
    ] = None,
    ledger_path: Annotated[
        str | None,
        typer.Option("--ledger", help="Override [ledger] url: the ledger database file."),
    ] = None,
    query: Annotated[
        list[str] | None, typer.Option("--query", help="Only this query (repeatable).")
    ] = None,
    table: Annotated[str | None, typer.Option("--table", help="Override [data] table.")] = None,
    courses: Annotated[
        str, typer.Option("--courses", help="Public course list (comma-separated).")
    ] = "",
    allow_incomplete: Annotated[
        bool,
        typer.Option(
            "--allow-incomplete", help="Also release the current, unfinished week (marked so)."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON releases.")] = False,
) -> None:
    """Release the weekly statistics of WEEK with intervals and costs.

    The statistics are the configured plan's (the same queries, bounds, pools and
    query ids as ``dpllm weekly``), charged to the plan's pool: a statistic the
    weekly job already released for WEEK is served from the cache, free.
    """
    from dpllm.cli.weekly import parse_window_option, utc_today
    from dpllm.data.stats import rating_shares
    from dpllm.errors import DPLLMError, WindowNotReady
    from dpllm.weekly.job import WeeklyJob
    from dpllm.weekly.wiring import plan_pool

    window = parse_window_option(week)
    assert window is not None
    today = utc_today()
    try:
        window.require_ready(today, allow_incomplete=allow_incomplete)
    except WindowNotReady as exc:
        raise typer.BadParameter(str(exc), param_hint="--week") from None
    course_list = tuple(c.strip() for c in courses.split(",") if c.strip())
    try:
        settings = _settings(config, data, ledger_path, table)
        if course_list:
            plan = list(settings.plan)
            if "course_feedback" not in {q.name for q in plan}:
                from dpllm.config import PlanQuery
                from dpllm.data.stats import COURSE_FEEDBACK_EPSILON

                plan.append(PlanQuery("course_feedback", COURSE_FEEDBACK_EPSILON))
            settings = dataclasses.replace(settings, plan=tuple(plan))
        with WeeklyJob(
            settings, courses=course_list, today=today, allow_incomplete=allow_incomplete
        ) as job:
            wanted = query or list(job.plan)
            unknown = [q for q in wanted if q not in job.plan]
            if unknown:
                raise typer.BadParameter(
                    f"unknown query {', '.join(unknown)}; the plan has {', '.join(job.plan)}",
                    param_hint="--query",
                )
            releases = job.release(window, {q: job.plan[q] for q in wanted})
            pool = plan_pool(settings).name
            balance = job.ledger.balance(pool, window)
            source = str(getattr(job.engine, "identity", settings.data.dataset_id))
    except DPLLMError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    derived: dict[str, Release] = {}
    if "rating_histogram" in releases:
        derived = rating_shares(releases["rating_histogram"])
    if as_json:
        payload = {n: r.to_dict() for n, r in {**releases, **derived}.items()}
        payload["_budget"] = {"pool": pool, "window": window.key, "spent_micro": balance.spent}
        payload["_data"] = {"dataset_id": settings.data.dataset_id, "source": source}
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"DP feedback statistics, {window} (privacy unit: user)")
    level = f"{settings.confidence * 100:g}% interval"
    for col in ("query", "component", "estimate", level, "mechanism", "cost"):
        t.add_column(col)
    for name, rel in {**releases, **derived}.items():
        for row in _rows(name, rel, free=name in derived):
            t.add_row(*row)
    console = Console() if Console().is_terminal else Console(width=140)
    console.print(t)
    spent = balance.spent / 1e6
    cap = balance.effective_cap / 1e6
    console.print(
        f"pool {pool!r}, window {window}: ε spent {spent:g} of {cap:g} "
        "(shares are post-processing of the histogram: free; reruns are served from the cache)"
    )
    console.print(
        f"data: {settings.data.dataset_id} at {source} (other data is another query, charged "
        "anew). Each figure estimates a bounded statistic:",
        markup=False,
    )
    for name, rel in {**releases, **derived}.items():
        if rel.estimand:
            console.print(f"  {name}: {rel.estimand}", markup=False)


def register(app: typer.Typer) -> None:
    """Add ``stats`` to the ``dpllm`` app."""
    app.command("stats")(stats)
