"""Ledger throughput: charges per second on SQLite and on PostgreSQL, 1 to 16 clients.

Run: ``python bench/ledger_bench.py [--n 1500] [--dir DIR] [--pg URL | --no-pg | --no-sqlite]``.

Figures printed:

* **baseline** — bare SQLite commits/s with the ledger's durability settings
  (WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE``, one ``INSERT``): the fsync
  ceiling of this disk, measured in the same run;
* **charges/s** — durable charge transactions (``charging()`` entered: every
  pool on the path updated conditionally, charge row, parts, audit line);
* **releases/s** — the whole ``release_once`` cycle: charge commit, then the
  release stored in a second durable commit (two fsyncs per release);
* the same with 8 processes on one file (aggregate over wall time);
* **16 processes: charges/s** — 16 processes, each charging in a loop, all on
  the same two pools (every charge updates the same hot rows), aggregate over
  wall time; on SQLite and on PostgreSQL;
* on PostgreSQL (a throwaway database made on ``--pg``): bare commits/s and
  charges/s with 1 and 16 clients, and releases/s with 16.

Each SQLite figure is also given as a ratio to the SQLite baseline, each
PostgreSQL figure to bare PostgreSQL commits/s with as many clients.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dpllm.ledger.base import PoolSpec, release_once
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.release import Cost, Measure, Release

WEEK = "2026-W47"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
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


def _worker(
    open_ledger: Callable[[], Any], n: int, tag: str, ready: Any, charge_only: bool
) -> None:
    ledger = open_ledger()
    ready.wait()
    for i in range(n):
        qid = f"{tag}-{i}"
        if charge_only:  # the durable charge transaction alone (what charging() commits)
            ledger._acquire(qid, "team", WEEK, COST, "bench", "")
            continue
        release_once(ledger, query_id=qid, pool="team", window=WEEK, cost=COST,
                     compute=lambda qid=qid: _release(qid))  # type: ignore[misc]  # fmt: skip


def multi(
    open_ledger: Callable[[], Any] | Path, n: int, procs: int, *, charge_only: bool = False
) -> float:
    """Aggregate releases/s (or charges/s) of ``procs`` processes over wall time."""
    if isinstance(open_ledger, Path):
        open_ledger = functools.partial(SQLiteLedger, open_ledger)
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Barrier(procs + 1)
    workers = [
        ctx.Process(target=_worker, args=(open_ledger, n // procs, f"p{k}", ready, charge_only))
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


# -- PostgreSQL ------------------------------------------------------------------------------
def _pg_commits(url: str, n: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for i in range(n):
            conn.execute(b"BEGIN")
            conn.execute("INSERT INTO bench_t VALUES (%s)", (i,))
            conn.execute(b"COMMIT")


def pg_baseline(url: str, n: int, clients: int) -> float:
    """Bare durable commits/s (one INSERT each) with ``clients`` processes."""
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_pg_commits, args=(url, n // clients)) for _ in range(clients)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return (n // clients) * clients / (time.perf_counter() - start)


def pg_report(admin_url: str, n: int, rounds: int) -> None:
    """Charges/s on a throwaway PostgreSQL database, 1 and 16 clients."""
    import uuid

    import psycopg

    from dpllm.ledger.postgres import PostgresLedger

    name = f"dpllm_bench_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
            sync = conn.execute("SHOW synchronous_commit").fetchone()[0]  # type: ignore[index]
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as exc:
        print(f"PostgreSQL at {admin_url}: not reachable ({exc}); its figures are skipped")
        return
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    figures: dict[str, list[float]] = {k: [] for k in ("b1", "b16", "c1", "c16", "r16")}
    try:
        print(f"postgresql {version} (synchronous_commit={sync}) on {url}")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_t (x BIGINT)")
        for r in range(rounds):
            figures["b1"].append(pg_baseline(url, n // 2, 1))
            figures["b16"].append(pg_baseline(url, n, 16))
            for key, clients, charge_only in (("c1", 1, True), ("c16", 16, True),
                                              ("r16", 16, False)):  # fmt: skip
                ledger = PostgresLedger(url)
                ledger.ensure_pool(PoolSpec(f"g{key}{r}", Measure.PURE, 10**15))
                ledger.ensure_pool(PoolSpec("team", Measure.PURE, 10**15, parent=f"g{key}{r}"))
                ledger.close()
                count = n // 2 if clients == 1 else n
                figures[key].append(
                    multi(functools.partial(PostgresLedger, url), count, clients,
                          charge_only=charge_only)
                )  # fmt: skip
                with psycopg.connect(url, autocommit=True) as conn:  # fresh pools next time
                    conn.execute("TRUNCATE charge_parts, charges, audit, pool_windows, pools")
        med = {k: statistics.median(v) for k, v in figures.items()}
        print(f"median of {rounds} rounds; every charge updates the same two pool rows")
        for key, base, label in (
            ("b1", "b1", "1 client: bare durable commits/s       "),
            ("c1", "b1", "1 client: charges/s                    "),
            ("b16", "b16", "16 clients: bare durable commits/s     "),
            ("c16", "b16", "16 clients: charges/s (aggregate)      "),
            ("r16", "b16", "16 clients: releases/s (charge + store)"),
        ):
            spread = f"[{min(figures[key]):.0f}–{max(figures[key]):.0f}]"
            print(f"{label} {med[key]:9.0f}   {med[key] / med[base]:.2f}×  {spread}")
        target = "met" if med["c16"] >= 1000 else "NOT met"
        print(f"target ≥ 1,000 charges/s with 16 clients on PostgreSQL: {target}")
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1500, help="charges per measurement")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median kept)")
    parser.add_argument("--dir", default=None, help="directory for the database files")
    parser.add_argument("--pg", default=PG_ADMIN_URL, help="PostgreSQL admin URL")
    parser.add_argument("--pg-n", type=int, default=4000, help="charges per PostgreSQL figure")
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
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
        if args.no_sqlite:
            pg_report(args.pg, args.pg_n, args.rounds)
            return
        figures: dict[str, list[float]] = {
            "base": [], "charge": [], "release": [], "multi": [], "multi16": []
        }  # fmt: skip
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
            setup(root / f"multi16-{r}.db")
            figures["multi16"].append(multi(root / f"multi16-{r}.db", args.n, 16, charge_only=True))
        med = {k: statistics.median(v) for k, v in figures.items()}
        base = med["base"]
        print(f"median of {args.rounds} rounds × {args.n} charges")
        print(f"baseline: bare durable commits/s       {base:9.0f}   1.00×")
        for key, label in (
            ("charge", "1 process: charges/s                  "),
            ("release", "1 process: releases/s (charge + store)"),
            ("multi", "8 processes: releases/s (aggregate)   "),
            ("multi16", "16 processes: charges/s (aggregate)   "),
        ):
            spread = f"[{min(figures[key]):.0f}–{max(figures[key]):.0f}]"
            print(f"{label} {med[key]:9.0f}   {med[key] / base:.2f}×  {spread}")
        target = "met" if med["charge"] >= 1000 else "NOT met"
        print(f"target ≥ 1,000 charges/s in one process: {target}")
        if not args.no_pg:
            pg_report(args.pg, args.pg_n, args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
