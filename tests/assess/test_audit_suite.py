"""The audit passes on every shipped query and mechanism, and fails on a planted bug.

Fewer samples than the CLI (2×10⁴ selection, 2×10⁵ estimation per side), the
same α = 1e-6, so a pass is as trustworthy and a violation as unlikely by chance.
"""

from __future__ import annotations

import pytest

from dpllm.assess.audit_suite import (
    PlantedBugCount,
    QueryAudit,
    audit_catalogue,
    audit_mechanisms,
    membership_game,
    neighbour_aggregates,
    neighbouring_datasets,
)
from dpllm.data.stats import default_catalogue
from dpllm.privacy.mechanisms import DiscreteLaplace

FAST = {"n_select": 20_000, "n_estimate": 200_000, "game_trials": 50_000}


@pytest.fixture(scope="module")
def audited() -> dict[str, QueryAudit]:
    return {q.name: q for q in audit_catalogue(planted_bug=True, **FAST)}


def test_every_shipped_query_passes(audited: dict[str, QueryAudit]) -> None:
    shipped = set(default_catalogue(courses=("a", "b")))
    assert shipped <= set(audited)
    for name in shipped:
        q = audited[name]
        assert q.passed, (name, q.claimed_epsilon, q.empirical_epsilon, q.worst_scenario)
        # the audit has power: the worst pair shows a good share of the claim
        assert q.empirical_epsilon > 0.5 * q.claimed_epsilon, name
        assert len(q.scenarios) == 7


def test_planted_bug_is_caught(audited: dict[str, QueryAudit]) -> None:
    bug = audited[PlantedBugCount(epsilon=0.1).name]
    assert not bug.passed
    assert bug.empirical_epsilon > 5 * bug.claimed_epsilon
    assert bug.game is not None and not bug.game.passed


def test_every_mechanism_passes() -> None:
    results = audit_mechanisms(n_select=20_000, n_estimate=200_000)
    assert len(results) == 7
    for m in results:
        assert m.passed, m.result.describe()


def test_neighbours_differ_in_one_user() -> None:
    for scenario, (d0, d1) in neighbouring_datasets().items():
        users0 = {r.user for r in d0}
        users1 = {r.user for r in d1}
        assert len(users0 ^ users1) == 1, scenario
        (changed,) = users0 ^ users1
        assert [r for r in d0 if r.user != changed] == [r for r in d1 if r.user != changed]


def test_duckdb_and_sqlite_agree() -> None:
    queries = default_catalogue(courses=("algebra", "biology", "chemistry", "databases"))
    queries = {k: queries[k] for k in ("feedback_count", "mean_rating", "course_feedback")}
    a = neighbour_aggregates(queries, engine="sqlite")
    b = neighbour_aggregates(queries, engine="duckdb")
    for name in queries:
        for scenario in a[name]:
            assert a[name][scenario][0].values == b[name][scenario][0].values
            assert a[name][scenario][1].values == b[name][scenario][1].values


def test_membership_game_respects_ceiling() -> None:
    mech = DiscreteLaplace(epsilon=1.0, sensitivity=1)
    game = membership_game([(mech, 10.0, 11.0)], claimed_epsilon=1.0, trials=100_000)
    assert game.passed
    assert game.accuracy > 0.6  # the attacker is strong: ceiling is 0.731
    weak = membership_game([(mech, 10.0, 13.0)], claimed_epsilon=1.0, trials=100_000)
    assert not weak.passed  # Δ = 3 with noise for Δ = 1: true ε = 3


def test_the_audit_reads_the_public_mechanisms() -> None:
    """``query_mechanisms`` is ``Query.mechanisms()``: no private hook is read, so a
    query that only defines the protocol method is audited with its own calibration."""
    from dataclasses import dataclass

    from dpllm.assess.audit_suite import query_mechanisms
    from dpllm.data.queries import FeedbackCount, MeanRating
    from dpllm.data.topics import TopTopics
    from dpllm.errors import InvalidPrivacyParameter
    from dpllm.privacy.mechanisms import Mechanism

    mean = MeanRating(epsilon=0.3)
    assert query_mechanisms(mean) == mean.mechanisms() and len(mean.mechanisms()) == 2
    assert query_mechanisms(PlantedBugCount(epsilon=0.1)) == (
        DiscreteLaplace(epsilon=0.1, sensitivity=1),
    )

    @dataclass(frozen=True, kw_only=True)
    class Doubled(FeedbackCount):
        def mechanisms(self) -> tuple[Mechanism, ...]:
            return (DiscreteLaplace(epsilon=1.0, sensitivity=2 * self.max_records),)

    assert query_mechanisms(Doubled(epsilon=1.0)) == Doubled(epsilon=1.0).mechanisms()
    with pytest.raises(InvalidPrivacyParameter, match="no auditable mechanism"):
        query_mechanisms(TopTopics(epsilon=1.0))
