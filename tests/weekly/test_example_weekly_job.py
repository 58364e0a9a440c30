"""examples/weekly_job.py runs, and names the source of its text truthfully (no model → not "the model")."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.weekly.helpers import shared_redactor

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "weekly_job.py"


def test_weekly_job_example_says_no_model_wrote_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("weekly_job_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "build_redactor", lambda settings: shared_redactor())
    module.main(tmp_path / "weekly-example")
    out = capsys.readouterr().out
    runs = [line for line in out.splitlines() if line.startswith(("first run:", "rerun:"))]
    assert len(runs) == 2, out
    for line in runs:
        assert "text from the model" not in line
        assert "offline writer, no language model" in line
    assert "nothing (cached releases)" in runs[1]
