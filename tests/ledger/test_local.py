"""Local-DP charges in the ledger: one row per (metric, window, user), user never in clear."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from dpllm.errors import DataError, DuplicateReport, InvalidPrivacyParameter
from dpllm.release import Cost
from tests.ledger.conftest import WEEK, LedgerFactory

USER = "student-42@example.edu"


def test_record_and_sum_per_user_and_window(ledger: Any) -> None:
    assert ledger.local_spent(USER, WEEK) == Cost.zero()  # nothing recorded yet
    ledger.record_local(user=USER, window=WEEK, metric="rating", cost=Cost.pure(1.0))
    ledger.record_local(user=USER, window=WEEK, metric="minutes", cost=Cost.pure(0.5))
    ledger.record_local(user=USER, window="2026-W48", metric="rating", cost=Cost.pure(1.0))
    ledger.record_local(user="someone else", window=WEEK, metric="rating", cost=Cost.pure(2.0))
    assert ledger.local_spent(USER, WEEK) == Cost.pure(1.5)
    assert ledger.local_spent(USER, "2026-W48") == Cost.pure(1.0)
    assert ledger.local_spent("nobody", WEEK) == Cost.zero()


def test_duplicate_raises_and_records_nothing(ledger: Any) -> None:
    ledger.record_local(user=USER, window=WEEK, metric="rating", cost=Cost.pure(1.0))
    with pytest.raises(DuplicateReport, match="only one report"):
        ledger.record_local(user=USER, window=WEEK, metric="rating", cost=Cost.pure(0.1))
    assert ledger.local_spent(USER, WEEK) == Cost.pure(1.0)
    assert [e.event for e in ledger.history()].count("ldp_report") == 1


def test_audit_and_rows_hold_a_keyed_hash_not_the_user(ledger_factory: LedgerFactory) -> None:
    ledger = ledger_factory()
    ledger.record_local(user=USER, window=WEEK, metric="rating", cost=Cost.pure(1.0), analyst="a")
    [event] = [e for e in ledger.history() if e.event == "ldp_report"]
    assert (event.analyst, event.pool, event.window, event.micro) == ("a", "", WEEK, 1_000_000)
    assert event.query_id.startswith("h:") and len(event.query_id) == 34
    assert "student" not in repr(ledger.history())
    assert "student" not in repr(ledger._query("SELECT * FROM local_reports"))
    # Another handle (process, replica) derives the same key: the limit holds across them.
    other = ledger_factory()
    with pytest.raises(DuplicateReport):
        other.record_local(user=USER, window=WEEK, metric="rating", cost=Cost.pure(1.0))
    assert other.local_spent(USER, WEEK) == Cost.pure(1.0)


def test_concurrent_reports_of_one_user_count_once(ledger_factory: LedgerFactory) -> None:
    ledger_factory().record_local(user="warm-up", window=WEEK, metric="m", cost=Cost.pure(1))
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def send() -> None:
        ledger = ledger_factory()
        barrier.wait()
        try:
            ledger.record_local(user=USER, window=WEEK, metric="rating", cost=Cost.pure(1.0))
            outcomes.append("ok")
        except DuplicateReport:
            outcomes.append("dup")

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["dup"] * 7 + ["ok"]
    assert ledger_factory().local_spent(USER, WEEK) == Cost.pure(1.0)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"user": ""}, InvalidPrivacyParameter),
        ({"metric": ""}, InvalidPrivacyParameter),
        ({"cost": Cost.zcdp(0.5)}, InvalidPrivacyParameter),
        ({"cost": Cost.zero()}, InvalidPrivacyParameter),
        ({"cost": 1.0}, InvalidPrivacyParameter),
        ({"window": "2026-47"}, DataError),
        ({"analyst": ""}, InvalidPrivacyParameter),
    ],
)
def test_bad_input_records_nothing(ledger: Any, kwargs: dict[str, Any], error: type) -> None:
    args: dict[str, Any] = {
        "user": USER, "window": WEEK, "metric": "rating", "cost": Cost.pure(1.0), **kwargs,
    }  # fmt: skip
    with pytest.raises(error):
        ledger.record_local(**args)
    assert ledger._query("SELECT COUNT(*) FROM local_reports")[0][0] == 0
