"""``dpllm stats``: release the weekly feedback statistics, charged to the ledger.

Reruns are free: each (query, dataset, week) is released once and then served
from the ledger's release cache. ``--weeks 2026-W01..2026-W52`` (or ``--since``)
releases many weeks from one read of the data, each week its own releases and
its own charges.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from dpllm.data.engines import Engine
    from dpllm.release import Release

__all__ = ["parse_weeks", "register"]

DEFAULT_POOL_CAP = 2.0
"""ε per window of the pool ``dpllm stats`` creates when it does not exist yet."""


def parse_weeks(spec: str) -> list[str]:
    """``"2026-W01..2026-W52"`` → every ISO week from the first to the last, inclusive.

    Raises:
        DataError: a malformed week, or a range that runs backwards or spans more
            than 520 weeks.
    """
    import datetime as dt

    from dpllm.errors import DataError
    from dpllm.windows import iso_week, week_bounds

    first, sep, last = spec.partition("..")
    if not sep:
        raise DataError(
            f"--weeks takes a range FIRST..LAST such as 2026-W01..2026-W52, got {spec!r}"
        )
    start, _ = week_bounds(first.strip())
    end, _ = week_bounds(last.strip())
    count = (end - start).days // 7 + 1
    if count < 1:
        raise DataError(f"the range {spec!r} ends before it starts")
    if count > 520:
        raise DataError(f"the range {spec!r} spans {count} weeks; at most 520 at once")
    return [iso_week(start + dt.timedelta(weeks=i)) for i in range(count)]


def _engine(data: str) -> Engine:
    from dpllm.data.engines import DuckDBEngine, PostgresEngine, SQLiteEngine

    if data.startswith(("postgresql://", "postgres://")):
        return PostgresEngine(data)
    lower = data.lower()
    if lower.endswith((".duckdb", ".parquet", ".csv", ".tsv")):
        return DuckDBEngine(data)
    return SQLiteEngine(data)


def _rows(name: str, rel: Release, *, free: bool) -> list[tuple[str, str, str, str, str, str]]:
    from dpllm.rounding import format_number, granularity

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
            interval = f"{format_number(lo, step)} – {format_number(hi, step)}"
        cost = rel.cost.describe() + (f", δ = {rel.delta:g}" if rel.delta else "")
        if free:
            cost = "free (post-processing)"
        out.append((name if not out else "", label, estimate, interval, rel.mechanism, cost))
    return out


def stats(
    week: Annotated[str | None, typer.Option("--week", help="ISO week, e.g. 2026-W47.")] = None,
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
    data: Annotated[
        str,
        typer.Option("--data", help="SQLite/DuckDB/Parquet/CSV file, or a postgresql:// DSN."),
    ] = "demo.db",
    ledger_path: Annotated[
        str, typer.Option("--ledger", envvar="DPLLM_LEDGER", help="The ledger database file.")
    ] = ".dpllm/ledger.db",
    query: Annotated[
        list[str] | None, typer.Option("--query", help="Only this query (repeatable).")
    ] = None,
    pool: Annotated[str, typer.Option("--pool", help="The ledger pool to charge.")] = "stats",
    table: Annotated[str, typer.Option("--table", help="The feedback table.")] = "feedback",
    courses: Annotated[
        str, typer.Option("--courses", help="Public course list (comma-separated).")
    ] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON releases.")] = False,
) -> None:
    """Release the weekly statistics of WEEK (or of many weeks) with intervals and costs."""
    import datetime as dt

    from dpllm.data.sql import ColumnMap
    from dpllm.data.stats import StatsRunner, default_catalogue, rating_shares
    from dpllm.errors import DPLLMError
    from dpllm.ledger.base import PoolSpec
    from dpllm.ledger.sqlite import SQLiteLedger
    from dpllm.release import Measure, to_micro

    if sum(x is not None for x in (week, weeks, since)) != 1:
        raise typer.BadParameter("give one of --week, --weeks or --since", param_hint="--week")
    try:
        if weeks is not None:
            wanted_weeks = parse_weeks(weeks)
        elif since is not None:
            from dpllm.cli.weekly import last_complete_week

            wanted_weeks = parse_weeks(
                f"{since}..{last_complete_week(dt.datetime.now(dt.UTC).date())}"
            )
        else:
            assert week is not None
            wanted_weeks = [week]
        course_list = tuple(c.strip() for c in courses.split(",") if c.strip())
        columns = ColumnMap(table=table, course="course" if course_list else None)
        catalogue = default_catalogue(courses=course_list)
        wanted = query or list(catalogue)
        unknown = [q for q in wanted if q not in catalogue]
        if unknown:
            raise typer.BadParameter(
                f"unknown query {', '.join(unknown)}; choose from {', '.join(catalogue)}"
            )
        engine = _engine(data)
        ledger = SQLiteLedger(ledger_path)
        if pool not in {p.name for p in ledger.pools()}:
            ledger.ensure_pool(PoolSpec(pool, Measure.PURE, window_cap=to_micro(DEFAULT_POOL_CAP)))
        salt_hex = os.environ.get("DPLLM_SALT")
        runner = StatsRunner(
            engine,
            ledger,
            dataset_id=os.path.abspath(data) if "://" not in data else data,
            pool=pool,
            columns=columns,
            salt=bytes.fromhex(salt_hex) if salt_hex else None,
        )
        chosen = {q: catalogue[q] for q in wanted}
        if week is not None:
            releases = runner.release_all(chosen, week)
            by_week = {week: releases}
        else:
            by_week = runner.release_many(chosen, wanted_weeks)
        balances = {w: ledger.balance(pool, w) for w in by_week}
    except DPLLMError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=1) from None
    if week is None:
        _print_many(by_week, balances, pool, as_json=as_json)
        return
    balance = balances[week]
    derived: dict[str, Release] = {}
    if "rating_histogram" in releases:
        derived = rating_shares(releases["rating_histogram"])
    if as_json:
        payload = {n: r.to_dict() for n, r in {**releases, **derived}.items()}
        payload["_budget"] = {"pool": pool, "window": week, "spent_micro": balance.spent}
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"DP feedback statistics, {week} (privacy unit: user)")
    for col in ("query", "component", "estimate", "95% interval", "mechanism", "cost"):
        t.add_column(col)
    for name, rel in {**releases, **derived}.items():
        for row in _rows(name, rel, free=name in derived):
            t.add_row(*row)
    console = Console() if Console().is_terminal else Console(width=140)
    console.print(t)
    spent = balance.spent / 1e6
    cap = balance.window_cap / 1e6
    console.print(
        f"pool {pool!r}, window {week}: ε spent {spent:g} of {cap:g} "
        "(shares are post-processing of the histogram: free; reruns are served from the cache)"
    )


def _print_many(
    by_week: dict[str, dict[str, Release]],
    balances: dict[str, Any],
    pool: str,
    *,
    as_json: bool,
) -> None:
    """Many weeks: one JSON object per week, or one table with a row per week and query."""
    if as_json:
        payload: dict[str, object] = {
            w: {n: r.to_dict() for n, r in rels.items()} for w, rels in by_week.items()
        }
        payload["_budget"] = {
            "pool": pool,
            "spent_micro": {w: b.spent for w, b in balances.items()},
        }
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    first, last = next(iter(by_week)), list(by_week)[-1]
    t = Table(title=f"DP feedback statistics, {first} to {last} (privacy unit: user)")
    for col in ("week", "query", "component", "estimate", "95% interval", "mechanism", "cost"):
        t.add_column(col)
    for w, rels in by_week.items():
        for i, (name, rel) in enumerate(rels.items()):
            for row in _rows(name, rel, free=False):
                t.add_row(w if i == 0 and row[0] else "", *row)
    console = Console() if Console().is_terminal else Console(width=150)
    console.print(t)
    spent = {b.spent for b in balances.values()}
    each = f"ε spent {max(spent) / 1e6:g}" if len(spent) == 1 else "ε spent varies"
    console.print(
        f"pool {pool!r}: {len(by_week)} weeks, {each} per week, each week charged to its own "
        "window (ISO weeks are disjoint: the costs do not add up across weeks, the pool's "
        "lifetime cap bounds them); reruns are served from the cache"
    )


def register(app: typer.Typer) -> None:
    """Add ``stats`` to the ``dpllm`` app."""
    app.command("stats")(stats)
