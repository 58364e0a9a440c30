"""The record and rating queries: counts, active users, mean rating, rating histogram.

Each is a declarative, hashable query (see :mod:`dpllm.data.base` for the
protocol) whose contribution bounds are applied **inside the engine's SQL**
(:mod:`dpllm.data.sql`): per-user ``GROUP BY`` reductions on the canonical user
key, records capped at ``M`` per user, ratings clamped or rejected. Each
docstring proves the sensitivity from those bounds.

The per-course breakdown lives in :mod:`dpllm.data.groups` and the topic queries
in :mod:`dpllm.data.topics`; both bound in Python over per-user rows. This
module re-exports the shared names (:class:`Query`, :class:`Scope`,
:class:`Exact`, :func:`keyed_choice`, :class:`CourseBreakdown`).

**Privacy unit: the user.** Privacy parameters are keyword-only: give
``epsilon`` (pure ε-DP, discrete Laplace) or ``rho`` (ρ-zCDP, discrete
Gaussian), not both.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpllm.data import sql
from dpllm.data.base import (
    Exact,
    Query,
    Scope,
    _check_bound,
    _Priced,
    keyed_choice,
    release_delta,
)
from dpllm.data.groups import CourseBreakdown
from dpllm.data.sql import OutOfRange
from dpllm.errors import InvalidPrivacyParameter
from dpllm.privacy.mechanisms import (
    Gaussian,
    Laplace,
    Mechanism,
    make_release,
    ratio_release,
)
from dpllm.privacy.noise import NoiseSource
from dpllm.release import Release

__all__ = [
    "DEFAULT_MAX_RECORDS",
    "ActiveUsers",
    "CourseBreakdown",
    "Exact",
    "FeedbackCount",
    "MeanRating",
    "Query",
    "RatingHistogram",
    "Scope",
    "keyed_choice",
    "release_delta",
]

RATING_LABELS = ("1", "2", "3", "4", "5")

DEFAULT_MAX_RECORDS = 5
"""M, records counted per user per window: the config's default
(``[bounds] max_records_per_user``)."""


@dataclass(frozen=True, kw_only=True)
class FeedbackCount(_Priced):
    """Number of feedback records in the window, at most ``max_records`` per user.

    Exact aggregate: ``Σ_u min(n_u, M)`` over users with a record in the window.

    Sensitivity: adding or removing one user adds or removes one term
    ``min(n_u, M) ∈ [0, M]``, so the L1 (and L2) sensitivity is ``M``.

    Bounds: in the SQL (``Σ_u min(n_u, M)`` over the user key).

    Privacy: ε-DP (discrete Laplace, scale M/ε) or ρ-zCDP (discrete Gaussian,
    σ = M/√(2ρ)) per user per window.
    """

    max_records: int = DEFAULT_MAX_RECORDS
    name: str = "feedback_count"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_bound("max_records", self.max_records)

    def mechanisms(self) -> tuple[Mechanism, ...]:
        return (self._mechanism(l1=self.max_records, l2=float(self.max_records)),)

    def columns_needed(self) -> tuple[str, ...]:
        return ("user", "timestamp")

    def measure(self, scope: Scope) -> Exact:
        stmt = sql.records_and_users(
            scope.columns,
            scope.engine.dialect,
            scope.source,
            scope.start,
            scope.end,
            max_records=self.max_records,
        )
        _users, records = scope.engine.fetch(stmt, query=self.name)[0]
        return Exact((int(records),))

    def publish(
        self,
        exact: Exact,
        *,
        fingerprint: str,
        window: str,
        confidence: float,
        noise: NoiseSource | None,
    ) -> Release:
        return self._count_release(
            exact,
            unit="records",
            fingerprint=fingerprint,
            window=window,
            confidence=confidence,
            noise=noise,
        )


@dataclass(frozen=True, kw_only=True)
class ActiveUsers(_Priced):
    """Number of users with at least one record in the window.

    Sensitivity: one user (one user key) adds or removes exactly one from the
    count: L1 = L2 = 1.

    Bounds: in the SQL (one row per user key).

    Privacy: ε-DP (discrete Laplace, scale 1/ε) or ρ-zCDP per user per window.
    """

    name: str = "active_users"

    def mechanisms(self) -> tuple[Mechanism, ...]:
        return (self._mechanism(l1=1, l2=1.0),)

    def columns_needed(self) -> tuple[str, ...]:
        return ("user", "timestamp")

    def measure(self, scope: Scope) -> Exact:
        stmt = sql.records_and_users(
            scope.columns, scope.engine.dialect, scope.source, scope.start, scope.end, max_records=1
        )
        users, _records = scope.engine.fetch(stmt, query=self.name)[0]
        return Exact((int(users),))

    def publish(
        self,
        exact: Exact,
        *,
        fingerprint: str,
        window: str,
        confidence: float,
        noise: NoiseSource | None,
    ) -> Release:
        return self._count_release(
            exact,
            unit="users",
            fingerprint=fingerprint,
            window=window,
            confidence=confidence,
            noise=noise,
        )


@dataclass(frozen=True, kw_only=True)
class MeanRating(_Priced):
    """Mean rating as the mean of per-user means: ``3 + S / C``.

    Estimator: each user *u* with at least one valid rating in the window has
    the mean ``m_u ∈ [1, 5]`` of their ratings (a rating outside 1–5 is clamped,
    or rejected as a record, per ``out_of_range``; NULL, NaN and — on DuckDB —
    unparsable text are ignored), carried as the integer
    ``q_u = round(1000·m_u) − 3000 ∈ [−2000, 2000]`` milli-stars. ``C`` is the
    number of such users and ``S = Σ_u q_u / 1000`` the sum of centred means.
    Every user weighs the same, however many records they wrote.

    Sensitivity: adding or removing one user changes ``C`` by exactly 1 and ``S``
    by ``|q_u|/1000 ≤ 2`` (centring at 3 halves the range [1, 5] to ±2).

    Bounds: in the SQL (the per-user mean over the user key). No value makes
    the query fail: out-of-range ratings are clamped or excluded, never refused.

    Privacy: ``count_share`` of the budget goes to ``C`` (discrete Laplace scale
    1/ε_C, or discrete Gaussian), the rest to ``S`` (Laplace scale 2/ε_S, or
    Gaussian): the two compose to ε-DP (ε_C + ε_S = ε) or ρ-zCDP per user per
    window. The mean, its clamp to [1, 5] and its interval are post-processing.
    """

    count_share: float = 0.5
    out_of_range: OutOfRange = "clamp"
    name: str = "mean_rating"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.count_share, float) and 0.0 < self.count_share < 1.0):
            raise InvalidPrivacyParameter(
                f"count_share must be a float in (0, 1), got {self.count_share!r}"
            )
        sql.check_policy(self.out_of_range)

    def mechanisms(self) -> tuple[Mechanism, ...]:
        """The count's mechanism, then the centred sum's."""
        share = self.count_share
        count = self._mechanism(l1=1, l2=1.0, share=share)
        total: Mechanism
        if self.epsilon is not None:
            total = Laplace(epsilon=self.epsilon * (1.0 - share), sensitivity=2.0)
        else:
            assert self.rho is not None
            total = Gaussian(rho=self.rho * (1.0 - share), sensitivity=2.0)
        return count, total

    def columns_needed(self) -> tuple[str, ...]:
        return ("user", "timestamp", "rating")

    def measure(self, scope: Scope) -> Exact:
        stmt = sql.mean_parts(
            scope.columns,
            scope.engine.dialect,
            scope.source,
            scope.start,
            scope.end,
            self.out_of_range,
        )
        users, milli = scope.engine.fetch(stmt, query=self.name)[0]
        return Exact((int(users), int(milli) / sql.MILLI))

    def publish(
        self,
        exact: Exact,
        *,
        fingerprint: str,
        window: str,
        confidence: float,
        noise: NoiseSource | None,
    ) -> Release:
        count_mech, sum_mech = self.mechanisms()
        users, centred = exact.values
        # Two intermediate releases, never returned: the ratio reads their noisy values,
        # mechanisms, costs and names, and the window of the sum.
        count = make_release(
            count_mech, [users], name=f"{self.name}.users", fingerprint=fingerprint, noise=noise
        )
        total = make_release(
            sum_mech,
            [centred],
            name=f"{self.name}.centred_sum",
            fingerprint=fingerprint,
            window=window,
            noise=noise,
        )
        return ratio_release(
            self.name,
            total,
            count,
            fingerprint=fingerprint,
            kind="mean",
            unit="stars",
            clamp=(1.0, 5.0),
            confidence=confidence,
            offset=3.0,
        )


@dataclass(frozen=True, kw_only=True)
class RatingHistogram(_Priced):
    """Ratings 1–5 as one vector release, each user weighing at most ``M`` records.

    Exact aggregate: ``h_k = Σ_u ⌊c_uk·M / max(n_u, M)⌋`` where user *u* has
    ``n_u`` valid ratings, ``c_uk`` of them equal to *k* (clamped or rejected
    per ``out_of_range``; NULL and NaN ignored). A user with at most M ratings counts
    each of them once; a heavier user is scaled down to weight M in total,
    keeping their own shares (rounded down).

    Sensitivity: one user's vector ``w_u`` has non-negative integer entries with
    ``Σ_k w_uk ≤ Σ_k c_uk·M/max(n_u, M) ≤ M``, so adding or removing the user
    changes the histogram by at most M in L1 and ``‖w_u‖₂ ≤ ‖w_u‖₁ ≤ M`` in L2.

    Bounds: in the SQL (per-user weights over the user key).

    Privacy: one vector release, ε-DP (discrete Laplace scale M/ε on each bucket)
    or ρ-zCDP, per user per window.
    """

    max_records: int = DEFAULT_MAX_RECORDS
    out_of_range: OutOfRange = "clamp"
    name: str = "rating_histogram"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_bound("max_records", self.max_records)
        sql.check_policy(self.out_of_range)

    def mechanisms(self) -> tuple[Mechanism, ...]:
        return (self._mechanism(l1=self.max_records, l2=float(self.max_records)),)

    def columns_needed(self) -> tuple[str, ...]:
        return ("user", "timestamp", "rating")

    def measure(self, scope: Scope) -> Exact:
        stmt = sql.histogram(
            scope.columns,
            scope.engine.dialect,
            scope.source,
            scope.start,
            scope.end,
            self.out_of_range,
            max_records=self.max_records,
        )
        row = scope.engine.fetch(stmt, query=self.name)[0]
        return Exact(tuple(int(v) for v in row), RATING_LABELS)

    def publish(
        self,
        exact: Exact,
        *,
        fingerprint: str,
        window: str,
        confidence: float,
        noise: NoiseSource | None,
    ) -> Release:
        return self._count_release(
            exact,
            unit="ratings",
            labels=RATING_LABELS,
            fingerprint=fingerprint,
            window=window,
            confidence=confidence,
            noise=noise,
        )
