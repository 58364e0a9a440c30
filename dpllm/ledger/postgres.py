"""The shared ledger: one PostgreSQL database behind any number of dpllm replicas.

Semantics are those of :mod:`dpllm.ledger.base`, and the statements and the
charging logic are the SQLite ledger's own (:mod:`dpllm.ledger.sql`,
:mod:`dpllm.ledger._sql_ledger`); this module supplies connections,
transactions, the per-query lock and the PostgreSQL schema
(:data:`~dpllm.ledger.migrations.POSTGRES_MIGRATIONS`: ``BIGINT`` micro-units,
never floats).

**One round trip per charge.** Once a handle knows a pool's path, a new charge
is one simple-query message — ``BEGIN``, the server-side function
:data:`~dpllm.ledger.migrations.CHARGE_FUNCTION` (the general path's statements
for a new query id, in the same order, under the same locks), ``COMMIT`` and the
flush wait below — so such a charge holds the hot pool rows only while the
server runs those statements back to back, never across a round trip to a
client process that the OS may have descheduled. Whatever the function does not
settle itself goes to the general path (:mod:`dpllm.ledger._sql_ledger`), which
judges the request again and records it: a refusal or a path another replica
changed (the function undoes its writes and says so; nothing is logged as an
error), or a charge row that is not a stored release (in progress, taken over,
failed). The general path — also every handle's first charge of a pool, refunds
and approvals — still holds the rows across its round trips.

**Why no charge is lost, doubled or pushed past a cap** — what this relies on:

* Transactions run at ``READ COMMITTED`` (set explicitly on every ``BEGIN``,
  whatever the server's default). Each pool's charge is one conditional
  ``UPDATE pool_windows SET spent = spent + :micro WHERE … AND spent + :micro
  <= cap`` (then the same on ``pools.lifetime_spent``). The ``UPDATE`` takes the
  row's write lock; a concurrent charge of the same pool waits for that lock
  and then, by READ COMMITTED's rule for ``UPDATE``, re-evaluates its ``WHERE``
  against the newest committed row. Two charges can therefore never both fit
  into the last room, and the row count says whether this one did.
  SERIALIZABLE is not needed (the invariant lives in single-row conditional
  writes, not in a multi-row read), so no serialization failures are provoked;
  a deadlock or serialization failure reported anyway is rolled back whole and
  the charge retried.
* Pools are locked in one fixed order — the path innermost first, the window
  row before the lifetime row of each pool. Paths are chains in a tree, so any
  two charges meet their common ancestors in the same order: no lock cycle.
* The first statement of a charge is ``pg_advisory_xact_lock`` on a hash of
  the query id, held to the end of the transaction. The check "is this query id
  charged?" and the insert of its charge row (primary key: the query id)
  therefore run one caller at a time per query id, so a retry storm across
  replicas makes one charge and every other caller sees the committed row and
  waits for, or reads, its release (the release cache is this same table).
* Everything — pool updates, charge row, parts, audit line — is one
  transaction, and it is on disk before ``charging()`` yields. A crash or a
  lost connection before ``COMMIT`` rolls all of it back: nothing spent.
* **Early lock release.** Every charge of a pool queues on that pool's row,
  and a synchronous ``COMMIT`` would hold the row through the WAL fsync, so one
  hot pool would admit one charge per fsync. The charge transaction therefore
  commits with ``SET LOCAL synchronous_commit = off`` — its locks are released
  as soon as its commit record is in the WAL buffer — and the same round trip
  then commits a tiny transaction that holds an xid with ``synchronous_commit
  = on`` (set per session), which returns only once the WAL is flushed past
  *its* commit record, hence past the charge's. ``charging()`` yields only
  after that, so no noisy value is computed on a charge that is not on disk
  (the technique of DeWitt et al., "Implementation techniques for main memory
  database systems", SIGMOD 1984, §5; Johnson et al., "Aether", VLDB 2010).
  Another transaction may *see* the charge before it is durable; anything it
  then commits lies later in the WAL, so a crash cannot keep its effect and
  lose the charge — at worst it refused for lack of budget that a crash later
  returned (the safe side). Refunds, stores and approvals commit
  synchronously.

**When PostgreSQL is unreachable** every operation raises
:class:`~dpllm.errors.LedgerUnavailable` (HTTP 503 at the server) and spends
nothing; the broken connection is dropped and the next call reconnects. If the
connection dies *during* ``COMMIT`` the outcome is unknown to the client: if it
committed, the charge is "charged, not released" (no value left), and a retry
of the same query id waits for its lease and then takes it over — never a
second charge.
"""

