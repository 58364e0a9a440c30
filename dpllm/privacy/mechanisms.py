"""Mechanisms: calibrated noise for one aggregate, its cost and its interval.

Integer aggregates (counts, sums of integer ratings, histograms) use the
**discrete** Laplace (ε-DP, L1 sensitivity) or the discrete Gaussian (ρ-zCDP, L2
sensitivity): the output stays on the integers, so no floating-point attack
(Mironov 2012) applies. Float aggregates use OpenDP's Laplace and Gaussian,
which add the noise to the value with rounding-aware arithmetic.

Calibration (Δ is the sensitivity over neighbouring datasets, i.e. the most the
aggregate can change when one user's records are added or removed):

* Laplace / discrete Laplace with scale ``b = Δ₁/ε`` is ε-DP
  (Dwork et al. 2006; Ghosh, Roughgarden & Sundararajan 2009 for the discrete form).
* Gaussian / discrete Gaussian with ``σ = Δ₂/√(2ρ)`` is ρ-zCDP
  (Bun & Steinke 2016, Prop. 1.6; Canonne, Kamath & Steinke 2020, Thm. 4, and for
  vectors its multivariate form in the same paper: independent coordinates with
  σ = Δ₂/√(2ρ) are ρ-zCDP w.r.t. L2 sensitivity Δ₂).
* For a target (ε, δ): :func:`classic_gaussian_sigma` (Dwork & Roth 2014,
  Thm. A.1, valid only for ε < 1) or :func:`analytic_gaussian_sigma`
  (Balle & Wang 2018, Thm. 8, any ε > 0, tighter).

A vector (histogram) is one release with one vector-valued sensitivity, hence
one cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from dpllm.errors import DataError, InvalidPrivacyParameter
from dpllm.privacy.intervals import (
    discrete_gaussian_half_width,
    discrete_laplace_half_width,
    gaussian_half_width,
    laplace_half_width,
    seed_from_fingerprint,
)
from dpllm.privacy.noise import MAX_SCALE, FloatArray, NoiseSource, SecureNoise, SeededNoise
from dpllm.release import Cost, Release

__all__ = [
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Gaussian",
    "Laplace",
    "Mechanism",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "make_release",
    "permute_and_flip",
    "ratio_release",
]


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidPrivacyParameter(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise InvalidPrivacyParameter(f"{name} must be finite, got {value!r}")
    if value <= 0:
        raise InvalidPrivacyParameter(f"{name} must be > 0, got {value!r}")
    return float(value)


def _sensitivity(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidPrivacyParameter(f"sensitivity must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise InvalidPrivacyParameter(f"sensitivity must be finite and ≥ 0, got {value!r}")
    return float(value)


def _scale(value: float) -> float:
    if not math.isfinite(value) or value > MAX_SCALE:
        raise InvalidPrivacyParameter(
            f"the noise scale {value:.3g} overflows; raise ε (or ρ) or lower the sensitivity"
        )
    return value


def _exact(x: float) -> Fraction:
    return Fraction(Decimal(repr(x)))


def _laplace_scale(sensitivity: float, epsilon: float) -> float:
    """The float scale b = Δ/ε, nudged up until Δ/b ≤ ε holds *exactly*.

    Float division can round b down by half an ulp, which would make the true
    ε = Δ/b exceed the ε charged (by ~1e-17). Nudging up keeps the charge an
    upper bound on the privacy loss of the noise actually drawn.
    """
    if sensitivity == 0:
        return 0.0
    b = sensitivity / epsilon
    if not math.isfinite(b):
        return b  # a subnormal ε: the scale overflows, and _scale says so
    target = _exact(epsilon)
    while Fraction(sensitivity) / Fraction(b) > target:
        b = math.nextafter(b, math.inf)
    return b


def _gaussian_scale(sensitivity: float, rho: float) -> float:
    """σ = Δ/√(2ρ), nudged up until Δ²/(2σ²) ≤ ρ holds exactly (see above)."""
    if sensitivity == 0:
        return 0.0
    sigma = sensitivity / math.sqrt(2.0 * rho)
    target = _exact(rho)
    while Fraction(sensitivity) ** 2 / (2 * Fraction(sigma) ** 2) > target:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def _as_array(values: Sequence[float] | FloatArray, *, integer: bool) -> FloatArray:
    try:
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise DataError(f"aggregate values must be numbers: {exc}") from exc
    if not np.all(np.isfinite(arr)):
        raise DataError("aggregate values must be finite (no NaN or infinity)")
    if integer and not np.all(arr == np.round(arr)):
        raise DataError("an integer mechanism needs integer aggregate values")
    return arr


@runtime_checkable
class Mechanism(Protocol):
    """What :func:`make_release` needs from a mechanism."""

    @property
    def name(self) -> str: ...

    @property
    def cost(self) -> Cost: ...

    @property
    def scale(self) -> float: ...

    @property
    def integer(self) -> bool: ...

    def randomise(
        self, values: Sequence[float] | FloatArray, *, noise: NoiseSource | None = None
    ) -> FloatArray: ...

    def half_width(self, confidence: float = 0.95) -> float: ...


@dataclass(frozen=True, kw_only=True)
class _EpsilonMechanism:
    """Shared by the Laplace family: scale b = Δ/ε, cost ε (pure)."""

    epsilon: float
    sensitivity: float

    def __post_init__(self) -> None:
        _positive("epsilon", self.epsilon)
        _sensitivity(self.sensitivity)
        _scale(self.scale)

    @property
    def scale(self) -> float:
        return _laplace_scale(self.sensitivity, self.epsilon)

    @property
    def cost(self) -> Cost:
        return Cost.pure(self.epsilon) if self.sensitivity > 0 else Cost.pure(0)


@dataclass(frozen=True, kw_only=True)
class _RhoMechanism:
    """Shared by the Gaussian family: σ = Δ₂/√(2ρ), cost ρ (zCDP)."""

    rho: float
    sensitivity: float

    def __post_init__(self) -> None:
        _positive("rho", self.rho)
        _sensitivity(self.sensitivity)
        _scale(self.scale)

    @property
    def scale(self) -> float:
        return _gaussian_scale(self.sensitivity, self.rho)

    @property
    def cost(self) -> Cost:
        return Cost.zcdp(self.rho) if self.sensitivity > 0 else Cost.zcdp(0)


@dataclass(frozen=True, kw_only=True)
class DiscreteLaplace(_EpsilonMechanism):
    """Discrete Laplace noise with scale ``b = sensitivity/ε`` on integer aggregates.

    Args:
        epsilon: ε > 0.
        sensitivity: L1 sensitivity Δ₁ ≥ 0 of the (vector) aggregate.

    Privacy: ε-DP w.r.t. neighbours whose aggregates differ by at most Δ₁ in L1
    norm. Sensitivity 0 adds no noise and costs nothing.
    """

    name: ClassVar[str] = "discrete_laplace"
    integer: ClassVar[bool] = True

    def randomise(
        self, values: Sequence[float] | FloatArray, *, noise: NoiseSource | None = None
    ) -> FloatArray:
        arr = _as_array(values, integer=True)
        source = noise or SecureNoise()
        return arr + source.discrete_laplace(scale=self.scale, size=arr.size)

    def half_width(self, confidence: float = 0.95) -> float:
        return discrete_laplace_half_width(self.scale, confidence)


@dataclass(frozen=True, kw_only=True)
class DiscreteGaussian(_RhoMechanism):
    """Discrete Gaussian noise with ``σ = sensitivity/√(2ρ)`` on integer aggregates.

    Args:
        rho: ρ > 0.
        sensitivity: L2 sensitivity Δ₂ ≥ 0.

    Privacy: ρ-zCDP (Canonne, Kamath & Steinke 2020, Thm. 4; vectors by the
    multivariate form in the same paper, with L2 sensitivity).
    """

    name: ClassVar[str] = "discrete_gaussian"
    integer: ClassVar[bool] = True

    def randomise(
        self, values: Sequence[float] | FloatArray, *, noise: NoiseSource | None = None
    ) -> FloatArray:
        arr = _as_array(values, integer=True)
        source = noise or SecureNoise()
        return arr + source.discrete_gaussian(sigma=self.scale, size=arr.size)

    def half_width(self, confidence: float = 0.95) -> float:
        return discrete_gaussian_half_width(self.scale, confidence)


@dataclass(frozen=True, kw_only=True)
class Laplace(_EpsilonMechanism):
    """Continuous Laplace noise with ``b = sensitivity/ε`` on float aggregates.

    Privacy: ε-DP w.r.t. neighbours at L1 distance ≤ ``sensitivity``.
    """

    name: ClassVar[str] = "laplace"
    integer: ClassVar[bool] = False

    def randomise(
        self, values: Sequence[float] | FloatArray, *, noise: NoiseSource | None = None
    ) -> FloatArray:
        arr = _as_array(values, integer=False)
        return (noise or SecureNoise()).add_laplace(arr, scale=self.scale)

    def half_width(self, confidence: float = 0.95) -> float:
        return laplace_half_width(self.scale, confidence)


@dataclass(frozen=True, kw_only=True)
class Gaussian(_RhoMechanism):
    """Continuous Gaussian noise with ``σ = sensitivity/√(2ρ)`` on float aggregates.

    Privacy: ρ-zCDP w.r.t. neighbours at L2 distance ≤ ``sensitivity``
    (Bun & Steinke 2016, Prop. 1.6). Use :meth:`for_epsilon_delta` to calibrate
    to a target (ε, δ); the cost is still recorded as the ρ that σ implies.
    """

    name: ClassVar[str] = "gaussian"
    integer: ClassVar[bool] = False

    @classmethod
    def for_epsilon_delta(
        cls, *, epsilon: float, delta: float, sensitivity: float, method: str = "analytic"
    ) -> Gaussian:
        """The Gaussian mechanism calibrated to (ε, δ)-DP.

        Args:
            method: ``"analytic"`` (Balle & Wang 2018) or ``"classic"`` (ε < 1 only).
        """
        if method == "analytic":
            sigma = analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
        elif method == "classic":
            sigma = classic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
        else:
            raise InvalidPrivacyParameter(f"unknown calibration {method!r}; use analytic|classic")
        s = _sensitivity(sensitivity)
        if s == 0:
            raise InvalidPrivacyParameter("sensitivity 0 needs no Gaussian calibration")
        return cls(rho=s * s / (2.0 * sigma * sigma), sensitivity=s)

    def randomise(
        self, values: Sequence[float] | FloatArray, *, noise: NoiseSource | None = None
    ) -> FloatArray:
        arr = _as_array(values, integer=False)
        return (noise or SecureNoise()).add_gaussian(arr, sigma=self.scale)

    def half_width(self, confidence: float = 0.95) -> float:
        return gaussian_half_width(self.scale, confidence)


def _check_eps_delta(
    epsilon: float, delta: float, sensitivity: float
) -> tuple[float, float, float]:
    eps = _positive("epsilon", epsilon)
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0.0 < delta < 1.0:
        raise InvalidPrivacyParameter(f"delta must lie in (0, 1), got {delta!r}")
    return eps, float(delta), _positive("sensitivity", sensitivity)


def classic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float) -> float:
    """``σ = Δ·√(2·ln(1.25/δ))/ε`` (Dwork & Roth 2014, Thm. A.1).

    Raises:
        InvalidPrivacyParameter: ε ≥ 1, where the theorem does not hold — use
            :func:`analytic_gaussian_sigma` instead.
    """
    eps, dlt, sens = _check_eps_delta(epsilon, delta, sensitivity)
    if eps >= 1.0:
        raise InvalidPrivacyParameter(
            f"the classic Gaussian calibration holds only for ε < 1 (got {eps}); "
            "use method='analytic'"
        )
    return sens * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps


def _std_normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _analytic_delta(sigma: float, eps: float, sens: float) -> float:
    # Balle & Wang (2018), Thm. 8: the Gaussian mechanism with σ is (ε, δ)-DP iff
    # Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ) ≤ δ.
    a = sens / (2.0 * sigma)
    b = eps * sigma / sens
    second = _std_normal_cdf(-a - b)
    second = math.exp(eps + math.log(second)) if second > 0 else 0.0
    return _std_normal_cdf(a - b) - second


def analytic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest σ for which the Gaussian mechanism is (ε, δ)-DP (Balle & Wang 2018).

    Bisection on the exact privacy profile of Thm. 8 to a relative tolerance of
    1e-12; the returned σ is on the safe side (δ(σ) ≤ δ).
    """
    eps, dlt, sens = _check_eps_delta(epsilon, delta, sensitivity)
    lo, hi = 1e-12 * sens, sens
    while _analytic_delta(hi, eps, sens) > dlt:
        hi *= 2.0
        if hi > MAX_SCALE:
            raise InvalidPrivacyParameter("δ too small for any representable σ")
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if _analytic_delta(mid, eps, sens) > dlt:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi


