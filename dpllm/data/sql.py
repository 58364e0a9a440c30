"""Bounded SQL: the column mapping, safe identifiers and the per-user reductions.

Every statement here is built from (a) identifiers that passed
:func:`quote_ident` (plain names only, then double-quoted), (b) contribution
bounds that are validated Python ints rendered by ``int.__str__``, and (c)
placeholders for every value that comes from a caller or the data (window
bounds, course names, file paths). No SQL text is ever built from a raw user
string.

**The user key.** Every per-user reduction groups by one canonical key,
:func:`user_key` = ``CAST(user AS TEXT)``, on every engine, and the rows that
leave the SQL carry that same string, so Python code that bounds per user
(courses, topics, keywords) groups by exactly the key the SQL groups by. SQLite
types values per row: ``7`` (integer), ``'7'`` (text) and ``x'37'`` (blob) are
one user, ``7.0`` (real) prints as ``'7.0'`` and is another — store user ids
as text.

Where the SQL bounds, it does so with per-user ``GROUP BY`` reductions (no
window sort over records):

* records per user are capped with ``CASE WHEN n < M THEN n ELSE M END``;
* a rating histogram gives user *u* with ``n`` valid ratings, ``c_k`` of them
  equal to *k*, the integer weight ``⌊c_k·M / max(n, M)⌋`` for bucket *k*: the
  weights sum to at most ``M`` and keep the user's own rating shares;
* a mean rating reduces each user to their mean in integer milli-stars
  ``round(1000·Σr/n)``, so sums are exact integers on every engine.

The per-course and per-topic bounds are applied in the engine too, by
:mod:`dpllm.data.bounded` (see :mod:`dpllm.data.groups` and :mod:`dpllm.data.topics`);
:func:`user_texts` bounds the texts that :class:`~dpllm.data.topics.NewKeywords`
reads per user before it segments them in Python.

Ratings are read through one portable expression: NULL and NaN are ignored, a
value is mapped to its nearest star (halves round up) using comparisons only,
and a value outside 1–5 is clamped (``clamp``) or excluded like a NULL
(``reject``; ``drop`` is the same). No statement can fail because of a value in
the records: comparisons, integer arithmetic with divisors that are never 0,
casts to text, and — on DuckDB, whose text columns would otherwise be cast
strictly — ``TRY_CAST`` of text ratings and timestamps (see
:class:`~dpllm.data.engines.DuckDBEngine`). So SQLite, DuckDB and PostgreSQL
return identical exact aggregates, and a query's outcome never depends on one
record.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from dataclasses import dataclass
from typing import Literal

from dpllm.errors import DataError, UnsafeIdentifier

__all__ = [
    "ColumnMap",
    "Dialect",
    "OutOfRange",
    "Statement",
    "SummaryPlan",
    "quote_ident",
    "user_key",
    "user_summary",
]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

OutOfRange = Literal["clamp", "drop", "reject"]
"""What a query does with a rating outside 1–5: clamp it to 1 or 5 (``clamp``), or
reject it as a record — excluded from the statistic like a NULL rating (``reject``;
``drop`` is a synonym). Never an error: a query that failed because one user's
rating is out of range would reveal that rating with certainty.

