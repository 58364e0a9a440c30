"""The budget-burn chart of ``dpllm plan simulate``: refused weeks are in the legend, axes labelled.

Checked by rendering the figure and reading its text elements back.
"""

from __future__ import annotations

from dpllm.assess.planning import SimulatedWeek
from dpllm.cli.plan import burn_figure


def _week(n: int, *, refused: tuple[str, ...] = ()) -> SimulatedWeek:
    return SimulatedWeek(
        window=f"2026-W{n:02d}",
        spent=0.0 if refused else 1.6,
        window_remaining=0.2,
        lifetime_remaining=10.0 - 1.6 * n,
        releases=0 if refused else 5,
        cache_hits=0,
        refused=refused,
    )


def test_refused_weeks_are_in_the_legend_once_and_axes_are_labelled() -> None:
    weeks = [_week(1), _week(2), _week(3, refused=("mean_rating",)), _week(4, refused=("x",))]
    fig = burn_figure(weeks, title="Budget burn of pool 'weekly'", sym="ε")
    fig.canvas.draw()
    [ax] = fig.axes
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend.count("week with a refused release") == 1
    assert "spent this week (ε)" in legend and "window budget left" in legend
    assert ax.get_xlabel() == "simulated week" and ax.get_ylabel() == "privacy budget (ε)"
    assert len([line for line in ax.get_lines() if line.get_xdata()[0] in (3, 4)]) >= 2


def test_no_refusal_no_refusal_entry() -> None:
    fig = burn_figure([_week(1), _week(2)], title="t", sym="ρ")
    fig.canvas.draw()
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "week with a refused release" not in legend
