"""Every query's mechanism, sensitivity and charged cost, on both the ε and the ρ path.

The expected sensitivities are written out here from the proofs in the queries'
docstrings (not read back from the code): a query that halves its sensitivity, swaps
a discrete sampler for a float one on a count, or charges less than its mechanisms
spend fails one of these rows.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpllm.data.groups import CourseBreakdown
from dpllm.data.queries import ActiveUsers, FeedbackCount, MeanRating, RatingHistogram
from dpllm.data.topics import NewKeywords, TopicCounts, TopTopics, Vocabulary
from dpllm.privacy.mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace
from dpllm.release import Cost

M, G, L = 4, 2, 3
COURSES = ("algebra", "biology", "chemistry")
EPS, RHO = 0.8, 0.3


def _vocab(n: int) -> Vocabulary:
    from dpllm.data.topics import DEFAULT_VOCABULARY

    assert len(DEFAULT_VOCABULARY.topics) >= n
    return DEFAULT_VOCABULARY


# (query on the ε path, query on the ρ path, [(L1, L2) per mechanism], integer aggregate?)
TABLE = [
    (
        FeedbackCount(epsilon=EPS, max_records=M),
        FeedbackCount(rho=RHO, max_records=M),
        [(M, M)],
        True,
    ),
    (ActiveUsers(epsilon=EPS), ActiveUsers(rho=RHO), [(1, 1)], True),
    (
        RatingHistogram(epsilon=EPS, max_records=M),
        RatingHistogram(rho=RHO, max_records=M),
        [(M, M)],
        True,
    ),
    (
        CourseBreakdown(epsilon=EPS, courses=COURSES, max_courses=G, max_records=M),
        CourseBreakdown(rho=RHO, courses=COURSES, max_courses=G, max_records=M),
        [(G * M, math.sqrt(G) * M)],
        True,
    ),
    (
        TopicCounts(epsilon=EPS, max_topics=L, vocabulary=_vocab(L)),
        TopicCounts(rho=RHO, max_topics=L, vocabulary=_vocab(L)),
        [(L, math.sqrt(L))],
        True,
    ),
]


@pytest.mark.parametrize(("eps_query", "rho_query", "sens", "integer"), TABLE)
def test_count_queries_use_discrete_mechanisms_with_the_proved_sensitivity(
    eps_query: object, rho_query: object, sens: list[tuple[float, float]], integer: bool
) -> None:
    eps_mechs = eps_query.mechanisms()  # type: ignore[attr-defined]
    rho_mechs = rho_query.mechanisms()  # type: ignore[attr-defined]
    assert len(eps_mechs) == len(rho_mechs) == len(sens)
    for mech, (l1, _l2) in zip(eps_mechs, sens, strict=True):
        # A count is an integer aggregate: only the discrete sampler has no float attack.
        assert type(mech) is DiscreteLaplace
        assert mech.sensitivity == pytest.approx(l1, rel=0, abs=0)
        assert mech.scale >= l1 / EPS and mech.scale == pytest.approx(l1 / EPS, rel=1e-12)
    for mech, (_l1, l2) in zip(rho_mechs, sens, strict=True):
        assert type(mech) is DiscreteGaussian
        assert mech.sensitivity == pytest.approx(l2, rel=1e-15)
        sigma = l2 / math.sqrt(2 * RHO)
        assert mech.scale >= sigma * (1 - 1e-15) and mech.scale == pytest.approx(sigma, rel=1e-12)
    # What is charged is the whole parameter, never less.
    assert eps_query.cost == Cost.pure(EPS)  # type: ignore[attr-defined]
    assert rho_query.cost == Cost.zcdp(RHO)  # type: ignore[attr-defined]


@pytest.mark.parametrize("share", [0.5, 0.3])
def test_mean_rating_on_both_paths(share: float) -> None:
    """C (a count, Δ = 1) and S (the sum of centred means, Δ = 2) on both paths."""
    for query, count_type, sum_type, total in [
        (MeanRating(epsilon=EPS, count_share=share), DiscreteLaplace, Laplace, Cost.pure(EPS)),
        (MeanRating(rho=RHO, count_share=share), DiscreteGaussian, Gaussian, Cost.zcdp(RHO)),
    ]:
        count, s = query.mechanisms()
        assert type(count) is count_type and type(s) is sum_type
        assert count.sensitivity == 1
        assert s.sensitivity == 2
        budget = EPS if query.epsilon is not None else RHO
        assert count.scale == pytest.approx(
            1 / (budget * share) if query.epsilon else 1 / math.sqrt(2 * budget * share), rel=1e-12
        )
        assert s.scale == pytest.approx(
            2 / (budget * (1 - share))
            if query.epsilon
            else 2 / math.sqrt(2 * budget * (1 - share)),
            rel=1e-12,
        )
        # The two parts compose to exactly what the query charges.
        assert count.cost + s.cost == total == query.cost
        assert Fraction(count.cost.micro + s.cost.micro) == Fraction(total.micro)


def test_top_topics_charges_its_whole_epsilon_and_refuses_rho() -> None:
    query = TopTopics(epsilon=EPS, k=2, max_topics=L)
    assert query.cost == Cost.pure(EPS)
    with pytest.raises(ValueError, match="pure"):
        TopTopics(rho=RHO, k=2, max_topics=L)


def test_new_keywords_counts_are_discrete_with_sensitivity_max_keywords() -> None:
    query = NewKeywords(epsilon=EPS, max_keywords=3)
    (mech,) = query.mechanisms()
    assert type(mech) is DiscreteLaplace and mech.sensitivity == 3
    assert query.cost == Cost.pure(EPS)
