"""Empirical privacy audit: a statistical lower bound on a mechanism's real ε.

For a pair of neighbouring inputs D₀, D₁ and any output event E, ε-DP requires
``P[M(D₀) ∈ E] ≤ e^ε · P[M(D₁) ∈ E] + δ``. The audit

1. draws ``n_select`` (2×10⁵) outputs on each side and picks the threshold event
   (``x ≥ t`` or ``x ≤ t``, in either direction) with the largest conservative
   log-ratio;
2. draws ``n_estimate`` (2×10⁶) *fresh* outputs on each side and bounds the two
   probabilities of that event with one-sided Clopper–Pearson intervals at
   α = 10⁻⁶ each;
3. reports ``ε_lb = ln((p̲₀ − δ) / p̄₁)``.

With probability at least 1 − 2α, ε_lb is below the mechanism's true ε. So an
ε_lb above the claimed ε is strong evidence of a bug (a mis-stated sensitivity,
a missing clamp), while ε_lb ≤ ε is what a correct mechanism shows. Choosing the
event on separate samples keeps the final bound honest (no selection bias).

OpenDP's secure samplers are too slow for millions of draws, so the audit drives
the mechanism's own calibration code (:meth:`Mechanism.randomise`) with
:class:`~dpllm.privacy.noise.SeededNoise`, which draws the same distributions
(the goodness-of-fit tests check this at α = 1e-6; a smaller audit on the secure
source itself runs in the suite as well).

References: Ding et al., "Detecting Violations of Differential Privacy" (CCS
2018); Jagielski, Ullman & Oprea, "Auditing Differentially Private Machine
Learning" (NeurIPS 2020).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dpllm.errors import InvalidPrivacyParameter
from dpllm.privacy.mechanisms import Mechanism
from dpllm.privacy.noise import FloatArray, NoiseSource, SeededNoise

__all__ = ["AuditResult", "audit_mechanism", "audit_samples", "clopper_pearson"]

Sampler = Callable[[int], FloatArray]

_SELECT_ALPHA = 1e-3


@dataclass(frozen=True, slots=True)
class AuditResult:
    """The outcome of one audit."""

    claimed_epsilon: float
    empirical_epsilon: float
    """The lower bound ε_lb (0 when no event shows any loss)."""
    event: str
    p_high_lower: float
    p_low_upper: float
    n_select: int
    n_estimate: int
    alpha: float
    delta: float

    @property
    def passed(self) -> bool:
        """True when the empirical lower bound does not exceed the claim."""
        return self.empirical_epsilon <= self.claimed_epsilon

    def describe(self) -> str:
        verdict = "ok" if self.passed else "VIOLATION"
        return (
            f"claimed ε = {self.claimed_epsilon:.4g}, empirical lower bound ε ≥ "
            f"{self.empirical_epsilon:.4g} on event {self.event} [{verdict}]"
        )


def clopper_pearson(successes: int, trials: int, *, alpha: float) -> tuple[float, float]:
    """One-sided Clopper–Pearson bounds: (lower at level α, upper at level α)."""
    from scipy.stats import beta  # scipy.stats costs seconds to import; load on use

    if trials <= 0:
        raise InvalidPrivacyParameter("trials must be > 0")
    k, n = int(successes), int(trials)
    lower = 0.0 if k == 0 else float(beta.ppf(alpha, k, n - k + 1))
    upper = 1.0 if k == n else float(beta.ppf(1.0 - alpha, k + 1, n - k))
    return lower, upper


def _thresholds(a: FloatArray, b: FloatArray, max_candidates: int = 400) -> FloatArray:
    pooled = np.concatenate([a, b])
    uniq = np.unique(pooled)
    if uniq.size <= max_candidates:
        return uniq
    qs = np.linspace(0.0, 1.0, max_candidates)
    return np.unique(np.quantile(pooled, qs))


def _tail_counts(sorted_x: FloatArray, t: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Counts of x ≥ t and x ≤ t for each threshold t."""
    n = sorted_x.size
    ge = n - np.searchsorted(sorted_x, t, side="left")
    le = np.searchsorted(sorted_x, t, side="right")
    return ge.astype(np.float64), le.astype(np.float64)


