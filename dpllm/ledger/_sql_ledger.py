"""Charging, pools and approvals: the ledger's logic, written once for every SQL backend.

:class:`SQLLedger` runs on the transactions a backend supplies
(:class:`~dpllm.ledger._sql_base.SQLBase`). A charge is one write transaction:
the backend's per-query lock (``_lock_query``), a read of the charge row (a
stored release is returned from the cache; a live owner is waited for; a dead
one is taken over), then the charge row keyed by the query id, its parts (one
``INSERT``), an audit line, and per pool on the path one conditional upsert of
its window row and one conditional ``UPDATE … RETURNING`` of its lifetime total.
If any pool refuses, the transaction rolls back to a savepoint and commits only
the refusal's audit line (or the approval ticket when the pool queues).

The path (pool and ancestors) comes from a per-handle cache; the lifetime
``UPDATE`` returns each pool's parent and measure, so a path that another
process changed is caught inside the same transaction, rolled back and
charged again on the path read afresh. A refusal is always judged on a fresh
path. On PostgreSQL the lock and the read go in one pipelined round trip, and
all the writes in another (``_batch``): ~4 round trips per charge, not ~16; and
once the path is cached, a new charge is one round trip through a server-side
function that repeats these statements (:mod:`dpllm.ledger.postgres`).

Why nothing is lost, doubled or pushed past a cap, on any backend:

* **past a cap** — each pool's ``UPDATE … WHERE spent + :micro <= cap`` is
  evaluated under that row's write lock against the latest committed value,
  so two charges can never both fit into the last room;
* **doubled** — the charge row's primary key is the query id and its check and
  insert happen under the per-query lock, so a query id is charged at most once;
* **lost** — the charge commits (durably) before ``charging()`` yields, so no
  noisy value is computed on an uncommitted charge; a crash before commit rolls
  the whole transaction back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager

from dpllm.errors import (
    BudgetError,
    ChargeInProgress,
    ConfigError,
    LedgerError,
    QueryFailed,
)
from dpllm.ledger import _approvals, _batch, _local, _rows, sql
from dpllm.ledger._charge import SQLCharge
from dpllm.ledger._sql_base import Conn, SQLBase
from dpllm.ledger.base import (
    ChargeRecord,
    ChargeStatus,
    PendingRequest,
    PoolSpec,
    delta_text,
    iter_path,
    to_delta_units,
)
from dpllm.release import Cost, Measure, Release
from dpllm.windows import Window

__all__ = ["SQLCharge", "SQLLedger"]

_WAIT = object()


class SQLLedger(SQLBase):
    """Charging, pools and approvals of the SQL ledgers, on a backend's transactions."""

    # -- pools ---------------------------------------------------------------------------
    def ensure_pool(self, spec: PoolSpec) -> None:
        """Create the pool, or update its caps and settings if it exists.

        Raises:
            UnknownPool: the parent does not exist yet (create parents first).
            ConfigError: a cycle, a zCDP pool under a pure parent, or a change of
                measure after the pool has spent.
        """
        if not isinstance(spec, PoolSpec):
            raise ConfigError(f"ensure_pool takes a PoolSpec, got {spec!r}", field="pools")
        with self._tx() as conn:
            pools = self._pools(conn)
            old = pools.get(spec.name)
            if old is not None and old.measure is not spec.measure:
                if conn.execute(sql.POOL_HAS_SPENDING, {"name": spec.name}).fetchone():
                    raise ConfigError(
                        f"pool {spec.name!r} has charges in {old.measure}; its measure cannot "
                        "change. Create a new pool instead",
                        field="pools",
                    )
            pools[spec.name] = spec
            path = list(iter_path(pools, spec.name))  # unknown parent or cycle → error
            for child, parent in zip(path, path[1:], strict=False):
                if child.measure is Measure.ZCDP and parent.measure is Measure.PURE:
                    raise ConfigError(
                        f"pool {child.name!r} is zCDP but its parent {parent.name!r} is pure "
                        "ε-DP; a zCDP charge cannot be counted in ε. Make the parent zCDP",
                        field="pools",
                    )
            for other in pools.values():
                if other.parent == spec.name:
                    list(iter_path(pools, other.name))
                    if other.measure is Measure.ZCDP and spec.measure is Measure.PURE:
                        raise ConfigError(
                            f"pool {spec.name!r} cannot be pure: its child {other.name!r} is zCDP",
                            field="pools",
                        )
            conn.execute(
                sql.UPSERT_POOL,
                {
                    "name": spec.name,
                    "measure": spec.measure.value,
                    "window_cap": spec.window_cap,
                    "lifetime_cap": spec.lifetime_cap,
                    "parent": spec.parent,
                    "delta": spec.delta,
                    "on_exceed": spec.on_exceed,
                    "reserve": spec.reserve,
                    "delta_window_cap": spec.delta_window_cap,
                    "delta_lifetime_cap": spec.delta_lifetime_cap,
                    "now": self._now_text(),
                },
            )
            detail = (
                f"{spec.measure.value}; window_cap={spec.window_cap}; "
                f"lifetime_cap={spec.lifetime_cap}; parent={spec.parent}; on_exceed={spec.on_exceed}; "
                f"delta_window_cap={delta_text(spec.delta_window_cap)}; "
                f"delta_lifetime_cap={delta_text(spec.delta_lifetime_cap)}"
            )
            self._audit(conn, "pool", analyst="config", pool=spec.name, window="", detail=detail)
        self._path_cache.clear()

    def pools(self) -> list[PoolSpec]:
        """Every configured pool, by name."""
        with self._read() as conn:
            return sorted(self._pools(conn).values(), key=lambda p: p.name)

    # -- charging -----------------------------------------------------------------------
    @contextmanager
    def charging(
        self,
        *,
        query_id: str,
        pool: str,
        window: Window | str,
        cost: Cost,
        analyst: str = "default",
        description: str = "",
        delta: float = 0.0,
    ) -> Iterator[SQLCharge]:
        """Charge ``cost`` to ``pool`` and its ancestors for ``window``, durably.

        See :meth:`dpllm.ledger.base.Ledger.charging`. On leaving the block: an
        exception (or a normal exit) before ``charge.data_read()`` refunds; after
        it, the charge stays. An :class:`Exception` after it marks the charge
        ``failed`` (class name only) and closes the query id; a normal exit or an
        interruption (``KeyboardInterrupt``) leaves it "charged, not released",
        to be taken over by a retry.

        Raises:
            BudgetExceeded, BudgetPending, ChargeInProgress, UnknownPool,
            InvalidPrivacyParameter (bad cost or wrong measure), DataError
            (malformed window key), LedgerUnavailable.
            QueryFailed: this query id failed after its data was read; it is not
                run again (its charge stands).

        .. versionchanged:: unreleased
            A failure after the read closes the query id (:class:`~dpllm.errors.QueryFailed`).

        Privacy: each pool on the path is charged the cost in its own measure
        (pure ε converts to ρ = ε²/2 in a zCDP pool), at most once per query id,
        and ``delta`` (the δ of an approximate-DP release) against its δ caps.
        """
        window = _rows.check_request(
            query_id=query_id, window=window, cost=cost, analyst=analyst, description=description
        )
        dunits = to_delta_units(delta)
        handle = self._acquire(query_id, pool, window, cost, analyst, description, dunits)
        with self._held(handle):
            yield handle

    @contextmanager
    def _held(self, handle: SQLCharge) -> Iterator[SQLCharge]:
        """Finish ``handle`` on leaving: refund, fail or leave it, as :meth:`charging` says."""
        try:
            yield handle
        except BaseException as exc:
            handle._finish(exc)
            raise
        handle._finish(None)

    _batch_retry: tuple[type[BaseException], ...] = ()  # a batch goes one by one after these

    def charging_many(
        self, requests: Sequence[_batch.ChargeRequest]
    ) -> AbstractContextManager[list[SQLCharge]]:
        """Charge every request in one durable transaction, all or nothing.

        Yields one handle per request, in their order, as :meth:`charging` yields
        and finishes it. If any request is refused or meets anything but a new
        charge or a stored release, nothing of the batch is written and the
        requests go through :meth:`charging` one by one (:mod:`dpllm.ledger._batch`).
        Raises as :meth:`charging`; InvalidPrivacyParameter for a repeated query id.
        Privacy: as :meth:`charging` for each request; one commit for all.
        """
        return _batch.charging_many(self, requests)

    def store_many(self, pairs: Sequence[tuple[SQLCharge, Release]]) -> list[Release]:
        """Store each release under its handle's query id in one durable transaction.

        Returns the release that stands for each pair: its own, or the one another
        process stored first (then this value is dropped unseen). Raises as
        :meth:`SQLCharge.store`, before anything is written.
        """
        return _batch.store_many(self, pairs)

    def _acquire(
        self,
        query_id: str,
        pool: str,
        window: str,
        cost: Cost,
        analyst: str,
        description: str,
        delta: int = 0,
    ) -> SQLCharge:
        deadline = time.monotonic() + self._wait
        delay = 0.005
        while True:
            outcome = self._try_acquire(query_id, pool, window, cost, analyst, description, delta)
            if isinstance(outcome, SQLCharge):
                return outcome
            if isinstance(outcome, BudgetError):
                raise outcome
            if time.monotonic() >= deadline:
                raise ChargeInProgress(
                    f"query id {query_id!r} is being charged by another process and its release "
                    f"was not stored within {self._wait:g} s; retry later (no second charge was made)"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.1)

    def _try_acquire(
        self,
        query_id: str,
        pool: str,
        window: str,
        cost: Cost,
        analyst: str,
        description: str,
        delta: int = 0,
    ) -> SQLCharge | BudgetError | object:
        with self._tx() as conn:
            path = self._path_cache.get(pool)
            with self._batch(conn):  # the lock and the read in one round trip
                self._lock_query(conn, query_id)
                if path is None:
                    path = self._cached_path(conn, pool)
                found = conn.execute(sql.SELECT_CHARGE, {"query_id": query_id})
            parts = self._parts(path, cost)
            row = found.fetchone()
            if row is None:
                return self._charge_new(
                    conn, query_id, window, cost, parts, analyst, description, delta
                )
            if row[11] is not None:
                self._audit(
                    conn, "cache_hit", analyst=analyst, pool=row[1], window=row[2],
                    query_id=query_id, detail="answered from the release cache; nothing charged",
                )  # fmt: skip
                cached = _rows.release_from_json(row[11])
                return SQLCharge(
                    self, query_id=query_id, cost=cost, owner=None, cached=cached, refundable=False
                )
            record = _rows.charge_from_row(row)
            if record.status is ChargeStatus.FAILED:
                return self._refuse_failed(conn, record, analyst)
            now = self._clock()
            if not _rows.owner_gone(record.owner, record.lease_expires, now):
                return _WAIT
            if (record.pool, record.window, record.cost, record.delta) != (
                pool, window, cost, delta
            ):  # fmt: skip
                raise LedgerError(
                    f"query id {query_id!r} was charged {record.cost.describe()} "
                    f"(δ = {delta_text(record.delta)}) to pool {record.pool!r} for "
                    f"{record.window}, but this request names {cost.describe()} "
                    f"(δ = {delta_text(delta)}), {pool!r}, {window}. A query id must "
                    "fingerprint the query spec, dataset and window"
                )
            me = self._owner()
            conn.execute(
                sql.TAKE_OVER,
                {"query_id": query_id, "owner": me, "lease_expires": now + self._lease,
                 "now": _rows.iso_time(now)},
            )  # fmt: skip
            if record.ticket is not None:
                conn.execute(sql.USE_TICKET, {"ticket": record.ticket})
            # An approved charge that never ran is refundable; one left by a dead
            # or failed process is not (its data may have been read).
            fresh = record.owner is None and record.status.value == "in_progress"
            detail = "approved charge starts its run" if fresh else (
                f"took over the existing charge from {record.owner or 'a failed run'}; "
                "nothing charged again"
            )  # fmt: skip
            self._audit(
                conn, "takeover", analyst=analyst, pool=record.pool, window=record.window,
                query_id=query_id, micro=0, detail=detail,
            )  # fmt: skip
            return SQLCharge(
                self, query_id=query_id, cost=cost, owner=me, cached=None, refundable=fresh,
                delta=delta,
            )  # fmt: skip

    def _charge_new(
        self,
        conn: Conn,
        query_id: str,
        window: str,
        cost: Cost,
        parts: Sequence[tuple[PoolSpec, int]],
        analyst: str,
        description: str,
        delta: int = 0,
    ) -> SQLCharge | BudgetError:
        # The charge row, its parts and the audit line go first and the pools' conditional
        # UPDATEs last, so a pool row's write lock — contended by every charge on that
        # pool — is held for as few statements as possible before the commit. A refusal
        # rolls all of it back to the savepoint. COMMIT also ends an unreleased savepoint.
        # The pool path comes from a per-handle cache; each pool's lifetime UPDATE returns
        # its parent and measure, so a path changed by another process is caught here,
        # rolled back, read afresh and charged again. A refusal is judged on a fresh path.
        me = self._owner()
        for _ in range(8):
            with self._batch(conn):
                conn.execute("SAVEPOINT charge")
                self._insert_charge(
                    conn, query_id=query_id, window=window, cost=cost, parts=parts,
                    analyst=analyst, description=description, owner=me, ticket=None,
                    delta=delta,
                )  # fmt: skip
                applied = self._apply_path(conn, parts, window, check_path=True, delta=delta)
            refused = applied()
            if refused is None:
                return SQLCharge(
                    self,
                    query_id=query_id,
                    cost=cost,
                    owner=me,
                    cached=None,
                    refundable=True,
                    charged=True,
                    delta=delta,
                )
            conn.execute("ROLLBACK TO charge")
            conn.execute("RELEASE charge")
            fresh = self._path(conn, parts[0][0].name)
            self._path_cache[fresh[0].name] = fresh
            if refused[1] != "stale" and fresh == [spec for spec, _ in parts]:
                return self._refusal(
                    conn, refused, query_id, window, cost, parts, analyst, description, delta
                )
            parts = self._parts(fresh, cost)
        raise LedgerError(f"the path of pool {parts[0][0].name!r} keeps changing; retry")

    def _refusal(
        self,
        conn: Conn,
        refused: tuple[PoolSpec, str],
        query_id: str,
        window: str,
        cost: Cost,
        parts: Sequence[tuple[PoolSpec, int]],
        analyst: str,
        description: str,
        delta: int = 0,
    ) -> BudgetError:
        spec, kind = refused
        micro = dict((s.name, m) for s, m in parts)[spec.name]
        position = self._window_balance(conn, spec, window)
        # The statement refused without saying which: ε when ε does not fit, else δ.
        if delta and micro <= position.remaining:
            kind = "delta_" + kind
            error = _rows.exceeded(
                spec, kind=kind, window=window, requested=delta,
                remaining=position.delta_remaining,
            )  # fmt: skip
        else:
            error = _rows.exceeded(
                spec, kind=kind, window=window, requested=micro, remaining=position.remaining
            )
        leaf = parts[0][0].name
        if spec.on_exceed == "queue" and not delta:
            return _approvals.queue(
                self, conn, error, query_id=query_id, pool=leaf, window=window, cost=cost,
                analyst=analyst, description=description,
            )  # fmt: skip
        self._audit(
            conn, "refuse", analyst=analyst, pool=spec.name, window=window, query_id=query_id,
            micro=0 if kind.startswith("delta") else micro, detail=str(error),
        )  # fmt: skip
        return error

    def _refund(self, query_id: str, owner: str, *, failed: bool) -> None:
        with self._tx() as conn:
            self._lock_query(conn, query_id)
            row = conn.execute(sql.SELECT_CHARGE, {"query_id": query_id}).fetchone()
            if row is None or row[8] != owner or row[11] is not None:
                return  # taken over by a retry after our lease ran out: theirs now
            parts = conn.execute(sql.SELECT_PARTS, {"query_id": query_id}).fetchall()
            # Rows are locked in the charges' order — the path, innermost first — so a
            # refund and a charge of the same pools cannot deadlock.
            rank = {spec.name: i for i, spec in enumerate(self._path(conn, row[1]))}
            parts.sort(key=lambda part: (rank.get(part[0], len(rank)), part[0]))
            for pool, window, micro, delta in parts:
                args = {"pool": pool, "window": window, "micro": micro, "dmicro": int(delta or 0)}
                conn.execute(sql.REFUND_WINDOW, args)
                conn.execute(sql.REFUND_LIFETIME, args)
            conn.execute(sql.DELETE_PARTS, {"query_id": query_id})
            conn.execute(sql.DELETE_CHARGE, {"query_id": query_id, "owner": owner})
            reason = "an error before the data was read" if failed else "the data was never read"
            self._audit(
                conn, "refund", analyst=row[5], pool=row[1], window=row[2], query_id=query_id,
                micro=int(row[4]), detail=f"refunded: {reason}",
            )  # fmt: skip

    def _refuse_failed(self, conn: Conn, record: ChargeRecord, analyst: str) -> QueryFailed:
        error_class = record.error_class or "an exception"
        self._audit(
            conn, "refuse", analyst=analyst, pool=record.pool, window=record.window,
            query_id=record.query_id, micro=0,
            detail=f"query id failed after reading the data ({error_class}); not run again",
        )  # fmt: skip
        return QueryFailed(
            f"query id {record.query_id!r} failed after reading the data ({error_class}); its "
            f"charge of {record.cost.describe()} to pool {record.pool!r} for {record.window} "
            "stands and it is not run again, since the failure may depend on the data. Fix the "
            "cause and run a changed query or another window: those have a new query id (and "
            "a new charge)",
            query_id=record.query_id,
            error_class=error_class,
        )

    def _fail(self, query_id: str, owner: str, error_class: str) -> None:
        with self._tx() as conn:
            cur = conn.execute(
                sql.FAIL,
                {"query_id": query_id, "owner": owner, "error_class": error_class,
                 "now": self._now_text()},
            )  # fmt: skip
            if cur.rowcount == 1:
                row = conn.execute(sql.SELECT_CHARGE, {"query_id": query_id}).fetchone()
                self._audit(
                    conn, "failed", analyst=row[5], pool=row[1], window=row[2],
                    query_id=query_id, micro=0,
                    detail=f"{error_class} after reading the data: stays charged; "
                    "the query id is closed",
                )  # fmt: skip

    def _abandon(self, query_id: str, owner: str) -> None:
        with self._tx() as conn:
            cur = conn.execute(
                sql.ABANDON, {"query_id": query_id, "owner": owner, "now": self._now_text()}
            )
            if cur.rowcount == 1:
                row = conn.execute(sql.SELECT_CHARGE, {"query_id": query_id}).fetchone()
                self._audit(
                    conn, "unreleased", analyst=row[5], pool=row[1], window=row[2],
                    query_id=query_id, micro=0,
                    detail="data read but no release stored: stays charged; a retry takes it over",
                )  # fmt: skip

    def _store(self, query_id: str, release: Release) -> None:
        if not self._store_release(query_id, _rows.release_to_json(release), release.name):
            raise ChargeInProgress(
                f"another process stored the release of query id {query_id!r} first; this "
                "process's value was dropped unseen. Use ledger.get_release(query_id)"
            )

    def _store_release(self, query_id: str, release_json: str, name: str) -> bool:
        """Store the release and its audit line in one durable transaction.

        Returns False when a release is already stored under ``query_id`` (then
        nothing is written).
        """
        with self._tx() as conn:
            return self._store_in(conn, query_id, release_json, name)

    def _store_in(self, conn: Conn, query_id: str, release_json: str, name: str) -> bool:
        rows = conn.execute(
            sql.STORE_RELEASE,
            {"query_id": query_id, "release_json": release_json, "release_name": name,
             "now": self._now_text()},
        ).fetchall()  # fmt: skip
        if not rows:
            return False
        row = rows[0]
        self._audit(
            conn, "release", analyst=row[0], pool=row[1], window=row[2],
            query_id=query_id, micro=0, detail=name,
        )  # fmt: skip
        return True

    # -- local-DP reports ----------------------------------------------------------------

    def record_local(
        self, *, user: str, window: Window | str, metric: str, cost: Cost, analyst: str = "ldp"
    ) -> None:
        """Record one local-DP report's ε against ``user`` (see :mod:`dpllm.ledger._local`).

        Raises:
            DuplicateReport: ``user`` already reported ``metric`` in ``window``.
            InvalidPrivacyParameter, DataError, LedgerUnavailable.

        Privacy: the report is ε-LDP for its user; the user's local ε in a window
        is the sum over their reports (:meth:`local_spent`). The user id is kept
        only as a keyed hash.
        """
        _local.record_local(
            self, user=user, window=window, metric=metric, cost=cost, analyst=analyst
        )

    def local_spent(self, user: str, window: Window | str) -> Cost:
        """The local ε ``user`` spent in ``window`` over all metrics (pure ε)."""
        return _local.local_spent(self, user, window)

    def local_worst_case(self) -> Cost:
        """The most local ε one user has spent over all metrics and windows (pure ε)."""
        return _local.local_worst_case(self)

    # -- the approval queue -------------------------------------------------------------

    def pending(self, *, status: str | None = "pending") -> list[PendingRequest]:
        """Approval tickets with ``status`` (``None``: all), oldest first."""
        return _approvals.tickets(self, status=status)

    def approve(
        self,
        ticket: str,
        *,
        approver: str = "admin",
        from_pool: str | None = None,
        ttl: float = _approvals.DEFAULT_TICKET_TTL,
    ) -> PendingRequest:
        """Approve a queued request; see :func:`dpllm.ledger._approvals.approve`."""
        return _approvals.approve(self, ticket, approver=approver, from_pool=from_pool, ttl=ttl)

    def request_run(
        self,
        *,
        run_id: str,
        pool: str,
        window: str,
        items: Sequence[_approvals.RunItem],
        analyst: str = "default",
        description: str = "",
        reason: str = "the run does not fit",
        ttl: float = _approvals.DEFAULT_TICKET_TTL,
    ) -> BudgetError:
        """File (or find) one approval ticket for a whole run; the error to raise.

        See :func:`dpllm.ledger._approvals.request_run`. Spends nothing.
        """
        return _approvals.request_run(
            self, run_id=run_id, pool=pool, window=window, items=items, analyst=analyst,
            description=description, reason=reason, ttl=ttl,
        )  # fmt: skip

    def run_items(self, ticket: str) -> list[_approvals.RunItem]:
        """The queries of a run's ticket with their costs (empty for a one-query ticket)."""
        return _approvals.run_items(self, ticket)

    def deny(self, ticket: str, *, approver: str = "admin", reason: str = "") -> PendingRequest:
        """Deny a queued request; a retry of its query id is then refused."""
        return _approvals.deny(self, ticket, approver=approver, reason=reason)
