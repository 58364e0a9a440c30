"""Mechanism calibration, costs, bad parameters and releases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpllm import Cost, DataError, InvalidPrivacyParameter, Measure
from dpllm.privacy.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    make_release,
    permute_and_flip,
    ratio_release,
)
from dpllm.privacy.noise import SeededNoise


def test_calibrations() -> None:
    assert DiscreteLaplace(epsilon=0.5, sensitivity=2).scale == 4.0
    assert DiscreteLaplace(epsilon=0.5, sensitivity=2).cost == Cost.pure(0.5)
    g = DiscreteGaussian(rho=0.125, sensitivity=1)
    assert g.scale == pytest.approx(2.0)
    assert g.cost == Cost.zcdp(0.125)
    assert Laplace(epsilon=2.0, sensitivity=5.0).scale == 2.5
    assert Gaussian(rho=0.5, sensitivity=3.0).scale == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("epsilon", "delta", "sigma"),
    # The commonly cited value for ε = 1, δ = 1e-5, Δ = 1 (σ ≈ 3.73); other
    # points are checked against scipy's exact privacy profile below.
    [(1.0, 1e-5, 3.7306)],
)
def test_analytic_gaussian_matches_reference(epsilon: float, delta: float, sigma: float) -> None:
    got = analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=1.0)
    assert got == pytest.approx(sigma, rel=2e-3)


def test_analytic_gaussian_is_tight_and_safe() -> None:
    """Independent check: the exact privacy profile at σ is ≤ δ, and just below σ it is > δ."""
    from scipy.stats import norm

    def delta_of(sigma: float, eps: float) -> float:
        a, b = 1 / (2 * sigma), eps * sigma
        return float(norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b))

    for eps in (0.1, 0.7, 1.0, 3.0):
        s = analytic_gaussian_sigma(epsilon=eps, delta=1e-6, sensitivity=1.0)
        assert delta_of(s, eps) <= 1e-6 * (1 + 1e-9)
        assert delta_of(s * 0.999, eps) > 1e-6
        if eps < 1:
            # The analytic calibration never needs more noise than the classic one.
            assert s <= classic_gaussian_sigma(epsilon=eps, delta=1e-6, sensitivity=1.0)


def test_classic_gaussian_refuses_epsilon_at_least_one() -> None:
    with pytest.raises(InvalidPrivacyParameter, match="ε < 1"):
        classic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    assert classic_gaussian_sigma(epsilon=0.5, delta=1e-5, sensitivity=1.0) == pytest.approx(
        math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    )


def test_for_epsilon_delta_records_rho() -> None:
    g = Gaussian.for_epsilon_delta(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    assert g.scale == pytest.approx(3.7306, rel=1e-3)
    assert g.cost.measure is Measure.ZCDP


@pytest.mark.parametrize(
    "build",
    [
        lambda: DiscreteLaplace(epsilon=0, sensitivity=1),
        lambda: DiscreteLaplace(epsilon=-1, sensitivity=1),
        lambda: DiscreteLaplace(epsilon=float("nan"), sensitivity=1),
        lambda: DiscreteLaplace(epsilon=float("inf"), sensitivity=1),
        lambda: DiscreteLaplace(epsilon=1, sensitivity=-1),
        lambda: DiscreteLaplace(epsilon=1e-300, sensitivity=1),  # scale overflows
        lambda: DiscreteGaussian(rho=0, sensitivity=1),
        lambda: Laplace(epsilon=1, sensitivity=float("inf")),
        lambda: Gaussian.for_epsilon_delta(epsilon=1, delta=0, sensitivity=1),
        lambda: Gaussian.for_epsilon_delta(epsilon=1, delta=1.5, sensitivity=1),
        lambda: Gaussian.for_epsilon_delta(epsilon=1, delta=float("nan"), sensitivity=1),
    ],
)
def test_bad_privacy_parameters(build) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidPrivacyParameter):
        build()


def test_sensitivity_zero_is_free_and_exact() -> None:
    m = DiscreteLaplace(epsilon=1.0, sensitivity=0)
    r = make_release(m, [42], name="c", fingerprint="f")
    assert r.value == 42 and r.interval == (42, 42) and r.cost.is_zero


def test_integer_mechanisms_refuse_fractional_or_nan_values() -> None:
    m = DiscreteLaplace(epsilon=1.0, sensitivity=1)
    with pytest.raises(DataError, match="integer"):
        m.randomise([1.5])
    with pytest.raises(DataError, match="finite"):
        m.randomise([float("nan")])
    with pytest.raises(DataError, match="finite"):
        Laplace(epsilon=1.0, sensitivity=1.0).randomise([float("inf")])


def test_make_release_secure_default_and_seeded_flag() -> None:
    m = DiscreteLaplace(epsilon=1.0, sensitivity=1)
    secure = make_release(m, [100], name="c", fingerprint="f", window="2026-W47")
    assert not secure.seeded
    assert secure.value == int(secure.value)
    lo, hi = secure.interval
    assert hi - lo == 2 * m.half_width()
    seeded = make_release(m, [100], name="c", fingerprint="f", noise=SeededNoise(1))
    assert seeded.seeded


def test_vector_release_is_one_cost() -> None:
    m = DiscreteLaplace(epsilon=1.0, sensitivity=2)
    h = make_release(m, [1, 2, 3, 4, 5], name="h", fingerprint="f", labels="12345")
    assert h.cost == Cost.pure(1.0)
    assert len(h) == 5
    with pytest.raises(InvalidPrivacyParameter, match="labels"):
        make_release(m, [1, 2], name="h", fingerprint="f")


def test_clamp_is_post_processing() -> None:
    m = DiscreteLaplace(epsilon=0.01, sensitivity=1)
    r = make_release(m, [0], name="c", fingerprint="f", clamp=(0, math.inf), noise=SeededNoise(2))
    assert r.value >= 0 and r.interval[0] >= 0


def test_ratio_release_is_stable_and_costs_both() -> None:
    s = make_release(Laplace(epsilon=0.5, sensitivity=2.0), [400.0], name="s", fingerprint="s")
    c = make_release(DiscreteLaplace(epsilon=0.5, sensitivity=1), [1000], name="c", fingerprint="c")
    a = ratio_release("mean", s, c, fingerprint="m", offset=3.0, clamp=(1, 5))
    b = ratio_release("mean", s, c, fingerprint="m", offset=3.0, clamp=(1, 5))
    assert a == b  # interval seeded from the fingerprint
    assert a.cost == Cost.pure(1.0)
    assert a.interval[0] <= a.value <= a.interval[1]
    assert 1 <= a.value <= 5


def test_ratio_interval_coverage_is_close_to_nominal() -> None:
    """Approximate (parametric Monte Carlo) interval: coverage ≥ 90% over 400 trials."""
    true_sum, true_count = 300.0, 500
    source = SeededNoise(11)
    covered = 0
    trials = 400
    for i in range(trials):
        s = make_release(
            Laplace(epsilon=0.5, sensitivity=2.0),
            [true_sum],
            name="s",
            fingerprint=f"s{i}",
            noise=source,
        )
        c = make_release(
            DiscreteLaplace(epsilon=0.5, sensitivity=1),
            [true_count],
            name="c",
            fingerprint=f"c{i}",
            noise=source,
        )
        r = ratio_release("mean", s, c, fingerprint=f"m{i}", offset=3.0, samples=4000)
        lo, hi = r.interval
        covered += lo <= 3.0 + true_sum / true_count <= hi
    # A 95% interval; the binomial lower 1e-6 quantile at p = 0.9 is ~0.84·400.
    assert covered >= 0.84 * trials


def test_permute_and_flip_selects_without_counts() -> None:
    picks = permute_and_flip([5, 1000, 3, 900], epsilon=1.0, sensitivity=1, k=2)
    assert picks == [1, 3]
    with pytest.raises(InvalidPrivacyParameter):
        permute_and_flip([1, 2], epsilon=1.0, sensitivity=1, k=3)
    with pytest.raises(InvalidPrivacyParameter):
        permute_and_flip([1, 2], epsilon=0.0, sensitivity=1)


def test_permute_and_flip_frequencies_follow_the_exponential_mechanism_bound() -> None:
    """With equal-but-one scores, the best item wins at most e^ε times as often as another."""
    source = SeededNoise(4)
    eps = 1.0
    wins = np.zeros(3)
    n = 20_000
    for _ in range(n):
        wins[permute_and_flip([1.0, 0.0, 0.0], epsilon=eps, sensitivity=1.0, noise=source)[0]] += 1
    # Swap a neighbour: item 0 loses one point → scores tie; its win rate may
    # change by at most a factor e^ε. Compare against the tie's 1/3.
    assert wins[0] / n <= math.exp(eps) / 3 + 0.02


@pytest.mark.parametrize("epsilon", [0.1, 0.3, 0.7, 1.1, 3.0, 1e-3])
@pytest.mark.parametrize("sensitivity", [1, 3, 25, 0.1])
def test_scale_never_undercharges(epsilon: float, sensitivity: float) -> None:
    """The noise drawn is at least as strong as the ε charged, exactly (not just in floats)."""
    from decimal import Decimal
    from fractions import Fraction

    eps = Fraction(Decimal(repr(epsilon)))
    b = DiscreteLaplace(epsilon=epsilon, sensitivity=sensitivity).scale
    assert Fraction(sensitivity) / Fraction(b) <= eps
    rho = eps
    s = DiscreteGaussian(rho=epsilon, sensitivity=sensitivity).scale
    assert Fraction(sensitivity) ** 2 / (2 * Fraction(s) ** 2) <= rho