from __future__ import annotations

import functools
import math
import os
import re
import secrets
import select
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from dpllm._extras import require
from dpllm.errors import ConfigError, LedgerError, LedgerUnavailable
from dpllm.ledger import _rows, sql
from dpllm.ledger._sql_base import DEFAULT_LEASE_SECONDS, DEFAULT_WAIT_SECONDS, Conn, Cursor
from dpllm.ledger._sql_ledger import _WAIT, SQLCharge, SQLLedger
from dpllm.ledger.base import PoolSpec
from dpllm.ledger.migrations import LEDGER_TABLE, POSTGRES_MIGRATIONS, pending
from dpllm.release import Cost

require("psycopg", extra="postgres", feature="a PostgreSQL ledger")

import psycopg  # noqa: E402 - after the extra check, so a missing psycopg says what to install
import psycopg.errors  # noqa: E402

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "PostgresLedger"]

DEFAULT_CONNECT_TIMEOUT = 5.0
"""Seconds to wait for PostgreSQL to accept a connection before LedgerUnavailable."""
MAX_IDLE = 32
"""Idle connections kept per ledger and process (more are closed on return)."""

_MIGRATION_LOCK = (20261, 10)  # two-int4 advisory key: a space apart from the query locks
_INHERITED: list[psycopg.Connection[Any]] = []
# SQLSTATE class 40: the server rolled the transaction back; running it again is safe.
_ROLLED_BACK = (
    psycopg.errors.TransactionRollback,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
)


_BEGIN = b"BEGIN ISOLATION LEVEL READ COMMITTED"
# Early lock release for the charge transaction (see the module docstring): commit
# without waiting for the WAL flush, so the pool rows' locks go at once, then — in the
# same round trip, before charging() yields — commit a second transaction that has an
# xid and waits for its flush. WAL is flushed in order, so that flush covers the charge.
_BEGIN_EARLY = _BEGIN + b"; SET LOCAL synchronous_commit = off"
_COMMIT_EARLY = b"COMMIT; BEGIN; SELECT pg_current_xact_id(); COMMIT"
# Storing a release and its audit line in one statement (PostgreSQL runs DML in a CTE).
_STORE_ONE_TRIP = sql.to_pyformat(
    "WITH stored AS (" + sql.STORE_RELEASE + ") "
    "INSERT INTO audit (time, event, analyst, pool, window_key, query_id, micro, detail) "
    "SELECT :now, 'release', analyst, pool, window_key, :query_id, 0, :release_name "
    "FROM stored RETURNING id"
)
# The path's arguments of the one-round-trip charge (migration 0004), quoted once per path.
_PATH_ARRAYS = (
    "CAST(%(pools)s AS TEXT[]), CAST(%(micros)s AS BIGINT[]), CAST(%(parents)s AS TEXT[]), "
    "CAST(%(measures)s AS TEXT[])"
)


@functools.lru_cache(maxsize=256)
def _pyformat(statement: str) -> str:
    return sql.to_pyformat(statement)


class _PgConn:
    """A psycopg connection speaking the ledger's ``:named`` parameter style."""

    __slots__ = ("raw",)

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, statement: str, params: Any = None, /) -> Cursor:
        if params is None:
            return self.raw.execute(statement.encode())
        return self.raw.execute(_pyformat(statement), params)


class _Retry(LedgerUnavailable):
    """A deadlock or serialization failure: rolled back whole; safe to run again."""


def _redact(url: str) -> str:
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def _close_all(conns: list[psycopg.Connection[Any]], pid: int) -> None:
    if os.getpid() != pid:
        return
    for conn in conns:
        try:
            conn.close()
        except Exception:  # noqa: BLE001,S110 - closing on the way out; nothing to report to
            pass
    conns.clear()


