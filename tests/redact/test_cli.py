from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dpllm.cli import app


def test_redact_file_and_stdin(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("我叫张伟，手机号13812345678", encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(app, ["redact", str(source), "--lang", "zh"])
    assert result.exit_code == 0, result.output
    assert "我叫[姓名]，手机号[手机号]" in result.output
    masked = runner.invoke(app, ["redact", "-", "--operator", "mask"], input="call 415-555-0134")
    assert masked.exit_code == 0 and "call ***-***-****" in masked.output


def test_redact_missing_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["redact", str(tmp_path / "nope.txt")])
    assert result.exit_code == 2
