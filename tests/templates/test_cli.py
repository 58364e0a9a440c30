"""``dpllm templates lint`` and ``dpllm templates preview``."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dpllm.cli import app
from dpllm.templates import SEEDED_MARK

runner = CliRunner()


def test_lint_defaults_to_the_builtin_prompts() -> None:
    result = runner.invoke(app, ["templates", "lint"])
    assert result.exit_code == 0, result.output
    assert "6 template(s) lint clean" in result.output


def test_lint_reports_findings_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.j2"
    bad.write_text("{#- dpllm\nreleases: r\n-#}\nMean: {{ r }}\n{{ r.value }}\n", encoding="utf-8")
    good = tmp_path / "sub" / "good.j2"
    good.parent.mkdir()
    good.write_text("{#- dpllm\nreleases: r\n-#}\n{{ r|approx }}\n", encoding="utf-8")
    result = runner.invoke(app, ["templates", "lint", str(tmp_path)])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.startswith(str(bad))]
    assert lines[0].startswith(f"{bad}:4:10: DP001 release 'r' is printed without a DP filter")
    assert lines[1].startswith(f"{bad}:5:6: DP002 '.value' reads a raw number")
    assert str(good) not in result.output


def test_lint_rejects_a_missing_path(tmp_path: Path) -> None:
    result = runner.invoke(app, ["templates", "lint", str(tmp_path / "nope.j2")])
    assert result.exit_code == 2


def test_preview_a_prompt_in_both_languages() -> None:
    en = runner.invoke(app, ["templates", "preview", "weekly"])
    assert en.exit_code == 0, en.output
    assert "===== weekly/user.en.j2 (synthetic releases) =====" in en.output
    assert SEEDED_MARK in en.output and "Mean rating: 4.1 ± 0.3 stars" in en.output
    zh = runner.invoke(app, ["templates", "preview", "weekly", "--lang", "zh"])
    assert zh.exit_code == 0, zh.output
    assert "平均评分：4.1 ± 0.3 星" in zh.output and "1 星：少于 5 条" in zh.output


def test_preview_a_template_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.j2"
    path.write_text(
        "{#- dpllm\nreleases: signups\nmetadata: week\n-#}\n{{ week }}: {{ signups|count }}\n"
    )
    result = runner.invoke(app, ["templates", "preview", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output == f"{SEEDED_MARK}\n2026-W01: about 57\n"


def test_preview_refuses_a_template_with_findings(tmp_path: Path) -> None:
    path = tmp_path / "raw.j2"
    path.write_text("{#- dpllm\nreleases: signups\n-#}\n{{ signups }}\n")
    result = runner.invoke(app, ["templates", "preview", str(path)])
    assert result.exit_code == 1
    assert "DP001" in result.output


def test_preview_rejects_an_unknown_language() -> None:
    assert runner.invoke(app, ["templates", "preview", "weekly", "--lang", "fr"]).exit_code == 2
