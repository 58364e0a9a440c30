"""The per-course breakdown: records per course over a public list of courses.

Its bounds are applied **in the engine's SQL**
(:func:`dpllm.data.bounded.course_totals`): records per (user key, course) capped
at ``M``, at most ``G`` courses per user by a keyed pseudo-random choice
(:func:`~dpllm.data.base.keyed_choice`, computed in SQL), summed per course. Only
the per-course totals leave the engine.

.. versionchanged:: unreleased bounded in the engine (was: in Python over per-user rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpllm.data import bounded
from dpllm.data.base import Exact, Scope, _check_bound, _Priced
from dpllm.errors import DataError
from dpllm.privacy.mechanisms import Mechanism
from dpllm.privacy.noise import NoiseSource
from dpllm.release import Release

__all__ = ["DEFAULT_MAX_COURSES", "CourseBreakdown"]

DEFAULT_MAX_COURSES = 3
"""G, courses counted per user per window: the config's default
(``[bounds] max_courses_per_user``)."""


@dataclass(frozen=True, kw_only=True)
class CourseBreakdown(_Priced):
    """Feedback records per course, over a **public** list of courses.

    Bounds, applied in the engine's SQL to the per-(user key, course) record counts:
    each user counts in at most ``max_courses`` courses — when they wrote about
    more, that many are kept by a keyed pseudo-random choice
    (:func:`~dpllm.data.base.keyed_choice`, secret salt, keyed by the user key)
    — and at most ``max_records`` (M) records per kept course. Records of
    courses outside the list are ignored, so the set of released categories
    does not depend on the data. ``G = min(max_courses, len(courses))``: a user
    cannot count in more courses than the list has.

    Sensitivity: one user's contribution vector has at most G non-zero entries,
    each in [0, M]: L1 ≤ G·M and L2 ≤ √G·M.

    Privacy: one vector release, ε-DP (discrete Laplace scale G·M/ε) or
    ρ-zCDP (σ = √G·M/√(2ρ)) per user per window.

    .. versionchanged:: unreleased defaults G = 3, M = 5 (the config's defaults);
       ``max_courses`` may exceed the number of courses.
    """

    courses: tuple[str, ...] = ()
    max_courses: int = DEFAULT_MAX_COURSES
    max_records: int = 5
    name: str = "course_feedback"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "courses", tuple(self.courses))
        if not self.courses or not all(isinstance(c, str) and c for c in self.courses):
            raise DataError("CourseBreakdown needs a public, non-empty list of course names")
        if len(set(self.courses)) != len(self.courses):
            raise DataError("CourseBreakdown: course names must be distinct")
        _check_bound("max_courses", self.max_courses)
        _check_bound("max_records", self.max_records)

    @property
    def groups_per_user(self) -> int:
        """G: the courses one user can count in."""
        return min(self.max_courses, len(self.courses))

    def mechanisms(self) -> tuple[Mechanism, ...]:
        g, m = self.groups_per_user, self.max_records
        return (self._mechanism(l1=g * m, l2=math.sqrt(g) * m),)

    def columns_needed(self) -> tuple[str, ...]:
        return ("user", "timestamp", "course")

    def measure(self, scope: Scope) -> Exact:
        (exact,) = self.measure_spans(scope, [(scope.start, scope.end)])
        return exact

    def measure_spans(self, scope: Scope, spans: list[bounded.Span]) -> list[Exact]:
        """The exact aggregate of each of ``spans`` (disjoint, sorted), from one statement."""
        stmt = bounded.course_totals(
            scope.columns,
            scope.engine.dialect,
            scope.source,
            spans,
            self.courses,
            max_courses=self.groups_per_user,
            max_records=self.max_records,
            salt=scope.salt,
        )
        totals = [dict.fromkeys(self.courses, 0) for _ in spans]
        for w, course, n in scope.engine.fetch(stmt, query=self.name):
            totals[int(w)][course] = int(n)
        return [Exact(tuple(t[c] for c in self.courses), self.courses) for t in totals]

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
            labels=self.courses,
            fingerprint=fingerprint,
            window=window,
            confidence=confidence,
            noise=noise,
        )
