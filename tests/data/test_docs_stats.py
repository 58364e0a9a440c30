"""The statistics page's example runs as written, against demo data, and charges as it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpllm.data.stats import default_catalogue
from dpllm.ledger.sqlite import SQLiteLedger
from tests.markdown_blocks import ROOT, run_page

PAGE = ROOT / "docs" / "concepts" / "statistics.md"


def test_docs_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran, scope = run_page(PAGE, tmp_path, monkeypatch)  # the page's demo-data set-up
    assert ran, "the statistics page lost its Python example"
    weekly = scope["weekly"]
    assert isinstance(weekly, dict) and set(weekly) >= {"mean_rating", "rating_histogram"}
    assert weekly["mean_rating"] == scope["mean"]  # served from the cache
    # The catalogue's ε (the mean charged once), each query under its own query id.
    total = sum(q.cost.micro for q in default_catalogue().values())
    assert SQLiteLedger("ledger.db").balance("stats", "2026-W47").spent == total
