"""Mechanisms, releases and derived releases: values, scales, fields and error messages.

Aimed at the survivors of ``make mutate`` (group privacy). A fixed-noise source
makes each mechanism's arithmetic observable; interval checks compare with an
independent computation of the same quantile.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
from scipy.special import log_ndtr, ndtr

from dpllm import Cost, DataError, InvalidPrivacyParameter
from dpllm.privacy.intervals import (
    discrete_gaussian_half_width,
    discrete_laplace_half_width,
    gaussian_half_width,
    laplace_half_width,
)
from dpllm.privacy.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Mechanism,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    make_release,
    permute_and_flip,
    ratio_release,
)
from dpllm.privacy.noise import MAX_SCALE, FloatArray, IntArray
from dpllm.release import Release


class FixedNoise:
    """A noise source with known, constant draws; records the scales it is asked for."""

    seeded = False

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, int]] = []

    def discrete_laplace(self, *, scale: float, size: int) -> IntArray:
        self.calls.append(("discrete_laplace", scale, size))
        return np.full(size, 3, dtype=np.int64)

    def discrete_gaussian(self, *, sigma: float, size: int) -> IntArray:
        self.calls.append(("discrete_gaussian", sigma, size))
        return np.full(size, -2, dtype=np.int64)

    def add_laplace(self, values: FloatArray, *, scale: float) -> FloatArray:
        self.calls.append(("laplace", scale, values.size))
        return values + 0.5

    def add_gaussian(self, values: FloatArray, *, sigma: float) -> FloatArray:
        self.calls.append(("gaussian", sigma, values.size))
        return values - 0.25

    def exponential_top_k(self, scores: FloatArray, *, scale: float, k: int) -> list[int]:
        self.calls.append(("top_k", scale, k))
        return list(range(k))


# -- randomise: the noise is added, from the source given --------------------------------


def test_each_mechanism_adds_its_noise_from_the_given_source() -> None:
    src = FixedNoise()
    assert list(DiscreteLaplace(epsilon=0.5, sensitivity=2).randomise([10, 20], noise=src)) == [
        13,
        23,
    ]
    assert list(DiscreteGaussian(rho=0.5, sensitivity=1).randomise([10], noise=src)) == [8]
    assert list(Laplace(epsilon=1.0, sensitivity=1.0).randomise([1.5], noise=src)) == [2.0]
    assert list(Gaussian(rho=0.5, sensitivity=1.0).randomise([1.5], noise=src)) == [1.25]
    assert src.calls == [
        ("discrete_laplace", 4.0, 2),
        ("discrete_gaussian", 1.0, 1),
        ("laplace", 1.0, 1),
        ("gaussian", 1.0, 1),
    ]


@pytest.mark.parametrize(
    "mech", [DiscreteLaplace(epsilon=1.0, sensitivity=1), DiscreteGaussian(rho=1.0, sensitivity=1)]
)
def test_integer_mechanisms_refuse_fractional_aggregates(mech: object) -> None:
    with pytest.raises(DataError, match=r"^an integer mechanism needs integer aggregate values$"):
        mech.randomise([1.5], noise=FixedNoise())  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "mech", [Laplace(epsilon=1.0, sensitivity=1.0), Gaussian(rho=1.0, sensitivity=1.0)]
)
def test_float_mechanisms_accept_fractional_aggregates(mech: object) -> None:
    out = mech.randomise([1.5, 2.25], noise=FixedNoise())  # type: ignore[attr-defined]
    assert out.shape == (2,)


def test_aggregates_may_be_decimals_and_tables() -> None:
    """SQL drivers return Decimal sums; a 2-D table is released as one flat vector."""
    src = FixedNoise()
    out = DiscreteLaplace(epsilon=1.0, sensitivity=1).randomise(
        [Decimal("4"), Decimal("7")],  # type: ignore[list-item]
        noise=src,
    )
    assert list(out) == [7, 10]
    table = DiscreteLaplace(epsilon=1.0, sensitivity=1).randomise(
        [[1, 2], [3, 4]],  # type: ignore[list-item]
        noise=src,
    )
    assert list(table) == [4, 5, 6, 7]


def test_bad_aggregates_are_refused_with_their_reason() -> None:
    mech = Laplace(epsilon=1.0, sensitivity=1.0)
    with pytest.raises(DataError, match=r"^aggregate values must be numbers: "):
        mech.randomise(["three"], noise=FixedNoise())  # type: ignore[list-item]
    for bad in (math.nan, math.inf):
        with pytest.raises(
            DataError, match=r"^aggregate values must be finite \(no NaN or infinity\)$"
        ):
            mech.randomise([1.0, bad], noise=FixedNoise())


# -- parameter errors name the parameter ----------------------------------------------------


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("1", "must be a number"),
        (None, "must be a number"),
        (math.inf, "must be finite"),
        (math.nan, "must be finite"),
        (0, "must be > 0"),
        (-1.0, "must be > 0"),
    ],
)
def test_privacy_parameter_errors_name_the_parameter(value: Any, reason: str) -> None:
    cases: list[tuple[str, Callable[[], object]]] = [
        ("epsilon", lambda: DiscreteLaplace(epsilon=value, sensitivity=1)),
        ("epsilon", lambda: Laplace(epsilon=value, sensitivity=1)),
        ("rho", lambda: DiscreteGaussian(rho=value, sensitivity=1)),
        ("rho", lambda: Gaussian(rho=value, sensitivity=1)),
        ("epsilon", lambda: permute_and_flip([1, 2], epsilon=value, sensitivity=1)),
        ("epsilon", lambda: analytic_gaussian_sigma(epsilon=value, delta=1e-5, sensitivity=1)),
        ("sensitivity", lambda: analytic_gaussian_sigma(epsilon=1, delta=1e-5, sensitivity=value)),
        ("sensitivity", lambda: classic_gaussian_sigma(epsilon=0.5, delta=1e-5, sensitivity=value)),
    ]
    for name, call in cases:
        with pytest.raises(InvalidPrivacyParameter, match=rf"^{name} {reason}, got "):
            call()


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("1", "must be a number"),
        (True, "must be a number"),
        (-1, "must be finite and ≥ 0"),
        (math.inf, "must be finite and ≥ 0"),
    ],
)
def test_sensitivity_errors(value: object, reason: str) -> None:
    with pytest.raises(InvalidPrivacyParameter, match=rf"^sensitivity {reason}, got "):
        DiscreteLaplace(epsilon=1.0, sensitivity=value)  # type: ignore[arg-type]
    with pytest.raises(InvalidPrivacyParameter, match=rf"^sensitivity {reason}, got "):
        Gaussian(rho=1.0, sensitivity=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("delta", [0.0, 1.0, 1.5, -1e-9, "0.5", True, None])
def test_delta_outside_open_unit_interval_is_refused(delta: object) -> None:
    for fn in (analytic_gaussian_sigma, classic_gaussian_sigma):
        with pytest.raises(InvalidPrivacyParameter, match=r"^delta must lie in \(0, 1\), got "):
            fn(epsilon=0.5, delta=delta, sensitivity=1.0)  # type: ignore[arg-type]


def test_classic_calibration_above_epsilon_one_points_to_analytic() -> None:
    with pytest.raises(InvalidPrivacyParameter, match=r"use method='analytic'$"):
        classic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=1.0)


def test_scale_up_to_max_scale_is_accepted_beyond_it_refused() -> None:
    assert Laplace(epsilon=1.0, sensitivity=MAX_SCALE).scale == MAX_SCALE
    with pytest.raises(InvalidPrivacyParameter, match=r"^the noise scale .* overflows; raise ε"):
        Laplace(epsilon=0.5, sensitivity=MAX_SCALE)


# -- calibration ------------------------------------------------------------------------------


@pytest.mark.parametrize(("sens", "rho"), [(1.0, 0.125), (1.0, 0.5), (3.0, 0.7), (2.0, 1e-3)])
def test_gaussian_sigma_is_the_smallest_float_meeting_rho(sens: float, rho: float) -> None:
    for mech in (Gaussian(rho=rho, sensitivity=sens), DiscreteGaussian(rho=rho, sensitivity=sens)):
        sigma = mech.scale
        target = Fraction(rho)
        assert Fraction(sens) ** 2 / (2 * Fraction(sigma) ** 2) <= target
        below = math.nextafter(sigma, 0.0)
        assert Fraction(sens) ** 2 / (2 * Fraction(below) ** 2) > target


def test_sensitivity_zero_means_no_noise_and_no_cost() -> None:
    for mech in (Gaussian(rho=0.5, sensitivity=0), DiscreteGaussian(rho=0.5, sensitivity=0)):
        assert mech.scale == 0.0
        assert mech.cost.is_zero
        assert mech.half_width() == 0.0


@pytest.mark.parametrize("sens", [0.5, 2.0])
def test_gaussian_for_epsilon_delta_classic(sens: float) -> None:
    g = Gaussian.for_epsilon_delta(epsilon=0.5, delta=1e-5, sensitivity=sens, method="classic")
    sigma = sens * math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    assert g.scale == pytest.approx(sigma, rel=1e-9)
    assert g.rho == pytest.approx(sens**2 / (2 * sigma**2), rel=1e-9)
    assert g.sensitivity == sens
    a = Gaussian.for_epsilon_delta(epsilon=0.5, delta=1e-5, sensitivity=sens)
    assert a.scale < g.scale  # the default (analytic) is tighter


def test_gaussian_for_epsilon_delta_unknown_method() -> None:
    with pytest.raises(
        InvalidPrivacyParameter, match=r"^unknown calibration 'exact'; use analytic"
    ):
        Gaussian.for_epsilon_delta(epsilon=0.5, delta=1e-5, sensitivity=1.0, method="exact")


def _bw_delta(sigma: float, eps: float, sens: float) -> float:
    """Balle & Wang (2018) Thm. 8, computed in log space (no underflow)."""
    a, b = sens / (2 * sigma), eps * sigma / sens
    return float(ndtr(a - b) - math.exp(eps + float(log_ndtr(-a - b))))


@pytest.mark.parametrize(
    ("eps", "delta", "sens"),
    [
        (5.0, 1e-3, 1.0),
        (10.0, 1e-3, 1.0),
        (40.0, 1e-5, 1.0),
        (1.0, 1e-5, 1e-6),
        (1.0, 1e-5, 1e6),
        (0.3, 1e-8, 7.0),
    ],
)
def test_analytic_sigma_is_safe_and_tight(eps: float, delta: float, sens: float) -> None:
    s = analytic_gaussian_sigma(epsilon=eps, delta=delta, sensitivity=sens)
    assert _bw_delta(s, eps, sens) <= delta * (1 + 1e-9)
    assert _bw_delta(s * (1 - 1e-6), eps, sens) > delta


def test_analytic_sigma_is_safe_at_a_huge_epsilon() -> None:
    """ε = 800: Φ(−a−b) underflows to 0 at every σ; dropping that term only raises δ(σ)."""
    s = analytic_gaussian_sigma(epsilon=800.0, delta=1e-5, sensitivity=1.0)
    assert _bw_delta(s, 800.0, 1.0) <= 1e-5
    assert 0.02 < s < 0.04  # where Φ(Δ/(2σ) − εσ/Δ) ≈ δ


def test_analytic_sigma_scales_with_sensitivity() -> None:
    one = analytic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    for sens in (1e-8, 1e-6, 0.25, 8.0, 1e6):
        got = analytic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=sens)
        assert got == pytest.approx(one * sens, rel=1e-9)


def test_analytic_sigma_up_to_max_scale_is_returned() -> None:
    """Scale invariance up to the largest scale: Δ = 2⁴⁰ needs σ ≈ 2760·Δ ∈ (2⁵¹, 2⁵²]."""
    one = analytic_gaussian_sigma(epsilon=1e-4, delta=1e-4, sensitivity=1.0)
    big = analytic_gaussian_sigma(epsilon=1e-4, delta=1e-4, sensitivity=2.0**40)
    assert 2.0**51 < big <= MAX_SCALE
    assert big == pytest.approx(one * 2.0**40, rel=1e-9)


def test_analytic_sigma_beyond_representable_scale_is_refused() -> None:
    with pytest.raises(InvalidPrivacyParameter, match=r"^δ too small for any representable σ$"):
        analytic_gaussian_sigma(epsilon=1e-300, delta=1e-20, sensitivity=1.0)


# -- half widths follow the confidence asked for -----------------------------------------------


def test_mechanism_half_width_is_the_quantile_at_the_confidence_asked() -> None:
    cases: list[tuple[Mechanism, Callable[[float, float], float]]] = [
        (DiscreteLaplace(epsilon=0.5, sensitivity=1), discrete_laplace_half_width),
        (DiscreteGaussian(rho=0.02, sensitivity=1), discrete_gaussian_half_width),
        (Laplace(epsilon=0.5, sensitivity=1.0), laplace_half_width),
        (Gaussian(rho=0.02, sensitivity=1.0), gaussian_half_width),
    ]
    for mech, fn in cases:
        assert mech.half_width() == fn(mech.scale, 0.95)
        assert mech.half_width(0.99) == fn(mech.scale, 0.99)
        assert mech.half_width(0.99) > mech.half_width(0.8)


# -- make_release: the release's fields --------------------------------------------------------


def test_make_release_fields_defaults() -> None:
    mech = DiscreteLaplace(epsilon=0.5, sensitivity=1)
    rel = make_release(mech, [10], name="n_users", fingerprint="fp1", noise=FixedNoise())
    assert rel.name == "n_users"
    assert rel.fingerprint == "fp1"
    assert rel.values == (13.0,)
    hw = discrete_laplace_half_width(2.0, 0.95)
    assert rel.intervals == ((13.0 - hw, 13.0 + hw),)
    assert rel.kind == "count"
    assert rel.unit == ""
    assert rel.window is None
    assert rel.small_threshold == 5.0
    assert rel.confidence == 0.95
    assert rel.mechanism == "discrete_laplace"
    assert rel.noise_scale == 2.0
    assert rel.cost == Cost.pure(0.5)
    assert rel.seeded is False


def test_make_release_fields_given() -> None:
    mech = Gaussian(rho=0.5, sensitivity=1.0)
    rel = make_release(
        mech,
        [4.0, 6.0],
        name="stars",
        fingerprint="fp2",
        kind="sum",
        unit="stars",
        labels=["a", "b"],
        window="2026-W47",
        confidence=0.9,
        noise=FixedNoise(),
        small_threshold=None,
    )
    assert (rel.kind, rel.unit, rel.window, rel.labels) == ("sum", "stars", "2026-W47", ("a", "b"))
    assert rel.small_threshold is None
    assert rel.confidence == 0.9
    hw = gaussian_half_width(1.0, 0.9)
    assert rel.values == (3.75, 5.75)
    assert rel.intervals == ((3.75 - hw, 3.75 + hw), (5.75 - hw, 5.75 + hw))


def test_make_release_vector_without_labels_is_refused() -> None:
    with pytest.raises(InvalidPrivacyParameter, match="needs labels"):
        make_release(
            DiscreteLaplace(epsilon=1.0, sensitivity=1),
            [1, 2],
            name="h",
            fingerprint="f",
            noise=FixedNoise(),
        )


# -- ratio_release ---------------------------------------------------------------------------


def _rel(value: float, mechanism: str, scale: float, **kw: object) -> Release:
    return Release(
        name=kw.pop("name", "r"),  # type: ignore[arg-type]
        values=(value,),
        intervals=((value - 1, value + 1),),
        mechanism=mechanism,
        noise_scale=scale,
        cost=kw.pop("cost", Cost.pure(0.5)),  # type: ignore[arg-type]
        fingerprint="x",
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(("n", "d", "value"), [(30.0, 10.0, 3.0), (3.0, 1.5, 2.0), (3.0, 0.5, 3.0)])
def test_ratio_value_is_offset_plus_n_over_d_at_least_one(n: float, d: float, value: float) -> None:
    num, den = _rel(n, "discrete_laplace", 0.0), _rel(d, "discrete_laplace", 0.0)
    assert ratio_release("m", num, den, fingerprint="f").value == value
    assert ratio_release("m", num, den, fingerprint="f", offset=1.0).value == value + 1.0


def test_ratio_fields() -> None:
    num = _rel(
        30.0,
        "discrete_laplace",
        2.0,
        name="total",
        privacy_unit="household",
        window="2026-W47",
        cost=Cost.zcdp(0.1),
    )
    den = _rel(10.0, "gaussian", 1.0, name="count", seeded=True, delta=1e-6, cost=Cost.zcdp(0.2))
    rel = ratio_release("mean_x", num, den, fingerprint="fp9")
    assert rel.name == "mean_x"
    assert rel.mechanism == "derived"
    assert rel.fingerprint == "fp9"
    assert (rel.kind, rel.unit) == ("mean", "")
    assert rel.privacy_unit == "household"
    assert rel.window == "2026-W47"
    assert rel.seeded is True
    assert rel.delta == 1e-6
    assert rel.small_threshold is None
    assert rel.confidence == 0.95
    assert rel.cost == Cost.zcdp(0.1) + Cost.zcdp(0.2)
    assert rel.notes == ("ratio of total and count; Monte Carlo interval",)
    given = ratio_release(
        "m", num, den, fingerprint="f", kind="proportion", unit="%", confidence=0.8
    )
    assert (given.kind, given.unit, given.confidence) == ("proportion", "%", 0.8)
    both_unseeded = ratio_release(
        "m", _rel(1.0, "laplace", 1.0), _rel(2.0, "laplace", 1.0), fingerprint="f"
    )
    assert both_unseeded.seeded is False


def test_ratio_of_vectors_is_refused() -> None:
    vec = Release(
        name="h",
        values=(1.0, 2.0),
        intervals=((0, 2), (1, 3)),
        mechanism="laplace",
        noise_scale=1.0,
        cost=Cost.pure(1),
        fingerprint="h",
        labels=("a", "b"),
    )
    scalar = _rel(3.0, "laplace", 1.0)
    for num, den in ((vec, scalar), (scalar, vec)):
        with pytest.raises(
            InvalidPrivacyParameter, match=r"^ratio_release takes two scalar releases$"
        ):
            ratio_release("m", num, den, fingerprint="f")


def test_ratio_of_a_derived_release_is_refused_by_name() -> None:
    derived = _rel(3.0, "derived", 1.0)
    with pytest.raises(
        InvalidPrivacyParameter,
        match=r"^cannot simulate the noise of a 'derived' release for an interval$",
    ):
        ratio_release("m", derived, _rel(2.0, "laplace", 1.0), fingerprint="f")


@pytest.mark.parametrize(
    "mechanism", ["gaussian", "discrete_gaussian", "laplace", "discrete_laplace"]
)
@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_ratio_interval_is_the_central_quantile_of_the_noise(
    mechanism: str, confidence: float
) -> None:
    """With an exact denominator D = 10, the ratio is N/10 + Z/10: its quantiles are known."""
    scale = 50.0
    num = _rel(1000.0, mechanism, scale)
    den = _rel(10.0, "discrete_laplace", 0.0)
    rel = ratio_release("m", num, den, fingerprint="f-" + mechanism, confidence=confidence)
    alpha = 1 - confidence
    if "gaussian" in mechanism:
        q = scale * NormalDist().inv_cdf(1 - alpha / 2)
    else:  # Laplace: P(|Z| > q) = exp(−q/b)
        q = scale * math.log(1 / alpha)
    lo, hi = rel.interval
    # 20 000 seeded draws: the quantile is within ~2% of σ; 0.06·σ/10 leaves room.
    assert lo == pytest.approx(100.0 - q / 10, abs=0.06 * scale / 10 * 3)
    assert hi == pytest.approx(100.0 + q / 10, abs=0.06 * scale / 10 * 3)
    assert rel.value == 100.0


def test_ratio_interval_floors_the_noisy_denominator_at_one() -> None:
    """D = 2 with discrete Laplace noise b = 1: the simulated denominator is max(2 + Z, 1)."""
    num = _rel(100.0, "discrete_laplace", 0.0)
    den = _rel(2.0, "discrete_laplace", 1.0)
    rel = ratio_release("m", num, den, fingerprint="floor")
    # P(2 + Z ≤ 1) = P(Z ≤ −1) = t/(1+t) ≈ 0.27 > 2.5%: the upper end is 100/1.
    assert rel.interval[1] == 100.0
    # P(2 + Z ≥ 5) = t³/(1+t) ≈ 0.036 > 2.5% and P(2 + Z ≥ 6) ≈ 0.013 < 2.5%: lower end 100/5.
    assert rel.interval[0] == 20.0


# -- permute_and_flip --------------------------------------------------------------------------


def test_top_k_noise_scale_is_k_sensitivity_over_epsilon() -> None:
    src = FixedNoise()
    assert permute_and_flip([5, 1, 3, 2], epsilon=1.5, sensitivity=2, k=3, noise=src) == [0, 1, 2]
    permute_and_flip([5, 1, 3, 2], epsilon=1.5, sensitivity=2, k=3, monotonic=False, noise=src)
    assert permute_and_flip([5.5, 1.25], epsilon=1.0, sensitivity=1, noise=src) == [0]
    assert src.calls == [("top_k", 4.0, 3), ("top_k", 8.0, 3), ("top_k", 1.0, 1)]


@pytest.mark.parametrize("k", [0, 4, -1, True, 1.0, "2"])
def test_top_k_refuses_k_outside_range(k: object) -> None:
    with pytest.raises(InvalidPrivacyParameter, match=r"^k must be an int in \[1, 3\], got "):
        permute_and_flip([1, 2, 3], epsilon=1.0, sensitivity=1, k=k, noise=FixedNoise())  # type: ignore[arg-type]


def test_top_k_may_select_every_item() -> None:
    got = permute_and_flip([1, 2, 3], epsilon=1.0, sensitivity=1, k=3, noise=FixedNoise())
    assert got == [0, 1, 2]


def test_top_k_with_sensitivity_zero_is_exact_and_breaks_ties_by_position() -> None:
    assert permute_and_flip([3, 9, 1, 9], epsilon=1.0, sensitivity=0, k=3) == [1, 3, 0]
    assert permute_and_flip([2.5, 0.5], epsilon=1.0, sensitivity=0) == [0]
    ties = [float((7 * i) % 3) for i in range(40)]  # 40 scores, three distinct values
    by_position = sorted(range(40), key=lambda i: -ties[i])  # Python's sort is stable
    assert permute_and_flip(ties, epsilon=1.0, sensitivity=0, k=30) == by_position[:30]
