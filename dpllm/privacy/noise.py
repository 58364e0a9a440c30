"""Noise sources: OpenDP's vetted samplers by default, a seeded numpy generator for tests.

The mechanisms never draw randomness themselves; they ask a :class:`NoiseSource`.

* :class:`SecureNoise` (the default) calls OpenDP's samplers, which draw from a
  cryptographically secure source and sample the discrete distributions exactly
  (no floating-point attack applies to integer aggregates). Float mechanisms
  hand the real values to OpenDP, which adds the noise with its own
  rounding-aware arithmetic.
* :class:`SeededNoise` draws the *same distributions* with numpy's seeded PCG64
  (discrete Laplace as the difference of two geometric variables, discrete
  Gaussian by Canonne–Kamath–Steinke rejection from discrete Laplace). It exists
  for reproducible tests, simulations and the empirical audit (OpenDP's secure
  samplers cost ~7–19 µs per draw, too slow for millions of draws). Releases made
  with it carry ``seeded=True`` and must never be published. Goodness-of-fit tests
  (α = 1e-6) check that both sources draw from the intended distribution.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from dpllm.errors import InvalidPrivacyParameter

__all__ = ["NoiseSource", "SecureNoise", "SeededNoise", "IntArray", "FloatArray"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# OpenDP refuses scales that would overflow its samplers; refuse earlier with a
# clear message. 2**52 keeps every integer draw exactly representable.
MAX_SCALE = float(2**52)


@runtime_checkable
class NoiseSource(Protocol):
    """Where a mechanism's randomness comes from."""

    @property
    def seeded(self) -> bool:
        """True for reproducible (test) sources: their releases are not for publication."""
        ...

    def discrete_laplace(self, *, scale: float, size: int) -> IntArray:
        """Draws with P(k) ∝ exp(−|k|/scale)."""
        ...

    def discrete_gaussian(self, *, sigma: float, size: int) -> IntArray:
        """Draws with P(k) ∝ exp(−k²/(2σ²))."""
        ...

    def add_laplace(self, values: FloatArray, *, scale: float) -> FloatArray:
        """``values`` plus continuous Laplace(0, scale) noise."""
        ...

    def add_gaussian(self, values: FloatArray, *, sigma: float) -> FloatArray:
        """``values`` plus continuous N(0, σ²) noise."""
        ...

    def exponential_top_k(self, scores: FloatArray, *, scale: float, k: int) -> list[int]:
        """Indices of the k largest ``scores`` after exponential noise (permute-and-flip)."""
        ...


def _check_scale(scale: float, what: str = "scale") -> None:
    if not (isinstance(scale, (int, float)) and math.isfinite(scale)) or scale < 0:
        raise InvalidPrivacyParameter(f"noise {what} must be finite and ≥ 0, got {scale!r}")
    if scale > MAX_SCALE:
        raise InvalidPrivacyParameter(
            f"noise {what} {scale:.3g} overflows the samplers; raise ε or lower the sensitivity"
        )


