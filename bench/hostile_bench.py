"""One hostile client beside 16 normal ones: do the normal clients' latencies hold?

``dpllm serve`` (one worker, Presidio redaction on) in front of the zero-latency
upstream of ``proxy_bench.py``. Two phases of ``--seconds`` each, in the same run:

* **alone**: 16 normal clients, each sending a short chat (one message with a name)
  and reading the ~1,000-character answer, again and again;
* **with hostile**: the same 16, plus one client that keeps sending the heaviest
  request ``[server.limits]`` lets through by default — 1,000 messages holding
  390,000 characters of text, all of which must be redacted before anything is sent.

Printed: the normal clients' p50/p99 in each phase, and the ratio (the issue's goal:
p99 with the hostile client ≤ 2× p99 alone), the hostile requests completed, and
the load average (the machine is shared: compare ratios from one run, not runs).

    PYTHONPATH=$PWD .venv/bin/python bench/hostile_bench.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import proxy_bench as pb  # noqa: E402

NORMAL = 16
SENTENCE = "Emily Clark wrote from Leeds on 3 March, call her on 020 7946 0958 please. "


def heavy_body() -> dict[str, Any]:
    # every message different (no cache can help), 390 characters each
    messages = [
        {"role": "user", "content": (f"Message {i}. " + SENTENCE * 6)[:390]} for i in range(1000)
    ]
    return {"model": "fake-model", "messages": messages}


async def _phase(url: str, normal: bytes, hostile: bytes | None, seconds: float) -> dict[str, Any]:
    conns = [pb.Connection(url, normal) for _ in range(NORMAL)]
    await asyncio.gather(*(c.call() for c in conns))  # connected and warm
    latencies: list[float] = []
    heavy: list[float] = []
    deadline = time.perf_counter() + seconds
    stop = asyncio.Event()

    async def client(c: pb.Connection) -> None:
        while time.perf_counter() < deadline:
            t = time.perf_counter()
            await c.call()
            latencies.append((time.perf_counter() - t) * 1000)

    async def attacker(c: pb.Connection) -> None:
        while not stop.is_set():
            t = time.perf_counter()
            try:
                await c.call()
            except RuntimeError:  # e.g. a 504: its redaction ate the request's deadline
                c = pb.Connection(url, hostile or b"")
            heavy.append((time.perf_counter() - t) * 1000)

    tasks = []
    if hostile is not None:
        tasks.append(asyncio.ensure_future(attacker(pb.Connection(url, hostile))))
        await asyncio.sleep(0.5)  # its first request is in the pool
    await asyncio.gather(*(client(c) for c in conns))
    stop.set()
    for task in tasks:
        task.cancel()
    return {"latencies": latencies, "heavy": heavy}


def run_load(args: argparse.Namespace) -> None:
    normal = Path(args.normal).read_bytes()
    hostile = Path(args.hostile).read_bytes() if args.hostile else None
    json.dump(asyncio.run(_phase(args.url, normal, hostile, args.seconds)), sys.stdout)


def load(url: str, normal: Path, hostile: Path | None, seconds: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "load", "--url", url, "--normal", str(normal)]
    cmd += ["--seconds", str(seconds)] + (["--hostile", str(hostile)] if hostile else [])
    done = subprocess.run(cmd, capture_output=True)
    if done.returncode:
        raise SystemExit(f"the load generator failed:\n{done.stderr.decode()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main(args: argparse.Namespace) -> None:
    procs: list[subprocess.Popen[bytes]] = []
    before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        normal, hostile = folder / "normal.json", folder / "hostile.json"
        normal.write_text(json.dumps({"model": "fake-model", "messages": pb.PROMPT}))
        hostile.write_text(json.dumps(heavy_body()))
        try:
            up = pb.free_port()
            procs.append(pb.spawn("upstream", "--port", str(up)))
            pb.wait_ready(up, procs[-1])
            config = pb.write_config(folder, f"http://127.0.0.1:{up}/v1", redaction=True)
            port = pb.free_port()
            proxy = pb.spawn("-m", "dpllm", "serve", "--config", str(config), "--port", str(port))
            procs.append(proxy)
            pb.wait_ready(port, proxy)
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            alone = load(url, normal, None, args.seconds)
            beside = load(url, normal, hostile, args.seconds)
        finally:
            for proc in procs:
                pb.stop(proc)
    after = os.getloadavg()
    a, b = alone["latencies"], beside["latencies"]
    print(
        f"{NORMAL} normal clients, {args.seconds:g} s a phase; load average "
        f"{before[0]:.2f} → {after[0]:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"{'phase':<14}{'requests':>9}{'p50 ms':>9}{'p99 ms':>9}")
    print(f"{'alone':<14}{len(a):>9}{pb.q(a, 50):>9.1f}{pb.q(a, 99):>9.1f}")
    print(f"{'with hostile':<14}{len(b):>9}{pb.q(b, 50):>9.1f}{pb.q(b, 99):>9.1f}")
    print(
        f"p99 ratio {pb.q(b, 99) / pb.q(a, 99):.2f} (goal ≤ 2); p50 ratio "
        f"{pb.q(b, 50) / pb.q(a, 50):.2f}; hostile requests answered in the phase: "
        f"{len(beside['heavy'])}"
        + (f" (each {statistics_median(beside['heavy']) / 1000:.1f} s)" if beside["heavy"] else "")
    )


def statistics_median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def cli() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="role")
    g = sub.add_parser("load", help="(internal) one phase of load, latencies as JSON")
    g.add_argument("--url", required=True)
    g.add_argument("--normal", required=True)
    g.add_argument("--hostile", default="")
    g.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds per phase")
    args = ap.parse_args()
    if args.role == "load":
        run_load(args)
    else:
        main(args)


if __name__ == "__main__":
    cli()
