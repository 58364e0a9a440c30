"""The ledger's row decoders and request checks (``dpllm.ledger._rows``), without a database.

Every backend reads its rows through these functions, so a decoder that drops a field,
swaps two columns or lets a malformed row through would misreport a charge (its pool,
its cost, its status) on both backends at once. Each field below holds a value no
other field holds, so a swapped column shows. The last tests decode the rows a real
SQLite ledger wrote: what is stored is what is read back.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from dpllm.errors import BudgetExceeded, InvalidPrivacyParameter, LedgerError
from dpllm.ledger import _rows
from dpllm.ledger.base import AuditEvent, ChargeRecord, ChargeStatus, PendingRequest, PoolSpec
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost, Measure, Release
from dpllm.windows import Window
from tests.ledger.conftest import WEEK, make_release, pure_pool

HOST = socket.gethostname()


# ----------------------------------------------------------------------------- times, owners
@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "1970-01-01T00:00:00.000+00:00"),
        (1_764_000_000.2345, "2025-11-24T16:00:00.234+00:00"),
        (59.9999, "1970-01-01T00:00:59.999+00:00"),  # truncated to the ms, never rounded up
    ],
)
def test_iso_time_is_utc_to_the_millisecond(seconds: float, text: str) -> None:
    assert _rows.iso_time(seconds) == text
    assert dt.datetime.fromisoformat(text).utcoffset() == dt.timedelta(0)


def test_owner_id_names_host_process_thread_and_token() -> None:
    owner = _rows.owner_id("tok:en")
    assert owner == f"{HOST}:{os.getpid()}:{threading.get_ident()}:tok:en"


def _dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


NOW = 1_000.0
LIVE = NOW + 30.0  # a lease that has not run out


@pytest.mark.parametrize(
    ("owner", "lease", "gone"),
    [
        (None, LIVE, True),  # nobody holds it
        ("x", None, True),  # no lease
        (f"{HOST}:1:2:t", NOW, True),  # a lease that ends now has run out
        (f"{HOST}:1:2:t", NOW - 0.001, True),
        ("elsewhere:1:2:t", LIVE, False),  # another host: only its lease can tell
        (f"{HOST}:abc:2:t", LIVE, False),  # no pid to look up: wait for the lease
        (f"{HOST}::2:t", LIVE, False),
        (f"{HOST}:-5:2:t", LIVE, False),
    ],
)
def test_owner_gone_by_lease_and_host(owner: str | None, lease: float | None, gone: bool) -> None:
    assert _rows.owner_gone(owner, lease, NOW) is gone


def test_an_owner_process_that_died_is_gone_while_its_lease_runs() -> None:
    pid = _dead_pid()
    assert _rows.owner_gone(f"{HOST}:{pid}:7:tok", LIVE, NOW) is True
    # The same dead pid on another host says nothing about that host.
    assert _rows.owner_gone(f"elsewhere:{pid}:7:tok", LIVE, NOW) is False
    assert _rows.owner_gone(f"{HOST}.other:{pid}:7:tok", LIVE, NOW) is False


def test_a_living_owner_process_is_not_gone() -> None:
    assert _rows.owner_gone(f"{HOST}:{os.getpid()}:1:t", LIVE, NOW) is False
    # Another live process: a child of ours (never a process we did not start, such as
    # our parent — a faulty probe might signal it).
    child = subprocess.Popen(["sleep", "60"])
    try:
        assert _rows.owner_gone(f"{HOST}:{child.pid}:1:t", LIVE, NOW) is False
    finally:
        child.kill()
        child.wait()


def test_an_owner_that_looks_alive_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pid that exists but belongs to another user (EPERM) may be the owner: not gone."""
    pid = _dead_pid()
    probed: list[tuple[int, int]] = []

    def kill(p: int, sig: int) -> None:
        probed.append((p, sig))
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", kill)
    assert _rows.owner_gone(f"{HOST}:{pid}:1:t", LIVE, NOW) is False
    assert probed == [(pid, 0)]  # signal 0: a probe, never a real signal


