"""DP statistics, budget and approvals: ``/v1/stats/{query}``, ``/v1/budget``, ``/v1/admin/…``.

``GET /v1/stats/{query}?week=2026-W47[&pool=NAME]`` releases one query of the
configured plan through :class:`~dpllm.data.stats.StatsRunner`: charged to the
pool (one of the caller's; default the plan's pool when it is theirs) before the
data is read, then cached per (query, dataset, week): asking again returns the
same release and spends nothing (``"cached": true``). An exhausted pool answers
429 and spends nothing; a pool that queues answers 202 with a ticket.

``GET /v1/budget[?week=…]`` shows the caller's pools (spent, remaining,
lifetime) and their audit history. Admin keys list, approve and deny queued
requests. Ledger calls block, so these routes run in FastAPI's thread pool.

Privacy: each fresh release costs its plan ε per user in its week; cached
answers and budget reads are free.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from dpllm.config import ApiKey, Settings
from dpllm.data.queries import Query as StatQuery
from dpllm.errors import BudgetPending
from dpllm.ledger.base import Balance, PendingRequest
from dpllm.server.errors import status_and_body
from dpllm.server.logging import log_event
from dpllm.server.state import ServerState, caller, server_state
from dpllm.windows import is_week_key, iso_week

__all__ = ["plan_catalogue", "router"]

router = APIRouter()
# ISO weeks of years 0001-9998 (9999's last weeks end in year 10000, past datetime's range)
WEEK = (
    r"^(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])"
    r"-W(0[1-9]|[1-4][0-9]|5[0-3])$"
)


def plan_catalogue(settings: Settings) -> dict[str, StatQuery]:
    """The plan's queries (catalogue queries with the plan's ε), by name."""
    from dpllm.data.stats import default_catalogue

    epsilons = {q.name: q.epsilon for q in settings.plan}
    catalogue = default_catalogue(epsilons=epsilons)
    return {name: catalogue[name] for name in epsilons if name in catalogue}


def _week(week: str | None) -> str:
    if week is None:
        return iso_week(dt.datetime.now(dt.UTC))
    if not is_week_key(week):
        # the pattern let it through: a week 53 of a year that has 52
        raise HTTPException(404, f"week {week!r} does not exist (only some ISO years have 53)")
    return week


def _pool(key: ApiKey, pool: str | None, settings: Settings) -> str:
    if pool is None:
        if settings.plan_pool in key.pools:
            return settings.plan_pool
        if not key.pools:
            raise HTTPException(403, f"analyst {key.analyst!r} has no budget pool")
        return key.pools[0]
    if pool not in key.pools:
        raise HTTPException(403, f"pool {pool!r} is not one of analyst {key.analyst!r}'s pools")
    return pool


def _amount(micro: int | None) -> float | None:
    return None if micro is None else micro / 1_000_000


@router.get("/v1/stats/{query}", tags=["statistics"], summary="A DP statistic of the plan")
def stats(
    query: str = Path(max_length=64),
    week: str | None = Query(
        default=None, pattern=WEEK, description="ISO week; default: this week"
    ),
    pool: str | None = Query(default=None, max_length=64, description="One of your pools"),
    key: ApiKey = Depends(caller),
    state: ServerState = Depends(server_state),
) -> Any:
    """Release ``query`` for ``week`` (charged once per window; repeats are free)."""
    from dpllm.data.sql import ColumnMap
    from dpllm.data.stats import StatsRunner

    catalogue = plan_catalogue(state.settings)
    if query not in catalogue:
        raise HTTPException(
            404, f"unknown statistic {query!r}; the plan has: {', '.join(catalogue)}"
        )
    window = _week(week)
    chosen = _pool(key, pool, state.settings)
    ledger = state.ledger()
    cols = state.settings.data.columns
    columns = ColumnMap(
        table=state.settings.data.table,
        user=cols["user"],
        rating=cols["rating"],
        text=cols["text"],
        timestamp=cols["timestamp"],
    )
    with state.stats_lock:
        runner = StatsRunner(
            state.engine(),
            ledger,
            dataset_id=state.settings.data.dataset_id,
            pool=chosen,
            columns=columns,
            salt=state.salt,
            analyst=key.analyst,
            confidence=state.settings.confidence,
        )
        q = catalogue[query]
        cached = ledger.get_release(runner.query_id(q, window)) is not None
        try:
            release = runner.release(q, window)
        except BudgetPending as exc:
            status, body, headers = status_and_body(exc)  # Retry-After, x-should-retry
            log_event(
                "stats", analyst=key.analyst, query=query, week=window, pool=chosen, status=202
            )
            return JSONResponse(body, status_code=status, headers=headers)
    log_event("stats", analyst=key.analyst, query=query, week=window, pool=chosen, cached=cached)
    return {
        "query": query,
        "week": window,
        "pool": chosen,
        "cached": cached,
        "charged": None if cached else release.cost.to_dict(),
        "release": release.to_dict(),
    }


def _balance(b: Balance) -> dict[str, Any]:
    return {
        "pool": b.pool,
        "measure": str(b.measure),
        "window": b.window,
        "spent": _amount(b.spent),
        "remaining": _amount(b.remaining),
        "window_cap": _amount(b.effective_cap),
        "lifetime_spent": _amount(b.lifetime_spent),
        "lifetime_cap": _amount(b.lifetime_cap),
        "lifetime_remaining": None
        if b.lifetime_cap is None
        else _amount(max(0, b.lifetime_cap - b.lifetime_spent)),
        "micro": {"spent": b.spent, "remaining": b.remaining, "lifetime_spent": b.lifetime_spent},
    }


@router.get("/v1/budget", tags=["budget"], summary="Your pools: spent, remaining, history")
def budget(
    week: str | None = Query(
        default=None, pattern=WEEK, description="ISO week; default: this week"
    ),
    limit: int = Query(default=50, ge=0, le=1000, description="History events at most"),
    key: ApiKey = Depends(caller),
    state: ServerState = Depends(server_state),
) -> Any:
    """The caller's pools in ``week`` and their recent audit history (free to read)."""
    window = _week(week)
    ledger = state.ledger()
    pools = [_balance(ledger.balance(p, window)) for p in key.pools]
    mine = set(key.pools)
    events = [asdict(e) for e in ledger.history() if e.pool in mine]
    return {
        "analyst": key.analyst,
        "week": window,
        "pools": pools,
        "history": events[-limit:] if limit else [],
    }


