"""The δ budget's pure parts, without a database.

δ is kept as integers of 10⁻¹⁵: a charge rounds up and a cap rounds down, so a charge
never takes more than a cap written as the same δ allows. The lifetime cap derived
from the ε caps, the remaining δ of a pool path, the δ columns of a pool row, the
refusal of a δ overspend and the check that a stored release claims no more δ than
was charged are each checked here against figures worked out by hand.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from fractions import Fraction

import pytest

from dpllm.errors import BudgetExceeded, ConfigError, InvalidPrivacyParameter
from dpllm.ledger import _rows
from dpllm.ledger.base import (
    DEFAULT_DELTA_WINDOW_CAP,
    DELTA_UNIT,
    Balance,
    PoolSpec,
    delta_text,
    derived_delta_lifetime_cap,
    path_delta_remaining,
    to_delta_units,
)
from dpllm.release import Cost, Measure
from tests.ledger.conftest import WEEK, make_release

# --- to_delta_units ---------------------------------------------------------------------


def test_a_third_rounds_up_for_a_charge_and_down_for_a_cap() -> None:
    """Fractions and Decimals are read exactly, not through a float's repr."""
    assert to_delta_units(Fraction(1, 3)) == 333_333_333_333_334
    assert to_delta_units(Fraction(1, 3), cap=True) == 333_333_333_333_333
    assert to_delta_units(Decimal("0.000001")) == 10**9
    assert to_delta_units(Decimal("2.5e-15")) == 3
    assert to_delta_units(Decimal("2.5e-15"), cap=True) == 2


def test_whole_numbers_and_the_bounds() -> None:
    assert to_delta_units(1) == DELTA_UNIT == to_delta_units(1.0, cap=True)
    assert to_delta_units(0) == 0 == to_delta_units(0.0, cap=True)
    assert to_delta_units(1e-6) == 10**9 == to_delta_units(1e-6, cap=True)


@pytest.mark.parametrize(
    ("delta", "words"),
    [
        (True, "delta must be a number, got True"),
        ("1e-6", "delta must be a number, got '1e-6'"),
        (None, "delta must be a number, got None"),
        (float("nan"), "delta must be finite, got nan"),
        (float("inf"), "delta must be finite, got inf"),
        (Decimal("NaN"), "delta must be finite, got Decimal('NaN')"),
        (-1e-6, "delta must lie in [0, 1], got -1e-06"),
        (1.5, "delta must lie in [0, 1], got 1.5"),
        (Fraction(-1, 3), "delta must lie in [0, 1], got Fraction(-1, 3)"),
    ],
)
def test_refusals_say_why(delta: object, words: str) -> None:
    with pytest.raises(InvalidPrivacyParameter) as info:
        to_delta_units(delta)  # type: ignore[arg-type]
    assert str(info.value) == words


# --- delta_text -------------------------------------------------------------------------


