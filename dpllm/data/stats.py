"""The statistics runner: validate → charge → read (bounded) → noise → store → return.

:class:`StatsRunner` is the one gate through which a statistic leaves the data
layer. For each ``(query, window)`` it

1. validates everything that needs no data: the query, the window (parsed once
   into a :class:`~dpllm.windows.Window` and refused when it lies in the future,
   or is still running without ``allow_incomplete``), the column mapping
   against the source's schema (a missing file or an unknown column fails here,
   and **nothing is charged**);
2. computes the query id = SHA-256 of everything that changes the answer: the
   query's fingerprint (kind, bounds, vocabulary, policies, parameters, cost),
   the dataset (its configured id, the engine's identity — resolved file path or
   DSN host/port/database/user — and the column mapping), the window (its
   canonical key; an unfinished window also the date it was read on) and the
   confidence level;
3. charges the ledger through :func:`~dpllm.ledger.base.release_once`
   (durable before anything is read; a cached release comes back at no cost);
4. reads the data through the engine (contribution bounding in the SQL, or in
   Python over per-user rows for courses and topics), adds noise through the
   query's mechanisms, stores the release, returns it.

No query fails because of a value in the records (an out-of-range rating is
clamped or rejected as a record; see :mod:`dpllm.data.sql`), and an engine
failure after the read carries no database text (:mod:`dpllm.data.engines`).

A query whose release has δ > 0 (:class:`~dpllm.data.topics.NewKeywords`) is
refused unless the caller passes ``accept_delta=True``; an accepted δ is
charged with the ε and capped by the pools' δ caps (per window and lifetime),
so a δ overspend is a :class:`~dpllm.errors.BudgetExceeded` like an ε one.

:meth:`StatsRunner.release_all` runs the shareable part of a set (count, active
users, mean, histogram) as one batch: it charges every query of the batch
first, each under its own query id, then reads the window **once** (one
per-user summary, :mod:`dpllm.data.shared`), then noises and stores each
release through its own mechanism. A refused charge refunds the batch's earlier
charges (nothing was read); a cached query is neither charged nor read again.

:meth:`StatsRunner.release_many` does the same over many windows: every
(query, window) is its own release, under its own query id and its own charge
to its own window, all charged before the read; the windows whose releases are
all cached are not read; the rest are read in one pass per kind of statement
(:func:`~dpllm.data.shared.measure_windows`). ISO weeks are disjoint, so each
window's release is ε-DP per user *in that window* (parallel composition across
windows: a user's loss in one week does not add to another's; the pool's
lifetime cap bounds the total over weeks).

The post-processing helpers (:func:`rating_shares`, :func:`top_k`) read
releases only and are free.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import numbers
import secrets
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from types import MappingProxyType

from dpllm.data.base import release_delta
from dpllm.data.engines import Engine
from dpllm.data.queries import (
    ActiveUsers,
    CourseBreakdown,
    Exact,
    FeedbackCount,
    MeanRating,
    Query,
    RatingHistogram,
    Scope,
)
from dpllm.data.shared import is_shareable, measure_shared, measure_windows
from dpllm.data.sql import ColumnMap, Dialect
from dpllm.data.topics import DEFAULT_VOCABULARY, NewKeywords, TopicCounts, Vocabulary
from dpllm.errors import ChargeInProgress, DataError, InvalidPrivacyParameter
from dpllm.ledger._batch import ChargeRequest
from dpllm.ledger.base import Charge, Ledger, Outcome, release_recorded
from dpllm.privacy.intervals import discrete_gaussian_half_width, discrete_laplace_half_width
from dpllm.privacy.noise import NoiseSource
from dpllm.release import Release
from dpllm.windows import Readiness, Window, utc_today

__all__ = [
    "COURSE_FEEDBACK_EPSILON",
    "DEFAULT_EPSILONS",
    "StatsRunner",
    "default_catalogue",
    "estimand_of",
    "rating_shares",
    "top_k",
]

DEFAULT_EPSILONS: Mapping[str, float] = MappingProxyType(
    {
        "feedback_count": 0.2,
        "active_users": 0.2,
        "mean_rating": 0.5,
        "rating_histogram": 0.4,
        "topic_counts": 0.3,
    }
)
"""ε per query of the default weekly plan (1.6 in total): the single source of the
default plan (``dpllm.config.DEFAULT_PLAN``, ``dpllm stats``, the server). The key
figure, the mean rating, gets the most. Read-only."""

COURSE_FEEDBACK_EPSILON = 0.2
"""ε of the per-course breakdown, added to the catalogue when a course list is given."""


def default_catalogue(
    *,
    courses: Sequence[str] = (),
    vocabulary: Vocabulary = DEFAULT_VOCABULARY,
    epsilons: Mapping[str, float] = DEFAULT_EPSILONS,
) -> dict[str, Query]:
    """The weekly statistic set, keyed by query name.

    Args:
        courses: the public course list; the per-course breakdown is included
            only when it is given.
        vocabulary: the public topic vocabulary.
        epsilons: ε per query name (pure ε-DP); unnamed queries get
            :data:`DEFAULT_EPSILONS` (and :data:`COURSE_FEEDBACK_EPSILON`).

    Returns:
        ``{name: query}``; keyword discovery (partition selection) is never in it.

    Privacy: the queries compose: the sum of their ε per user per window.
    """
    e = {**DEFAULT_EPSILONS, "course_feedback": COURSE_FEEDBACK_EPSILON}
    e.update(epsilons)
    queries: list[Query] = [
        FeedbackCount(epsilon=e["feedback_count"]),
        ActiveUsers(epsilon=e["active_users"]),
        MeanRating(epsilon=e["mean_rating"]),
        RatingHistogram(epsilon=e["rating_histogram"]),
        TopicCounts(epsilon=e["topic_counts"], vocabulary=vocabulary),
    ]
    if courses:
        queries.append(CourseBreakdown(epsilon=e["course_feedback"], courses=tuple(courses)))
    return {q.name: q for q in queries}


def estimand_of(query: Query) -> str:
    """What a query's release estimates, in words: the bounded statistic.

    The bounds make the sensitivity finite, and they are part of what is
    estimated: when some users exceed them, the bounded figure is below the raw
    one (bias, not noise), and the interval covers the bounded figure.
    """
    from dpllm.data.topics import NewKeywords, TopTopics

    if isinstance(query, FeedbackCount):
        return f"feedback records, at most {query.max_records} per user"
    if isinstance(query, ActiveUsers):
        return "users with at least one record"
    if isinstance(query, MeanRating):
        policy = "clamped to 1–5" if query.out_of_range == "clamp" else "out-of-range left out"
        return f"mean of per-user mean ratings ({policy}; each user counts once)"
    if isinstance(query, RatingHistogram):
        return f"ratings per star, at most {query.max_records} records per user"
    if isinstance(query, TopicCounts):
        limit = min(query.max_topics, len(query.vocabulary.topics))
        return f"users mentioning each topic, at most {limit} topics per user"
    if isinstance(query, TopTopics):
        return "the most-mentioned topics (ranks only), at most one mention per user per topic"
    if isinstance(query, CourseBreakdown):
        return (
            f"feedback records per course, at most {query.max_records} per course and "
            f"{query.max_courses} courses per user"
        )
    if isinstance(query, NewKeywords):
        return f"users using each new word, at most {query.max_keywords} words per user"
    return ""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Config:
    dataset_id: str
    pool: str
    analyst: str
    confidence: float
    today: dt.date
    allow_incomplete: bool


def source_identity(engine: Engine, columns: ColumnMap) -> dict[str, object]:
    """What identifies the data a query reads: engine, file or DSN, table, column map.

    An engine's ``identity`` (``sqlite:/abs/path``, ``duckdb:[…]``, ``postgres:{host,
    port, dbname, user}``) names its data; an engine without one is identified by
    its class only, and the configured dataset id must then tell its sources apart.
    A wrapper around an engine should forward its ``identity``.
    """
    identity = getattr(engine, "identity", None)
    if not isinstance(identity, str) or not identity:
        identity = f"{type(engine).__module__}.{type(engine).__qualname__}"
    return {
        "source": identity,
        "table": columns.table,
        "columns": {
            role: getattr(columns, role)
            for role in ("user", "rating", "text", "timestamp", "course")
        },
    }


class StatsRunner:
    """Release DP statistics of one dataset, charged to one ledger pool.

    Args:
        engine: where the data lives.
        ledger: the privacy-budget ledger (charges, release cache).
        dataset_id: a stable name of the dataset (part of every query id).
        pool: the ledger pool to charge.
        columns: the column mapping.
        salt: secret key of the pseudo-random contribution choices. Keep it
            stable and secret; ``None`` draws a fresh one (fine: releases are
            cached by query id, so a rerun never re-reads).
        analyst: who asks (audit log).
        confidence: interval level of every release.
        noise: the noise source; ``None`` is the secure default. A seeded source
            marks releases ``seeded`` (tests only).
        today: the current UTC date (``None``: read once, here, from the
            clock — this constructor is an edge; nothing below reads a clock).
            A window that has not ended by then is refused, a future one always.
        allow_incomplete: release the current, unfinished window too; its
            release is marked ``complete=False`` and its query id carries
            ``today`` (a later read of the same week is another query).

    Privacy: every release costs its query's ε (or ρ) per user in its window,
    charged before the data is read; a repeated (query, window) is free.

    .. versionchanged:: unreleased
       ``today`` and ``allow_incomplete``; windows are
       :class:`~dpllm.windows.Window` values (a string is parsed strictly);
       the query id covers the engine's identity and the column mapping.
    """

    def __init__(
        self,
        engine: Engine,
        ledger: Ledger,
        *,
        dataset_id: str,
        pool: str,
        columns: ColumnMap | None = None,
        salt: bytes | None = None,
        analyst: str = "default",
        confidence: float = 0.95,
        noise: NoiseSource | None = None,
        today: dt.date | None = None,
        allow_incomplete: bool = False,
    ) -> None:
        if today is None:
            today = utc_today()  # the Python API is an edge: one clock read, here
        if not isinstance(today, dt.date):
            raise DataError(f"today must be a datetime.date (UTC), got {today!r}")
        if isinstance(today, dt.datetime):
            today = today.astimezone(dt.UTC).date() if today.tzinfo else today.date()
        if not isinstance(dataset_id, str) or not dataset_id:
            raise DataError("dataset_id must be a non-empty string naming the dataset")
        if isinstance(confidence, bool) or not isinstance(confidence, float | numbers.Real):
            raise InvalidPrivacyParameter(
                f"confidence must be a number in (0, 1), got {type(confidence).__name__} "
                f"{confidence!r:.40}"
            )
        if not 0.0 < confidence < 1.0:
            raise InvalidPrivacyParameter(f"confidence must lie in (0, 1), got {confidence!r}")
        self.engine = engine
        self.ledger = ledger
        self.columns = columns or ColumnMap()
        self._salt = salt if salt is not None else secrets.token_bytes(32)
        self._noise = noise
        self._config = _Config(
            dataset_id=dataset_id,
            pool=pool,
            analyst=analyst,
            confidence=confidence,
            today=today,
            allow_incomplete=allow_incomplete,
        )
        self._source = source_identity(engine, self.columns)
        self._schema: frozenset[str] | None = None
        if noise is not None and noise.seeded and not getattr(ledger, "is_test_ledger", True):
            # The ledger would refuse the release after the charge; refuse before it.
            raise InvalidPrivacyParameter(
                "a seeded noise source makes reproducible releases, which this production "
                "ledger refuses; use the default noise, or a test ledger (mark_test_ledger())"
            )

    def window(self, window: Window | str) -> Window:
        """Parse ``window`` (strictly) and refuse it unless its data is complete.

        Raises:
            InvalidWindow: not a canonical ISO week in range.
            WindowNotReady: a future window, or the current one without
                ``allow_incomplete`` (nothing read or charged).
        """
        w = Window.parse(window)
        w.require_ready(self._config.today, allow_incomplete=self._config.allow_incomplete)
        return w

    def query_id(self, query: Query, window: Window | str) -> str:
        """SHA-256 of everything that changes the answer (see the module docstring).

        The same query over the same data, window and confidence has the same id
        wherever it is asked (weekly job, ``dpllm stats``, the server, Python).
        """
        w = Window.parse(window)
        spec: dict[str, object] = {
            "query": query.fingerprint(),
            "dataset": self._config.dataset_id,
            "source": self._source,
            "window": w.key,
            "confidence": self._config.confidence,
        }
        if w.readiness(self._config.today) is not Readiness.COMPLETE:
            spec["as_of"] = self._config.today.isoformat()  # an unfinished week's data grows
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()

    def check(self, query: Query) -> None:
        """Validate the query against the source's schema (reads metadata, no rows).

        Raises:
            DataError: the source is missing, or a needed column is unmapped or
                absent from it.
        """
        if not isinstance(query, Query):
            raise DataError(f"{query!r} is not a dpllm query")
        if isinstance(query, NewKeywords) and self.engine.dialect is Dialect.SPARK:
            raise DataError(
                f"query {query.name!r} segments texts with jieba in Python, which would bring "
                "per-user texts out of the Spark cluster; it is not available on the spark "
                "source (topic_counts and top_topics run in Spark)"
            )
        if self._schema is None:
            self._schema = self.engine.column_names(self.columns.table)
        for role in query.columns_needed():
            name = getattr(self.columns, role)
            if name is None:
                raise DataError(
                    f"query {query.name!r} needs a {role} column; add it to the column mapping"
                )
            if name not in self._schema:
                known = ", ".join(sorted(self._schema))
                raise DataError(
                    f"unknown column {name!r} (mapped as {role}); the source has: {known}"
                )

    def _admit_delta(self, query: Query, accept_delta: bool) -> float:
        """δ of ``query``'s release; refused (nothing charged) unless accepted."""
        delta = release_delta(query)
        if delta > 0 and not accept_delta:
            raise InvalidPrivacyParameter(
                f"query {query.name!r} is (ε, δ)-DP with δ = {delta:g} per user per window: "
                "a small chance that the release reveals more than ε. Pass accept_delta=True "
                "to release it (δ is then charged to the pool's δ caps beside ε, and written "
                "onto the release), or leave it out"
            )
        return delta

    def _description(self, query: Query, delta: float) -> str:
        text = f"{query.name} on {self._config.dataset_id}"
        if delta > 0:
            text += f"; δ = {delta:g} per user per window, charged to the δ caps"
        return text

    def _scope(self, window: Window) -> Scope:
        return Scope(self.engine, self.columns, window.key, window.start, window.end, self._salt)

    def _publish(self, query: Query, exact: Exact, query_id: str, window: Window) -> Release:
        release = query.publish(
            exact,
            fingerprint=query_id,
            window=window.key,
            confidence=self._config.confidence,
            noise=self._noise,
        )
        release = replace(release, estimand=estimand_of(query))
        if window.readiness(self._config.today) is Readiness.COMPLETE:
            return release
        return replace(
            release,
            complete=False,
            notes=(
                *release.notes,
                f"window {window} was not complete when read ({self._config.today.isoformat()}); "
                "released on explicit opt-in (allow_incomplete)",
            ),
        )

    def release(self, query: Query, window: Window | str, *, accept_delta: bool = False) -> Release:
        """Release ``query`` for ``window`` (a :class:`~dpllm.windows.Window`, or its key).

        Args:
            query: the query.
            window: the ISO week (a string must be exactly canonical, ``2026-W47``).
            accept_delta: release a query whose release has δ > 0 (δ is
                charged to the pools' δ caps and goes onto the release).

        Returns:
            The stored release for this query id if there is one (no charge),
            else a fresh release, charged to the pool for ``window``.

        Raises:
            InvalidWindow: a malformed window; WindowNotReady: a future or
                unfinished one (nothing charged).
            DataError: missing source or column (nothing charged), or
                an engine failure after the read (charged; no database text).
            InvalidPrivacyParameter: δ > 0 and not ``accept_delta`` (nothing charged).
            BudgetExceeded: the pool cannot take the cost, ε or δ (nothing charged).

        Privacy: ``query.cost`` per user in ``window`` (and its δ, if accepted),
        charged before the read.

        .. versionchanged:: unreleased no query fails because of the data;
           ``accept_delta``.
        """
        return self.release_recorded(query, window, accept_delta=accept_delta).release

    def release_recorded(
        self, query: Query, window: Window | str, *, accept_delta: bool = False
    ) -> Outcome:
        """:meth:`release`, with what the ledger recorded for this call: served from
        the cache, charged by this call, or covered by another caller's charge."""
        window = self.window(window)
        self.check(query)
        delta = self._admit_delta(query, accept_delta)
        scope = self._scope(window)
        query_id = self.query_id(query, window)
        cfg = self._config
        return release_recorded(
            self.ledger,
            query_id=query_id,
            pool=cfg.pool,
            window=window,
            cost=query.cost,
            compute=lambda: self._publish(query, query.measure(scope), query_id, window),
            analyst=cfg.analyst,
            description=self._description(query, delta),
            delta=delta,
        )

    def release_all(
        self,
        queries: Mapping[str, Query],
        window: Window | str,
        *,
        shared: bool = True,
        accept_delta: bool = False,
    ) -> dict[str, Release]:
        """Release each query for one window, each under its own charge.

        Args:
            queries: ``{name: query}``; the result has the same keys, in order.
            window: the ISO week.
            shared: measure the shareable queries (count, active users, mean,
                histogram; two or more of them) from one per-user pass; the
                others, or all when ``False``, read the data one by one.
            accept_delta: as in :meth:`release`, for every query of the set.

        Raises:
            DataError: bad window, missing source or column (nothing charged);
                an engine failure after the read (the batch stays charged).
            InvalidPrivacyParameter: a query has δ > 0 and not ``accept_delta``
                (nothing charged, for any query of the set).
            BudgetExceeded: a query of the batch does not fit (nothing charged
                for the batch: its earlier charges are refunded, nothing read).

        Privacy: the sum of the queries' costs per user in ``window``, each
        charged under its own query id before the data is read. Sharing the read
        changes no cost: each exact aggregate is the one its query proves.
        """
        window = self.window(window)
        for q in queries.values():
            self.check(q)
            self._admit_delta(q, accept_delta)
        batch = {n: q for n, q in queries.items() if shared and is_shareable(q)}
        done = self._release_batch(batch, window) if len(batch) > 1 else {}
        return {
            n: done[n] if n in done else self.release(q, window, accept_delta=accept_delta)
            for n, q in queries.items()
        }

    def _release_batch(self, queries: Mapping[str, Query], window: Window) -> dict[str, Release]:
        """Charge every query, then read once, then noise and store each (see :meth:`release_all`)."""
        ids = {name: self.query_id(q, window) for name, q in queries.items()}
        by_id = {ids[name]: q for name, q in queries.items()}  # one charge per query id
        cfg = self._config
        releases: dict[str, Release] = {}
        with ExitStack() as stack:
            # Charges are taken in query-id order, so two processes charging
            # overlapping batches never wait for each other in a cycle. A refusal
            # raises here and unwinds the stack: every earlier charge is
            # refunded, since no data was read. Shareable queries: δ = 0.
            desc = {qid: self._description(q, 0.0) for qid, q in by_id.items()}
            requests = [
                ChargeRequest(qid, cfg.pool, window.key, by_id[qid].cost, cfg.analyst, desc[qid])
                for qid in sorted(by_id)
            ]
            charges = self._charge_all(stack, requests)
            todo = [qid for qid in by_id if charges[qid].cached is None]  # in the caller's order
            for qid, charge in charges.items():
                if charge.cached is not None:
                    releases[qid] = charge.cached
            if todo:
                for qid in todo:
                    charges[qid].data_read()
                summary = measure_shared([by_id[qid] for qid in todo], self._scope(window))
                published = {
                    qid: self._publish(by_id[qid], summary.exact(by_id[qid]), qid, window)
                    for qid in todo
                }
                releases.update(self._store_all(charges, published))
        return {name: releases[ids[name]] for name in queries}

    def _charge_all(self, stack: ExitStack, requests: list[ChargeRequest]) -> dict[str, Charge]:
        """Enter a charge for each request on ``stack``: one transaction on a SQL
        ledger (all or nothing), else one by one in the given order."""
        many = getattr(self.ledger, "charging_many", None)
        if many is not None:
            held = stack.enter_context(many(requests))
            return {r.query_id: c for r, c in zip(requests, held, strict=True)}
        charging = self.ledger.charging
        return {r.query_id: stack.enter_context(charging(**r.as_kwargs())) for r in requests}

    def _store_all(
        self, charges: Mapping[str, Charge], published: Mapping[str, Release]
    ) -> dict[str, Release]:
        """Store each release (one transaction on a SQL ledger); what stands for each."""
        store_many = getattr(self.ledger, "store_many", None)
        if store_many is None:
            return {qid: self._store(charges[qid], r) for qid, r in published.items()}
        stored = store_many([(charges[qid], r) for qid, r in published.items()])
        return dict(zip(published, stored, strict=True))

    def _store(self, charge: Charge, release: Release) -> Release:
        """Store ``release``; if another process stored one first, return that one."""
        try:
            charge.store(release)
        except ChargeInProgress:
            stored = self.ledger.get_release(charge.query_id)
            if stored is None:
                raise
            return stored
        return release

    def release_many(
        self,
        queries: Mapping[str, Query],
        windows: Sequence[Window | str],
        *,
        accept_delta: bool = False,
    ) -> dict[str, dict[str, Release]]:
        """Release every query in every window, reading the data once.

        Args:
            queries: ``{name: query}``.
            windows: ISO week keys (repeats are ignored); the result keeps their order.
            accept_delta: as in :meth:`release`, for every query of the set.

        Returns:
            ``{window: {name: release}}``.

        Raises:
            DataError: a bad window, missing source or column (nothing charged); an
                engine failure after the read (the charges stand).
            InvalidPrivacyParameter: δ > 0 and not ``accept_delta`` (nothing charged).
            BudgetExceeded: one (query, window) does not fit its window's budget
                (nothing charged: the earlier charges are refunded, nothing read).

        Privacy: each (query, window) costs ``query.cost`` per user in *that*
        window, charged under its own query id before anything is read; a cached
        one is free and not recomputed. ISO weeks are disjoint sets of records,
        so the releases of different weeks compose in parallel: per user and
        window the loss is the sum over the queries only. Reading all windows in
        one statement changes no cost: every window's exact aggregate equals the
        one its own statement returns.
        """
        # Each window parsed strictly and refused unless complete (nothing charged).
        weeks = list(dict.fromkeys(self.window(w).key for w in windows))
        if not weeks:
            raise DataError("release_many needs at least one window")
        deltas = {}
        for name, q in queries.items():
            self.check(q)
            deltas[name] = self._admit_delta(q, accept_delta)
        ids = {(w, n): self.query_id(q, w) for w in weeks for n, q in queries.items()}
        owner: dict[str, tuple[str, str]] = {}
        for key, qid in ids.items():
            owner.setdefault(qid, key)  # one charge per query id
        cfg = self._config
        releases: dict[str, Release] = {}
        with ExitStack() as stack:
            # In query-id order (no wait cycles between processes); a refusal
            # unwinds the stack and refunds every earlier charge (nothing read).
            # A SQL ledger charges them all in one transaction, all or nothing.
            desc = {n: self._description(q, deltas[n]) for n, q in queries.items()}
            requests = [
                ChargeRequest(qid, cfg.pool, w, queries[n].cost, cfg.analyst, desc[n], deltas[n])
                for qid, (w, n) in sorted(owner.items())
            ]
            charges = self._charge_all(stack, requests)
            for qid, charge in charges.items():
                if charge.cached is not None:
                    releases[qid] = charge.cached
            todo = [qid for qid in owner if qid not in releases]
            if todo:
                for qid in todo:
                    charges[qid].data_read()
                names = list(dict.fromkeys(owner[qid][1] for qid in todo))
                todo_weeks = list(dict.fromkeys(owner[qid][0] for qid in todo))
                exact = measure_windows(
                    [queries[n] for n in names],
                    self._scope(Window.parse(todo_weeks[0])),
                    todo_weeks,
                )
                published = {}
                for qid in todo:
                    w, n = owner[qid]
                    published[qid] = self._publish(
                        queries[n], exact[(names.index(n), w)], qid, Window.parse(w)
                    )
                releases.update(self._store_all(charges, published))
        return {w: {n: releases[ids[(w, n)]] for n in queries} for w in weeks}

    def trend(
        self, query: Query, windows: Sequence[Window | str], *, accept_delta: bool = False
    ) -> dict[str, Release]:
        """The same query in several weeks, each charged to its own window, read once.

        Privacy: ``query.cost`` per user *in each window*; a user present in all
        of them loses ``len(windows) × cost`` in total, which the pool's lifetime
        cap bounds.

        .. versionchanged:: unreleased one read for all windows (:meth:`release_many`).
        """
        many = self.release_many({query.name: query}, windows, accept_delta=accept_delta)
        return {w: by_name[query.name] for w, by_name in many.items()}


