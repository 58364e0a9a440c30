"""Engines: run bounded SQL where the data lives, and hand back rows to the core.

An :class:`Engine` is a read-only connection to one data source. It knows its
:class:`~dpllm.data.sql.Dialect`, the ``FROM`` fragment of its feedback table,
and how to run a :class:`~dpllm.data.sql.Statement`. The rows it returns are
exact aggregates: they are consumed by a query inside the core and leave it only
through a mechanism (see :mod:`dpllm.data.stats`).

Implementations: :class:`SQLiteEngine` (stdlib, the embedded default),
:class:`DuckDBEngine` (a DuckDB file, or Parquet/CSV files) and
:class:`PostgresEngine` (psycopg 3). Every driver error is translated into a
:class:`~dpllm.errors.DataError`.

**Errors never carry the database's words once rows may have been read.** A
driver's message can quote the records themselves (DuckDB's CSV errors print
the whole input line: ``Original Line: victim,n/a,…``), and the CLI and the
server print error messages. So :meth:`Engine.fetch` raises a generic
:class:`~dpllm.errors.DataError` — query name, engine, exception class and an
incident id — with no cause or context attached, and logs the driver's message
only at DEBUG to the ``dpllm.data.engine_errors`` logger. Opening a source and
reading its schema (no rows) keep their specific messages.
"""

from __future__ import annotations

import csv
import glob
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from dpllm._extras import require
from dpllm.data.sql import ColumnMap, Dialect, Statement, quote_ident
from dpllm.errors import DataError

if TYPE_CHECKING:
    import duckdb
    import psycopg

__all__ = ["DuckDBEngine", "Engine", "PostgresEngine", "SQLiteEngine"]

Row = tuple[Any, ...]
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

DETAIL_LOGGER = "dpllm.data.engine_errors"
"""The logger of withheld driver messages (DEBUG only). They may contain personal
data — records quoted by the database — so route it only to a trusted sink."""

_detail_log = logging.getLogger(DETAIL_LOGGER)


def withheld(engine: str, query: str, exc: BaseException) -> DataError:
    """The generic error for a driver failure once rows may have been read.

    The driver's message is logged at DEBUG to :data:`DETAIL_LOGGER` and nowhere
    else: it may quote records (personal data). The caller raises the result
    *outside* its ``except`` block, so the original exception is neither the
    cause nor the context of the one that travels (a printed traceback would
    show it).
    """
    incident = secrets.token_hex(6)
    # May contain personal data (records quoted by the database): DEBUG only.
    _detail_log.debug(
        "incident %s: %s query %r failed: %s: %s", incident, engine, query, type(exc).__name__, exc
    )
    return DataError(
        f"{engine} failed while computing {query!r} ({type(exc).__name__}, incident {incident}); "
        "the database's message is withheld because it may quote records. To see it, log "
        f"{DETAIL_LOGGER!r} at DEBUG on a trusted machine and rerun; nothing is retried"
    )


@runtime_checkable
class Engine(Protocol):
    """A read-only data source that runs bounded aggregations."""

    @property
    def dialect(self) -> Dialect: ...

    def relation(self, columns: ColumnMap) -> Statement:
        """The ``FROM`` fragment for the feedback records (quoted name or file scan).

        ``columns`` names the table and the columns the SQL reads, so an engine
        can present text-typed ratings and timestamps in a form no value can
        make fail (:class:`DuckDBEngine`).
        """
        ...

    def fetch(self, statement: Statement, *, query: str = "a statistic") -> list[Row]:
        """Run ``statement`` (for the query named ``query``).

        Raises:
            DataError: any driver error, as :func:`withheld` (no driver text).
        """
        ...

    def column_names(self, table: str) -> frozenset[str]:
        """The column names of the source, read from metadata only (no rows).

        Raises:
            DataError: the source (file, table) does not exist or cannot be opened.
        """
        ...


def _not_a_data_file(path: str | os.PathLike[str]) -> DataError:
    """The refusal of a ``--data`` path that is not a regular file: say what it is."""
    shown = repr(str(path))
    p = Path(path)
    if p.is_dir():
        return DataError(f"data file {shown} is a directory, not a data file; check --data")
    if p.exists():
        return DataError(
            f"data file {shown} is not a regular file (a device, pipe or socket), "
            "so it cannot be a database or data file; check --data"
        )
    return DataError(f"data file {shown} does not exist; check --data")


def _probe(relation: Statement) -> Statement:
    """``SELECT * … LIMIT 0``: reads the schema, no rows."""
    return Statement("SELECT * FROM ") + relation + Statement(" LIMIT 0")


