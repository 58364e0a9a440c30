"""Apache Spark as an engine: the same bounded SQL, run where the data lives.

:class:`SparkEngine` runs the statements of :mod:`dpllm.data.sql` and
:mod:`dpllm.data.bounded` as Spark SQL — over a table of the session's catalog,
or over Parquet (or any format Spark reads) at one or more paths — on a local
Spark, a cluster (``spark-submit``, ``spark.master``) or a remote Spark Connect
server (``spark.remote``).

**Only per-window aggregates leave the cluster.** Every statement dpllm sends
ends in a ``GROUP BY`` window (and topic or course): the per-user reductions,
the text bound, the keyword matching and the keyed choice of topics and courses
all run in Spark, and the driver collects one row per window (per topic or
course). :class:`~dpllm.data.topics.NewKeywords`, which segments texts with
jieba in Python, is refused on this engine before anything is charged.

**The SQL, translated.** Identifiers are written double-quoted by
:func:`~dpllm.data.sql.quote_ident` (plain names only); this engine turns them
into Spark's backquotes. Values travel as positional parameters (``?``, Spark
3.5+). Time bounds are bound as UTC text and cast (:meth:`Dialect.time_param`).

**No record can fail a query**, as on the other engines: a rating or timestamp
column of a text type is read through ``TRY_CAST`` (a value that does not parse
is NULL), so the statements hold under ANSI mode (Spark 4's default) too.
Driver errors after the read are withheld like every engine's
(:func:`~dpllm.data.engines.withheld`).

The engine works on its own ``newSession()`` of the given session (its own SQL
settings and temporary views, the caller's SparkContext), with the session time
zone set to UTC: naive timestamps are UTC, as on every engine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from dpllm.data.engines import Row, withheld
from dpllm.data.sql import ColumnMap, Dialect, Statement, quote_ident
from dpllm.errors import DataError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkEngine", "spark_session"]

_QUOTED = re.compile(r'"([A-Za-z_][A-Za-z0-9_]{0,62})"')
_TEXT_CASTS = {"rating": "DOUBLE", "timestamp": "TIMESTAMP"}
VIEW = "dpllm_records"
"""The temporary view of the records when the engine reads files."""


def _import_pyspark() -> Any:
    try:
        import pyspark.sql
    except ImportError as exc:
        raise DataError(
            "the spark source needs PySpark and Java 17: pip install 'dpllm[spark]'"
        ) from exc
    return pyspark.sql


def spark_session(settings: Mapping[str, str], *, app_name: str = "dpllm") -> SparkSession:
    """A SparkSession from ``spark.*`` settings, passed through unchanged.

    ``spark.master`` picks a cluster (``local[2]``, ``yarn``, ``spark://…``);
    ``spark.remote`` (``sc://host:15002``) a Spark Connect server instead.
    Under ``spark-submit`` the submitted settings apply and an existing session
    is reused.

    Raises:
        DataError: PySpark is missing or the session cannot start.
    """
    sql = _import_pyspark()
    builder = sql.SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        if not key.startswith("spark."):
            raise DataError(f"Spark setting {key!r} must start with 'spark.'")
        builder = builder.config(key, str(value))
    try:
        session: SparkSession = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - py4j, gRPC and JVM start-up errors alike
        raise DataError(f"cannot start Spark ({type(exc).__name__}: {exc})") from exc
    return session


class SparkEngine:
    """Spark SQL over a catalog table or over files.

    Args:
        session: the SparkSession (:func:`spark_session` builds one from settings).
        paths: files or directories (globs allowed) to read as the records; when
            empty, the table named by the column mapping is read from the catalog.
        file_format: the format of ``paths`` (``parquet``, ``delta``, ``orc`` …).

    Raises:
        DataError: the files cannot be read (their schema, no rows).
    """

    dialect = Dialect.SPARK

    def __init__(
        self,
        session: SparkSession,
        *,
        paths: Sequence[str] = (),
        file_format: str = "parquet",
    ) -> None:
        try:
            self._spark: SparkSession = session.newSession()
        except Exception:  # noqa: BLE001 - Spark Connect sessions cannot fork
            self._spark = session
        self._spark.conf.set("spark.sql.session.timeZone", "UTC")
        self._paths = tuple(str(p) for p in paths)
        self._types: dict[str, dict[str, str]] = {}
        if self._paths:
            if not re.fullmatch(r"[a-z]+", file_format):
                raise DataError(f"unknown file format {file_format!r}")
            try:
                frame = self._spark.read.format(file_format).load(list(self._paths))
                frame.createOrReplaceTempView(VIEW)
            except Exception as exc:  # noqa: BLE001 - AnalysisException and kin: no rows read
                raise DataError(f"Spark cannot read {list(self._paths)!r}: {exc}") from exc

    def _name(self, table: str) -> str:
        return VIEW if self._paths else table

    def relation(self, columns: ColumnMap) -> Statement:
        name = self._name(columns.table)
        types = self._column_types(columns.table)
        casts = {
            getattr(columns, role): target
            for role, target in _TEXT_CASTS.items()
            if getattr(columns, role) is not None
            and types.get(getattr(columns, role), "") in ("string", "binary")
        }
        if not casts:
            return Statement(quote_ident(name))
        select = ", ".join(
            f"TRY_CAST({quote_ident(c)} AS {casts[c]}) AS {quote_ident(c)}"
            if c in casts
            else quote_ident(c)
            for c in types
        )
        return Statement(f"(SELECT {select} FROM {quote_ident(name)}) AS records")

    def _column_types(self, table: str) -> dict[str, str]:
        if table not in self._types:
            name = self._name(quote_ident(table).strip('"'))
            try:
                dtypes = self._spark.table(name).dtypes
            except Exception as exc:  # noqa: BLE001 - metadata only: the message may stay
                raise DataError(f"Spark cannot read the table {name!r}: {exc}") from exc
            self._types[table] = {str(n): str(t) for n, t in dtypes}
        return self._types[table]

    def user_column_is_key(self, columns: ColumnMap) -> bool:
        """Whether grouping by the user column partitions the records as its text does
        (integer and string types)."""
        kind = self._column_types(columns.table).get(columns.user, "")
        return kind in ("string", "bigint", "int", "smallint", "tinyint")

    def column_names(self, table: str) -> frozenset[str]:
        return frozenset(self._column_types(table))

    @staticmethod
    def translate(statement: Statement) -> str:
        """The statement's SQL with Spark's identifier quotes (``"a"`` → ```a```)."""
        return _QUOTED.sub(r"`\1`", statement.sql)

    def fetch(self, statement: Statement, *, query: str = "a statistic") -> list[Row]:
        try:
            frame = self._spark.sql(self.translate(statement), args=list(statement.params))
            return [tuple(r) for r in frame.collect()]
        except Exception as exc:  # noqa: BLE001 - py4j/Connect errors: translated, withheld
            failure = withheld("Spark", query, exc)
        raise failure

    def close(self) -> None:
        """Drop the engine's view (the session belongs to whoever made it)."""
        if self._paths:
            try:
                self._spark.catalog.dropTempView(VIEW)
            except Exception:  # noqa: BLE001, S110 - a stopped session has no views left
                pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