def make_release(
    mechanism: Mechanism,
    exact: Sequence[float] | FloatArray,
    *,
    name: str,
    fingerprint: str,
    kind: str = "count",
    unit: str = "",
    labels: Sequence[str] = (),
    window: str | None = None,
    confidence: float = 0.95,
    noise: NoiseSource | None = None,
    small_threshold: float | None = 5.0,
    clamp: tuple[float, float] | None = None,
) -> Release:
    """Noise exact aggregate(s) and wrap them into a :class:`Release`.

    The exact values are consumed here and never returned. Intervals are
    ``noisy ± half_width`` (exact quantiles of the public noise); ``clamp`` then
    clips values and intervals into a public range (post-processing).

    Privacy: the mechanism's guarantee, per user, provided its sensitivity was
    derived from the query's per-user contribution bounds.
    """
    source = noise or SecureNoise()
    noisy = mechanism.randomise(exact, noise=source)
    hw = mechanism.half_width(confidence)
    values = [float(v) for v in noisy]
    intervals = [(v - hw, v + hw) for v in values]
    if clamp is not None:
        lo, hi = clamp
        values = [min(max(v, lo), hi) for v in values]
        intervals = [(min(max(a, lo), hi), min(max(b, lo), hi)) for a, b in intervals]
    if len(values) > 1 and not labels:
        raise InvalidPrivacyParameter(f"vector release {name!r} needs labels")
    return Release(
        name=name,
        values=tuple(values),
        intervals=tuple(intervals),
        mechanism=mechanism.name,
        noise_scale=mechanism.scale,
        cost=mechanism.cost,
        fingerprint=fingerprint,
        kind=kind,
        unit=unit,
        labels=tuple(labels),
        confidence=confidence,
        window=window,
        seeded=bool(source.seeded),
        small_threshold=small_threshold,
    )


