"""One budget for many replicas: four ``dpllm serve`` processes, one PostgreSQL ledger.

Each test has a pool of its own that admits exactly N charges (its lifetime
cap), and sends distinct and repeated statistics requests (30 weeks, each asked
several times) from 32 concurrent clients spread over the four replicas.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import httpx
import pytest

from dpllm.release import Cost
from tests.replicas.conftest import EPSILON, REPLICAS, Cluster, N, weeks

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(240)]

MICRO = Cost.pure(EPSILON).micro


def requests(pool: str, seed: int, repeats: int = 3) -> list[tuple[str, int]]:
    """Every week asked ``repeats`` times, shuffled, each to a random replica."""
    rng = random.Random(seed)
    out = [(week, rng.randrange(REPLICAS)) for week in weeks(pool) for _ in range(repeats)]
    rng.shuffle(out)
    return out


def check_ledger(cluster: Cluster, pool: str, answered: dict[str, list[dict[str, Any]]]) -> None:
    """Exactly N charges; every answer is the stored release; balances equal the ledger."""
    ledger = cluster.ledger()
    rows = ledger._query(
        "SELECT window_key, release_json IS NOT NULL FROM charges WHERE pool = :p", {"p": pool}
    )
    charged = {w for w, _ in rows}
    assert len(rows) == N, rows
    assert all(stored for _, stored in rows), "a charge was left without its release"
    assert ledger.unreleased() == []
    assert set(answered) == charged  # every charged week was answered, and only those
    for week, bodies in answered.items():
        [stored] = ledger.releases(window=week)  # one release per week, the same everywhere
        for body in bodies:
            assert body["release"] == stored.to_dict()
    # Balances equal the ledger: the pools' counters are the sums of the charge parts.
    total = ledger._query(
        "SELECT COALESCE(SUM(micro), 0) FROM charge_parts WHERE pool = :p", {"p": pool}
    )[0][0]
    assert ledger.lifetime_spent(pool) == int(total) == N * MICRO
    for week in charged:
        assert ledger.balance(pool, week).spent == MICRO
    charges = [e for e in ledger.history() if e.event == "charge" and e.pool == pool]
    assert len(charges) == len({e.query_id for e in charges}) == N
    ledger.close()


def run_load(
    cluster: Cluster, pool: str, seed: int, *, kill: int | None = None
) -> dict[str, list[dict[str, Any]]]:
    results = cluster.load(pool, requests(pool, seed))
    answered: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for week, status, body in results:
        assert status in (200, 429), (status, body)
        if status == 200:
            answered[week].append(body)
    return answered


def test_exactly_n_charged_and_identical_across_replicas(cluster: Cluster) -> None:
    answered = run_load(cluster, "t1", seed=1)
    assert len(answered) == N
    for week, bodies in answered.items():
        assert len({repr(b["release"]) for b in bodies}) == 1, week
    # Every replica reports the same balance, and it is the ledger's.
    budgets = [
        httpx.get(
            f"{r.url}/v1/budget", params={"week": weeks("t1")[0]}, headers=cluster.headers("t1")
        ).json()["pools"]
        for r in cluster.replicas
    ]
    assert all(b == budgets[0] for b in budgets)
    check_ledger(cluster, "t1", answered)


def test_kill_minus_nine_mid_load_loses_no_receipt(cluster: Cluster) -> None:
    """Replica 0 is killed while the load runs, then restarted; a final pass asks
    every week once more (as clients retry): still exactly N charges, each receipt
    (a 200 answer) is the stored release, nothing is charged twice."""
    import threading

    victim = cluster.replicas[0]
    done = threading.Event()
    at_kill: list[int] = []

    def killer() -> None:
        # Kill once the load is under way (a few charges are in), wherever it is.
        probe = cluster.ledger()
        count = 0
        for _ in range(1000):
            count = probe._query("SELECT COUNT(*) FROM charges WHERE pool = 't2'")[0][0]
            if count >= 3:
                break
            done.wait(0.01)
        probe.close()
        victim.kill9()
        at_kill.append(count)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        answered = run_load(cluster, "t2", seed=2)
    finally:
        thread.join()
    assert at_kill and 3 <= at_kill[0] < N, at_kill  # killed in the middle of the load
    victim.start()
    victim.wait_ready()
    final = cluster.load("t2", [(week, i % REPLICAS) for i, week in enumerate(weeks("t2"))])
    for week, status, body in final:
        assert status in (200, 429), (status, body)
        if status == 200:
            answered[week].append(body)
    check_ledger(cluster, "t2", answered)


def test_postgres_unreachable_fails_closed_and_recovers(cluster: Cluster) -> None:
    """PostgreSQL "stops" (the TCP proxy between the replicas and the server cuts
    every connection and refuses new ones): statistics answer 503 on every
    replica — fresh and cached alike, the cache being in the same database — and
    nothing is spent; when it is back, the replicas recover on their own."""
    before = run_load(cluster, "t3", seed=3)
    assert len(before) == N
    snapshot = _snapshot(cluster)
    cached_week = sorted(before)[0]
    cluster.proxy.cut()
    try:
        outage = cluster.load(
            "t3", [(w, i % REPLICAS) for i, w in enumerate([*weeks("t3")[:8], cached_week] * 2)]
        )
        assert {status for _, status, _ in outage} == {503}
        assert all(b["error"]["type"] == "ledger_unavailable" for _, _, b in outage)
        assert _snapshot(cluster) == snapshot  # nothing spent, nothing recorded
    finally:
        cluster.proxy.restore()
    # Recovery: the first request on each replica may still meet a connection the
    # cut killed mid-use; the ledger drops those before use, so every answer is 200.
    for i in range(REPLICAS):
        status, body = cluster.ask("t3", cached_week, i)
        assert status == 200, body
        assert body["release"] == before[cached_week][0]["release"]
    check_ledger(cluster, "t3", before)


def _snapshot(cluster: Cluster) -> tuple[Any, ...]:
    ledger = cluster.ledger()
    state = (
        ledger._query("SELECT query_id, status, release_json FROM charges ORDER BY query_id"),
        [(b.pool, b.window, b.spent) for b in ledger.balances()],
        ledger._query("SELECT COUNT(*) FROM audit"),
    )
    ledger.close()
    return state
