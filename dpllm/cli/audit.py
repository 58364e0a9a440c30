"""``dpllm audit``: claimed vs empirical ε of every mechanism and catalogue query.

Exits 1 when any empirical lower bound exceeds its claim (or an attacker beats
the membership-inference ceiling); ``--planted-bug`` adds a mis-calibrated
query to prove the audit notices. ``dpllm audit utility`` plots relative error
against ε on synthetic data.
"""

from __future__ import annotations

from pathlib import Path

import typer

from dpllm.cli._common import ExitCode, JsonOption, emit, fail, info, print_json, status


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="audit",
        help="Empirical privacy audit of every mechanism and query; utility curves.",
        invoke_without_command=True,
        no_args_is_help=False,
    )
    group.callback()(audit)
    group.command("utility")(utility)
    app.add_typer(group)


def audit(
    ctx: typer.Context,
    samples: int = typer.Option(
        2_000_000, min=10_000, help="Estimation samples per side of each audit."
    ),
    select: int = typer.Option(200_000, min=1_000, help="Event-selection samples per side."),
    engine: str = typer.Option("sqlite", help="Engine the neighbouring datasets run through."),
    game_trials: int = typer.Option(200_000, min=1_000, help="Membership-inference trials."),
    planted_bug: bool = typer.Option(
        False, help="Add a deliberately mis-calibrated query: the audit must fail."
    ),
    as_json: JsonOption = False,
) -> None:
    """Audit every mechanism and catalogue query over neighbouring datasets."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table

    from dpllm.assess.audit_suite import audit_catalogue, audit_mechanisms
    from dpllm.errors import DPLLMError

    alpha = 1e-6
    try:
        with status(f"auditing the mechanisms ({samples:,} samples per side)"):
            mechs = audit_mechanisms(n_select=select, n_estimate=samples, alpha=alpha)
        with status(f"auditing the catalogue queries through the {engine} engine"):
            queries = audit_catalogue(
                engine=engine,
                n_select=select,
                n_estimate=samples,
                alpha=alpha,
                game_trials=game_trials,
                planted_bug=planted_bug,
            )
    except DPLLMError as exc:
        raise fail(str(exc), ExitCode.USAGE) from exc
    failed = [m.name for m in mechs if not m.passed] + [q.name for q in queries if not q.passed]
    if as_json:
        print_json(
            {
                "alpha": alpha,
                "passed": not failed,
                "mechanisms": [
                    {
                        "name": m.name,
                        "claimed_epsilon": m.claimed_epsilon,
                        "delta": m.delta,
                        "empirical_epsilon": m.result.empirical_epsilon,
                        "passed": m.passed,
                    }
                    for m in mechs
                ],
                "queries": [
                    {
                        "name": q.name,
                        "claimed_epsilon": q.claimed_epsilon,
                        "empirical_epsilon": q.empirical_epsilon,
                        "worst_pair": q.worst_scenario,
                        "mi_accuracy": q.game.accuracy if q.game else None,
                        "mi_ceiling": q.game.ceiling if q.game else None,
                        "passed": q.passed,
                    }
                    for q in queries
                ],
            }
        )
        raise typer.Exit(int(ExitCode.FINDINGS) if failed else 0)

    def verdict(ok: bool) -> str:
        return "[green]ok[/green]" if ok else "[red bold]VIOLATION[/red bold]"  # rich markup

    mt = Table(title="Mechanisms at |v⁰ − v¹| = Δ")
    for col in ("mechanism", "claimed ε", "δ", "empirical ε ≥", "verdict"):
        mt.add_column(col)
    for m in mechs:
        mt.add_row(
            m.name,
            f"{m.claimed_epsilon:.4g}",
            f"{m.delta:g}",
            f"{m.result.empirical_epsilon:.4f}",
            verdict(m.passed),
        )
    emit(mt)
    qt = Table(title=f"Catalogue queries through the {engine} engine, 7 neighbouring pairs each")
    for col in (
        "query",
        "claimed ε",
        "empirical ε ≥",
        "worst pair",
        "MI accuracy",
        "MI ceiling",
        "verdict",
    ):
        qt.add_column(col)
    for q in queries:
        game = q.game
        qt.add_row(
            q.name,
            f"{q.claimed_epsilon:.4g}",
            f"{q.empirical_epsilon:.4f}",
            q.worst_scenario,
            f"{game.accuracy:.4f}" if game else "-",
            f"{game.ceiling:.4f}" if game else "-",
            verdict(q.passed),
        )
    emit(qt)
    n_audits = len(mechs) + (queries[-1].audits if queries else 0)
    typer.echo(
        f"Each bound holds with probability ≥ 1 − 2α (α = {alpha:g}, Clopper–Pearson, "
        f"{select:,} selection + {samples:,} estimation samples per side); over {n_audits} "
        f"distinct audits all hold with probability ≥ {1 - 2 * alpha * n_audits:.6f}. "
        "The membership-inference attacker is the likelihood-ratio test; it must not beat "
        "e^ε/(1+e^ε)."
    )
    if failed:
        typer.echo(f"audit failed: {', '.join(failed)}")
        raise typer.Exit(int(ExitCode.FINDINGS))
    typer.echo("audit passed: no empirical ε exceeds its claim")


def utility(
    query: str = typer.Option("mean_rating", help="Catalogue query to plot."),
    eps: str = typer.Option("0.05:5", help="ε range LOW:HIGH (log-spaced) or a list a,b,c."),
    points: int = typer.Option(15, min=2, max=200, help="Points of a LOW:HIGH range."),
    trials: int = typer.Option(500, min=10, help="Noisy draws per ε."),
    data: Path | None = typer.Option(  # noqa: B008
        None, exists=True, dir_okay=False, help="An SQLite feedback file (reads REAL data)."
    ),
    window: str = typer.Option("2026-W47", help="The week of --data to use."),
    out: Path = typer.Option(Path("utility.png"), help="Where to write the PNG."),
    as_json: JsonOption = False,
) -> None:
    """Plot relative error against ε for one query (synthetic data by default)."""
    from dpllm._extras import require

    require("matplotlib", extra="charts", feature="dpllm audit utility (the PNG plot)")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from dpllm.assess.utility import parse_eps_range, utility_curve
    from dpllm.errors import DPLLMError

    try:
        grid = parse_eps_range(eps, points=points)
        curve = utility_curve(query, grid, data=data, window=window, trials=trials)
    except DPLLMError as exc:
        raise fail(str(exc), ExitCode.USAGE) from exc
    if data is None:
        info("utility curve on synthetic data (no real records were read).")
    else:
        typer.echo(
            err=True,
            message=f"NOTICE: this utility curve compares noisy releases with the exact values of {data}: "
            "it reads the real data and is NOT differentially private. Keep it internal.",
        )
    fig = Figure(figsize=(7, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    xs = [p.epsilon for p in curve]
    ax.loglog(xs, [p.median_relative_error for p in curve], "o-", label="median")
    ax.loglog(xs, [p.p90_relative_error for p in curve], "s--", label="90th percentile")
    ax.set_xlabel("ε")
    ax.set_ylabel("relative error")
    source = "synthetic data" if data is None else f"{data.name} (reads real data)"
    ax.set_title(f"{query}: relative error vs ε — {source}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    if as_json:
        print_json(
            {
                "query": query,
                "synthetic": data is None,
                "plot": str(out),
                "points": [
                    {
                        "epsilon": p.epsilon,
                        "median_relative_error": p.median_relative_error,
                        "p90_relative_error": p.p90_relative_error,
                    }
                    for p in curve
                ],
            }
        )
        return
    for p in curve:
        typer.echo(
            f"ε = {p.epsilon:<8.4g} median {p.median_relative_error:.2%}  "
            f"p90 {p.p90_relative_error:.2%}"
        )
    typer.echo(f"plot written to {out}")
