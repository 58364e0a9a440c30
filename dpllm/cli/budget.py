"""``dpllm budget``: read the privacy-budget ledger and decide on queued requests.

Commands: ``show`` (balances per pool and window, and the worst-case loss of a
user present in every window), ``history [--json]`` (the audit log),
``pending``, ``approve ID [--from POOL]`` and ``deny ID``. Every command reads the
ledger the configuration names (``-c/--config``, else ``./dpllm.toml``, else
``$DPLLM_CONFIG``; ``$DPLLM_LEDGER`` overrides it) or ``--ledger URL``: an SQLite
file or ``postgresql://…`` (see :mod:`dpllm.cli._common`).
"""

from __future__ import annotations

import functools
from dataclasses import asdict
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from dpllm.cli._common import (
    ConfigOption,
    JsonOption,
    emit,
    exit_code_for,
    fail,
    load_settings,
    open_ledger,
    print_json,
)
from dpllm.errors import DPLLMError

if TYPE_CHECKING:
    from dpllm.ledger.base import Balance, PoolSpec
    from dpllm.ledger.factory import ManagedLedger

__all__ = ["DEFAULT_LEDGER_PATH", "register"]

DEFAULT_LEDGER_PATH = ".dpllm/ledger.db"

budget_app = typer.Typer(
    name="budget",
    help="Privacy budget: balances, audit log, and the approval queue.",
    no_args_is_help=True,
)

LedgerOption = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="Ledger URL: a file path, sqlite:///path or postgresql://user@host/db "
        "(default: the config's [ledger] url, or $DPLLM_LEDGER).",
    ),
]


def register(app: typer.Typer) -> None:
    """Add the ``budget`` command group to the ``dpllm`` app."""
    app.add_typer(budget_app, name="budget")


def _fail(error: DPLLMError) -> NoReturn:
    raise fail(str(error), exit_code_for(error))


def _open(config: Path | None, ledger: str | None) -> tuple[ManagedLedger, str]:
    """The ledger (never created here: these commands read or decide) and its name."""
    try:
        settings = load_settings(config, ledger=ledger)
        return open_ledger(settings, create=False), _display(settings.ledger)
    except DPLLMError as exc:
        _fail(exc)


def _display(url: str) -> str:
    import re

    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


class _Printer:
    """Collects renderables and prints them the CLI's way (unwrapped when piped)."""

    def print(self, item: Any) -> None:
        emit(item)


def _console() -> _Printer:
    return _Printer()


def _amount(micro: int) -> str:
    """Exact micro-units as a decimal (``250000`` → ``0.25``)."""
    text = format(Decimal(micro).scaleb(-6).normalize(), "f")
    return text


def _symbol(pool: PoolSpec) -> str:
    return "ε" if pool.measure.value == "pure" else "ρ"


def _as_epsilon(pool: PoolSpec, micro: int, delta_units: int | None = 0) -> str:
    """``micro`` of ``pool``'s measure as an (ε, δ) statement.

    ``delta_units`` is the δ charged (units of 10⁻¹⁵; ``None``: unlimited). A
    zCDP pool's ρ converts at its reporting δ, which adds to the δ charged.
    """
    from dpllm.ledger.base import DELTA_UNIT
    from dpllm.release import Cost

    if delta_units is None:
        charged = "δ unbounded"
    else:
        charged = f"δ = {delta_units / DELTA_UNIT:.4g}"
    if pool.measure.value == "pure":
        return f"ε = {_amount(micro)}, {charged}"
    epsilon, delta = Cost(pool.measure, micro).to_epsilon_delta(delta=pool.delta)
    if delta_units is None:
        return f"ρ = {_amount(micro)} → (ε = {epsilon:.4g}, δ unbounded)"
    total = delta + delta_units / DELTA_UNIT
    return f"ρ = {_amount(micro)} → (ε = {epsilon:.4g}, δ = {total:.4g})"


def _delta(units: int | None) -> str:
    from dpllm.ledger.base import delta_text

    return "no cap" if units is None else delta_text(units)


def _balance_in(ledger: ManagedLedger, window: str, pool: str) -> Balance:
    return ledger.balance(pool, window)


