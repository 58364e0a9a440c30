"""``dpllm quickstart``: the smallest honest end-to-end release, printed.

Generates a small synthetic feedback set in memory (never real data), releases a
noisy user count and a noisy mean rating with their 95% intervals and costs, and
prints them beside the exact values so a newcomer sees what the noise does.
"""

from __future__ import annotations

import typer

from dpllm.cli._common import JsonOption, emit, fail, print_json


def register(app: typer.Typer) -> None:
    app.command()(quickstart)


def quickstart(
    users: int = typer.Option(500, min=1, max=1_000_000, help="Synthetic users to generate."),
    epsilon: float = typer.Option(1.0, help="ε for each of the two releases."),
    seed: int = typer.Option(1, help="Seed of the synthetic data (not of the noise)."),
    as_json: JsonOption = False,
) -> None:
    """Release a DP count and mean on synthetic data and show intervals and costs."""
    import numpy as np
    from rich.table import Table

    from dpllm.errors import DPLLMError
    from dpllm.privacy.mechanisms import DiscreteLaplace, Laplace, make_release, ratio_release

    rng = np.random.default_rng(seed)
    # Each synthetic user gives 1–20 ratings; the query bounds a user to their
    # per-user mean (one value in [1, 5]), so adding or removing a user moves
    # the user count by 1 and the centred sum Σ(mean_u − 3) by at most 2.
    per_user = [rng.integers(1, 6, size=rng.integers(1, 21)) for _ in range(users)]
    means = np.array([np.clip(r, 1, 5).mean() for r in per_user])
    try:
        count = make_release(
            DiscreteLaplace(epsilon=epsilon / 2, sensitivity=1),
            [len(means)],
            name="active_users",
            fingerprint="quickstart:active_users",
            unit="users",
        )
        centred = make_release(
            Laplace(epsilon=epsilon / 2, sensitivity=2.0),
            [float((means - 3.0).sum())],
            name="centred_sum",
            fingerprint="quickstart:centred_sum",
            kind="sum",
        )
        mean = ratio_release(
            "mean_rating",
            centred,
            count,
            fingerprint="quickstart:mean_rating",
            offset=3.0,
            clamp=(1.0, 5.0),
            unit="stars",
        )
    except DPLLMError as exc:
        raise fail(str(exc)) from exc
    if as_json:
        print_json(
            {
                "synthetic": True,
                "users": users,
                "releases": {"active_users": count.to_dict(), "mean_rating": mean.to_dict()},
                "exact": {"active_users": len(means), "mean_rating": float(means.mean())},
            }
        )
        return

    table = Table(title=f"dpllm quickstart — {users} synthetic users, ε = {epsilon} in total")
    for column in ("release", "noisy value", "95% interval", "cost", "exact (synthetic only)"):
        table.add_column(column)
    table.add_row(
        "active_users",
        f"{count.value:.0f}",
        f"{count.interval[0]:.0f}–{count.interval[1]:.0f}",
        count.cost.describe(),
        str(len(means)),
    )
    table.add_row(
        "mean_rating",
        f"{mean.value:.2f}",
        f"{mean.interval[0]:.2f}–{mean.interval[1]:.2f}",
        mean.cost.describe(),
        f"{means.mean():.2f}",
    )
    emit(table)
    typer.echo(
        "The noise comes from OpenDP's secure samplers; run again and the noisy values change, "
        "the intervals' widths do not."
    )
