"""One per-user pass for the weekly statistic set: count, active users, mean, histogram.

Measured one by one, :class:`~dpllm.data.queries.FeedbackCount`,
:class:`~dpllm.data.queries.ActiveUsers`,
:class:`~dpllm.data.queries.MeanRating` and
:class:`~dpllm.data.queries.RatingHistogram` each group the window's records by
user. Their exact aggregates are all functions of the same per-user summary —
``n_u`` (records) and the counts ``c_uk`` of the user's ratings per star (under
each out-of-range policy) — so :func:`measure_shared` reads the window **once**
(:func:`dpllm.data.sql.user_summary`) and derives every one of them from it:

* records: ``Σ_u min(n_u, M)``; active users: the number of users;
* mean: ``C`` = users with ``n_r = Σ_k c_uk ≥ 1`` and
  ``S = Σ_u (⌊(2000·Σ_k k·c_uk + n_r) / (2·n_r)⌋ − 3000) / 1000``;
* histogram: ``h_k = Σ_u ⌊c_uk·M / max(n_r, M)⌋``.

These are the *same integers* the per-query SQL returns (tested on SQLite,
DuckDB and PostgreSQL), so each query's sensitivity proof in its docstring holds
unchanged, and each query is still noised by its own mechanism and charged
under its own query id (see :meth:`dpllm.data.stats.StatsRunner.release_all`).
Sharing the read changes no privacy cost: the queries compose exactly as they
do when each reads the data itself.

:func:`measure_windows` goes one step further: a set of queries over N windows
in one pass per kind of statement (the summary grouped by window and user, the
topic and course statements of :mod:`dpllm.data.bounded`), each window's exact
aggregates equal to what its own statement returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from dpllm.data import bounded, sql
from dpllm.data.queries import (
    RATING_LABELS,
    ActiveUsers,
    Exact,
    FeedbackCount,
    MeanRating,
    Query,
    RatingHistogram,
    Scope,
)
from dpllm.data.sql import SummaryKey, SummaryPlan
from dpllm.windows import week_bounds

__all__ = [
    "SHAREABLE",
    "SharedSummary",
    "SpanMeasurable",
    "is_shareable",
    "measure_shared",
    "measure_windows",
    "plan_for",
]

SHAREABLE: tuple[type, ...] = (FeedbackCount, ActiveUsers, MeanRating, RatingHistogram)
"""Query types whose exact aggregates come from the shared per-user summary."""


def is_shareable(query: Query) -> bool:
    """Whether ``query`` can be measured from the shared summary.

    Exact types only: a subclass may measure something else.
    """
    return type(query) in SHAREABLE


def plan_for(queries: Sequence[Query]) -> SummaryPlan:
    """The summary columns that ``queries`` (all shareable) need.

    Raises:
        TypeError: a query is not shareable.
    """
    caps: list[int] = []
    means: list[sql.OutOfRange] = []
    hists: list[tuple[sql.OutOfRange, int]] = []
    for q in queries:
        if not is_shareable(q):
            raise TypeError(f"{type(q).__name__} cannot be measured from the shared summary")
        if type(q) is FeedbackCount:
            caps.append(q.max_records)
        elif type(q) is MeanRating:
            means.append(q.out_of_range)
        elif type(q) is RatingHistogram:
            hists.append((q.out_of_range, q.max_records))
    return SummaryPlan(
        record_caps=tuple(dict.fromkeys(caps)),
        mean_policies=tuple(dict.fromkeys(means)),
        histograms=tuple(dict.fromkeys(hists)),
    )


@dataclass(frozen=True, slots=True, repr=False)
class SharedSummary:
    """The exact aggregates of one window's summary row: internal to the core.

    Its ``repr`` hides the numbers, as :class:`~dpllm.data.queries.Exact` does.
    """

    row: dict[SummaryKey, int]

    def __repr__(self) -> str:
        return f"<SharedSummary: {len(self.row)} hidden value(s)>"

    def exact(self, query: Query) -> Exact:
        """The exact aggregate of ``query``, equal to ``query.measure(scope)``.

        Raises:
            TypeError: the query is not shareable (never because of the data).
        """
        r = self.row
        if type(query) is FeedbackCount:
            return Exact((r[("records", query.max_records)],))
        if type(query) is ActiveUsers:
            return Exact((r[("users",)],))
        if type(query) is MeanRating:
            p = query.out_of_range
            return Exact((r[("mean_users", p)], r[("mean_milli", p)] / sql.MILLI))
        if type(query) is RatingHistogram:
            p, m = query.out_of_range, query.max_records
            return Exact(tuple(r[("hist", p, m, k)] for k in range(1, 6)), RATING_LABELS)
        raise TypeError(f"{type(query).__name__} cannot be measured from the shared summary")


def measure_shared(queries: Sequence[Query], scope: Scope) -> SharedSummary:
    """Read the window once and return the summary every query in ``queries`` needs.

    Args:
        queries: shareable queries (:func:`is_shareable`).
        scope: engine, column mapping and window.

    Returns:
        A :class:`SharedSummary`; ``summary.exact(q)`` equals ``q.measure(scope)``.

    Raises:
        DataError: the engine fails (the data may have been read).
        TypeError: a query is not shareable.

    Privacy: no release; the exact values stay in the core. Reading once for
    several queries costs what those queries cost, each under its own charge.
    """
    plan = plan_for(queries)
    stmt = sql.user_summary(
        scope.columns, scope.engine.dialect, scope.source, scope.start, scope.end, plan
    )
    names = ", ".join(dict.fromkeys(q.name for q in queries))
    (row,) = scope.engine.fetch(stmt, query=f"shared summary ({names})")
    return SharedSummary(dict(zip(plan.keys(), (int(v) for v in row), strict=True)))


@runtime_checkable
class SpanMeasurable(Protocol):
    """A query that measures many windows in one statement (topics, courses)."""

    def measure_spans(self, scope: Scope, spans: list[bounded.Span]) -> list[Exact]: ...


def measure_windows(
    queries: Sequence[Query], scope: Scope, windows: Sequence[str]
) -> dict[tuple[int, str], Exact]:
    """Exact aggregates of every query in every window, reading the data once per kind.

    Args:
        queries: any queries; the shareable ones share one summary statement over
            all windows, the topic and course queries one statement each, any
            other query is measured window by window.
        scope: the engine, column mapping and salt (its own window is ignored).
        windows: ISO week keys (distinct; any order).

    Returns:
        ``{(index in queries, window): Exact}``; each equals
        ``queries[i].measure(scope of that window)``.

    Raises:
        DataError: a bad window key, or the engine fails (the data may have been read).

    Privacy: no release; the exact values stay in the core. The windows are
    disjoint, so each user's records in one window are reduced apart from their
    records in another; every window's aggregate has the sensitivity its query
    proves, and releasing one per window composes in parallel across windows
    (a user is charged per window, by the ledger).
    """
    order = sorted(dict.fromkeys(windows), key=week_bounds)
    spans = [week_bounds(w) for w in order]
    out: dict[tuple[int, str], Exact] = {}
    shareable = [(i, q) for i, q in enumerate(queries) if is_shareable(q)]
    if shareable:
        plan = plan_for([q for _, q in shareable])
        exact_key = getattr(scope.engine, "user_column_is_key", None)
        stmt = bounded.summaries(
            scope.columns,
            scope.engine.dialect,
            scope.source,
            spans,
            plan,
            raw_user=bool(exact_key and exact_key(scope.columns)),
        )
        names = ", ".join(dict.fromkeys(q.name for _, q in shareable))
        rows = {
            int(r[0]): r[1:]
            for r in scope.engine.fetch(
                stmt, query=f"shared summary ({names}), {len(order)} windows"
            )
        }
        zero = (0,) * len(plan.keys())
        for w_index, window in enumerate(order):
            row = rows.get(w_index, zero)
            summary = SharedSummary(dict(zip(plan.keys(), (int(v) for v in row), strict=True)))
            for i, q in shareable:
                out[(i, window)] = summary.exact(q)
    for i, q in enumerate(queries):
        if is_shareable(q):
            continue
        if isinstance(q, SpanMeasurable):
            for window, exact in zip(order, q.measure_spans(scope, spans), strict=True):
                out[(i, window)] = exact
            continue
        for window, (start, end) in zip(order, spans, strict=True):
            one = Scope(scope.engine, scope.columns, window, start, end, scope.salt)
            out[(i, window)] = q.measure(one)
    return out
