"""``dpllm weekly`` and ``dpllm init`` through Typer's CliRunner: outputs and exit codes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from dpllm.cli import app
from dpllm.cli.weekly import (
    EXIT_BUDGET,
    EXIT_CONFIG,
    EXIT_DATA,
    EXIT_MODEL,
    example_config,
    last_complete_week,
)
from dpllm.config import Settings
from dpllm.data.demo import DemoData
from dpllm.testing import FakeOpenAIServer
from tests.weekly.helpers import (
    WEEK,
    demo_config,
    make_demo,
    pii_values,
    scan_outputs,
    shared_redactor,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DemoData]:
    return make_demo(tmp_path_factory.mktemp("demo-cli"))


@pytest.fixture(autouse=True)
def fast_redactor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Share one Presidio redactor between the commands (each would load spaCy again)."""
    monkeypatch.setattr("dpllm.weekly.job.build_redactor", lambda settings: shared_redactor())


def _config(folder: Path, db: Path, *, extra: str = "", weekly_cap: str = "1.8") -> Path:
    return demo_config(folder, db, weekly_cap=weekly_cap, extra=extra)


def _weekly(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["weekly", *args])
    return result.exit_code, result.output


def test_weekly_writes_the_report_and_a_rerun_is_free(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    db, data = demo
    config = _config(tmp_path, db)
    code, out = _weekly("-c", str(config), "--week", WEEK)
    assert code == 0, out
    assert "charged ε = 1.6 for 5 new release(s)" in out and "weekly ε 0.2 left" in out
    folder = tmp_path / "reports" / WEEK
    assert sorted(p.name for p in folder.iterdir()) == [
        "rating_histogram.png",
        "report.json",
        "report.md",
        "trend.png",
    ]
    for png in ("rating_histogram.png", "trend.png"):
        with Image.open(folder / png) as img:
            assert img.format == "PNG" and img.size[0] > 300
            assert set(img.info) <= {"Title", "dpi"} and "dpllm" in img.info["Title"]
    figures = json.loads((folder / "report.json").read_text("utf-8"))["releases"]

    code, out = _weekly("-c", str(config), "--week", WEEK)
    assert code == 0, out
    assert "spent nothing" in out
    again = json.loads((folder / "report.json").read_text("utf-8"))["releases"]
    assert {k: v["values"] for k, v in again.items()} == {
        k: v["values"] for k, v in figures.items()
    }
    assert scan_outputs(tmp_path / "reports", pii_values(data)) == []


def test_exhausted_budget_exits_3_and_spends_nothing(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    db, _ = demo
    code, out = _weekly("-c", str(_config(tmp_path, db, weekly_cap="0.5")), "--week", WEEK)
    assert code == EXIT_BUDGET
    assert "'weekly' has ε 0.5 left" in out and "asks ε 1.6" in out and "nothing was spent" in out
    assert not (tmp_path / "reports").exists()


def test_config_and_data_errors_have_their_codes(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    db, _ = demo
    bad = tmp_path / "bad.toml"
    bad.write_text("[plan.queries]\nmean_rating = -1\n", encoding="utf-8")
    code, out = _weekly("-c", str(bad), "--week", WEEK)
    assert code == EXIT_CONFIG and "plan.queries.mean_rating, line 2" in out
    code, out = _weekly("-c", str(tmp_path / "missing.toml"))
    assert code == EXIT_CONFIG and "dpllm init" in out
    code, out = _weekly("-c", str(_config(tmp_path, tmp_path / "none.db")), "--week", WEEK)
    assert code == EXIT_DATA and "does not exist" in out
    code, out = _weekly("-c", str(_config(tmp_path, db)), "--week", "2026-W99")
    assert code == EXIT_CONFIG and "2026 has ISO weeks 1–53, not 99" in out
    code, out = _weekly("--week", WEEK, "--last-complete")
    assert code == 2


def test_model_failure_exits_5_after_writing_the_fallback(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    db, _ = demo
    with FakeOpenAIServer() as srv:
        srv.enqueue_error(503, "overloaded")
        extra = f'\n[model]\nprovider = "openai"\nbase_url = "{srv.base_url}"\nmax_retries = 0\n'
        text = example_config().replace('path = "demo.db"', f'path = "{db}"')
        text = text[: text.index("[model]")] + extra.lstrip() + text[text.index("[redaction]") :]
        (tmp_path / "dpllm.toml").write_text(text, encoding="utf-8")
        code, out = _weekly("-c", str(tmp_path / "dpllm.toml"), "--week", WEEK)
    assert code == EXIT_MODEL
    assert "model failure" in out and "a fallback report" in out and "was written" in out
    doc = json.loads((tmp_path / "reports" / WEEK / "report.json").read_text("utf-8"))
    assert doc["source"] == "fallback" and "ModelBadResponse" in doc["model_error"]


def test_init_writes_the_example_config(tmp_path: Path) -> None:
    target = tmp_path / "dpllm.toml"
    result = CliRunner().invoke(app, ["init", str(target)])
    assert result.exit_code == 0 and target.read_text("utf-8") == example_config()
    assert CliRunner().invoke(app, ["init", str(target)]).exit_code == EXIT_CONFIG
    assert CliRunner().invoke(app, ["init", str(target), "--force"]).exit_code == 0
    settings = Settings.load(target)
    assert [q.name for q in settings.plan][:2] == ["feedback_count", "active_users"]


def test_examples_config_is_the_packaged_one() -> None:
    assert (EXAMPLES / "dpllm.toml").read_text("utf-8") == example_config()


@pytest.mark.parametrize(
    ("today", "week"),
    [
        (dt.date(2026, 11, 23), "2026-W47"),  # a Monday: last week just ended
        (dt.date(2026, 11, 29), "2026-W47"),  # a Sunday: this week is not over
        (dt.date(2026, 1, 1), "2025-W52"),
        (dt.date(2027, 1, 4), "2026-W53"),
    ],
)
def test_last_complete_week(today: dt.date, week: str) -> None:
    assert last_complete_week(today) == week


def test_help_documents_the_exit_codes() -> None:
    out = CliRunner().invoke(app, ["weekly", "--help"]).output
    assert "3 budget exhausted" in " ".join(out.split())
    assert " ".join(out.split()).count("Exit codes") == 1


def test_weekly_json_progress_and_guard_reads_report_json(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    db, _ = demo
    config = _config(tmp_path, db)
    result = CliRunner().invoke(app, ["weekly", "-c", str(config), "--week", WEEK, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)  # stdout holds the JSON only
    assert summary["week"] == WEEK and summary["source"] == "offline"
    assert summary["charged"] and summary["report_json"].endswith("report.json")
    # piped: plain progress lines on stderr, one per step
    assert "loading the redactor (Presidio, spaCy, jieba) …" in result.stderr
    assert "\x1b[" not in result.stderr
    # the report's own releases document checks the report's own text
    text = tmp_path / "summary.txt"
    text.write_text(summary["text"], encoding="utf-8")
    check = CliRunner().invoke(app, ["guard", "check", "-r", summary["report_json"], str(text)])
    assert check.exit_code == 0, check.output
    doc = json.loads(Path(summary["report_json"]).read_text("utf-8"))
    assert doc["schema"] == "dpllm.releases/1" and set(doc["derived"]) == {
        "share_positive",
        "share_negative",
    }
    quiet = CliRunner().invoke(app, ["weekly", "-c", str(config), "--week", WEEK, "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert "spent nothing" not in quiet.stdout and quiet.stdout.strip()
