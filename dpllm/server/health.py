"""``/healthz`` and ``/metrics``: whether the ledger answers and the upstream is reachable.

The upstream is probed with ``GET {base_url}/models`` (no retries, a short timeout)
at most once per :data:`PROBE_TTL` seconds; between probes the last result is
reported with its age, so a load balancer polling every second does not turn into
an upstream load. The ledger is read (not just opened) on every call: a
PostgreSQL ledger opened earlier may have lost its server since.

=========================  ======  ==================================================
state                      status  body
=========================  ======  ==================================================
ledger and upstream ok     200     ``"status": "ok"``
upstream not reachable     200     ``"status": "degraded"`` (statistics still work)
ledger unavailable         503     ``"status": "degraded"``
=========================  ======  ==================================================
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse

from dpllm.errors import DPLLMError
from dpllm.server.state import ServerState, server_state

__all__ = ["PROBE_TIMEOUT", "PROBE_TTL", "UpstreamProbe", "router"]

PROBE_TTL = 15.0
"""Seconds a probe's result is reused."""

PROBE_TIMEOUT = 2.0
"""Seconds a probe may take."""

router = APIRouter(tags=["health"])


class UpstreamProbe:
    """The upstream's reachability, probed at most once per ``ttl`` seconds.

    Args:
        probe: one check (raises when the upstream cannot be reached or answers an
            error); ``None``: no upstream is configured.
        ttl: seconds a result is reused.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        probe: Callable[[], Awaitable[None]] | None,
        *,
        ttl: float = PROBE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._probe = probe
        self._ttl = ttl
        self._clock = clock
        self._checked: float | None = None
        self._status = "unknown"
        self.probes = 0

    async def status(self) -> tuple[str, float | None]:
        """``("ok" | "unreachable" | "error" | "not_configured", seconds since the probe)``."""
        if self._probe is None:
            return "not_configured", None
        now = self._clock()
        if self._checked is None or now - self._checked >= self._ttl:
            self.probes += 1
            try:
                await self._probe()
            except (ConnectionError, TimeoutError):
                self._status = "unreachable"
            except Exception as exc:  # noqa: BLE001 - an answer, but an error one
                self._status = _classify(exc)
            else:
                self._status = "ok"
            self._checked = now = self._clock()
        return self._status, round(now - self._checked, 3)


def _classify(exc: Exception) -> str:
    import openai

    if isinstance(exc, openai.APIConnectionError):  # timeouts included
        return "unreachable"
    if isinstance(exc, openai.APIStatusError):
        return f"error (HTTP {exc.status_code})"
    return "error"


def sdk_probe(raw: Any) -> Callable[[], Awaitable[None]]:
    """A probe through the SDK client ``raw``: ``GET /models``, once, ``PROBE_TIMEOUT`` s."""
    quick = raw.with_options(timeout=PROBE_TIMEOUT, max_retries=0)

    async def probe() -> None:
        await quick.models.list()

    return probe


def _ledger_ok(state: ServerState) -> bool:
    try:
        state.ledger().history(limit=1)
    except DPLLMError:
        return False
    return True


@router.get("/healthz", summary="Ledger health and upstream reachability (no key needed)")
async def healthz(state: ServerState = Depends(server_state)) -> Any:
    """200 when the ledger answers (``degraded`` if the upstream does not); 503 when not."""
    ledger_ok = await run_in_threadpool(_ledger_ok, state)
    upstream, age = await state.probe.status()
    healthy = ledger_ok and upstream in ("ok", "not_configured")
    body = {
        "status": "ok" if healthy else "degraded",
        "ledger": "ok" if ledger_ok else "unavailable",
        "upstream": upstream,
        "upstream_checked_seconds_ago": age,
    }
    return JSONResponse(body, status_code=200 if ledger_ok else 503)


@router.get(
    "/metrics",
    summary="Prometheus metrics (counts and durations only; an admin key)",
    response_class=PlainTextResponse,
    responses={403: {"description": "Not an admin key"}},
)
async def metrics(request: Request, state: ServerState = Depends(server_state)) -> Any:
    """The process's counters in Prometheus' text format."""
    key = request.scope.get("state", {}).get("api_key")
    if key is None:
        raise HTTPException(401, "missing API key: send 'Authorization: Bearer <key>'")
    if not key.admin:
        raise HTTPException(403, "this endpoint needs an admin key")
    return PlainTextResponse(
        state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8"
    )
