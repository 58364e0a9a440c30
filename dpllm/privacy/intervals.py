"""Confidence intervals from the exact quantiles of each noise distribution.

A release's interval is ``value ± h`` where ``h`` is the smallest half-width with
``P(|noise| ≤ h) ≥ confidence``. Because the noise distribution is public, this is
post-processing: it costs nothing and is exact, not asymptotic.

* Discrete Laplace, P(k) ∝ t^{|k|} with t = e^{−1/b}: for k ≥ 1,
  ``P(|Z| ≥ k) = 2·t^k / (1 + t)``, so the smallest integer h with
  ``P(|Z| > h) ≤ α`` is ``h = max(0, ⌈ln(α(1+t)/2) / ln t⌉ − 1)`` (closed form).
* Continuous Laplace(b): ``h = b·ln(1/α)``.
* Gaussian(σ): ``h = σ·Φ⁻¹(1 − α/2)``.
* Discrete Gaussian(σ): the normalised pmf is summed outward until the mass
  reaches 1 − α (exact up to float rounding); for σ > 10⁴ the continuous
  quantile, rounded up, is used (total-variation distance is negligible there).
* Derived values (a ratio of two noisy releases) use a parametric Monte Carlo
  over the public noise distributions, seeded from the release fingerprint so
  the interval is stable across reruns (see :func:`ratio_interval`).
"""

from __future__ import annotations

import hashlib
import math
from statistics import NormalDist

import numpy as np

from dpllm.errors import InvalidPrivacyParameter

__all__ = [
    "discrete_gaussian_half_width",
    "discrete_laplace_half_width",
    "gaussian_half_width",
    "laplace_half_width",
    "seed_from_fingerprint",
]


def _alpha(confidence: float) -> float:
    if not (isinstance(confidence, float | int) and 0.0 < confidence < 1.0):
        raise InvalidPrivacyParameter(f"confidence must lie in (0, 1), got {confidence!r}")
    return 1.0 - float(confidence)


def discrete_laplace_half_width(scale: float, confidence: float = 0.95) -> float:
    """Smallest integer h with P(|Z| ≤ h) ≥ confidence for discrete Laplace(scale)."""
    alpha = _alpha(confidence)
    if scale == 0:
        return 0.0
    t = math.exp(-1.0 / scale)
    h = math.ceil(math.log(alpha * (1.0 + t) / 2.0) / math.log(t)) - 1
    h = max(0, h)
    # Guard against float rounding at the boundary: step until the exact tail fits.
    while h > 0 and 2.0 * t**h / (1.0 + t) <= alpha:
        h -= 1
    while 2.0 * t ** (h + 1) / (1.0 + t) > alpha:
        h += 1
    return float(h)


def laplace_half_width(scale: float, confidence: float = 0.95) -> float:
    """``b·ln(1/α)`` for Laplace(0, b)."""
    alpha = _alpha(confidence)
    return scale * math.log(1.0 / alpha)


def gaussian_half_width(sigma: float, confidence: float = 0.95) -> float:
    """``σ·Φ⁻¹(1 − α/2)`` for N(0, σ²)."""
    alpha = _alpha(confidence)
    if sigma == 0:
        return 0.0
    return sigma * NormalDist().inv_cdf(1.0 - alpha / 2.0)


def discrete_gaussian_half_width(sigma: float, confidence: float = 0.95) -> float:
    """Smallest integer h with P(|Z| ≤ h) ≥ confidence for the discrete Gaussian(σ)."""
    alpha = _alpha(confidence)
    if sigma == 0:
        return 0.0
    if sigma > 1e4:
        return float(math.ceil(gaussian_half_width(sigma, confidence)))
    span = int(math.ceil(sigma * 40)) + 10
    k = np.arange(-span, span + 1, dtype=np.float64)
    weights = np.exp(-(k * k) / (2.0 * sigma * sigma))
    pmf = weights / weights.sum()
    centre = span
    # mass of |Z| ≤ h for h = 0, 1, 2 …
    inner = np.concatenate([[pmf[centre]], pmf[centre + 1 :] + pmf[centre - 1 :: -1][:span]])
    cumulative = np.cumsum(inner)
    h = int(np.searchsorted(cumulative, 1.0 - alpha - 1e-15))
    return float(min(h, span))


def seed_from_fingerprint(fingerprint: str) -> int:
    """A stable 63-bit seed from a release fingerprint (for post-processing only)."""
    digest = hashlib.sha256(fingerprint.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1
