"""``dpllm serve``: the OpenAI-compatible proxy with DP statistics and budget endpoints."""

from __future__ import annotations

from dpllm._extras import require

# Every module of this package runs this first: without the [server] extra, a clear
# MissingExtra naming `pip install "dpllm[server]"`.
for _module in ("fastapi", "aiohttp"):
    require(_module, extra="server", feature="dpllm serve (the proxy)")

from dpllm.server.app import create_app  # noqa: E402

__all__ = ["create_app"]