class SQLiteEngine:
    """An SQLite database file, opened read-only.

    Args:
        path: the database file; it must exist (it is never created).

    Raises:
        DataError: the file is missing or is not an SQLite database.
    """

    dialect = Dialect.SQLITE

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.identity = f"sqlite:{self.path.resolve()}"
        """Which data this is (part of every query id): the resolved file path."""
        if not self.path.is_file():
            raise _not_a_data_file(self.path)
        try:
            uri = self.path.resolve().as_uri() + "?mode=ro"
            self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            raise DataError(f"cannot open SQLite file {str(self.path)!r}: {exc}") from exc
        # Text that is not valid UTF-8 (a blob cast to text) would fail the
        # fetch because of one record; decode it with replacement characters.
        self._conn.text_factory = _decode
        # SQLite has no hash: the keyed choices in SQL (dpllm.data.bounded) call
        # this one, over bytes (no text to decode, so no record can fail it).
        self._conn.create_function("dpllm_sha256", 1, _sha256_hex, deterministic=True)

    def relation(self, columns: ColumnMap) -> Statement:
        return Statement(quote_ident(columns.table))

    def fetch(self, statement: Statement, *, query: str = "a statistic") -> list[Row]:
        try:
            return [tuple(r) for r in self._conn.execute(statement.sql, statement.params)]
        except sqlite3.Error as exc:
            failure = withheld("SQLite", query, exc)
        raise failure

    def _describe(self, statement: Statement) -> list[str]:
        try:
            cur = self._conn.execute(statement.sql, statement.params)
        except sqlite3.Error as exc:
            raise DataError(f"cannot read {str(self.path)!r}: {exc}") from exc
        return [d[0] for d in cur.description]

    def column_names(self, table: str) -> frozenset[str]:
        return frozenset(self._describe(_probe(Statement(quote_ident(table)))))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _sha256_hex(raw: object) -> str | None:
    if raw is None:
        return None
    data = raw if isinstance(raw, bytes) else str(raw).encode()
    return hashlib.sha256(data).hexdigest()


_FILE_SUFFIXES = (".parquet", ".csv", ".tsv")
_DELIMITERS = {".csv": ",", ".tsv": "\t"}


def _csv_header(paths: Sequence[str], suffix: str) -> list[str]:
    """The column names of the first file's header line (metadata; no record is read)."""
    delim = _DELIMITERS[suffix]
    first = sorted(glob.glob(paths[0])) if glob.has_magic(paths[0]) else [paths[0]]
    with open(first[0], encoding="utf-8", errors="replace", newline="") as f:
        header = next(csv.reader([f.readline()], delimiter=delim), [])
    names = [
        h.strip() if _PLAIN.fullmatch(h.strip()) else f"_column{i}" for i, h in enumerate(header)
    ]
    if not names or len(set(names)) != len(names):
        raise DataError(f"the CSV file {first[0]!r} needs a header line of distinct column names")
    return names


def _csv_reader(names: Sequence[str]) -> str:
    """``read_csv(?, …)`` of a cleaned file (:mod:`dpllm.data.csvclean`): every column
    as text, no sniffing, a fixed dialect — the file is well-formed by construction."""
    columns = ", ".join(f"'{n}': 'VARCHAR'" for n in names)  # plain names only: safe
    return (
        "read_csv(?, auto_detect = false, header = true, delim = ',', "
        f"quote = '\"', escape = '\"', columns = {{{columns}}}, ignore_errors = true)"
    )


