"""``dpllm weekly --dry-run``: everything a run would check and spend, without spending.

:func:`dry_run` lints the job's templates, opens the data source (its schema, no
rows) and the ledger, and works out each plan query's state in the week (released,
paid, new), its cost, its expected interval (from a public population guess, never
from the data) and each pool's balance after the run. It writes nothing: it does
not even create the configured pools (a pool the ledger does not know yet is shown
at its configured cap, with nothing spent).

Privacy: reads the data source's column names only, no records; charges nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dpllm.data.queries import Query
from dpllm.errors import UnknownPool
from dpllm.ledger.base import Balance, PoolSpec
from dpllm.release import MICRO, Cost, Measure
from dpllm.weekly.job import NEW, PoolBudget, WeeklyJob
from dpllm.weekly.wiring import plan_pool, pool_path
from dpllm.windows import Window

__all__ = ["DryRun", "DryRunPool", "DryRunQuery", "dry_run"]

HalfWidth = Callable[[Query], float]
"""Expected half-width of a query's interval (a planning model; reads no data)."""


@dataclass(frozen=True, slots=True)
class DryRunQuery:
    """One plan query in a dry run.

    ``state`` is ``released`` (free: the stored figure again), ``paid`` (charged by an
    interrupted run or an approval: taken over, free), ``failed`` or ``new`` (charged
    by the run). ``interval`` is the stored release's interval when released, else
    ``None``; ``half_width`` the expected ± of a new release (``None`` if unknown).
    """

    name: str
    cost: Cost
    state: str
    half_width: float | None
    interval: tuple[float, float] | None

    @property
    def charged(self) -> bool:
        """Whether the run would charge this query."""
        return self.state == NEW


@dataclass(frozen=True, slots=True)
class DryRunPool:
    """A pool on the plan pool's path: its position now and after the run."""

    now: PoolBudget
    needed: float
    after: float

    @property
    def fits(self) -> bool:
        return self.needed <= self.now.remaining + 1e-12


@dataclass(frozen=True, slots=True)
class DryRun:
    """What ``dpllm weekly`` would do for ``week`` (nothing of it was done)."""

    week: str
    queries: tuple[DryRunQuery, ...]
    pools: tuple[DryRunPool, ...]
    lint: tuple[str, ...]
    cost: Cost

    @property
    def fits(self) -> bool:
        """Whether every pool on the path can take the run's new charges."""
        return all(p.fits for p in self.pools)


def _balance(job: WeeklyJob, spec: PoolSpec, week: str) -> Balance:
    try:
        return job.ledger.balance(spec.name, week)
    except UnknownPool:  # not created yet: the run would create it at its configured cap
        return Balance(
            pool=spec.name, measure=spec.measure, window=week, spent=0,
            window_cap=spec.window_cap, lifetime_spent=0, lifetime_cap=spec.lifetime_cap,
        )  # fmt: skip


def lint_templates(job: WeeklyJob) -> list[str]:
    """``file:line:col: CODE message`` for each lint finding in the job's templates."""
    env = job.environment("2026-W01")
    findings: list[str] = []
    for part in ("system", "user", "fallback"):
        name = f"{job.prompt}/{part}.{job.settings.lang}.j2"
        text, filename = env.source(name)
        findings += [issue.format(filename or name) for issue in env.lint(text)]
    return findings


def dry_run(job: WeeklyJob, week: Window | str, *, half_width: HalfWidth | None = None) -> DryRun:
    """Check and price a run of ``week`` without spending or writing anything.

    Args:
        job: the configured job (its data source and ledger are open).
        week: the ISO week key.
        half_width: the expected ± of a new release of a query (a planning model,
            e.g. :func:`dpllm.assess.planning.predicted_half_width` on a population
            guess); ``None`` leaves it out.

    Raises:
        DataError: a bad week, source or column. TemplateError: a template is missing.
        LedgerError: the ledger cannot be read.

    Privacy: reads column names and the ledger only; spends nothing.
    """
    week = Window.parse(week).key
    for q in job.plan.values():
        job.runner.check(q)
    findings = tuple(lint_templates(job))
    states = job.states(week)
    rows: list[DryRunQuery] = []
    for name, q in job.plan.items():
        stored = (
            job.ledger.get_release(job.runner.query_id(q, week))
            if states[name] == "released"
            else None
        )
        rows.append(
            DryRunQuery(
                name=name,
                cost=q.cost,
                state=states[name],
                half_width=None if half_width is None or stored is not None else half_width(q),
                interval=None if stored is None else stored.intervals[0],
            )
        )
    new: Mapping[str, Query] = {r.name: job.plan[r.name] for r in rows if r.charged}
    pools: list[DryRunPool] = []
    for spec in pool_path(job.settings):
        now = PoolBudget.from_balance(_balance(job, spec, week))
        needed = sum(q.cost.to_measure(spec.measure).micro for q in new.values()) / MICRO
        pools.append(DryRunPool(now=now, needed=needed, after=now.remaining - needed))
    measure: Measure = plan_pool(job.settings).measure
    cost = sum((q.cost for q in new.values()), Cost.zero(measure))
    return DryRun(week=week, queries=tuple(rows), pools=tuple(pools), lint=findings, cost=cost)