class SecureNoise:
    """OpenDP's samplers (cryptographically secure; exact discrete sampling)."""

    seeded = False

    def __init__(self) -> None:
        import opendp.prelude as dp

        # OpenDP gates its non-core mechanisms behind this feature flag. It is
        # OpenDP's process state, set once per SecureNoise, never at import.
        dp.enable_features("contrib")
        self._dp: Any = dp

    @staticmethod
    @lru_cache(maxsize=256)
    def _measurement(kind: str, scale: float, size: int, k: int = 0) -> Any:
        import opendp.prelude as dp

        if kind == "dlap":
            return dp.m.make_laplace(
                dp.vector_domain(dp.atom_domain(T="i64"), size=size), dp.l1_distance(T="i64"), scale
            )
        if kind == "dgauss":
            return dp.m.make_gaussian(
                dp.vector_domain(dp.atom_domain(T="i64"), size=size), dp.l2_distance(T="i64"), scale
            )
        if kind == "lap":
            return dp.m.make_laplace(
                dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size),
                dp.l1_distance(T=float),
                scale,
            )
        if kind == "gauss":
            return dp.m.make_gaussian(
                dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size),
                dp.l2_distance(T=float),
                scale,
            )
        if kind == "topk":
            return dp.m.make_noisy_top_k(
                dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size),
                dp.linf_distance(T=float, monotonic=True),
                dp.max_divergence(),
                k=k,
                scale=scale,
            )
        raise ValueError(kind)  # pragma: no cover

    def _invoke(self, kind: str, scale: float, data: list[Any], k: int = 0) -> Any:
        try:
            return self._measurement(kind, float(scale), len(data), k)(data)
        except self._dp.OpenDPException as exc:
            raise InvalidPrivacyParameter(f"OpenDP refused the noise ({kind}): {exc}") from exc

    def discrete_laplace(self, *, scale: float, size: int) -> IntArray:
        _check_scale(scale)
        if scale == 0 or size == 0:
            return np.zeros(size, dtype=np.int64)
        return np.asarray(self._invoke("dlap", scale, [0] * size), dtype=np.int64)

    def discrete_gaussian(self, *, sigma: float, size: int) -> IntArray:
        _check_scale(sigma, "sigma")
        if sigma == 0 or size == 0:
            return np.zeros(size, dtype=np.int64)
        return np.asarray(self._invoke("dgauss", sigma, [0] * size), dtype=np.int64)

    def add_laplace(self, values: FloatArray, *, scale: float) -> FloatArray:
        _check_scale(scale)
        if scale == 0 or values.size == 0:
            return values.astype(np.float64)
        out = self._invoke("lap", scale, [float(v) for v in values])
        return np.asarray(out, dtype=np.float64)

    def add_gaussian(self, values: FloatArray, *, sigma: float) -> FloatArray:
        _check_scale(sigma, "sigma")
        if sigma == 0 or values.size == 0:
            return values.astype(np.float64)
        out = self._invoke("gauss", sigma, [float(v) for v in values])
        return np.asarray(out, dtype=np.float64)

    def exponential_top_k(self, scores: FloatArray, *, scale: float, k: int) -> list[int]:
        _check_scale(scale)
        out = self._invoke("topk", scale, [float(s) for s in scores], k)
        return [int(i) for i in out]


class SeededNoise:
    """numpy's seeded generator drawing the same distributions — **tests only**.

    Args:
        seed: the seed of a PCG64 generator.
    """

    seeded = True

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    @property
    def rng(self) -> np.random.Generator:
        return self._rng

    def discrete_laplace(self, *, scale: float, size: int) -> IntArray:
        _check_scale(scale)
        if scale == 0 or size == 0:
            return np.zeros(size, dtype=np.int64)
        # Z = G1 − G2 with G ~ Geometric(p), p = 1 − e^{−1/scale}, gives
        # P(Z = k) ∝ e^{−|k|/scale} (Inusah & Kozubowski, 2006).
        p = -math.expm1(-1.0 / scale)
        g1 = self._rng.geometric(p, size)
        g2 = self._rng.geometric(p, size)
        return (g1 - g2).astype(np.int64)

    def discrete_gaussian(self, *, sigma: float, size: int) -> IntArray:
        _check_scale(sigma, "sigma")
        if sigma == 0 or size == 0:
            return np.zeros(size, dtype=np.int64)
        # Canonne, Kamath & Steinke (2020), Alg. 3: propose Y ~ DLap(t) with
        # t = ⌊σ⌋ + 1, accept with probability exp(−(|Y| − σ²/t)² / (2σ²)).
        t = math.floor(sigma) + 1
        out = np.empty(0, dtype=np.int64)
        while out.size < size:
            need = max(16, int((size - out.size) * 1.6))
            y = self.discrete_laplace(scale=float(t), size=need)
            accept_p = np.exp(-((np.abs(y) - sigma * sigma / t) ** 2) / (2 * sigma * sigma))
            keep = self._rng.random(need) < accept_p
            out = np.concatenate([out, y[keep]])
        return out[:size]

    def add_laplace(self, values: FloatArray, *, scale: float) -> FloatArray:
        _check_scale(scale)
        if scale == 0:
            return values.astype(np.float64)
        return values + self._rng.laplace(0.0, scale, values.shape)

    def add_gaussian(self, values: FloatArray, *, sigma: float) -> FloatArray:
        _check_scale(sigma, "sigma")
        if sigma == 0:
            return values.astype(np.float64)
        return values + self._rng.normal(0.0, sigma, values.shape)

    def exponential_top_k(self, scores: FloatArray, *, scale: float, k: int) -> list[int]:
        _check_scale(scale)
        # Peeling: k rounds of report-noisy-max with fresh exponential noise,
        # which is permute-and-flip (McKenna & Sheldon 2020; Ding et al. 2021).
        remaining = list(range(len(scores)))
        chosen: list[int] = []
        for _ in range(k):
            noisy = [scores[i] + self._rng.exponential(scale) for i in remaining]
            best = remaining[int(np.argmax(noisy))]
            chosen.append(best)
            remaining.remove(best)
        return chosen
