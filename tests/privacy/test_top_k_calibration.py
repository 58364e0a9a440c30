"""Permute-and-flip top-k is ε-DP for the ε it is given, k included (empirical audit).

``permute_and_flip`` peels k rounds of report-noisy-max, each with exponential noise of
scale ``k·Δ/ε`` (monotonic scores) or ``2k·Δ/ε``. A scale that drops the ``k`` makes
each round ε-DP and the selection kε-DP while ε is charged; the audit below finds that
(lower bound ≈ 1.8 for k = 3, ε = 1) where the correct scale stays under ε (≈ 0.76).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpllm.data.topics import TopTopics
from dpllm.privacy.audit import audit_samples
from dpllm.privacy.mechanisms import permute_and_flip
from dpllm.privacy.noise import SeededNoise


class ScaleSpy(SeededNoise):
    """A seeded source that records the scale each top-k selection asks for."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.scales: list[float] = []

    def exponential_top_k(self, scores: np.ndarray, *, scale: float, k: int) -> list[int]:  # type: ignore[override]
        self.scales.append(scale)
        return super().exponential_top_k(scores, scale=scale, k=k)


def _scale_used(scores: list[float], *, epsilon: float, k: int, monotonic: bool = True) -> float:
    spy = ScaleSpy()
    permute_and_flip(scores, epsilon=epsilon, sensitivity=1.0, k=k, monotonic=monotonic, noise=spy)
    (scale,) = spy.scales
    return scale


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("monotonic", [True, False])
def test_each_round_gets_epsilon_over_k(k: int, monotonic: bool) -> None:
    scale = _scale_used([float(i) for i in range(8)], epsilon=0.7, k=k, monotonic=monotonic)
    assert scale == pytest.approx((1 if monotonic else 2) * k * 1.0 / 0.7, rel=1e-12)
    assert scale >= (1 if monotonic else 2) * k / 0.7


def _peel(scores: np.ndarray, scale: float, k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n independent permute-and-flip selections (the NoiseSource's peeling), as bitmasks."""
    remaining = np.ones((n, scores.size), dtype=bool)
    mask = np.zeros(n, dtype=np.float64)
    for _ in range(k):
        noisy = scores[None, :] + rng.exponential(scale, size=(n, scores.size))
        noisy[~remaining] = -np.inf
        best = np.argmax(noisy, axis=1)
        remaining[np.arange(n), best] = False
        mask += 2.0**best
    return mask


def test_top_k_selection_passes_the_empirical_audit() -> None:
    epsilon, k = 1.0, 3
    # One user (monotonic, Δ = 1) raises topics 0-2 by one: D₀ → D₁.
    d0 = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    d1 = d0 + np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    scale = _scale_used(list(d0), epsilon=epsilon, k=k)
    rng = np.random.default_rng(20261201)
    result = audit_samples(
        lambda n: _peel(d0, scale, k, n, rng),
        lambda n: _peel(d1, scale, k, n, rng),
        claimed_epsilon=epsilon,
        n_select=100_000,
        n_estimate=400_000,
        alpha=1e-6,
    )
    assert result.passed, result


def test_the_audit_catches_a_scale_without_k() -> None:
    # The same audit on the buggy scale Δ/ε fails: the test above can fail.
    epsilon, k = 1.0, 3
    d0 = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    d1 = d0 + np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    rng = np.random.default_rng(7)
    result = audit_samples(
        lambda n: _peel(d0, 1.0 / epsilon, k, n, rng),
        lambda n: _peel(d1, 1.0 / epsilon, k, n, rng),
        claimed_epsilon=epsilon,
        n_select=100_000,
        n_estimate=400_000,
        alpha=1e-6,
    )
    assert not result.passed


def test_top_topics_selects_with_k_over_epsilon() -> None:
    from dpllm.data.base import Exact

    query = TopTopics(epsilon=0.5, k=3, max_topics=3)
    spy = ScaleSpy()
    labels = tuple(t.name for t in query.vocabulary.topics)
    release = query.publish(
        Exact(tuple(float(i) for i in range(len(labels))), labels),
        fingerprint="f" * 64,
        window="2026-W47",
        confidence=0.95,
        noise=spy,
    )
    assert spy.scales == [pytest.approx(3 / 0.5, rel=1e-12)]
    assert release.noise_scale == pytest.approx(3 / 0.5)
