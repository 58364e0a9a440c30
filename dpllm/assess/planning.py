"""Planning a budget before anything is spent: interval widths, ε splits, burn simulation.

Nothing here reads data. A plan is evaluated on **public planning assumptions**
(:class:`Population`: how many users, how many records each) that the team
states; every width comes from the query's *own* calibration, by publishing a
hypothetical exact aggregate through the catalogue query with a seeded noise
source and reading the interval it reports. So the predicted width is exactly
the one the real release will carry for an aggregate of that size (counts and
histograms: exactly, because their half-width does not depend on the value;
the mean: up to the Monte-Carlo interval of the ratio).

**Suggested split.** For pure ε a query's half-width is ``∝ 1/ε`` (noise scale
``Δ/ε``), for ρ-zCDP ``∝ 1/√ρ``. With ``rel_i(x) = a_i·x^(−γ)`` (γ = 1 for ε,
½ for ρ) measured at the planned amount, the split that equalises relative error
within a budget B is ``x_i = B·a_i^(1/γ) / Σ_j a_j^(1/γ)``; a per-query target
``t_i`` needs ``x_i = (a_i/t_i)^(1/γ)``. Suggested widths are then recomputed
with the query's own calibration (discrete noise rounds widths up).

**Burn simulation.** :func:`simulate_schedule` replays a schedule of weekly
releases against a real (temporary) :class:`~dpllm.ledger.sqlite.SQLiteLedger`
with the configured pools, so window caps, lifetime caps, parents and the
release cache behave exactly as in production. See "Plan a budget" in the docs
(docs/how-to/plan-budget.md) for the schedule file format.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import math
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpllm.config import Settings
from dpllm.data.queries import Exact, Query
from dpllm.data.stats import default_catalogue
from dpllm.errors import BudgetError, ConfigError, InvalidPrivacyParameter
from dpllm.ledger.base import PoolSpec, release_once
from dpllm.privacy.noise import SeededNoise
from dpllm.release import MICRO, Cost, Measure, Release
from dpllm.windows import iso_week, week_bounds

__all__ = [
    "PlanRow",
    "Population",
    "Schedule",
    "ScheduledRun",
    "SimulatedWeek",
    "Split",
    "build_query",
    "evaluate_plan",
    "expected_exact",
    "plan_pool",
    "predicted_half_width",
    "simulate_schedule",
    "suggest_split",
]

DEFAULT_COURSES = ("algebra", "biology", "chemistry", "databases")


MAX_USERS = 10**12
"""The largest population a plan may assume (a hundred times the world's)."""


@dataclass(frozen=True, kw_only=True)
class Population:
    """Public planning assumptions about one window (never measured from the data).

    Args:
        users: active users per window.
        records_per_user: average feedback records per active user.
        mean_rating: the mean rating one expects (1–5).
        topic_share: share of users who mention a given topic.
        courses: the public course list (``course_feedback``).
    """

    users: int = 500
    records_per_user: float = 3.0
    mean_rating: float = 3.5
    topic_share: float = 0.2
    courses: tuple[str, ...] = DEFAULT_COURSES

    def __post_init__(self) -> None:
        if isinstance(self.users, bool) or not isinstance(self.users, int) or self.users < 1:
            raise InvalidPrivacyParameter(f"users must be an int ≥ 1, got {self.users!r}")
        if self.users > MAX_USERS:  # 1e20 users made a relative width divide by zero
            raise InvalidPrivacyParameter(
                f"users must be at most {MAX_USERS:.0e} (a population), got {self.users}"
            )
        if not 1 <= self.records_per_user < math.inf:
            raise InvalidPrivacyParameter("records_per_user must be a finite number ≥ 1")
        if not 1.0 <= self.mean_rating <= 5.0:
            raise InvalidPrivacyParameter("mean_rating must lie in [1, 5]")
        if not 0.0 < self.topic_share <= 1.0:
            raise InvalidPrivacyParameter("topic_share must lie in (0, 1]")


def build_query(name: str, *, amount: float, measure: Measure, courses: Sequence[str]) -> Query:
    """The shipped catalogue query ``name`` with ε (pure) or ρ (zCDP) = ``amount``.

    Raises:
        ConfigError: the catalogue has no query of that name.
    """
    catalogue = default_catalogue(courses=tuple(courses))
    if name not in catalogue:
        raise ConfigError(
            f"the plan names {name!r}, which is not a catalogue query; use one of "
            f"{', '.join(sorted(catalogue))}",
            field=f"plan.queries.{name}",
        )
    if measure is Measure.PURE:
        changes: dict[str, Any] = {"epsilon": amount, "rho": None}
    else:
        changes = {"epsilon": None, "rho": amount}
    query: Query = dataclasses.replace(catalogue[name], **changes)  # type: ignore[type-var]
    return query


def _field(query: Query, name: str, default: int) -> int:
    value = getattr(query, name, default)
    return int(value) if isinstance(value, int) else default


def expected_exact(query: Query, population: Population) -> tuple[Exact, float]:
    """A hypothetical exact aggregate for ``query`` and the magnitude errors are relative to."""
    pop = population
    m = _field(query, "max_records", 5)  # the catalogue's default bound
    records = pop.users * min(pop.records_per_user, float(m))
    if query.name == "mean_rating":
        exact = Exact((float(pop.users), pop.users * (pop.mean_rating - 3.0)))
        return exact, pop.mean_rating
    if query.name == "active_users":
        return Exact((float(pop.users),)), float(pop.users)
    if query.name == "feedback_count":
        return Exact((float(round(records)),)), records
    labels: tuple[str, ...] = tuple(getattr(query, "courses", ()) or ())
    if query.name == "rating_histogram":
        per = records / 5.0
        return Exact((float(round(per)),) * 5, ("1", "2", "3", "4", "5")), per
    if query.name == "course_feedback":
        per = records / max(1, len(labels))
        return Exact((float(round(per)),) * len(labels), labels), per
    vocabulary = getattr(query, "vocabulary", None)
    names: tuple[str, ...] = tuple(getattr(vocabulary, "names", ()) or ())
    if names:
        per = pop.users * pop.topic_share
        return Exact((float(round(per)),) * len(names), names), per
    raise ConfigError(f"no planning model for query {query.name!r}")


def predicted_half_width(
    query: Query, exact: Exact, *, confidence: float = 0.95, seed: int = 0
) -> float:
    """The half-width of ``query``'s interval on ``exact``, from its own calibration.

    Publishes ``exact`` through ``query.publish`` with a seeded source and reads
    the reported interval (the widest component of a vector). No data is read.
    """
    release = query.publish(
        exact,
        fingerprint=f"plan:{query.fingerprint()}",
        window="2026-W01",
        confidence=confidence,
        noise=SeededNoise(seed),
    )
    return max((hi - lo) / 2.0 for lo, hi in release.intervals)


@dataclass(frozen=True, slots=True)
class PlanRow:
    """One planned query: its amount, predicted half-width and relative error."""

    name: str
    amount: float
    half_width: float
    magnitude: float
    unit: str

    @property
    def relative_error(self) -> float:
        return self.half_width / self.magnitude if self.magnitude > 0 else math.inf


_UNITS = {"mean_rating": "stars", "active_users": "users", "topic_counts": "users"}


def plan_pool(settings: Settings) -> PoolSpec:
    pools = {p.name: p for p in settings.default_pools}
    if settings.plan_pool not in pools:
        raise ConfigError(f"unknown plan pool {settings.plan_pool!r}", field="plan.pool")
    return pools[settings.plan_pool]


def evaluate_plan(
    settings: Settings,
    population: Population,
    *,
    amounts: Mapping[str, float] | None = None,
) -> list[PlanRow]:
    """Each planned query's predicted half-width at ``settings.confidence``.

    Args:
        amounts: override the plan's ε (or ρ) per query name.

    Privacy: reads no data, spends nothing.
    """
    measure = plan_pool(settings).measure
    rows: list[PlanRow] = []
    for planned in settings.plan:
        amount = (amounts or {}).get(planned.name, planned.epsilon)
        query = build_query(
            planned.name, amount=amount, measure=measure, courses=population.courses
        )
        exact, magnitude = expected_exact(query, population)
        hw = predicted_half_width(query, exact, confidence=settings.confidence)
        unit = _UNITS.get(planned.name, "records")
        rows.append(PlanRow(planned.name, amount, hw, magnitude, unit))
    return rows


@dataclass(frozen=True, slots=True)
class Split:
    """A suggested allocation of the window budget."""

    amounts: Mapping[str, float]
    budget: float
    measure: Measure
    feasible: bool
    note: str


def suggest_split(
    rows: Sequence[PlanRow],
    *,
    budget: float,
    measure: Measure,
    targets: Mapping[str, float] | None = None,
) -> Split:
    """Split ``budget`` to equalise relative error, or to meet per-query targets.

    Args:
        rows: the plan evaluated at its current amounts.
        budget: the window cap (ε, or ρ for a zCDP pool).
        targets: relative half-width wanted per query name (``0.1`` = ±10%);
            queries without a target share what is left, equalised.

    Returns:
        A :class:`Split`; ``feasible`` is False when the targets need more than
        the budget (then the equalised split is returned and the note says so).
    """
    if not budget > 0:
        raise InvalidPrivacyParameter(f"budget must be > 0, got {budget!r}")
    gamma = 1.0 if measure is Measure.PURE else 0.5
    # rel_i(x) = a_i x^-γ, measured at the planned amount.
    a = {r.name: r.relative_error * r.amount**gamma for r in rows}
    targets = dict(targets or {})
    unknown = set(targets) - set(a)
    if unknown:
        raise ConfigError(f"targets name queries not in the plan: {', '.join(sorted(unknown))}")
    for name, t in targets.items():
        if not t > 0:
            raise InvalidPrivacyParameter(f"target for {name!r} must be > 0, got {t!r}")

    def equalise(names: Sequence[str], total: float) -> dict[str, float]:
        weights = {n: a[n] ** (1.0 / gamma) for n in names}
        norm = sum(weights.values())
        return {n: total * w / norm for n, w in weights.items()}

    if not targets:
        level = (sum(a[n] ** (1 / gamma) for n in a) / budget) ** gamma
        return Split(
            equalise(list(a), budget),
            budget,
            measure,
            True,
            f"equal relative error ≈ ±{level:.1%} for every query",
        )
    needed = {n: (a[n] / t) ** (1.0 / gamma) for n, t in targets.items()}
    rest = [n for n in a if n not in targets]
    left = budget - sum(needed.values())
    if left <= 0 or (rest and left <= 1e-9):
        amounts = equalise(list(a), budget)
        return Split(
            amounts,
            budget,
            measure,
            False,
            f"the targets need {sum(needed.values()):.3g} of a budget of {budget:.3g}; "
            "showing the equalised split instead",
        )
    amounts = dict(needed)
    if rest:
        amounts.update(equalise(rest, left))
        note = f"targets met; the other queries share the remaining {left:.3g}, equalised"
    else:
        note = f"targets met with {left:.3g} of the budget left over"
    return Split(amounts, budget, measure, True, note)


# -- burn simulation -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ScheduledRun:
    """One line of a schedule: a query released on some weeks.

    Args:
        query: the catalogue query's name (only for labels and default amounts).
        amount: ε (or ρ) per release; ``None`` takes the plan's amount.
        every: release every ``every`` weeks (1 = weekly).
        per_week: distinct releases per release week (e.g. several datasets).
        refreshes: extra releases in the same week on refreshed data (each charged).
        repeats: identical re-asks of a release (same query id): served from
            the release cache, free.
    """

    query: str
    amount: float | None = None
    every: int = 1
    per_week: int = 1
    refreshes: int = 0
    repeats: int = 0


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """Weeks to simulate, from ``start``, and the runs in each."""

    weeks: int
    start: str
    runs: tuple[ScheduledRun, ...]

    @classmethod
    def load(cls, path: str | Path) -> Schedule:
        """Read a schedule TOML file (see docs/how-to/plan-budget.md).

        Raises:
            ConfigError: missing file, bad TOML, or an invalid value.
        """
        p = Path(path)
        try:
            raw = tomllib.loads(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read schedule {p}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"schedule {p} is not valid TOML: {exc}") from exc
        return cls.from_mapping(raw)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> Schedule:
        unknown = set(raw) - {"weeks", "start", "run"}
        if unknown:
            raise ConfigError(f"unknown schedule key(s): {', '.join(sorted(unknown))}")
        weeks = raw.get("weeks", 12)
        if isinstance(weeks, bool) or not isinstance(weeks, int) or not 1 <= weeks <= 520:
            raise ConfigError("weeks must be an int in [1, 520]", field="weeks")
        start = raw.get("start", "2026-W01")
        try:
            week_bounds(start)
        except ValueError as exc:
            raise ConfigError(str(exc), field="start") from exc
        entries = raw.get("run", [])
        if not isinstance(entries, list) or not entries:
            raise ConfigError("a schedule needs at least one [[run]] table", field="run")
        runs: list[ScheduledRun] = []
        allowed = {f.name for f in dataclasses.fields(ScheduledRun)}
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise ConfigError("each [[run]] must be a table", field=f"run[{i}]")
            extra = set(entry) - allowed
            if extra:
                raise ConfigError(f"unknown key(s) {', '.join(sorted(extra))}", field=f"run[{i}]")
            try:
                run = ScheduledRun(**entry)
            except TypeError as exc:
                raise ConfigError(str(exc), field=f"run[{i}]") from exc
            ints = (run.every, run.per_week, run.refreshes, run.repeats)
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in ints):
                raise ConfigError("every, per_week, refreshes, repeats are ints", field=f"run[{i}]")
            if run.every < 1 or run.per_week < 0 or run.refreshes < 0 or run.repeats < 0:
                raise ConfigError("every ≥ 1; per_week, refreshes, repeats ≥ 0", field=f"run[{i}]")
            if run.amount is not None and not (
                isinstance(run.amount, int | float) and run.amount > 0
            ):
                raise ConfigError("amount must be > 0", field=f"run[{i}].amount")
            runs.append(run)
        return cls(weeks=weeks, start=start, runs=tuple(runs))


