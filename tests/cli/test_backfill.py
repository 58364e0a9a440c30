"""``dpllm backfill``: the cost is shown and confirmed first; one read; reruns are free."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpllm.cli import app
from dpllm.cli.weekly import EXIT_BUDGET
from dpllm.ledger.sqlite import SQLiteLedger
from tests.weekly.helpers import demo_config, make_demo

WEEKS = ("2026-W45", "2026-W46", "2026-W47")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    db, _ = make_demo(tmp_path)
    return demo_config(tmp_path, db, ledger=str(tmp_path / "ledger.db"))


def _spent(config: Path) -> list[int]:
    ledger = SQLiteLedger(config.parent / "ledger.db")
    return [ledger.balance("weekly", w).spent for w in WEEKS]


def test_backfill_asks_first_and_a_no_spends_nothing(config: Path) -> None:
    runner = CliRunner()
    args = ["backfill", "-c", str(config), "--weeks", "2026-W45..2026-W47"]
    no = runner.invoke(app, args, input="n\n")
    assert no.exit_code == 0, no.output
    assert "would charge" in no.output and "2026-W46" in no.output and "in all" in no.output
    assert "nothing was spent" in no.output
    assert _spent(config) == [0, 0, 0]
    yes = runner.invoke(app, args, input="y\n")
    assert yes.exit_code == 0, yes.output
    assert "from one read" in yes.output
    plan_cost = _spent(config)
    assert plan_cost[0] > 0 and len(set(plan_cost)) == 1  # each week its own charge
    again = runner.invoke(app, [*args, "--yes"])
    assert again.exit_code == 0 and "nothing to spend" in again.output
    assert _spent(config) == plan_cost


def test_backfill_refused_by_the_budget_spends_nothing(config: Path) -> None:
    text = config.read_text(encoding="utf-8").replace("window_cap = 1.8", "window_cap = 0.5")
    config.write_text(text, encoding="utf-8")
    out = CliRunner().invoke(
        app, ["backfill", "-c", str(config), "--weeks", "2026-W45..2026-W47", "--yes"]
    )
    assert out.exit_code == EXIT_BUDGET, out.output
    assert _spent(config) == [0, 0, 0]


def test_backfill_needs_weeks(config: Path) -> None:
    out = CliRunner().invoke(app, ["backfill", "-c", str(config)])
    assert out.exit_code != 0 and "--weeks" in out.output
