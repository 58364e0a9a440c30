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

**A ticket for a whole run.** A job that releases several queries together (the
weekly job's plan) must not be approved query by query: approving one ticket could
never make the whole plan fit. :func:`request_run` files **one** ticket for the run
(keyed by a run id that fingerprints its query ids), listing each query and its cost
(``ticket_items``). Approving it moves the run's total from the reserve and creates
one approved charge per query, with no owner; the run then takes each over (no second
charge) — so exactly that plan runs, once. A changed plan has other query ids, hence
another run id and another ticket. A pending ticket older than ``ttl`` **expires**:
it cannot be approved any more, and the next run files a fresh one (re-filing); a
denied run's next request is refused.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Sequence
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
from dpllm.ledger.base import PendingRequest, RunItem, iter_path
from dpllm.release import Cost, Measure

if TYPE_CHECKING:
    from dpllm.ledger._sql_base import Conn, SQLBase

__all__ = [
    "DEFAULT_TICKET_TTL",
    "EXPIRED_BY",
    "RunItem",
    "approve",
    "deny",
    "queue",
    "request_run",
    "run_items",
    "tickets",
]

DEFAULT_TICKET_TTL = 7 * 24 * 3600.0
"""Seconds a run's ticket waits for a decision before it expires (one ISO week)."""

EXPIRED_BY = "(expired)"
"""``decided_by`` of a ticket closed by expiry (its status reads ``denied``)."""


_SELECT_RUN_TICKET = """
SELECT ticket, status, decided_by, created_at FROM tickets
WHERE query_id = :query_id ORDER BY created_at DESC, ticket DESC LIMIT 1
"""
_INSERT_ITEM = """
INSERT INTO ticket_items (ticket, query_id, measure, micro, description)
VALUES (:ticket, :query_id, :measure, :micro, :description)
"""
_SELECT_ITEMS = """
SELECT query_id, measure, micro, description FROM ticket_items
WHERE ticket = :ticket ORDER BY query_id
"""
_SELECT_CREATED = "SELECT created_at FROM tickets WHERE ticket = :ticket"


def _age(ledger: SQLBase, created_at: str) -> float:
    return ledger._clock() - dt.datetime.fromisoformat(created_at).timestamp()


def _expire(ledger: SQLBase, conn: Conn, ticket: str, *, pool: str, window: str) -> None:
    conn.execute(
        sql.DECIDE_TICKET,
        {"status": "denied", "decided_by": EXPIRED_BY, "from_pool": None, "ticket": ticket,
         "now": ledger._now_text()},
    )  # fmt: skip
    ledger._audit(
        conn, "deny", analyst=EXPIRED_BY, pool=pool, window=window, query_id="",
        detail=f"ticket {ticket} expired undecided",
    )  # fmt: skip


def request_run(
    ledger: SQLBase,
    *,
    run_id: str,
    pool: str,
    window: str,
    items: Sequence[RunItem],
    analyst: str,
    description: str,
    reason: str,
    ttl: float = DEFAULT_TICKET_TTL,
) -> BudgetError:
    """File (or find) the one approval ticket of a run; returns the error to raise.

    Args:
        run_id: fingerprint of the run (its query ids); the ticket's key.
        pool: the pool the run charges (its path decides the caps).
        window: the run's window.
        items: each query of the run with its cost (all in one measure).
        description: what the run is (shown to the approver with each item).
        reason: why it does not fit (the budget check's message).
        ttl: seconds an undecided ticket stays approvable.

    Returns:
        :class:`~dpllm.errors.BudgetPending` (a new or still pending ticket) or
        :class:`~dpllm.errors.BudgetExceeded` (this run's ticket was denied).

    Privacy: spends nothing; the approval spends, on the run's whole path.
    """
    if not items:
        raise InvalidPrivacyParameter("a run's ticket needs at least one query")
    measure = items[0].cost.measure
    if any(i.cost.measure is not measure for i in items):
        raise InvalidPrivacyParameter("every query of a run's ticket must use one measure")
    total = Cost(measure, sum(i.cost.micro for i in items))
    listing = "; ".join(f"{i.description}: {i.cost.describe()}" for i in items)
    with ledger._tx() as conn:
        ledger._lock_query(conn, run_id)
        row = conn.execute(_SELECT_RUN_TICKET, {"query_id": run_id}).fetchone()
        if row is not None and row[1] == "pending" and _age(ledger, row[3]) > ttl:
            _expire(ledger, conn, row[0], pool=pool, window=window)
            row = (row[0], "denied", EXPIRED_BY, row[3])
        if row is not None and row[1] == "denied" and row[2] != EXPIRED_BY:
            ledger._audit(
                conn, "refuse", analyst=analyst, pool=pool, window=window, query_id=run_id,
                micro=total.micro, detail=f"ticket {row[0]} for this run was denied",
            )  # fmt: skip
            return BudgetExceeded(
                f"{reason}. The approval request {row[0]} for this run was denied; change "
                "the plan (a new plan files a new request) or wait for the next window",
                window=window,
            )
        if row is not None and row[1] == "pending":
            ticket, detail = row[0], "still awaiting approval"
        else:
            ticket, detail = secrets.token_hex(4), "queued for approval"
            conn.execute(
                sql.INSERT_TICKET,
                {"ticket": ticket, "query_id": run_id, "pool": pool, "window": window,
                 "measure": measure.value, "micro": total.micro, "analyst": analyst,
                 "description": f"{description} — {listing}"[:2000],
                 "now": ledger._now_text()},
            )  # fmt: skip
            for item in items:
                conn.execute(
                    _INSERT_ITEM,
                    {"ticket": ticket, "query_id": item.query_id, "measure": measure.value,
                     "micro": item.cost.micro, "description": item.description},
                )  # fmt: skip
        ledger._audit(
            conn, "queue", analyst=analyst, pool=pool, window=window, query_id=run_id,
            micro=total.micro, detail=f"ticket {ticket} (whole run, {len(items)} queries): "
            f"{detail}; {reason}",
        )  # fmt: skip
    return BudgetPending(
        f"{reason}. Pool {pool!r} queues such runs: ticket {ticket} asks for the whole run "
        f"({total.describe()}: {listing}) and awaits approval (`dpllm budget approve "
        f"{ticket}`); once approved, run the same command again and this plan runs once",
        ticket=ticket,
    )


def run_items(ledger: SQLBase, ticket: str) -> list[RunItem]:
    """The queries of a run's ticket (empty for a single-query ticket)."""
    with ledger._read() as conn:
        rows = conn.execute(_SELECT_ITEMS, {"ticket": ticket}).fetchall()
    return [RunItem(r[0], Cost(Measure(r[1]), int(r[2])), r[3]) for r in rows]


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
    ledger: SQLBase,
    ticket: str,
    *,
    approver: str = "admin",
    from_pool: str | None = None,
    ttl: float = DEFAULT_TICKET_TTL,
) -> PendingRequest:
    """Approve a queued request: move budget from a reserve and charge it, atomically.

    Args:
        ticket: the ticket id from :class:`~dpllm.errors.BudgetPending`.
        approver: who approves (recorded in the audit log).
        from_pool: the reserve pool to move window budget from; defaults to the
            request pool's ``reserve``. ``None`` and no reserve: the charge must
            fit the current caps.

        ttl: seconds a run's ticket stays approvable (an older one expires).

    Returns:
        The ticket, now ``approved``. Its query (or, for a run's ticket, each query
        of the run) is charged now, with no owner; the retried run takes the
        charges over and runs once.

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
        rows = conn.execute(_SELECT_ITEMS, {"ticket": ticket}).fetchall()
        if not rows:
            items = [RunItem(request.query_id, request.cost, request.description)]
            return _approve_items(ledger, conn, request, items, approver, from_pool, run=False)
        created = conn.execute(_SELECT_CREATED, {"ticket": ticket}).fetchone()[0]
        if _age(ledger, created) <= ttl:
            items = [RunItem(r[0], Cost(request.cost.measure, int(r[2])), r[3]) for r in rows]
            return _approve_items(ledger, conn, request, items, approver, from_pool, run=True)
        _expire(ledger, conn, ticket, pool=request.pool, window=request.window)
    # The expiry is committed; the approval is refused.
    raise BudgetError(
        f"ticket {ticket!r} expired undecided (older than {ttl / 86400:g} days); nothing was "
        "charged. Run the job again to file a fresh request"
    )


def _approve_items(
    ledger: SQLBase,
    conn: Conn,
    request: PendingRequest,
    items: Sequence[RunItem],
    approver: str,
    from_pool: str | None,
    run: bool,
) -> PendingRequest:
    """Approve ``request`` inside ``conn``'s transaction: move budget, charge each item."""
    ticket, window, now = request.ticket, request.window, ledger._now_text()
    for item in items:
        ledger._lock_query(conn, item.query_id)
    todo = [
        i for i in items
        if conn.execute(sql.SELECT_CHARGE, {"query_id": i.query_id}).fetchone() is None
    ]  # fmt: skip
    if not todo:
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
    total = Cost(request.cost.measure, sum(i.cost.micro for i in todo))
    parts = ledger._parts(path, total)
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
        rmicro = ledger._parts([rspec], total)[0][1]
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
        detail = f"ticket {ticket}: moved {total.describe()} of {window} from {reserve!r}"
    for item in todo:
        item_parts = ledger._parts(path, item.cost)
        refused = ledger._apply_path(conn, item_parts, window)()
        if refused is not None:
            spec, kind = refused
            raise _rows.exceeded(
                spec, kind=kind, window=window,
                requested=dict((s.name, m) for s, m in item_parts)[spec.name],
                remaining=ledger._window_position(conn, spec, window),
                advice=None if reserve is not None else (
                    f"pool {request.pool!r} has no reserve to move budget from: approve with "
                    "--from POOL (from_pool in Python and HTTP) naming a reserve pool, or "
                    "configure the pool's reserve"
                ),
            )  # fmt: skip
        ledger._insert_charge(
            conn, query_id=item.query_id, window=window, cost=item.cost, parts=item_parts,
            analyst=request.analyst, description=item.description, owner=None,
            ticket=ticket,
        )  # fmt: skip
    conn.execute(
        sql.DECIDE_TICKET,
        {"status": "approved", "decided_by": approver, "from_pool": reserve, "ticket": ticket,
         "now": now},
    )  # fmt: skip
    if run:
        detail += f" for the whole run ({len(todo)} queries)"
    ledger._audit(
        conn, "approve", analyst=approver, pool=request.pool, window=window,
        query_id=request.query_id, micro=total.micro, detail=detail,
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
