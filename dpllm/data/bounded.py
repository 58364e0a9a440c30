"""Bounded SQL over many windows in one pass; topics and courses bounded in the engine.

Everything here follows the safety contract of :mod:`dpllm.data.sql` (quoted
plain identifiers, validated int bounds, placeholders for values), with one
stated addition: a topic's **match pattern** is spliced into the SQL as a
literal so that each engine compiles it once. It is built only from keywords
that :class:`~dpllm.data.topics.Topic` validated — ASCII letters and digits, or
non-ASCII words without any ASCII punctuation, quote or space — so it holds no
quote, backslash or SQL syntax (:func:`keyword_pattern` checks again).

**Windows.** A statement reads a set of disjoint half-open spans
``[start, end)`` (ISO weeks, sorted). Each record gets the index of its span
(``dpllm_w``): for contiguous spans of one length (a run of weeks) by integer
arithmetic on its epoch, ``⌊(ts − first start) / length⌋``; otherwise by a
balanced ``CASE`` on the span starts (⌈log₂ N⌉ comparisons per record), records
in no span left out; and every per-user reduction
groups by ``(window, user)`` — then by window. So N windows cost one scan, and
the aggregate of each window is *the same integer* its own one-window statement
returns: a user's records in one window never meet their records in another.

**Topics in the engine.** Per window and user, the SQL

1. keeps at most ``T`` (``max_texts``) of the user's texts — the latest by
   timestamp, ties broken by the text's bytes — chosen before any matching, so
   the work per user is bounded before anything looks at the content;
2. matches each topic against those texts: an English (ASCII) keyword as a
   whole ASCII word in any letter case (``[^A-Za-z0-9]`` or the text's edge on
   both sides), a Chinese keyword as a substring (regular expressions on DuckDB,
   PostgreSQL and Spark; ``GLOB`` and ``instr`` on SQLite);
3. keeps each matched topic once, and at most ``L`` topics: when a user has
   more, the ``L`` with the smallest keyed hash
   :func:`~dpllm.data.base.choice_key` (SHA-256 with the secret salt) — the
   same choice :func:`~dpllm.data.base.keyed_choice` makes in Python;
4. counts users per (window, topic).

**Courses in the engine.** Records per (window, user, course) over the public
course list, capped at ``M``; at most ``G`` courses per user by the same keyed
choice; summed per (window, course).

Only per-window aggregates leave the engine: no per-user row reaches Python.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence

from dpllm.data import sql
from dpllm.data.sql import ColumnMap, Dialect, Statement, SummaryPlan, text
from dpllm.errors import DataError

__all__ = [
    "Span",
    "check_spans",
    "course_totals",
    "keyword_pattern",
    "summaries",
    "topic_totals",
]

Span = tuple[dt.datetime, dt.datetime]
"""A half-open time range ``[start, end)`` (aware datetimes)."""

_ASCII_WORD = re.compile(r"[a-z0-9]+")
_FORBIDDEN = re.compile(r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]")  # ASCII non-alnum, controls

W = "dpllm_w"
U = "dpllm_u"


def check_spans(spans: Sequence[Span]) -> tuple[Span, ...]:
    """``spans`` as a tuple, if they are non-empty, sorted and pairwise disjoint.

    Raises:
        DataError: no span, an empty span, or spans out of order or overlapping.
    """
    out = tuple(spans)
    if not out:
        raise DataError("at least one window is needed")
    for start, end in out:
        if not start < end:
            raise DataError(f"a window must end after it starts, got [{start}, {end})")
    for (_, end), (start, _) in zip(out, out[1:], strict=False):
        if start < end:
            raise DataError("windows must be sorted and disjoint (each record in one window)")
    return out


def _time(dialect: Dialect, moment: dt.datetime) -> Statement:
    return Statement(dialect.time_placeholder, (dialect.time_param(moment),))


def _window_index(
    dialect: Dialect, ts: str, spans: tuple[Span, ...], lo: int, hi: int
) -> Statement:
    """A balanced ``CASE`` giving the index of the span that holds ``ts`` (or NULL)."""
    if lo == hi:
        return text(f"CASE WHEN {ts} < ") + _time(dialect, spans[lo][1]) + text(f" THEN {lo} END")
    mid = (lo + hi + 1) // 2
    return (
        text(f"CASE WHEN {ts} < ")
        + _time(dialect, spans[mid][0])
        + text(" THEN ")
        + _window_index(dialect, ts, spans, lo, mid - 1)
        + text(" ELSE ")
        + _window_index(dialect, ts, spans, mid, hi)
        + text(" END")
    )


def _uniform(spans: tuple[Span, ...]) -> int | None:
    """The common length in whole microseconds of contiguous, equal spans (else None)."""
    length = spans[0][1] - spans[0][0]
    micros = length // dt.timedelta(microseconds=1)
    if length != dt.timedelta(microseconds=micros):
        return None
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        if start != end:
            return None
    if any(e - s != length for s, e in spans):
        return None
    return micros


def _offset_index(dialect: Dialect, ts: str, start: dt.datetime, micros: int) -> Statement:
    """``⌊(ts − start) / length⌋``: the index of the span among contiguous equal spans.

    Integer arithmetic on the epoch, one expression per record (a ``CASE`` costs
    ⌈log₂ N⌉ comparisons). Only rows with ``start ≤ ts`` reach it, so both operands
    are non-negative and truncating division is floor division.
    """
    epoch = start.astimezone(dt.UTC) - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    us = epoch // dt.timedelta(microseconds=1)
    ph = dialect.placeholder
    if dialect is Dialect.DUCKDB:
        return Statement(f"CAST((epoch_us({ts}) - {ph}) // {ph} AS BIGINT)", (us, micros))
    if dialect is Dialect.SPARK:
        return Statement(
            f"CAST((unix_micros(CAST({ts} AS TIMESTAMP)) - {ph}) DIV {ph} AS BIGINT)", (us, micros)
        )
    if micros % 1_000_000 or us % 1_000_000:
        raise DataError("windows must start and end on whole seconds")
    secs, length = us // 1_000_000, micros // 1_000_000
    if dialect is Dialect.SQLITE:
        # ts is datetime(…): whole seconds, as the window filter compares them.
        return Statement(f"((CAST(strftime('%s', {ts}) AS INTEGER) - {ph}) / {ph})", (secs, length))
    return Statement(
        f"CAST(div(CAST(extract(epoch FROM {ts}) AS numeric) - {ph}, {ph}) AS BIGINT)",
        (secs, length),
    )


def windowed(
    cols: ColumnMap,
    dialect: Dialect,
    source: Statement,
    spans: Sequence[Span],
    columns: str,
    extra: Statement | None = None,
) -> Statement:
    """``SELECT <span index> AS dpllm_w, <columns> FROM source WHERE …`` over ``spans``.

    Rows of a known user inside ``[first start, last end)``; ``dpllm_w`` is NULL
    for a record in a gap between spans (callers drop those).
    """
    spans = check_spans(spans)
    ts = dialect.timestamp(cols.q("timestamp"))
    micros = _uniform(spans)
    if len(spans) == 1:
        index = text("0")
    elif micros is not None:
        index = _offset_index(dialect, ts, spans[0][0], micros)
    else:
        index = _window_index(dialect, ts, spans, 0, len(spans) - 1)
    return (
        text("SELECT ")
        + index
        + text(f" AS {W}, {columns} FROM ")
        + source
        + sql.window_filter(cols, dialect, spans[0][0], spans[-1][1])
        + (extra or text(""))
    )


# -- the shared per-user summary, per window ------------------------------------------------


def summaries(
    cols: ColumnMap,
    dialect: Dialect,
    source: Statement,
    spans: Sequence[Span],
    plan: SummaryPlan,
    *,
    raw_user: bool = False,
) -> Statement:
    """Rows ``(window index, *plan.keys())``, one per window that has records.

    ``raw_user`` groups by the user column itself instead of its text: the engine
    says when its type (integers, text) makes that the same partition of the
    records, and hashing a number is much cheaper than formatting it.

    The same per-user cells and aggregates as :func:`dpllm.data.sql.user_summary`,
    grouped by (window, user) and then by window, so each window's row equals
    that statement's row for the window alone (a window with no records has no
    row here; its aggregates are all 0 there). On DuckDB the same integers come
    from one packed aggregate per (window, user) (:mod:`dpllm.data.packed`).
    """
    if dialect is Dialect.DUCKDB:
        from dpllm.data import packed

        return packed.summaries(cols, dialect, source, spans, plan, raw_user=raw_user)
    rating = cols.q("rating")
    key = cols.q("user") if raw_user else sql.user_key(cols, dialect)
    rows = windowed(cols, dialect, source, spans, f"{key} AS {U}, {rating}")
    cells = ", ".join(sql.summary_cells(cols, dialect, plan))
    per_user = (
        text(f"SELECT {W}, {cells} FROM (")
        + rows
        + text(f") AS records WHERE {W} IS NOT NULL GROUP BY {W}, {U}")
    )
    out = ", ".join(sql.summary_aggregates(dialect, plan))
    return text(f"SELECT {W}, {out} FROM (") + per_user + text(f") AS per_user GROUP BY {W}")


# -- keyed choice in SQL ------------------------------------------------------------------


def _param_text(dialect: Dialect, value: str) -> Statement:
    return Statement(f"CAST({dialect.placeholder} AS {dialect.text_type})", (value,))


def _keyed_rank(dialect: Dialect, salt: bytes, item: str, count: str, limit: int) -> Statement:
    """``ROW_NUMBER()`` of an item among its user's items: by the keyed hash
    (:func:`~dpllm.data.base.choice_key`) when the user has more than ``limit``."""
    salted = _param_text(dialect, salt.hex()) + text(f" || ':' || {U} || ':' || {item}")
    hashed = Statement(dialect.sha256_hex(salted.sql), salted.params)
    order = text(f"CASE WHEN {count} > {int(limit)} THEN ") + hashed + text(f" ELSE {item} END")
    return (
        text(f"ROW_NUMBER() OVER (PARTITION BY {W}, {U} ORDER BY ")
        + Statement(dialect.binary(f"({order.sql})"), order.params)
        + text(")")
    )


# -- topics ---------------------------------------------------------------------------------


def _ascii_class(word: str) -> str:
    return "".join(f"[{c}{c.upper()}]" if c.isalpha() else c for c in word)


def keyword_pattern(en: Sequence[str], zh: Sequence[str]) -> str:
    """The regular expression a topic's texts are matched with (RE2, POSIX ARE, Java, Python).

    English keywords (lower-case ASCII letters and digits) match as whole ASCII
    words in any letter case; Chinese keywords as substrings.

    Raises:
        DataError: a keyword that is not of those two forms (nothing is spliced).
    """
    for k in en:
        if not _ASCII_WORD.fullmatch(k):
            raise DataError(f"English keyword {k!r} must be lower-case ASCII letters and digits")
    for k in zh:
        if not k or _FORBIDDEN.search(k) or not k.isprintable():
            raise DataError(f"keyword {k!r} must not contain ASCII punctuation or spaces")
    parts = []
    if en:
        words = "|".join(_ascii_class(k) for k in en)
        parts.append(f"(^|[^A-Za-z0-9])({words})([^A-Za-z0-9]|$)")
    parts += list(zh)
    return "|".join(parts)


def _topic_match(dialect: Dialect, x: str, en: Sequence[str], zh: Sequence[str]) -> str:
    pattern = keyword_pattern(en, zh)  # validates every keyword before any splicing
    if dialect is not Dialect.SQLITE:
        return dialect.regex(x, pattern)
    # SQLite: no regular expressions, and GLOB with character classes costs ~3 µs a
    # text. Its lower() maps ASCII only (so word edges stay where they were); a
    # fast instr() finds the candidates and GLOB checks the word's edges.
    lx = "dpllm_lx"
    padded = f"(' ' || {lx} || ' ')"
    parts = [f"(instr({lx}, '{k}') > 0 AND {padded} GLOB '*[^a-z0-9]{k}[^a-z0-9]*')" for k in en]
    parts += [f"instr({x}, '{k}') > 0" for k in zh]
    return "(" + " OR ".join(parts) + ")"


def topic_totals(
    cols: ColumnMap,
    dialect: Dialect,
    source: Statement,
    spans: Sequence[Span],
    topics: Sequence[tuple[str, Sequence[str], Sequence[str]]],
    *,
    max_texts: int,
    max_topics: int,
    salt: bytes,
) -> Statement:
    """Rows ``(window index, topic index, users)`` for topics with at least one user.

    Args:
        topics: ``(name, English keywords, Chinese keywords)`` per topic.
        max_texts: T, texts read per user per window.
        max_topics: L, topics counted per user per window.
        salt: the secret key of the choice of L topics.
    """
    t = sql._bound("max_texts", max_texts)
    lim = int(sql._bound("max_topics", max_topics))
    ts = dialect.timestamp(cols.q("timestamp"))
    x_raw = cols.q("text")
    x = "dpllm_x"
    lower = f"lower({x}) AS dpllm_lx, " if dialect is Dialect.SQLITE else ""
    rows = windowed(
        cols,
        dialect,
        source,
        spans,
        f"{sql.user_key(cols, dialect)} AS {U}, {ts} AS dpllm_t, "
        f"CAST({x_raw} AS {dialect.text_type}) AS {x}",
        text(f" AND {x_raw} IS NOT NULL"),
    )
    numbered = (
        text(
            f"SELECT {W}, {U}, {x}, {lower}ROW_NUMBER() OVER (PARTITION BY {W}, {U} "
            f"ORDER BY dpllm_t DESC, {dialect.binary(x)}) AS dpllm_n FROM ("
        )
        + rows
        + text(f") AS records WHERE {W} IS NOT NULL")
    )
    flags = ", ".join(
        f"MAX(CASE WHEN {_topic_match(dialect, x, en, zh)} THEN 1 ELSE 0 END) AS t{i}"
        for i, (_, en, zh) in enumerate(topics)
    )
    per_user = (
        text(f"SELECT {W}, {U}, {flags} FROM (")
        + numbered
        + text(f") AS numbered WHERE dpllm_n <= {t} GROUP BY {W}, {U}")
    )
    k = " + ".join(f"t{i}" for i in range(len(topics)))
    with_k = text(f"SELECT {W}, {U}, {k} AS dpllm_k, ") + text(
        ", ".join(f"t{i}" for i in range(len(topics)))
    )
    with_k = with_k + text(" FROM (") + per_user + text(") AS per_user")
    names = text("")
    for i, (name, _, _) in enumerate(topics):
        names += text(f"{' UNION ALL ' if i else ''}SELECT {i} AS dpllm_i, ")
        names += _param_text(dialect, name) + text(" AS dpllm_name")
    pick = " ".join(f"WHEN {i} THEN f.t{i}" for i in range(len(topics)))
    pairs = (
        text(f"SELECT f.{W}, f.{U}, f.dpllm_k, v.dpllm_i, v.dpllm_name FROM (")
        + with_k
        + text(") AS f CROSS JOIN (")
        + names
        + text(f") AS v WHERE (CASE v.dpllm_i {pick} END) = 1")
    )
    ranked = (
        text(f"SELECT {W}, dpllm_i, ")
        + _keyed_rank(dialect, salt, "dpllm_name", "dpllm_k", lim)
        + text(" AS dpllm_r FROM (")
        + pairs
        + text(") AS pairs")
    )
    return (
        text(f"SELECT {W}, dpllm_i, COUNT(*) FROM (")
        + ranked
        + text(f") AS ranked WHERE dpllm_r <= {lim} GROUP BY {W}, dpllm_i")
    )


# -- courses -------------------------------------------------------------------------------


def course_totals(
    cols: ColumnMap,
    dialect: Dialect,
    source: Statement,
    spans: Sequence[Span],
    courses: Sequence[str],
    *,
    max_courses: int,
    max_records: int,
    salt: bytes,
) -> Statement:
    """Rows ``(window index, course, Σ records)`` over the public ``courses``, bounded:
    at most ``max_records`` records per (user, course), at most ``max_courses``
    courses per user (keyed choice), per window."""
    g = int(sql._bound("max_courses", max_courses))
    m = sql._bound("max_records", max_records)
    c = f"CAST({cols.q('course')} AS {dialect.text_type})"
    ph = ", ".join(dialect.placeholder for _ in courses)
    rows = windowed(
        cols,
        dialect,
        source,
        spans,
        f"{sql.user_key(cols, dialect)} AS {U}, {c} AS dpllm_c",
        Statement(f" AND {c} IN ({ph})", tuple(courses)),
    )
    per = (
        text(f"SELECT {W}, {U}, dpllm_c, COUNT(*) AS dpllm_n FROM (")
        + rows
        + text(f") AS records WHERE {W} IS NOT NULL GROUP BY {W}, {U}, dpllm_c")
    )
    counted = (
        text(
            f"SELECT {W}, {U}, dpllm_c, dpllm_n, COUNT(*) OVER (PARTITION BY {W}, {U}) AS dpllm_g FROM ("
        )
        + per
        + text(") AS per")
    )
    ranked = (
        text(f"SELECT {W}, dpllm_c, CASE WHEN dpllm_n < {m} THEN dpllm_n ELSE {m} END AS dpllm_v, ")
        + _keyed_rank(dialect, salt, "dpllm_c", "dpllm_g", g)
        + text(" AS dpllm_r FROM (")
        + counted
        + text(") AS counted")
    )
    return (
        text(f"SELECT {W}, dpllm_c, SUM(dpllm_v) FROM (")
        + ranked
        + text(f") AS ranked WHERE dpllm_r <= {g} GROUP BY {W}, dpllm_c")
    )