def _select_event(s0: FloatArray, s1: FloatArray, delta: float) -> tuple[str, float, bool]:
    """Pick (direction, threshold, high_is_0) maximising a conservative log-ratio."""
    from scipy.stats import beta

    x0, x1 = np.sort(s0), np.sort(s1)
    n0, n1 = x0.size, x1.size
    ts = _thresholds(x0, x1)
    ge0, le0 = _tail_counts(x0, ts)
    ge1, le1 = _tail_counts(x1, ts)
    best: tuple[float, str, float, bool] = (-math.inf, "ge", float(ts[0]), True)
    # Score each event by its Clopper–Pearson log-ratio at a moderate level, so
    # rare events (a handful of hits against zero) do not win by chance.
    for direction, c0, c1 in (("ge", ge0, ge1), ("le", le0, le1)):
        for high_is_0, ch, cl, nh, nl in ((True, c0, c1, n0, n1), (False, c1, c0, n1, n0)):
            ph_lo = np.where(ch > 0, beta.ppf(_SELECT_ALPHA, ch, nh - ch + 1), 0.0) - delta
            pl_hi = np.where(cl < nl, beta.ppf(1 - _SELECT_ALPHA, cl + 1, nl - cl), 1.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                score = np.where(ph_lo > 0, np.log(ph_lo / pl_hi), -np.inf)
            i = int(np.argmax(score))
            if score[i] > best[0]:
                best = (float(score[i]), direction, float(ts[i]), high_is_0)
    return best[1], best[2], best[3]


def audit_samples(
    sample0: Sampler,
    sample1: Sampler,
    *,
    claimed_epsilon: float,
    delta: float = 0.0,
    n_select: int = 200_000,
    n_estimate: int = 2_000_000,
    alpha: float = 1e-6,
) -> AuditResult:
    """Audit a mechanism given samplers of its outputs on two neighbouring inputs.

    Args:
        sample0: ``n -> n`` scalar outputs of M(D₀).
        sample1: ``n -> n`` scalar outputs of M(D₁).
        claimed_epsilon: the ε the mechanism claims.
        delta: the claimed δ (0 for pure DP).
        alpha: the one-sided Clopper–Pearson level of each bound.

    Returns:
        An :class:`AuditResult`; ``result.passed`` is ``empirical ≤ claimed``.
    """
    if claimed_epsilon < 0 or not math.isfinite(claimed_epsilon):
        raise InvalidPrivacyParameter("claimed_epsilon must be finite and ≥ 0")
    direction, t, high_is_0 = _select_event(
        np.asarray(sample0(n_select), dtype=np.float64),
        np.asarray(sample1(n_select), dtype=np.float64),
        delta,
    )
    f0 = np.asarray(sample0(n_estimate), dtype=np.float64)
    f1 = np.asarray(sample1(n_estimate), dtype=np.float64)

    def count(x: FloatArray) -> int:
        return int(np.count_nonzero(x >= t) if direction == "ge" else np.count_nonzero(x <= t))

    high, low = (f0, f1) if high_is_0 else (f1, f0)
    p_hi_lo, _ = clopper_pearson(count(high), high.size, alpha=alpha)
    _, p_lo_hi = clopper_pearson(count(low), low.size, alpha=alpha)
    numerator = p_hi_lo - delta
    eps_lb = math.log(numerator / p_lo_hi) if numerator > 0 and p_lo_hi > 0 else 0.0
    side = "D0" if high_is_0 else "D1"
    op = "≥" if direction == "ge" else "≤"
    return AuditResult(
        claimed_epsilon=float(claimed_epsilon),
        empirical_epsilon=max(0.0, eps_lb),
        event=f"output {op} {t:g} (more likely under {side})",
        p_high_lower=p_hi_lo,
        p_low_upper=p_lo_hi,
        n_select=n_select,
        n_estimate=n_estimate,
        alpha=alpha,
        delta=delta,
    )


def audit_mechanism(
    mechanism: Mechanism,
    value0: float,
    value1: float,
    *,
    claimed_epsilon: float | None = None,
    delta: float = 0.0,
    seed: int = 0,
    noise: NoiseSource | None = None,
    n_select: int = 200_000,
    n_estimate: int = 2_000_000,
    alpha: float = 1e-6,
) -> AuditResult:
    """Audit ``mechanism`` on the exact aggregates of two neighbouring datasets.

    ``value0`` and ``value1`` are the exact aggregate on D₀ and D₁ (e.g. a count
    with and without one user). The mechanism's own ``randomise`` produces every
    sample, with a fast seeded source of the same noise distribution.

    Args:
        claimed_epsilon: defaults to the mechanism's pure ε. A zCDP mechanism
            must state the (ε, δ) it claims, e.g. from ``cost.to_epsilon_delta``,
            and pass that ``delta``.
        delta: the δ of the claim; the bound becomes ln((p̲ − δ)/p̄).
        noise: the noise source; defaults to the fast seeded source. Pass
            :class:`~dpllm.privacy.noise.SecureNoise` (with fewer samples) to
            audit OpenDP's samplers themselves.
    """
    if claimed_epsilon is None:
        cost = mechanism.cost
        claimed_epsilon = cost.epsilon  # raises for zCDP, as documented
    source = noise if noise is not None else SeededNoise(seed)

    def sampler(value: float) -> Sampler:
        def draw(n: int) -> FloatArray:
            return mechanism.randomise(np.full(n, value, dtype=np.float64), noise=source)

        return draw

    return audit_samples(
        sampler(value0),
        sampler(value1),
        claimed_epsilon=claimed_epsilon,
        delta=delta,
        n_select=n_select,
        n_estimate=n_estimate,
        alpha=alpha,
    )
