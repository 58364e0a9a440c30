from __future__ import annotations

import datetime as dt
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpllm import DataError, InvalidWindow, Window, WindowNotReady
from dpllm.windows import (
    MAX_YEAR,
    MIN_YEAR,
    Readiness,
    iso_week,
    parse_week,
    previous_weeks,
    week_bounds,
)

# Digits that Python's ``\d`` and ``int()`` accept, from scripts that look nothing
# like ASCII: full-width, Arabic-Indic, extended Arabic-Indic, Devanagari, Bengali,
# Thai, mathematical bold.
UNICODE_ZEROS = [0xFF10, 0x0660, 0x06F0, 0x0966, 0x09E6, 0x0E50, 0x1D7CE]


def unicode_digits(text: str, zero: int, rng: random.Random) -> str:
    """Replace some or all ASCII digits of ``text`` by the digits starting at ``zero``."""
    return "".join(
        chr(zero + int(c)) if c.isascii() and c.isdigit() and rng.random() < 0.7 else c
        for c in text
    )


def spellings(key: str, rng: random.Random) -> list[str]:
    """Other ways to write the week ``key`` that a sloppy or hostile caller might send."""
    year, week = key[:4], key[6:]
    out = [
        key + "\n",
        key + "\r\n",
        key + " ",
        " " + key,
        key + "\t",
        key + "\x00",
        key + "\u200b",
        "\ufeff" + key,
        key.lower(),
        f"{year}-Ｗ{week}",
        f"{year}W{week}",
        f"{year}-{week}",
        f"{year}_W{week}",
        f"{year}/W{week}",
        f"{year} W{week}",
        f"{year}–W{week}",
        f"{year}‐W{week}",
        f"{year}-W{int(week)}",
        f"{year}-W0{week}",
        f"0{year}-W{week}",
        f"+{year}-W{week}",
        f"{year}-W{week}-1",
        f"{year}-W{week}\u00a0",
        f"{year}-w{week}\n",
    ]
    for zero in UNICODE_ZEROS:
        out.append(unicode_digits(key, zero, rng))
        out.append("".join(chr(zero + int(c)) if c.isdigit() else c for c in key))
    return [s for s in out if s != key]


def test_iso_week_round_trip() -> None:
    assert iso_week(dt.date(2026, 11, 19)) == "2026-W47"
    start, end = week_bounds("2026-W47")
    assert start == dt.datetime(2026, 11, 16, tzinfo=dt.UTC)
    assert end - start == dt.timedelta(days=7)
    assert previous_weeks("2026-W02", 3) == ["2025-W52", "2026-W01", "2026-W02"]


@pytest.mark.parametrize(
    "bad",
    [
        "2026-47",
        "2026-W54",
        "2025-W53",
        "2025-W00",
        "W47",
        "",
        "2026-W47 ",
        "2026-W47\n",
        "２０２６-W４７",
        "٢٠٢٦-W٤٧",
        "२०२६-W४७",
        "2026-w47",
        "9999-W52",
        "1999-W10",
        "2101-W01",
        "0000-W01",
    ],
)
def test_malformed_week_keys(bad: str) -> None:
    with pytest.raises(InvalidWindow):
        parse_week(bad)
    with pytest.raises(DataError):  # InvalidWindow is a DataError (and a ValueError)
        Window.parse(bad)


def test_window_is_a_frozen_value_with_one_canonical_form() -> None:
    w = Window.parse("2026-W47")
    assert w == Window(2026, 47) and hash(w) == hash(Window(2026, 47))
    assert str(w) == w.key == "2026-W47" and Window.parse(w) is w
    assert Window(2026, 1).key == "2026-W01"
    with pytest.raises(AttributeError):
        w.week = 48  # type: ignore[misc]
    assert Window(2026, 47) < Window(2026, 48) < Window(2027, 1)
    assert w.shift(1) == Window(2026, 48) and w.shift(-47) == Window(2025, 52)
    assert [x.key for x in Window(2026, 2).previous(3)] == ["2025-W52", "2026-W01", "2026-W02"]
    assert Window(MIN_YEAR, 1).previous(3) == (Window(MIN_YEAR, 1),)  # nothing before 2000
    for bad in (True, 47.0, "47"):
        with pytest.raises(InvalidWindow):
            Window(2026, bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidWindow):
        Window.parse(202647)


