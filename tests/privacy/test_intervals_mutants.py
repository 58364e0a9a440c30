"""Interval half-widths: exact quantiles, bad confidences, the seed derivation.

Aimed at the survivors of ``make mutate`` (group privacy); each test states the
promise it checks, against an independent reference where there is one.
"""

from __future__ import annotations

import hashlib
import math
from statistics import NormalDist

import numpy as np
import pytest

from dpllm import InvalidPrivacyParameter
from dpllm.privacy.intervals import (
    discrete_gaussian_half_width,
    discrete_laplace_half_width,
    gaussian_half_width,
    laplace_half_width,
    seed_from_fingerprint,
)

HALF_WIDTHS = [
    discrete_laplace_half_width,
    laplace_half_width,
    gaussian_half_width,
    discrete_gaussian_half_width,
]


@pytest.mark.parametrize("fn", HALF_WIDTHS)
@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, -0.1, "0.95", None])
def test_confidence_outside_open_unit_interval_is_refused(fn: object, confidence: object) -> None:
    with pytest.raises(InvalidPrivacyParameter, match=r"^confidence must lie in \(0, 1\), got "):
        fn(1.0, confidence)  # type: ignore[operator]


@pytest.mark.parametrize("fn", HALF_WIDTHS)
def test_default_confidence_is_95_percent(fn: object) -> None:
    assert fn(3.0) == fn(3.0, 0.95)  # type: ignore[operator]


def _dlap_reference(scale: float, confidence: float) -> int:
    """Smallest h ≥ 0 with P(|Z| ≤ h) ≥ confidence, by summing the pmf outward."""
    t = math.exp(-1.0 / scale)
    mass = (1.0 - t) / (1.0 + t)  # P(Z = 0)
    h = 0
    while mass < confidence - 1e-15:
        h += 1
        mass += 2.0 * (1.0 - t) / (1.0 + t) * t**h
    return h


@pytest.mark.parametrize("scale", [0.05, 0.3, 0.5, 1.0, 2.0, 3.7, 10.0, 55.5, 400.0])
@pytest.mark.parametrize("confidence", [0.3, 0.5, 0.8, 0.9, 0.95, 0.99, 0.999])
def test_discrete_laplace_half_width_is_the_exact_quantile(scale: float, confidence: float) -> None:
    assert discrete_laplace_half_width(scale, confidence) == _dlap_reference(scale, confidence)


def test_discrete_laplace_half_width_at_a_huge_scale() -> None:
    """Closed form at any scale: b = 1e9 gives ≈ b·ln(1/α) (a counting loop would never end)."""
    h = discrete_laplace_half_width(1e9, 0.95)
    assert h == pytest.approx(1e9 * math.log(1 / 0.05), rel=1e-6)
    t = math.exp(-1.0 / 1e9)
    assert 2 * t ** (h + 1) / (1 + t) <= 0.05 < 2 * t**h / (1 + t)


def _tail_definition(scale: float, confidence: float) -> int:
    """The docstring's definition: the smallest h ≥ 0 with P(|Z| > h) = 2t^(h+1)/(1+t) ≤ α."""
    alpha, t = 1.0 - confidence, math.exp(-1.0 / scale)
    h = 0
    while 2.0 * t ** (h + 1) / (1.0 + t) > alpha:
        h += 1
    return h


@pytest.mark.parametrize("scale", [0.5, 0.7, 1.0, 1.3, 2.0, 3.0, 5.0, 10.0])
def test_discrete_laplace_half_width_at_ties(scale: float) -> None:
    """Confidences where the tail at some n equals α (and the floats either side): the
    closed form's logarithms round both ways there, and the result must still be the
    smallest h whose tail fits."""
    t = math.exp(-1.0 / scale)
    for n in range(1, 60):
        tail = 2.0 * t**n / (1.0 + t)
        if not 1e-12 < tail < 0.999:
            continue
        for conf in (1.0 - tail, math.nextafter(1.0 - tail, 0.0), math.nextafter(1.0 - tail, 1.0)):
            assert discrete_laplace_half_width(scale, conf) == _tail_definition(scale, conf)


def test_gaussian_half_width_of_no_noise_is_zero() -> None:
    assert gaussian_half_width(0.0) == 0.0
    assert gaussian_half_width(0.0, 0.99) == 0.0


def _dgauss_reference(sigma: float, confidence: float) -> int:
    span = int(60 * sigma) + 60
    k = np.arange(-span, span + 1)
    w = np.exp(-(k.astype(float) ** 2) / (2 * sigma * sigma))
    pmf = w / w.sum()
    for h in range(span + 1):
        if pmf[np.abs(k) <= h].sum() >= confidence - 1e-12:
            return h
    raise AssertionError("unreachable")


@pytest.mark.parametrize("sigma", [0.05, 0.1, 0.2, 0.4, 1.0, 2.5, 7.0])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99])
def test_discrete_gaussian_half_width_is_the_exact_quantile(
    sigma: float, confidence: float
) -> None:
    assert discrete_gaussian_half_width(sigma, confidence) == _dgauss_reference(sigma, confidence)


def test_discrete_gaussian_without_spread_has_zero_half_width_even_at_extreme_confidence() -> None:
    # σ = 0.01 puts all the (float) mass on 0: P(|Z| ≤ 0) = 1 ≥ any confidence < 1.
    assert discrete_gaussian_half_width(0.01, 1.0 - 2.0**-52) == 0.0


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_discrete_gaussian_above_1e4_uses_the_rounded_up_continuous_quantile(
    confidence: float,
) -> None:
    for sigma in (10000.5, 2.5e4):
        expected = math.ceil(sigma * NormalDist().inv_cdf(1 - (1 - confidence) / 2))
        assert discrete_gaussian_half_width(sigma, confidence) == expected


@pytest.mark.parametrize("sigma", [1e3, 5e3, 1e4])
@pytest.mark.parametrize("confidence", [0.9, 0.99, 0.999])
def test_discrete_gaussian_up_to_1e4_is_the_exact_discrete_quantile(
    sigma: float, confidence: float
) -> None:
    """For σ ≥ 1 the pmf sum over |k| ≤ h equals the normal mass of [−h − ½, h + ½] up to
    e^(−2π²σ²) (Poisson summation), so the exact h is ⌈σ·z − ½⌉, one less than the
    continuous quantile rounded up whenever the fractional part of σ·z is in (0, ½]."""
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    assert discrete_gaussian_half_width(sigma, confidence) == math.ceil(sigma * z - 0.5)


def test_seed_is_a_stable_63_bit_number() -> None:
    # Known answer: a rerun (of any version) must reproduce the same derived intervals.
    digest = hashlib.sha256(b"q:mean_rating|2026-W47").digest()
    assert seed_from_fingerprint("q:mean_rating|2026-W47") == int.from_bytes(digest[:8]) // 2
    for fp in ("", "a", "é-ünïcode", "x" * 1000, "fingerprint-ff"):
        seed = seed_from_fingerprint(fp)
        assert 0 <= seed < 2**63
        assert seed == seed_from_fingerprint(fp)
    # 63 bits really used: over many fingerprints the top bit (2^62) is set about half the time.
    tops = sum(seed_from_fingerprint(str(i)) >> 62 for i in range(200))
    assert 50 < tops < 150
