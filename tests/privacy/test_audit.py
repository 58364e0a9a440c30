"""The empirical ε audit: correct mechanisms pass, a mis-calibrated one is caught.

Each audit uses 2×10⁵ selection and 2×10⁶ estimation samples per side with
one-sided Clopper–Pearson bounds at α = 1e-6.
"""

from __future__ import annotations

import pytest

from dpllm.privacy.audit import audit_mechanism, clopper_pearson
from dpllm.privacy.mechanisms import DiscreteLaplace, Laplace


def test_clopper_pearson_brackets_the_proportion() -> None:
    lo, hi = clopper_pearson(500, 1000, alpha=1e-6)
    assert lo < 0.5 < hi
    assert clopper_pearson(0, 10, alpha=0.05)[0] == 0.0
    assert clopper_pearson(10, 10, alpha=0.05)[1] == 1.0


@pytest.mark.parametrize("epsilon", [0.5, 1.0])
def test_count_mechanism_passes(epsilon: float) -> None:
    # A count: one user adds at most 1 (records bounded per user by the query).
    result = audit_mechanism(DiscreteLaplace(epsilon=epsilon, sensitivity=1), 200, 201, seed=1)
    assert result.passed, result.describe()
    # and the audit is tight: the lower bound is close to the claim
    assert result.empirical_epsilon > 0.9 * epsilon


def test_bounded_sum_mechanism_passes() -> None:
    # A bounded sum of ratings: ≤ M = 5 records per user, each clamped to [1, 5]:
    # adding a user moves the sum by at most 25.
    result = audit_mechanism(DiscreteLaplace(epsilon=1.0, sensitivity=25), 3000, 3025, seed=2)
    assert result.passed, result.describe()
    float_sum = audit_mechanism(Laplace(epsilon=1.0, sensitivity=25.0), 3000.0, 3025.0, seed=3)
    assert float_sum.passed, float_sum.describe()


def test_miscalibrated_mechanism_is_flagged() -> None:
    # Noise for sensitivity 1 on a query whose sensitivity is 2: true ε is 2.
    result = audit_mechanism(DiscreteLaplace(epsilon=1.0, sensitivity=1), 200, 202, seed=4)
    assert not result.passed
    assert result.empirical_epsilon > 1.5


def test_audit_on_the_secure_sampler_itself() -> None:
    """A smaller audit drives OpenDP's own samplers (not the seeded stand-in)."""
    from dpllm.privacy.noise import SecureNoise

    result = audit_mechanism(
        DiscreteLaplace(epsilon=1.0, sensitivity=1),
        50,
        51,
        noise=SecureNoise(),
        n_select=20_000,
        n_estimate=100_000,
    )
    assert result.passed, result.describe()
    assert result.empirical_epsilon > 0.8


def test_gaussian_audit_with_delta() -> None:
    from dpllm.privacy.mechanisms import Gaussian

    g = Gaussian.for_epsilon_delta(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    result = audit_mechanism(g, 0.0, 1.0, claimed_epsilon=1.0, delta=1e-5, seed=9)
    assert result.passed, result.describe()
