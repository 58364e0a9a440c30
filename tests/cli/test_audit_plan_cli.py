"""``dpllm audit``, ``dpllm audit utility``, ``dpllm plan`` and ``dpllm plan simulate``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpllm.cli import app

runner = CliRunner(env={"COLUMNS": "200"})
FAST = ["--samples", "100000", "--select", "10000", "--game-trials", "20000"]


def test_audit_passes_and_planted_bug_fails() -> None:
    ok = runner.invoke(app, ["audit", *FAST])
    assert ok.exit_code == 0, ok.output
    assert "audit passed" in ok.output and "mean_rating" in ok.output
    bad = runner.invoke(app, ["audit", *FAST, "--planted-bug"])
    assert bad.exit_code == 1
    assert "planted_bug_count" in bad.output and "VIOLATION" in bad.output


def _is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_utility_writes_png(tmp_path: Path) -> None:
    out = tmp_path / "u.png"
    res = runner.invoke(
        app,
        [
            "audit",
            "utility",
            "--query",
            "mean_rating",
            "--eps",
            "0.05:5",
            "--points",
            "5",
            "--trials",
            "50",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "synthetic data" in res.output
    assert _is_png(out)


def test_utility_on_real_data_says_it_reads_it(tmp_path: Path) -> None:
    from dpllm.assess.audit_suite import write_feedback_sqlite
    from dpllm.assess.utility import synthetic_records

    data = tmp_path / "real.db"
    write_feedback_sqlite(data, synthetic_records(users=200))
    res = runner.invoke(
        app,
        [
            "audit",
            "utility",
            "--data",
            str(data),
            "--eps",
            "0.5,1",
            "--trials",
            "20",
            "--out",
            str(tmp_path / "r.png"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "reads the real data" in res.output and "NOT differentially private" in res.output


def test_utility_rejects_bad_range(tmp_path: Path) -> None:
    res = runner.invoke(app, ["audit", "utility", "--eps", "5:0.1", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2


def test_plan_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no dpllm.toml here, no $DPLLM_CONFIG: the defaults
    res = runner.invoke(app, ["plan", "--target", "mean_rating=2%"])
    assert res.exit_code == 0, res.output
    assert "mean_rating" in res.output and "suggested split" in res.output
    assert "no dpllm.toml found" in res.output
    # An explicit -c that does not exist is an error, not the defaults.
    res = runner.invoke(app, ["plan", "--config", str(tmp_path / "none.toml")])
    assert res.exit_code == 2 and "cannot read config file" in res.output


@pytest.mark.parametrize("weeks", [4, 30])
def test_plan_simulate_plots(tmp_path: Path, weeks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no dpllm.toml: the default plan and pools
    schedule = tmp_path / "s.toml"
    schedule.write_text(
        f'weeks = {weeks}\nstart = "2026-W01"\n[[run]]\nquery = "mean_rating"\nrefreshes = 1\n'
        '[[run]]\nquery = "feedback_count"\nrepeats = 2\n',
        encoding="utf-8",
    )
    out = tmp_path / "burn.png"
    res = runner.invoke(
        app,
        [
            "plan",
            "simulate",
            "--schedule",
            str(schedule),
            "--out",
            str(out),
            "--fail-on-exhaust",
        ],
    )
    assert _is_png(out)
    if weeks == 4:
        assert res.exit_code == 0, res.output
        assert "fits the budget" in res.output
    else:
        assert res.exit_code == 3  # budget refused
        assert "exhausts the budget" in res.output
