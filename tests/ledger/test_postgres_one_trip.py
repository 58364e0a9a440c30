"""The PostgreSQL one-round-trip charge (migration 0004) against the general path.

The server-side function repeats the general path's statements for a new query
id; these tests pin that both write the same rows, and that everything the
function does not handle itself — a refusal, a changed path, a charge row that
is not a stored release — is judged by the general path with nothing written
twice.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from dpllm.errors import BudgetExceeded
from dpllm.ledger.base import release_once
from dpllm.ledger.postgres import PostgresLedger
from dpllm.release import Cost
from tests.ledger.conftest import WEEK, compute_for, parts_sum, pure_pool

pytestmark = pytest.mark.postgres
COST = Cost.pure(0.1)


class Spy:
    """Counts what the one-trip path answered ("charged", "cached" or None → general)."""

    def __init__(self, ledger: PostgresLedger, monkeypatch: pytest.MonkeyPatch) -> None:
        self.outcomes: Counter[str] = Counter()
        original = ledger._charge_in_one_trip

        def spy(*args: Any, **kwargs: Any) -> Any:
            outcome = original(*args, **kwargs)
            if outcome is None:
                self.outcomes["general"] += 1
            else:
                self.outcomes["cached" if outcome.cached is not None else "charged"] += 1
            return outcome

        monkeypatch.setattr(ledger, "_charge_in_one_trip", spy)


def _ledger(url: str, *, cap: float = 10.0) -> PostgresLedger:
    ledger = PostgresLedger(url)
    ledger.ensure_pool(pure_pool("org", cap))
    ledger.ensure_pool(pure_pool("team", cap, parent="org", lifetime=cap))
    return ledger


def _rows(ledger: PostgresLedger, query_id: str) -> tuple[Any, ...]:
    charge = ledger._query(
        "SELECT pool, window_key, measure, micro, analyst, description, status, ticket "
        "FROM charges WHERE query_id = :q",
        {"q": query_id},
    )
    parts = ledger._query(
        "SELECT pool, window_key, micro FROM charge_parts WHERE query_id = :q ORDER BY pool",
        {"q": query_id},
    )
    audit = [
        (e.event, e.analyst, e.pool, e.window, e.micro, e.detail)
        for e in ledger.history()
        if e.query_id == query_id
    ]
    return charge, parts, audit


def test_one_trip_writes_what_the_general_path_writes(
    pg_ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = _ledger(pg_ledger_url)
    spy = Spy(ledger, monkeypatch)
    ledger._path_cache.clear()  # the first charge reads the path: general path
    for qid in ("general", "fast"):
        release_once(
            ledger, query_id=qid, pool="team", window=WEEK, cost=COST,
            compute=compute_for(qid, COST), analyst="ana", description="weekly count",
        )  # fmt: skip
    assert spy.outcomes == Counter(charged=1)
    general, fast = _rows(ledger, "general"), _rows(ledger, "fast")
    assert general == fast
    assert [event for event, *_ in fast[2]] == ["charge", "release"]
    for pool in ("team", "org"):
        assert ledger.balance(pool, WEEK).spent == 2 * COST.micro == parts_sum(ledger, pool, WEEK)
    assert ledger.lifetime_spent("team") == 2 * COST.micro


def test_cache_hit_in_one_trip(pg_ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = _ledger(pg_ledger_url)
    first = release_once(
        ledger, query_id="q", pool="team", window=WEEK, cost=COST, compute=compute_for("q", COST)
    )
    spy = Spy(ledger, monkeypatch)
    again = release_once(
        ledger, query_id="q", pool="team", window=WEEK, cost=COST,
        compute=compute_for("q", COST, value=-1.0), analyst="bo",
    )  # fmt: skip
    assert again == first
    assert spy.outcomes == Counter(cached=1)
    assert ledger.balance("team", WEEK).spent == COST.micro
    hits = [e for e in ledger.history() if e.event == "cache_hit"]
    assert [(e.analyst, e.pool, e.window, e.micro) for e in hits] == [("bo", "team", WEEK, 0)]


def test_refusal_is_judged_by_the_general_path_and_spends_nothing(
    pg_ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = _ledger(pg_ledger_url, cap=0.15)  # room for one charge of 0.1
    release_once(
        ledger, query_id="a", pool="team", window=WEEK, cost=COST, compute=compute_for("a", COST)
    )
    spy = Spy(ledger, monkeypatch)
    with pytest.raises(BudgetExceeded):
        release_once(
            ledger, query_id="b", pool="team", window=WEEK, cost=COST,
            compute=compute_for("b", COST),
        )  # fmt: skip
    assert spy.outcomes == Counter(general=1)
    assert "team" in ledger._path_cache  # a refusal keeps the (still valid) path
    assert ledger._query("SELECT count(*) FROM charges WHERE query_id = 'b'") == [(0,)]
    assert ledger.balance("team", WEEK).spent == COST.micro
    assert ledger.balance("org", WEEK).spent == COST.micro
    assert ledger.lifetime_spent("team") == COST.micro
    refusals = [e for e in ledger.history() if e.event == "refuse" and e.query_id == "b"]
    assert len(refusals) == 1  # written once, by the general path


def test_a_path_changed_by_another_replica_is_charged_on_the_new_path(
    pg_ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = _ledger(pg_ledger_url)
    release_once(
        ledger, query_id="a", pool="team", window=WEEK, cost=COST, compute=compute_for("a", COST)
    )
    other = PostgresLedger(pg_ledger_url)  # another replica moves "team" under a new parent
    other.ensure_pool(pure_pool("division", 10.0))
    other.ensure_pool(pure_pool("team", 10.0, parent="division", lifetime=10.0))
    spy = Spy(ledger, monkeypatch)
    release_once(
        ledger, query_id="b", pool="team", window=WEEK, cost=COST, compute=compute_for("b", COST)
    )
    assert spy.outcomes == Counter(general=1)  # the stale cached path was caught
    assert ledger.balance("division", WEEK).spent == COST.micro
    assert ledger.balance("org", WEEK).spent == COST.micro  # only "a"
    parts = ledger._query("SELECT pool FROM charge_parts WHERE query_id = 'b' ORDER BY pool")
    assert parts == [("division",), ("team",)]
    # and the next charge is one trip again, on the fresh path
    release_once(
        ledger, query_id="c", pool="team", window=WEEK, cost=COST, compute=compute_for("c", COST)
    )
    assert spy.outcomes == Counter(general=1, charged=1)
    assert ledger.balance("division", WEEK).spent == 2 * COST.micro


TRICKY = [
    "it's a \\ back'slash; DROP TABLE pools; --",
    "E'\\x27' $$ $fn$ %s %(x)s {a,b} \"q\"",
    "分析师 — ünïcödé ✓",
]


@pytest.mark.parametrize("text", TRICKY)
def test_values_are_stored_as_given_in_one_trip(
    pg_ledger_url: str, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """The one-trip charge writes its values into a simple query as literals; whatever
    the text, what is stored is exactly what was given (and nothing else runs)."""
    ledger = _ledger(pg_ledger_url)
    release_once(
        ledger, query_id="warm", pool="team", window=WEEK, cost=COST,
        compute=compute_for("warm", COST),
    )  # fmt: skip
    spy = Spy(ledger, monkeypatch)
    release_once(
        ledger, query_id=text, pool="team", window=WEEK, cost=COST,
        compute=compute_for(text, COST), analyst=text, description=text,
    )  # fmt: skip
    assert spy.outcomes == Counter(charged=1)
    charge, parts, audit = _rows(ledger, text)
    assert charge == [("team", WEEK, "pure", COST.micro, text, text, "released", None)]
    assert audit[0] == ("charge", text, "team", WEEK, COST.micro, f"pure; {text}")
    assert len(parts) == 2
    assert ledger.balance("org", WEEK).spent == 2 * COST.micro


def test_a_connection_left_inside_a_transaction_is_never_reused(pg_ledger_url: str) -> None:
    """An interrupt mid-statement can leave a connection in a transaction; checked back
    in, it is closed, and the next charge gets a clean one."""
    ledger = _ledger(pg_ledger_url)
    raw = ledger._checkout()
    raw.execute(b"BEGIN")
    ledger._checkin(raw)
    assert raw.closed and raw not in ledger._idle
    release_once(
        ledger, query_id="q", pool="team", window=WEEK, cost=COST, compute=compute_for("q", COST)
    )
    assert ledger.balance("team", WEEK).spent == COST.micro


def test_idle_sockets_are_checked_whatever_their_number() -> None:
    """select() fails above fd 1023; a busy server process has more descriptors."""
    import os
    import resource
    import socket

    from dpllm.ledger.postgres import _readable

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= 1100:
        pytest.skip(f"RLIMIT_NOFILE is {soft}; cannot open a descriptor above 1024")
    left, right = socket.socketpair()
    high = os.dup2(left.fileno(), 1090)
    try:
        assert _readable(high) is False
        right.sendall(b"x")
        assert _readable(high) is True
    finally:
        os.close(high)
        left.close()
        right.close()


def _general_store_not_used(*args: Any) -> bool:
    raise AssertionError("the general path's store ran")


def test_one_trip_store_writes_what_the_general_store_writes(
    pg_ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL stores a release with its audit line in one statement; the rows are the
    general path's, and a second store of the same query id writes nothing."""
    from dpllm.ledger._rows import release_to_json
    from dpllm.ledger._sql_ledger import SQLLedger
    from tests.ledger.conftest import make_release

    ledger = _ledger(pg_ledger_url)
    for qid in ("general", "fast"):
        with ledger.charging(query_id=qid, pool="team", window=WEEK, cost=COST) as charge:
            charge.data_read()
            if qid == "general":
                text = release_to_json(make_release("same", COST))
                assert SQLLedger._store_release(ledger, qid, text, "count") is True
                charge._stored = True  # stored behind the handle's back, on purpose
            else:
                with monkeypatch.context() as patch:  # one message, not the general path
                    patch.setattr(SQLLedger, "_store_release", _general_store_not_used)
                    charge.store(make_release("same", COST))
    general, fast = _rows(ledger, "general"), _rows(ledger, "fast")
    assert general == fast
    assert [event for event, *_ in fast[2]] == ["charge", "release"]
    assert ledger.get_release("general") == ledger.get_release("fast") == make_release("same", COST)
    # a release already stored: nothing written, the caller is told
    assert ledger._store_release("fast", release_to_json(make_release("x", COST)), "x") is False
    assert ledger.get_release("fast") == make_release("same", COST)
    assert [e.event for e in ledger.history() if e.query_id == "fast"] == ["charge", "release"]