async def _admin(key: ApiKey = Depends(caller)) -> ApiKey:
    if not key.admin:
        raise HTTPException(403, "this endpoint needs an admin key")
    return key


def _ticket(t: PendingRequest) -> dict[str, Any]:
    out = asdict(t)
    out["cost"] = t.cost.to_dict()
    return out


class Approval(BaseModel):
    from_pool: str | None = Field(
        default=None, max_length=64, description="Reserve pool to move budget from"
    )


class Denial(BaseModel):
    reason: str = Field(default="", max_length=500)


@router.get("/v1/admin/pending", tags=["admin"], summary="Queued budget requests")
def pending(
    status: str | None = Query(default="pending", pattern="^(pending|approved|denied|used)$"),
    key: ApiKey = Depends(_admin),
    state: ServerState = Depends(server_state),
) -> Any:
    """Tickets with ``status``, oldest first."""
    return {"tickets": [_ticket(t) for t in state.ledger().pending(status=status)]}


@router.post("/v1/admin/tickets/{ticket}/approve", tags=["admin"], summary="Approve a request")
def approve(
    ticket: str = Path(max_length=64),
    body: Approval | None = None,
    key: ApiKey = Depends(_admin),
    state: ServerState = Depends(server_state),
) -> Any:
    """Approve a queued request (budget moves from the reserve and is charged at once)."""
    from_pool = body.from_pool if body is not None else None
    result = state.ledger().approve(ticket, approver=key.analyst, from_pool=from_pool)
    log_event("approve", analyst=key.analyst, ticket=ticket)
    return _ticket(result)


@router.post("/v1/admin/tickets/{ticket}/deny", tags=["admin"], summary="Deny a request")
def deny(
    ticket: str = Path(max_length=64),
    body: Denial | None = None,
    key: ApiKey = Depends(_admin),
    state: ServerState = Depends(server_state),
) -> Any:
    """Deny a queued request; a retry of its query is then refused."""
    reason = body.reason if body is not None else ""
    result = state.ledger().deny(ticket, approver=key.analyst, reason=reason)
    log_event("deny", analyst=key.analyst, ticket=ticket)
    return _ticket(result)