# How a text column is read when a query needs a number or a time from it: a
# value that does not parse becomes NULL (ignored like any NULL), never an error.
_TEXT_CASTS = {"rating": "DOUBLE", "timestamp": "TIMESTAMPTZ"}
_KEY_TYPES = frozenset(
    {"VARCHAR", "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "HUGEINT", "UBIGINT", "UINTEGER"}
    | {"USMALLINT", "UTINYINT", "UHUGEINT", "UUID"}
)


class DuckDBEngine:
    """DuckDB over a database file, or over Parquet/CSV files.

    CSV/TSV files are first copied into a well-formed file by
    :func:`~dpllm.data.csvclean.clean_csv` (again whenever a source file
    changes): quoted line breaks work, and a malformed record is dropped on its
    own line, never hiding the rows after it. They are read with a fixed
    dialect, every column as text. A rating or timestamp column of a text type (every
    CSV column; a ``VARCHAR`` column of a table or Parquet file) is read through
    ``TRY_CAST`` (``DOUBLE``, ``TIMESTAMPTZ``): a value that does not parse is
    NULL, so it is ignored like a NULL rating (or falls in no window) instead of
    failing the query. Typed columns are read as they are.

    Args:
        source: a ``.duckdb``/``.db`` file (the table comes from the column
            mapping), or one or more Parquet/CSV files or glob patterns, read as
            one table.
        threads: DuckDB worker threads (``None``: DuckDB's default).

    Raises:
        DataError: a file is missing, the kinds of files are mixed, or DuckDB
            cannot open them.
    """

    dialect = Dialect.DUCKDB

    def __init__(
        self,
        source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        threads: int | None = None,
    ) -> None:
        require("duckdb", extra="duckdb", feature="DuckDB data sources (.duckdb, Parquet, CSV)")
        import duckdb

        paths = [str(source)] if isinstance(source, str | os.PathLike) else [str(p) for p in source]
        if not paths:
            raise DataError("DuckDBEngine needs at least one file")
        suffixes = {Path(p).suffix.lower() for p in paths}
        for p in paths:
            if not (glob.glob(p) if glob.has_magic(p) else Path(p).is_file()):
                raise _not_a_data_file(p)
        self.identity = "duckdb:" + json.dumps(sorted(str(Path(p).resolve()) for p in paths))
        """Which data this is (part of every query id): the resolved paths or patterns."""
        self._files: list[str] | None = None
        self._reader = ""
        self._csv_names: list[str] = []
        self._csv_sources: tuple[list[str], str] | None = None
        self._cleanup: weakref.finalize[Any, Any] | None = None
        self._signature: tuple[tuple[str, int, int], ...] | None = None
        self._types: dict[str, dict[str, str]] = {}
        try:
            if suffixes <= set(_FILE_SUFFIXES):
                if len(suffixes) != 1:
                    raise DataError(
                        "DuckDBEngine reads files of one kind (Parquet, CSV or TSV), not a mix"
                    )
                (suffix,) = suffixes
                if suffix == ".parquet":
                    self._reader = "read_parquet(?)"
                    self._files = paths
                else:
                    self._csv_names = _csv_header(paths, suffix)
                    self._csv_sources = (paths, _DELIMITERS[suffix])
                    clean_dir = tempfile.mkdtemp(prefix="dpllm-csv-")
                    # Removed on close(), or when the engine is collected.
                    self._cleanup = weakref.finalize(self, shutil.rmtree, clean_dir, True)
                    self._reader = _csv_reader(self._csv_names)
                    self._files = [os.path.join(clean_dir, "records.csv")]
                self._conn = duckdb.connect(":memory:")
            elif len(paths) == 1:
                self._conn = duckdb.connect(paths[0], read_only=True)
            else:
                raise DataError(f"DuckDBEngine cannot read {paths!r}: give one .duckdb file")
            if threads is not None:
                self._conn.execute(f"SET threads = {int(threads)}")
            self._conn.execute("SET TimeZone = 'UTC'")
        except duckdb.Error as exc:
            raise DataError(f"DuckDB cannot open {paths!r}: {exc}") from exc

    @property
    def _csv(self) -> bool:
        return self._reader.startswith("read_csv")

    def _raw(self, table: str) -> Statement:
        if self._csv_sources is not None:
            self._refresh_csv()
        if self._files is not None:
            return Statement(self._reader, (self._files,))
        return Statement(quote_ident(table))

    def _refresh_csv(self) -> None:
        """(Re)write the cleaned copy when a source file changed (size, mtime)."""
        from dpllm.data.csvclean import clean_csv

        assert self._csv_sources is not None and self._files is not None
        patterns, delim = self._csv_sources
        files = sorted(
            {f for p in patterns for f in (sorted(glob.glob(p)) if glob.has_magic(p) else [p])}
        )
        try:
            signature = tuple((f, os.stat(f).st_mtime_ns, os.stat(f).st_size) for f in files)
        except OSError as exc:
            raise DataError(f"cannot read the CSV files {patterns!r}: {exc}") from exc
        if signature == self._signature:
            return
        target = self._files[0]
        tmp = target + ".tmp"
        with open(tmp, "w", encoding="utf-8", newline="") as out:
            csv.writer(out, lineterminator="\n").writerow(self._csv_names)
            for f in files:
                clean_csv(f, out, delimiter=delim, width=len(self._csv_names), header=True)
        os.replace(tmp, target)
        self._signature = signature

    def relation(self, columns: ColumnMap) -> Statement:
        raw = self._raw(columns.table)
        types = self._column_types(columns.table)
        casts = []
        for role, target in _TEXT_CASTS.items():
            name = getattr(columns, role)
            if name is not None and types.get(name, "") in ("VARCHAR", "BLOB"):
                q = quote_ident(name)
                casts.append(f"TRY_CAST({q} AS {target}) AS {q}")
        if not casts:
            return raw
        return (
            Statement(f"(SELECT * REPLACE ({', '.join(casts)}) FROM ")
            + raw
            + Statement(") AS records")
        )

    def user_column_is_key(self, columns: ColumnMap) -> bool:
        """Whether grouping by the user column partitions the records as its text
        (:func:`~dpllm.data.sql.user_key`) does: integer and text types (not floats,
        whose ``0.0`` and ``-0.0`` are one value and two texts)."""
        kind = self._column_types(columns.table).get(columns.user, "")
        return kind in _KEY_TYPES

    def _column_types(self, table: str) -> dict[str, str]:
        """``{column: DuckDB type}`` of the source, from its schema (cached)."""
        if table not in self._types:
            cur = self._execute(Statement("DESCRIBE SELECT * FROM ") + self._raw(table), table)
            self._types[table] = {str(r[0]): str(r[1]) for r in cur.fetchall()}
        return self._types[table]

    def _execute(self, statement: Statement, table: str) -> duckdb.DuckDBPyConnection:
        """Run a schema statement: metadata only, so its error may stay specific —
        except on CSV, whose schema is sniffed from sample rows."""
        import duckdb

        try:
            return self._conn.execute(statement.sql, list(statement.params))
        except duckdb.Error as exc:
            if self._csv:
                failure = withheld("DuckDB", f"the schema of {table!r}", exc)
            else:
                failure = DataError(f"DuckDB cannot read {table!r}: {exc}")
        raise failure

    def fetch(self, statement: Statement, *, query: str = "a statistic") -> list[Row]:
        import duckdb

        try:
            cur = self._conn.execute(statement.sql, list(statement.params))
            return [tuple(r) for r in cur.fetchall()]
        except duckdb.Error as exc:
            failure = withheld("DuckDB", query, exc)
        raise failure

    def column_names(self, table: str) -> frozenset[str]:
        return frozenset(self._column_types(table))

    def close(self) -> None:
        self._conn.close()
        if self._cleanup is not None:
            self._cleanup()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _dsn_identity(dsn: str) -> str:
    """A DSN without its secrets: ``postgres:`` + host, port, database, user (sorted JSON)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - a malformed DSN fails at connect; identity stays stable
        parts = {"dsn": hashlib.sha256(dsn.encode()).hexdigest()}
    kept = {
        k: str(parts[k])
        for k in ("host", "hostaddr", "port", "dbname", "user", "dsn")
        if k in parts
    }
    return "postgres:" + json.dumps(kept, sort_keys=True)


class PostgresEngine:
    """A PostgreSQL database through psycopg 3, in read-only autocommit mode.

    Args:
        dsn: a libpq connection string (``postgresql://user@host:5432/db``).
        connect_timeout: seconds to wait for the server.

    Raises:
        DataError: the server cannot be reached or refuses the connection.
    """

    dialect = Dialect.POSTGRES

    def __init__(self, dsn: str, *, connect_timeout: int = 5) -> None:
        require("psycopg", extra="postgres", feature="a PostgreSQL data source")
        import psycopg

        self._dsn = dsn
        self.identity = _dsn_identity(dsn)
        """Which data this is (part of every query id): host, port, database, user."""
        try:
            self._conn: psycopg.Connection[Row] = psycopg.connect(
                dsn, autocommit=True, connect_timeout=connect_timeout
            )
            self._conn.read_only = True
            self._conn.execute("SET TIME ZONE 'UTC'")
        except psycopg.Error as exc:
            raise DataError(f"cannot connect to PostgreSQL: {exc}") from exc

    def relation(self, columns: ColumnMap) -> Statement:
        return Statement(quote_ident(columns.table))

    def fetch(self, statement: Statement, *, query: str = "a statistic") -> list[Row]:
        import psycopg

        try:
            cur = self._conn.execute(statement.sql.encode(), statement.params)
            return [tuple(r) for r in cur.fetchall()]
        except psycopg.Error as exc:
            failure = withheld("PostgreSQL", query, exc)
        raise failure

    def column_names(self, table: str) -> frozenset[str]:
        import psycopg

        probe = _probe(Statement(quote_ident(table)))
        try:
            cur = self._conn.execute(probe.sql.encode(), probe.params)  # no rows
        except psycopg.Error as exc:
            failure = DataError(f"PostgreSQL cannot read {table!r}: {exc}")
        else:
            return frozenset(d.name for d in cur.description or [])
        raise failure

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
