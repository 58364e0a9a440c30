"""Proxy overhead and throughput against a direct call, each party in its own process.

Three processes besides this one (which only starts them and prints the table):

* the **upstream**: a zero-latency chat-completions endpoint (a tiny ASGI app on
  uvicorn, answering every request with the same ~1,000-character completion in
  OpenAI's wire format);
* the **proxies**: ``dpllm serve --config … [--workers N]``, run as the CLI
  (uvicorn, JSON request logs), without redaction (``proxy``) and with Presidio
  redaction and the precision guard (``proxy+rg``: releases attached to every
  request), each with one worker process and with ``--workers 2`` (``×2``);
* the **load generator**: asyncio keep-alive HTTP/1.1 clients written against the
  socket (no client library in the measured path), one client for latency, 32
  concurrent clients for throughput, after a warm-up.

Scenarios: ``direct`` (client → upstream), ``proxy``, ``proxy×2``, ``proxy+rg``
and ``proxy+rg×2`` (client → proxy → upstream). Overheads are p50/p99 minus the
direct call's, measured in the same run; ratios are against the goals (≤ 2 ms
p50 without redaction, ≤ 25 ms p50 with redaction and guard, ≥ 300 requests/s
with 32 clients) and against the direct call. The ``cpu`` columns are the CPU
milliseconds the server's processes (all workers) spent per timed request: unlike
latency, they hardly move when other work shares the machine. The machine's
load average is printed: on a shared machine run it a few times and keep the
quietest run.

    .venv/bin/python bench/proxy_bench.py [--n 500] [--seconds 5] [--skip-rg]
        [--skip-workers] [--skip-profile]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KEY = "bench-key-0123456789"
SENTENCE = "This week about 160 responses came in and the mean rating was about 4.3 stars. "
COMPLETION = (SENTENCE * 13)[:1000]
PROMPT = [{"role": "user", "content": "Hi, I am Emily Clark. Summarise this week's feedback."}]
CLIENTS = 32


def releases() -> list[dict[str, Any]]:
    from dpllm.release import Cost, Release

    responses = Release(
        name="responses", values=(160.0,), intervals=((150.0, 170.0),),
        mechanism="discrete_laplace", noise_scale=4.0, cost=Cost.pure(0.5), fingerprint="fp",
        kind="count", unit="responses", seeded=True,
    )  # fmt: skip
    rating = Release(
        name="mean_rating", values=(4.31,), intervals=((4.11, 4.51),),
        mechanism="discrete_laplace", noise_scale=0.1, cost=Cost.pure(0.5), fingerprint="fp2",
        kind="mean", unit="stars", seeded=True,
    )  # fmt: skip
    return [responses.to_dict(), rating.to_dict()]


# -- the upstream: zero latency, a few microseconds per request --------------------------


async def upstream_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A chat-completions endpoint that answers :data:`COMPLETION` at once."""
    if scope["type"] != "http":
        return
    more = True
    while more:  # drain the request body
        message = await receive()
        more = message.get("more_body", False)
    path = scope["path"].rstrip("/")
    if path.endswith("/chat/completions"):
        payload: dict[str, Any] = {
            "id": f"chatcmpl-{time.monotonic_ns():x}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "fake-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": COMPLETION},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 180, "total_tokens": 190},
        }
        status = 200
    elif path.endswith("/models"):
        model = {"id": "fake-model", "object": "model", "created": 0, "owned_by": "bench"}
        payload, status = {"object": "list", "data": [model]}, 200
    else:
        payload, status = {"error": {"message": "not found"}}, 404
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve_upstream(port: int) -> None:
    import uvicorn

    uvicorn.run(
        upstream_app, host="127.0.0.1", port=port, log_level="error", access_log=False,
        ws="none", lifespan="off",
    )  # fmt: skip


# -- the proxy: `dpllm serve`, as the CLI runs it --------------------------------------


