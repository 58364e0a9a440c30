"""``dpllm plan``: interval widths and an ε split before anything is spent; burn simulation.

``dpllm plan [-c dpllm.toml]`` prints each planned query's expected 95%
interval and a suggested split of the plan pool's window cap; with ``--week W`` it
also reads the configured ledger (SQLite or PostgreSQL, ``--ledger URL``
overrides) and says what the plan pool has left in that week and whether the plan
fits (reading only);
``dpllm plan simulate --schedule FILE`` replays weeks of releases against a
throw-away ledger with the configured pools and plots the remaining budget.
Neither reads any data; neither writes to the real ledger.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from dpllm.cli._common import (
    ConfigOption,
    ExitCode,
    JsonOption,
    LedgerOverride,
    emit,
    fail,
    find_config,
    info,
    load_settings,
    print_json,
)

if TYPE_CHECKING:
    from dpllm.assess.planning import SimulatedWeek
    from dpllm.config import Settings


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="plan",
        help="Plan a budget before anything is spent: interval widths, ε split, burn simulation.",
        invoke_without_command=True,
        no_args_is_help=False,
    )
    group.callback()(plan)
    group.command("simulate")(simulate)
    app.add_typer(group)


def _settings(config: Path | None, ledger: str | None = None) -> Settings:
    import os

    if find_config(config, cwd=Path.cwd(), environ=os.environ) is None:
        info("note: no dpllm.toml found; planning with dpllm's default plan and pools")
    return load_settings(config, ledger=ledger)


def _parse_targets(values: list[str]) -> dict[str, float]:
    targets: dict[str, float] = {}
    for item in values:
        name, sep, value = item.partition("=")
        try:
            targets[name.strip()] = float(value.strip().rstrip("%")) / (
                100.0 if value.strip().endswith("%") else 1.0
            )
        except ValueError:
            sep = ""
        if not sep:
            raise typer.BadParameter(f"{item!r}: write NAME=0.05 or NAME=5%", param_hint="--target")
    return targets


def plan(
    ctx: typer.Context,
    config: ConfigOption = None,
    users: int = typer.Option(500, min=1, help="Assumed active users per window (public guess)."),
    records_per_user: float = typer.Option(3.0, min=1.0, help="Assumed records per user."),
    mean_rating: float = typer.Option(3.5, min=1.0, max=5.0, help="Assumed mean rating."),
    target: list[str] = typer.Option(  # noqa: B008
        [], help="Relative half-width wanted, e.g. mean_rating=2% (repeatable)."
    ),
    week: str | None = typer.Option(
        None, "--week", help="Also read the ledger: what the plan pool has left in this week."
    ),
    ledger: LedgerOverride = None,
    as_json: JsonOption = False,
) -> None:
    """Expected 95% intervals of the configured plan, and a suggested ε split."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table

    from dpllm.assess.planning import Population, evaluate_plan, plan_pool, suggest_split
    from dpllm.errors import DPLLMError
    from dpllm.ledger.base import DELTA_UNIT

    try:
        settings = _settings(config, ledger)
        pop = Population(users=users, records_per_user=records_per_user, mean_rating=mean_rating)
        pool = plan_pool(settings)
        budget = pool.window_cap / 1_000_000
        rows = evaluate_plan(settings, pop)
        split = suggest_split(
            rows, budget=budget, measure=pool.measure, targets=_parse_targets(target)
        )
        suggested = {r.name: r for r in evaluate_plan(settings, pop, amounts=split.amounts)}
        planned_delta = _plan_delta(settings)
    except DPLLMError as exc:
        raise fail(str(exc), ExitCode.USAGE) from exc
    delta_cap = pool.delta_window_cap / DELTA_UNIT
    sym = "ε" if pool.measure.value == "pure" else "ρ"
    if as_json:
        print_json(
            {
                "pool": pool.name,
                "measure": pool.measure.value,
                "window_cap": budget,
                "confidence": settings.confidence,
                "assumed": {"users": users, "records_per_user": records_per_user},
                "queries": [
                    {
                        "name": r.name,
                        "unit": r.unit,
                        "planned": r.amount,
                        "planned_half_width": r.half_width,
                        "planned_relative_error": r.relative_error,
                        "suggested": suggested[r.name].amount,
                        "suggested_half_width": suggested[r.name].half_width,
                        "suggested_relative_error": suggested[r.name].relative_error,
                    }
                    for r in rows
                ],
                "planned_total": sum(r.amount for r in rows),
                "fits": sum(r.amount for r in rows) <= budget and planned_delta <= delta_cap,
                "planned_delta": planned_delta,
                "delta_window_cap": delta_cap,
                "delta_lifetime_cap": None
                if pool.delta_lifetime_cap is None
                else pool.delta_lifetime_cap / DELTA_UNIT,
                "note": split.note,
            }
        )
        return
    console = _Console()
    level = f"{settings.confidence:.0%}"
    table = Table(
        title=f"Plan for pool {pool.name!r} ({sym} cap {budget:g}/window), "
        f"{users} users × {records_per_user:g} records assumed"
    )
    for col in (
        "query",
        f"planned {sym}",
        f"{level} ± (planned)",
        "relative",
        f"suggested {sym}",
        f"{level} ± (suggested)",
        "relative",
    ):
        table.add_column(col, justify="left" if col == "query" else "right")
    for r in rows:
        s = suggested[r.name]
        table.add_row(
            r.name,
            f"{r.amount:.3g}",
            f"{r.half_width:.3g} {r.unit}",
            f"{r.relative_error:.1%}",
            f"{s.amount:.3g}",
            f"{s.half_width:.3g} {s.unit}",
            f"{s.relative_error:.1%}",
        )
    console.print(table)
    total = sum(r.amount for r in rows)
    console.print(f"planned total {sym} = {total:.3g} of a window cap of {budget:g}")
    if total > budget:
        console.print("[red]the plan does not fit the window cap; the weekly job would be refused")
    console.print(
        f"planned δ = {planned_delta:g} of a δ window cap of {delta_cap:g}"
        + (" (every planned release is pure ε or zCDP)" if planned_delta == 0 else "")
    )
    if planned_delta > delta_cap:
        console.print("[red]the plan's δ does not fit the δ window cap; the run would be refused")
    console.print(f"suggested split: {split.note}")
    if pool.lifetime_cap is not None or any(p.lifetime_cap for p in settings.default_pools):
        caps = [p.lifetime_cap for p in settings.default_pools if p.lifetime_cap is not None]
        weeks = min(caps) / 1_000_000 / total if total > 0 else float("inf")
        console.print(f"the tightest lifetime cap lasts ≈ {weeks:.0f} weeks at the planned spend")
    if week is not None:
        _ledger_position(console, settings, week, total)
    console.print("Widths come from each query's own calibration; no data was read.")


