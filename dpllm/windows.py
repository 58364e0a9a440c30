"""Windows: the :class:`Window` value (an ISO week), parsed once at the edge.

A window is the unit of the per-window budget cap and part of every query id.
It is always computed from the records' own timestamps, never from the time a
query runs, so the records of two different windows are disjoint and a
per-window cap is a guarantee per user per window.

**One data week = one window = one ledger key = one cache key.** That holds
only if every spelling that reaches dpllm maps to one value, so text is parsed
here, once, where it enters (CLI option, HTTP parameter, config, Python API),
into a :class:`Window`; everything below takes the value. The parser is strict:

* ASCII digits only (``[0-9]``, never ``\\d``, which matches every Unicode
  decimal digit — ``２０２６-W４７``, Arabic-Indic, Devanagari — and ``int()``
  would then read them as the same week under another key);
* a whole-string match (``re.fullmatch``, never ``$``, which also matches
  before a trailing newline);
* exactly the canonical spelling ``YYYY-Www`` (upper-case ``W``, two-digit
  week, no whitespace): anything else is refused rather than normalised, so
  there is nothing to normalise differently in two places;
* a real ISO week (``W53`` only in the years that have one) in the years
  :data:`MIN_YEAR` to :data:`MAX_YEAR` (no overflow at ``9999-W52``).

Refusals raise :class:`~dpllm.errors.InvalidWindow` (HTTP 400, CLI exit 2),
before anything is read or charged.

**Completeness.** A window is *complete* once its last day has passed (UTC):
``today >= window.end.date()``. :meth:`Window.readiness` tells whether it is
complete, current or future; the clock is never read here — the edges pass
``today``.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from dataclasses import dataclass

from dpllm.errors import DataError, InvalidWindow, WindowNotReady

__all__ = [
    "MAX_YEAR",
    "MIN_YEAR",
    "Readiness",
    "Window",
    "is_week_key",
    "iso_week",
    "parse_week",
    "previous_weeks",
    "utc_today",
    "week_bounds",
]

MIN_YEAR = 2000
"""The first ISO year a window may lie in."""
MAX_YEAR = 2100
"""The last ISO year a window may lie in."""

_WEEK_RE = re.compile(r"([0-9]{4})-W([0-9]{2})", re.ASCII)
_MAX_SHOWN = 40  # characters of a refused value quoted back in an error


class Readiness(enum.StrEnum):
    """Where a window stands relative to ``today``."""

    COMPLETE = "complete"
    """Its last day has passed: all its data can be in."""
    CURRENT = "current"
    """It contains ``today``: its data is still arriving."""
    FUTURE = "future"
    """It has not begun."""


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


@dataclass(frozen=True, slots=True, order=True)
class Window:
    """An ISO week: the one canonical key of a data window.

    Args:
        year: the ISO year (:data:`MIN_YEAR` … :data:`MAX_YEAR`).
        week: the ISO week number (1 … 52, or 53 in long years).

    Raises:
        InvalidWindow: not a real ISO week in the supported range.

    ``str(window)`` is the canonical key (``2026-W47``): the ledger window, the
    query-id component and the cache key. Two windows are equal exactly when
    they cover the same seven days.
    """

    year: int
    week: int

    def __post_init__(self) -> None:
        for name in ("year", "week"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidWindow(f"a window's {name} must be an int, got {_shown(value)}")
        if not MIN_YEAR <= self.year <= MAX_YEAR:
            raise InvalidWindow(
                f"window year {self.year} is outside {MIN_YEAR}–{MAX_YEAR}; "
                "give an ISO week such as 2026-W47"
            )
        try:
            dt.date.fromisocalendar(self.year, self.week, 1)
        except ValueError:
            last = 53 if _has_week_53(self.year) else 52
            raise InvalidWindow(
                f"{self.year} has ISO weeks 1–{last}, not {self.week}; "
                "give an ISO week such as 2026-W47"
            ) from None

    # -- construction ------------------------------------------------------------------
    @classmethod
    def parse(cls, text: object) -> Window:
        """The window a canonical key names: ``"2026-W47"`` → ``Window(2026, 47)``.

        Raises:
            InvalidWindow: anything but the exact spelling ``YYYY-Www`` with
                ASCII digits, of a real ISO week in the supported range.
        """
        if isinstance(text, Window):
            return text
        if not isinstance(text, str):
            raise InvalidWindow(
                f"a window must be an ISO week like '2026-W47', got {type(text).__name__}"
            )
        m = _WEEK_RE.fullmatch(text)
        if m is None:
            raise InvalidWindow(
                f"malformed window {_shown(text)}; expected an ISO week written exactly like "
                "'2026-W47' (ASCII digits, upper-case W, no spaces)"
            )
        return cls(int(m.group(1)), int(m.group(2)))

    @classmethod
    def of(cls, moment: dt.date | dt.datetime) -> Window:
        """The window containing a date, or a datetime (converted to UTC when aware)."""
        if isinstance(moment, dt.datetime) and moment.tzinfo is not None:
            moment = moment.astimezone(dt.UTC)
        year, week, _ = moment.isocalendar()
        return cls(year, week)

    # -- the key -----------------------------------------------------------------------
    @property
    def key(self) -> str:
        """The canonical key, ``YYYY-Www``."""
        return f"{self.year:04d}-W{self.week:02d}"

    def __str__(self) -> str:
        return self.key

    # -- the days ----------------------------------------------------------------------
    @property
    def first_day(self) -> dt.date:
        """Monday of the week."""
        return dt.date.fromisocalendar(self.year, self.week, 1)

    @property
    def last_day(self) -> dt.date:
        """Sunday of the week."""
        return self.first_day + dt.timedelta(days=6)

    @property
    def start(self) -> dt.datetime:
        """Monday 00:00 UTC (inclusive)."""
        return dt.datetime.combine(self.first_day, dt.time(), dt.UTC)

    @property
    def end(self) -> dt.datetime:
        """The next Monday 00:00 UTC (exclusive)."""
        return self.start + dt.timedelta(days=7)

    def shift(self, weeks: int) -> Window:
        """The window ``weeks`` later (earlier when negative)."""
        return Window.of(self.first_day + dt.timedelta(weeks=weeks))

    def previous(self, count: int) -> tuple[Window, ...]:
        """``count`` windows ending with this one, oldest first (earlier than
        :data:`MIN_YEAR` are left out)."""
        out: list[Window] = []
        for i in range(count - 1, -1, -1):
            day = self.first_day - dt.timedelta(weeks=i)
            if day.isocalendar()[0] >= MIN_YEAR:
                out.append(Window.of(day))
        return tuple(out)

    # -- completeness ------------------------------------------------------------------
    def readiness(self, today: dt.date) -> Readiness:
        """Whether the window has ended, is running, or lies ahead, as of ``today`` (UTC)."""
        if today > self.last_day:
            return Readiness.COMPLETE
        if today >= self.first_day:
            return Readiness.CURRENT
        return Readiness.FUTURE

    def require_ready(self, today: dt.date, *, allow_incomplete: bool = False) -> Readiness:
        """Refuse a window whose data cannot be complete (nothing read or charged).

        Args:
            today: the current UTC date, read from the clock by the edge.
            allow_incomplete: accept the current, unfinished week (its release
                then says so).

        Returns:
            The window's :class:`Readiness` (``COMPLETE``, or ``CURRENT`` when allowed).

        Raises:
            WindowNotReady: a future window, or the current one without ``allow_incomplete``.
            DataError: ``today`` is not a ``datetime.date``.
        """
        if not isinstance(today, dt.date):
            raise DataError(f"today must be a datetime.date (UTC), got {today!r}")
        state = self.readiness(today)
        if state is Readiness.FUTURE:
            raise WindowNotReady(
                f"window {self} has not begun (today is {today.isoformat()}); "
                "a future week has no data to release"
            )
        if state is Readiness.CURRENT and not allow_incomplete:
            raise WindowNotReady(
                f"window {self} is not complete until {self.end.date().isoformat()} "
                f"(today is {today.isoformat()}); ask for the last complete week, or opt "
                "in with --allow-incomplete / allow_incomplete=true (the release will say so)"
            )
        return state


def utc_today() -> dt.date:
    """Today's UTC date: the clock read that **edges** make and pass down as ``today``.

    Called by the CLI, the server, and the Python API's entry points
    (:class:`~dpllm.data.stats.StatsRunner`, :func:`~dpllm.weekly.job.run_weekly`)
    when their caller gives no ``today``; nothing below them reads a clock.
    """
    return dt.datetime.now(dt.UTC).date()


def _has_week_53(year: int) -> bool:
    return dt.date(year, 12, 28).isocalendar()[1] == 53


# -- the string helpers, kept for callers that hold a key ---------------------------------
def iso_week(moment: dt.date | dt.datetime) -> str:
    """The ISO-week key (``YYYY-Www``) of a date or datetime."""
    return Window.of(moment).key


def is_week_key(key: object) -> bool:
    """True when ``key`` is a canonical window key."""
    try:
        Window.parse(key)
    except InvalidWindow:
        return False
    return True


def parse_week(key: object) -> tuple[int, int]:
    """``"2026-W47"`` → ``(2026, 47)`` (strict: see :meth:`Window.parse`).

    Raises:
        InvalidWindow: the key is not a canonical ISO week in range.
    """
    w = Window.parse(key)
    return w.year, w.week


def week_bounds(key: Window | str) -> tuple[dt.datetime, dt.datetime]:
    """The half-open UTC range ``[Monday 00:00, next Monday 00:00)`` of a week."""
    w = Window.parse(key)
    return w.start, w.end


def previous_weeks(key: Window | str, count: int) -> list[str]:
    """``count`` week keys ending with ``key`` (oldest first)."""
    return [w.key for w in Window.parse(key).previous(count)]
