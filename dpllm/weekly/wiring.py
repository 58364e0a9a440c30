"""Wiring: the weekly job's parts built from :class:`~dpllm.config.Settings`.

The query plan (catalogue queries with the configured bounds and ε), the pool path,
the data engine, the ledger, the column mapping, the redactor (with the configured
operator) and the model client. :mod:`dpllm.weekly.job` assembles them into a run.
Nothing here reads the data or charges the ledger.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from dpllm.chat.generate import RedactionLike, Redactor
from dpllm.chat.models import ModelClient
from dpllm.config import Settings
from dpllm.data.engines import Engine
from dpllm.data.queries import (
    ActiveUsers,
    CourseBreakdown,
    FeedbackCount,
    MeanRating,
    Query,
    RatingHistogram,
)
from dpllm.data.sql import ColumnMap, OutOfRange
from dpllm.data.topics import DEFAULT_VOCABULARY, TopicCounts, Vocabulary
from dpllm.errors import ConfigError, DataError
from dpllm.ledger.base import PoolSpec
from dpllm.ledger.factory import ManagedLedger
from dpllm.release import Measure

__all__ = [
    "build_model",
    "build_plan",
    "build_redactor",
    "columns_for",
    "open_engine",
    "open_ledger",
    "parents_first",
    "plan_pool",
    "pool_path",
]


def build_plan(settings: Settings, *, courses: Sequence[str] = ()) -> dict[str, Query]:
    """The configured query plan as catalogue queries with the configured bounds.

    Args:
        settings: the validated settings (plan, bounds, topics, plan pool).
        courses: the public course list (needed only by ``course_feedback``).

    Returns:
        ``{name: query}`` in plan order; ε (or ρ, when the plan pool is zCDP) per query.

    Raises:
        ConfigError: a query name the catalogue does not have, or bounds a query refuses.
    """
    measure = plan_pool(settings).measure
    b = settings.bounds
    vocabulary = _vocabulary(settings)
    policy = cast(OutOfRange, b.out_of_range)
    plan: dict[str, Query] = {}
    for planned in settings.plan:
        amount: dict[str, Any] = (
            {"epsilon": planned.epsilon}
            if measure is Measure.PURE
            else {"rho": planned.epsilon, "epsilon": None}
        )
        name = planned.name
        where = f"plan.queries.{name}"
        try:
            query: Query
            if name == "feedback_count":
                query = FeedbackCount(max_records=b.max_records_per_user, **amount)
            elif name == "active_users":
                query = ActiveUsers(**amount)
            elif name == "mean_rating":
                query = MeanRating(out_of_range=policy, **amount)
            elif name == "rating_histogram":
                query = RatingHistogram(
                    max_records=b.max_records_per_user, out_of_range=policy, **amount
                )
            elif name == "topic_counts":
                limit = min(b.max_topics_per_user, len(vocabulary.topics))
                query = TopicCounts(vocabulary=vocabulary, max_topics=limit, **amount)
            elif name == "course_feedback":
                if not courses:
                    raise ConfigError(
                        "course_feedback needs the public course list; pass courses=",
                        field=where,
                    )
                query = CourseBreakdown(
                    courses=tuple(courses),
                    max_courses=min(b.max_courses_per_user, len(courses)),
                    max_records=b.max_records_per_user,
                    **amount,
                )
            else:
                raise ConfigError(
                    f"{name!r} is not a catalogue query; use feedback_count, active_users, "
                    "mean_rating, rating_histogram, topic_counts or course_feedback",
                    field=where,
                )
        except ConfigError:
            raise
        except (DataError, ValueError) as exc:
            raise ConfigError(str(exc), field=where) from exc
        plan[name] = query
    return plan


def _vocabulary(settings: Settings) -> Vocabulary:
    if not settings.topics:
        return DEFAULT_VOCABULARY
    from dpllm.data.topics import Topic

    topics = []
    for name, words in settings.topics.items():
        zh = tuple(w for w in words if not w.isascii())
        en = tuple(w for w in words if w.isascii())
        topics.append(Topic(name, zh, en))
    return Vocabulary(tuple(topics))


def plan_pool(settings: Settings) -> PoolSpec:
    pools = {p.name: p for p in settings.default_pools}
    if settings.plan_pool not in pools:
        raise ConfigError(
            f"unknown plan pool {settings.plan_pool!r}; define it under [[pools]]",
            field="plan.pool",
        )
    return pools[settings.plan_pool]


def pool_path(settings: Settings) -> list[PoolSpec]:
    pools = {p.name: p for p in settings.default_pools}
    path: list[PoolSpec] = []
    node: PoolSpec | None = plan_pool(settings)
    while node is not None and node not in path:
        path.append(node)
        node = pools.get(node.parent) if node.parent else None
    return path


def parents_first(pools: Sequence[PoolSpec]) -> list[PoolSpec]:
    done: list[PoolSpec] = []
    pending = list(pools)
    while pending:
        ready = [p for p in pending if p.parent is None or p.parent in {d.name for d in done}]
        if not ready:
            raise ConfigError("pool parents form a cycle or name unknown pools", field="pools")
        done.extend(ready)
        pending = [p for p in pending if p not in ready]
    return done


def open_engine(settings: Settings) -> Engine:
    """The data source the settings name (SQLite, DuckDB, PostgreSQL or Spark).

    Raises:
        DataError: the source cannot be opened (nothing is charged).
    """
    from dpllm.data.engines import DuckDBEngine, PostgresEngine, SQLiteEngine

    d = settings.data
    if d.source == "spark":
        from dpllm.data.spark import SparkEngine, spark_session

        # A URL (s3a://, abfss://, hdfs://) is read by the cluster as written.
        where = d.path if "://" in d.path else str(settings.resolve(d.path))
        paths = [where] if d.path else []
        return SparkEngine(spark_session(d.spark), paths=paths, file_format=d.format)
    if d.source == "postgres":
        if not d.dsn:
            raise ConfigError("a postgres source needs data.dsn", field="data.dsn")
        return PostgresEngine(d.dsn)
    path = settings.resolve(d.path)
    if d.source == "duckdb":
        return DuckDBEngine(str(path))
    return SQLiteEngine(path)


def open_ledger(settings: Settings, *, create: bool = True) -> ManagedLedger:
    """The ledger the settings name: SQLite (a path or ``sqlite:///``) or PostgreSQL.

    Relative SQLite paths are relative to the config file's folder; a missing file
    (and its folder) is created unless ``create`` is false. See
    :func:`dpllm.ledger.factory.open_ledger`.

    Raises:
        ConfigError: an unknown URL scheme. LedgerUnavailable: it cannot be opened.

    .. versionchanged:: unreleased
        PostgreSQL ledgers (was: SQLite only).
    """
    from dpllm.ledger.factory import open_ledger as open_url

    return open_url(settings.ledger, base_dir=settings.base_dir, create=create)


def columns_for(settings: Settings, plan: Mapping[str, Query]) -> ColumnMap:
    """The column mapping of the settings (the course column only when a query needs it)."""
    c = settings.data.columns
    needs_course = any("course" in q.columns_needed() for q in plan.values())
    try:
        return ColumnMap(
            table=settings.data.table,
            user=c["user"],
            rating=c["rating"],
            text=c["text"],
            timestamp=c["timestamp"],
            course=c["course"] if needs_course else None,
        )
    except DataError as exc:
        raise ConfigError(str(exc), field="data.columns") from exc


class _ConfiguredRedactor:
    """Adapts :class:`dpllm.redact.Redactor` to the configured operator."""

    def __init__(self, inner: Any, operator: str) -> None:
        self._inner = inner
        self._operator = operator

    def redact(
        self, text: str, *, language: str = "auto", allow: Collection[str] = ()
    ) -> RedactionLike:
        result: RedactionLike = self._inner.redact(
            text, language=language, allow=allow, operator=self._operator
        )
        return result


@dataclass(frozen=True, slots=True)
class _Unredacted:
    text: str
    counts: Mapping[str, int] = field(default_factory=dict)


class _NoRedaction:
    """``[redaction] enabled = false``: texts pass unchanged (the report says so)."""

    def redact(
        self, text: str, *, language: str = "auto", allow: Collection[str] = ()
    ) -> RedactionLike:
        return _Unredacted(text)


def build_redactor(settings: Settings) -> Redactor:
    """The redactor the settings ask for (building it loads spaCy and jieba: seconds).

    Raises:
        RedactionError: Presidio or its models cannot be set up.
    """
    if not settings.redaction_enabled:
        return _NoRedaction()
    from dpllm.redact import Redactor as PresidioRedactor

    return _ConfiguredRedactor(PresidioRedactor(), settings.redaction_operator)


def build_model(settings: Settings) -> ModelClient | None:
    """The OpenAI-compatible client the settings select, or ``None`` for the offline writer."""
    m = settings.model
    if m.provider != "openai":
        return None
    from dpllm.chat.models import OpenAIModelClient

    try:
        return OpenAIModelClient(
            base_url=m.base_url or "https://api.openai.com/v1",
            api_key=m.api_key or "unused",
            model=m.model,
            temperature=m.temperature,
            timeout=m.timeout,
            max_retries=m.max_retries,
        )
    except ValueError as exc:
        raise ConfigError(str(exc), field="model") from exc