@budget_app.command("show")
def show(
    config: ConfigOption = None,
    ledger_path: LedgerOption = None,
    window: Annotated[str | None, typer.Option(help="Only this window (2026-W47).")] = None,
    pool: Annotated[str | None, typer.Option(help="Only this pool.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Balances per pool and window, lifetime totals, and the worst-case loss per user."""
    from rich.table import Table

    from dpllm.cli.weekly import parse_window_option
    from dpllm.ledger.base import DELTA_UNIT, ChargeStatus, iter_path, path_delta_remaining

    parsed = parse_window_option(window)  # a malformed window is a usage error (exit 2)
    window = None if parsed is None else parsed.key
    ledger, name = _open(config, ledger_path)
    try:
        pools = {p.name: p for p in ledger.pools()}
        if pool is not None and pool not in pools:
            ledger.balance(pool, window or "2026-W01")  # raises UnknownPool
        balances = [
            b
            for b in ledger.balances()
            if (window is None or b.window == window) and (pool is None or b.pool == pool)
        ]
        unreleased = ledger.unreleased()
    except DPLLMError as exc:
        _fail(exc)
    if as_json:
        print_json(
            {
                "ledger": name,
                "pools": [
                    {
                        "name": spec.name,
                        "measure": spec.measure.value,
                        "lifetime_spent_micro": ledger.lifetime_spent(spec.name),
                        "lifetime_cap_micro": spec.lifetime_cap,
                        "delta_unit": DELTA_UNIT,
                        "delta_window_cap_units": spec.delta_window_cap,
                        "delta_lifetime_spent_units": ledger.delta_lifetime_spent(spec.name),
                        "delta_lifetime_cap_units": spec.delta_lifetime_cap,
                    }
                    for spec in pools.values()
                    if pool is None or spec.name == pool
                ],
                "balances": [
                    asdict(b)
                    | {
                        "measure": b.measure.value,
                        "remaining": b.remaining,
                        "delta_remaining": b.delta_remaining,
                        "delta_spent_value": b.delta_spent / DELTA_UNIT,
                        "delta_total": b.total_delta,
                    }
                    for b in balances
                ],
                "unreleased": [
                    {
                        "query_id": r.query_id,
                        "pool": r.pool,
                        "window": r.window,
                        "cost": r.cost.to_dict(),
                        "delta_units": r.delta,
                        "status": r.status.value,
                    }
                    for r in unreleased
                ],
            }
        )
        return
    console = _console()
    if not pools:
        console.print("No pools are configured in this ledger yet.")
        return
    table = Table(title=f"Privacy budget — {name}")
    for heading in (
        "pool", "window", "spent", "remaining", "window cap", "lifetime",
        "δ spent / cap", "δ remaining", "δ lifetime",
    ):  # fmt: skip
        table.add_column(heading, justify="left" if heading in ("pool", "window") else "right")
    from dpllm.ledger.base import path_remaining

    for b in balances:
        spec = pools[b.pool]
        sym = _symbol(spec)
        # What a charge can still take: the minimum over the pool's path.
        left = path_remaining(pools, functools.partial(_balance_in, ledger, b.window), b.pool)
        cap = _amount(b.window_cap)
        if b.granted:
            cap += f" ({'+' if b.granted > 0 else '−'}{_amount(abs(b.granted))} approved)"
        life_cap = "no cap" if b.lifetime_cap is None else _amount(b.lifetime_cap)
        path = [p.name for p in iter_path(pools, b.pool)]
        delta_left = path_delta_remaining(functools.partial(_balance_in, ledger, b.window), path)
        table.add_row(
            b.pool,
            b.window,
            f"{sym} {_amount(b.spent)}",
            f"{sym} {_amount(left)}",
            f"{sym} {cap}",
            f"{sym} {_amount(b.lifetime_spent)} / {life_cap}",
            f"{_delta(b.delta_spent)} / {_delta(b.delta_window_cap)}",
            _delta(delta_left),
            f"{_delta(b.delta_lifetime_spent)} / {_delta(b.delta_lifetime_cap)}",
        )
    console.print(table)
    if not balances:
        console.print("Nothing has been charged" + (f" in {window}" if window else "") + ".")

    loss = Table(
        title="Worst-case cumulative loss of a user present in every window",
        caption="so far: the sum over all windows; bound: the lifetime cap",
    )
    for heading in ("pool", "windows", "so far", "bound"):
        loss.add_column(heading)
    for spec in pools.values():
        if pool is not None and spec.name != pool:
            continue
        windows = {b.window for b in ledger.balances() if b.pool == spec.name and b.spent}
        spent = ledger.lifetime_spent(spec.name)
        if spec.lifetime_cap is not None:
            bound = _as_epsilon(spec, spec.lifetime_cap, spec.delta_lifetime_cap)
        elif spec.delta_lifetime_cap is not None:
            bound = f"{_symbol(spec)} unbounded (no lifetime cap), δ ≤ {_delta(spec.delta_lifetime_cap)}"
        else:
            bound = "unbounded (no lifetime cap)"
        so_far = _as_epsilon(spec, spent, ledger.delta_lifetime_spent(spec.name))
        loss.add_row(spec.name, str(len(windows)), so_far, bound)
    local = ledger.local_worst_case()
    if local.micro:
        # Local-DP reports compose with the central releases: a user who reported
        # lost this much more, whatever the pools say.
        loss.add_row("local DP (most by one user)", "all", f"ε {_amount(local.micro)}", "—")
    console.print(loss)

    failed = [r for r in unreleased if r.status is ChargeStatus.FAILED]
    waiting = [r for r in unreleased if r.status is not ChargeStatus.FAILED]
    if waiting:
        stale = Table(title="Charged, not released (a retry of the same query takes it over)")
        for heading in ("query id", "pool", "window", "cost", "state"):
            stale.add_column(heading)
        for record in waiting:
            if record.owner is None and record.ticket is not None:
                state = f"approved (ticket {record.ticket}), waiting for its run"
            elif record.owner is None:
                state = "data read, no release stored"
            else:
                state = f"held by {record.owner}"
            stale.add_row(
                record.query_id, record.pool, record.window, record.cost.describe(), state
            )
        console.print(stale)
    if failed:
        closed = Table(
            title="Failed after reading the data (charged; the same query is not run again)"
        )
        for heading in ("query id", "pool", "window", "cost", "error"):
            closed.add_column(heading)
        for record in failed:
            closed.add_row(
                record.query_id, record.pool, record.window, record.cost.describe(),
                record.error_class or "?",
            )  # fmt: skip
        console.print(closed)


@budget_app.command("history")
def history(
    config: ConfigOption = None,
    ledger_path: LedgerOption = None,
    as_json: JsonOption = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the most recent N.")] = None,
) -> None:
    """The audit log: every charge, refusal, refund, approval and cache hit."""
    from rich.table import Table

    ledger, name = _open(config, ledger_path)
    try:
        events = ledger.history(limit=limit)
    except DPLLMError as exc:
        _fail(exc)
    if as_json:
        print_json([asdict(e) for e in events])
        return
    table = Table(title=f"Audit log — {name}")
    for heading in ("time", "event", "analyst", "pool", "window", "query id", "amount", "detail"):
        table.add_column(heading)
    for e in events:
        table.add_row(
            e.time, e.event, e.analyst, e.pool, e.window, e.query_id,
            _amount(e.micro) if e.micro else "", e.detail,
        )  # fmt: skip
    _console().print(table)


@budget_app.command("pending")
def pending(
    config: ConfigOption = None,
    ledger_path: LedgerOption = None,
    show_all: Annotated[bool, typer.Option("--all", help="Include decided tickets.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Requests waiting for approval."""
    from rich.table import Table

    ledger, name = _open(config, ledger_path)
    try:
        tickets = ledger.pending(status=None if show_all else "pending")
    except DPLLMError as exc:
        _fail(exc)
    if as_json:
        print_json(
            [
                {
                    "ticket": t.ticket,
                    "status": t.status,
                    "pool": t.pool,
                    "window": t.window,
                    "cost": t.cost.to_dict(),
                    "analyst": t.analyst,
                    "query_id": t.query_id,
                    "description": t.description,
                }
                for t in tickets
            ]
        )
        return
    console = _console()
    if not tickets:
        console.print("No requests are waiting for approval.")
        return
    table = Table(title="Approval queue")
    for heading in ("ticket", "status", "pool", "window", "cost", "analyst", "query id", "why"):
        table.add_column(heading)
    for t in tickets:
        table.add_row(
            t.ticket, t.status, t.pool, t.window, t.cost.describe(), t.analyst, t.query_id,
            t.description,
        )  # fmt: skip
    console.print(table)


def _decision(status: str, ticket: str, request: Any, by: str) -> dict[str, Any]:
    return {
        "ticket": ticket,
        "status": status,
        "pool": request.pool,
        "window": request.window,
        "cost": request.cost.to_dict(),
        "by": by,
    }


@budget_app.command("approve")
def approve(
    ticket: Annotated[str, typer.Argument(help="The ticket id (see `dpllm budget pending`).")],
    config: ConfigOption = None,
    ledger_path: LedgerOption = None,
    from_pool: Annotated[
        str | None,
        typer.Option("--from", help="Reserve pool to move the budget from (default: its reserve)."),
    ] = None,
    by: Annotated[str, typer.Option("--by", help="Approver, for the audit log.")] = "admin",
    as_json: JsonOption = False,
) -> None:
    """Approve a queued request: move budget from a reserve; the query then runs once."""
    ledger, name = _open(config, ledger_path)
    try:
        request = ledger.approve(ticket, approver=by, from_pool=from_pool)
    except DPLLMError as exc:
        _fail(exc)
    if as_json:
        print_json(_decision("approved", ticket, request, by))
        return
    source = f" from {from_pool!r}" if from_pool else ""
    typer.echo(
        f"approved ticket {ticket}: {request.cost.describe()} for pool {request.pool!r} in "
        f"{request.window}{source}. Run the same query (for a whole run's ticket, the same "
        "command) again; it runs once."
    )


@budget_app.command("deny")
def deny(
    ticket: Annotated[str, typer.Argument(help="The ticket id (see `dpllm budget pending`).")],
    config: ConfigOption = None,
    ledger_path: LedgerOption = None,
    reason: Annotated[str, typer.Option(help="Why, for the audit log.")] = "",
    by: Annotated[str, typer.Option("--by", help="Approver, for the audit log.")] = "admin",
    as_json: JsonOption = False,
) -> None:
    """Deny a queued request; retries of that query are refused."""
    ledger, name = _open(config, ledger_path)
    try:
        request = ledger.deny(ticket, approver=by, reason=reason)
    except DPLLMError as exc:
        _fail(exc)
    if as_json:
        print_json(_decision("denied", ticket, request, by))
        return
    typer.echo(f"denied ticket {ticket} ({request.cost.describe()} for pool {request.pool!r}).")
