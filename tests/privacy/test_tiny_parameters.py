"""A subnormal ε (5e-324) overflows the Laplace scale: dpllm's error, not OverflowError."""

from __future__ import annotations

import pytest

from dpllm.errors import InvalidPrivacyParameter
from dpllm.privacy.mechanisms import DiscreteLaplace, Laplace


@pytest.mark.parametrize("mechanism", [Laplace, DiscreteLaplace])
@pytest.mark.parametrize("epsilon", [5e-324, 1e-310])
def test_a_subnormal_epsilon_is_an_invalid_privacy_parameter(
    mechanism: type[Laplace] | type[DiscreteLaplace], epsilon: float
) -> None:
    with pytest.raises(InvalidPrivacyParameter, match="overflows"):
        mechanism(epsilon=epsilon, sensitivity=1.0)