def _simulate_noise(release: Release, source: SeededNoise, size: int) -> FloatArray:
    b = release.noise_scale
    if release.mechanism == "discrete_laplace":
        return source.discrete_laplace(scale=b, size=size).astype(np.float64)
    if release.mechanism == "discrete_gaussian":
        return source.discrete_gaussian(sigma=b, size=size).astype(np.float64)
    if release.mechanism == "laplace":
        return source.add_laplace(np.zeros(size), scale=b)
    if release.mechanism == "gaussian":
        return source.add_gaussian(np.zeros(size), sigma=b)
    raise InvalidPrivacyParameter(
        f"cannot simulate the noise of a {release.mechanism!r} release for an interval"
    )


def ratio_release(
    name: str,
    numerator: Release,
    denominator: Release,
    *,
    fingerprint: str,
    kind: str = "mean",
    unit: str = "",
    clamp: tuple[float, float] | None = None,
    confidence: float = 0.95,
    offset: float = 0.0,
    samples: int = 20_000,
) -> Release:
    """``offset + numerator/denominator`` as a derived release (post-processing).

    The interval is a parametric Monte Carlo: 20 000 draws of
    ``offset + (N + Z₁)/max(D + Z₂, 1)`` where N, D are the noisy values and Z₁, Z₂
    follow the two releases' public noise distributions, seeded from
    ``fingerprint`` so reruns give the same interval; the central ``confidence``
    quantiles, widened if needed to contain the point estimate. It is an
    approximate interval (the noisy values stand in for the true ones).

    Privacy: no data access; cost = numerator.cost + denominator.cost.
    """
    if numerator.is_vector or denominator.is_vector:
        raise InvalidPrivacyParameter("ratio_release takes two scalar releases")
    source = SeededNoise(seed_from_fingerprint(fingerprint))
    n, d = numerator.value, denominator.value
    value = offset + n / max(d, 1.0)
    zn = _simulate_noise(numerator, source, samples)
    zd = _simulate_noise(denominator, source, samples)
    sims = offset + (n + zn) / np.maximum(d + zd, 1.0)
    alpha = 1.0 - confidence
    lo, hi = (float(x) for x in np.quantile(sims, [alpha / 2.0, 1.0 - alpha / 2.0]))
    lo, hi = min(lo, value), max(hi, value)
    if clamp is not None:
        a, b = clamp
        value = min(max(value, a), b)
        lo, hi = min(max(lo, a), b), min(max(hi, a), b)
    return Release(
        name=name,
        values=(value,),
        intervals=((lo, hi),),
        mechanism="derived",
        noise_scale=float(np.std(sims)),
        cost=numerator.cost + denominator.cost,
        fingerprint=fingerprint,
        kind=kind,
        unit=unit,
        confidence=confidence,
        privacy_unit=numerator.privacy_unit,
        window=numerator.window,
        seeded=numerator.seeded or denominator.seeded,
        small_threshold=None,
        delta=max(numerator.delta, denominator.delta),
        notes=(f"ratio of {numerator.name} and {denominator.name}; Monte Carlo interval",),
    )