def test_delta_text() -> None:
    assert delta_text(None) == "unlimited"
    assert delta_text(10**9) == "1e-06"
    assert delta_text(0) == "0"
    assert delta_text(DELTA_UNIT // 4) == "0.25"
    assert delta_text(123_456_789) == "1.235e-07"


# --- derived_delta_lifetime_cap ---------------------------------------------------------


@pytest.mark.parametrize(
    ("window_cap", "lifetime_cap", "delta_window_cap", "expected"),
    [
        (2, 5, 7, 21),  # ⌈5/2⌉ = 3 windows
        (2, 4, 7, 14),  # exactly 2 windows
        (1, 5, 7, 35),
        (3, 1, 7, 7),  # less than one full window still counts one
        (5, 0, 7, 0),  # lifetime cap 0: no window ever
        (1_000_000, 10_000_001, 10**9, 11 * 10**9),
        (0, 5, 7, 0),  # window cap 0: nothing can be charged
        (0, 0, 7, 0),
        (2, None, 7, None),  # unlimited ε lifetime: unlimited δ lifetime
        (0, None, 7, None),
    ],
)
def test_derived_lifetime_cap(
    window_cap: int, lifetime_cap: int | None, delta_window_cap: int, expected: int | None
) -> None:
    got = derived_delta_lifetime_cap(window_cap, lifetime_cap, delta_window_cap)
    assert got == expected
    assert got is None or type(got) is int


# --- path_delta_remaining ---------------------------------------------------------------


def _balance(pool: str, delta_spent: int, delta_window_cap: int) -> Balance:
    return Balance(
        pool=pool,
        measure=Measure.PURE,
        window=WEEK,
        spent=0,
        window_cap=1_000_000,
        lifetime_spent=0,
        lifetime_cap=None,
        delta_spent=delta_spent,
        delta_window_cap=delta_window_cap,
    )


def test_path_delta_remaining_is_the_minimum_over_the_path() -> None:
    balances = {
        "child": _balance("child", 100, 1_000),  # 900 left
        "mid": _balance("mid", 0, 500),  # 500 left
        "root": _balance("root", 200, 2_000),  # 1800 left
    }
    assert path_delta_remaining(balances.__getitem__, ["child", "mid", "root"]) == 500
    assert path_delta_remaining(balances.__getitem__, ["child", "root"]) == 900
    assert path_delta_remaining(balances.__getitem__, ["root"]) == 1_800


def test_path_delta_remaining_of_an_exhausted_pool_and_an_empty_path() -> None:
    balances = {"a": _balance("a", 50, 50), "b": _balance("b", 0, 9)}
    assert path_delta_remaining(balances.__getitem__, ["b", "a"]) == 0
    assert path_delta_remaining(balances.__getitem__, []) == 0


# --- pool_from_row: the δ columns -------------------------------------------------------

BASE_ROW = ("p", "pure", 700, 9000, None, 1e-6, "refuse", None, 55)


def test_pool_row_with_both_delta_caps() -> None:
    spec = _rows.pool_from_row((*BASE_ROW, 123, 4567))
    assert (spec.delta_window_cap, spec.delta_lifetime_cap) == (123, 4567)


def test_pool_row_delta_caps_as_text_are_read_as_ints() -> None:
    spec = _rows.pool_from_row((*BASE_ROW, "123", Decimal(4567)))
    assert (spec.delta_window_cap, spec.delta_lifetime_cap) == (123, 4567)
    assert type(spec.delta_window_cap) is int and type(spec.delta_lifetime_cap) is int


def test_pool_row_with_a_null_delta_lifetime_cap() -> None:
    spec = _rows.pool_from_row((*BASE_ROW, 123, None))
    assert (spec.delta_window_cap, spec.delta_lifetime_cap) == (123, None)


def test_pool_row_with_a_delta_window_cap_only() -> None:
    """A ten-column row (no δ lifetime column) has an unlimited δ lifetime."""
    spec = _rows.pool_from_row((*BASE_ROW, 123))
    assert (spec.delta_window_cap, spec.delta_lifetime_cap) == (123, None)


def test_pool_row_without_delta_columns_takes_the_defaults() -> None:
    spec = _rows.pool_from_row(BASE_ROW)
    assert (spec.delta_window_cap, spec.delta_lifetime_cap) == (DEFAULT_DELTA_WINDOW_CAP, None)


# --- PoolSpec's cap checks --------------------------------------------------------------


@pytest.mark.parametrize("cap", [0.5, 1.0, True])
@pytest.mark.parametrize("which", ["window_cap", "lifetime_cap"])
def test_a_pool_refuses_a_cap_that_is_not_an_int(cap: object, which: str) -> None:
    kwargs = {"window_cap": 1_000, which: cap}
    with pytest.raises(ConfigError) as info:
        PoolSpec("p", Measure.PURE, **kwargs)  # type: ignore[arg-type]
    assert info.value.field == "pools"
    assert str(info.value) == (
        f"[pools] pool 'p': caps are integer micro-units, got {cap!r}; "
        "use dpllm.release.to_micro(amount)"
    )


# --- check_release_delta ----------------------------------------------------------------


def _release(delta: float):  # type: ignore[no-untyped-def]
    return dataclasses.replace(
        make_release("q-1", Cost.pure(0.5), name="new_keywords"), delta=delta
    )


def test_a_release_may_claim_the_charged_delta_or_less() -> None:
    _rows.check_release_delta(_release(1e-6), 10**9)
    _rows.check_release_delta(_release(5e-7), 10**9)
    _rows.check_release_delta(_release(0.0), 0)


def test_a_release_may_not_claim_more_delta_than_was_charged() -> None:
    with pytest.raises(InvalidPrivacyParameter) as info:
        _rows.check_release_delta(_release(2e-6), 10**9)
    assert str(info.value) == (
        "release 'new_keywords' has δ = 2e-06 but δ = 1e-06 was charged; "
        "pass delta= to the charge (the ledger caps δ)"
    )
    with pytest.raises(InvalidPrivacyParameter, match="but δ = 0 was charged"):
        _rows.check_release_delta(_release(1e-15), 0)


# --- exceeded: the δ refusal ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "what"), [("delta_window", "δ window cap"), ("delta_lifetime", "δ lifetime cap")]
)
def test_a_delta_refusal_names_delta_and_its_numbers(kind: str, what: str) -> None:
    spec = PoolSpec("alice", Measure.ZCDP, 1_000)
    error = _rows.exceeded(spec, kind=kind, window=WEEK, requested=2 * 10**9, remaining=25 * 10**7)
    assert isinstance(error, BudgetExceeded)
    assert str(error) == (
        f"pool 'alice' cannot take δ = 2e-06 in window {WEEK}: its {what} leaves "
        "δ = 2.5e-07. Nothing was spent; wait for the next window, raise the pool's δ caps, "
        "or use a query with a smaller δ"
    )
    assert (error.pool, error.window) == ("alice", WEEK)
    assert (error.requested, error.remaining) == (2e-06, 2.5e-07)


