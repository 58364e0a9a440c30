"""The proxy app's own CPU per chat request: ASGI calls in one event loop, upstream faked.

No sockets and no other process: uvicorn's and aiohttp's costs are left out, what
is left is dpllm's code (limits, auth, logging, metrics, the route, the field
walk) plus FastAPI/Starlette's. The upstream call is replaced by a coroutine that
encodes the body and decodes a canned answer (what the lean client does around
its HTTP exchange). Printed: the minimum over ``--rounds`` of the CPU ms per
request (a minimum of CPU time moves little when other work shares the machine).
``--rg`` attaches releases and turns Presidio redaction on (the protection steps
run in the app's pool, as served). ``--profile FILE`` writes cProfile stats
(this thread only).

    PYTHONPATH=$PWD .venv/bin/python bench/proxy_app_cpu.py [--n 500] [--rounds 7] [--rg]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import proxy_bench as pb  # noqa: E402

ANSWER = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": pb.COMPLETION},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 180, "total_tokens": 190},
    }
).encode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rg", action="store_true")
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--profile", default="", help="write cProfile stats to this file")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()

    import logging

    from dpllm.config import Settings
    from dpllm.server import create_app
    from dpllm.server.logging import configure_json_logging

    tmp = Path(tempfile.mkdtemp())
    config = pb.write_config(tmp, "http://127.0.0.1:9/v1", redaction=args.rg)
    settings = Settings.load(config)
    configure_json_logging(logging.INFO)  # one JSON line a request, as dpllm serve writes
    handler = logging.getLogger("dpllm").handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(open(os.devnull, "w"))  # noqa: SIM115
    app = create_app(settings, environ={})
    state = app.state.dpllm

    async def fake_post(path: str, body: Any, *, deadline: float | None = None) -> Any:
        json.dumps(body, allow_nan=False).encode()  # what the real client does
        await asyncio.sleep(0)
        return json.loads(ANSWER)

    state.lean_upstream.post_json = fake_post
    body: dict[str, Any] = {"model": "fake-model", "messages": pb.PROMPT}
    if args.rg:
        body["dpllm"] = {"releases": pb.releases()}
    raw = json.dumps(body).encode()
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"authorization", f"Bearer {pb.KEY}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(raw)).encode()),
    ]

    async def one() -> bytes:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/chat/completions",
            "raw_path": b"/v1/chat/completions",
            "query_string": b"",
            "root_path": "",
            "headers": list(headers),
            "client": ("127.0.0.1", 5555),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        sent = False
        done = asyncio.Event()
        out: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": raw, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                assert message["status"] == 200, message
            elif message["type"] == "http.response.body":
                out.append(message.get("body", b""))
                if not message.get("more_body"):
                    done.set()

        await app(scope, receive, send)
        return b"".join(out)

    async def run() -> None:
        first = await one()
        assert json.loads(first)["choices"][0]["message"]["content"] == pb.COMPLETION
        for _ in range(50):
            await one()
        best = float("inf")
        prof = cProfile.Profile(time.process_time) if args.profile else None
        for _ in range(args.rounds):
            c0 = time.process_time()
            if prof:
                prof.enable()
            for _ in range(args.n):
                await one()
            if prof:
                prof.disable()
            best = min(best, (time.process_time() - c0) * 1000 / args.n)
        print(f"app cpu ms/request (min of {args.rounds} rounds of {args.n}): {best:.3f}")
        if prof:
            st = pstats.Stats(prof)
            st.sort_stats("tottime").print_stats(args.top)
            st.dump_stats(args.profile)

    asyncio.run(run())
    state.protect_executor.shutdown()


if __name__ == "__main__":
    main()
