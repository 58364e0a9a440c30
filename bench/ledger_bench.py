"""Ledger throughput: charges per second in one process and with 8 processes on one file.

Run: ``python bench/ledger_bench.py [--n 4000] [--dir DIR]``.

Figures printed:

* **baseline** — bare SQLite commits/s with the ledger's durability settings
  (WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE``, one ``INSERT``): the fsync
  ceiling of this disk, measured in the same run;
* **charges/s** — durable charge transactions (``charging()`` entered: every
  pool on the path updated conditionally, charge row, parts, audit line);
* **releases/s** — the whole ``release_once`` cycle: charge commit, then the
  release stored in a second durable commit (two fsyncs per release);
* the same with 8 processes on one file (aggregate over wall time).

Each figure is also given as a ratio to the baseline.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dpllm.ledger.base import PoolSpec, release_once
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost, Measure, Release

WEEK = "2026-W47"
COST = Cost.pure(0.001)


def _release(qid: str) -> Release:
    return Release(name="count", values=(1.0,), intervals=((0.0, 2.0),), mechanism="bench",
                   noise_scale=1.0, cost=COST, fingerprint=qid, window=WEEK)  # fmt: skip


def baseline(path: Path, n: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (x INTEGER)")
    start = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?)", (i,))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return n / elapsed


def setup(path: Path) -> None:
    ledger = SQLiteLedger(path)
    ledger.ensure_pool(PoolSpec("global", Measure.PURE, 10**15))
    ledger.ensure_pool(PoolSpec("team", Measure.PURE, 10**15, parent="global"))


def charges_only(path: Path, n: int, tag: str) -> tuple[float, float]:
    """(charges/s counting only the charge transaction, releases/s of the whole cycle)."""
    ledger = SQLiteLedger(path)
    in_charge = 0.0
    start = time.perf_counter()
    for i in range(n):
        qid = f"{tag}-{i}"
        t0 = time.perf_counter()
        cm = ledger.charging(query_id=qid, pool="team", window=WEEK, cost=COST)
        charge = cm.__enter__()
        in_charge += time.perf_counter() - t0
        charge.data_read()
        charge.store(_release(qid))
        cm.__exit__(None, None, None)
    total = time.perf_counter() - start
    return n / in_charge, n / total


def _worker(path: str, n: int, tag: str, ready: multiprocessing.Barrier) -> None:  # type: ignore[type-arg]
    ledger = SQLiteLedger(path)
    ready.wait()
    for i in range(n):
        qid = f"{tag}-{i}"
        release_once(ledger, query_id=qid, pool="team", window=WEEK, cost=COST,
                     compute=lambda qid=qid: _release(qid))  # type: ignore[misc]  # fmt: skip


def multi(path: Path, n: int, procs: int) -> float:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Barrier(procs + 1)
    workers = [
        ctx.Process(target=_worker, args=(str(path), n // procs, f"p{k}", ready))
        for k in range(procs)
    ]
    for w in workers:
        w.start()
    ready.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
        if w.exitcode != 0:
            raise SystemExit(f"worker failed with exit code {w.exitcode}")
    return (n // procs) * procs / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1500, help="charges per measurement")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median kept)")
    parser.add_argument("--dir", default=None, help="directory for the database files")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dpllm-ledger-bench-", dir=args.dir))
    try:
        print("machine")
        print(f"  cores            {os.cpu_count()}")
        print(f"  load average     {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"  platform         {platform.platform()}")
        print(f"  python           {sys.version.split()[0]}")
        print(f"  sqlite           {sqlite3.sqlite_version}")
        print(f"  database dir     {root}")
        figures: dict[str, list[float]] = {"base": [], "charge": [], "release": [], "multi": []}
        # Rounds interleave the baseline with the ledger so that a disk shared with
        # other work slows both alike; the median of each figure is reported.
        for r in range(args.rounds):
            figures["base"].append(baseline(root / f"baseline{r}.db", args.n))
            setup(root / f"one{r}.db")
            charge_rate, release_rate = charges_only(root / f"one{r}.db", args.n, "one")
            figures["charge"].append(charge_rate)
            figures["release"].append(release_rate)
            setup(root / f"multi{r}.db")
            figures["multi"].append(multi(root / f"multi{r}.db", args.n, 8))
        med = {k: statistics.median(v) for k, v in figures.items()}
        base = med["base"]
        print(f"median of {args.rounds} rounds × {args.n} charges")
        print(f"baseline: bare durable commits/s       {base:9.0f}   1.00×")
        for key, label in (
            ("charge", "1 process: charges/s                  "),
            ("release", "1 process: releases/s (charge + store)"),
            ("multi", "8 processes: releases/s (aggregate)   "),
        ):
            spread = f"[{min(figures[key]):.0f}–{max(figures[key]):.0f}]"
            print(f"{label} {med[key]:9.0f}   {med[key] / base:.2f}×  {spread}")
        target = "met" if med["charge"] >= 1000 else "NOT met"
        print(f"target ≥ 1,000 charges/s in one process: {target}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
