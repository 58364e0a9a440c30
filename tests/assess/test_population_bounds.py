"""Planning assumptions out of any sensible range are refused, not divided by zero."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from dpllm.assess.planning import Population
from dpllm.cli import app
from dpllm.cli._common import ExitCode
from dpllm.errors import InvalidPrivacyParameter


@pytest.mark.parametrize(
    "changes",
    [{"users": 10**20}, {"records_per_user": math.inf}, {"records_per_user": math.nan}],
)
def test_population_refuses_what_no_population_is(changes: dict[str, float]) -> None:
    with pytest.raises(InvalidPrivacyParameter):
        Population(**changes)  # type: ignore[arg-type]


def test_plan_with_a_huge_user_count_is_a_usage_error() -> None:
    """``dpllm plan --users 10**20`` was ZeroDivisionError (exit 70)."""
    result = CliRunner().invoke(app, ["plan", "--users", str(10**20)])
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "users must be at most" in result.output