.. versionchanged:: unreleased ``reject`` no longer refuses the data after the read."""

POLICIES: tuple[OutOfRange, ...] = ("clamp", "drop", "reject")

MILLI = 1000
"""Per-user means are carried in integer milli-stars."""


def quote_ident(name: str) -> str:
    """Validate a plain SQL name and return it double-quoted.

    Args:
        name: a table or column name: letters, digits and ``_``, not starting
            with a digit, at most 63 characters.

    Returns:
        ``'"name"'``, safe to splice into SQL on every supported engine.

    Raises:
        UnsafeIdentifier: anything else (quotes, dots, spaces, semicolons …).
    """
    if not isinstance(name, str) or len(name) > 63 or not _IDENT.fullmatch(name):
        raise UnsafeIdentifier(
            f"{name!r} is not a plain SQL name; use letters, digits and '_' only "
            "(rename the column, or create a view with plain names)"
        )
    return f'"{name}"'


def _bound(name: str, value: int) -> str:
    """A contribution bound as SQL text: a validated positive int, never a string."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataError(f"{name} must be a positive int, got {value!r}")
    return str(int(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnMap:
    """Where the feedback records live and what their columns are called.

    Args:
        table: the table (or view) of feedback records. Ignored by a DuckDB
            engine over Parquet/CSV files, whose files are the table.
        user: the user id column — the privacy unit.
        rating: the rating column (numbers; stars 1–5).
        text: the free-text column.
        timestamp: the record time (a timestamp; in SQLite ISO-8601 text, UTC
            unless an offset is written).
        course: the course (group) column, if any.

    Raises:
        UnsafeIdentifier: a name is not a plain SQL name.
    """

    table: str = "feedback"
    user: str = "user_id"
    rating: str = "rating"
    text: str = "text"
    timestamp: str = "ts"
    course: str | None = None

    def __post_init__(self) -> None:
        for field_name in ("table", "user", "rating", "text", "timestamp", "course"):
            value = getattr(self, field_name)
            if value is not None:
                quote_ident(value)

    def q(self, field_name: str) -> str:
        """The quoted identifier of one mapped column (``"user"`` → ``'"user_id"'``)."""
        value = getattr(self, field_name)
        if value is None:
            raise DataError(
                f"this query needs a {field_name} column; map it in the column mapping "
                f"([data.columns] {field_name} = ...)"
            )
        return quote_ident(value)


class Dialect(enum.StrEnum):
    """The SQL dialects dpllm writes bounded queries for."""

    SQLITE = "sqlite"
    DUCKDB = "duckdb"
    POSTGRES = "postgres"
    SPARK = "spark"

    @property
    def placeholder(self) -> str:
        return "%s" if self is Dialect.POSTGRES else "?"

    @property
    def text_type(self) -> str:
        """The name of the text type in casts (Spark SQL has no ``TEXT``)."""
        return "STRING" if self is Dialect.SPARK else "TEXT"

    def idiv(self, a: str, b: str) -> str:
        """Integer division of two non-negative integer expressions."""
        if self is Dialect.DUCKDB:
            return f"(({a}) // ({b}))"
        if self is Dialect.SPARK:
            return f"(({a}) DIV ({b}))"
        return f"(({a}) / ({b}))"

    def binary(self, expr: str) -> str:
        """``expr`` compared by its bytes (PostgreSQL's default collation is the locale's)."""
        return f'{expr} COLLATE "C"' if self is Dialect.POSTGRES else expr

    def sha256_hex(self, expr: str) -> str:
        """The lower-case hex SHA-256 of a text expression's UTF-8 bytes.

        SQLite has no hash function: :class:`~dpllm.data.engines.SQLiteEngine`
        registers ``dpllm_sha256`` (over the bytes, so no text can fail to decode).
        """
        if self is Dialect.SQLITE:
            return f"dpllm_sha256(CAST({expr} AS BLOB))"
        if self is Dialect.POSTGRES:
            return f"encode(sha256(convert_to({expr}, 'UTF8')), 'hex')"
        if self is Dialect.SPARK:
            return f"sha2({expr}, 256)"
        return f"sha256({expr})"

    def regex(self, expr: str, pattern: str) -> str:
        """``expr`` contains a match of ``pattern`` (a literal built by
        :mod:`dpllm.data.bounded` from validated keywords only; never SQLite)."""
        if self is Dialect.DUCKDB:
            return f"regexp_matches({expr}, '{pattern}')"
        if self is Dialect.POSTGRES:
            return f"({expr} ~ '{pattern}')"
        if self is Dialect.SPARK:
            return f"({expr} RLIKE '{pattern}')"
        raise DataError(f"the {self.value} dialect has no regular expressions here")

    def is_nan(self, expr: str) -> str:
        """A predicate true for NaN (SQLite cannot store NaN: it becomes NULL)."""
        if self is Dialect.SQLITE:
            return "0 = 1"
        if self is Dialect.DUCKDB:
            return f"isnan(TRY_CAST({expr} AS DOUBLE))"
        if self is Dialect.SPARK:
            return f"isnan(TRY_CAST({expr} AS DOUBLE))"
        # As text: a cast to double precision overflows on a huge NUMERIC (an
        # error that one record would cause); the text of NaN is 'NaN' for
        # double precision, real and numeric alike, and no integer prints so.
        return f"(CAST({expr} AS TEXT) = 'NaN')"

    def timestamp(self, expr: str) -> str:
        # SQLite has no timestamp type: normalise ISO-8601 text (with 'T' or an
        # offset) to 'YYYY-MM-DD HH:MM:SS' UTC, which compares as text.
        return f"datetime({expr})" if self is Dialect.SQLITE else expr

    @property
    def time_placeholder(self) -> str:
        """A placeholder for a :meth:`time_param` (Spark binds it as text, then casts)."""
        return "CAST(? AS TIMESTAMP)" if self is Dialect.SPARK else self.placeholder

    def time_param(self, moment: dt.datetime) -> object:
        if self is Dialect.SPARK:
            # Text read in the session time zone, which SparkEngine sets to UTC.
            return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        if self is Dialect.SQLITE:
            return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        if self is Dialect.DUCKDB:
            # A naive UTC TIMESTAMP (the session runs in UTC): comparing a
            # TIMESTAMP column to a TIMESTAMPTZ parameter would cast every row.
            return moment.astimezone(dt.UTC).replace(tzinfo=None)
        return moment


@dataclass(frozen=True, slots=True)
class Statement:
    """SQL text with its bound parameters (in placeholder order)."""

    sql: str
    params: tuple[object, ...] = ()

    def __add__(self, other: Statement) -> Statement:
        return Statement(self.sql + other.sql, self.params + other.params)


def text(sql: str) -> Statement:
    return Statement(sql)


def check_policy(policy: object) -> OutOfRange:
    """``policy`` if it is an out-of-range policy, else a :class:`DataError` (before any read)."""
    if policy not in POLICIES:
        raise DataError(f"out_of_range must be 'clamp' or 'reject', got {policy!r}")
    return policy


def user_key(cols: ColumnMap, dialect: Dialect) -> str:
    """The canonical user key: ``CAST(user AS TEXT)``, the same in every query and engine
    (``STRING`` is Spark SQL's name of the text type)."""
    return f"CAST({cols.q('user')} AS {dialect.text_type})"


def rating_bucket(cols: ColumnMap, dialect: Dialect, policy: OutOfRange) -> str:
    """The portable expression mapping a raw rating to a star 1–5, or NULL (ignored)."""
    x = cols.q("rating")
    outside = f"CASE WHEN {x} < 1 THEN 1 ELSE 5 END"
    if check_policy(policy) != "clamp":
        outside = "NULL"  # rejected as a record, like a NULL rating
    return (
        f"CASE WHEN {x} IS NULL OR {dialect.is_nan(x)} THEN NULL "
        f"WHEN {x} < 1 OR {x} > 5 THEN {outside} "
        f"WHEN {x} < 1.5 THEN 1 WHEN {x} < 2.5 THEN 2 WHEN {x} < 3.5 THEN 3 "
        f"WHEN {x} < 4.5 THEN 4 ELSE 5 END"
    )


def window_filter(
    cols: ColumnMap, dialect: Dialect, start: dt.datetime, end: dt.datetime
) -> Statement:
    """``WHERE`` clause: a user is known and the time lies in ``[start, end)``."""
    ts = dialect.timestamp(cols.q("timestamp"))
    ph = dialect.time_placeholder
    return Statement(
        f" WHERE {cols.q('user')} IS NOT NULL AND {ts} >= {ph} AND {ts} < {ph}",
        (dialect.time_param(start), dialect.time_param(end)),
    )


def records_and_users(
    cols: ColumnMap,
    dialect: Dialect,
    source: Statement,
    start: dt.datetime,
    end: dt.datetime,
    *,
    max_records: int,
) -> Statement:
    """``(users, Σ_u min(n_u, M))`` over the window, one row."""
    m = _bound("max_records", max_records)
    inner = (
        text("SELECT COUNT(*) AS n FROM ")
        + source
        + window_filter(cols, dialect, start, end)
        + text(f" GROUP BY {user_key(cols, dialect)}")
    )
    return (
        text(f"SELECT COUNT(*), COALESCE(SUM(CASE WHEN n < {m} THEN n ELSE {m} END), 0) FROM (")
        + inner
        + text(") AS per_user")
    )


def _rated_rows(
    cols: ColumnMap,
    dialect: Dialect,
    source: Statement,
    start: dt.datetime,
    end: dt.datetime,
    policy: OutOfRange,
) -> Statement:
    return (
        text(
            f"SELECT {user_key(cols, dialect)} AS u, {rating_bucket(cols, dialect, policy)} AS r FROM "
        )
        + source
        + window_filter(cols, dialect, start, end)
    )


def mean_parts(
    cols: ColumnMap,
    dialect: Dialect,
    source: Statement,
    start: dt.datetime,
    end: dt.datetime,
    policy: OutOfRange,
) -> Statement:
    """``(C, S)``: users with a valid rating, and Σ_u (round(1000·mean_u) − 3000)."""
    rows = _rated_rows(cols, dialect, source, start, end, policy)
    per_user = (
        text("SELECT SUM(r) AS s, COUNT(r) AS n FROM (")
        + rows
        + text(") AS x WHERE r >= 1 GROUP BY u")
    )
    # round half up of 1000·s/n for positive s, n: ⌊(2000·s + n) / (2n)⌋.
    q_u = dialect.idiv(f"{2 * MILLI} * CAST(s AS BIGINT) + n", "2 * CAST(n AS BIGINT)")
    return (
        text(f"SELECT COUNT(*), COALESCE(SUM({q_u} - {3 * MILLI}), 0) FROM (")
        + per_user
        + text(") AS per_user")
    )


def histogram(
    cols: ColumnMap,
    dialect: Dialect,
    source: Statement,
    start: dt.datetime,
    end: dt.datetime,
    policy: OutOfRange,
    *,
    max_records: int,
) -> Statement:
    """One row ``(h_1, …, h_5)`` with ``h_k = Σ_u ⌊c_uk·M / max(n_u, M)⌋``."""
    m = _bound("max_records", max_records)
    rows = _rated_rows(cols, dialect, source, start, end, policy)
    cells = ", ".join(f"SUM(CASE WHEN r = {k} THEN 1 ELSE 0 END) AS c{k}" for k in range(1, 6))
    per_user = (
        text(f"SELECT COUNT(r) AS n, {cells} FROM (")
        + rows
        + text(") AS x WHERE r >= 1 GROUP BY u")
    )
    denominator = f"CASE WHEN n > {m} THEN n ELSE {m} END"
    sums = ", ".join(
        f"COALESCE(SUM({dialect.idiv(f'CAST(c{k} AS BIGINT) * {m}', denominator)}), 0)"
        for k in range(1, 6)
    )
    return text(f"SELECT {sums} FROM (") + per_user + text(") AS per_user")


TEXTS_PER_USER = 5
"""Texts of one user per window that topic and keyword queries read (the earliest; the
same 5 as the default records-per-user bound)."""
TEXT_CHARS = 1000
"""Characters of each text that topic and keyword queries read (the first)."""


def user_texts(
    cols: ColumnMap,
    dialect: Dialect,
    source: Statement,
    start: dt.datetime,
    end: dt.datetime,
    *,
    max_texts: int = TEXTS_PER_USER,
    max_chars: int = TEXT_CHARS,
) -> Statement:
    """Rows ``(user key, text)`` of the window, at most ``max_texts`` per user (the
    earliest), each cut to ``max_chars`` characters — bounded in the SQL, so one user
    with many long texts cannot make the tokenising that follows take longer than
    ``max_texts × max_chars`` characters' worth. The caller bounds topics per user."""
    n = _bound("max_texts", max_texts)
    c = _bound("max_chars", max_chars)
    u, t = user_key(cols, dialect), f"CAST({cols.q('text')} AS {dialect.text_type})"
    return (
        text(
            f"SELECT u, SUBSTR(t, 1, {c}) FROM (SELECT {u} AS u, {t} AS t, ROW_NUMBER() "
            f"OVER (PARTITION BY {u} ORDER BY {cols.q('timestamp')}, {t}) AS rn FROM "
        )
        + source
        + window_filter(cols, dialect, start, end)
        + text(f" AND {cols.q('text')} IS NOT NULL) AS texts WHERE rn <= {n}")
    )


# -- the shared per-user summary --------------------------------------------------------

SummaryKey = tuple[object, ...]
"""Names one column of a summary row: ``("users",)``, ``("records", M)``,
``("mean_users", policy)``, ``("mean_milli", policy)`` or ``("hist", policy, M, k)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryPlan:
    """Which exact aggregates one per-user pass over a window must return.

    Args:
        record_caps: the ``M`` of each ``Σ_u min(n_u, M)`` wanted.
        mean_policies: the out-of-range policy of each mean wanted.
        histograms: ``(policy, M)`` of each rating histogram wanted.

    The user count is always returned.
    """

    record_caps: tuple[int, ...] = ()
    mean_policies: tuple[OutOfRange, ...] = ()
    histograms: tuple[tuple[OutOfRange, int], ...] = ()

    def keys(self) -> tuple[SummaryKey, ...]:
        """The columns of the summary row, in order."""
        keys: list[SummaryKey] = [("users",)]
        keys += [("records", m) for m in self.record_caps]
        for p in self.mean_policies:
            keys += [("mean_users", p), ("mean_milli", p)]
        for p, m in self.histograms:
            keys += [("hist", p, m, k) for k in range(1, 6)]
        return tuple(keys)


def _star_cells(cols: ColumnMap, dialect: Dialect) -> dict[str, str]:
    """Per-row predicates, one per rating cell, equal to :func:`rating_bucket`'s buckets.

    ``in1``…``in5`` are the in-range stars (1 ≤ x ≤ 5, nearest star, halves up);
    ``lo1`` is ``x < 1.5`` (``in1`` plus everything below 1: star 1 when clamped)
    and ``hi5`` is ``x ≥ 4.5`` (``in5`` plus everything above 5: star 5 when
    clamped). NULL compares unknown, so it is in no
    cell; NaN sorts above every number on DuckDB and PostgreSQL (SQLite stores
    it as NULL), so the cells that reach above 5 exclude it explicitly. Raw
    comparisons, no per-row CASE: the cells are counted with aggregate FILTERs.
    """
    x = cols.q("rating")
    not_nan = f"NOT ({dialect.is_nan(x)})"
    return {
        "lo1": f"{x} < 1.5",
        "in1": f"{x} >= 1 AND {x} < 1.5",
        "in2": f"{x} >= 1.5 AND {x} < 2.5",
        "in3": f"{x} >= 2.5 AND {x} < 3.5",
        "in4": f"{x} >= 3.5 AND {x} < 4.5",
        "in5": f"{x} >= 4.5 AND {x} <= 5",
        "hi5": f"{x} >= 4.5 AND {not_nan}",
    }


def _policy_cells(policy: OutOfRange) -> tuple[str, ...]:
    """The cells whose counts are a user's ``c_1…c_5`` under ``policy``."""
    if check_policy(policy) == "clamp":
        return ("lo1", "in2", "in3", "in4", "hi5")
    return ("in1", "in2", "in3", "in4", "in5")  # out-of-range ratings are rejected


def summary_cell_predicates(cols: ColumnMap, dialect: Dialect, plan: SummaryPlan) -> dict[str, str]:
    """``{cell: per-row predicate}`` of the rating cells the plan needs, by cell name."""
    policies = {*plan.mean_policies, *(p for p, _ in plan.histograms)}
    cells = sorted({c for p in policies for c in _policy_cells(p)})
    preds = _star_cells(cols, dialect) if cells else {}
    return {c: preds[c] for c in cells}


def summary_cells(cols: ColumnMap, dialect: Dialect, plan: SummaryPlan) -> list[str]:
    """The per-user columns of a summary pass: ``n`` and the rating cells the plan needs."""
    preds = summary_cell_predicates(cols, dialect, plan)
    return ["COUNT(*) AS n"] + [f"COUNT(*) FILTER (WHERE {p}) AS {c}" for c, p in preds.items()]


def summary_aggregates(dialect: Dialect, plan: SummaryPlan, weight: str | None = None) -> list[str]:
    """The plan's aggregates over the per-user rows of :func:`summary_cells`, in
    ``plan.keys()`` order.

    ``weight`` names a column saying how many users a row stands for (rows of
    equal per-user cells merged, :mod:`dpllm.data.packed`): every sum and count
    is then weighted by it, which gives the same integers as one row per user.
    """

    def total(expr: str | None, where: str | None = None) -> str:
        if weight is None:
            agg = "COUNT(*)" if expr is None else f"SUM({expr})"
        else:
            agg = f"SUM({weight})" if expr is None else f"SUM({weight} * ({expr}))"
        if where is not None:
            agg += f" FILTER (WHERE {where})"
        return agg if expr is None and weight is None else f"COALESCE({agg}, 0)"

    def n_r(p: OutOfRange) -> str:
        return "(" + " + ".join(_policy_cells(p)) + ")"

    def stars(p: OutOfRange) -> str:
        return "(" + " + ".join(f"{k} * {c}" for k, c in enumerate(_policy_cells(p), 1)) + ")"

    out = [total(None)]
    for cap in plan.record_caps:
        m = _bound("max_records", cap)
        out.append(total(f"CASE WHEN n < {m} THEN n ELSE {m} END"))
    for p in plan.mean_policies:
        nr = n_r(p)
        # A divisor that is never 0: some engines evaluate before they filter.
        safe = f"CASE WHEN {nr} > 0 THEN {nr} ELSE 1 END"
        q_u = dialect.idiv(f"{2 * MILLI} * {stars(p)} + {nr}", f"2 * {safe}")
        out.append(total(None, f"{nr} >= 1"))
        out.append(total(f"{q_u} - {3 * MILLI}", f"{nr} >= 1"))
    for p, cap in plan.histograms:
        m, nr = _bound("max_records", cap), n_r(p)
        denominator = f"CASE WHEN {nr} > {m} THEN {nr} ELSE {m} END"
        out += [total(dialect.idiv(f"{cell} * {m}", denominator)) for cell in _policy_cells(p)]
    return out


def user_summary(
    cols: ColumnMap,
    dialect: Dialect,
    source: Statement,
    start: dt.datetime,
    end: dt.datetime,
    plan: SummaryPlan,
) -> Statement:
    """One row of exact aggregates (columns: ``plan.keys()``) from one per-user pass.

    The inner ``GROUP BY user`` reduces each user to ``n`` (records) and the
    counts of their rating cells; every aggregate of the plan is then computed
    from those per-user rows with exactly the integer expressions of
    :func:`records_and_users`, :func:`mean_parts` and :func:`histogram`, with
    ``n_r = Σ_k c_k`` and ``Σr = Σ_k k·c_k``, so the results are identical.
    Many windows in one pass: :func:`dpllm.data.bounded.summaries`.
    """
    per_user = (
        text(f"SELECT {', '.join(summary_cells(cols, dialect, plan))} FROM ")
        + source
        + window_filter(cols, dialect, start, end)
        + text(f" GROUP BY {user_key(cols, dialect)}")
    )
    out = summary_aggregates(dialect, plan)
    return text(f"SELECT {', '.join(out)} FROM (") + per_user + text(") AS per_user")
