"""The approval queue: tiered pools with human approval beyond the flexible share.

A pool with ``on_exceed="queue"`` does not refuse an over-budget request: it
records a **ticket** (nothing is spent) and raises
:class:`~dpllm.errors.BudgetPending`. An approver then either

* **approves** it — in one transaction, window budget of the request's amount
  moves from a reserve pool (``--from POOL``, or the pool's configured
  ``reserve``) to the request's pool, the request is charged on its whole path
  exactly as any charge (so a parent's cap, and every lifetime cap, still
  hold), and its charge row is created with no owner. The analyst re-runs the
  same query: the ledger sees the approved charge, lets it run once, and caches
  the release like any other; or
* **denies** it — a retry of that query id is then refused.

Every step (queue, approve, deny, the run itself) is in the audit log.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from dpllm.errors import (
    BudgetError,
    BudgetExceeded,
    BudgetPending,
    ConfigError,
    InvalidPrivacyParameter,
    UnknownTicket,
)
from dpllm.ledger import _rows, sql
from dpllm.ledger.base import PendingRequest, iter_path
from dpllm.release import Cost

if TYPE_CHECKING:
    from dpllm.ledger._sql_base import Conn, SQLBase

__all__ = ["approve", "deny", "queue", "tickets"]


def queue(
    ledger: SQLBase,
    conn: Conn,
    error: BudgetExceeded,
    *,
    query_id: str,
    pool: str,
    window: str,
    cost: Cost,
    analyst: str,
    description: str,
) -> BudgetError:
    """Record (or find) the ticket of an over-budget request; the error to raise."""
    row = conn.execute(sql.SELECT_OPEN_TICKET, {"query_id": query_id}).fetchone()
    if row is not None and row[1] == "denied":
        ledger._audit(
            conn, "refuse", analyst=analyst, pool=pool, window=window, query_id=query_id,
            micro=cost.micro, detail=f"ticket {row[0]} was denied",
        )  # fmt: skip
        return BudgetExceeded(
            f"{error}. The approval request {row[0]} for this query was denied",
            pool=error.pool, requested=error.requested, remaining=error.remaining, window=window,
        )  # fmt: skip
    if row is not None:
        ticket, detail = row[0], "still awaiting approval"
    else:
        ticket, detail = secrets.token_hex(4), "queued for approval"
        conn.execute(
            sql.INSERT_TICKET,
            {"ticket": ticket, "query_id": query_id, "pool": pool, "window": window,
             "measure": cost.measure.value, "micro": cost.micro, "analyst": analyst,
             "description": description, "now": ledger._now_text()},
        )  # fmt: skip
    ledger._audit(
        conn, "queue", analyst=analyst, pool=pool, window=window, query_id=query_id,
        micro=cost.micro, detail=f"ticket {ticket}: {detail}; {error}",
    )  # fmt: skip
    return BudgetPending(
        f"{error}. Pool {error.pool!r} queues such requests: ticket {ticket} awaits approval "
        f"(`dpllm budget approve {ticket} --from RESERVE`); once approved, run the same "
        "query again and it runs once",
        ticket=ticket,
    )


def tickets(ledger: SQLBase, *, status: str | None = "pending") -> list[PendingRequest]:
    """Tickets with ``status`` (``None``: all), oldest first."""
    if status not in (None, "pending", "approved", "denied", "used"):
        raise InvalidPrivacyParameter(
            f"unknown ticket status {status!r}; use pending, approved, denied or used"
        )
    with ledger._read() as conn:
        rows = conn.execute(sql.SELECT_TICKETS, {"status": status}).fetchall()
    return [_rows.ticket_from_row(r) for r in rows]


def _open_ticket(conn: Conn, ticket: str) -> PendingRequest:
    row = conn.execute(sql.SELECT_TICKET, {"ticket": ticket}).fetchone()
    if row is None:
        raise UnknownTicket(f"no approval ticket {ticket!r}; `dpllm budget pending` lists them")
    request = _rows.ticket_from_row(row)
    if request.status != "pending":
        raise BudgetError(f"ticket {ticket!r} is already {request.status}; nothing changed")
    return request


def approve(
    ledger: SQLBase, ticket: str, *, approver: str = "admin", from_pool: str | None = None
) -> PendingRequest:
    """Approve a queued request: move budget from a reserve and charge it, atomically.

    Args:
        ticket: the ticket id from :class:`~dpllm.errors.BudgetPending`.
        approver: who approves (recorded in the audit log).
        from_pool: the reserve pool to move window budget from; defaults to the
            request pool's ``reserve``. ``None`` and no reserve: the charge must
            fit the current caps.

    Returns:
        The ticket, now ``approved``. Its query runs once when retried.

    Raises:
        UnknownTicket, BudgetError (already decided), UnknownPool,
        ConfigError (reserve on the request's own path),
        BudgetExceeded (the reserve or a pool on the path cannot take it;
        nothing changed).

    Privacy: approval moves *window* budget between pools; it cannot lift a
    common ancestor's cap or any lifetime cap, which still bound every user.
    """
    with ledger._tx() as conn:
        request = _open_ticket(conn, ticket)
        window, now = request.window, ledger._now_text()
        ledger._lock_query(conn, request.query_id)
        if conn.execute(sql.SELECT_CHARGE, {"query_id": request.query_id}).fetchone():
            conn.execute(
                sql.DECIDE_TICKET,
                {"status": "used", "decided_by": approver, "from_pool": None, "ticket": ticket,
                 "now": now},
            )  # fmt: skip
            ledger._audit(
                conn, "approve", analyst=approver, pool=request.pool, window=window,
                query_id=request.query_id, detail=f"ticket {ticket}: already charged; no move",
            )  # fmt: skip
            return _with_status(request, "used")
        path = ledger._path(conn, request.pool)
        parts = ledger._parts(path, request.cost)
        reserve = from_pool if from_pool is not None else path[0].reserve
        detail = f"ticket {ticket}: charged within current caps"
        if reserve is not None:
            rpath = list(iter_path(ledger._pools(conn), reserve))
            rspec = rpath[0]
            if reserve in {p.name for p in path}:
                raise ConfigError(
                    f"reserve {reserve!r} is on the path of pool {request.pool!r}; moving budget "
                    "within one path changes nothing. Name a sibling or separate reserve pool"
                )
            rmicro = ledger._parts([rspec], request.cost)[0][1]
            args = {"pool": reserve, "window": window, "micro": rmicro}
            conn.execute(sql.ENSURE_WINDOW, args)
            if conn.execute(sql.GRANT_OUT, args).rowcount != 1:
                raise _rows.exceeded(
                    rspec, kind="window", window=window, requested=rmicro,
                    remaining=ledger._window_position(conn, rspec, window),
                )  # fmt: skip
            shared = {p.name for p in rpath}
            for spec, micro in parts:
                if spec.name not in shared:
                    args = {"pool": spec.name, "window": window, "micro": micro}
                    conn.execute(sql.ENSURE_WINDOW, args)
                    conn.execute(sql.GRANT_IN, args)
            detail = (
                f"ticket {ticket}: moved {request.cost.describe()} of {window} from {reserve!r}"
            )
        refused = ledger._apply_path(conn, parts, window)()
        if refused is not None:
            spec, kind = refused
            raise _rows.exceeded(
                spec, kind=kind, window=window, requested=dict((s.name, m) for s, m in parts)[spec.name],
                remaining=ledger._window_position(conn, spec, window),
            )  # fmt: skip
        ledger._insert_charge(
            conn, query_id=request.query_id, window=window, cost=request.cost, parts=parts,
            analyst=request.analyst, description=request.description, owner=None, ticket=ticket,
        )  # fmt: skip
        conn.execute(
            sql.DECIDE_TICKET,
            {"status": "approved", "decided_by": approver, "from_pool": reserve, "ticket": ticket,
             "now": now},
        )  # fmt: skip
        ledger._audit(
            conn, "approve", analyst=approver, pool=request.pool, window=window,
            query_id=request.query_id, micro=request.cost.micro, detail=detail,
        )  # fmt: skip
    return _with_status(request, "approved")


def deny(
    ledger: SQLBase, ticket: str, *, approver: str = "admin", reason: str = ""
) -> PendingRequest:
    """Deny a queued request (audited); a retry of its query id is refused."""
    with ledger._tx() as conn:
        request = _open_ticket(conn, ticket)
        conn.execute(
            sql.DECIDE_TICKET,
            {"status": "denied", "decided_by": approver, "from_pool": None, "ticket": ticket,
             "now": ledger._now_text()},
        )  # fmt: skip
        ledger._audit(
            conn, "deny", analyst=approver, pool=request.pool, window=request.window,
            query_id=request.query_id, micro=request.cost.micro,
            detail=f"ticket {ticket} denied" + (f": {reason}" if reason else ""),
        )  # fmt: skip
    return _with_status(request, "denied")


def _with_status(request: PendingRequest, status: str) -> PendingRequest:
    return PendingRequest(
        ticket=request.ticket, pool=request.pool, window=request.window,
        query_id=request.query_id, cost=request.cost, analyst=request.analyst,
        description=request.description, status=status,
    )  # fmt: skip
