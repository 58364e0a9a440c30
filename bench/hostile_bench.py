"""One hostile client beside 16 normal ones: do the normal clients' latencies hold?

``dpllm serve`` (one worker, Presidio redaction on) in front of the zero-latency
upstream of ``proxy_bench.py``. Two phases of ``--seconds`` each, in the same run:

* **alone**: 16 normal clients, each sending a short chat (one message with a name)
  and reading the ~1,000-character answer, again and again;
* **with hostile**: the same 16, plus one client that keeps sending the heaviest
  request ``[server.limits]`` lets through by default — 1,000 messages holding
  390,000 characters of text, all of which must be redacted before anything is sent.

The phases alternate (``--rounds`` times: alone, with hostile, alone, …, ending
alone), so that a hostile phase is compared with the alone phases on either side
of it, measured minutes apart at most: on a shared machine the load drifts
between phases, and a ratio of neighbours drifts least.

Printed, per configuration: the normal clients' p50/p99 in each phase, the p99
ratio of each hostile phase to its neighbours (the issue's goal: ≤ 2), the normal
requests answered per second, and the CPU the server spent (``cpu ms/normal``:
its CPU time over the phase ÷ normal requests answered; with the hostile client
this includes the heavy work, so it says how much of the server's CPU the heavy
request took). ``--control`` runs the same phases a second time with
``protect_workers = 1`` (one redaction thread: the configuration before issue
#21), which must fail the goal: it shows that the bench can see head-of-line
blocking at all, on this machine, in this run.

    PYTHONPATH=$PWD .venv/bin/python bench/hostile_bench.py [--seconds 10]
        [--rounds 2] [--control]
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

    errors: list[str] = []

    async def client(c: pb.Connection) -> None:
        while time.perf_counter() < deadline:
            t = time.perf_counter()
            try:
                await c.call()
            except RuntimeError as exc:  # a 504: queued past the request's deadline
                errors.append(str(exc)[:60])
                c = pb.Connection(url, normal)
            latencies.append((time.perf_counter() - t) * 1000)  # an error's wait counts too

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
    return {"latencies": latencies, "heavy": heavy, "errors": errors}


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


def run_config(
    folder: Path, upstream: str, args: argparse.Namespace, protect_workers: int | None
) -> list[tuple[str, dict[str, Any]]]:
    """The alternating phases against one ``dpllm serve`` (``protect_workers``: None = default)."""
    normal, hostile = folder / "normal.json", folder / "hostile.json"
    config = pb.write_config(folder, upstream, redaction=True)
    if protect_workers is not None:
        with config.open("a") as f:
            f.write(f"[server.limits]\nprotect_workers = {protect_workers}\n")
    port = pb.free_port()
    proxy = pb.spawn("-m", "dpllm", "serve", "--config", str(config), "--port", str(port))
    phases: list[tuple[str, dict[str, Any]]] = []
    try:
        pb.wait_ready(port, proxy)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        for i in range(2 * args.rounds + 1):
            name = "alone" if i % 2 == 0 else "with hostile"
            cpu = pb.cpu_seconds(proxy.pid)
            started = time.perf_counter()
            result = load(url, normal, hostile if i % 2 else None, args.seconds)
            result["cpu"] = pb.cpu_seconds(proxy.pid) - cpu
            result["wall"] = time.perf_counter() - started
            result["load"] = os.getloadavg()[0]
            phases.append((name, result))
            print(f"({protect_workers or 'default'} threads) {name}: done", file=sys.stderr)
    finally:
        pb.stop(proxy)
    return phases


def report(title: str, phases: list[tuple[str, dict[str, Any]]]) -> None:
    print(title)
    print(
        f"{'phase':<14}{'requests':>9}{'req/s':>7}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'cpu ms/normal':>15}{'heavy done':>11}{'errors':>7}{'load':>6}"
    )
    for name, r in phases:
        lat = r["latencies"]
        heavy = f"{len(r['heavy'])}" if name != "alone" else ""
        print(
            f"{name:<14}{len(lat):>9}{len(lat) / r['wall']:>7.0f}{pb.q(lat, 50):>9.1f}"
            f"{pb.q(lat, 99):>9.1f}{r['cpu'] * 1000 / max(1, len(lat)):>15.1f}{heavy:>11}"
            f"{len(r['errors']):>7}{r['load']:>6.1f}"
        )
    ratios = []
    for i in range(1, len(phases), 2):
        hostile = phases[i][1]["latencies"]
        neighbours = phases[i - 1][1]["latencies"] + phases[i + 1][1]["latencies"]
        ratios.append(
            (pb.q(hostile, 99) / pb.q(neighbours, 99), pb.q(hostile, 50) / pb.q(neighbours, 50))
        )
    text = "; ".join(f"p99 ×{r99:.2f} (p50 ×{r50:.2f})" for r99, r50 in ratios)
    print(f"with hostile ÷ the alone phases beside it: {text}; goal p99 ≤ ×2")


def main(args: argparse.Namespace) -> None:
    procs: list[subprocess.Popen[bytes]] = []
    before = os.getloadavg()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "normal.json").write_text(
            json.dumps({"model": "fake-model", "messages": pb.PROMPT})
        )
        (folder / "hostile.json").write_text(json.dumps(heavy_body()))
        try:
            up = pb.free_port()
            procs.append(pb.spawn("upstream", "--port", str(up)))
            pb.wait_ready(up, procs[-1])
            upstream = f"http://127.0.0.1:{up}/v1"
            runs.append(("default protect_workers", run_config(folder, upstream, args, None)))
            if args.control:
                runs.append(("control: protect_workers = 1", run_config(folder, upstream, args, 1)))
        finally:
            for proc in procs:
                pb.stop(proc)
    after = os.getloadavg()
    print(
        f"{NORMAL} normal clients, {args.seconds:g} s a phase; load average "
        f"{before[0]:.2f} → {after[0]:.2f} on {os.cpu_count()} CPUs"
    )
    for title, phases in runs:
        report(title, phases)


def cli() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="role")
    g = sub.add_parser("load", help="(internal) one phase of load, latencies as JSON")
    g.add_argument("--url", required=True)
    g.add_argument("--normal", required=True)
    g.add_argument("--hostile", default="")
    g.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds per phase")
    ap.add_argument("--rounds", type=int, default=2, help="hostile phases (alone before/after)")
    ap.add_argument(
        "--control", action="store_true", help="again with protect_workers = 1 (must fail)"
    )
    args = ap.parse_args()
    if args.role == "load":
        run_load(args)
    else:
        main(args)


if __name__ == "__main__":
    cli()
