"""``dpllm audit``: the empirical ε audit of every mechanism and every catalogue query.

**Queries, through the real engine.** For each catalogue query and each pair of
neighbouring datasets below, the query's own ``measure`` runs on both datasets
through an engine (SQLite by default, DuckDB on request), giving the exact
aggregates ``v⁰`` and ``v¹``. The mechanism only ever sees the aggregate, so
auditing the query's own calibration on ``(v⁰, v¹)`` with
:func:`~dpllm.privacy.audit.audit_samples` (seeded noise of the same
distribution) is exact. Neighbours (privacy unit: the user):

* ``add_max_user`` — add a user with maximal contribution (3× the record bound,
  every course, every topic, extreme ratings);
* ``remove_heavy_user`` — remove an existing heavy user;
* ``clamp_low`` / ``clamp_high`` — add a user whose ratings sit at or beyond the
  lower / upper clamp;
* ``empty_vs_one`` — the empty dataset against one record;
* ``new_group`` — add a user who creates a course and topics nobody else has;
* ``exceeds_bounds`` — add a user far beyond every bound (20× records, all
  courses and topics, out-of-range ratings).

A vector release is audited per component whose aggregate moved, and a
two-mechanism query (the mean: a count and a sum) per mechanism. The noise of
the components is independent, so the product of per-component events is an
event of the whole release whose log-ratio is the *sum* of the components'
bounds: the sum is still a valid lower bound on the query's ε (each bound
holds with probability ≥ 1 − 2α; the report states the union bound).

**Membership inference.** An attacker sees one release, of D⁰ or D¹ with
probability ½ each, and guesses which with the likelihood-ratio test (the
Bayes-optimal attacker). Under ε-DP no attacker beats ``e^ε / (1 + e^ε)``
(Kairouz, Oh & Viswanath 2015; Yeom et al. 2018).

Audits with equal mechanism and equal aggregate difference are identical in
distribution (the noise is translation-invariant), so they run once.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import math
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from dpllm._extras import require
from dpllm.data.engines import DuckDBEngine, Engine, SQLiteEngine
from dpllm.data.queries import Exact, FeedbackCount, Query, Scope
from dpllm.data.sql import ColumnMap
from dpllm.data.stats import default_catalogue
from dpllm.errors import DataError, InvalidPrivacyParameter
from dpllm.ldp.mechanisms import KRandomizedResponse, OptimisedUnaryEncoding
from dpllm.privacy.audit import AuditResult, audit_samples, clopper_pearson
from dpllm.privacy.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Mechanism,
)
from dpllm.privacy.noise import FloatArray, SeededNoise
from dpllm.windows import week_bounds

__all__ = [
    "AUDIT_COURSES",
    "AUDIT_WINDOW",
    "MechanismAudit",
    "MembershipGame",
    "PlantedBugCount",
    "QueryAudit",
    "Record",
    "COLUMNS",
    "audit_catalogue",
    "audit_mechanisms",
    "neighbour_aggregates",
    "neighbouring_datasets",
    "query_mechanisms",
    "user_records",
    "write_feedback_sqlite",
]

AUDIT_WINDOW = "2026-W47"
AUDIT_COURSES = ("algebra", "biology", "chemistry", "databases")
COLUMNS = ColumnMap(course="course")
_MONDAY = week_bounds(AUDIT_WINDOW)[0]
_SALT = b"dpllm-audit-salt"
# Texts the base population writes: two topics only, so a user can bring new ones.
_BASE_TEXTS = ("老师讲解很清楚", "The teacher explains well", "nothing special")


class Record(NamedTuple):
    user: str
    rating: float | None
    text: str
    ts: dt.datetime
    course: str


def user_records(
    name: str, n: int, ratings: Sequence[float], texts: Sequence[str], courses: Sequence[str]
) -> list[Record]:
    return [
        Record(
            name,
            ratings[i % len(ratings)],
            texts[i % len(texts)],
            _MONDAY + dt.timedelta(minutes=37 * i + 11),
            courses[i % len(courses)],
        )
        for i in range(n)
    ]


def _every_topic_text() -> str:
    from dpllm.data.topics import DEFAULT_VOCABULARY

    words = [t.en[0] if t.en else t.zh[0] for t in DEFAULT_VOCABULARY.topics]
    return " ".join(words)


def neighbouring_datasets(
    *, users: int = 40, max_records: int = 10, seed: int = 7
) -> dict[str, tuple[list[Record], list[Record]]]:
    """The neighbouring pairs (D⁰, D¹) of the audit, by scenario name (synthetic data)."""
    rng = np.random.default_rng(seed)
    base: list[Record] = []
    for i in range(users):
        n = int(rng.integers(1, 6))
        ratings = [float(r) for r in rng.integers(1, 6, size=n)]
        base += user_records(f"u{i}", n, ratings, _BASE_TEXTS, AUDIT_COURSES[:2])
    heavy = user_records(
        "heavy", 3 * max_records, [1.0, 5.0], [_every_topic_text()], AUDIT_COURSES[:2]
    )
    base_h = base + heavy
    everything = _every_topic_text()
    m = max_records
    return {
        "add_max_user": (
            base_h,
            base_h + user_records("x", 3 * m, [1.0, 5.0], [everything], AUDIT_COURSES),
        ),
        "remove_heavy_user": (base_h, base),
        "clamp_low": (
            base_h,
            base_h + user_records("x", 2 * m, [-3.0, 0.0, 1.0], _BASE_TEXTS, AUDIT_COURSES[:1]),
        ),
        "clamp_high": (
            base_h,
            base_h + user_records("x", 2 * m, [5.0, 9.5, 99.0], _BASE_TEXTS, AUDIT_COURSES[:1]),
        ),
        "empty_vs_one": ([], user_records("x", 1, [5.0], [everything], AUDIT_COURSES[:1])),
        "new_group": (
            base_h,
            base_h + user_records("x", m, [5.0], ["video lag platform fails"], AUDIT_COURSES[3:]),
        ),
        "exceeds_bounds": (
            base_h,
            base_h + user_records("x", 20 * m, [0.0, 6.0, 5.0, 1.0], [everything], AUDIT_COURSES),
        ),
    }


def write_feedback_sqlite(path: Path, records: Sequence[Record]) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(
            "CREATE TABLE feedback (user_id TEXT, rating REAL, text TEXT, ts TEXT, course TEXT)"
        )
        conn.executemany(
            "INSERT INTO feedback VALUES (?, ?, ?, ?, ?)",
            [
                (r.user, r.rating, r.text, r.ts.strftime("%Y-%m-%d %H:%M:%S"), r.course)
                for r in records
            ],
        )
        conn.commit()
    finally:
        conn.close()


@contextmanager
def _engine(kind: str, records: Sequence[Record], folder: Path, name: str) -> Iterator[Engine]:
    path = folder / f"{name}.db"
    write_feedback_sqlite(path, records)
    if kind == "sqlite":
        with SQLiteEngine(path) as engine:
            yield engine
        return
    if kind == "duckdb":
        require("duckdb", extra="duckdb", feature="dpllm audit --engine duckdb")
        import duckdb

        dpath = folder / f"{name}.duckdb"
        conn = duckdb.connect(str(dpath))
        try:
            # One bulk load from CSV (row-by-row inserts are slow in DuckDB).
            csv_path = folder / f"{name}.csv"
            with csv_path.open("w", newline="", encoding="utf-8") as fh:
                writer = csv.writer(fh)
                writer.writerow(["user_id", "rating", "text", "ts", "course"])
                for r in records:
                    ts = r.ts.strftime("%Y-%m-%d %H:%M:%S")
                    writer.writerow(
                        [r.user, "" if r.rating is None else r.rating, r.text, ts, r.course]
                    )
            conn.execute(
                "CREATE TABLE feedback AS SELECT * FROM read_csv(?, header = true, columns = "
                "{'user_id': 'VARCHAR', 'rating': 'DOUBLE', 'text': 'VARCHAR', "
                "'ts': 'TIMESTAMP', 'course': 'VARCHAR'})",
                [str(csv_path)],
            )
        finally:
            conn.close()
        with DuckDBEngine(dpath) as dengine:
            yield dengine
        return
    raise DataError(f"unknown audit engine {kind!r}; use sqlite or duckdb")


def query_mechanisms(query: Query) -> tuple[Mechanism, ...]:
    """The query's own calibration (:meth:`~dpllm.data.base.Query.mechanisms`).

    One mechanism noises every component of the exact aggregate; several are one
    per component.

    Raises:
        InvalidPrivacyParameter: the query adds no noise to a value (a selection).
    """
    mechs = tuple(query.mechanisms())
    if not mechs:
        raise InvalidPrivacyParameter(f"query {query.name!r} exposes no auditable mechanism")
    return mechs


@dataclass(frozen=True, kw_only=True)
class PlantedBugCount(FeedbackCount):
    """A deliberately broken count: calibrated for sensitivity 1 while one user adds up to M.

    **Never use.** It exists so that ``dpllm audit --planted-bug`` and the tests can
    prove the audit catches a mis-calibrated query (its true ε is M times its claim).
    """

    name: str = "planted_bug_count"

    def mechanisms(self) -> tuple[Mechanism, ...]:
        assert self.epsilon is not None
        return (DiscreteLaplace(epsilon=self.epsilon, sensitivity=1),)


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    scenario: str
    empirical_epsilon: float
    components: int
    """How many component audits were summed."""


@dataclass(frozen=True, slots=True)
class MembershipGame:
    """Attacker accuracy in the membership-inference game against its ceiling."""

    accuracy: float
    accuracy_lower: float
    """One-sided Clopper–Pearson lower bound at α."""
    ceiling: float
    trials: int

    @property
    def passed(self) -> bool:
        return self.accuracy_lower <= self.ceiling


@dataclass(frozen=True, slots=True)
class QueryAudit:
    """Claimed vs empirical lower-bound ε of one query over every neighbouring pair."""

    name: str
    claimed_epsilon: float
    scenarios: tuple[ScenarioResult, ...]
    game: MembershipGame | None = None
    audits: int = 0

    @property
    def empirical_epsilon(self) -> float:
        return max((s.empirical_epsilon for s in self.scenarios), default=0.0)

    @property
    def worst_scenario(self) -> str:
        best = max(self.scenarios, key=lambda s: s.empirical_epsilon, default=None)
        return best.scenario if best else "-"

    @property
    def passed(self) -> bool:
        return self.empirical_epsilon <= self.claimed_epsilon and (
            self.game is None or self.game.passed
        )


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big") >> 1


@dataclass
class _Auditor:
    n_select: int
    n_estimate: int
    alpha: float
    cache: dict[tuple[str, float], AuditResult] = field(default_factory=dict)

    def pair(self, mech: Mechanism, diff: float) -> float:
        """ε lower bound for ``mech`` between aggregates 0 and ``diff``."""
        if diff == 0:
            return 0.0
        key = (repr(mech), abs(diff))
        if key not in self.cache:
            source = SeededNoise(_seed(*key))

            def sampler(value: float) -> Callable[[int], FloatArray]:
                return lambda n: mech.randomise(np.full(n, value), noise=source)

            self.cache[key] = audit_samples(
                sampler(0.0),
                sampler(abs(diff)),
                claimed_epsilon=_claim(mech),
                n_select=self.n_select,
                n_estimate=self.n_estimate,
                alpha=self.alpha,
            )
        return self.cache[key].empirical_epsilon


def _claim(mech: Mechanism) -> float:
    cost = mech.cost
    return cost.epsilon if cost.measure.value == "pure" else cost.to_epsilon_delta(delta=1e-6)[0]


def _pairs(query: Query, exact0: Exact, exact1: Exact) -> list[tuple[Mechanism, float, float]]:
    mechs = query_mechanisms(query)
    v0, v1 = exact0.values, exact1.values
    if len(v0) != len(v1):
        raise DataError(f"{query.name}: neighbouring aggregates differ in shape")
    per = mechs * len(v0) if len(mechs) == 1 else mechs
    return [(m, float(a), float(b)) for m, a, b in zip(per, v0, v1, strict=True)]


def _llr(mech: Mechanism, x: FloatArray, a: float, b: float) -> FloatArray:
    """log P(x | b) − log P(x | a) for the mechanism's noise."""
    s = mech.scale
    if mech.name in ("discrete_laplace", "laplace"):
        return np.asarray((np.abs(x - a) - np.abs(x - b)) / s, dtype=np.float64)
    if mech.name in ("discrete_gaussian", "gaussian"):
        return np.asarray(((x - a) ** 2 - (x - b) ** 2) / (2 * s * s), dtype=np.float64)
    raise InvalidPrivacyParameter(f"no likelihood ratio for {mech.name!r}")


