"""The ledger's backend-neutral logic (``dpllm.ledger.base``), without a database.

Pool specs refuse what no ledger can honour; a balance never offers more than every cap
allows; what a path can still take is the minimum over the pool and its ancestors (a
zCDP ancestor bounding a pure pool by ε ≤ √(2ρ)), and exactly that much is accepted by
a real ledger; ``release_recorded`` reads only after the charge, never charges twice,
and reports what the ledger recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any, cast

import pytest

from dpllm.errors import BudgetExceeded, ChargeInProgress, ConfigError, UnknownPool
from dpllm.ledger.base import (
    Balance,
    Outcome,
    PoolSpec,
    iter_path,
    path_remaining,
    release_once,
    release_recorded,
)
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost, Measure, Release
from tests.ledger.conftest import WEEK, compute_for, make_release, pure_pool

PURE, ZCDP = Measure.PURE, Measure.ZCDP


# ----------------------------------------------------------------------------- pool specs
@pytest.mark.parametrize(
    "name", ["a", "A-z_0.9", "x" * 64, "global", "team.alpha", "-", "_"]
)  # fmt: skip
def test_plain_pool_names_are_accepted(name: str) -> None:
    spec = PoolSpec(name, PURE, 0, parent="p-1.x", reserve="r_2")
    assert spec.name == name
    spec = PoolSpec(name, PURE, 0, parent="Team-A.1", reserve="Spare_" + "Z" * 58)
    assert (spec.parent, spec.reserve) == ("Team-A.1", "Spare_" + "Z" * 58)


@pytest.mark.parametrize("name", ["", None, "x" * 65, "a b", "a/b", "é", "a\n", "池"])
def test_other_pool_names_are_refused(name: Any) -> None:
    with pytest.raises(ConfigError, match=r"^\[pools\] pool name .* must be a plain name$"):
        PoolSpec(name, PURE, 1)


def test_a_pool_measure_may_be_given_by_name() -> None:
    spec = PoolSpec("p", "zcdp", 1)  # type: ignore[arg-type]
    assert spec.measure is ZCDP
    with pytest.raises(ValueError):
        PoolSpec("p", "renyi", 1)  # type: ignore[arg-type]


def test_pool_defaults() -> None:
    spec = PoolSpec("p", PURE, 5)
    assert (spec.lifetime_cap, spec.parent, spec.delta, spec.on_exceed, spec.reserve) == (
        None, None, 1e-6, "refuse", None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window_cap": -1}, "pool 'p': caps must be ≥ 0"),
        ({"lifetime_cap": -1}, "pool 'p': caps must be ≥ 0"),
        ({"on_exceed": "spend"}, "pool 'p': on_exceed must be 'refuse' or 'queue'"),
        ({"on_exceed": "Queue"}, "on_exceed must be 'refuse' or 'queue'"),
        ({"delta": 0.0}, r"pool 'p': delta must lie in \(0, 1\)"),
        ({"delta": 1.0}, r"delta must lie in \(0, 1\)"),
        ({"delta": -1e-6}, r"delta must lie in \(0, 1\)"),
        ({"parent": "a b"}, "pool 'p': 'a b' is not a pool name"),
        ({"parent": ""}, "'' is not a pool name"),
        ({"reserve": "x" * 65}, "is not a pool name"),
        ({"reserve": "r/1"}, "'r/1' is not a pool name"),
        ({"parent": "p"}, "pool 'p' cannot be its own parent"),
    ],
)
def test_pool_settings_no_ledger_can_honour_are_refused(
    kwargs: dict[str, Any], message: str
) -> None:
    args: dict[str, Any] = {"name": "p", "measure": PURE, "window_cap": 1, **kwargs}
    with pytest.raises(ConfigError, match=message) as info:
        PoolSpec(**args)
    assert info.value.field == "pools"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window_cap": 0},
        {"lifetime_cap": 0},
        {"delta": 1e-300},
        {"delta": 0.999},
        {"on_exceed": "queue"},
        {"reserve": "p"},  # its own reserve is allowed (moves nothing, but harmless)
    ],
)
def test_pool_settings_at_their_limits_are_accepted(kwargs: dict[str, Any]) -> None:
    PoolSpec(**{"name": "p", "measure": PURE, "window_cap": 1, **kwargs})


# ----------------------------------------------------------------------------- balances
def _balance(spent: int, cap: int, life_spent: int = 0, life_cap: int | None = None,
             granted: int = 0) -> Balance:  # fmt: skip
    return Balance("p", PURE, WEEK, spent, cap, life_spent, life_cap, granted)


@pytest.mark.parametrize(
    ("balance", "effective", "remaining"),
    [
        (_balance(300, 1000), 1000, 700),
        (_balance(1000, 1000), 1000, 0),
        (_balance(1200, 1000), 1000, 0),  # over (a cap lowered later): nothing, never < 0
        (_balance(300, 1000, granted=500), 1500, 1200),  # approvals move budget in
        (_balance(300, 1000, granted=-400), 600, 300),  # ... and out
        (_balance(300, 1000, 5000, 5400), 1000, 400),  # the lifetime cap binds
        (_balance(300, 1000, 5000, 9000), 1000, 700),  # the window cap binds
        (_balance(300, 1000, 5000, 5000), 1000, 0),
        (_balance(300, 1000, 5000, 4000), 1000, 0),
        (_balance(0, 1000, 5000, None), 1000, 1000),  # no lifetime cap
    ],
)
def test_a_balance_offers_what_every_cap_still_allows(
    balance: Balance, effective: int, remaining: int
) -> None:
    assert balance.effective_cap == effective
    assert balance.remaining == remaining


def test_balance_default_grant_is_zero() -> None:
    assert Balance("p", PURE, WEEK, 1, 10, 1, None).granted == 0


# ----------------------------------------------------------------------------- paths
POOLS = {
    "root": PoolSpec("root", ZCDP, 500_000),
    "team": PoolSpec("team", PURE, 2_000_000, parent="root"),
    "ana": PoolSpec("ana", PURE, 800_000, parent="team"),
    "zleaf": PoolSpec("zleaf", ZCDP, 300_000, parent="root"),
}


def test_iter_path_goes_from_the_pool_to_its_root() -> None:
    assert [p.name for p in iter_path(POOLS, "ana")] == ["ana", "team", "root"]
    assert [p.name for p in iter_path(POOLS, "root")] == ["root"]


def test_iter_path_refuses_a_cycle_and_an_unknown_pool() -> None:
    cyc = {
        "a": PoolSpec("a", PURE, 1, parent="b"),
        "b": PoolSpec("b", PURE, 1, parent="c"),
        "c": PoolSpec("c", PURE, 1, parent="a"),
    }
    with pytest.raises(ConfigError, match=r"^pool 'b': parent chain has a cycle at 'b'$"):
        list(islice(iter_path(cyc, "b"), 10))  # (bounded: a broken check would loop forever)
    gap = {"a": PoolSpec("a", PURE, 1, parent="ghost")}
    with pytest.raises(
        UnknownPool,
        match=r"^unknown pool 'ghost'; create it first \(Ledger.ensure_pool or dpllm.toml\)$",
    ) as info:
        list(iter_path(gap, "a"))
    assert info.value.__cause__ is None and info.value.__suppress_context__
    with pytest.raises(UnknownPool, match="unknown pool 'nobody'"):
        list(iter_path(gap, "nobody"))


def _remaining(left: dict[str, int]) -> Any:
    def balance(name: str) -> Balance:
        spec = POOLS[name]
        return Balance(name, spec.measure, WEEK, spec.window_cap - left[name], spec.window_cap,
                       0, None)  # fmt: skip

    return balance


@pytest.mark.parametrize(
    ("left", "pool", "expected"),
    [
        # The tightest pure pool on the path binds ...
        ({"ana": 100_000, "team": 900_000, "root": 500_000}, "ana", 100_000),
        ({"ana": 800_000, "team": 200_000, "root": 500_000}, "ana", 200_000),
        # ... or the zCDP root: ρ = 0.02 leaves ε ≤ √0.04 = 0.2 to a pure pool.
        ({"ana": 800_000, "team": 900_000, "root": 20_000}, "ana", 200_000),
        # ρ = 0.000001 (one micro-unit): ε ≤ √0.000002 = 0.0014142… → 1414 µ, rounded down.
        ({"ana": 800_000, "team": 900_000, "root": 1}, "ana", 1414),
        ({"ana": 800_000, "team": 900_000, "root": 0}, "ana", 0),
        ({"ana": 0, "team": 900_000, "root": 500_000}, "ana", 0),
        # A zCDP pool under a zCDP root: ρ against ρ, no conversion.
        ({"zleaf": 300_000, "root": 20_000}, "zleaf", 20_000),
        ({"zleaf": 10_000, "root": 20_000}, "zleaf", 10_000),
        ({"root": 123}, "root", 123),
    ],
)
def test_path_remaining_is_the_minimum_over_the_path(
    left: dict[str, int], pool: str, expected: int
) -> None:
    assert path_remaining(POOLS, _remaining(left), pool) == expected


def test_what_path_remaining_offers_a_ledger_accepts_and_not_one_micro_unit_more(
    tmp_path: Path,
) -> None:
    """The figure ``dpllm budget`` shows is exactly what can still be charged."""
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    ledger.ensure_pool(PoolSpec("root", ZCDP, Cost.zcdp(0.02).micro + 37))
    ledger.ensure_pool(pure_pool("ana", 5.0, parent="root"))
    specs = {p.name: p for p in ledger.pools()}
    left = path_remaining(specs, lambda n: ledger.balance(n, WEEK), "ana")
    assert 200_000 < left < 201_000
    with pytest.raises(BudgetExceeded):
        release_once(ledger, query_id="over", pool="ana", window=WEEK,
                     cost=Cost(PURE, left + 1), compute=compute_for("over", Cost(PURE, left + 1)))  # fmt: skip
    exact = Cost(PURE, left)
    release_once(ledger, query_id="fits", pool="ana", window=WEEK, cost=exact,
                 compute=compute_for("fits", exact))  # fmt: skip
    assert path_remaining(specs, lambda n: ledger.balance(n, WEEK), "ana") == 0


# ----------------------------------------------------------------------------- release_recorded
class FakeCharge:
    def __init__(self, log: list[str], *, cached: Release | None = None,
                 charged: bool | None = None, store_error: Exception | None = None) -> None:  # fmt: skip
        self.log = log
        self.cached = cached
        if charged is not None:
            self.charged = charged
        self.store_error = store_error
        self.stored: Release | None = None

    def data_read(self) -> None:
        self.log.append("read")

    def store(self, release: Release) -> None:
        self.log.append("store")
        if self.store_error is not None:
            raise self.store_error
        self.stored = release


class FakeLedger:
    def __init__(self, charge: FakeCharge, stored: Release | None = None) -> None:
        self.charge = charge
        self.stored = stored
        self.requests: list[dict[str, Any]] = []

    @contextmanager
    def charging(self, **kwargs: Any) -> Iterator[FakeCharge]:
        self.requests.append(kwargs)
        self.charge.log.append("charge")
        yield self.charge
        self.charge.log.append("exit")

    def get_release(self, query_id: str) -> Release | None:
        self.charge.log.append(f"get {query_id}")
        return self.stored


COST = Cost.pure(0.25)
MINE = make_release("q", COST, 1.0)
THEIRS = make_release("q", COST, 2.0)
REQUEST: dict[str, Any] = {"query_id": "q", "pool": "p", "window": WEEK, "cost": COST, "analyst": "ana",
           "description": "what"}  # fmt: skip


def _recorded(ledger: FakeLedger, log: list[str], **request: Any) -> Outcome:
    args = {**REQUEST, **request}
    return release_recorded(cast(Any, ledger), compute=_compute(log), **args)


def _asked(ledger: FakeLedger) -> list[dict[str, Any]]:
    """What each ``charging`` call asked for; a δ argument, where the API has one, is 0."""
    out = []
    for request in ledger.requests:
        assert request.get("delta", 0.0) == 0.0
        out.append({k: v for k, v in request.items() if k != "delta"})
    return out


def _compute(log: list[str]) -> Any:
    def compute() -> Release:
        log.append("compute")
        return MINE

    return compute


def test_a_fresh_release_is_charged_read_stored_and_returned_in_that_order() -> None:
    log: list[str] = []
    ledger = FakeLedger(FakeCharge(log, charged=True))
    out = _recorded(ledger, log)
    assert out == Outcome(MINE, cached=False, charged=True)
    assert log == ["charge", "read", "compute", "store", "exit"]
    assert _asked(ledger) == [REQUEST]
    assert ledger.charge.stored is MINE


def test_a_charge_that_does_not_say_it_charged_did_not() -> None:
    log: list[str] = []
    out = _recorded(FakeLedger(FakeCharge(log)), log)
    assert (out.cached, out.charged) == (False, False)
    log2: list[str] = []
    out2 = _recorded(FakeLedger(FakeCharge(log2, charged=False)), log2)
    assert out2.charged is False


def test_a_cached_release_reads_nothing() -> None:
    log: list[str] = []
    ledger = FakeLedger(FakeCharge(log, cached=THEIRS, charged=True))
    out = _recorded(ledger, log)
    assert out == Outcome(THEIRS, cached=True, charged=False)
    assert log == ["charge", "exit"]


def test_losing_the_store_returns_the_winners_release() -> None:
    log: list[str] = []
    charge = FakeCharge(log, charged=True, store_error=ChargeInProgress("first"))
    out = _recorded(FakeLedger(charge, stored=THEIRS), log)
    assert out == Outcome(THEIRS, cached=False, charged=True)
    assert log == ["charge", "read", "compute", "store", "get q", "exit"]


def test_losing_the_store_with_nothing_stored_raises() -> None:
    log: list[str] = []
    error = ChargeInProgress("lost")
    charge = FakeCharge(log, charged=True, store_error=error)
    with pytest.raises(ChargeInProgress) as info:
        _recorded(FakeLedger(charge), log)
    assert info.value is error
    assert log == ["charge", "read", "compute", "store", "get q"]


def test_release_once_passes_every_argument_and_returns_the_release() -> None:
    log: list[str] = []
    ledger = FakeLedger(FakeCharge(log, charged=True))
    assert release_once(cast(Any, ledger), compute=_compute(log), **REQUEST) is MINE
    assert _asked(ledger) == [REQUEST]


def test_release_defaults_name_the_default_analyst_and_no_description() -> None:
    log: list[str] = []
    ledger = FakeLedger(FakeCharge(log, charged=True))
    args: dict[str, Any] = {k: v for k, v in REQUEST.items() if k not in ("analyst", "description")}
    release_once(cast(Any, ledger), compute=_compute(log), **args)
    release_recorded(cast(Any, ledger), compute=_compute(log), **args)
    assert [(r["analyst"], r["description"]) for r in _asked(ledger)] == [("default", "")] * 2