def test_an_owner_process_is_probed_with_signal_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    probed: list[tuple[int, int]] = []

    def kill(p: int, sig: int) -> None:
        probed.append((p, sig))
        raise ProcessLookupError(3, "No such process")

    monkeypatch.setattr(os, "kill", kill)
    assert _rows.owner_gone(f"{HOST}:4242:1:t", LIVE, NOW) is True
    assert probed == [(4242, 0)]
    # Its own process is never probed (it is alive: it is asking).
    assert _rows.owner_gone(f"{HOST}:{os.getpid()}:1:t", LIVE, NOW) is False
    assert probed == [(4242, 0)]


# ----------------------------------------------------------------------------- requests
GOOD: dict[str, Any] = {
    "query_id": "q",
    "window": WEEK,
    "cost": Cost.pure(0.1),
    "analyst": "ana",
    "description": "weekly count",
}


def test_a_good_request_returns_its_canonical_window() -> None:
    assert _rows.check_request(**GOOD) == WEEK
    assert _rows.check_request(**{**GOOD, "window": Window(2026, 47)}) == WEEK
    assert _rows.check_request(**{**GOOD, "query_id": "q" * 512}) == WEEK
    args = {k: v for k, v in GOOD.items() if k != "description"}
    assert _rows.check_request(**args) == WEEK  # the description is optional


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"query_id": ""}, "query_id must be a non-empty string of ≤ 512 characters, got ''"),
        ({"query_id": "q" * 513}, "query_id must be a non-empty string of ≤ 512 characters"),
        ({"query_id": 7}, "query_id must be a non-empty string of ≤ 512 characters, got 7"),
        ({"query_id": None}, "query_id must be a non-empty string"),
        ({"cost": 0.1}, r"cost must be a dpllm Cost \(Cost.pure\(...\) or Cost.zcdp\(...\)\), "),
        ({"cost": None}, "cost must be a dpllm Cost .*got None"),
        ({"analyst": ""}, "analyst must be a non-empty string, got ''"),
        ({"analyst": 3}, "analyst must be a non-empty string, got 3"),
        ({"description": None}, "description must be a string, got None"),
        ({"query_id": "q\x00"}, "query_id holds a NUL character or an unpaired surrogate, "),
        ({"analyst": "a\x00"}, "analyst holds a NUL character"),
        ({"description": "d\x00"}, "description holds a NUL character"),
        ({"query_id": "q\ud800"}, "query_id holds a NUL character or an unpaired surrogate"),
        ({"analyst": "\udfff"}, "analyst holds"),
        ({"description": "\ud83d"}, "which no ledger database can store"),
    ],
)
def test_a_bad_request_is_refused_with_its_reason(change: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidPrivacyParameter, match=message):
        _rows.check_request(**{**GOOD, **change})


def test_text_any_database_stores_is_accepted() -> None:
    for text in ("总反馈数", "emoji 😀", "tab\tand\nnewline", "ε = 0.5"):
        assert _rows.check_request(**{**GOOD, "description": text, "analyst": text}) == WEEK


# ----------------------------------------------------------------------------- decoders
def test_pool_from_row_reads_every_column() -> None:
    row = ("child", "zcdp", 700, 9000, "parent", 1e-7, "queue", "spare", 55)
    assert _rows.pool_from_row(row) == PoolSpec(
        name="child",
        measure=Measure.ZCDP,
        window_cap=700,
        lifetime_cap=9000,
        parent="parent",
        delta=1e-7,
        on_exceed="queue",
        reserve="spare",
    )


def test_pool_from_row_reads_numbers_as_numbers() -> None:
    """A driver may hand back an integer column as text or a decimal: the spec holds numbers."""
    from decimal import Decimal

    spec = _rows.pool_from_row(("p", "pure", Decimal(700), "9000", None, "0.5", "refuse", None))
    assert (spec.window_cap, spec.lifetime_cap, spec.delta) == (700, 9000, 0.5)
    assert type(spec.window_cap) is int and type(spec.lifetime_cap) is int
    assert type(spec.delta) is float and spec.measure is Measure.PURE