def _readable(fd: int) -> bool:
    """Whether ``fd`` has something to read now (``poll``: no limit on the fd number)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # Windows: no fd-number limit there
    return bool(readable)


class PostgresLedger(SQLLedger):
    """A persistent, atomic privacy-budget ledger in one PostgreSQL database.

    Several processes and hosts (``dpllm serve`` replicas) share one budget and
    one release cache through it; see the module docstring for the concurrency
    argument.

    Args:
        url: a libpq URL, ``postgresql://user@host:port/dbname``.
        lease_seconds: an in-progress charge whose owner has not stored within
            this time may be taken over by a retry.
        wait_seconds: how long a caller waits for a concurrent charge of the
            same query id before :class:`~dpllm.errors.ChargeInProgress`.
        connect_timeout: seconds to wait for the server to accept a connection.
        clock: POSIX-time source for the audit log and leases (tests inject one).

    Raises:
        ConfigError: ``url`` is not a PostgreSQL URL.
        LedgerUnavailable: the server cannot be reached (nothing was recorded).
        LedgerError: the schema is newer than this dpllm.

    Privacy: enforces every pool's per-window cap (ε or ρ per user per window)
    and lifetime cap (per user over all windows) on every charge, across all
    replicas sharing the database.
    """

    def __init__(
        self,
        url: str,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(lease_seconds=lease_seconds, wait_seconds=wait_seconds, clock=clock)
        if not isinstance(url, str) or not url.startswith(("postgresql://", "postgres://")):
            raise ConfigError(
                f"a PostgreSQL ledger needs a postgresql:// URL, got {url!r}", field="ledger.url"
            )
        if not connect_timeout > 0:
            raise ConfigError("connect_timeout must be > 0", field="ledger.connect_timeout")
        self.url = url
        self._connect_timeout = max(1, round(connect_timeout))
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._idle: list[psycopg.Connection[Any]] = []
        self._all: list[psycopg.Connection[Any]] = []
        self._finalizer = weakref.finalize(self, _close_all, self._all, self._pid)
        # (path, micro per pool) → that path's arrays, quoted, for the one-trip charge
        self._path_literals: dict[tuple[tuple[str, str | None, str, int], ...], bytes] = {}
        self._migrate()

    def __repr__(self) -> str:
        return f"PostgresLedger({_redact(self.url)!r})"

    # -- connections ---------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=self._connect_timeout,
                application_name="dpllm-ledger",
                client_encoding="UTF8",  # the one-trip charge quotes text as UTF-8
            )
        except psycopg.OperationalError as exc:
            raise LedgerUnavailable(
                f"cannot reach the PostgreSQL ledger at {_redact(self.url)}: "
                f"{str(exc).strip()}. Nothing was charged; check that the server is up"
            ) from exc
        try:
            # A charge must be on disk before it is acknowledged, whatever the server's default.
            conn.execute(b"SET synchronous_commit = on")
        except psycopg.Error as exc:
            conn.close()
            raise LedgerUnavailable(f"the PostgreSQL ledger refused the session: {exc}") from exc
        return conn

    def _checkout(self) -> psycopg.Connection[Any]:
        with self._lock:
            pid = os.getpid()
            if pid != self._pid:
                # Inherited through fork: never use *or close* the parent's sessions here
                # (closing would end them on the server); keep them referenced.
                _INHERITED.extend(self._all)
                self._pid, self._idle, self._all = pid, [], []
                self._finalizer.detach()
                self._finalizer = weakref.finalize(self, _close_all, self._all, pid)
            if self._idle:
                return self._idle.pop()
        conn = self._connect()
        with self._lock:
            self._all.append(conn)
        return conn

    def _checkin(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            if os.getpid() != self._pid or conn not in self._all:
                return
            # Only a connection back at rest is reused: one left inside a transaction
            # (an interrupt mid-statement) or mid-query is dropped, never handed out.
            healthy = (
                not conn.closed
                and not conn.broken
                and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            )
            if healthy and len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
            self._all.remove(conn)
        conn.close()

    def _checkout_live(self) -> psycopg.Connection[Any]:
        """A connection whose server has not hung up while it sat idle.

        For statements sent without a separate ``BEGIN`` round trip first: an idle
        socket with something to read holds the server's goodbye (a restart, an
        admin's kill), so it is dropped here, before anything is sent, rather than
        failing a request whose outcome would then be unknown.
        """
        for _ in range(MAX_IDLE + 1):
            raw = self._checkout()
            try:
                if not _readable(raw.fileno()):
                    return raw
            except BaseException:
                self._checkin(raw)
                raise
            raw.close()
            self._checkin(raw)
        return self._checkout()

    @contextmanager
    def _one_message(self) -> Iterator[psycopg.Connection[Any]]:
        """A live connection for one message that carries its own ``BEGIN`` and ``COMMIT``.

        On any exception the transaction is rolled back (nothing of it is kept, and its
        locks go) before the exception leaves; the connection is then returned.
        """
        raw = self._checkout_live()
        try:
            yield raw
        except BaseException:
            self._rollback(raw)
            raise
        finally:
            self._checkin(raw)

    def run_lock(self, key: str) -> AbstractContextManager[None]:
        """Hold the run lock ``key`` for a ``with`` block (see :mod:`dpllm.ledger.locks`).

        A session-level advisory lock on a connection of its own, held for the block;
        the server drops it when that session ends, however the holder exits.

        Raises:
            RunLocked: another session holds ``key``.
            LedgerUnavailable: the server cannot be reached.
        """
        from dpllm.ledger.locks import advisory_lock

        return advisory_lock(self.url, key, connect_timeout=self._connect_timeout)

    def _owner(self) -> str:
        token: str | None = getattr(self._local, "token", None)
        if token is None or getattr(self._local, "pid", None) != os.getpid():
            token = self._local.token = secrets.token_hex(6)
            self._local.pid = os.getpid()
        return _rows.owner_id(token)

    # -- transactions --------------------------------------------------------------------
    @contextmanager
    def _tx(self) -> Iterator[_PgConn]:
        """One READ COMMITTED write transaction; psycopg errors become LedgerErrors."""
        if getattr(self._local, "early_release", False):
            begin, commit = _BEGIN_EARLY, _COMMIT_EARLY
        else:
            begin, commit = _BEGIN, b"COMMIT"
        with self._session(begin, write=True, commit=commit) as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[_PgConn]:
        """A read-only snapshot (REPEATABLE READ) for several SELECTs."""
        begin = b"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        with self._session(begin, write=False, commit=b"ROLLBACK") as conn:
            yield conn

    @contextmanager
    def _session(self, begin: bytes, *, write: bool, commit: bytes) -> Iterator[_PgConn]:
        raw = self._begin(begin)
        try:
            try:
                yield _PgConn(raw)
            except psycopg.Error as exc:
                self._rollback(raw)
                raise self._translate(exc, "write" if write else "read") from exc
            except BaseException:
                self._rollback(raw)
                raise
            try:
                raw.execute(commit)
            except psycopg.Error as exc:
                self._rollback(raw)
                raise self._translate(exc, "commit" if write else "read") from exc
        finally:
            self._checkin(raw)

    def _begin(self, begin: bytes) -> psycopg.Connection[Any]:
        """A connection inside a fresh transaction.

        An idle connection may have died since its last use (a server restart, a
        dropped link); nothing has been sent on it yet, so it is dropped and the
        next one tried, and finally a new connection (which raises
        LedgerUnavailable when the server cannot be reached).
        """
        for _ in range(MAX_IDLE + 1):
            fresh = not self._idle
            raw = self._checkout()
            try:
                raw.execute(begin)
                return raw
            except psycopg.Error as exc:
                raw.close()
                self._checkin(raw)
                if fresh or not isinstance(exc, psycopg.OperationalError):
                    raise self._translate(exc, "begin") from exc
        raise LedgerUnavailable(f"cannot start a transaction on {_redact(self.url)}")

    @staticmethod
    def _rollback(raw: psycopg.Connection[Any]) -> None:
        if raw.closed or raw.broken:
            return
        try:
            raw.execute(b"ROLLBACK")
        except psycopg.Error:
            raw.close()  # unusable; _checkin drops it

    def _translate(self, exc: psycopg.Error, stage: str) -> LedgerError:
        where = _redact(self.url)
        if isinstance(exc, _ROLLED_BACK):
            return _Retry(
                f"the PostgreSQL ledger rolled a transaction back ({exc.sqlstate}: "
                f"{str(exc).strip()}); nothing was recorded. Retry"
            )
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            if stage == "commit":
                return LedgerUnavailable(
                    f"lost the PostgreSQL ledger at {where} during COMMIT: {str(exc).strip()}. "
                    "If it committed, the charge is listed as charged, not released (no value "
                    "left); a retry of the same query id takes it over, never charging twice"
                )
            return LedgerUnavailable(
                f"cannot use the PostgreSQL ledger at {where}: {str(exc).strip()}. Nothing "
                "was recorded; retry when the database is back"
            )
        return LedgerError(f"PostgreSQL ledger {where}: {str(exc).strip()}. Nothing was recorded")

    _batch_retry = (_Retry,)  # a deadlock victim's batch is charged again one by one

    def _batch(self, conn: Conn) -> AbstractContextManager[object]:
        """Pipeline mode: the statements inside go in one round trip, synced on leaving."""
        assert isinstance(conn, _PgConn)
        return conn.raw.pipeline()

    def _lock_query(self, conn: Conn, query_id: str) -> None:
        """Serialise writers of ``query_id`` until commit (a transaction advisory lock)."""
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(:query_id, 0))", {"query_id": query_id}
        )

    def _try_acquire(
        self,
        query_id: str,
        pool: str,
        window: str,
        cost: Cost,
        analyst: str,
        description: str,
        delta: int = 0,
    ) -> SQLCharge | object:
        self._local.early_release = True
        try:
            path = self._path_cache.get(pool)
            # The one-trip function (migration 0004) writes no δ: a charge with δ > 0
            # takes the general path, which checks and writes the δ caps.
            fast_ok = delta == 0 and getattr(self._local, "general_for", None) != query_id
            if path is not None and fast_ok:
                fast = self._charge_in_one_trip(query_id, path, window, cost, analyst, description)
                if fast is not None:
                    return fast
            outcome = super()._try_acquire(
                query_id, pool, window, cost, analyst, description, delta
            )
            if outcome is not _WAIT:
                self._local.general_for = None
            return outcome
        except _Retry:
            return _WAIT  # rolled back whole: the acquire loop runs it again
        finally:
            self._local.early_release = False

    def _store_release(self, query_id: str, release_json: str, name: str) -> bool:
        """The general path's store (release, then its audit line) as one statement, sent
        with its ``BEGIN`` and synchronous ``COMMIT`` in one message: one round trip.

        The commit is synchronous, so the release is on disk before this returns.
        """
        params = {
            "query_id": query_id, "release_json": release_json, "release_name": name,
            "now": self._now_text(),
        }  # fmt: skip
        try:
            with self._one_message() as raw:
                text = psycopg.ClientCursor(raw).mogrify(_STORE_ONE_TRIP, params)
                cur = raw.execute(b"".join((_BEGIN, b"; ", text.encode(), b"; COMMIT")))
                cur.nextset()  # BEGIN, then the statement's rows
                return bool(cur.fetchall())
        except psycopg.Error as exc:
            raise self._translate(exc, "commit") from exc

    def _refund(self, query_id: str, owner: str, *, failed: bool) -> None:
        """Refund as the general path does, running it again if PostgreSQL picked it as a
        deadlock victim (rolled back whole: nothing was refunded yet)."""
        for attempt in range(5):
            try:
                super()._refund(query_id, owner, failed=failed)
                return
            except _Retry:
                if attempt == 4:
                    raise
                time.sleep(0.01 * (attempt + 1))

    def _charge_statement(
        self,
        raw: psycopg.Connection[Any],
        query_id: str,
        parts: list[tuple[PoolSpec, int]],
        window: str,
        cost: Cost,
        analyst: str,
        description: str,
        owner: str,
    ) -> bytes:
        """The one-trip charge as one simple-query message, values quoted by libpq.

        A simple query carries no parameters, so the values are written into the
        text as literals: strings through libpq's ``PQescapeLiteral`` for this
        connection's encoding, integers and finite floats by Python's exact
        ``str``/``repr``. The path's arrays (the same for every charge of a pool
        and cost) are quoted once by psycopg and kept.
        """
        encoding = raw.info.encoding
        quote = psycopg.pq.Escaping(raw.pgconn).escape_literal
        key = tuple((spec.name, spec.parent, spec.measure.value, micro) for spec, micro in parts)
        arrays = self._path_literals.get(key)
        if arrays is None:
            arrays = (
                psycopg.ClientCursor(raw)
                .mogrify(
                    _PATH_ARRAYS,
                    {
                        "pools": [spec.name for spec, _ in parts],
                        "micros": [micro for _, micro in parts],
                        "parents": [spec.parent for spec, _ in parts],
                        "measures": [spec.measure.value for spec, _ in parts],
                    },
                )
                .encode(encoding)
            )
            if len(self._path_literals) >= 256:
                self._path_literals.clear()
            self._path_literals[key] = arrays
        now = self._clock()
        lease_expires = now + self._lease
        if not math.isfinite(lease_expires):
            raise LedgerError(f"the ledger's clock gave {now!r}, not a time")

        def text(value: str) -> bytes:
            return quote(value.encode(encoding))

        values = b", ".join((  # in dpllm_charge's parameter order
            text(query_id), text(window), text(cost.measure.value), str(int(cost.micro)).encode(),
            text(analyst), text(description), text(owner), repr(float(lease_expires)).encode(),
            text(_rows.iso_time(now)), text(f"{cost.measure.value}; {description}"),
        ))  # fmt: skip
        return b"".join(
            (_BEGIN_EARLY, b"; SELECT out_status, out_release FROM dpllm_charge(", values,
             b", ", arrays, b"); ", _COMMIT_EARLY)
        )  # fmt: skip

    def _charge_in_one_trip(
        self,
        query_id: str,
        path: list[PoolSpec],
        window: str,
        cost: Cost,
        analyst: str,
        description: str,
    ) -> SQLCharge | None:
        """A new charge (or a cache hit) and its COMMIT in one round trip after BEGIN.

        :data:`~dpllm.ledger.migrations.CHARGE_FUNCTION` does what the general path
        does for a new query id, server-side, and the COMMIT (early lock release,
        then the flush wait) follows it in the same message: the pool rows are
        locked only while the server runs those statements back to back, never
        across a round trip to this process. ``None`` when the request needs the
        general path: the query id has a charge row that is not a stored release
        (``exists``: the acquire loop's retries of it then skip this path), or a
        pool refused (``refused``) or changed (``stale``: the cached path is
        dropped). The function has then written nothing; the general path judges
        the request again and records the refusal.
        """
        parts = self._parts(path, cost)
        owner = self._owner()
        try:
            with self._one_message() as raw:
                statement = self._charge_statement(
                    raw, query_id, parts, window, cost, analyst, description, owner
                )
                cur = raw.execute(statement)
                cur.nextset()  # BEGIN, SET LOCAL, then the function's row
                cur.nextset()
                status, release_json = cur.fetchone() or (None, None)
        except psycopg.Error as exc:
            raise self._one_trip_error(exc, query_id, owner) from exc
        if status == "charged":
            return SQLCharge(
                self,
                query_id=query_id,
                cost=cost,
                owner=owner,
                cached=None,
                refundable=True,
                charged=True,
            )
        if status == "cached" and isinstance(release_json, str):
            cached = _rows.release_from_json(release_json)
            return SQLCharge(
                self, query_id=query_id, cost=cost, owner=None, cached=cached, refundable=False
            )
        if status == "stale":
            self._path_cache.pop(path[0].name, None)
        elif status == "exists":
            self._local.general_for = query_id  # the acquire loop's retries go there directly
        return None  # "refused", "stale", "exists": the general path judges and records

    def _one_trip_error(self, exc: psycopg.Error, query_id: str, owner: str) -> LedgerError:
        """What a failed one-trip charge means; the message is sent whole, so an error
        may come from after the charge's COMMIT (the flush transaction)."""
        if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError, *_ROLLED_BACK)):
            return self._translate(exc, "commit")
        try:
            with self._read() as conn:
                row = conn.execute(
                    "SELECT owner FROM charges WHERE query_id = :query_id", {"query_id": query_id}
                ).fetchone()
        except LedgerError:
            row = None
        if row is not None and row[0] == owner:
            return LedgerError(
                f"PostgreSQL ledger {_redact(self.url)}: the charge of query id {query_id!r} "
                f"committed but its flush was not confirmed ({str(exc).strip()}). It is listed "
                "as charged, not released (no value left); a retry of the same query id takes "
                "it over after its lease, never charging twice"
            )
        return self._translate(exc, "write")

    # -- migrations ------------------------------------------------------------------------
    def _migrate(self) -> None:
        """Apply :data:`POSTGRES_MIGRATIONS` once, even with replicas starting together."""
        with self._tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock({}, {})".format(*_MIGRATION_LOCK))
            conn.execute(LEDGER_TABLE)
            applied = [r[0] for r in conn.execute("SELECT name FROM dpllm_migrations")]
            for migration in pending(POSTGRES_MIGRATIONS, applied, where=_redact(self.url)):
                for statement in migration.statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO dpllm_migrations (name, applied_at) VALUES (:name, :now)",
                    {"name": migration.name, "now": self._now_text()},
                )

    def close(self) -> None:
        """Close this process's connections to the database (the ledger reconnects on use)."""
        with self._lock:
            conns = list(self._all) if os.getpid() == self._pid else []
            self._all.clear()
            self._idle.clear()
        for conn in conns:
            conn.close()