def membership_game(
    pairs: Sequence[tuple[Mechanism, float, float]],
    *,
    claimed_epsilon: float,
    trials: int = 200_000,
    alpha: float = 1e-6,
    seed: int = 0,
) -> MembershipGame:
    """Play the game ``trials`` times with the likelihood-ratio attacker.

    Privacy: an ε-DP release keeps every attacker's accuracy ≤ e^ε/(1 + e^ε).
    """
    rng = np.random.default_rng(seed)
    source = SeededNoise(seed + 1)
    member = rng.random(trials) < 0.5
    llr = np.zeros(trials)
    for mech, a, b in pairs:
        if a == b or mech.scale == 0:
            continue
        x = mech.randomise(np.where(member, b, a), noise=source)
        llr += _llr(mech, x, a, b)
    ties = llr == 0
    guess = np.where(ties, rng.random(trials) < 0.5, llr > 0)
    wins = int(np.count_nonzero(guess == member))
    lower, _ = clopper_pearson(wins, trials, alpha=alpha)
    ceiling = math.exp(claimed_epsilon) / (1.0 + math.exp(claimed_epsilon))
    return MembershipGame(wins / trials, lower, ceiling, trials)


def neighbour_aggregates(
    queries: Mapping[str, Query], *, engine: str = "sqlite"
) -> dict[str, dict[str, tuple[Exact, Exact]]]:
    """``{query: {scenario: (exact on D⁰, exact on D¹)}}``, measured through ``engine``.

    Each dataset is written to a temporary file and read by the real engine with
    the query's own bounded SQL; the aggregates never leave this module.
    """
    start, end = week_bounds(AUDIT_WINDOW)
    exacts: dict[str, dict[str, tuple[Exact, Exact]]] = {name: {} for name in queries}
    with tempfile.TemporaryDirectory(prefix="dpllm-audit-") as tmp:
        for scenario, (d0, d1) in neighbouring_datasets().items():
            got: list[dict[str, Exact]] = []
            for side, records in (("0", d0), ("1", d1)):
                with _engine(engine, records, Path(tmp), f"{scenario}_{side}") as eng:
                    scope = Scope(eng, COLUMNS, AUDIT_WINDOW, start, end, _SALT)
                    got.append({name: q.measure(scope) for name, q in queries.items()})
            for name in queries:
                exacts[name][scenario] = (got[0][name], got[1][name])
    return exacts


