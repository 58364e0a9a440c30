"""``dpllm stats``: release the weekly feedback statistics, charged to the ledger.

Reruns are free: each (query, dataset, week) is released once and then served
from the ledger's release cache.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from dpllm.cli._common import JsonOption, emit, exit_code_for, fail, print_json, status

if TYPE_CHECKING:
    from dpllm.data.engines import Engine
    from dpllm.release import Release

__all__ = ["register"]

DEFAULT_POOL_CAP = 2.0
"""ε per window of the pool ``dpllm stats`` creates when it does not exist yet."""


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
    week: Annotated[str, typer.Option("--week", help="ISO week, e.g. 2026-W47.")],
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
    as_json: JsonOption = False,
) -> None:
    """Release the weekly statistics of WEEK with intervals and costs.

    With --json: a releases document (schema dpllm.releases/1, the format
    dpllm guard check -r reads), with the pool's budget under "budget".
    """
    from dpllm.data.sql import ColumnMap
    from dpllm.data.stats import StatsRunner, default_catalogue, rating_shares
    from dpllm.errors import DPLLMError
    from dpllm.ledger.base import PoolSpec
    from dpllm.ledger.sqlite import SQLiteLedger
    from dpllm.release import Measure, releases_document, to_micro

    try:
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
        with status(f"computing DP statistics for {week} (cached releases are free)"):
            releases = runner.release_all({q: catalogue[q] for q in wanted}, week)
        balance = ledger.balance(pool, week)
    except DPLLMError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None
    derived: dict[str, Release] = {}
    if "rating_histogram" in releases:
        derived = rating_shares(releases["rating_histogram"])
    if as_json:
        payload = releases_document(releases, derived, window=week)
        payload["budget"] = {
            "pool": pool,
            "window": week,
            "spent_micro": balance.spent,
            "window_cap_micro": balance.window_cap,
        }
        print_json(payload)
        return
    from rich.table import Table

    t = Table(title=f"DP feedback statistics, {week} (privacy unit: user)")
    for col in ("query", "component", "estimate", "95% interval", "mechanism", "cost"):
        t.add_column(col)
    for name, rel in {**releases, **derived}.items():
        for row in _rows(name, rel, free=name in derived):
            t.add_row(*row)
    spent = balance.spent / 1e6
    cap = balance.window_cap / 1e6
    emit(t)
    typer.echo(
        f"pool {pool!r}, window {week}: ε spent {spent:g} of {cap:g} "
        "(shares are post-processing of the histogram: free; reruns are served from the cache)"
    )


def register(app: typer.Typer) -> None:
    """Add ``stats`` to the ``dpllm`` app."""
    app.command("stats")(stats)
