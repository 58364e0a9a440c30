from __future__ import annotations

import datetime as dt

import pytest

from dpllm import DataError
from dpllm.windows import iso_week, parse_week, previous_weeks, week_bounds


def test_iso_week_round_trip() -> None:
    assert iso_week(dt.date(2026, 11, 19)) == "2026-W47"
    start, end = week_bounds("2026-W47")
    assert start == dt.datetime(2026, 11, 16, tzinfo=dt.UTC)
    assert end - start == dt.timedelta(days=7)
    assert previous_weeks("2026-W02", 3) == ["2025-W52", "2026-W01", "2026-W02"]


@pytest.mark.parametrize(
    "bad", ["2026-47", "2026-W54", "2025-W53", "2025-W00", "W47", "", "2026-W47 "]
)
def test_malformed_week_keys(bad: str) -> None:
    with pytest.raises(DataError):
        parse_week(bad)
