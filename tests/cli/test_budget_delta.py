"""δ beside ε at the edges: ``dpllm.toml``'s δ caps, ``dpllm budget show`` and ``dpllm plan``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpllm.cli import app
from dpllm.config import Settings
from dpllm.errors import ConfigError
from dpllm.ledger.base import DELTA_UNIT, PoolSpec, release_once, to_delta_units
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost, Measure, Release

WEEK = "2026-W47"
runner = CliRunner()
POOLS = """
[[pools]]
name = "global"
window_cap = 2.0
lifetime_cap = 20.0

[[pools]]
name = "weekly"
parent = "global"
window_cap = 1.8
delta_window_cap = 5e-7
delta_lifetime_cap = 2e-6
"""


def test_config_reads_delta_caps_and_derives_a_lifetime_default() -> None:
    settings = Settings.parse(POOLS)
    top, weekly = settings.pools
    assert top.delta_window_cap == to_delta_units(1e-6)  # the documented default
    # ε lifetime 20 at 2 per window = 10 full windows: δ lifetime 10 × 1e-6.
    assert top.delta_lifetime_cap == 10 * to_delta_units(1e-6)
    assert (weekly.delta_window_cap, weekly.delta_lifetime_cap) == (
        to_delta_units(5e-7), to_delta_units(2e-6),
    )  # fmt: skip
    no_lifetime = Settings.parse('[[pools]]\nname = "p"\nwindow_cap = 1.0\n')
    assert no_lifetime.pools[0].delta_lifetime_cap is None  # unlimited, like its ε
    default = Settings.parse("").default_pools[0]
    assert default.delta_lifetime_cap == 10 * to_delta_units(1e-6)


@pytest.mark.parametrize("bad", ["delta_window_cap = 2.0", "delta_window_cap = -1e-6",
                                 'delta_lifetime_cap = "1e-6"', "delta_lifetime_cap = 1.5"])  # fmt: skip
def test_config_refuses_bad_delta_caps(bad: str) -> None:
    with pytest.raises(ConfigError):
        Settings.parse(f'[[pools]]\nname = "p"\nwindow_cap = 1.0\n{bad}\n')


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(path)
    ledger.ensure_pool(PoolSpec("root", Measure.PURE, Cost.pure(2).micro,
                                delta_window_cap=to_delta_units(1e-6)))  # fmt: skip
    ledger.ensure_pool(PoolSpec("kw", Measure.PURE, Cost.pure(1).micro, parent="root",
                                delta_window_cap=to_delta_units(5e-6),
                                delta_lifetime_cap=to_delta_units(8e-6)))  # fmt: skip
    cost = Cost.pure(0.25)
    release = Release(name="kw", values=(3.0,), intervals=((1.0, 5.0),),
                      mechanism="partition_selection", noise_scale=1.0, cost=cost,
                      fingerprint="q", window=WEEK, delta=7e-7)  # fmt: skip
    release_once(ledger, query_id="q", pool="kw", window=WEEK, cost=cost,
                 compute=lambda: release, delta=7e-7)  # fmt: skip
    ledger.close()
    return path


def test_budget_show_prints_delta_spent_and_remaining_over_the_path(db: Path) -> None:
    result = runner.invoke(app, ["budget", "show", "--ledger", str(db), "--window", WEEK])
    assert result.exit_code == 0, result.output
    rows = {}
    for line in result.output.splitlines():
        if len(parts := [c.strip() for c in line.replace("┃", "│").split("│")]) > 9:
            rows.setdefault(parts[1], parts[2:])
    header = rows["pool"]
    kw = dict(zip(header, rows["kw"], strict=False))
    root = dict(zip(header, rows["root"], strict=False))
    assert kw["δ spent / cap"] == "7e-07 / 5e-06"
    assert kw["δ remaining"] == "3e-07"  # its own cap leaves 4.3e-06; the root only 3e-07
    assert kw["δ lifetime"] == "7e-07 / 8e-06"
    assert root["δ spent / cap"] == "7e-07 / 1e-06"
    assert "ε = 0.25, δ = 7e-07" in result.output  # the worst-case loss names δ too
    assert "δ ≤ 8e-06" in result.output  # kw's δ is bounded over its lifetime, its ε is not


def test_budget_show_json_has_exact_delta_units(db: Path) -> None:
    result = runner.invoke(app, ["budget", "show", "--ledger", str(db), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    kw = next(b for b in data["balances"] if b["pool"] == "kw")
    assert kw["delta_spent"] == to_delta_units(7e-7)
    assert kw["delta_remaining"] == to_delta_units(5e-6) - to_delta_units(7e-7)
    assert kw["delta_spent_value"] == pytest.approx(7e-7)
    pool = next(p for p in data["pools"] if p["name"] == "kw")
    assert pool["delta_unit"] == DELTA_UNIT
    assert pool["delta_lifetime_spent_units"] == to_delta_units(7e-7)
    history = runner.invoke(app, ["budget", "history", "--ledger", str(db), "--json"])
    charge = next(e for e in json.loads(history.output) if e["event"] == "charge")
    assert "δ = 7e-07" in charge["detail"]


def test_plan_states_the_plan_delta_against_the_delta_cap(tmp_path: Path) -> None:
    config = tmp_path / "dpllm.toml"
    config.write_text(POOLS, encoding="utf-8")
    result = runner.invoke(app, ["plan", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["planned_delta"] == 0.0
    assert data["delta_window_cap"] == pytest.approx(5e-7)
    assert data["delta_lifetime_cap"] == pytest.approx(2e-6)
    text = runner.invoke(app, ["plan", "--config", str(config)])
    assert "planned δ = 0 of a δ window cap of 5e-07" in text.output