def _plan_delta(settings: Settings) -> float:
    """Σ δ of the plan's releases (approximate-DP ones only; 0 for pure ε and zCDP)."""
    from dpllm.data.base import release_delta
    from dpllm.weekly.wiring import build_plan

    return sum(release_delta(q) for q in build_plan(settings).values())


class _Console:
    """``print`` through :func:`emit` (unwrapped when piped); rich markup is kept."""

    def print(self, item: object) -> None:
        emit(item)  # type: ignore[arg-type]


def _ledger_position(console: _Console, settings: Settings, week: str, total: float) -> None:
    """What the plan pool (and its parents) have left in ``week``, read from the ledger."""
    from dpllm.cli._common import exit_code_for, open_ledger
    from dpllm.errors import DPLLMError, UnknownPool
    from dpllm.ledger.base import DELTA_UNIT
    from dpllm.weekly.wiring import pool_path
    from dpllm.windows import parse_week

    try:
        parse_week(week)
        ledger = open_ledger(settings, create=False)
        try:
            for spec in pool_path(settings):
                sym = "ε" if spec.measure.value == "pure" else "ρ"
                try:
                    left = ledger.balance(spec.name, week).remaining / 1_000_000
                except UnknownPool:
                    left = spec.window_cap / 1_000_000
                try:
                    delta_left = ledger.balance(spec.name, week).delta_remaining / DELTA_UNIT
                except UnknownPool:
                    delta_left = spec.delta_window_cap / DELTA_UNIT
                verdict = "fits" if total <= left + 1e-12 else "does NOT fit"
                console.print(
                    f"ledger: pool {spec.name!r} has {sym} {left:g} left in {week} "
                    f"(δ {delta_left:g}); the plan ({sym} {total:.3g}) {verdict}"
                )
        finally:
            ledger.close()
    except DPLLMError as exc:
        raise fail(str(exc), exit_code_for(exc)) from exc


