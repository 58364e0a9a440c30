"""Benchmark: the weekly DP statistics through DuckDB against the non-private aggregates.

Generates ``--rows`` records (default 10M) from ``--users`` users (default 1M,
skewed: 20% of records come from 1% of users, who write ~200 each) over 8 ISO
weeks as Parquet, with DuckDB SQL. Then times, for one week and for all 8
weeks, the weekly statistic set (feedback count, mean rating, rating histogram)

* **private**: dpllm's bounded SQL (per-user GROUP BY reductions) + noise, and
* **baseline**: the same statistics without privacy (COUNT, AVG, GROUP BY rating),

and prints the ratio private / baseline (goal: ≤ 3×). Best of ``--repeat`` runs.

    .venv/bin/python bench/stats_bench.py --rows 10000000 --users 1000000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from dpllm.data.engines import DuckDBEngine
from dpllm.data.queries import FeedbackCount, MeanRating, Query, RatingHistogram, Scope
from dpllm.data.sql import ColumnMap
from dpllm.windows import previous_weeks, week_bounds

WEEKS = previous_weeks("2026-W47", 8)


def generate(path: Path, rows: int, users: int, seed: float = 0.42) -> None:
    heavy = max(1, users // 100)
    con = duckdb.connect()
    con.execute("SELECT setseed(?)", [seed])
    start, _ = week_bounds(WEEKS[0])
    con.execute(
        f"""
        COPY (
          SELECT
            CAST(CASE WHEN random() < 0.2 THEN floor(random() * {heavy})
                      ELSE floor(random() * {users}) END AS BIGINT) AS user_id,
            CASE WHEN random() < 0.01 THEN NULL
                 ELSE CAST(1 + floor(random() * 5) AS INTEGER) END AS rating,
            'feedback' AS text,
            TIMESTAMP '{start:%Y-%m-%d %H:%M:%S}'
              + to_microseconds(CAST(random() * 56 * 86400e6 AS BIGINT)) AS ts
          FROM range({rows})
        ) TO '{path}' (FORMAT parquet)
        """
    )
    con.close()


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def private(engine: DuckDBEngine, queries: list[Query], weeks: list[str]) -> None:
    for w in weeks:
        start, end = week_bounds(w)
        scope = Scope(engine, ColumnMap(), w, start, end, b"bench-salt")
        for q in queries:
            q.publish(q.measure(scope), fingerprint="bench", window=w, confidence=0.95, noise=None)


def baseline(con: duckdb.DuckDBPyConnection, path: str, weeks: list[str]) -> None:
    for w in weeks:
        start, end = (t.replace(tzinfo=None) for t in week_bounds(w))
        where = "WHERE ts >= ? AND ts < ?"
        con.execute(f"SELECT COUNT(*) FROM read_parquet(?) {where}", [path, start, end]).fetchall()
        con.execute(
            f"SELECT AVG(rating) FROM read_parquet(?) {where}", [path, start, end]
        ).fetchall()
        con.execute(
            f"SELECT rating, COUNT(*) FROM read_parquet(?) {where} AND rating IS NOT NULL "
            "GROUP BY rating",
            [path, start, end],
        ).fetchall()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--users", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--parquet", type=Path, default=None, help="reuse/keep this Parquet file")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = args.parquet or Path(tmp) / "feedback.parquet"
        if not path.exists():
            t0 = time.perf_counter()
            generate(path, args.rows, args.users)
            print(
                f"generated {args.rows:,} rows / {args.users:,} users in {time.perf_counter() - t0:.1f}s"
            )
        engine = DuckDBEngine(path)
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        queries: list[Query] = [
            FeedbackCount(epsilon=0.1),
            MeanRating(epsilon=0.3),
            RatingHistogram(epsilon=0.2),
        ]
        print(f"{'scope':<10} {'baseline':>10} {'private':>10} {'ratio':>7}")
        for label, weeks in (("one week", WEEKS[-1:]), ("all weeks", WEEKS)):
            base = best(lambda weeks=weeks: baseline(con, str(path), weeks), args.repeat)
            priv = best(lambda weeks=weeks: private(engine, queries, weeks), args.repeat)
            print(f"{label:<10} {base:>9.3f}s {priv:>9.3f}s {priv / base:>6.2f}×")


if __name__ == "__main__":
    main()
