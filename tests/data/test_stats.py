"""The statistics runner against a real SQLite ledger: caching, refunds, bad input."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pytest

from dpllm.data.engines import SQLiteEngine
from dpllm.data.queries import FeedbackCount, MeanRating, RatingHistogram
from dpllm.data.sql import ColumnMap
from dpllm.data.stats import StatsRunner, default_catalogue, rating_shares, top_k
from dpllm.errors import BudgetExceeded, DataError
from dpllm.ledger.base import PoolSpec
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.privacy.noise import SeededNoise
from dpllm.release import Cost, Measure
from tests.data._helpers import COLUMNS, COURSES, MONDAY, WEEK, Rec, random_records, write_sqlite


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_sqlite(tmp_path / "f.db", random_records(random.Random(3), users=30, heavy=2))


@pytest.fixture
def ledger(tmp_path: Path) -> SQLiteLedger:
    led = SQLiteLedger(tmp_path / "ledger.db")
    led.ensure_pool(PoolSpec("stats", Measure.PURE, window_cap=3_000_000))
    return led


def runner(data: Path, ledger: SQLiteLedger, columns: ColumnMap = COLUMNS) -> StatsRunner:
    return StatsRunner(
        SQLiteEngine(data), ledger, dataset_id="test", pool="stats", columns=columns, salt=b"s"
    )


def spent(ledger: SQLiteLedger, window: str = WEEK) -> int:
    return ledger.balance("stats", window).spent


def test_same_query_and_window_twice_is_one_charge(data: Path, ledger: SQLiteLedger) -> None:
    r = runner(data, ledger)
    q = FeedbackCount(epsilon=0.5)
    first = r.release(q, WEEK)
    assert spent(ledger) == 500_000
    second = runner(data, ledger).release(q, WEEK)  # a new process, same ledger
    assert spent(ledger) == 500_000
    assert second.to_dict() == first.to_dict()
    assert first.fingerprint == r.query_id(q, WEEK)
    assert not first.seeded and first.window == WEEK and first.cost == Cost.pure(0.5)
    # A different window or query is a new charge.
    r.release(q, "2026-W48")
    assert spent(ledger, "2026-W48") == 500_000
    r.release(FeedbackCount(epsilon=0.5, max_records=3), WEEK)
    assert spent(ledger) == 1_000_000


def test_catalogue_releases_everything_with_intervals(data: Path, ledger: SQLiteLedger) -> None:
    cat = default_catalogue(courses=COURSES)
    out = runner(data, ledger).release_all(cat, WEEK)
    assert set(out) == set(cat)
    assert spent(ledger) == sum(q.cost.micro for q in cat.values())
    for rel in out.values():
        for v, (lo, hi) in zip(rel.values, rel.intervals, strict=True):
            assert lo <= v <= hi
    assert 1.0 <= out["mean_rating"].value <= 5.0
    assert out["rating_histogram"].labels == ("1", "2", "3", "4", "5")
    shares = rating_shares(out["rating_histogram"])
    for s in shares.values():
        lo, hi = s.interval
        assert 0.0 <= lo <= s.value <= hi <= 1.0
        assert s.cost == out["rating_histogram"].cost
    top = top_k(out["topic_counts"], 3)
    assert len(top) == 3 and set(top) <= set(out["topic_counts"].labels)


def test_trend_charges_each_week(data: Path, ledger: SQLiteLedger) -> None:
    weeks = ["2026-W46", "2026-W47", "2026-W48"]
    out = runner(data, ledger).trend(MeanRating(epsilon=0.4), weeks)
    assert list(out) == weeks
    assert [spent(ledger, w) for w in weeks] == [400_000] * 3


def test_empty_week_still_releases(data: Path, ledger: SQLiteLedger) -> None:
    rel = runner(data, ledger).release(RatingHistogram(epsilon=1.0), "2025-W01")
    assert len(rel.values) == 5 and spent(ledger, "2025-W01") == 1_000_000


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (ColumnMap(rating="stars"), "unknown column 'stars'"),
        (ColumnMap(table="nope"), "no such table"),
    ],
)
def test_failures_before_reading_charge_nothing(
    data: Path, ledger: SQLiteLedger, columns: ColumnMap, message: str
) -> None:
    with pytest.raises(DataError, match=message):
        runner(data, ledger, columns).release(MeanRating(epsilon=0.5), WEEK)
    assert spent(ledger) == 0


def test_bad_window_and_missing_course_column_charge_nothing(
    data: Path, ledger: SQLiteLedger
) -> None:
    from dpllm.data.queries import CourseBreakdown

    r = runner(data, ledger, ColumnMap())
    with pytest.raises(DataError, match="ISO week"):
        r.release(FeedbackCount(epsilon=0.5), "last week")
    with pytest.raises(DataError, match="course column"):
        r.release(CourseBreakdown(epsilon=0.5, courses=COURSES), WEEK)
    assert spent(ledger) == 0


def test_budget_exceeded_charges_nothing(data: Path, ledger: SQLiteLedger) -> None:
    with pytest.raises(BudgetExceeded):
        runner(data, ledger).release(FeedbackCount(epsilon=5.0), WEEK)
    assert spent(ledger) == 0


def test_reject_policy_releases_and_excludes_out_of_range_ratings(
    data: Path, ledger: SQLiteLedger
) -> None:
    # The fixture data holds ratings such as 0, 6 and 9.5 in this week. A query
    # that failed on them would reveal one user's rating with certainty (ε = ∞
    # for that bit): 'reject' excludes them as records instead.
    rel = runner(data, ledger).release(MeanRating(epsilon=0.5, out_of_range="reject"), WEEK)
    assert 1.0 <= rel.value <= 5.0
    assert spent(ledger) == 500_000


def test_null_nan_and_out_of_range_ratings(tmp_path: Path, ledger: SQLiteLedger) -> None:
    t = MONDAY + dt.timedelta(hours=1)
    recs = [
        Rec("a", None, "x", t, None),
        Rec("b", float("nan"), "x", t, None),
        Rec("c", 9.0, "x", t, None),  # clamped to 5
        Rec("d", -1.0, "x", t, None),  # clamped to 1
        Rec("e", 3.0, "x", t, None),
    ]
    path = write_sqlite(tmp_path / "bad.db", recs)
    ledger.mark_test_ledger()  # seeded releases: a test ledger only
    ledger.ensure_pool(PoolSpec("test_only", Measure.PURE, window_cap=10**10))
    r = StatsRunner(
        SQLiteEngine(path),
        ledger,
        dataset_id="bad",
        pool="test_only",
        salt=b"s",
        noise=SeededNoise(1),
    )
    hist = r.release(RatingHistogram(epsilon=1000.0), WEEK)
    assert hist.seeded
    assert [round(v) for v in hist.values] == [1, 0, 1, 0, 1]
    dropped = r.release(RatingHistogram(epsilon=1000.0, out_of_range="drop"), WEEK)
    assert [round(v) for v in dropped.values] == [0, 0, 1, 0, 0]
    rejected = r.release(RatingHistogram(epsilon=1000.0, out_of_range="reject"), WEEK)
    assert [round(v) for v in rejected.values] == [0, 0, 1, 0, 0]  # rejected as records
    mean = r.release(MeanRating(epsilon=1000.0, out_of_range="reject"), WEEK)
    assert round(mean.value, 1) == 3.0  # only e's rating counts


def test_query_ids_differ_by_dataset_and_window(data: Path, ledger: SQLiteLedger) -> None:
    a = runner(data, ledger)
    b = StatsRunner(SQLiteEngine(data), ledger, dataset_id="other", pool="stats")
    q = FeedbackCount(epsilon=0.5)
    ids = {a.query_id(q, WEEK), a.query_id(q, "2026-W48"), b.query_id(q, WEEK)}
    assert len(ids) == 3
    assert a.query_id(q, WEEK) == a.query_id(FeedbackCount(epsilon=0.5), WEEK)
    assert hash(q) == hash(FeedbackCount(epsilon=0.5))


def test_a_delta_query_is_refused_unless_accepted(data: Path, ledger: SQLiteLedger) -> None:
    from dpllm.data.topics import NewKeywords
    from dpllm.errors import InvalidPrivacyParameter

    q = NewKeywords(epsilon=0.5, delta=1e-6)
    r = runner(data, ledger)
    for call in (
        lambda: r.release(q, WEEK),
        lambda: r.release_all({"kw": q, "count": FeedbackCount(epsilon=0.1)}, WEEK),
        lambda: r.trend(q, [WEEK]),
    ):
        with pytest.raises(InvalidPrivacyParameter, match="δ = 1e-06.*accept_delta=True"):
            call()
    assert spent(ledger) == 0  # refused before any charge, for the whole set
    rel = r.release(q, WEEK, accept_delta=True)
    assert rel.delta == 1e-6 and rel.cost == Cost.pure(0.5)
    assert spent(ledger) == 500_000
    assert ledger.balance("stats", WEEK).delta_spent == 10**9  # δ is charged (units of 1e-15)
    charges = [e.detail for e in ledger.history() if e.event == "charge"]
    assert any("δ = 1e-06" in d and "charged to the δ caps" in d for d in charges)
    # Pure queries need no acceptance, and their descriptions carry no δ.
    r.release(FeedbackCount(epsilon=0.1), WEEK)
    details = [e.detail for e in ledger.history() if e.event == "charge"]
    assert sum("δ" in d for d in details) == 1


def test_an_accepted_delta_is_capped_per_window(data: Path, ledger: SQLiteLedger) -> None:
    """The default δ window cap (1e-6) takes one NewKeywords per window; a second is
    refused like an ε overspend: nothing spent, nothing read."""
    from dpllm.data.topics import NewKeywords
    from dpllm.errors import BudgetExceeded

    r = runner(data, ledger)
    r.release(NewKeywords(epsilon=0.2, delta=1e-6), WEEK, accept_delta=True)
    before = ledger.balance("stats", WEEK)
    with pytest.raises(BudgetExceeded, match="δ window cap"):
        r.release(NewKeywords(epsilon=0.2, delta=1e-6, max_keywords=2), WEEK, accept_delta=True)
    assert ledger.balance("stats", WEEK) == before
    with pytest.raises(BudgetExceeded, match="δ"):  # the batch path refuses the same way
        r.release_many({"kw": NewKeywords(epsilon=0.2, delta=1e-7)}, [WEEK], accept_delta=True)
    assert ledger.balance("stats", WEEK) == before
    r.release(NewKeywords(epsilon=0.2, delta=1e-6), "2026-W48", accept_delta=True)  # a new window


def test_query_defaults_are_the_config_defaults() -> None:
    from dpllm.config import BoundsSettings
    from dpllm.data.queries import CourseBreakdown
    from dpllm.data.topics import TopicCounts

    b = BoundsSettings()
    assert FeedbackCount(epsilon=1.0).max_records == b.max_records_per_user
    assert RatingHistogram(epsilon=1.0).max_records == b.max_records_per_user
    course = CourseBreakdown(epsilon=1.0, courses=("a", "b"))
    assert (course.max_courses, course.max_records) == (
        b.max_courses_per_user,
        b.max_records_per_user,
    )
    # Fewer courses than the bound: a user counts in at most all of them.
    assert course.mechanisms()[0].sensitivity == 2 * b.max_records_per_user  # type: ignore[attr-defined]
    assert TopicCounts(epsilon=1.0).max_topics == b.max_topics_per_user
    assert MeanRating(epsilon=1.0).out_of_range == b.out_of_range


def test_every_query_exposes_its_mechanisms() -> None:
    from dpllm.data.queries import ActiveUsers, CourseBreakdown
    from dpllm.data.topics import NewKeywords, TopicCounts, TopTopics

    for q in (
        FeedbackCount(epsilon=0.2),
        ActiveUsers(epsilon=0.2),
        MeanRating(epsilon=0.2),
        RatingHistogram(rho=0.2),
        CourseBreakdown(epsilon=0.2, courses=COURSES),
        TopicCounts(epsilon=0.2),
        NewKeywords(epsilon=0.2),
    ):
        mechs = q.mechanisms()
        assert mechs, q.name
        total = mechs[0].cost
        for m in mechs[1:]:
            total = total + m.cost
        assert total == q.cost, q.name  # the cost is exactly what the mechanisms charge
    assert len(MeanRating(epsilon=0.2).mechanisms()) == 2
    assert TopTopics(epsilon=0.2).mechanisms() == ()  # a selection: no noisy value


# -- windows: parsed once, complete only, the clock injected ---------------------------------
MID_WEEK = dt.date(2026, 11, 19)  # a Thursday of 2026-W47
AFTER = dt.date(2026, 12, 1)


def _at(data: Path, ledger: SQLiteLedger, today: dt.date, **kw: object) -> StatsRunner:
    return StatsRunner(
        SQLiteEngine(data),
        ledger,
        dataset_id="test",
        pool="stats",
        columns=COLUMNS,
        salt=b"s",
        today=today,
        **kw,  # type: ignore[arg-type]
    )


def test_future_and_unfinished_windows_are_refused_before_any_charge(
    data: Path, ledger: SQLiteLedger
) -> None:
    from dpllm.errors import WindowNotReady

    r = _at(data, ledger, MID_WEEK)
    q = FeedbackCount(epsilon=0.5)
    with pytest.raises(WindowNotReady, match="not complete until 2026-11-23"):
        r.release(q, WEEK)
    with pytest.raises(WindowNotReady, match="has not begun"):
        r.release(q, "2026-W48")
    with pytest.raises(WindowNotReady):
        r.release_all({"c": q}, WEEK)
    with pytest.raises(WindowNotReady):
        r.trend(q, ["2026-W46", WEEK])
    opted = _at(data, ledger, MID_WEEK, allow_incomplete=True)
    with pytest.raises(WindowNotReady, match="has not begun"):
        opted.release(q, "2026-W48")  # a future week, never
    assert spent(ledger) == 0 and spent(ledger, "2026-W48") == 0
    assert ledger.history() == [] or all(e.event == "pool" for e in ledger.history())


def test_an_unfinished_window_on_opt_in_says_so_and_is_another_query(
    data: Path, ledger: SQLiteLedger
) -> None:
    q = FeedbackCount(epsilon=0.5)
    early = _at(data, ledger, MID_WEEK, allow_incomplete=True).release(q, WEEK)
    assert early.complete is False and early.to_dict()["complete"] is False
    assert any("not complete" in n and "allow_incomplete" in n for n in early.notes)
    final = _at(data, ledger, AFTER).release(q, WEEK)
    assert final.complete is True and final.fingerprint != early.fingerprint
    assert spent(ledger) == 1_000_000  # two reads of the week, two charges
    # Opting in changes nothing for a week that is complete.
    assert _at(data, ledger, AFTER, allow_incomplete=True).release(q, WEEK) == final


def test_a_window_is_one_value_whatever_reaches_the_runner(
    data: Path, ledger: SQLiteLedger
) -> None:
    from dpllm.errors import InvalidWindow
    from dpllm.windows import Window

    r = _at(data, ledger, AFTER)
    q = FeedbackCount(epsilon=0.5)
    first = r.release(q, Window(2026, 47))
    assert r.release(q, "2026-W47") == first
    for bad in ("２０２６-W４７", "2026-W47\n", "2026-w47", "٢٠٢٦-W٤٧", "2026-W047"):
        with pytest.raises(InvalidWindow):
            r.release(q, bad)
    assert spent(ledger) == 500_000
    assert {b.window for b in ledger.balances() if b.pool == "stats"} == {"2026-W47"}


# -- the query id covers the data it reads ------------------------------------------------------
def test_wrong_empty_file_then_right_file_is_another_query(
    tmp_path: Path, data: Path, ledger: SQLiteLedger
) -> None:
    empty = write_sqlite(tmp_path / "empty.db", [])
    q = FeedbackCount(epsilon=0.5)
    wrong = _at(empty, ledger, AFTER)
    right = _at(data, ledger, AFTER)  # same dataset_id, same query, same week
    first = wrong.release(q, WEEK)
    assert wrong.query_id(q, WEEK) != right.query_id(q, WEEK)
    second = right.release(q, WEEK)
    assert second.fingerprint != first.fingerprint
    assert second.value > first.value + 20  # read from the right file, not the cache
    assert spent(ledger) == 1_000_000


def test_query_id_covers_table_and_column_map(data: Path, ledger: SQLiteLedger) -> None:
    q = MeanRating(epsilon=0.5)
    base = _at(data, ledger, AFTER)
    ids = {base.query_id(q, WEEK)}
    for cols in (
        ColumnMap(table="feedback", user="user_id", rating="text", text="text", timestamp="ts"),
        ColumnMap(table="other", user="user_id", rating="rating", text="text", timestamp="ts"),
        ColumnMap(table="feedback", user="rating", rating="rating", text="text", timestamp="ts"),
    ):
        r = StatsRunner(
            SQLiteEngine(data), ledger, dataset_id="test", pool="stats", columns=cols, today=AFTER
        )
        ids.add(r.query_id(q, WEEK))
    assert len(ids) == 4
    # …and the query's own parameters: bounds and policies.
    assert base.query_id(RatingHistogram(epsilon=0.4), WEEK) != base.query_id(
        RatingHistogram(epsilon=0.4, max_records=3), WEEK
    )
    assert base.query_id(MeanRating(epsilon=0.5), WEEK) != base.query_id(
        MeanRating(epsilon=0.5, out_of_range="reject"), WEEK
    )


def test_releases_name_their_bounded_estimand(data: Path, ledger: SQLiteLedger) -> None:
    r = _at(data, ledger, AFTER)
    out = r.release_all(
        {"c": FeedbackCount(epsilon=0.2, max_records=3), "m": MeanRating(epsilon=0.5),
         "h": RatingHistogram(epsilon=0.4)},
        WEEK,
    )  # fmt: skip
    assert out["c"].estimand == "feedback records, at most 3 per user"
    assert out["m"].estimand.startswith("mean of per-user mean ratings")
    shares = rating_shares(out["h"])
    assert "4–5 star" in shares["share_positive"].estimand
    # Stored with the release, served back from the cache.
    assert ledger.get_release(out["c"].fingerprint).estimand == out["c"].estimand  # type: ignore[union-attr]
    assert r.release(FeedbackCount(epsilon=0.2, max_records=3), WEEK) == out["c"]


@pytest.mark.parametrize("confidence", ["0.9", None, True, b"0.9"])
def test_a_wrong_typed_confidence_is_an_invalid_privacy_parameter(
    data: Path, ledger: SQLiteLedger, confidence: object
) -> None:
    from dpllm.errors import InvalidPrivacyParameter

    with pytest.raises(InvalidPrivacyParameter, match="confidence"):
        StatsRunner(
            SQLiteEngine(data), ledger, dataset_id="test", pool="stats",
            confidence=confidence,  # type: ignore[arg-type]
        )  # fmt: skip
