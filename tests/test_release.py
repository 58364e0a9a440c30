"""Cost composition/conversion (property tests) and Release behaviour."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpllm import Cost, InvalidPrivacyParameter, Measure, RawReleaseError, Release
from dpllm.release import MICRO, to_micro

amounts = st.decimals(min_value=0, max_value=1000, places=6, allow_nan=False, allow_infinity=False)


@given(st.lists(amounts, max_size=50))
def test_pure_composition_is_exact_sum(xs: list) -> None:
    total = sum((Cost.pure(x) for x in xs), Cost.zero())
    assert total.amount == sum((Fraction(x) for x in xs), Fraction(0))


@given(amounts, amounts, amounts)
def test_composition_is_associative_and_commutative(a, b, c) -> None:  # type: ignore[no-untyped-def]
    x, y, z = Cost.pure(a), Cost.zcdp(b), Cost.pure(c)
    assert (x + y) + z == x + (y + z)
    assert x + y == y + x


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_charges_round_up_never_down(x: float) -> None:
    micro = to_micro(x)
    assert Fraction(micro, MICRO) >= Fraction(repr(x)) - Fraction(0)
    assert micro - 1 < float(Fraction(repr(x)) * MICRO) + 1


def test_decimal_reading_of_floats() -> None:
    assert Cost.pure(0.1).micro == 100_000
    assert Cost.pure(0.1234567).micro == 123_457  # rounded up


def test_a_million_additions_do_not_drift() -> None:
    c = Cost.pure(0.1)
    total = Cost.zero()
    for _ in range(1_000_000 // 1000):
        total = total + Cost(Measure.PURE, c.micro * 1000)
    assert total.amount == Fraction(100_000)


@given(st.floats(min_value=1e-4, max_value=10), st.floats(min_value=1e-12, max_value=0.5))
def test_zcdp_to_epsilon_delta_formula(rho: float, delta: float) -> None:
    cost = Cost.zcdp(rho)
    eps, d = cost.to_epsilon_delta(delta=delta)
    r = float(cost.amount)
    assert d == delta
    assert eps == pytest.approx(r + 2 * math.sqrt(r * math.log(1 / delta)))
    assert eps >= r


@given(st.floats(min_value=0, max_value=10))
def test_pure_to_zcdp_is_half_epsilon_squared_rounded_up(eps: float) -> None:
    c = Cost.pure(eps)
    z = c.as_zcdp()
    assert z.measure is Measure.ZCDP
    assert z.amount >= c.amount * c.amount / 2
    assert z.amount - c.amount * c.amount / 2 < Fraction(1, MICRO)


def test_mixed_composition_goes_through_zcdp() -> None:
    total = Cost.pure(1.0) + Cost.zcdp(0.25)
    assert total.measure is Measure.ZCDP
    assert total.amount == Fraction(1, 2) + Fraction(1, 4)


def test_zcdp_cannot_become_pure() -> None:
    with pytest.raises(InvalidPrivacyParameter, match="zCDP does not imply pure"):
        Cost.zcdp(0.1).to_measure("pure")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.1, "abc", True])
def test_bad_amounts_are_refused(bad: object) -> None:
    with pytest.raises(InvalidPrivacyParameter):
        Cost.pure(bad)  # type: ignore[arg-type]


def test_delta_must_be_in_open_unit_interval() -> None:
    with pytest.raises(InvalidPrivacyParameter, match="delta"):
        Cost.zcdp(0.1).to_epsilon_delta(delta=1.0)


def _release(**kw: object) -> Release:
    base: dict[str, object] = dict(
        name="feedback_count",
        values=(157.0,),
        intervals=((150.0, 164.0),),
        mechanism="discrete_laplace",
        noise_scale=2.0,
        cost=Cost.pure(0.5),
        fingerprint="q1",
        window="2026-W47",
    )
    base.update(kw)
    return Release(**base)  # type: ignore[arg-type]


def test_release_json_round_trip() -> None:
    r = _release(seeded=True)
    again = Release.from_dict(json.loads(json.dumps(r.to_dict())))
    assert again == r
    assert again.seeded


def test_release_refuses_raw_text() -> None:
    r = _release()
    with pytest.raises(RawReleaseError, match="DP filter"):
        str(r)
    with pytest.raises(RawReleaseError):
        f"{r}"
    with pytest.raises(RawReleaseError):
        _ = "{}".format(r)  # noqa: UP032
    assert "157" not in repr(r)


def test_vector_release_components() -> None:
    h = _release(
        name="rating_histogram",
        values=(1.0, 2.0, 3.0),
        intervals=((0.0, 2.0), (1.0, 3.0), (2.0, 4.0)),
        labels=("1", "2", "3"),
    )
    assert h["2"].value == 2.0
    assert h["2"].interval == (1.0, 3.0)
    assert [label for label, _ in h.components()] == ["1", "2", "3"]
    with pytest.raises(TypeError, match="vector"):
        _ = h.value
    with pytest.raises(KeyError):
        h["9"]


def test_small_flag() -> None:
    assert _release(values=(2.0,), intervals=((0.0, 4.0),)).small
    assert not _release().small


@pytest.mark.parametrize(
    "kw",
    [
        {"values": (float("nan"),)},
        {"intervals": ((3.0, 1.0),)},
        {"values": (1.0, 2.0), "intervals": ((0.0, 1.0), (1.0, 2.0))},
        {"confidence": 1.0},
    ],
)
def test_malformed_releases_are_refused(kw: dict[str, object]) -> None:
    with pytest.raises(InvalidPrivacyParameter):
        _release(**kw)
