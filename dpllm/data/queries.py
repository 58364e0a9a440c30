"""The query catalogue: declarative, hashable statistics with their bounds and proofs.

A query is a frozen dataclass. Its fields are its whole specification (bounds,
privacy parameters, public categories), so :meth:`fingerprint` is a stable hash
of them and keys the release cache. A query

1. names the columns it needs (checked against the source *before* charging),
2. states its cost (exactly what its mechanisms charge),
3. ``measure``\\ s the data through an :class:`~dpllm.data.engines.Engine` with
   contribution bounding inside the SQL, returning an :class:`Exact` that never
   leaves the core, and
4. ``publish``\\ es that :class:`Exact` through its mechanism as one
   :class:`~dpllm.release.Release`.

**Privacy unit: the user.** Neighbouring datasets differ in *all* records of one
user in the window. Each docstring below proves the sensitivity from the bounds.

Privacy parameters are keyword-only: give ``epsilon`` (pure ε-DP, discrete
Laplace) or ``rho`` (ρ-zCDP, discrete Gaussian), not both.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from dpllm.data import sql
from dpllm.data.engines import Engine
from dpllm.data.sql import ColumnMap, OutOfRange, Statement
from dpllm.errors import DataError, InvalidPrivacyParameter
from dpllm.privacy.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Mechanism,
    make_release,
    ratio_release,
)
from dpllm.privacy.noise import NoiseSource
from dpllm.release import Cost, Release

__all__ = [
    "ActiveUsers",
    "CourseBreakdown",
    "Exact",
    "FeedbackCount",
    "MeanRating",
    "Query",
    "RatingHistogram",
    "Scope",
    "keyed_choice",
]

RATING_LABELS = ("1", "2", "3", "4", "5")


@dataclass(frozen=True, slots=True, repr=False)
class Exact:
    """Exact aggregates of one query: internal to the core, never returned to callers.

    Its ``repr`` hides the numbers, so a log line or traceback cannot leak them.
    """

    values: tuple[float, ...]
    labels: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"<Exact: {len(self.values)} hidden value(s)>"


@dataclass(frozen=True, slots=True)
class Scope:
    """Where and when a query reads: engine, column mapping, window and secret salt.

    ``salt`` keys the pseudo-random choices (which topics or courses of a user
    are kept when a bound bites); it is secret, so no analyst can steer them.
    """

    engine: Engine
    columns: ColumnMap
    window: str
    start: dt.datetime
    end: dt.datetime
    salt: bytes = field(repr=False)

    @property
    def source(self) -> Statement:
        return self.engine.relation(self.columns.table)


def keyed_choice(salt: bytes, user: str, items: set[str], limit: int) -> list[str]:
    """At most ``limit`` of a user's ``items``, chosen by a keyed pseudo-random order.

    The order is HMAC-SHA256(salt, user ‖ item): deterministic for one salt (so
    every engine gives the same answer) and unpredictable without it.
    """
    if len(items) <= limit:
        return sorted(items)

    def key(item: str) -> bytes:
        return hmac.new(salt, f"{user}\x00{item}".encode(), hashlib.sha256).digest()

    return sorted(items, key=key)[:limit]


@runtime_checkable
class Query(Protocol):
    """What the statistics runner needs from a query."""

    @property
    def name(self) -> str: ...

    @property
    def cost(self) -> Cost: ...

    def fingerprint(self) -> str: ...

    def columns_needed(self) -> tuple[str, ...]: ...

    def measure(self, scope: Scope) -> Exact: ...

    def publish(
        self,
        exact: Exact,
        *,
        fingerprint: str,
        window: str,
        confidence: float,
        noise: NoiseSource | None,
    ) -> Release: ...


def _check_bound(name: str, value: int, *, upper: int = 1_000_000) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= upper:
        raise InvalidPrivacyParameter(f"{name} must be an int in [1, {upper}], got {value!r}")


def _check_budget(epsilon: float | None, rho: float | None) -> None:
    if (epsilon is None) == (rho is None):
        raise InvalidPrivacyParameter("give exactly one of epsilon= (pure ε-DP) or rho= (zCDP)")
    value = epsilon if epsilon is not None else rho
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidPrivacyParameter(f"privacy parameter must be a finite number, got {value!r}")
    if value <= 0:
        raise InvalidPrivacyParameter(f"privacy parameter must be > 0, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class _Priced:
    """Shared fields and helpers: the privacy parameter and the fingerprint."""

    epsilon: float | None = None
    rho: float | None = None

    def __post_init__(self) -> None:
        _check_budget(self.epsilon, self.rho)

    def _mechanism(self, *, l1: int, l2: float, share: float = 1.0) -> Mechanism:
        """Discrete Laplace (L1 sensitivity) or discrete Gaussian (L2 sensitivity)."""
        if self.epsilon is not None:
            return DiscreteLaplace(epsilon=self.epsilon * share, sensitivity=l1)
        assert self.rho is not None
        return DiscreteGaussian(rho=self.rho * share, sensitivity=l2)

    def fingerprint(self) -> str:
        """SHA-256 of the query's type and fields (canonical JSON)."""
        spec: dict[str, Any] = {"type": type(self).__name__, **asdict(self)}
        text = json.dumps(spec, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def _check_policy(policy: OutOfRange) -> None:
    if policy not in ("clamp", "drop", "reject"):
        raise DataError(f"out_of_range must be 'clamp', 'drop' or 'reject', got {policy!r}")


def out_of_range_error() -> DataError:
    """The refusal of a ``reject`` query whose window holds a rating outside 1–5."""
    return DataError(
        "ratings outside 1–5 in this window and the query declares out_of_range='reject'; "
        "fix the data or use out_of_range='clamp'"
    )


def _reject_if_needed(scope: Scope, policy: OutOfRange) -> None:
    if policy != "reject":
        return
    c = scope.columns
    stmt = sql.out_of_range_count(c, scope.engine.dialect, scope.source, scope.start, scope.end)
    (bad,) = scope.engine.fetch(stmt)[0]
    if int(bad):
        # After the read: the charge stands (a data-dependent failure is a signal).
        raise out_of_range_error()


@dataclass(frozen=True, kw_only=True)
class FeedbackCount(_Priced):
    """Number of feedback records in the window, at most ``max_records`` per user.

    Exact aggregate: ``Σ_u min(n_u, M)`` over users with a record in the window.

    Sensitivity: adding or removing one user adds or removes one term
    ``min(n_u, M) ∈ [0, M]``, so the L1 (and L2) sensitivity is ``M``.

    Privacy: ε-DP (discrete Laplace, scale M/ε) or ρ-zCDP (discrete Gaussian,
    σ = M/√(2ρ)) per user per window.
    """

    max_records: int = 5
    name: str = "feedback_count"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_bound("max_records", self.max_records)

    @property
    def _mech(self) -> Mechanism:
        return self._mechanism(l1=self.max_records, l2=float(self.max_records))

    @property
    def cost(self) -> Cost:
        return self._mech.cost

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
        _users, records = scope.engine.fetch(stmt)[0]
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
        return make_release(
            self._mech,
            exact.values,
            name=self.name,
            fingerprint=fingerprint,
            kind="count",
            unit="records",
            window=window,
            confidence=confidence,
            noise=noise,
            clamp=(0.0, math.inf),
        )


@dataclass(frozen=True, kw_only=True)
class ActiveUsers(_Priced):
    """Number of users with at least one record in the window.

    Sensitivity: one user adds or removes exactly one from the count: L1 = L2 = 1.

    Privacy: ε-DP (discrete Laplace, scale 1/ε) or ρ-zCDP per user per window.
    """

    name: str = "active_users"

    @property
    def _mech(self) -> Mechanism:
        return self._mechanism(l1=1, l2=1.0)

    @property
    def cost(self) -> Cost:
        return self._mech.cost

    def columns_needed(self) -> tuple[str, ...]:
        return ("user", "timestamp")

    def measure(self, scope: Scope) -> Exact:
        stmt = sql.records_and_users(
            scope.columns, scope.engine.dialect, scope.source, scope.start, scope.end, max_records=1
        )
        users, _records = scope.engine.fetch(stmt)[0]
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
        return make_release(
            self._mech,
            exact.values,
            name=self.name,
            fingerprint=fingerprint,
            kind="count",
            unit="users",
            window=window,
            confidence=confidence,
            noise=noise,
            clamp=(0.0, math.inf),
        )


@dataclass(frozen=True, kw_only=True)
class MeanRating(_Priced):
    """Mean rating as the mean of per-user means: ``3 + S / C``.

    Estimator: each user *u* with at least one valid rating in the window has
    the mean ``m_u ∈ [1, 5]`` of their ratings (each clamped to 1–5, or dropped,
    per ``out_of_range``; NULL and NaN are ignored), carried as the integer
    ``q_u = round(1000·m_u) − 3000 ∈ [−2000, 2000]`` milli-stars. ``C`` is the
    number of such users and ``S = Σ_u q_u / 1000`` the sum of centred means.
    Every user weighs the same, however many records they wrote.

    Sensitivity: adding or removing one user changes ``C`` by exactly 1 and ``S``
    by ``|q_u|/1000 ≤ 2`` (centring at 3 halves the range [1, 5] to ±2).

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
        _check_policy(self.out_of_range)

    def _mechs(self) -> tuple[Mechanism, Mechanism]:
        share = self.count_share
        count = self._mechanism(l1=1, l2=1.0, share=share)
        total: Mechanism
        if self.epsilon is not None:
            total = Laplace(epsilon=self.epsilon * (1.0 - share), sensitivity=2.0)
        else:
            assert self.rho is not None
            total = Gaussian(rho=self.rho * (1.0 - share), sensitivity=2.0)
        return count, total

    @property
    def cost(self) -> Cost:
        count, total = self._mechs()
        return count.cost + total.cost

    def columns_needed(self) -> tuple[str, ...]:
        return ("user", "timestamp", "rating")

    def measure(self, scope: Scope) -> Exact:
        _reject_if_needed(scope, self.out_of_range)
        stmt = sql.mean_parts(
            scope.columns,
            scope.engine.dialect,
            scope.source,
            scope.start,
            scope.end,
            self.out_of_range,
        )
        users, milli = scope.engine.fetch(stmt)[0]
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
        count_mech, sum_mech = self._mechs()
        users, centred = exact.values
        count = make_release(
            count_mech,
            [users],
            name=f"{self.name}.users",
            fingerprint=fingerprint,
            unit="users",
            window=window,
            confidence=confidence,
            noise=noise,
        )
        total = make_release(
            sum_mech,
            [centred],
            name=f"{self.name}.centred_sum",
            fingerprint=fingerprint,
            kind="sum",
            unit="stars",
            window=window,
            confidence=confidence,
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
    ``n_u`` valid ratings, ``c_uk`` of them equal to *k* (clamped/dropped per
    ``out_of_range``; NULL and NaN ignored). A user with at most M ratings counts
    each of them once; a heavier user is scaled down to weight M in total,
    keeping their own shares (rounded down).

    Sensitivity: one user's vector ``w_u`` has non-negative integer entries with
    ``Σ_k w_uk ≤ Σ_k c_uk·M/max(n_u, M) ≤ M``, so adding or removing the user
    changes the histogram by at most M in L1 and ``‖w_u‖₂ ≤ ‖w_u‖₁ ≤ M`` in L2.

    Privacy: one vector release, ε-DP (discrete Laplace scale M/ε on each bucket)
    or ρ-zCDP, per user per window.
    """

    max_records: int = 3
    out_of_range: OutOfRange = "clamp"
    name: str = "rating_histogram"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_bound("max_records", self.max_records)
        _check_policy(self.out_of_range)

    @property
    def _mech(self) -> Mechanism:
        return self._mechanism(l1=self.max_records, l2=float(self.max_records))

    @property
    def cost(self) -> Cost:
        return self._mech.cost

    def columns_needed(self) -> tuple[str, ...]:
        return ("user", "timestamp", "rating")

    def measure(self, scope: Scope) -> Exact:
        _reject_if_needed(scope, self.out_of_range)
        stmt = sql.histogram(
            scope.columns,
            scope.engine.dialect,
            scope.source,
            scope.start,
            scope.end,
            self.out_of_range,
            max_records=self.max_records,
        )
        row = scope.engine.fetch(stmt)[0]
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
        return make_release(
            self._mech,
            exact.values,
            name=self.name,
            fingerprint=fingerprint,
            kind="count",
            unit="ratings",
            labels=RATING_LABELS,
            window=window,
            confidence=confidence,
            noise=noise,
            clamp=(0.0, math.inf),
        )


@dataclass(frozen=True, kw_only=True)
class CourseBreakdown(_Priced):
    """Feedback records per course, over a **public** list of courses.

    Bounds: each user counts in at most ``max_courses`` (G) courses — when they
    wrote about more, G are kept by a keyed pseudo-random choice
    (:func:`keyed_choice`, secret salt) — and at most ``max_records`` (M) records
    per kept course. Records of courses outside the list are ignored, so the
    set of released categories does not depend on the data.

    Sensitivity: one user's contribution vector has at most G non-zero entries,
    each in [0, M]: L1 ≤ G·M and L2 ≤ √G·M.

    Privacy: one vector release, ε-DP (discrete Laplace scale G·M/ε) or
    ρ-zCDP (σ = √G·M/√(2ρ)) per user per window.
    """

    courses: tuple[str, ...] = ()
    max_courses: int = 2
    max_records: int = 3
    name: str = "course_feedback"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "courses", tuple(self.courses))
        if not self.courses or not all(isinstance(c, str) and c for c in self.courses):
            raise DataError("CourseBreakdown needs a public, non-empty list of course names")
        if len(set(self.courses)) != len(self.courses):
            raise DataError("CourseBreakdown: course names must be distinct")
        _check_bound("max_courses", self.max_courses, upper=len(self.courses))
        _check_bound("max_records", self.max_records)

    @property
    def _mech(self) -> Mechanism:
        g, m = self.max_courses, self.max_records
        return self._mechanism(l1=g * m, l2=math.sqrt(g) * m)

    @property
    def cost(self) -> Cost:
        return self._mech.cost

    def columns_needed(self) -> tuple[str, ...]:
        return ("user", "timestamp", "course")

    def measure(self, scope: Scope) -> Exact:
        stmt = sql.course_counts(
            scope.columns, scope.engine.dialect, scope.source, scope.start, scope.end, self.courses
        )
        per_user: dict[str, dict[str, int]] = defaultdict(dict)
        for user, course, n in scope.engine.fetch(stmt):
            per_user[str(user)][str(course)] = min(int(n), self.max_records)
        totals = dict.fromkeys(self.courses, 0)
        for user, counts in per_user.items():
            for course in keyed_choice(scope.salt, user, set(counts), self.max_courses):
                totals[course] += counts[course]
        return Exact(tuple(totals[c] for c in self.courses), self.courses)

    def publish(
        self,
        exact: Exact,
        *,
        fingerprint: str,
        window: str,
        confidence: float,
        noise: NoiseSource | None,
    ) -> Release:
        return make_release(
            self._mech,
            exact.values,
            name=self.name,
            fingerprint=fingerprint,
            kind="count",
            unit="records",
            labels=self.courses,
            window=window,
            confidence=confidence,
            noise=noise,
            clamp=(0.0, math.inf),
        )