@pytest.mark.parametrize("cap", [-1, 0.5, 1e9, True, "5"])
@pytest.mark.parametrize("which", ["delta_window_cap", "delta_lifetime_cap"])
def test_a_pool_refuses_a_delta_cap_that_is_not_an_int_at_least_0(cap: object, which: str) -> None:
    with pytest.raises(ConfigError) as info:
        PoolSpec("p", Measure.PURE, 1_000, **{which: cap})  # type: ignore[arg-type]
    assert info.value.field == "pools"
    assert str(info.value) == (
        f"[pools] pool 'p': δ caps must be ints ≥ 0 (units of 10⁻¹⁵), got {cap!r}"
    )


def test_a_pool_takes_delta_caps_of_0_and_none() -> None:
    spec = PoolSpec("p", Measure.PURE, 1_000, delta_window_cap=0, delta_lifetime_cap=0)
    assert (spec.delta_window_cap, spec.delta_lifetime_cap) == (0, 0)
    assert PoolSpec("p", Measure.PURE, 1_000, delta_lifetime_cap=None).delta_lifetime_cap is None


def test_a_pool_cap_may_reach_the_largest_amount_but_not_pass_it() -> None:
    from dpllm.release import MAX_AMOUNT, MICRO

    top = MAX_AMOUNT * MICRO
    assert PoolSpec("p", Measure.PURE, top, lifetime_cap=top).window_cap == top
    for kwargs in ({"window_cap": top + 1}, {"window_cap": 0, "lifetime_cap": top + 1}):
        with pytest.raises(ConfigError) as info:
            PoolSpec("p", Measure.PURE, **kwargs)  # type: ignore[arg-type]
        assert info.value.field == "pools"
        assert str(info.value) == "[pools] pool 'p': a cap is too large (at most 1e+09 ε or ρ)"