@dataclass(frozen=True, slots=True)
class SimulatedWeek:
    """The state after one simulated week."""

    window: str
    spent: float
    """Spent in the plan pool this window (ε or ρ)."""
    window_remaining: float
    """What the plan pool could still take this window (window and lifetime caps)."""
    lifetime_remaining: float | None
    """Lifetime budget left in the tightest pool on the path (``None``: no lifetime cap)."""
    releases: int
    cache_hits: int
    refused: tuple[str, ...]


def _dummy(name: str, cost: Cost, window: str, query_id: str) -> Release:
    return Release(
        name=name,
        values=(0.0,),
        intervals=((0.0, 0.0),),
        mechanism="simulated",
        noise_scale=0.0,
        cost=cost,
        fingerprint=query_id,
        window=window,
        seeded=True,
        notes=("budget simulation: no data, no value",),
    )


def simulate_schedule(settings: Settings, schedule: Schedule) -> list[SimulatedWeek]:
    """Replay ``schedule`` against a temporary ledger with the configured pools.

    Privacy: reads no data and touches no real ledger: the pools are copied
    into a throw-away SQLite file.
    """
    pools = settings.default_pools
    plan = {q.name: q.epsilon for q in settings.plan}
    target = plan_pool(settings)
    from dpllm.ledger.sqlite import SQLiteLedger

    out: list[SimulatedWeek] = []
    with tempfile.TemporaryDirectory(prefix="dpllm-plan-") as tmp:
        ledger = SQLiteLedger(Path(tmp) / "simulation.db")
        ledger.mark_test_ledger()  # simulated releases are seeded: a test ledger
        try:
            for spec in _parents_first(pools):
                ledger.ensure_pool(spec)
            start, _ = week_bounds(schedule.start)
            for week in range(schedule.weeks):
                window = iso_week(start + dt.timedelta(weeks=week))
                out.append(_simulate_week(ledger, target, schedule, plan, week, window, pools))
        finally:
            ledger.close()
    return out


