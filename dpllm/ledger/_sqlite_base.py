"""Connections, transactions and migrations of the SQLite ledger.

:class:`SQLiteBase` supplies what :class:`~dpllm.ledger._sql_base.SQLBase`
leaves to a backend: one connection per process and thread (WAL,
``synchronous=FULL``, a busy timeout), ``BEGIN IMMEDIATE`` transactions that
turn SQLite errors into dpllm's, and the append-only migrations.
``BEGIN IMMEDIATE`` takes the database's single write lock before a charge
reads anything, so writers never interleave and no per-query lock is needed.
:class:`dpllm.ledger.sqlite.SQLiteLedger` adds charging and approvals on top.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from dpllm.errors import LedgerError, LedgerUnavailable
from dpllm.ledger import _rows
from dpllm.ledger._sql_base import DEFAULT_LEASE_SECONDS, DEFAULT_WAIT_SECONDS, SQLBase
from dpllm.ledger.migrations import LEDGER_TABLE, MIGRATIONS, pending

__all__ = ["DEFAULT_BUSY_SECONDS", "DEFAULT_LEASE_SECONDS", "DEFAULT_WAIT_SECONDS", "SQLiteBase"]

DEFAULT_BUSY_SECONDS = 30.0
"""SQLite busy timeout: how long a writer queues for the write lock."""

# SQLite result codes meaning "the storage cannot be used right now" (not a bug).
_UNAVAILABLE = (
    "SQLITE_READONLY",
    "SQLITE_CANTOPEN",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_IOERR",
    "SQLITE_FULL",
    "SQLITE_PERM",
)

_INHERITED: list[sqlite3.Connection] = []


class SQLiteBase(SQLBase):
    """Storage machinery of :class:`~dpllm.ledger.sqlite.SQLiteLedger` (see there)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
        busy_seconds: float = DEFAULT_BUSY_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(lease_seconds=lease_seconds, wait_seconds=wait_seconds, clock=clock)
        self.path = Path(path)
        self._busy = float(busy_seconds)
        if not self.path.exists():
            if not create:
                raise LedgerUnavailable(
                    f"no ledger at {self.path}: nothing has been charged yet, or pass --ledger PATH"
                )
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LedgerUnavailable(
                    f"cannot create the ledger's directory {self.path.parent}: {exc}"
                ) from exc
        else:
            self._refuse_foreign(create=create)
        self._migrate()

    def _refuse_foreign(self, *, create: bool) -> None:
        """Never adopt a file that is not a dpllm ledger (e.g. the feedback database).

        Opening migrates, and connecting switches the file to WAL mode: both would
        change someone else's database. So an existing file is read first,
        read-only: an SQLite database with tables but no ``dpllm_migrations`` is
        refused, and so (when ``create`` is false) is an empty file. A file that is
        not SQLite at all is left to the connection, which says so.
        """
        try:
            empty = self.path.is_file() and self.path.stat().st_size == 0
        except OSError:
            return  # the connection reports what is wrong with the path
        if empty and not create:
            raise LedgerUnavailable(
                f"no ledger at {self.path}: the file is empty; nothing has been charged yet, "
                "or pass --ledger PATH"
            )
        if empty or not self.path.is_file():
            return
        try:
            probe = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error:
            return
        try:
            tables = {
                str(r[0])
                for r in probe.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.Error:
            return
        finally:
            probe.close()
        if tables and "dpllm_migrations" not in tables:
            shown = ", ".join(sorted(tables)[:5])
            raise LedgerUnavailable(
                f"{self.path} is an SQLite database but not a dpllm ledger (it holds {shown}); "
                "nothing was written to it. Point the ledger ([ledger] url, --ledger) at a "
                "file of its own"
            )

    def __repr__(self) -> str:
        return f"SQLiteLedger({str(self.path)!r})"

    # -- connections and transactions ---------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        pid = os.getpid()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != pid:
            if conn is not None:
                # Inherited through fork: never use *or close* it here (closing could
                # touch the parent's WAL); keep it referenced so it is not collected.
                _INHERITED.append(conn)
            conn = self._connect()
            self._local.conn, self._local.pid = conn, pid
            self._local.token = secrets.token_hex(6)
        return conn

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                str(self.path), timeout=self._busy, isolation_level=None, check_same_thread=True
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise LedgerUnavailable(
                f"cannot open the ledger {self.path}: {exc}. Check the path and its permissions"
            ) from exc
        if str(mode).lower() != "wal":
            conn.close()
            raise LedgerUnavailable(
                f"the ledger {self.path} cannot use WAL mode (got {mode!r}); "
                "put it on a local file system"
            )
        return conn

    def _owner(self) -> str:
        self._conn()
        return _rows.owner_id(self._local.token)

    def _cannot_write(self, exc: sqlite3.Error, verb: str = "write to") -> LedgerUnavailable:
        """The refusal of a write: a lock held by another process, or unusable storage."""
        name = str(getattr(exc, "sqlite_errorname", ""))
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return LedgerUnavailable(
                f"cannot {verb} the ledger {self.path}: another process holds its write lock "
                f"(waited {self._busy:g} s). Nothing was recorded; retry when that process "
                "has finished"
            )
        return LedgerUnavailable(
            f"cannot {verb} the ledger {self.path}: {exc}. Nothing was recorded; "
            "check the file's permissions and free space"
        )

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction; SQLite errors become LedgerErrors."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._cannot_write(exc) from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            self._rollback(conn)
            name = str(getattr(exc, "sqlite_errorname", ""))
            if name.startswith(_UNAVAILABLE):
                raise self._cannot_write(exc) from exc
            raise LedgerError(f"ledger {self.path}: {exc}. Nothing was recorded") from exc
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            if str(getattr(exc, "sqlite_errorname", "")).startswith(
                ("SQLITE_BUSY", "SQLITE_LOCKED")
            ):
                raise self._cannot_write(exc, "commit to") from exc
            raise LedgerUnavailable(
                f"cannot commit to the ledger {self.path}: {exc}. Nothing was recorded"
            ) from exc

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: one consistent snapshot for several SELECTs."""
        conn = self._conn()
        try:
            conn.execute("BEGIN")
            yield conn
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot read the ledger {self.path}: {exc}") from exc
        finally:
            self._rollback(conn)

    def _migrate(self) -> None:
        """Apply :data:`MIGRATIONS` in order, each with its name, in one transaction.

        Foreign keys are off while they run (a step may rebuild a table, which
        SQLite's own procedure requires) and checked before the commit.
        """
        conn = self._conn()
        conn.execute("PRAGMA foreign_keys = OFF")  # a no-op inside a transaction: set before
        try:
            with self._tx() as conn:
                conn.execute(LEDGER_TABLE)
                applied = [r[0] for r in conn.execute("SELECT name FROM dpllm_migrations")]
                for migration in pending(MIGRATIONS, applied, where=str(self.path)):
                    for statement in migration.statements:
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO dpllm_migrations (name, applied_at) VALUES (?, ?)",
                        (migration.name, self._now_text()),
                    )
                broken = conn.execute("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise LedgerError(
                        f"the ledger {self.path} has rows whose references are broken "
                        f"({len(broken)}, e.g. {tuple(broken[0])}); the file is damaged"
                    )
        finally:
            conn.execute("PRAGMA foreign_keys = ON")

    def run_lock(self, key: str) -> AbstractContextManager[None]:
        """Hold the run lock ``key`` for a ``with`` block (see :mod:`dpllm.ledger.locks`).

        An exclusive ``flock`` on ``<ledger>.locks/<key>.lock``: the kernel drops it
        when the holder exits, however it exits.

        Raises:
            RunLocked: another process (or another lock in this one) holds ``key``.
        """
        from dpllm.ledger.locks import file_lock

        return file_lock(Path(str(self.path) + ".locks"), key)

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local.conn = None
