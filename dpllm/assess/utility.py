"""Utility curves: a query's relative error against ε, on synthetic (or demo) data.

A utility curve compares noisy releases with the **exact** answer, so computing
one on real data reads that data and its output is not differentially private:
draw it on synthetic data (the default) and publish only such curves.

For each ε the query's own calibration (:func:`~dpllm.assess.audit_suite.query_mechanisms`)
noises the exact aggregate ``trials`` times with a seeded source, then the same
post-processing as the query's release is applied (counts clamped at 0; the
mean ``3 + S/max(C, 1)`` clamped to [1, 5]). The relative error of one draw is
``|noisy − exact| / |exact|`` (L1 over the components of a vector).
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpllm.assess.audit_suite import (
    AUDIT_COURSES,
    AUDIT_WINDOW,
    COLUMNS,
    Record,
    query_mechanisms,
    user_records,
    write_feedback_sqlite,
)
from dpllm.data.engines import SQLiteEngine
from dpllm.data.queries import Exact, Query, Scope
from dpllm.data.sql import ColumnMap
from dpllm.data.stats import default_catalogue
from dpllm.errors import ConfigError, DataError, InvalidPrivacyParameter
from dpllm.privacy.noise import FloatArray, SeededNoise
from dpllm.windows import week_bounds

__all__ = ["UtilityPoint", "parse_eps_range", "synthetic_records", "utility_curve"]

_TEXTS = (
    "老师讲解很清楚，作业有点多",
    "The pace is too fast and the homework is hard",
    "视频音质不好，平台经常卡顿",
    "Great examples, the slides help a lot",
    "nothing special",
)


def parse_eps_range(text: str, *, points: int = 15) -> list[float]:
    """``"0.05:5"`` → ``points`` log-spaced ε from 0.05 to 5 (``"0.1,0.5,1"`` lists them).

    Raises:
        InvalidPrivacyParameter: not positive, not increasing, or unparsable.
    """
    try:
        if ":" in text:
            lo_s, hi_s = text.split(":", 1)
            lo, hi = float(lo_s), float(hi_s)
            if not (0 < lo < hi and math.isfinite(hi)):
                raise ValueError("need 0 < low < high")
            return [float(x) for x in np.geomspace(lo, hi, max(2, points))]
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise InvalidPrivacyParameter(f"--eps {text!r}: write LOW:HIGH or a,b,c ({exc})") from exc
    if not values or any(not (v > 0 and math.isfinite(v)) for v in values):
        raise InvalidPrivacyParameter(f"--eps {text!r}: every ε must be a positive number")
    return sorted(values)


def synthetic_records(*, users: int = 1000, seed: int = 3) -> list[Record]:
    """A synthetic week of course feedback (no real person in it)."""
    rng = np.random.default_rng(seed)
    out: list[Record] = []
    for i in range(users):
        n = int(rng.integers(1, 8))
        ratings = [float(x) for x in rng.choice([1, 2, 3, 4, 5], n, p=[0.05, 0.1, 0.2, 0.35, 0.3])]
        texts = [str(t) for t in rng.choice(_TEXTS, n)]
        courses = [str(c) for c in rng.choice(AUDIT_COURSES, n)]
        out += user_records(f"s{i}", n, ratings, texts, courses)
    return out


@dataclass(frozen=True, slots=True)
class UtilityPoint:
    epsilon: float
    median_relative_error: float
    p90_relative_error: float


def _post(query: Query, draws: list[FloatArray]) -> FloatArray:
    if query.name == "mean_rating":
        users, centred = draws
        return np.clip(3.0 + centred / np.maximum(users, 1.0), 1.0, 5.0)[:, None]
    return np.maximum(np.stack(draws, axis=1), 0.0)


def _truth(query: Query, exact: Exact) -> FloatArray:
    if query.name == "mean_rating":
        users, centred = exact.values
        return np.array([3.0 + centred / max(users, 1.0)])
    return np.asarray(exact.values, dtype=np.float64)


def utility_curve(
    query_name: str,
    epsilons: Sequence[float],
    *,
    data: Path | None = None,
    columns: ColumnMap = COLUMNS,
    window: str = AUDIT_WINDOW,
    trials: int = 500,
    seed: int = 0,
) -> list[UtilityPoint]:
    """Relative error of ``query_name`` at each ε.

    Args:
        data: an SQLite file with the feedback table; ``None`` uses synthetic data.
            Reading real data here is **not** DP: keep the curve internal.

    Raises:
        ConfigError: unknown query; DataError: the data has no records in the window.
    """
    catalogue = default_catalogue(courses=AUDIT_COURSES)
    if query_name not in catalogue:
        raise ConfigError(f"unknown query {query_name!r}; use one of {', '.join(catalogue)}")
    base = catalogue[query_name]
    start, end = week_bounds(window)
    with tempfile.TemporaryDirectory(prefix="dpllm-utility-") as tmp:
        path = data
        if path is None:
            path = Path(tmp) / "synthetic.db"
            write_feedback_sqlite(path, synthetic_records())
        with SQLiteEngine(path) as engine:
            exact = base.measure(Scope(engine, columns, window, start, end, b"utility"))
    truth = _truth(base, exact)
    scale = float(np.abs(truth).sum())
    if scale == 0:
        raise DataError(f"{query_name} is 0 in {window}: no relative error to plot")
    out: list[UtilityPoint] = []
    noise = SeededNoise(seed)
    for eps in epsilons:
        query: Query = dataclasses.replace(base, epsilon=float(eps))  # type: ignore[type-var]
        mechs = query_mechanisms(query)
        per = mechs * len(exact.values) if len(mechs) == 1 else mechs
        draws = [
            m.randomise(np.full(trials, v), noise=noise)
            for m, v in zip(per, exact.values, strict=True)
        ]
        err = np.abs(_post(query, draws) - truth).sum(axis=1) / scale
        out.append(UtilityPoint(float(eps), float(np.median(err)), float(np.quantile(err, 0.9))))
    return out
