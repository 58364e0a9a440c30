"""Benchmark: dpllm's DP statistics against a non-private single pass, same engine, same data.

Generates ``--rows`` records (default 10M) from ``--users`` users (default 1M,
skewed: 20% of records come from 1% of users) over ``--weeks`` ISO weeks
(default 52), timestamps unsorted, texts drawn from the demo's Chinese and
English phrases, as one Parquet file (DuckDB SQL). Then times, best of
``--repeat`` rounds with the paths taking turns:

**all weeks** — the weekly statistic set (feedback count, active users, mean
rating, rating histogram, topic counts) for every week:

* ``baseline``: the same figures without privacy in one pass: ``GROUP BY week``
  (COUNT, AVG, per-star counts; COUNT(DISTINCT user) for active users; per-topic
  text counts by the same keyword patterns for topics) — record-level, no
  per-user bound, so it never groups by (week, user) as user-level DP must;
* ``one pass``: :func:`dpllm.data.shared.measure_windows` — every week's bounded
  aggregates, one statement per kind — plus each release's noise;
* ``runner``: :meth:`StatsRunner.release_many` — the same, with the SQLite
  ledger: one charge and one stored release per (query, week), all the charges
  in one durable transaction and all the stores in another;
* ``per week`` (``--per-week``): ``release_all`` week by week (the old path).

**one week** — the same set for the last week: baseline (one week's WHERE) vs
``release_all``.

**Spark** (``--spark``): the all-weeks baseline and one pass on Spark
``local[2]`` over the same Parquet file, beside DuckDB's.

Ratios are each path's time over its baseline on the same engine (goal: ≤ 3×),
wall clock and, in parentheses, process CPU time (Spark's work happens in the
JVM, outside this process: its CPU column is not comparable).

    .venv/bin/python bench/stats_bench.py --rows 10000000 --users 1000000 --weeks 52
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import duckdb

from dpllm.data import bounded
from dpllm.data.demo import _PHRASES
from dpllm.data.engines import DuckDBEngine, Engine
from dpllm.data.queries import (
    ActiveUsers,
    FeedbackCount,
    MeanRating,
    Query,
    RatingHistogram,
    Scope,
)
from dpllm.data.shared import measure_windows
from dpllm.data.sql import ColumnMap
from dpllm.data.stats import StatsRunner
from dpllm.data.topics import DEFAULT_VOCABULARY, TopicCounts
from dpllm.ledger.base import PoolSpec
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Measure
from dpllm.windows import previous_weeks, week_bounds

QUERIES: list[Query] = [
    FeedbackCount(epsilon=0.2),
    ActiveUsers(epsilon=0.2),
    MeanRating(epsilon=0.5),
    RatingHistogram(epsilon=0.4),
    TopicCounts(epsilon=0.3),
]
PHRASES = [p for lang in _PHRASES.values() for good, bad in lang.values() for p in (*good, *bad)]


def generate(path: Path, rows: int, users: int, weeks: Sequence[str], seed: float = 0.42) -> None:
    heavy = max(1, users // 100)
    start, _ = week_bounds(weeks[0])
    span = len(weeks) * 7 * 86400e6
    texts = "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in PHRASES) + "]"
    con = duckdb.connect()
    con.execute("SELECT setseed(?)", [seed])
    con.execute(
        f"""
        COPY (
          SELECT
            CAST(CASE WHEN random() < 0.2 THEN floor(random() * {heavy})
                      ELSE floor(random() * {users}) END AS BIGINT) AS user_id,
            CASE WHEN random() < 0.01 THEN NULL
                 ELSE CAST(1 + floor(random() * 5) AS INTEGER) END AS rating,
            list_element({texts}, CAST(1 + floor(random() * {len(PHRASES)}) AS INTEGER)) AS text,
            TIMESTAMP '{start:%Y-%m-%d %H:%M:%S}'
              + to_microseconds(CAST(random() * {span} AS BIGINT)) AS ts
          FROM range({rows})
        ) TO '{path}' (FORMAT parquet)
        """
    )
    con.close()


def best(timed: dict[str, Callable[[], object]], repeat: int) -> dict[str, tuple[float, float]]:
    """Best wall and CPU time of each callable over ``repeat`` rounds, taking turns."""
    wall = dict.fromkeys(timed, float("inf"))
    cpu = dict.fromkeys(timed, float("inf"))
    for _ in range(repeat):
        for name, fn in timed.items():
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[name] = min(wall[name], time.perf_counter() - w0)
            cpu[name] = min(cpu[name], time.process_time() - c0)
    return {name: (wall[name], cpu[name]) for name in timed}


def _topic_patterns() -> list[str]:
    return [bounded.keyword_pattern(en, zh) for _, en, zh in DEFAULT_VOCABULARY.keywords()]


def baseline_sql(
    weeks: Sequence[str], queries: Sequence[Query], *, spark: bool = False
) -> tuple[str, list[Any]]:
    """The non-private figures of ``weeks`` in one pass, grouped by week (no bounds)."""
    start, _ = week_bounds(weeks[0])
    _, end = week_bounds(weeks[-1])
    match = "rlike" if spark else "regexp_matches"
    per_topic = "".join(
        f", SUM(CASE WHEN {match}(text, '{p}') THEN 1 ELSE 0 END)" for p in _topic_patterns()
    )
    if not any(isinstance(q, TopicCounts) for q in queries):
        per_topic = ""
    users = ", COUNT(DISTINCT user_id)" if any(isinstance(q, ActiveUsers) for q in queries) else ""
    stars = ", ".join(f"COUNT(*) FILTER (WHERE rating = {k})" for k in range(1, 6))
    week = "date_trunc('week', ts)"
    source = "dpllm_records" if spark else "read_parquet(?)"
    sql = (
        f"SELECT {week} AS w, COUNT(*){users}, AVG(rating), {stars}{per_topic} "
        f"FROM {source} WHERE ts >= CAST(? AS TIMESTAMP) AND ts < CAST(? AS TIMESTAMP) GROUP BY w"
    )
    times = [f"{start:%Y-%m-%d %H:%M:%S}", f"{end:%Y-%m-%d %H:%M:%S}"]
    return sql, times


def duck_baseline(
    con: duckdb.DuckDBPyConnection, path: str, weeks: Sequence[str], queries: Sequence[Query]
) -> None:
    sql, times = baseline_sql(weeks, queries)
    con.execute(sql, [path, *times]).fetchall()


def spark_baseline(engine: Any, weeks: Sequence[str], queries: Sequence[Query]) -> None:
    sql, times = baseline_sql(weeks, queries, spark=True)
    engine._spark.sql(sql, args=times).collect()


def one_pass(engine: Engine, weeks: Sequence[str], queries: Sequence[Query]) -> None:
    start, end = week_bounds(weeks[0])
    scope = Scope(engine, ColumnMap(), weeks[0], start, end, b"bench-salt")
    exact = measure_windows(queries, scope, weeks)
    for (i, w), e in exact.items():
        queries[i].publish(e, fingerprint="bench", window=w, confidence=0.95, noise=None)


class Runner:
    """The runner with a fresh dataset id per call, so nothing comes from the cache."""

    def __init__(self, engine: Engine, ledger_path: Path) -> None:
        self.engine = engine
        self.ledger = SQLiteLedger(ledger_path)
        self.ledger.ensure_pool(PoolSpec("bench", Measure.PURE, window_cap=10**12))
        self.runs = itertools.count()

    def _runner(self) -> StatsRunner:
        return StatsRunner(
            self.engine, self.ledger, dataset_id=f"bench-{next(self.runs)}", pool="bench"
        )

    def many(self, weeks: Sequence[str], queries: Sequence[Query]) -> None:
        self._runner().release_many({q.name: q for q in queries}, weeks)

    def per_week(self, weeks: Sequence[str], queries: Sequence[Query]) -> None:
        runner = self._runner()
        for w in weeks:
            runner.release_all({q.name: q for q in queries}, w)


def _row(label: str, t: dict[str, tuple[float, float]], base: str, paths: Sequence[str]) -> None:
    bw, bc = t[base]
    cells = [f"{base} {bw:.3f}s"]
    for k in paths:
        if k in t:
            w, c = t[k]
            cells.append(f"{k} {w:.3f}s {w / bw:.2f}× ({c / bc:.2f}×)")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{label:<28} " + " | ".join(cells) + f"  [load {load}]", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--users", type=int, default=1_000_000)
    ap.add_argument("--weeks", type=int, default=52)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--parquet", type=Path, default=None, help="reuse/keep this Parquet file")
    ap.add_argument("--per-week", action="store_true", help="also time release_all per week")
    ap.add_argument("--spark", action="store_true", help="also time Spark local[2]")
    ap.add_argument("--no-topics", action="store_true", help="skip the set with topic counts")
    args = ap.parse_args()
    weeks = previous_weeks("2026-W47", args.weeks)

    with tempfile.TemporaryDirectory() as tmp:
        path = args.parquet or Path(tmp) / "feedback.parquet"
        if not path.exists():
            t0 = time.perf_counter()
            generate(path, args.rows, args.users, weeks)
            print(
                f"generated {args.rows:,} rows / {args.users:,} users / {args.weeks} weeks "
                f"in {time.perf_counter() - t0:.1f}s"
            )
        engine = DuckDBEngine(path)
        runner = Runner(engine, Path(tmp) / "ledger.db")
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        issue = [QUERIES[0], QUERIES[2], QUERIES[3]]
        sets = {
            "count+mean+hist": issue,
            "+ active users": QUERIES[:4],
            "+ topic_counts": QUERIES,
        }
        if args.no_topics:
            del sets["+ topic_counts"]
        for label, queries in sets.items():
            timed: dict[str, Callable[[], object]] = {
                "baseline": partial(duck_baseline, con, str(path), weeks, queries),
                "one pass": partial(one_pass, engine, weeks, queries),
                "runner": partial(runner.many, weeks, queries),
            }
            if args.per_week:
                timed["per week"] = partial(runner.per_week, weeks, queries)
            t = best(timed, args.repeat)
            _row(
                f"DuckDB {label}, {args.weeks} weeks",
                t,
                "baseline",
                ["one pass", "runner", "per week"],
            )
            last = weeks[-1:]
            t = best(
                {
                    "baseline": partial(duck_baseline, con, str(path), last, queries),
                    "runner": partial(runner.per_week, last, queries),
                },
                args.repeat,
            )
            _row(f"DuckDB {label}, one week", t, "baseline", ["runner"])
        if args.spark:
            from dpllm.data.spark import SparkEngine, spark_session

            session = spark_session(
                {
                    "spark.master": "local[2]",
                    "spark.ui.enabled": "false",
                    "spark.ui.showConsoleProgress": "false",
                    "spark.sql.shuffle.partitions": "4",
                    "spark.driver.memory": "2g",
                    "spark.log.level": "ERROR",
                }
            )
            spark = SparkEngine(session, paths=[str(path)])
            for label, queries in sets.items():
                t = best(
                    {
                        "baseline": partial(spark_baseline, spark, weeks, queries),
                        "one pass": partial(one_pass, spark, weeks, queries),
                        "duckdb one pass": partial(one_pass, engine, weeks, queries),
                    },
                    args.repeat,
                )
                _row(
                    f"Spark local[2] {label}, {args.weeks} weeks",
                    t,
                    "baseline",
                    ["one pass", "duckdb one pass"],
                )
            session.stop()


if __name__ == "__main__":
    main()
