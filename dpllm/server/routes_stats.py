"""DP statistics, budget and approvals: ``/v1/stats/{query}``, ``/v1/budget``, ``/v1/admin/…``.

``GET /v1/stats/{query}?week=2026-W47[&pool=NAME][&allow_incomplete=true]``
releases one query of the configured plan — built exactly as ``dpllm weekly``
builds it (:func:`~dpllm.weekly.wiring.build_plan`: bounds, vocabulary,
``out_of_range``, zCDP), so its query id is the weekly job's and a statistic the
job released is served from the cache — through
:class:`~dpllm.data.stats.StatsRunner`: charged to the pool (one of the
caller's; default the plan's pool when it is theirs) before the data is read,
then cached per (query, dataset, week): asking again returns the same release
and spends nothing (``"cached": true``). An exhausted pool answers 429 and
spends nothing; a pool that queues answers 202 with a ticket.

``week`` is required and parsed once, strictly (:class:`~dpllm.windows.Window`):
any spelling but ``YYYY-Www`` with ASCII digits is a 400, as is a future week
or the current, unfinished one without ``allow_incomplete=true``.

``GET /v1/budget[?week=…]`` shows the caller's pools (ε and δ spent, remaining,
lifetime) and their audit history. Admin keys list, approve and deny queued
requests. Ledger calls block, so these routes run in FastAPI's thread pool.

Privacy: each fresh release costs its plan ε per user in its week; cached
answers and budget reads are free.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from dpllm.config import ApiKey, Settings
from dpllm.data.queries import Query as StatQuery
from dpllm.errors import BudgetPending, InvalidWindow
from dpllm.ledger.base import (
    DELTA_UNIT,
    Balance,
    PendingRequest,
    iter_path,
    path_delta_remaining,
    path_remaining,
)
from dpllm.server.errors import status_and_body
from dpllm.server.logging import log_event
from dpllm.server.state import ServerState, caller, server_state
from dpllm.windows import Window

__all__ = ["plan_catalogue", "router"]

router = APIRouter()
WEEK_MAX_LENGTH = 32


def plan_catalogue(settings: Settings) -> dict[str, StatQuery]:
    """The configured plan, built as the weekly job builds it (same query ids)."""
    from dpllm.weekly.wiring import build_plan

    return build_plan(settings, courses=settings.data.courses)


def _week(week: str | None, state: ServerState) -> Window:
    """The ``week`` parameter, parsed once (400 on anything but a canonical ISO week)."""
    if week is None:
        return Window.of(state.today())
    try:
        return Window.parse(week)
    except InvalidWindow as exc:
        raise HTTPException(400, str(exc)) from None


def _pool(key: ApiKey, pool: str | None, settings: Settings) -> str:
    if pool is None:
        if settings.plan_pool in key.pools:
            return settings.plan_pool
        if not key.pools:
            raise HTTPException(403, f"analyst {key.analyst!r} has no budget pool")
        return key.pools[0]
    if pool not in key.pools:
        raise HTTPException(
            403, f"pool {pool!r} is not one of the pools of analyst {key.analyst!r}"
        )
    return pool


def _amount(micro: int | None) -> float | None:
    return None if micro is None else micro / 1_000_000


@router.get("/v1/stats/{query}", tags=["statistics"], summary="A DP statistic of the plan")
def stats(
    query: str = Path(max_length=64),
    week: str = Query(
        max_length=WEEK_MAX_LENGTH,
        description="ISO week, written exactly like 2026-W47 (required: no week is assumed)",
    ),
    pool: str | None = Query(default=None, max_length=64, description="One of your pools"),
    allow_incomplete: bool = Query(
        default=False, description="Also release the current, unfinished week (marked so)"
    ),
    key: ApiKey = Depends(caller),
    state: ServerState = Depends(server_state),
) -> Any:
    """Release ``query`` for ``week`` (charged once per window; repeats are free)."""
    from dpllm.data.stats import StatsRunner
    from dpllm.weekly.wiring import columns_for

    window = _week(week, state)
    catalogue = plan_catalogue(state.settings)
    if query not in catalogue:
        raise HTTPException(
            404, f"unknown statistic {query!r}; the plan has: {', '.join(catalogue)}"
        )
    chosen = _pool(key, pool, state.settings)
    ledger = state.ledger()
    columns = columns_for(state.settings, catalogue)
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
            today=state.today(),
            allow_incomplete=allow_incomplete,
        )
        window = runner.window(window)  # 400 on a future or unfinished week: nothing spent
        q = catalogue[query]
        try:
            # What the ledger recorded for this request, not a guess made before it:
            # another replica's in-flight charge may be waited for or taken over.
            outcome = runner.release_recorded(q, window)
        except BudgetPending as exc:
            status, body, headers = status_and_body(exc)  # Retry-After, x-should-retry
            log_event(
                "stats", analyst=key.analyst, query=query, week=window.key, pool=chosen, status=202
            )
            return JSONResponse(body, status_code=status, headers=headers)
    release = outcome.release
    log_event(
        "stats",
        analyst=key.analyst,
        query=query,
        week=window.key,
        pool=chosen,
        cached=outcome.cached,
    )
    return {
        "query": query,
        "week": window.key,
        "pool": chosen,
        "cached": outcome.cached,
        "charged": release.cost.to_dict() if outcome.charged else None,
        "release": release.to_dict(),
    }


def _balance(b: Balance, remaining: int, delta_remaining: int) -> dict[str, Any]:
    """A pool's position; ``delta`` holds δ as numbers (and exact units of 10⁻¹⁵)."""
    unit = DELTA_UNIT
    return {
        "pool": b.pool,
        "measure": str(b.measure),
        "window": b.window,
        "spent": _amount(b.spent),
        "remaining": _amount(remaining),
        "pool_remaining": _amount(b.remaining),
        "window_cap": _amount(b.effective_cap),
        "lifetime_spent": _amount(b.lifetime_spent),
        "lifetime_cap": _amount(b.lifetime_cap),
        "lifetime_remaining": None
        if b.lifetime_cap is None
        else _amount(max(0, b.lifetime_cap - b.lifetime_spent)),
        "micro": {"spent": b.spent, "remaining": remaining, "lifetime_spent": b.lifetime_spent},
        "delta": {
            "spent": b.delta_spent / unit,
            "remaining": delta_remaining / unit,
            "window_cap": b.delta_window_cap / unit,
            "lifetime_spent": b.delta_lifetime_spent / unit,
            "lifetime_cap": None if b.delta_lifetime_cap is None else b.delta_lifetime_cap / unit,
            "total": b.total_delta,
            "units": {"spent": b.delta_spent, "remaining": delta_remaining, "per_delta": unit},
        },
    }


@router.get("/v1/budget", tags=["budget"], summary="Your pools: spent, remaining, history")
def budget(
    week: str | None = Query(
        default=None,
        max_length=WEEK_MAX_LENGTH,
        description="ISO week, written exactly like 2026-W47; default: this week (reading is free)",
    ),
    limit: int = Query(default=50, ge=0, le=1000, description="History events at most"),
    key: ApiKey = Depends(caller),
    state: ServerState = Depends(server_state),
) -> Any:
    """The caller's pools in ``week`` and their recent audit history (free to read)."""
    window = _week(week, state)
    ledger = state.ledger()
    specs = {p.name: p for p in ledger.pools()}

    def of(name: str) -> Balance:
        return ledger.balance(name, window)

    # "remaining" is what a charge can still take: the minimum over the pool's path.
    pools = [
        _balance(
            of(p),
            path_remaining(specs, of, p),
            path_delta_remaining(of, [s.name for s in iter_path(specs, p)]),
        )
        for p in key.pools
    ]
    mine = set(key.pools)
    events = [asdict(e) for e in ledger.history() if e.pool in mine]
    return {
        "analyst": key.analyst,
        "week": window.key,
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
