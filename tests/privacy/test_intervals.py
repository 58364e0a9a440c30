"""Interval coverage: a 95% interval covers the true value at the rate its quantile says."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpllm.privacy.intervals import (
    discrete_gaussian_half_width,
    discrete_laplace_half_width,
    gaussian_half_width,
    laplace_half_width,
)
from dpllm.privacy.mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace
from dpllm.privacy.noise import SecureNoise, SeededNoise

ALPHA = 1e-6


def test_discrete_laplace_closed_form_is_the_smallest_integer() -> None:
    for scale in (0.3, 1.0, 2.0, 7.5, 50.0):
        h = discrete_laplace_half_width(scale, 0.95)
        t = math.exp(-1 / scale)

        def tail(k: float, t: float = t) -> float:  # P(|Z| > k)
            return 2 * t ** (k + 1) / (1 + t)

        assert tail(h) <= 0.05
        assert h == 0 or tail(h - 1) > 0.05


def test_continuous_quantiles() -> None:
    assert laplace_half_width(2.0, 0.95) == pytest.approx(2.0 * math.log(20))
    assert gaussian_half_width(1.0, 0.95) == pytest.approx(1.959964, rel=1e-6)
    assert discrete_gaussian_half_width(0.0) == 0.0
    # a wide discrete Gaussian approaches the continuous quantile
    assert discrete_gaussian_half_width(300.0) == pytest.approx(1.96 * 300, rel=0.01)


MECHS = [
    DiscreteLaplace(epsilon=0.5, sensitivity=1),
    DiscreteGaussian(rho=0.05, sensitivity=1),
    Laplace(epsilon=1.0, sensitivity=5.0),
    Gaussian(rho=0.1, sensitivity=2.0),
]


def _exact_coverage(mech, hw: float) -> float:  # type: ignore[no-untyped-def]
    if mech.name == "discrete_laplace":
        t = math.exp(-1 / mech.scale)
        return 1 - 2 * t ** (hw + 1) / (1 + t)
    if mech.name == "discrete_gaussian":
        s = mech.scale
        k = np.arange(-int(40 * s) - 10, int(40 * s) + 11)
        w = np.exp(-(k**2) / (2 * s * s))
        return float(w[np.abs(k) <= hw].sum() / w.sum())
    return 0.95


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
def test_coverage_matches_exact_quantile(mech) -> None:  # type: ignore[no-untyped-def]
    n = 200_000
    true = np.full(n, 1000.0)
    noisy = mech.randomise(true, noise=SeededNoise(99))
    hw = mech.half_width(0.95)
    covered = int(np.count_nonzero(np.abs(noisy - true) <= hw))
    p = _exact_coverage(mech, hw)
    assert p >= 0.95
    # two-sided binomial test against the exact coverage, α = 1e-6
    assert stats.binomtest(covered, n, p).pvalue > ALPHA


@pytest.mark.parametrize("mech", MECHS[:2], ids=lambda m: m.name)
def test_coverage_with_the_secure_sampler(mech) -> None:  # type: ignore[no-untyped-def]
    n = 5_000
    noisy = mech.randomise(np.full(n, 10.0), noise=SecureNoise())
    covered = int(np.count_nonzero(np.abs(noisy - 10.0) <= mech.half_width(0.95)))
    assert covered >= stats.binom.ppf(ALPHA, n, 0.95)