def write_config(folder: Path, upstream: str, *, redaction: bool) -> Path:
    """A dpllm.toml for the proxy (its ledger in ``folder``)."""
    from dpllm.config import hash_api_key

    config = folder / f"dpllm-{'rg' if redaction else 'plain'}.toml"
    config.write_text(
        f"""
ledger = {{ url = "ledger.db" }}
[model]
provider = "openai"
base_url = "{upstream}"
api_key = "x"
[redaction]
enabled = {"true" if redaction else "false"}
[[server.keys]]
hash = "{hash_api_key(KEY)}"
analyst = "bench"
pools = ["weekly"]
"""
    )
    return config


# -- the load generator: raw keep-alive HTTP/1.1 over asyncio ---------------------------

_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)


class Connection:
    """One keep-alive connection sending the same request again and again."""

    def __init__(self, url: str, body: bytes) -> None:
        m = re.fullmatch(r"http://([^:/]+):(\d+)(/.*)", url)
        assert m, url
        self.host, self.port, path = m.group(1), int(m.group(2)), m.group(3)
        self.request = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def call(self) -> bytes:
        try:
            return await self._call()
        except (asyncio.IncompleteReadError, ConnectionError):
            if self.writer is None:
                raise
            self.writer.close()  # the server closed an idle keep-alive connection
            self.reader = self.writer = None
            return await self._call()

    async def _call(self) -> bytes:
        if self.writer is None or self.reader is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            self.writer.get_extra_info("socket").setsockopt(
                socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
            )
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        m = _LENGTH.search(head)
        body = await self.reader.readexactly(int(m.group(1))) if m else b""
        if not head.startswith(b"HTTP/1.1 200") or m is None:
            raise RuntimeError(f"unexpected response: {head[:40]!r} {body[:300]!r}")
        if b"\r\nconnection: close" in head.lower():
            self.writer.close()
            self.reader = self.writer = None
        return body