def test_pool_from_row_without_lifetime_cap_parent_or_reserve() -> None:
    spec = _rows.pool_from_row(("root", "pure", 0, None, None, 1e-6, "refuse", None))
    assert (spec.lifetime_cap, spec.parent, spec.reserve, spec.window_cap) == (None, None, None, 0)


@pytest.mark.parametrize(
    "row",
    [
        ("p", "renyi", 1, None, None, 1e-6, "refuse", None),  # unknown measure
        ("p", "pure", -1, None, None, 1e-6, "refuse", None),  # negative cap
        ("p", "pure", 1, -1, None, 1e-6, "refuse", None),
        ("p", "pure", 1, None, None, 1.5, "refuse", None),  # δ outside (0, 1)
        ("p", "pure", 1, None, None, 1e-6, "spend", None),  # unknown on_exceed
        ("p", "pure", 1, None, "p", 1e-6, "refuse", None),  # its own parent
        ("p q", "pure", 1, None, None, 1e-6, "refuse", None),  # not a plain name
        ("p", "pure", "lots", None, None, 1e-6, "refuse", None),
    ],
)
def test_pool_from_row_rejects_a_malformed_row(row: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError):  # ConfigError and the enum's own error are ValueErrors
        _rows.pool_from_row(row)


CHARGE_ROW = (
    "qid", "pool", WEEK, "zcdp", "1250", "ana", "count of x", "data_read",
    "host:1:2:t", 99.5, "tk-1", '{"release": "json"}', "ZeroDivisionError",
)  # fmt: skip


def test_charge_from_row_reads_every_column() -> None:
    record = _rows.charge_from_row(CHARGE_ROW)
    assert record == ChargeRecord(
        query_id="qid",
        pool="pool",
        window=WEEK,
        cost=Cost(Measure.ZCDP, 1250),
        analyst="ana",
        description="count of x",
        status=ChargeStatus.DATA_READ,
        owner="host:1:2:t",
        lease_expires=99.5,
        ticket="tk-1",
        error_class="ZeroDivisionError",
    )
    assert type(record.cost.micro) is int and record.status is ChargeStatus.DATA_READ


def test_charge_from_row_of_a_schema_without_error_class() -> None:
    """A row of the first schema (12 columns, before ``failed``) has no error class."""
    record = _rows.charge_from_row(CHARGE_ROW[:12])
    assert record.error_class is None and record.ticket == "tk-1"
    assert _rows.charge_from_row((*CHARGE_ROW[:12], None)).error_class is None


@pytest.mark.parametrize(
    ("index", "bad"),
    [(3, "renyi"), (4, "-3"), (4, "many"), (7, "spent"), (7, "RELEASED")],
)
def test_charge_from_row_rejects_a_malformed_row(index: int, bad: str) -> None:
    row = list(CHARGE_ROW)
    row[index] = bad
    with pytest.raises(ValueError):  # InvalidPrivacyParameter and the enums' errors
        _rows.charge_from_row(row)


def test_ticket_from_row_reads_every_column() -> None:
    row = ("tk-9", "qid", "pool", WEEK, "pure", "300000", "ana", "why", "approved")
    assert _rows.ticket_from_row(row) == PendingRequest(
        ticket="tk-9",
        query_id="qid",
        pool="pool",
        window=WEEK,
        cost=Cost(Measure.PURE, 300_000),
        analyst="ana",
        description="why",
        status="approved",
    )


@pytest.mark.parametrize(("index", "bad"), [(4, "renyi"), (5, "-1"), (5, "x")])
def test_ticket_from_row_rejects_a_malformed_row(index: int, bad: str) -> None:
    row = ["tk-9", "qid", "pool", WEEK, "pure", "300000", "ana", "why", "approved"]
    row[index] = bad
    with pytest.raises(ValueError):
        _rows.ticket_from_row(row)


