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
"""

from __future__ import annotations

import glob
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from dpllm.data.sql import Dialect, Statement, quote_ident
from dpllm.errors import DataError

if TYPE_CHECKING:
    import duckdb
    import psycopg

__all__ = ["DuckDBEngine", "Engine", "PostgresEngine", "SQLiteEngine"]

Row = tuple[Any, ...]


@runtime_checkable
class Engine(Protocol):
    """A read-only data source that runs bounded aggregations."""

    @property
    def dialect(self) -> Dialect: ...

    def relation(self, table: str) -> Statement:
        """The ``FROM`` fragment for the feedback records (quoted name or file scan)."""
        ...

    def fetch(self, statement: Statement) -> list[Row]:
        """Run ``statement``; every driver error becomes a :class:`DataError`."""
        ...

    def column_names(self, table: str) -> frozenset[str]:
        """The column names of the source, read from metadata only (no rows).

        Raises:
            DataError: the source (file, table) does not exist or cannot be opened.
        """
        ...


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
        if not self.path.is_file():
            raise DataError(f"data file {str(self.path)!r} does not exist; check --data")
        try:
            uri = self.path.resolve().as_uri() + "?mode=ro"
            self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            raise DataError(f"cannot open SQLite file {str(self.path)!r}: {exc}") from exc

    def relation(self, table: str) -> Statement:
        return Statement(quote_ident(table))

    def fetch(self, statement: Statement) -> list[Row]:
        try:
            return [tuple(r) for r in self._conn.execute(statement.sql, statement.params)]
        except sqlite3.Error as exc:
            raise DataError(f"SQLite query failed on {str(self.path)!r}: {exc}") from exc

    def _describe(self, statement: Statement) -> list[str]:
        try:
            cur = self._conn.execute(statement.sql, statement.params)
        except sqlite3.Error as exc:
            raise DataError(f"cannot read {str(self.path)!r}: {exc}") from exc
        return [d[0] for d in cur.description]

    def column_names(self, table: str) -> frozenset[str]:
        return frozenset(self._describe(_probe(self.relation(table))))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_FILE_READERS = {
    ".parquet": "read_parquet",
    ".csv": "read_csv_auto",
    ".tsv": "read_csv_auto",
}


class DuckDBEngine:
    """DuckDB over a database file, or over Parquet/CSV files.

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
        import duckdb

        paths = [str(source)] if isinstance(source, str | os.PathLike) else [str(p) for p in source]
        if not paths:
            raise DataError("DuckDBEngine needs at least one file")
        suffixes = {Path(p).suffix.lower() for p in paths}
        for p in paths:
            if not (glob.glob(p) if glob.has_magic(p) else Path(p).is_file()):
                raise DataError(f"data file {p!r} does not exist; check --data")
        self._files: list[str] | None = None
        self._reader = ""
        try:
            if suffixes <= set(_FILE_READERS):
                readers = {_FILE_READERS[s] for s in suffixes}
                if len(readers) != 1:
                    raise DataError("DuckDBEngine reads Parquet or CSV files, not a mix of both")
                self._reader = readers.pop()
                self._files = paths
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

    def relation(self, table: str) -> Statement:
        if self._files is not None:
            return Statement(f"{self._reader}(?)", (self._files,))
        return Statement(quote_ident(table))

    def _run(self, statement: Statement) -> duckdb.DuckDBPyConnection:
        import duckdb

        try:
            return self._conn.execute(statement.sql, list(statement.params))
        except duckdb.Error as exc:
            raise DataError(f"DuckDB query failed: {exc}") from exc

    def fetch(self, statement: Statement) -> list[Row]:
        return [tuple(r) for r in self._run(statement).fetchall()]

    def _describe(self, statement: Statement) -> list[str]:
        cur = self._run(statement)
        return [d[0] for d in cur.description or []]

    def column_names(self, table: str) -> frozenset[str]:
        return frozenset(self._describe(_probe(self.relation(table))))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        import psycopg

        self._dsn = dsn
        try:
            self._conn: psycopg.Connection[Row] = psycopg.connect(
                dsn, autocommit=True, connect_timeout=connect_timeout
            )
            self._conn.read_only = True
            self._conn.execute("SET TIME ZONE 'UTC'")
        except psycopg.Error as exc:
            raise DataError(f"cannot connect to PostgreSQL: {exc}") from exc

    def relation(self, table: str) -> Statement:
        return Statement(quote_ident(table))

    def _run(self, statement: Statement) -> psycopg.Cursor[Row]:
        import psycopg

        try:
            return self._conn.execute(statement.sql.encode(), statement.params)
        except psycopg.Error as exc:
            raise DataError(f"PostgreSQL query failed: {exc}") from exc

    def fetch(self, statement: Statement) -> list[Row]:
        return [tuple(r) for r in self._run(statement).fetchall()]

    def _describe(self, statement: Statement) -> list[str]:
        cur = self._run(statement)
        return [d.name for d in cur.description or []]

    def column_names(self, table: str) -> frozenset[str]:
        return frozenset(self._describe(_probe(self.relation(table))))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
