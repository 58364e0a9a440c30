"""Four ``dpllm serve`` processes on loopback sharing one PostgreSQL ledger.

The replicas reach PostgreSQL through a :class:`~tests.replicas.tcp_proxy.TcpProxy`
so a test can make the database "stop" for them without stopping the machine's
server. The cluster is built once per module: a throwaway database, demo data,
a config with one pool per test, four replica processes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from dpllm.config import hash_api_key
from dpllm.ledger.postgres import PostgresLedger
from tests.replicas.tcp_proxy import TcpProxy

REPLICAS = 4
CLIENTS = 32
EPSILON = 0.1
N = 12
"""Each test's pool admits exactly N charges of EPSILON over its lifetime."""
POOLS = ("t1", "t2", "t3")
YEARS = {"t1": 2023, "t2": 2024, "t3": 2025}
"""The release cache is keyed by (query, dataset, week), not by pool: each test asks
for weeks of its own year so that no test finds another's releases."""


def weeks(pool: str) -> list[str]:
    """30 distinct statistics requests (one per week): more than N can be charged."""
    return [f"{YEARS[pool]}-W{w:02d}" for w in range(1, 31)]


ROOT = Path(__file__).resolve().parents[2]


def key(pool: str) -> str:
    return f"key-{pool}-0123456789abcdef"


def config_text(ledger_url: str) -> str:
    keys = "\n".join(
        f'[[server.keys]]\nhash = "{hash_api_key(key(p))}"\nanalyst = "ana-{p}"\npools = ["{p}"]'
        for p in POOLS
    )
    pools = "\n".join(
        f'[[pools]]\nname = "{p}"\nwindow_cap = 10.0\nlifetime_cap = {N * EPSILON:.1f}\n'
        'parent = "global"'
        for p in POOLS
    )
    return f"""
[ledger]
url = "{ledger_url}"

[data]
path = "demo.db"
dataset_id = "demo"
[data.columns]
timestamp = "ts"

[plan]
pool = "t1"
[plan.queries]
feedback_count = {EPSILON}

[redaction]
enabled = false

[[pools]]
name = "global"
window_cap = 100.0
{pools}

{keys}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Replica:
    config: Path
    port: int
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DPLLM_", "OPENAI_"))}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dpllm", "serve", "--config", str(self.config),
                 "--port", str(self.port), "--log-level", "warning"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def wait_ready(self, tries: int = 600) -> None:
        """Poll ``/healthz`` until the replica answers with its ledger open."""
        assert self.proc is not None
        for _ in range(tries):
            if self.proc.poll() is not None:
                raise RuntimeError(f"replica exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"replica did not become ready: {self.log.read_text()[-2000:]}")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()  # reaped at once: its pid is then gone, and its charges can be taken over

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()


@dataclass
class Cluster:
    direct_url: str
    proxy: TcpProxy
    replicas: list[Replica]

    def ledger(self) -> PostgresLedger:
        """A ledger handle straight to PostgreSQL (not through the proxy)."""
        return PostgresLedger(self.direct_url)

    @staticmethod
    def headers(pool: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key(pool)}"}

    def stats(self, replica: int, pool: str, week: str) -> httpx.Response:
        with httpx.Client(timeout=60) as client:
            return client.get(
                f"{self.replicas[replica].url}/v1/stats/feedback_count",
                params={"week": week, "pool": pool},
                headers=self.headers(pool),
            )

    def ask(self, pool: str, week: str, first: int) -> tuple[int, dict[str, Any]]:
        """Ask replica ``first``; on a dead replica, the next one (as a load balancer would)."""
        last: Exception | None = None
        for hop in range(REPLICAS):
            try:
                r = self.stats((first + hop) % REPLICAS, pool, week)
            except httpx.TransportError as exc:
                last = exc
                continue
            return r.status_code, r.json()
        raise AssertionError(f"no replica answered: {last}")

    def load(self, pool: str, requests: list[tuple[str, int]]) -> list[tuple[str, int, Any]]:
        """Send ``(week, replica)`` requests from CLIENTS concurrent clients."""
        with ThreadPoolExecutor(CLIENTS) as pool_:
            futures = [pool_.submit(self.ask, pool, week, rep) for week, rep in requests]
            return [(week, *f.result()) for (week, _), f in zip(requests, futures, strict=True)]


@pytest.fixture(scope="module")
def cluster(pg_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    import psycopg

    from dpllm.data.demo import generate_demo, write_demo

    name = f"dpllm_replicas_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    direct = pg_server.rsplit("/", 1)[0] + f"/{name}"
    root = tmp_path_factory.mktemp("replicas")
    write_demo(generate_demo(users=120, weeks=2, seed=5), root / "demo.db")
    proxy = TcpProxy.to_url(direct)
    config = root / "dpllm.toml"
    config.write_text(config_text(proxy.url(direct)))
    PostgresLedger(direct).close()  # migrate once before the replicas race to it
    replicas = [Replica(config, _free_port(), root / f"replica{i}.log") for i in range(REPLICAS)]
    try:
        for r in replicas:
            r.start()
        for r in replicas:
            r.wait_ready()
        yield Cluster(direct, proxy, replicas)
    finally:
        for r in replicas:
            r.stop()
        proxy.close()
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
