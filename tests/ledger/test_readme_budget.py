"""The README's budget example runs as written and leaves a ledger where it says."""

from __future__ import annotations

from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_readme import sections

    blocks = sections()["The privacy budget"]
    assert blocks, "the budget README lost its Python example"
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, str(README), "exec"), {"__name__": "readme"})
    assert (tmp_path / ".dpllm" / "ledger.db").exists()