def test_audit_from_row_reads_every_column() -> None:
    row = ("17", "2026-11-24T16:00:00.000+00:00", "charge", "ana", "pool", WEEK, "qid", "2500",
           "detail text")  # fmt: skip
    event = _rows.audit_from_row(row)
    assert event == AuditEvent(
        id=17,
        time="2026-11-24T16:00:00.000+00:00",
        event="charge",
        analyst="ana",
        pool="pool",
        window=WEEK,
        query_id="qid",
        micro=2500,
        detail="detail text",
    )
    assert type(event.id) is int and type(event.micro) is int


# ----------------------------------------------------------------------------- stored releases
def test_a_release_is_stored_as_canonical_json_and_read_back() -> None:
    release = make_release("q", Cost.pure(0.25), name="总反馈数")
    text = _rows.release_to_json(release)
    assert "总反馈数" in text  # stored as written, not \\u-escaped
    data = json.loads(text)
    assert list(data) == sorted(data)  # one release, one text: keys in a fixed order
    assert _rows.release_from_json(text) == release


def test_a_release_json_never_holds_nan() -> None:
    class Odd(Release):
        def to_dict(self) -> dict[str, Any]:
            return {**super().to_dict(), "values": [float("nan")]}

    release = make_release("q", Cost.pure(0.25))
    odd = Odd(**{f: getattr(release, f) for f in release.__dataclass_fields__})
    with pytest.raises(ValueError, match="JSON compliant"):
        _rows.release_to_json(odd)


@pytest.mark.parametrize("text", ["", "{", "not json", "{'single': 1}"])
def test_a_damaged_release_is_a_ledger_error(text: str) -> None:
    with pytest.raises(LedgerError, match=r"a stored release is not valid JSON \(.+\); "
                       "the ledger is damaged") as info:  # fmt: skip
        _rows.release_from_json(text)
    assert isinstance(info.value.__cause__, ValueError)


# ----------------------------------------------------------------------------- release costs
def test_a_release_may_cost_up_to_its_charge() -> None:
    release = make_release("q", Cost.pure(0.25))
    _rows.check_release_cost(release, Cost.pure(0.25))
    _rows.check_release_cost(release, Cost.pure(0.3))
    # ε = 0.25 is ρ = 0.03125 as zCDP: a zCDP charge of that much covers it.
    _rows.check_release_cost(release, Cost.zcdp(0.03125))


def test_a_release_costing_more_than_its_charge_is_refused() -> None:
    release = make_release("q", Cost.pure(0.25))
    with pytest.raises(
        InvalidPrivacyParameter,
        match=r"release 'count' costs ε = 0.25 but only ε = 0.249999 was charged; "
        "charge the release's full cost",
    ):
        _rows.check_release_cost(release, Cost(Measure.PURE, 249_999))
    with pytest.raises(InvalidPrivacyParameter, match="charge the release's full cost"):
        _rows.check_release_cost(release, Cost(Measure.ZCDP, 31_249))


def test_a_zcdp_release_charged_as_pure_is_refused() -> None:
    release = make_release("q", Cost.zcdp(0.01))
    with pytest.raises(
        InvalidPrivacyParameter,
        match="release 'count' is zcdp but was charged as pure: a ρ-zCDP cost cannot be charged",
    ) as info:
        _rows.check_release_cost(release, Cost.pure(5.0))
    assert isinstance(info.value.__cause__, InvalidPrivacyParameter)


@pytest.mark.parametrize(
    ("thing", "kind"), [(None, "NoneType"), ("release", "str"), ({"values": [1]}, "dict")]
)
def test_only_a_release_can_be_stored(thing: object, kind: str) -> None:
    with pytest.raises(InvalidPrivacyParameter, match=rf"^store\(\) takes a Release, got {kind}$"):
        _rows.check_release_cost(thing, Cost.pure(1.0))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- refusals