def audit_catalogue(
    queries: Mapping[str, Query] | None = None,
    *,
    engine: str = "sqlite",
    n_select: int = 200_000,
    n_estimate: int = 2_000_000,
    alpha: float = 1e-6,
    game_trials: int = 200_000,
    planted_bug: bool = False,
) -> list[QueryAudit]:
    """Audit each query on every neighbouring pair, through ``engine``.

    Args:
        queries: defaults to the shipped catalogue (with the public audit courses).
        planted_bug: add :class:`PlantedBugCount`, which must fail.

    Returns:
        One :class:`QueryAudit` per query (pure ε-DP queries only; a zCDP query
        raises, as its claim needs a δ).
    """
    chosen = dict(queries or default_catalogue(courses=AUDIT_COURSES))
    if planted_bug:
        bug = PlantedBugCount(epsilon=0.1, max_records=10)
        chosen[bug.name] = bug
    auditor = _Auditor(n_select, n_estimate, alpha)
    exacts = neighbour_aggregates(chosen, engine=engine)
    out: list[QueryAudit] = []
    for name, query in chosen.items():
        claimed = query.cost.epsilon
        results: list[ScenarioResult] = []
        for scenario, (e0, e1) in exacts[name].items():
            pairs = _pairs(query, e0, e1)
            bound = sum(auditor.pair(m, b - a) for m, a, b in pairs)
            moved = sum(1 for _, a, b in pairs if a != b)
            results.append(ScenarioResult(scenario, bound, moved))
        e0, e1 = exacts[name]["add_max_user"]
        game = membership_game(
            _pairs(query, e0, e1),
            claimed_epsilon=claimed,
            trials=game_trials,
            alpha=alpha,
            seed=_seed(name),
        )
        out.append(QueryAudit(name, claimed, tuple(results), game, len(auditor.cache)))
    return out


