"""Goodness of fit: both noise sources draw from the intended distributions.

α = 1e-6 throughout, so a correct sampler fails with probability ≤ 1e-6 per test.
The seeded numpy source is what the audit drives; these tests are what licenses
that substitution (the secure OpenDP source draws the same distribution).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from dpllm.privacy.noise import NoiseSource, SecureNoise, SeededNoise

ALPHA = 1e-6


def _dlap_pmf(k: np.ndarray, scale: float) -> np.ndarray:
    t = math.exp(-1.0 / scale)
    return (1 - t) / (1 + t) * t ** np.abs(k)


def _dgauss_pmf(k: np.ndarray, sigma: float) -> np.ndarray:
    span = np.arange(-int(sigma * 40) - 10, int(sigma * 40) + 11)
    z = np.exp(-(span**2) / (2 * sigma**2)).sum()
    return np.exp(-(k**2) / (2 * sigma**2)) / z


def _chi2_pvalue(samples: np.ndarray, pmf: Callable[[np.ndarray], np.ndarray]) -> float:
    """χ² goodness of fit; tails with expected count < 5 merge into one bin per side.

    Both pmfs are symmetric about 0, so each merged tail expects half of the mass
    outside the inner bins.
    """
    n = samples.size
    span = int(np.abs(samples).max()) + 1
    ks = np.arange(-span, span + 1)
    expected = pmf(ks) * n
    observed = np.bincount(samples - ks[0], minlength=ks.size).astype(float)
    inner = np.nonzero(expected >= 5)[0]
    first, last = int(inner[0]), int(inner[-1])
    middle = expected[first + 1 : last]
    tail = (n - middle.sum()) / 2
    obs = np.concatenate(
        [[observed[: first + 1].sum()], observed[first + 1 : last], [observed[last:].sum()]]
    )
    exp = np.concatenate([[tail], middle, [tail]])
    return float(stats.chisquare(obs, exp).pvalue)


SOURCES = [
    pytest.param(lambda: SecureNoise(), id="opendp"),
    pytest.param(lambda: SeededNoise(7), id="seeded"),
]


@pytest.mark.parametrize("make", SOURCES)
@pytest.mark.parametrize("scale", [0.7, 2.0, 10.0])
def test_discrete_laplace_fits(make, scale: float) -> None:  # type: ignore[no-untyped-def]
    source: NoiseSource = make()
    x = source.discrete_laplace(scale=scale, size=20_000)
    assert x.dtype == np.int64
    assert _chi2_pvalue(x, lambda k: _dlap_pmf(k, scale)) > ALPHA


@pytest.mark.parametrize("make", SOURCES)
@pytest.mark.parametrize("sigma", [0.8, 3.0, 12.0])
def test_discrete_gaussian_fits(make, sigma: float) -> None:  # type: ignore[no-untyped-def]
    source: NoiseSource = make()
    x = source.discrete_gaussian(sigma=sigma, size=20_000)
    assert x.dtype == np.int64
    assert _chi2_pvalue(x, lambda k: _dgauss_pmf(k, sigma)) > ALPHA


@pytest.mark.parametrize("make", SOURCES)
def test_continuous_laplace_fits(make) -> None:  # type: ignore[no-untyped-def]
    source: NoiseSource = make()
    x = source.add_laplace(np.zeros(10_000), scale=2.5)
    assert stats.kstest(x, stats.laplace(scale=2.5).cdf).pvalue > ALPHA


@pytest.mark.parametrize("make", SOURCES)
def test_continuous_gaussian_fits(make) -> None:  # type: ignore[no-untyped-def]
    source: NoiseSource = make()
    x = source.add_gaussian(np.zeros(10_000), sigma=1.7)
    assert stats.kstest(x, stats.norm(scale=1.7).cdf).pvalue > ALPHA


def test_a_wrong_distribution_is_rejected() -> None:
    """The fit test has power: discrete Laplace of scale 2.6 is not scale 2."""
    x = SeededNoise(3).discrete_laplace(scale=2.6, size=20_000)
    assert _chi2_pvalue(x, lambda k: _dlap_pmf(k, 2.0)) < ALPHA


def test_secure_source_is_not_seeded_and_seeded_is_reproducible() -> None:
    assert SecureNoise().seeded is False
    a = SeededNoise(5).discrete_laplace(scale=3.0, size=50)
    b = SeededNoise(5).discrete_laplace(scale=3.0, size=50)
    assert (a == b).all()


@pytest.mark.parametrize("make", SOURCES)
def test_exponential_top_k_prefers_large_scores(make) -> None:  # type: ignore[no-untyped-def]
    source: NoiseSource = make()
    picks = source.exponential_top_k(np.array([0.0, 0.0, 1000.0, 500.0]), scale=1.0, k=2)
    assert picks == [2, 3]