def permute_and_flip(
    scores: Sequence[float],
    *,
    epsilon: float,
    sensitivity: float,
    k: int = 1,
    monotonic: bool = True,
    noise: NoiseSource | None = None,
) -> list[int]:
    """Select the indices of the k best scores without releasing any score.

    Report-noisy-max with exponential noise, which is permute-and-flip (McKenna &
    Sheldon 2020; Ding et al. 2021), peeled k times with ε/k each.

    Args:
        scores: exact scores (e.g. per-topic user counts).
        epsilon: total ε for all k selections.
        sensitivity: the most one user changes any single score (L∞).
        monotonic: one user moves all scores in the same direction (true for
            counts), which halves the noise needed.

    Privacy: ε-DP per user: each round has exponential noise of scale
    ``k·Δ/ε`` (monotonic) or ``2k·Δ/ε``, so each round is (ε/k)-DP and k rounds
    compose to ε. Sensitivity 0 selects exactly and costs nothing.
    """
    eps = _positive("epsilon", epsilon)
    sens = _sensitivity(sensitivity)
    arr = _as_array(scores, integer=False)
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= arr.size:
        raise InvalidPrivacyParameter(f"k must be an int in [1, {arr.size}], got {k!r}")
    if sens == 0:
        return [int(i) for i in np.argsort(-arr, kind="stable")[:k]]
    # The sampler assumes a monotonic metric; doubling the scale gives the
    # non-monotonic guarantee with the same sampler.
    scale = _scale(_laplace_scale((1.0 if monotonic else 2.0) * k * sens, eps))
    return (noise or SecureNoise()).exponential_top_k(arr, scale=scale, k=k)