@dataclass(frozen=True, slots=True)
class MechanismAudit:
    name: str
    claimed_epsilon: float
    delta: float
    result: AuditResult

    @property
    def passed(self) -> bool:
        return self.result.passed


def _ldp_sampler(kind: str, value: int, rng: np.random.Generator) -> Callable[[int], FloatArray]:
    krr = KRandomizedResponse(epsilon=1.0)
    oue = OptimisedUnaryEncoding(epsilon=1.0, domain=tuple(range(1, 11)))

    def draw(n: int) -> FloatArray:
        if kind == "krr":
            return krr.sample(value, size=n, rng=rng).astype(np.float64)
        bits = oue.sample(value, size=n, rng=rng)
        # bit(1) − bit(10) reaches the full ratio p(1−q)/((1−p)q) = e^ε.
        return (bits[:, 0] - bits[:, 9]).astype(np.float64)

    return draw


def audit_mechanisms(
    *, n_select: int = 200_000, n_estimate: int = 2_000_000, alpha: float = 1e-6
) -> list[MechanismAudit]:
    """Audit every mechanism at its worst-case neighbouring aggregates (|v⁰ − v¹| = Δ).

    zCDP mechanisms are audited against their (ε, δ = 10⁻⁶) conversion.
    """
    delta = 1e-6
    cases: list[tuple[str, Mechanism]] = [
        ("discrete_laplace ε=1 Δ=1", DiscreteLaplace(epsilon=1.0, sensitivity=1)),
        ("discrete_laplace ε=0.5 Δ=10", DiscreteLaplace(epsilon=0.5, sensitivity=10)),
        ("laplace ε=1 Δ=2", Laplace(epsilon=1.0, sensitivity=2.0)),
        ("discrete_gaussian ρ=0.5 Δ=1", DiscreteGaussian(rho=0.5, sensitivity=1)),
        ("gaussian ρ=0.5 Δ=2", Gaussian(rho=0.5, sensitivity=2.0)),
    ]
    out: list[MechanismAudit] = []
    for label, mech in cases:
        source = SeededNoise(_seed(label))
        sens = float(getattr(mech, "sensitivity", 1.0))
        pure = mech.cost.measure.value == "pure"
        claimed = _claim(mech)

        def sampler(value: float, m: Mechanism = mech, s: SeededNoise = source) -> Any:
            return lambda n: m.randomise(np.full(n, value), noise=s)

        res = audit_samples(
            sampler(0.0),
            sampler(sens),
            claimed_epsilon=claimed,
            delta=0.0 if pure else delta,
            n_select=n_select,
            n_estimate=n_estimate,
            alpha=alpha,
        )
        out.append(MechanismAudit(label, claimed, 0.0 if pure else delta, res))
    for kind, label in (("krr", "ldp k-RR ε=1 k=5"), ("oue", "ldp OUE ε=1 k=10")):
        rng = np.random.default_rng(_seed(label))
        hi = 5 if kind == "krr" else 10
        res = audit_samples(
            _ldp_sampler(kind, 1, rng),
            _ldp_sampler(kind, hi, rng),
            claimed_epsilon=1.0,
            n_select=n_select,
            n_estimate=n_estimate,
            alpha=alpha,
        )
        out.append(MechanismAudit(label, 1.0, 0.0, res))
    return out
