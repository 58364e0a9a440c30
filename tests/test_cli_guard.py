"""``dpllm guard check``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpllm.cli import app
from dpllm.release import Cost, Release

RELEASE = Release(
    name="responses",
    values=(160.0,),
    intervals=((150.0, 170.0),),
    mechanism="discrete_laplace",
    noise_scale=4.0,
    cost=Cost.pure(0.5),
    fingerprint="fp",
    unit="responses",
)


@pytest.fixture(params=["list", "report"])
def releases_file(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    path = tmp_path / "releases.json"
    records = [RELEASE.to_dict()]
    path.write_text(json.dumps(records if request.param == "list" else {"releases": records}))
    return path


def test_violations_exit_1(releases_file: Path, tmp_path: Path) -> None:
    text = tmp_path / "out.txt"
    text.write_text("We got 157 responses.\n共157条反馈。", encoding="utf-8")
    result = CliRunner().invoke(
        app, ["guard", "check", "--releases", str(releases_file), str(text)]
    )
    assert result.exit_code == 1
    assert "line 1 [over-precise]" in result.output and "about 160 responses" in result.output
    assert "line 2 [over-precise]" in result.output


def test_clean_text_from_stdin_exits_0(releases_file: Path) -> None:
    result = CliRunner().invoke(
        app, ["guard", "check", "-r", str(releases_file), "-"], input="About 160 responses."
    )
    assert result.exit_code == 0 and result.output.startswith("ok:")


def test_json_output(releases_file: Path) -> None:
    result = CliRunner().invoke(
        app, ["guard", "check", "-r", str(releases_file), "--json"], input="157条"
    )
    assert result.exit_code == 1
    [item] = json.loads(result.output)
    assert (item["rule"], item["allowed"], item["allowed_range"]) == (
        "over-precise",
        "约160条",
        "150–170条",
    )


def test_bad_releases_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"nope": 1}')
    result = CliRunner().invoke(app, ["guard", "check", "-r", str(bad)], input="x")
    assert result.exit_code == 2


def _share(name: str) -> Release:
    return Release(
        name=f"rating_histogram.{name}",
        values=(0.72,),
        intervals=((0.66, 0.78),),
        mechanism="derived",
        noise_scale=4.0,
        cost=Cost.pure(0.5),
        fingerprint="fp-hist",
        kind="proportion",
        unit="share",
    )


def test_reads_the_weekly_report_json_and_stats_json(tmp_path: Path) -> None:
    from dpllm.release import RELEASES_SCHEMA, releases_document

    doc = releases_document(
        {"responses": RELEASE}, {"share_positive": _share("share_positive")}, window="2026-W47"
    )
    report = {**doc, "text": "…", "attempts": [], "budget": [], "week": "2026-W47"}
    report["releases"] = {n: {**r, "charged_this_run": True} for n, r in report["releases"].items()}
    stats = {**doc, "budget": {"pool": "stats", "spent_micro": 1}}
    for payload in (report, stats):
        assert payload["schema"] == RELEASES_SCHEMA
        path = tmp_path / "doc.json"
        path.write_text(json.dumps(payload), encoding="utf-8")
        result = CliRunner().invoke(
            app, ["guard", "check", "-r", str(path), "--json"], input="About 72% liked it; 157."
        )
        assert result.exit_code == 1, result.output
        [item] = json.loads(result.stdout)
        assert item["release"] == "responses" and item["mention"] == "157"


def test_old_share_names_and_old_stats_shape_are_still_read(tmp_path: Path) -> None:
    from dpllm.cli.guard import load_releases

    old = {"share_high": _share("share_high").to_dict(), "_budget": {"spent_micro": 1}}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    [release] = load_releases(path)
    assert release.name == "rating_histogram.share_positive"