def test_exceeded_names_the_pool_window_cap_and_amounts() -> None:
    spec = pure_pool("alice", 1.0)
    error = _rows.exceeded(spec, kind="window", window=WEEK, requested=250_000, remaining=125_000)
    assert isinstance(error, BudgetExceeded)
    assert str(error) == (
        f"pool 'alice' cannot take ε = 0.25 in window {WEEK}: its window cap leaves "
        "ε = 0.125. Nothing was spent; wait for the next window, ask for approval, or use a "
        "cheaper query"
    )
    assert (error.pool, error.window, error.requested, error.remaining) == (
        "alice", WEEK, 0.25, 0.125,
    )  # fmt: skip


def test_exceeded_shows_six_significant_digits_of_the_amounts() -> None:
    spec = pure_pool("p", 5.0)
    error = _rows.exceeded(
        spec, kind="window", window=WEEK, requested=1_000_006, remaining=2_000_007
    )
    assert "cannot take ε = 1.00001 in window" in str(error)
    assert "its window cap leaves ε = 2.00001. " in str(error)
    assert (error.requested, error.remaining) == (1.000006, 2.000007)


def test_exceeded_in_rho_for_a_lifetime_cap() -> None:
    spec = PoolSpec("z", Measure.ZCDP, 1_000_000)
    error = _rows.exceeded(spec, kind="lifetime", window=WEEK, requested=30, remaining=0)
    assert str(error).startswith(
        f"pool 'z' cannot take ρ = 3e-05 in window {WEEK}: its lifetime cap leaves ρ = 0. "
    )
    assert (error.requested, error.remaining) == (3e-05, 0.0)


# ----------------------------------------------------------------------------- round trips
@pytest.fixture
def sqlite(tmp_path: Path) -> SQLiteLedger:
    return SQLiteLedger(tmp_path / "ledger.db")


def test_pools_read_back_as_written(sqlite: SQLiteLedger) -> None:
    specs = [
        PoolSpec("root", Measure.ZCDP, 2_000_000, lifetime_cap=9_000_000, delta=1e-7),
        pure_pool("reserve", 0.5, parent="root"),
        pure_pool("flex", 0.25, parent="root", on_exceed="queue", reserve="reserve", lifetime=3),
    ]
    for spec in specs:
        sqlite.ensure_pool(spec)
    assert sorted(sqlite.pools(), key=lambda s: s.name) == sorted(specs, key=lambda s: s.name)


def test_charges_tickets_and_audit_read_back_as_written(sqlite: SQLiteLedger) -> None:
    from dpllm.errors import BudgetPending

    sqlite.ensure_pool(pure_pool("p", 1.0, on_exceed="queue"))
    cost = Cost.pure(0.75)
    with sqlite.charging(query_id="q1", pool="p", window=WEEK, cost=cost, analyst="ana",
                         description="left unstored") as charge:  # fmt: skip
        charge.data_read()
    [record] = sqlite.unreleased()
    assert (record.query_id, record.pool, record.window, record.cost) == ("q1", "p", WEEK, cost)
    assert (record.analyst, record.description) == ("ana", "left unstored")
    assert record.status is ChargeStatus.DATA_READ and record.error_class is None
    with pytest.raises(BudgetPending) as info:
        sqlite.charging(query_id="q2", pool="p", window=WEEK, cost=cost, analyst="bo",
                        description="too much").__enter__()  # fmt: skip
    [ticket] = sqlite.pending()
    assert ticket == PendingRequest(
        ticket=info.value.ticket, pool="p", window=WEEK, query_id="q2", cost=cost,
        analyst="bo", description="too much", status="pending",
    )  # fmt: skip
    charged = [e for e in sqlite.history() if e.event == "charge"]
    assert [(e.analyst, e.pool, e.window, e.query_id, e.micro) for e in charged] == [
        ("ana", "p", WEEK, "q1", cost.micro)
    ]
    assert dt.datetime.fromisoformat(charged[0].time).utcoffset() == dt.timedelta(0)
