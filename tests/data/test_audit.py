"""The empirical privacy audit, end to end through an engine on neighbouring datasets.

D₀ is a random dataset; D₁ adds one user with maximal contribution. The exact
aggregates come from the engine's bounded SQL; the audit draws the released
outputs on both and bounds the real ε from below (α = 10⁻⁶ per side).
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from dpllm.data.engines import SQLiteEngine
from dpllm.data.queries import Exact, FeedbackCount, MeanRating, Query, Scope
from dpllm.privacy.audit import audit_mechanism, audit_samples
from dpllm.privacy.noise import FloatArray, SeededNoise
from dpllm.windows import week_bounds
from tests.data._helpers import COLUMNS, WEEK, max_user, random_records, write_sqlite

N_SELECT, N_ESTIMATE = 100_000, 1_000_000


def _exact(path: Path, query: Query) -> Exact:
    start, end = week_bounds(WEEK)
    with SQLiteEngine(path) as engine:
        return query.measure(Scope(engine, COLUMNS, WEEK, start, end, b"salt"))


def _neighbours(tmp_path: Path, query: Query, extreme: float) -> tuple[Exact, Exact]:
    rng = random.Random(11)
    recs = random_records(rng, users=20, heavy=2)
    heavy = [r._replace(rating=extreme) for r in max_user(rng, "newcomer", n=50)]
    d0 = write_sqlite(tmp_path / "d0.db", recs)
    d1 = write_sqlite(tmp_path / "d1.db", recs + heavy)
    return _exact(d0, query), _exact(d1, query)


def test_count_query_audit(tmp_path: Path) -> None:
    query = FeedbackCount(epsilon=1.0, max_records=5)
    e0, e1 = _neighbours(tmp_path, query, 5.0)
    assert e1.values[0] - e0.values[0] == 5  # the bound bites: 50 records count as 5
    result = audit_mechanism(
        query.mechanisms()[0], e0.values[0], e1.values[0], n_select=N_SELECT, n_estimate=N_ESTIMATE
    )
    assert result.passed, result.describe()
    assert result.empirical_epsilon > 0.5, result.describe()  # the audit has power


def test_mean_query_audit(tmp_path: Path) -> None:
    query = MeanRating(epsilon=1.0)
    e0, e1 = _neighbours(tmp_path, query, 1.0)  # the newcomer pulls the mean down by 2
    count_mech, sum_mech = query.mechanisms()
    source = SeededNoise(5)

    def sampler(exact: Exact):  # type: ignore[no-untyped-def]
        users, centred = exact.values

        def draw(n: int) -> FloatArray:
            c = count_mech.randomise(np.full(n, users), noise=source)
            s = sum_mech.randomise(np.full(n, centred), noise=source)
            return np.clip(3.0 + s / np.maximum(c, 1.0), 1.0, 5.0)

        return draw

    result = audit_samples(
        sampler(e0),
        sampler(e1),
        claimed_epsilon=1.0,
        n_select=N_SELECT,
        n_estimate=N_ESTIMATE,
    )
    assert result.passed, result.describe()
    # Each part on its own, at its share of ε.
    for mech, i in ((count_mech, 0), (sum_mech, 1)):
        part = audit_mechanism(
            mech, e0.values[i], e1.values[i], n_select=N_SELECT, n_estimate=N_ESTIMATE
        )
        assert part.passed, part.describe()