def _half_width(release: Release, confidence: float) -> float:
    if release.mechanism == "discrete_laplace":
        return discrete_laplace_half_width(release.noise_scale, confidence)
    if release.mechanism == "discrete_gaussian":
        return discrete_gaussian_half_width(release.noise_scale, confidence)
    raise DataError(f"cannot derive shares from a {release.mechanism!r} release")


def rating_shares(histogram: Release) -> dict[str, Release]:
    """Shares of ratings ≥ 4 (``share_positive``) and ≤ 2 (``share_negative``) from a histogram.

    .. versionchanged:: 0.2
       The keys were ``share_high``/``share_low``; one name everywhere now (the
       templates', ``stats``', the guard's and the weekly report's).

    Point estimate: the noisy bucket sum over the noisy total (buckets clamped
    at 0). Interval: each of the five buckets gets a Bonferroni interval at level
    ``1 − (1 − confidence)/5``; when all five hold (probability ≥ confidence) the
    share lies in ``[A⁻/(A⁻ + B⁺), A⁺/(A⁺ + B⁻)]`` where A is the bucket group
    and B the rest.

    Privacy: post-processing of one release: free (its cost is the histogram's).
    """
    if list(histogram.labels) != ["1", "2", "3", "4", "5"]:
        raise DataError("rating_shares needs the rating histogram release (labels 1–5)")
    hw = _half_width(histogram, 1.0 - (1.0 - histogram.confidence) / 5.0)
    v = [max(0.0, x) for x in histogram.values]
    out: dict[str, Release] = {}
    for name, group in (("share_positive", (3, 4)), ("share_negative", (0, 1))):
        a = sum(v[i] for i in group)
        b = sum(v[i] for i in range(5) if i not in group)
        a_lo, a_hi = max(0.0, a - hw * len(group)), a + hw * len(group)
        b_lo, b_hi = max(0.0, b - hw * (5 - len(group))), b + hw * (5 - len(group))
        value = a / (a + b) if a + b > 0 else 0.5
        lo = a_lo / (a_lo + b_hi) if a_lo + b_hi > 0 else 0.0
        hi = a_hi / (a_hi + b_lo) if a_hi + b_lo > 0 else 1.0
        out[name] = Release(
            name=f"{histogram.name}.{name}",
            values=(value,),
            intervals=((min(lo, value), max(hi, value)),),
            mechanism="derived",
            noise_scale=histogram.noise_scale,
            cost=histogram.cost,
            fingerprint=histogram.fingerprint,
            kind="proportion",
            unit="share",
            confidence=histogram.confidence,
            privacy_unit=histogram.privacy_unit,
            window=histogram.window,
            seeded=histogram.seeded,
            complete=histogram.complete,
            estimand=f"share of {'4–5' if name == 'share_positive' else '1–2'} star ratings; "
            + (histogram.estimand or "ratings per star"),
            small_threshold=None,
            notes=(f"post-processing of {histogram.name}; Bonferroni interval",),
        )
    return out


def top_k(release: Release, k: int) -> list[str]:
    """Labels of the k largest noisy values of a vector release (post-processing, free)."""
    if not release.is_vector:
        raise DataError(f"top_k needs a vector release, {release.name!r} is a scalar")
    order = sorted(range(len(release.values)), key=lambda i: (-release.values[i], i))
    return [release.labels[i] for i in order[: max(0, int(k))]]
