"""``dpllm guard eval``: per-category recall and false flags on the generated set."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from dpllm.cli import app


def test_eval_json_one_category() -> None:
    result = CliRunner().invoke(app, ["guard", "eval", "--json", "--category", "en fractions"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert set(rows) >= {"all", "en fractions"}
    assert rows["all"]["violating"] > 0 and rows["all"]["compliant"] > 0
    assert rows["en fractions"]["recall"] >= 0.98
    assert rows["en fractions"]["false_flag_rate"] <= 0.02


def test_eval_table_lists_categories_and_domains() -> None:
    result = CliRunner().invoke(app, ["guard", "eval", "--category", "dates", "--misses", "3"])
    assert result.exit_code == 0, result.output
    assert "recall" in result.output and "domain: shop" in result.output