def _plot(weeks: list[SimulatedWeek], out: Path, *, title: str, sym: str) -> None:
    burn_figure(weeks, title=title, sym=sym).savefig(out, dpi=110)


def burn_figure(weeks: list[SimulatedWeek], *, title: str, sym: str) -> Any:
    """The budget-burn chart as a matplotlib ``Figure`` (tests read its texts back)."""
    from dpllm._extras import require

    require("matplotlib", extra="charts", feature="dpllm plan simulate --out (the burn chart)")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    x = list(range(1, len(weeks) + 1))
    ax.bar(x, [w.spent for w in weeks], color="#9ecae1", label=f"spent this week ({sym})")
    ax.plot(
        x, [w.window_remaining for w in weeks], "o-", color="#3182bd", label="window budget left"
    )
    if any(w.lifetime_remaining is not None for w in weeks):
        ax.plot(
            x,
            [w.lifetime_remaining or 0.0 for w in weeks],
            "s-",
            color="#de2d26",
            label="lifetime budget left",
        )
    refused = [i for i, w in enumerate(weeks, start=1) if w.refused]
    for n, i in enumerate(refused):
        # One legend entry for all the refused weeks' lines.
        ax.axvline(
            i, color="#de2d26", alpha=0.25, label="week with a refused release" if n == 0 else None
        )
    ax.set_xticks(x, [w.window for w in weeks], rotation=60, fontsize=7)
    ax.set_xlabel("simulated week")
    ax.set_ylabel(f"privacy budget ({sym})")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def simulate(
    schedule: Path = typer.Option(..., exists=True, dir_okay=False, help="Schedule TOML file."),
    config: ConfigOption = None,
    out: Path = typer.Option(Path("plan-simulation.png"), help="Where to write the PNG."),
    fail_on_exhaust: bool = typer.Option(
        False, help="Exit 3 (budget refused) when any simulated release would be refused."
    ),
    as_json: JsonOption = False,
) -> None:
    """Plot the remaining budget across simulated weeks of releases and refreshes."""
    from rich.table import Table

    from dpllm.assess.planning import Schedule, plan_pool, simulate_schedule
    from dpllm.errors import DPLLMError

    console = _Console()
    try:
        settings = _settings(config)
        sched = Schedule.load(schedule)
        weeks = simulate_schedule(settings, sched)
        pool = plan_pool(settings)
    except DPLLMError as exc:
        raise fail(str(exc), ExitCode.USAGE) from exc
    sym = "ε" if pool.measure.value == "pure" else "ρ"
    if as_json:
        _plot(weeks, out, title=f"Budget burn of pool {pool.name!r}", sym=sym)
        print_json(
            {
                "pool": pool.name,
                "plot": str(out),
                "weeks": [
                    {
                        "window": w.window,
                        "releases": w.releases,
                        "cache_hits": w.cache_hits,
                        "spent": w.spent,
                        "window_remaining": w.window_remaining,
                        "lifetime_remaining": w.lifetime_remaining,
                        "refused": list(w.refused),
                    }
                    for w in weeks
                ],
            }
        )
        if fail_on_exhaust and any(w.refused for w in weeks):
            raise typer.Exit(int(ExitCode.BUDGET))
        return
    table = Table(title=f"Simulated budget of pool {pool.name!r}")
    for col in (
        "week",
        "releases",
        "cache hits",
        f"spent {sym}",
        "window left",
        "lifetime left",
        "refused",
    ):
        table.add_column(col)
    for w in weeks:
        life = "∞" if w.lifetime_remaining is None else f"{w.lifetime_remaining:.3g}"
        table.add_row(
            w.window,
            str(w.releases),
            str(w.cache_hits),
            f"{w.spent:.3g}",
            f"{w.window_remaining:.3g}",
            life,
            ", ".join(w.refused) or "-",
        )
    console.print(table)
    _plot(weeks, out, title=f"Budget burn of pool {pool.name!r}", sym=sym)
    console.print(f"plot written to {out}")
    refused = [w for w in weeks if w.refused]
    if refused:
        console.print(
            f"[red]the schedule exhausts the budget: first refusal in {refused[0].window} "
            f"({', '.join(refused[0].refused)})"
        )
        if fail_on_exhaust:
            raise typer.Exit(int(ExitCode.BUDGET))
    else:
        console.print("the schedule fits the budget for every simulated week")
