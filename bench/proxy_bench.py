"""Proxy overhead against a direct call to the same loopback upstream.

Scenarios, each with the same ~1,000-character completion from a zero-latency
loopback upstream (:class:`dpllm.testing.FakeOpenAIServer`):

* ``direct``      — client → upstream;
* ``proxy``       — client → ``dpllm serve`` (redaction off) → upstream;
* ``proxy+rg``    — client → ``dpllm serve`` (Presidio redaction, releases attached
  so the precision guard runs) → upstream;
* ``rps``         — 32 concurrent clients against ``proxy`` (and ``proxy+rg``).

Prints p50/p99 latency, overheads against ``direct`` and their ratios to the goals
(≤ 2 ms p50 without redaction, ≤ 25 ms with redaction and guard, ≥ 300 req/s),
and where the time of ``proxy+rg`` goes (redaction vs guard, timed directly).

    .venv/bin/python bench/proxy_bench.py [--n 300] [--rps-seconds 5]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from dpllm.config import Settings, hash_api_key
from dpllm.release import Cost, Release
from dpllm.testing import FakeOpenAIServer

KEY = "bench-key-0123456789"
SENTENCE = "This week about 160 responses came in and the mean rating was about 4.3 stars. "
COMPLETION = (SENTENCE * 13)[:1000]
PROMPT = [{"role": "user", "content": "Hi, I am Emily Clark. Summarise this week's feedback."}]
RESPONSES = Release(
    name="responses", values=(160.0,), intervals=((150.0, 170.0),), mechanism="discrete_laplace",
    noise_scale=4.0, cost=Cost.pure(0.5), fingerprint="fp", kind="count", unit="responses",
    seeded=True,
)  # fmt: skip
RATING = Release(
    name="mean_rating", values=(4.31,), intervals=((4.11, 4.51),), mechanism="discrete_laplace",
    noise_scale=0.1, cost=Cost.pure(0.5), fingerprint="fp2", kind="mean", unit="stars",
    seeded=True,
)  # fmt: skip


class Live:
    def __init__(self, app: Any) -> None:
        import uvicorn

        with socket.socket() as probe:  # a free port; uvicorn binds it itself
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        cfg = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="error", access_log=False, ws="none"
        )
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def settings(upstream: str, *, redaction: bool) -> Settings:
    text = f"""
[model]
provider = "openai"
base_url = "{upstream}"
api_key = "x"
max_retries = 0
[redaction]
enabled = {"true" if redaction else "false"}
[[server.keys]]
hash = "{hash_api_key(KEY)}"
analyst = "bench"
pools = ["weekly"]
"""
    return Settings.parse(text)


def timed(fn: Callable[[], None], n: int) -> list[float]:
    for _ in range(min(20, n)):
        fn()  # warm up
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def rps(url: str, body: dict[str, Any], seconds: float, workers: int = 32) -> float:
    stop = time.perf_counter() + seconds
    counts = [0] * workers

    def worker(i: int) -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as c:
            while time.perf_counter() < stop:
                r = c.post(url + "/chat/completions", json=body)
                r.raise_for_status()
                counts[i] += 1

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(worker, range(workers)))
    return sum(counts) / (time.perf_counter() - started)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--rps-seconds", type=float, default=5.0)
    args = ap.parse_args()

    from dpllm.redact import Redactor
    from dpllm.server import create_app
    from dpllm.wrap import NoRedaction

    redactor = Redactor()
    plain = {"model": "fake-model", "messages": PROMPT}
    guarded = {**plain, "dpllm": {"releases": [RESPONSES.to_dict(), RATING.to_dict()]}}
    with FakeOpenAIServer() as upstream:
        upstream.enqueue(COMPLETION, times=10_000_000)
        fast = Live(
            create_app(settings(upstream.base_url, redaction=False), redactor=NoRedaction())
        )
        full = Live(create_app(settings(upstream.base_url, redaction=True), redactor=redactor))
        auth = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(timeout=30) as c:
            direct = timed(
                lambda: (
                    c.post(upstream.base_url + "/chat/completions", json=plain).raise_for_status()
                    and None
                ),
                args.n,
            )  # noqa: E501
            proxy = timed(
                lambda: (
                    c.post(
                        fast.url + "/chat/completions", json=plain, headers=auth
                    ).raise_for_status()
                    and None
                ),
                args.n,
            )  # noqa: E501
            rg = timed(
                lambda: (
                    c.post(
                        full.url + "/chat/completions", json=guarded, headers=auth
                    ).raise_for_status()
                    and None
                ),
                max(50, args.n // 3),
            )  # noqa: E501
            check = c.post(full.url + "/chat/completions", json=guarded, headers=auth).json()
        assert check["choices"][0]["message"]["content"].startswith("This week about 160")
        rate_direct = rps(upstream.base_url, plain, args.rps_seconds)
        rate_fast = rps(fast.url, plain, args.rps_seconds)
        rate_full = rps(full.url, guarded, args.rps_seconds)
        fast.stop()
        full.stop()

    # Where proxy+rg's time goes, timed in-process on the same texts.
    from dpllm.guard import Guard
    from dpllm.redact import Vault

    red = timed(lambda: redactor.redact(COMPLETION) and None, 50)
    pseudo = timed(lambda: redactor.pseudonymise(PROMPT[0]["content"], vault=Vault()) and None, 50)
    guard = Guard([RESPONSES, RATING])
    grd = timed(lambda: guard.check(COMPLETION) and None, 50)

    d50, d99 = p(direct, 50), p(direct, 99)
    print(f"completion: {len(COMPLETION)} chars; n={args.n}")
    print(
        f"{'scenario':<12}{'p50 ms':>10}{'p99 ms':>10}{'overhead p50':>15}{'goal':>10}{'ratio':>8}"
    )
    print(f"{'direct':<12}{d50:>10.2f}{d99:>10.2f}")
    for name, values, goal in (("proxy", proxy, 2.0), ("proxy+rg", rg, 25.0)):
        over = p(values, 50) - d50
        print(
            f"{name:<12}{p(values, 50):>10.2f}{p(values, 99):>10.2f}{over:>15.2f}"
            f"{goal:>10.1f}{over / goal:>8.2f}"
        )
    print(f"requests/s, 32 clients: direct {rate_direct:.0f}; proxy {rate_fast:.0f} "
          f"(goal 300, ratio {rate_fast / 300:.2f}); proxy+rg {rate_full:.0f}")  # fmt: skip
    print(
        f"profile (p50 ms, in-process): redact 1,000-char answer {p(red, 50):.2f}; "
        f"pseudonymise prompt {p(pseudo, 50):.2f}; guard {p(grd, 50):.2f}"
    )


if __name__ == "__main__":
    main()
