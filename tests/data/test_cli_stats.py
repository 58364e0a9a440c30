"""``dpllm demo-data`` and ``dpllm stats`` end to end (CliRunner, real ledger)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpllm.cli import app


def test_demo_then_stats_then_cached_rerun(tmp_path: Path) -> None:
    runner = CliRunner()
    db, ledger = tmp_path / "demo.db", tmp_path / "ledger.db"
    out = runner.invoke(app, ["demo-data", "--out", str(db), "--users", "200", "--weeks", "2"])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "demo.db.pii.json").exists()
    args = ["stats", "--data", str(db), "--ledger", str(ledger), "--week", "2026-W47"]
    first = runner.invoke(app, [*args, "--json"])
    assert first.exit_code == 0, first.output
    payload = json.loads(first.stdout)
    assert payload["schema"] == "dpllm.releases/1" and payload["window"] == "2026-W47"
    assert payload["budget"]["spent_micro"] == 1_600_000  # default catalogue without courses
    assert {"mean_rating", "rating_histogram", "topic_counts"} <= set(payload["releases"])
    assert set(payload["derived"]) == {"share_positive", "share_negative"}
    again = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert again == payload  # cached: same releases, nothing charged again
    table = runner.invoke(app, [*args, "--query", "mean_rating"])
    assert table.exit_code == 0 and "mean_rating" in table.output and "ε spent 1.6" in table.output
    # The output names the data read and what each figure estimates.
    assert f"sqlite:{db.resolve()}" in table.output.replace("\n", "")
    assert "mean of per-user mean ratings" in table.output
    assert payload["data"]["source"] == f"sqlite:{db.resolve()}"


def test_stats_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(
        app,
        [
            "stats",
            "--data",
            str(tmp_path / "no.db"),
            "--ledger",
            str(tmp_path / "l.db"),
            "--week",
            "2026-W47",
        ],
    )
    assert missing.exit_code == 4 and "does not exist" in missing.output  # data unavailable
    bad = runner.invoke(app, ["stats", "--data", "x.db", "--week", "2026-W47", "--query", "nope"])
    assert bad.exit_code != 0


def test_stats_over_many_weeks_is_one_charge_per_week(tmp_path: Path) -> None:
    runner = CliRunner()
    db, ledger = tmp_path / "demo.db", tmp_path / "ledger.db"
    out = runner.invoke(app, ["demo-data", "--out", str(db), "--users", "200", "--weeks", "3"])
    assert out.exit_code == 0, out.output
    base = ["stats", "--data", str(db), "--ledger", str(ledger)]
    many = runner.invoke(app, [*base, "--weeks", "2026-W45..2026-W47", "--json"])
    assert many.exit_code == 0, many.output
    payload = json.loads(many.stdout)
    assert set(payload["weeks"]) == {"2026-W45", "2026-W46", "2026-W47"}
    assert payload["budget"]["spent_micro"] == dict.fromkeys(
        ("2026-W45", "2026-W46", "2026-W47"), 1_600_000
    )
    # One week of the range, asked alone: the same cached release, nothing charged.
    one = json.loads(runner.invoke(app, [*base, "--week", "2026-W46", "--json"]).stdout)
    w46 = payload["weeks"]["2026-W46"]["releases"]
    assert one["releases"]["mean_rating"] == w46["mean_rating"]
    assert one["budget"]["spent_micro"] == 1_600_000
    table = runner.invoke(app, [*base, "--weeks", "2026-W45..2026-W47", "--query", "mean_rating"])
    assert table.exit_code == 0 and "2026-W46" in table.output and "3 weeks" in table.output


def test_week_ranges() -> None:
    import pytest

    from dpllm.cli.stats import parse_weeks
    from dpllm.errors import DataError

    assert parse_weeks("2026-W52..2027-W02") == ["2026-W52", "2026-W53", "2027-W01", "2027-W02"]
    assert parse_weeks("2026-W05..2026-W05") == ["2026-W05"]
    for bad in ("2026-W05", "2026-W05..2026-W04", "2026-W05..nope", "2000-W01..2026-W01"):
        with pytest.raises(DataError):
            parse_weeks(bad)
    runner = CliRunner()
    both = runner.invoke(app, ["stats", "--week", "2026-W05", "--weeks", "2026-W01..2026-W05"])
    assert both.exit_code != 0 and "one of --week" in both.output


def test_many_weeks_refuse_a_dry_run_and_unfinished_weeks_before_anything(tmp_path: Path) -> None:
    import datetime as dt

    from dpllm.cli._common import ExitCode, exit_code_for
    from dpllm.errors import InvalidWindow
    from dpllm.windows import Window

    runner = CliRunner()
    db, ledger = tmp_path / "demo.db", tmp_path / "ledger.db"
    out = runner.invoke(app, ["demo-data", "--out", str(db), "--users", "50", "--weeks", "1"])
    assert out.exit_code == 0, out.output
    base = ["stats", "--data", str(db), "--ledger", str(ledger)]
    # --dry-run prices one week; on a range it used to release every week (and spend).
    dry = runner.invoke(app, [*base, "--weeks", "2026-W45..2026-W47", "--dry-run"])
    assert dry.exit_code == ExitCode.USAGE and "--week" in dry.output, dry.output
    # A range reaching past today is a usage error, refused before the ledger is opened.
    later = Window.of(dt.datetime.now(dt.UTC).date() + dt.timedelta(weeks=3)).key
    ahead = runner.invoke(app, [*base, "--weeks", f"2026-W45..{later}"])
    assert ahead.exit_code == ExitCode.USAGE and "not complete" in ahead.output, ahead.output
    assert not ledger.exists()
    with pytest.raises(InvalidWindow) as caught:
        Window.parse("2030-W01").require_ready(dt.date(2026, 12, 1))
    assert exit_code_for(caught.value) == ExitCode.USAGE  # was 4: "data unavailable"
