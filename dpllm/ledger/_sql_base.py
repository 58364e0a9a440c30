"""What the SQL ledgers share: helpers, the conditional per-pool charge, and the reads.

:class:`SQLBase` holds everything a ledger operation needs that does not depend
on the engine: the audit log, the pool path, the conditional per-pool charge
(:mod:`dpllm.ledger.sql`), and the read-only views (balances, releases,
history). A backend supplies connections and transactions — ``_tx()`` (one
write transaction), ``_read()`` (one consistent snapshot), ``_owner()`` and
``close()`` — and, where its transactions do not already serialise writers,
``_lock_query()``. :mod:`dpllm.ledger._sqlite_base` and
:mod:`dpllm.ledger.postgres` are the two backends.

Statements are executed through the small :class:`Conn` protocol
(``execute(statement, params)`` with named ``:params``), which a
:class:`sqlite3.Connection` satisfies as it is and a psycopg connection through
a thin adapter.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from dpllm.errors import ConfigError, InvalidPrivacyParameter, UnknownPool
from dpllm.ledger import _rows, sql
from dpllm.ledger.base import AuditEvent, Balance, ChargeRecord, PoolSpec, delta_text
from dpllm.release import Cost, Measure, Release
from dpllm.windows import Window

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_WAIT_SECONDS",
    "HISTORY_ALL",
    "Conn",
    "Cursor",
    "SQLBase",
]

DEFAULT_LEASE_SECONDS = 120.0
"""How long an in-progress charge is presumed alive without its process being checked."""
DEFAULT_WAIT_SECONDS = 30.0
"""How long a caller waits for a concurrent charge of the same query id to store."""
HISTORY_ALL = 2**62
"""``LIMIT`` meaning "all rows" on every engine (PostgreSQL refuses SQLite's ``-1``)."""


class Cursor(Protocol):
    """What the ledger reads from an executed statement."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """A connection inside a transaction: runs one statement with ``:named`` parameters."""

    def execute(self, statement: str, params: Any = ..., /) -> Cursor: ...


_SELECT_KIND = "SELECT value FROM ledger_secrets WHERE name = 'ledger_kind'"


class SQLBase:
    """Engine-independent machinery of the SQL ledgers (see the module docstring)."""

    def __init__(
        self,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        for name, value in (("lease_seconds", lease_seconds), ("wait_seconds", wait_seconds)):
            if not value > 0:
                raise ConfigError(f"{name} must be > 0, got {value!r}", field=f"ledger.{name}")
        self._lease = float(lease_seconds)
        self._wait = float(wait_seconds)
        self._clock = clock
        self._local = threading.local()
        # pool name → its path, innermost first. Checked on every charge (see
        # _apply_path) and dropped by ensure_pool, so it is never trusted blindly.
        self._path_cache: dict[str, list[PoolSpec]] = {}

    # -- what a backend supplies ---------------------------------------------------------
    def _tx(self) -> AbstractContextManager[Conn]:
        """One write transaction; engine errors become LedgerErrors."""
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Conn]:
        """One read-only transaction: a consistent snapshot for several SELECTs."""
        raise NotImplementedError

    def _owner(self) -> str:
        """Who holds a charge taken by this process and thread (see :func:`_rows.owner_id`)."""
        raise NotImplementedError

    def _lock_query(self, conn: Conn, query_id: str) -> None:
        """Serialise writers of one query id for the rest of the transaction.

        A no-op where the engine's write transactions are already serial (SQLite's
        ``BEGIN IMMEDIATE``); PostgreSQL takes a transaction-scoped advisory lock.
        """

    def _batch(self, conn: Conn) -> AbstractContextManager[object]:
        """Send the statements run inside as one batch; their results are read after it.

        A no-op where statements cost no round trip (SQLite, in process);
        PostgreSQL sends them in pipeline mode and syncs once on leaving.
        """
        return contextlib.nullcontext()

    def close(self) -> None:
        raise NotImplementedError

    def schema_version(self) -> list[str]:
        """Names of the applied migrations, in order."""
        with self._read() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM dpllm_migrations ORDER BY name")]

    # -- test ledgers ----------------------------------------------------------------
    @property
    def is_test_ledger(self) -> bool:
        """True when this ledger was created as a test ledger (it may store seeded releases)."""
        cached: bool | None = getattr(self, "_is_test", None)
        if cached is None:
            with self._read() as conn:
                row = conn.execute(_SELECT_KIND, {}).fetchone()
            cached = row is not None and row[0] == "test"
            self._is_test = cached
        return cached

    def check_seeded(self, release: Release) -> None:
        """Refuse a seeded release unless this is a test ledger (see :meth:`mark_test_ledger`).

        Raises:
            InvalidPrivacyParameter: ``release.seeded`` and not a test ledger.
        """
        if getattr(release, "seeded", False) and not self.is_test_ledger:
            raise InvalidPrivacyParameter(
                f"release {release.name!r} was made with a seeded (reproducible) noise "
                "generator and this is a production ledger: it stores and serves only "
                "securely noised releases. Use the default noise, or a test ledger "
                "(mark_test_ledger() on a new ledger) for tests"
            )

    def mark_test_ledger(self) -> None:
        """Make a new, empty ledger a **test ledger**: one that stores seeded releases.

        A production ledger refuses a release made with a seeded noise generator
        (:class:`~dpllm.privacy.noise.SeededNoise`): its noise is reproducible by
        anyone with the seed, so it protects nobody. Only a ledger that holds no
        charge yet can become a test ledger, and it stays one.

        Raises:
            LedgerError: the ledger already holds charges and is not a test ledger.
        """
        from dpllm.errors import LedgerError

        with self._tx() as conn:
            row = conn.execute(_SELECT_KIND, {}).fetchone()
            if row is not None and row[0] == "test":
                self._is_test = True
                return
            if conn.execute("SELECT COUNT(*) FROM charges", {}).fetchone()[0]:
                raise LedgerError(
                    "this ledger already holds charges: only a new, empty ledger can be made "
                    "a test ledger; use a fresh file or database for tests"
                )
            conn.execute(
                "INSERT INTO ledger_secrets (name, value) VALUES ('ledger_kind', 'test') "
                "ON CONFLICT (name) DO NOTHING",
                {},
            )
        self._is_test = True

    # -- helpers --------------------------------------------------------------------
    def _now_text(self) -> str:
        return _rows.iso_time(self._clock())

    def _audit(
        self,
        conn: Conn,
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

    def _pools(self, conn: Conn) -> dict[str, PoolSpec]:
        return {r[0]: _rows.pool_from_row(r) for r in conn.execute(sql.SELECT_POOLS)}

    def _path(self, conn: Conn, pool: str) -> list[PoolSpec]:
        """``pool`` and its ancestors, innermost first (one recursive query).

        ``ensure_pool`` refuses unknown parents and cycles, so the chain is whole.
        """
        path = [_rows.pool_from_row(r) for r in conn.execute(sql.SELECT_PATH, {"name": pool})]
        if not path or path[0].name != pool:
            raise _unknown(pool)
        return path

    def _cached_path(self, conn: Conn, pool: str) -> list[PoolSpec]:
        """``pool``'s path from the per-handle cache (read once; verified by every charge)."""
        path = self._path_cache.get(pool)
        if path is None:
            path = self._path_cache[pool] = self._path(conn, pool)
        return path

    def _window_position(self, conn: Conn, spec: PoolSpec, window: str) -> int:
        """What is left for ``spec`` in ``window``, counting both caps."""
        return self._window_balance(conn, spec, window).remaining

    def _window_balance(self, conn: Conn, spec: PoolSpec, window: str) -> Balance:
        """``spec``'s balance in ``window`` (ε and δ), read inside ``conn``'s transaction."""
        row = conn.execute(sql.SELECT_WINDOW, {"pool": spec.name, "window": window}).fetchone()
        life = conn.execute(sql.SELECT_POOL, {"name": spec.name}).fetchone()
        return _balance(spec, life, window, row)

    def _apply_path(
        self,
        conn: Conn,
        parts: Sequence[tuple[PoolSpec, int]],
        window: str,
        *,
        check_path: bool = False,
        delta: int = 0,
    ) -> Callable[[], tuple[PoolSpec, str] | None]:
        """Charge each pool on the path; returns a check to call once the batch is sent.

        The check gives the first pool that refused (``"window"`` or ``"lifetime"``),
        or with ``check_path`` the first whose parent or measure is not the one in
        ``parts`` (``"stale"``: a path from the cache that another process changed),
        or ``None``. Statements after a refusal still run (they may be batched); the
        caller wraps all of it in a savepoint and rolls back on anything but ``None``.
        A refusal does not say whether ε or δ did not fit (``delta``, units of 10⁻¹⁵,
        is charged to every pool with its ε); the caller reads the balances to tell.
        """
        results = []
        for spec, micro in parts:
            args = {"pool": spec.name, "window": window, "micro": micro, "dmicro": delta}
            window_cur = conn.execute(sql.CHARGE_WINDOW_UPSERT, args)
            results.append((spec, window_cur, conn.execute(sql.CHARGE_LIFETIME, args)))

        def check() -> tuple[PoolSpec, str] | None:
            # Every RETURNING cursor is read to its end first: SQLite keeps a statement
            # "in progress" (blocking ROLLBACK TO and COMMIT) until it is.
            done = [(spec, w.rowcount, life.fetchall()) for spec, w, life in results]
            for spec, window_rows, life_rows in done:
                if window_rows != 1:
                    return spec, "window"
                if not life_rows:
                    return spec, "lifetime"
                parent, measure = life_rows[0][0], life_rows[0][1]
                if check_path and (parent, measure) != (spec.parent, spec.measure.value):
                    return spec, "stale"
            return None

        return check

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
        conn: Conn,
        *,
        query_id: str,
        window: str,
        cost: Cost,
        parts: Sequence[tuple[PoolSpec, int]],
        analyst: str,
        description: str,
        owner: str | None,
        ticket: str | None,
        delta: int = 0,
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
                "delta": delta,
            },
        )
        args: dict[str, Any] = {"query_id": query_id, "window": window, "delta": delta}
        for i, (spec, micro) in enumerate(parts):
            args[f"pool{i}"], args[f"micro{i}"] = spec.name, micro
        conn.execute(_insert_parts(len(parts)), args)
        self._audit(
            conn, "charge", analyst=analyst, pool=parts[0][0].name, window=window,
            query_id=query_id, micro=cost.micro,
            detail=f"{cost.measure.value}; "
            + (f"δ = {delta_text(delta)}; " if delta else "") + description,
        )  # fmt: skip

    # -- reading --------------------------------------------------------------------------

    def get_release(self, query_id: str) -> Release | None:
        """The release stored under ``query_id``, or ``None``. Reading spends nothing."""
        with self._read() as conn:
            row = conn.execute(sql.SELECT_RELEASE, {"query_id": query_id}).fetchone()
        if row is None or row[0] is None:
            return None
        return _rows.release_from_json(row[0])

    def releases(
        self, *, name: str | None = None, window: Window | str | None = None
    ) -> list[Release]:
        """Stored releases, filtered by name and window (reading them spends nothing)."""
        if window is not None:
            window = Window.parse(window).key
        with self._read() as conn:
            rows = conn.execute(sql.SELECT_RELEASES, {"name": name, "window": window}).fetchall()
        return [_rows.release_from_json(r[0]) for r in rows]

    def balance(self, pool: str, window: Window | str) -> Balance:
        """``pool``'s position in ``window``.

        Raises:
            UnknownPool: no such pool. DataError: malformed window key.
        """
        window = _rows.check_request(query_id="-", window=window, cost=Cost.zero(), analyst="-")
        with self._read() as conn:
            row = conn.execute(sql.SELECT_POOL, {"name": pool}).fetchone()
            if row is None:
                raise _unknown(pool)
            spec = _rows.pool_from_row(row)
            win = conn.execute(sql.SELECT_WINDOW, {"pool": pool, "window": window}).fetchone()
        return _balance(spec, row, window, win)

    def balances(self) -> list[Balance]:
        """Every (pool, window) that has a row, oldest window first."""
        with self._read() as conn:
            pools = {r[0]: r for r in conn.execute(sql.SELECT_POOLS)}
            rows = conn.execute(sql.SELECT_WINDOWS).fetchall()
        return [
            _balance(_rows.pool_from_row(pools[row[0]]), pools[row[0]], row[1], row[2:])
            for row in rows
        ]

    def lifetime_spent(self, pool: str) -> int:
        """Everything ``pool`` has spent over all windows (micro-units of its measure)."""
        with self._read() as conn:
            row = conn.execute(sql.SELECT_POOL, {"name": pool}).fetchone()
        if row is None:
            raise _unknown(pool)
        return int(row[8])

    def delta_lifetime_spent(self, pool: str) -> int:
        """The δ ``pool`` has been charged over all windows (units of 10⁻¹⁵)."""
        with self._read() as conn:
            row = conn.execute(sql.SELECT_POOL, {"name": pool}).fetchone()
        if row is None:
            raise _unknown(pool)
        return int(row[11] or 0)

    def unreleased(self) -> list[ChargeRecord]:
        """Charges without a stored release: "charged, not released" (or still running)."""
        with self._read() as conn:
            return [_rows.charge_from_row(r) for r in conn.execute(sql.SELECT_UNRELEASED)]

    def history(self, *, limit: int | None = None) -> list[AuditEvent]:
        """The audit log, oldest first; ``limit`` keeps the most recent events."""
        if limit is not None and (isinstance(limit, bool) or limit < 0):
            raise InvalidPrivacyParameter(f"limit must be ≥ 0, got {limit!r}")
        with self._read() as conn:
            rows = conn.execute(
                # A limit beyond the log's size means all of it (and must fit SQL's BIGINT).
                sql.SELECT_AUDIT,
                {"limit": HISTORY_ALL if limit is None else min(limit, HISTORY_ALL)},
            )
            events = [_rows.audit_from_row(r) for r in rows]
        return events[::-1]

    def _query(self, statement: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run a read-only statement (used by tests and audits of the ledger itself)."""
        with self._read() as conn:
            return list(conn.execute(statement, params or {}))


@functools.lru_cache(maxsize=64)
def _insert_parts(count: int) -> str:
    return sql.insert_parts(count)


def _balance(spec: PoolSpec, pool_row: Any, window: str, window_row: Any) -> Balance:
    """A :class:`Balance` from a pool row (``SELECT_POOL``) and its window's
    ``spent, granted, delta_spent`` (``None``: nothing spent in the window yet)."""
    spent, granted, dspent = (0, 0, 0) if window_row is None else (
        int(window_row[0]), int(window_row[1]), int(window_row[2] or 0)
    )  # fmt: skip
    return Balance(
        spec.name, spec.measure, window, spent, spec.window_cap, int(pool_row[8]),
        spec.lifetime_cap, granted,
        delta_spent=dspent,
        delta_window_cap=spec.delta_window_cap,
        delta_lifetime_spent=int(pool_row[11] or 0) if len(pool_row) > 11 else 0,
        delta_lifetime_cap=spec.delta_lifetime_cap,
        conversion_delta=spec.delta if spec.measure is Measure.ZCDP else 0.0,
    )  # fmt: skip


def _unknown(pool: str) -> UnknownPool:
    return UnknownPool(f"unknown pool {pool!r}; create it first (Ledger.ensure_pool or dpllm.toml)")