def _parents_first(pools: Sequence[PoolSpec]) -> list[PoolSpec]:
    done: list[PoolSpec] = []
    names: set[str] = set()
    pending = list(pools)
    while pending:
        progressed = False
        for spec in list(pending):
            if spec.parent is None or spec.parent in names:
                done.append(spec)
                names.add(spec.name)
                pending.remove(spec)
                progressed = True
        if not progressed:
            raise ConfigError("pool parents form a cycle or name unknown pools", field="pools")
    return done


def _simulate_week(
    ledger: Any,
    target: PoolSpec,
    schedule: Schedule,
    plan: Mapping[str, float],
    week: int,
    window: str,
    pools: Sequence[PoolSpec],
) -> SimulatedWeek:
    releases = hits = 0
    refused: list[str] = []
    for r, run in enumerate(schedule.runs):
        if week % run.every:
            continue
        amount = run.amount if run.amount is not None else plan.get(run.query)
        if amount is None:
            raise ConfigError(
                f"run {run.query!r} has no amount and the plan does not list it", field="run"
            )
        cost = Cost.pure(amount) if target.measure is Measure.PURE else Cost.zcdp(amount)
        for k in range(run.per_week * (1 + run.refreshes)):
            qid = hashlib.sha256(f"{r}:{run.query}:{window}:{k}".encode()).hexdigest()
            for attempt in range(1 + run.repeats):
                try:
                    release_once(
                        ledger,
                        query_id=qid,
                        pool=target.name,
                        window=window,
                        cost=cost,
                        compute=functools.partial(_dummy, run.query, cost, window, qid),
                        analyst="plan-simulation",
                        description=f"simulated {run.query}",
                    )
                except BudgetError:
                    refused.append(run.query)
                    break
                if attempt:
                    hits += 1
                else:
                    releases += 1
    balance = ledger.balance(target.name, window)
    lifetime: float | None = None
    by_name = {p.name: p for p in pools}
    node: PoolSpec | None = target
    while node is not None:
        if node.lifetime_cap is not None and node.measure is target.measure:
            left = (node.lifetime_cap - ledger.lifetime_spent(node.name)) / MICRO
            lifetime = left if lifetime is None else min(lifetime, left)
        node = by_name.get(node.parent) if node.parent else None
    return SimulatedWeek(
        window=window,
        spent=balance.spent / MICRO,
        window_remaining=_path_remaining(ledger, target, by_name, window),
        lifetime_remaining=lifetime,
        releases=releases,
        cache_hits=hits,
        refused=tuple(refused),
    )


def _path_remaining(
    ledger: Any, target: PoolSpec, by_name: Mapping[str, PoolSpec], window: str
) -> float:
    left = math.inf
    node: PoolSpec | None = target
    while node is not None:
        if node.measure is target.measure:  # a zCDP parent counts in ρ, not comparable
            left = min(left, ledger.balance(node.name, window).remaining / MICRO)
        node = by_name.get(node.parent) if node.parent else None
    return left
