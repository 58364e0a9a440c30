"""Connections, transactions, migrations and reads of the SQLite ledger.

:class:`SQLiteBase` holds what every ledger operation shares: one connection per
process and thread (WAL, ``synchronous=FULL``, a busy timeout), ``BEGIN
IMMEDIATE`` transactions that turn SQLite errors into dpllm's, the append-only
migrations, the audit log, the conditional per-pool charge, and the read-only
views (balances, releases, history). :class:`dpllm.ledger.sqlite.SQLiteLedger`
adds charging and approvals on top.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpllm.errors import (
    ConfigError,
    InvalidPrivacyParameter,
    LedgerError,
    LedgerUnavailable,
    UnknownPool,
)
from dpllm.ledger import _rows, sql
from dpllm.ledger.base import AuditEvent, Balance, ChargeRecord, PoolSpec
from dpllm.ledger.migrations import MIGRATIONS
from dpllm.release import Cost, Release

__all__ = ["DEFAULT_BUSY_SECONDS", "DEFAULT_LEASE_SECONDS", "DEFAULT_WAIT_SECONDS", "SQLiteBase"]

DEFAULT_LEASE_SECONDS = 120.0
"""How long an in-progress charge is presumed alive without its process being checked."""
DEFAULT_WAIT_SECONDS = 30.0
"""How long a caller waits for a concurrent charge of the same query id to store."""
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


class SQLiteBase:
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
        self.path = Path(path)
        for name, value in (("lease_seconds", lease_seconds), ("wait_seconds", wait_seconds)):
            if not value > 0:
                raise ConfigError(f"{name} must be > 0, got {value!r}", field=f"ledger.{name}")
        self._lease = float(lease_seconds)
        self._wait = float(wait_seconds)
        self._busy = float(busy_seconds)
        self._clock = clock
        self._local = threading.local()
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
        self._migrate()

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

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction; SQLite errors become LedgerErrors."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise LedgerUnavailable(
                f"cannot write to the ledger {self.path}: {exc}. Nothing was recorded; "
                "check the file's permissions and free space"
            ) from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            self._rollback(conn)
            name = str(getattr(exc, "sqlite_errorname", ""))
            if name.startswith(_UNAVAILABLE):
                raise LedgerUnavailable(
                    f"cannot write to the ledger {self.path}: {exc}. Nothing was recorded; "
                    "check the file's permissions and free space"
                ) from exc
            raise LedgerError(f"ledger {self.path}: {exc}. Nothing was recorded") from exc
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
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
        known = [m.name for m in MIGRATIONS]
        with self._tx() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS dpllm_migrations "
                "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            applied = [
                r[0] for r in conn.execute("SELECT name FROM dpllm_migrations ORDER BY name")
            ]
            unknown = sorted(set(applied) - set(known))
            if unknown:
                raise LedgerError(
                    f"the ledger {self.path} has migrations this dpllm does not know ({unknown}); "
                    "upgrade dpllm"
                )
            for migration in MIGRATIONS:
                if migration.name in applied:
                    continue
                for statement in migration.statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO dpllm_migrations (name, applied_at) VALUES (?, ?)",
                    (migration.name, self._now_text()),
                )

    def schema_version(self) -> list[str]:
        """Names of the applied migrations, in order."""
        with self._read() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM dpllm_migrations ORDER BY name")]

    # -- helpers --------------------------------------------------------------------
    def _now_text(self) -> str:
        return _rows.iso_time(self._clock())

    def _audit(
        self,
        conn: sqlite3.Connection,
        event: str,
        *,
        analyst: str,
        pool: str,
        window: str,
        query_id: str = "",
        micro: int = 0,
        detail: str = "",
    ) -> None:
        conn.execute(
            sql.INSERT_AUDIT,
            {
                "now": self._now_text(),
                "event": event,
                "analyst": analyst,
                "pool": pool,
                "window": window,
                "query_id": query_id,
                "micro": micro,
                "detail": detail,
            },
        )

    def _pools(self, conn: sqlite3.Connection) -> dict[str, PoolSpec]:
        return {r[0]: _rows.pool_from_row(r) for r in conn.execute(sql.SELECT_POOLS)}

    def _path(self, conn: sqlite3.Connection, pool: str) -> list[PoolSpec]:
        """``pool`` and its ancestors, innermost first (one recursive query).

        ``ensure_pool`` refuses unknown parents and cycles, so the chain is whole.
        """
        path = [_rows.pool_from_row(r) for r in conn.execute(sql.SELECT_PATH, {"name": pool})]
        if not path or path[0].name != pool:
            raise _unknown(pool)
        return path

    def _window_position(self, conn: sqlite3.Connection, spec: PoolSpec, window: str) -> int:
        """What is left for ``spec`` in ``window``, counting both caps."""
        row = conn.execute(sql.SELECT_WINDOW, {"pool": spec.name, "window": window}).fetchone()
        spent, granted = (0, 0) if row is None else (int(row[0]), int(row[1]))
        life = conn.execute(sql.SELECT_POOL, {"name": spec.name}).fetchone()
        return Balance(
            spec.name, spec.measure, window, spent, spec.window_cap, int(life[8]),
            spec.lifetime_cap, granted,
        ).remaining  # fmt: skip

    def _apply_path(
        self, conn: sqlite3.Connection, parts: Sequence[tuple[PoolSpec, int]], window: str
    ) -> tuple[PoolSpec, str] | None:
        """Charge each pool on the path; the first that refuses, or ``None``.

        The caller wraps this in a savepoint and rolls back on a refusal.
        """
        for spec, micro in parts:
            args = {"pool": spec.name, "window": window, "micro": micro}
            conn.execute(sql.ENSURE_WINDOW, args)
            if conn.execute(sql.CHARGE_WINDOW, args).rowcount != 1:
                return spec, "window"
            if conn.execute(sql.CHARGE_LIFETIME, args).rowcount != 1:
                return spec, "lifetime"
        return None

    @staticmethod
    def _parts(path: Sequence[PoolSpec], cost: Cost) -> list[tuple[PoolSpec, int]]:
        """The cost in each path pool's measure (pure → zCDP converts; zCDP → pure refused)."""
        parts = []
        for spec in path:
            try:
                parts.append((spec, cost.to_measure(spec.measure).micro))
            except InvalidPrivacyParameter as exc:
                raise InvalidPrivacyParameter(f"pool {spec.name!r} is pure ε-DP: {exc}") from exc
        return parts

    def _insert_charge(
        self,
        conn: sqlite3.Connection,
        *,
        query_id: str,
        window: str,
        cost: Cost,
        parts: Sequence[tuple[PoolSpec, int]],
        analyst: str,
        description: str,
        owner: str | None,
        ticket: str | None,
    ) -> None:
        now = self._clock()
        conn.execute(
            sql.INSERT_CHARGE,
            {
                "query_id": query_id,
                "pool": parts[0][0].name,
                "window": window,
                "measure": cost.measure.value,
                "micro": cost.micro,
                "analyst": analyst,
                "description": description,
                "owner": owner,
                "lease_expires": None if owner is None else now + self._lease,
                "ticket": ticket,
                "now": _rows.iso_time(now),
            },
        )
        for spec, micro in parts:
            conn.execute(
                sql.INSERT_PART,
                {"query_id": query_id, "pool": spec.name, "window": window, "micro": micro},
            )
        self._audit(
            conn, "charge", analyst=analyst, pool=parts[0][0].name, window=window,
            query_id=query_id, micro=cost.micro, detail=f"{cost.measure.value}; {description}",
        )  # fmt: skip

    # -- reading --------------------------------------------------------------------------

    def get_release(self, query_id: str) -> Release | None:
        """The release stored under ``query_id``, or ``None``. Reading spends nothing."""
        with self._read() as conn:
            row = conn.execute(sql.SELECT_RELEASE, {"query_id": query_id}).fetchone()
        if row is None or row[0] is None:
            return None
        return _rows.release_from_json(row[0])

    def releases(self, *, name: str | None = None, window: str | None = None) -> list[Release]:
        """Stored releases, filtered by name and window (reading them spends nothing)."""
        with self._read() as conn:
            rows = conn.execute(sql.SELECT_RELEASES, {"name": name, "window": window}).fetchall()
        return [_rows.release_from_json(r[0]) for r in rows]

    def balance(self, pool: str, window: str) -> Balance:
        """``pool``'s position in ``window``.

        Raises:
            UnknownPool: no such pool. DataError: malformed window key.
        """
        _rows.check_request(query_id="-", window=window, cost=Cost.zero(), analyst="-")
        with self._read() as conn:
            row = conn.execute(sql.SELECT_POOL, {"name": pool}).fetchone()
            if row is None:
                raise _unknown(pool)
            spec = _rows.pool_from_row(row)
            win = conn.execute(sql.SELECT_WINDOW, {"pool": pool, "window": window}).fetchone()
        spent, granted = (0, 0) if win is None else (int(win[0]), int(win[1]))
        return Balance(
            pool, spec.measure, window, spent, spec.window_cap, int(row[8]), spec.lifetime_cap,
            granted,
        )  # fmt: skip

    def balances(self) -> list[Balance]:
        """Every (pool, window) that has a row, oldest window first."""
        with self._read() as conn:
            pools = {r[0]: r for r in conn.execute(sql.SELECT_POOLS)}
            rows = conn.execute(sql.SELECT_WINDOWS).fetchall()
        out = []
        for pool, window, spent, granted in rows:
            p = _rows.pool_from_row(pools[pool])
            out.append(
                Balance(pool, p.measure, window, int(spent), p.window_cap, int(pools[pool][8]),
                        p.lifetime_cap, int(granted))
            )  # fmt: skip
        return out

    def lifetime_spent(self, pool: str) -> int:
        """Everything ``pool`` has spent over all windows (micro-units of its measure)."""
        with self._read() as conn:
            row = conn.execute(sql.SELECT_POOL, {"name": pool}).fetchone()
        if row is None:
            raise _unknown(pool)
        return int(row[8])

    def unreleased(self) -> list[ChargeRecord]:
        """Charges without a stored release: "charged, not released" (or still running)."""
        with self._read() as conn:
            return [_rows.charge_from_row(r) for r in conn.execute(sql.SELECT_UNRELEASED)]

    def history(self, *, limit: int | None = None) -> list[AuditEvent]:
        """The audit log, oldest first; ``limit`` keeps the most recent events."""
        if limit is not None and (isinstance(limit, bool) or limit < 0):
            raise InvalidPrivacyParameter(f"limit must be ≥ 0, got {limit!r}")
        with self._read() as conn:
            rows = conn.execute(sql.SELECT_AUDIT, {"limit": -1 if limit is None else limit})
            events = [_rows.audit_from_row(r) for r in rows]
        return events[::-1]

    def _query(self, statement: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run a read-only statement (used by tests and audits of the ledger itself)."""
        with self._read() as conn:
            return list(conn.execute(statement, params or {}))

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local.conn = None


def _unknown(pool: str) -> UnknownPool:
    return UnknownPool(f"unknown pool {pool!r}; create it first (Ledger.ensure_pool or dpllm.toml)")
