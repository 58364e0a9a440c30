"""Windows: keys derived from the data's timestamps (ISO weeks by default).

A window is a label like ``2026-W47``. It is always computed from the records'
own timestamps — never from the time a query runs — so the records of two
different windows are disjoint and a per-window budget cap is a guarantee per
user per window.
"""

from __future__ import annotations

import datetime as dt
import re

from dpllm.errors import DataError

__all__ = ["iso_week", "parse_week", "week_bounds", "previous_weeks", "is_week_key"]

_WEEK_RE = re.compile(r"^(\d{4})-W(\d{2})$")


def iso_week(moment: dt.date | dt.datetime) -> str:
    """The ISO-week key (``YYYY-Www``) of a date or datetime."""
    year, week, _ = moment.isocalendar()
    return f"{year:04d}-W{week:02d}"


def is_week_key(key: str) -> bool:
    try:
        parse_week(key)
    except DataError:
        return False
    return True


def parse_week(key: str) -> tuple[int, int]:
    """``"2026-W47"`` → ``(2026, 47)``.

    Raises:
        DataError: the key is not a valid ISO week (``2026-W53`` only exists in
            long years).
    """
    if not isinstance(key, str):
        raise DataError(f"a window key must be a string like '2026-W47', got {key!r}")
    m = _WEEK_RE.match(key)
    if not m:
        raise DataError(f"malformed window key {key!r}; expected an ISO week like '2026-W47'")
    year, week = int(m.group(1)), int(m.group(2))
    try:
        dt.date.fromisocalendar(year, week, 1)
    except ValueError:
        raise DataError(f"window key {key!r} is not a week of {year}") from None
    return year, week


def week_bounds(key: str) -> tuple[dt.datetime, dt.datetime]:
    """The half-open UTC range ``[Monday 00:00, next Monday 00:00)`` of a week key."""
    year, week = parse_week(key)
    start = dt.datetime.combine(dt.date.fromisocalendar(year, week, 1), dt.time(), dt.UTC)
    return start, start + dt.timedelta(days=7)


def previous_weeks(key: str, count: int) -> list[str]:
    """``count`` week keys ending with ``key`` (oldest first)."""
    start, _ = week_bounds(key)
    return [iso_week(start - dt.timedelta(weeks=i)) for i in range(count - 1, -1, -1)]