async def _load(
    url: str, body: bytes, *, clients: int, n: int, seconds: float, pid: int = 0
) -> dict[str, Any]:
    conns = [Connection(url, body) for _ in range(clients)]
    first = await conns[0].call()

    async def warm(c: Connection) -> None:  # every connection open, every code path hot
        for _ in range(max(3, 60 // clients)):
            await c.call()

    await asyncio.gather(*(warm(c) for c in conns))
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds if seconds else float("inf")

    async def worker(c: Connection, quota: int) -> None:
        while quota and time.perf_counter() < deadline:
            t = time.perf_counter()
            await c.call()
            latencies.append((time.perf_counter() - t) * 1000)
            quota -= 1

    quota = n if n else -1
    cpu = cpu_seconds(pid) if pid else 0.0
    started = time.perf_counter()
    await asyncio.gather(*(worker(c, quota) for c in conns))
    elapsed = time.perf_counter() - started
    # the server's CPU over the timed requests only (not the warm-up)
    cpu = cpu_seconds(pid) - cpu if pid else 0.0
    return {"latencies": latencies, "elapsed": elapsed, "first": first.decode(), "cpu": cpu}


def run_load(args: argparse.Namespace) -> None:
    body = Path(args.body).read_bytes()
    out = asyncio.run(
        _load(
            args.url,
            body,
            clients=args.clients,
            n=args.requests,
            seconds=args.seconds,
            pid=args.pid,
        )
    )
    json.dump(out, sys.stdout)


# -- orchestration ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def spawn(*args: str) -> subprocess.Popen[bytes]:
    """A process of this script (``upstream``) or of the dpllm CLI (``-m dpllm serve …``)."""
    cmd = [sys.executable, *args] if args[0] == "-m" else [sys.executable, __file__, *args]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 180.0) -> None:
    """Until the port answers and every process of the server is idle (all workers loaded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"a bench server exited early (status {proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if not s.recv(64):
                    continue
        except OSError:
            time.sleep(0.1)
            continue
        while time.monotonic() < deadline:
            before = cpu_seconds(proc.pid)
            time.sleep(0.5)
            if cpu_seconds(proc.pid) - before < 0.05:
                return
        break
    raise SystemExit(
        f"port {port} did not answer (or its server did not settle) in {timeout:.0f} s"
    )


def load(
    url: str, body: Path, *, clients: int, n: int = 0, seconds: float = 0, pid: int = 0
) -> dict[str, Any]:
    """One load-generator process; its latencies (ms), elapsed time and, when ``pid`` is
    given, the CPU seconds that process and its children spent while they were timed."""
    cmd = [sys.executable, __file__, "load", "--url", url, "--body", str(body)]
    cmd += ["--clients", str(clients), "--requests", str(n), "--seconds", str(seconds)]
    cmd += ["--pid", str(pid)]
    done = subprocess.run(cmd, capture_output=True)
    if done.returncode:
        raise SystemExit(f"the load generator failed:\n{done.stderr.decode()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its descendants so far (Linux; 0 elsewhere)."""
    stats: dict[int, tuple[int, float]] = {}  # pid → (parent, cpu seconds)
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    total, frontier = 0.0, [pid]
    while frontier:
        current = frontier.pop()
        if current in stats:
            total += stats[current][1]
        frontier.extend(child for child, (parent, _) in stats.items() if parent == current)
    return total


def q(values: list[float], pct: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def profile_rg(n: int = 30) -> str:
    """Where proxy+rg's time goes: the protection steps timed directly, in-process."""
    from dpllm.guard import Guard
    from dpllm.redact import Redactor, Vault
    from dpllm.release import Release

    redactor = Redactor()
    guard = Guard([Release.from_dict(r) for r in releases()])

    def med(fn: Callable[[], object]) -> float:
        fn()
        out = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1000)
        return statistics.median(out)

    red = med(lambda: redactor.redact(COMPLETION))
    pseudo = med(lambda: redactor.pseudonymise(PROMPT[0]["content"], vault=Vault()))
    grd = med(lambda: guard.check(COMPLETION))
    return (
        f"in-process p50 ms: redact the 1,000-char answer {red:.1f}; "
        f"pseudonymise the prompt {pseudo:.1f}; guard {grd:.1f}"
    )


@dataclass(frozen=True)
class Scenario:
    name: str
    redaction: bool = False
    workers: int = 0  # 0: the direct call (no proxy)

    @property
    def goal(self) -> float | None:
        """The p50 overhead goal (ms)."""
        return None if not self.workers else 25.0 if self.redaction else 2.0


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    out = [Scenario("direct"), Scenario("proxy", workers=1)]
    if not args.skip_workers:
        out.append(Scenario("proxy×2", workers=2))
    if not args.skip_rg:
        out.append(Scenario("proxy+rg", redaction=True, workers=1))
        if not args.skip_workers:
            out.append(Scenario("proxy+rg×2", redaction=True, workers=2))
    return out


def main(args: argparse.Namespace) -> None:
    plain = {"model": "fake-model", "messages": PROMPT}
    guarded = {**plain, "dpllm": {"releases": releases()}}
    procs: list[subprocess.Popen[bytes]] = []
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain_body, guarded_body = folder / "plain.json", folder / "guarded.json"
        plain_body.write_text(json.dumps(plain))
        guarded_body.write_text(json.dumps(guarded))
        try:
            up = free_port()
            procs.append(spawn("upstream", "--port", str(up)))
            wait_ready(up, procs[-1])
            upstream = f"http://127.0.0.1:{up}/v1"
            for sc in scenarios(args):
                if sc.workers:  # one proxy at a time: the others would only take memory
                    port = free_port()
                    config = write_config(folder, upstream, redaction=sc.redaction)
                    proxy = spawn(
                        "-m", "dpllm", "serve", "--config", str(config), "--port", str(port),
                        "--workers", str(sc.workers),
                    )  # fmt: skip
                    procs.append(proxy)
                    wait_ready(port, proxy)
                    base, pid = f"http://127.0.0.1:{port}/v1", proxy.pid
                else:
                    base, pid = upstream, procs[0].pid
                body = guarded_body if sc.redaction else plain_body
                n = max(60, args.n // 5) if sc.redaction else args.n
                url = base + "/chat/completions"
                one = load(url, body, clients=1, n=n, pid=pid)
                many = load(url, body, clients=CLIENTS, seconds=args.seconds, pid=pid)
                # the server's CPU per timed request (robust to a busy machine); the
                # warm-up is not counted (it was, in the 32-client column, before: up to
                # 2x too much when few requests fit in the timed seconds)
                for result in (one, many):
                    result["cpu_ms"] = result["cpu"] * 1000 / max(1, len(result["latencies"]))
                content = json.loads(one["first"])["choices"][0]["message"]["content"]
                assert content == COMPLETION, f"{sc.name}: the answer changed: {content[:80]!r}"
                rows.append((sc, one, many))
                if sc.workers:
                    procs.remove(proxy)
                    stop(proxy)
        finally:
            for proc in procs:
                stop(proc)
    load_after = os.getloadavg()

    d = rows[0][1]["latencies"]
    d50, d99 = q(d, 50), q(d, 99)
    d_rps = len(rows[0][2]["latencies"]) / rows[0][2]["elapsed"]
    print(f"completion {len(COMPLETION)} chars; n={args.n} (1 client), {args.seconds:g} s "
          f"({CLIENTS} clients); load average {load_before[0]:.2f} → {load_after[0]:.2f} "
          f"on {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'':<12}{'—— 1 client ——':^32}{'—— ' + str(CLIENTS) + ' clients ——':^34}")
    print(f"{'scenario':<12}{'p50':>7}{'p99':>7}{'+p50':>7}{'+p99':>7}{'goal':>6}{'cpu':>6}"
          f"{'req/s':>8}{'p50':>8}{'p99':>8}{'×direct':>9}{'goal':>6}{'cpu':>6}")  # fmt: skip
    for sc, one, many in rows:
        lat, lat32 = one["latencies"], many["latencies"]
        rate = len(lat32) / many["elapsed"]
        over50, over99 = q(lat, 50) - d50, q(lat, 99) - d99
        goal = sc.goal
        g = f"{over50 / goal:.2f}" if goal else ""
        print(f"{sc.name:<12}{q(lat, 50):>7.2f}{q(lat, 99):>7.2f}"
              f"{over50 if goal else 0:>7.2f}{over99 if goal else 0:>7.2f}{g:>6}{one['cpu_ms']:>6.2f}"
              f"{rate:>8.0f}{q(lat32, 50):>8.1f}{q(lat32, 99):>8.1f}"
              f"{rate / d_rps:>9.2f}{rate / 300:>6.2f}{many['cpu_ms']:>6.2f}")  # fmt: skip
    print(
        "ms; +p50/+p99: overhead over direct; goal: overhead/goal (≤ 1 meets it) and "
        "req/s ÷ 300 (≥ 1 meets it); ×direct: req/s ÷ direct req/s;\n"
        "cpu: CPU ms per request spent by the server's processes, all workers (the upstream "
        "for direct); ×2: dpllm serve --workers 2"
    )
    if not args.skip_rg and not args.skip_profile:
        print(profile_rg())


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def cli() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="role")
    u = sub.add_parser("upstream", help="(internal) serve the zero-latency upstream")
    u.add_argument("--port", type=int, required=True)
    g = sub.add_parser("load", help="(internal) generate load, print latencies as JSON")
    g.add_argument("--url", required=True)
    g.add_argument("--body", required=True)
    g.add_argument("--clients", type=int, default=1)
    g.add_argument("--requests", type=int, default=0)
    g.add_argument("--seconds", type=float, default=0.0)
    g.add_argument("--pid", type=int, default=0, help="the server process to take CPU of")
    ap.add_argument("--n", type=int, default=500, help="requests timed with one client")
    ap.add_argument("--seconds", type=float, default=5.0, help="seconds of 32-client load")
    ap.add_argument("--skip-rg", action="store_true", help="no redaction+guard scenarios")
    ap.add_argument("--skip-workers", action="store_true", help="no --workers 2 scenarios")
    ap.add_argument("--skip-profile", action="store_true", help="no in-process breakdown")
    args = ap.parse_args()
    if args.role == "upstream":
        serve_upstream(args.port)
    elif args.role == "load":
        run_load(args)
    else:
        main(args)


if __name__ == "__main__":
    cli()
