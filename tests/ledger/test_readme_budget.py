"""The budget page's example runs as written and leaves a ledger where it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.markdown_blocks import ROOT, run_page

PAGE = ROOT / "docs" / "concepts" / "budget.md"


def test_docs_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran, _ = run_page(PAGE, tmp_path, monkeypatch)
    assert ran, "the budget page lost its Python example"
    assert (tmp_path / ".dpllm" / "ledger.db").exists()
