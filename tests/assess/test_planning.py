"""Planning: predicted interval widths match the empirical ones; the split; the simulation."""

from __future__ import annotations

import numpy as np
import pytest

from dpllm.assess.planning import (
    Population,
    Schedule,
    build_query,
    evaluate_plan,
    expected_exact,
    plan_pool,
    predicted_half_width,
    simulate_schedule,
    suggest_split,
)
from dpllm.config import Settings
from dpllm.errors import ConfigError, InvalidPrivacyParameter
from dpllm.privacy.noise import SeededNoise
from dpllm.release import Measure

POP = Population(users=800, records_per_user=4.0)


@pytest.mark.parametrize(
    ("name", "amount", "measure", "draws"),
    [
        ("feedback_count", 0.2, Measure.PURE, 4000),
        ("active_users", 0.1, Measure.PURE, 4000),
        ("rating_histogram", 0.4, Measure.PURE, 1000),
        ("topic_counts", 0.3, Measure.PURE, 500),
        ("course_feedback", 0.2, Measure.PURE, 1000),
        ("feedback_count", 0.05, Measure.ZCDP, 2000),
        ("mean_rating", 0.5, Measure.PURE, 500),
    ],
)
def test_predicted_width_matches_empirical(
    name: str, amount: float, measure: Measure, draws: int
) -> None:
    query = build_query(name, amount=amount, measure=measure, courses=POP.courses)
    exact, _ = expected_exact(query, POP)
    predicted = predicted_half_width(query, exact)
    truth = np.asarray(exact.values)
    if name == "mean_rating":
        truth = np.array([3.0 + exact.values[1] / exact.values[0]])
    noise = SeededNoise(42)
    errors = []
    for _ in range(draws):
        rel = query.publish(exact, fingerprint="t", window="2026-W01", confidence=0.95, noise=noise)
        errors.extend(np.abs(np.asarray(rel.values) - truth))
    empirical = float(np.quantile(errors, 0.95))
    # Discrete noise: the half-width is the smallest integer covering 95%, so the
    # empirical quantile sits within one unit of it; otherwise within 12%.
    assert abs(empirical - predicted) <= max(1.0, 0.12 * predicted), (empirical, predicted)
    coverage = float(np.mean(np.asarray(errors) <= predicted + 1e-9))
    assert coverage >= 0.93


def test_split_equalises_relative_error() -> None:
    settings = Settings()
    rows = evaluate_plan(settings, POP)
    pool = plan_pool(settings)
    split = suggest_split(rows, budget=2.0, measure=pool.measure)
    assert split.feasible
    assert sum(split.amounts.values()) == pytest.approx(2.0)
    after = evaluate_plan(settings, POP, amounts=split.amounts)
    rel = [r.relative_error for r in after]
    assert max(rel) / min(rel) < 1.25  # discrete widths round up; otherwise equal


def test_split_meets_targets_or_says_why() -> None:
    settings = Settings()
    rows = evaluate_plan(settings, POP)
    split = suggest_split(rows, budget=2.0, measure=Measure.PURE, targets={"mean_rating": 0.02})
    assert split.feasible
    after = {r.name: r for r in evaluate_plan(settings, POP, amounts=split.amounts)}
    assert after["mean_rating"].relative_error <= 0.02 * 1.1
    impossible = suggest_split(
        rows, budget=0.1, measure=Measure.PURE, targets={"mean_rating": 0.0001}
    )
    assert not impossible.feasible and "budget" in impossible.note
    with pytest.raises(ConfigError):
        suggest_split(rows, budget=1.0, measure=Measure.PURE, targets={"nope": 0.1})
    with pytest.raises(InvalidPrivacyParameter):
        suggest_split(rows, budget=0.0, measure=Measure.PURE)


def test_unknown_plan_query_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="catalogue"):
        build_query("median_income", amount=1.0, measure=Measure.PURE, courses=())


def test_simulation_follows_ledger_semantics() -> None:
    settings = Settings()  # global: 2/window, 20 lifetime; weekly: 2/window under it
    schedule = Schedule.from_mapping(
        {
            "weeks": 14,
            "start": "2026-W01",
            "run": [
                {"query": "mean_rating", "amount": 1.0, "refreshes": 0, "repeats": 2},
                {"query": "feedback_count", "amount": 0.5, "every": 2},
            ],
        }
    )
    weeks = simulate_schedule(settings, schedule)
    assert len(weeks) == 14
    assert weeks[0].spent == pytest.approx(1.5) and weeks[1].spent == pytest.approx(1.0)
    assert weeks[0].cache_hits == 2  # repeats of one query id are free
    assert weeks[0].lifetime_remaining == pytest.approx(18.5)
    # 1.5 + 1.0 per two weeks = 2.5; the lifetime cap of 20 runs out in week 16,
    # so with 14 weeks nothing is refused yet — until it is:
    assert not any(w.refused for w in weeks)
    longer = simulate_schedule(settings, Schedule.from_mapping({**_as_dict(schedule), "weeks": 20}))
    first = next(i for i, w in enumerate(longer) if w.refused)
    assert 14 <= first <= 17
    assert all(w.lifetime_remaining is not None and w.lifetime_remaining >= 0 for w in longer)


def _as_dict(s: Schedule) -> dict[str, object]:
    return {
        "weeks": s.weeks,
        "start": s.start,
        "run": [
            {k: v for k, v in vars(r).items() if v is not None and k != "__dict__"} for r in s.runs
        ],
    }


@pytest.mark.parametrize(
    "raw",
    [
        {"weeks": 0, "run": [{"query": "x"}]},
        {"weeks": 3},
        {"weeks": 3, "run": [{"query": "x", "every": 0}]},
        {"weeks": 3, "run": [{"query": "x", "bogus": 1}]},
        {"weeks": 3, "start": "2026-47", "run": [{"query": "x"}]},
        {"weeks": 3, "run": [{"query": "x", "amount": -1}]},
        {"weeks": 3, "extra": 1, "run": [{"query": "x"}]},
    ],
)
def test_bad_schedule(raw: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        Schedule.from_mapping(raw)


@pytest.mark.parametrize(
    "start", ["２０２６-W０１", "2026-W01\n", "2026-w01", "2025-W53", "9999-W01"]
)
def test_a_schedule_start_is_parsed_strictly(start: str) -> None:
    """The schedule file is an edge too: one canonical spelling per week, or a config error."""
    with pytest.raises(ConfigError, match=r"\[start\]"):
        Schedule.from_mapping(
            {"weeks": 2, "start": start, "run": [{"query": "mean_rating", "amount": 0.5}]}
        )
