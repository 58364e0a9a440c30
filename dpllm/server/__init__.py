"""``dpllm serve``: the OpenAI-compatible proxy with DP statistics and budget endpoints."""

from __future__ import annotations

from dpllm.server.app import create_app

__all__ = ["create_app"]
