"""The README's statistics example runs as written, against demo data."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpllm.data.demo import generate_demo, write_demo
from dpllm.data.stats import default_catalogue
from dpllm.ledger.sqlite import SQLiteLedger

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_readme import sections

    blocks = sections()["Feedback statistics (`dpllm stats`)"]
    assert blocks, "the stats README lost its Python example"
    monkeypatch.chdir(tmp_path)
    write_demo(generate_demo(users=200, weeks=2, seed=1, end_week="2026-W47"), "demo.db")
    scope: dict[str, object] = {"__name__": "readme"}
    for block in blocks:
        exec(compile(block, str(README), "exec"), scope)
    weekly = scope["weekly"]
    assert isinstance(weekly, dict) and set(weekly) >= {"mean_rating", "rating_histogram"}
    assert weekly["mean_rating"] == scope["mean"]  # served from the cache
    # The catalogue's ε (the mean charged once), each query under its own query id.
    total = sum(q.cost.micro for q in default_catalogue().values())
    assert SQLiteLedger("ledger.db").balance("stats", "2026-W47").spent == total