def test_week_53_only_in_long_years() -> None:
    long_years = [
        y for y in range(MIN_YEAR, MAX_YEAR + 1) if dt.date(y, 12, 28).isocalendar()[1] == 53
    ]
    assert 2020 in long_years and 2026 in long_years and 2025 not in long_years
    for year in range(MIN_YEAR, MAX_YEAR + 1):
        if year in long_years:
            assert Window.parse(f"{year}-W53").last_day.isocalendar()[:2] == (year, 53)
        else:
            with pytest.raises(InvalidWindow, match=f"{year} has ISO weeks 1–52"):
                Window.parse(f"{year}-W53")


def test_aware_datetimes_fall_in_their_utc_week() -> None:
    # Monday 00:30 in UTC+8 is still Sunday in UTC: the previous week.
    shanghai = dt.timezone(dt.timedelta(hours=8))
    moment = dt.datetime(2026, 11, 23, 0, 30, tzinfo=shanghai)
    assert Window.of(moment) == Window(2026, 47)


def test_readiness_needs_an_injected_today() -> None:
    w = Window(2026, 47)  # Mon 2026-11-16 … Sun 2026-11-22
    assert w.readiness(dt.date(2026, 11, 15)) is Readiness.FUTURE
    assert w.readiness(dt.date(2026, 11, 16)) is Readiness.CURRENT
    assert w.readiness(dt.date(2026, 11, 22)) is Readiness.CURRENT
    assert w.readiness(dt.date(2026, 11, 23)) is Readiness.COMPLETE
    assert w.require_ready(dt.date(2026, 11, 23)) is Readiness.COMPLETE
    with pytest.raises(WindowNotReady, match="not complete until 2026-11-23"):
        w.require_ready(dt.date(2026, 11, 20))
    assert w.require_ready(dt.date(2026, 11, 20), allow_incomplete=True) is Readiness.CURRENT
    with pytest.raises(WindowNotReady, match="has not begun"):
        w.require_ready(dt.date(2026, 11, 1), allow_incomplete=True)


# -- properties ------------------------------------------------------------------------------
weeks = st.dates(min_value=dt.date(MIN_YEAR, 1, 3), max_value=dt.date(MAX_YEAR, 12, 28)).map(
    Window.of
)
digits = st.sampled_from([chr(z + d) for z in [0x30, *UNICODE_ZEROS] for d in range(10)])
noise = st.sampled_from(
    [
        "-",
        "W",
        "w",
        "Ｗ",
        " ",
        "\n",
        "\r",
        "\t",
        "\x00",
        "\u200b",
        "\ufeff",
        "_",
        "/",
        "–",
        "+",
        "\u00a0",
    ]
)


@given(st.text(st.one_of(digits, noise), max_size=12))
@settings(max_examples=600, deadline=None)
def test_any_text_is_refused_or_is_exactly_its_own_canonical_key(text: str) -> None:
    try:
        w = Window.parse(text)
    except InvalidWindow:
        return
    assert w.key == text  # nothing is normalised: only the canonical spelling parses


@given(weeks, st.randoms(use_true_random=False))
@settings(max_examples=300, deadline=None)
def test_every_spelling_of_a_data_week_maps_to_one_ledger_window(
    week: Window, rng: random.Random
) -> None:
    keys = {Window.parse(week.key).key}
    for text in spellings(week.key, rng):
        try:
            keys.add(Window.parse(text).key)
        except InvalidWindow:
            pass
    assert keys == {week.key}
    # …and the window covers exactly the data week's seven days.
    assert Window.of(week.first_day) == Window.of(week.last_day) == week
    assert Window.of(week.end) == week.shift(1)


@pytest.mark.parametrize("today", ["2026-12-01", 20261201, None])
def test_require_ready_refuses_a_today_that_is_not_a_date(today: object) -> None:
    with pytest.raises(DataError, match="today must be a datetime.date"):
        Window.parse("2026-W47").require_ready(today)  # type: ignore[arg-type]
