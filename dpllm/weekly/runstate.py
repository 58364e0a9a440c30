"""Where a weekly run stands in the ledger: each query's state, the budget check, the ticket.

These read the ledger only (the budget check may file one approval ticket); nothing here
reads the data or charges. :class:`~dpllm.weekly.job.WeeklyJob` calls them with its
ledger, settings and query ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from dpllm.config import Settings
from dpllm.data.queries import Query
from dpllm.errors import BudgetExceeded
from dpllm.ledger.base import DELTA_UNIT, Balance, ChargeStatus, Ledger, RunItem
from dpllm.release import MICRO, Measure
from dpllm.weekly.wiring import pool_path
from dpllm.windows import Window

__all__ = [
    "FAILED",
    "NEW",
    "PAID",
    "RELEASED",
    "PoolBudget",
    "check_budget",
    "query_states",
    "run_ticket_id",
]

RELEASED, PAID, FAILED, NEW = "released", "paid", "failed", "new"
"""A plan query's state in a week (:meth:`~dpllm.weekly.job.WeeklyJob.states`)."""


@dataclass(frozen=True, slots=True)
class PoolBudget:
    """A pool's position in the report's week, in its own unit (ε, or ρ for zCDP)."""

    pool: str
    measure: str
    window: str
    spent: float
    window_cap: float
    remaining: float
    lifetime_spent: float
    lifetime_cap: float | None
    delta_spent: float = 0.0
    """δ charged in the week (approximate-DP releases); ``delta_*`` are δ, not ε."""
    delta_window_cap: float = 0.0
    delta_remaining: float = 0.0
    delta_lifetime_spent: float = 0.0
    delta_lifetime_cap: float | None = None
    delta_total: float = 0.0
    """The δ of the week's guarantee: δ charged, plus a zCDP pool's conversion δ."""

    @classmethod
    def from_balance(cls, b: Balance) -> PoolBudget:
        unit = DELTA_UNIT
        return cls(
            pool=b.pool,
            measure=b.measure.value,
            window=b.window,
            spent=b.spent / MICRO,
            window_cap=b.effective_cap / MICRO,
            remaining=b.remaining / MICRO,
            lifetime_spent=b.lifetime_spent / MICRO,
            lifetime_cap=None if b.lifetime_cap is None else b.lifetime_cap / MICRO,
            delta_spent=b.delta_spent / unit,
            delta_window_cap=b.delta_window_cap / unit,
            delta_remaining=b.delta_remaining / unit,
            delta_lifetime_spent=b.delta_lifetime_spent / unit,
            delta_lifetime_cap=None
            if b.delta_lifetime_cap is None
            else b.delta_lifetime_cap / unit,
            delta_total=b.total_delta,
        )

    @property
    def symbol(self) -> str:
        return "ε" if self.measure == Measure.PURE.value else "ρ"


def query_states(ledger: Ledger, ids: Mapping[str, str]) -> dict[str, str]:
    """The state of each query id in ``ids`` (``{name: query id}``): see :data:`NEW` ….

    ``"released"`` (stored: free, the same figure again), ``"paid"`` (charged, not
    released — by an interrupted run, or funded by an approval: the next run takes the
    charge over and pays nothing more), ``"failed"`` (failed after reading the data:
    closed, see :class:`~dpllm.errors.QueryFailed`) or ``"new"`` (to be charged).
    """
    unreleased = getattr(ledger, "unreleased", None)
    open_charges = {r.query_id: r for r in unreleased()} if callable(unreleased) else {}
    out: dict[str, str] = {}
    for name, qid in ids.items():
        record = open_charges.get(qid)
        if record is not None:
            out[name] = FAILED if record.status is ChargeStatus.FAILED else PAID
        elif ledger.get_release(qid) is not None:
            out[name] = RELEASED
        else:
            out[name] = NEW
    return out


def run_ticket_id(plan_pool: str, week: Window, query_ids: Iterable[str]) -> str:
    """The id of a run's approval ticket: a fingerprint of the query ids it charges."""
    digest = hashlib.sha256("\n".join([plan_pool, week.key, *sorted(query_ids)]).encode())
    return f"run:{digest.hexdigest()}"


def check_budget(
    ledger: Ledger,
    settings: Settings,
    week: Window,
    queries: Mapping[str, Query],
    *,
    query_id: Callable[[Query, Window], str],
    run_id: str,
) -> None:
    """Refuse a run, before any charge, when ``queries`` do not all fit every pool.

    See :meth:`~dpllm.weekly.job.WeeklyJob.check_budget` (raises ``BudgetExceeded``, or
    the ``BudgetPending`` of one run ticket ``run_id`` on a queueing pool).
    """
    if not queries:
        return
    for spec in pool_path(settings):
        needed = sum(q.cost.to_measure(spec.measure).micro for q in queries.values())
        balance = ledger.balance(spec.name, week)
        if needed <= balance.remaining:
            continue
        sym = "ε" if spec.measure is Measure.PURE else "ρ"
        asked = ", ".join(
            f"{n} {q.cost.to_measure(spec.measure).describe()}" for n, q in queries.items()
        )
        reason = (
            f"pool {spec.name!r} has {sym} {balance.remaining / MICRO:g} left for "
            f"{week}, the plan asks {sym} {needed / MICRO:g} ({asked}); nothing was spent"
        )
        request_run = getattr(ledger, "request_run", None)
        if spec.on_exceed == "queue" and callable(request_run):
            raise request_run(
                run_id=run_id,
                pool=settings.plan_pool,
                window=week.key,
                items=[
                    RunItem(query_id(q, week), q.cost, f"{n} ({week})")
                    for n, q in sorted(queries.items(), key=lambda kv: query_id(kv[1], week))
                ],
                analyst=settings.analyst,
                description=f"weekly run of {week} on {settings.data.dataset_id}",
                reason=reason,
            )
        if spec.on_exceed == "queue":
            continue  # a ledger without run tickets queues each charge instead
        raise BudgetExceeded(
            f"{reason}. Wait for the next window, raise the pool's cap in dpllm.toml, "
            "or lower the plan's ε",
            pool=spec.name,
            requested=needed / MICRO,
            remaining=balance.remaining / MICRO,
            window=week.key,
        )
