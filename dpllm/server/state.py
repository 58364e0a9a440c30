"""What the routes share: settings, the protected upstream, the ledger and the data engine.

The ledger and the data engine open lazily and are retried on the next request
when they fail, so the proxy starts (and answers chat and health) while a
database is down; their endpoints answer 503 meanwhile.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from dpllm.config import ApiKey, Settings
from dpllm.errors import LedgerUnavailable
from dpllm.ledger.factory import ManagedLedger, ensure_pools, open_ledger
from dpllm.server.metrics import MeteredLedger, Metrics
from dpllm.windows import utc_today

if TYPE_CHECKING:
    from dpllm.chat.wrapper import WrappedAsyncOpenAI
    from dpllm.data.engines import Engine
    from dpllm.server.upstream import UpstreamClient

__all__ = ["ServerState", "caller", "server_state"]

LedgerOpener = Callable[[str], ManagedLedger]


def protect_workers(configured: int) -> int:
    """Threads that run redaction and the guard: ``configured``, or one per core (at least 2).

    At least two, so that one heavy request (bounded by ``[server.limits]``) never
    holds every thread: small requests keep a thread of their own and share the
    GIL with it, slowed by at most the ratio of threads to busy ones.
    """
    if configured:
        return configured
    return max(2, os.cpu_count() or 1)


@dataclass
class _Lazy:
    """A resource opened on first use, and again after a failure."""

    opener: Callable[[], Any]
    value: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self) -> Any:
        with self.lock:
            if self.value is None:
                self.value = self.opener()
            return self.value


class ServerState:
    """Everything the proxy's routes use, built once per app.

    Args:
        settings: the validated settings.
        upstream: the protected upstream client (``None``: no model configured).
        raw_upstream: the same SDK client unwrapped (``GET /v1/models``, and
            non-streaming chat when there is no lean client).
        lean_upstream: the lean client for non-streaming chat (``None``: the
            upstream needs the SDK's client: TLS or a proxy).
        ledger_opener: opens the ledger from ``settings.ledger`` (tests inject failures).
        engine_opener: opens the data engine from ``settings.data``.
        today: the current UTC date (default: the system clock, read per
            request at this edge; tests inject a fixed date).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        upstream: WrappedAsyncOpenAI | None,
        raw_upstream: Any,
        lean_upstream: UpstreamClient | None = None,
        ledger_opener: LedgerOpener | None = None,
        engine_opener: Callable[[], Engine] | None = None,
        today: Callable[[], dt.date] | None = None,
    ) -> None:
        self.settings = settings
        self.today: Callable[[], dt.date] = today or utc_today
        self.upstream = upstream
        self.raw_upstream = raw_upstream
        self.lean_upstream = lean_upstream
        from dpllm.server.health import UpstreamProbe, sdk_probe

        self.probe = UpstreamProbe(sdk_probe(raw_upstream) if raw_upstream is not None else None)
        opener = ledger_opener or (lambda url: open_ledger(url, base_dir=settings.base_dir))

        def open_configured() -> ManagedLedger:
            ledger = opener(settings.ledger)
            ensure_pools(ledger, settings.default_pools)
            return ledger

        self.metrics = Metrics()
        self._ledger = _Lazy(open_configured)
        self._metered: tuple[Any, Any] | None = None  # (ledger, its metered view)
        self._engine = _Lazy(engine_opener or (lambda: default_engine(settings)))
        self.stats_lock = threading.Lock()  # one engine connection, shared
        # Redaction and the guard are CPU-bound and hold the GIL: more threads than
        # cores only trade CPU for lock convoys (the default pool has cores + 4); one
        # thread lets one heavy request stall every other (issue #21).
        self.limits = settings.server_limits
        self.protect_executor = ThreadPoolExecutor(
            max_workers=protect_workers(self.limits.protect_workers),
            thread_name_prefix="dpllm-protect",
        )
        salt = settings.bounds.salt
        self.salt = salt.encode() if salt else secrets.token_bytes(32)

    def ledger(self) -> ManagedLedger:
        """The ledger. Raises LedgerUnavailable (→ 503) when it cannot be opened."""
        try:
            ledger: ManagedLedger = self._ledger.get()
        except LedgerUnavailable:
            raise
        except OSError as exc:
            raise LedgerUnavailable(f"cannot open the ledger: {exc}") from exc
        metered = self._metered
        if metered is None or metered[0] is not ledger:
            metered = self._metered = (ledger, MeteredLedger(ledger, self.metrics))
        view: ManagedLedger = metered[1]  # the same methods; charges counted by pool
        return view

    def engine(self) -> Engine:
        engine: Engine = self._engine.get()
        return engine


def default_engine(settings: Settings) -> Engine:
    """The data engine ``settings.data`` describes."""
    from dpllm.data.engines import DuckDBEngine, PostgresEngine, SQLiteEngine

    data = settings.data
    if data.source == "postgres":
        return PostgresEngine(data.dsn)
    path = settings.resolve(data.path)
    if data.source == "duckdb":
        return DuckDBEngine(path)
    return SQLiteEngine(path)


async def server_state(request: Request) -> ServerState:
    """The app's :class:`ServerState` (a FastAPI dependency).

    ``async`` because it does no I/O: FastAPI runs a plain ``def`` dependency in
    its thread pool, a thread hop per request for nothing.
    """
    state: ServerState = request.app.state.dpllm
    return state


_bearer = HTTPBearer(auto_error=False, description="A dpllm API key (see `dpllm serve hash-key`).")


async def caller(
    request: Request,
    _credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),
) -> ApiKey:
    """The authenticated caller's key (the ASGI middleware did the check; no I/O here)."""
    key = request.scope.get("state", {}).get("api_key")
    if not isinstance(key, ApiKey):
        raise HTTPException(401, "missing API key: send 'Authorization: Bearer <key>'")
    return key
