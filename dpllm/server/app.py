"""The proxy's FastAPI app: OpenAI-compatible chat, DP statistics, budget, approvals.

:func:`create_app` builds the app from :class:`~dpllm.config.Settings` (the CLI
reads the config and the environment; nothing here does). Middleware is pure
ASGI: request ids and JSON logs outermost, then API-key authentication.

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models``,
``GET /v1/stats/{query}``, ``GET /v1/budget``, ``GET /v1/admin/pending``,
``POST /v1/admin/tickets/{ticket}/approve|deny``, ``/healthz``, and the
OpenAPI docs (``/docs``, ``/openapi.json``). The local-DP report endpoint
(``POST /v1/ldp/reports``) is included when :mod:`dpllm.ldp.ingest` is installed
(:func:`include_optional_routers`).
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI

from dpllm.config import Settings
from dpllm.errors import ConfigError
from dpllm.release import Cost
from dpllm.server import health
from dpllm.server.auth import ApiKeyMiddleware
from dpllm.server.errors import install_error_handlers
from dpllm.server.limits import LimitsMiddleware
from dpllm.server.logging import RequestLogMiddleware
from dpllm.server.metrics import MeteredRedactor, Metrics, MetricsMiddleware
from dpllm.server.openapi import install_openapi
from dpllm.server.state import LedgerOpener, ServerState
from dpllm.server.upstream import UpstreamClient, lean_eligible

if TYPE_CHECKING:
    from dpllm.chat.wrapper import TextRedactor
    from dpllm.data.engines import Engine

__all__ = ["OPTIONAL_ROUTERS", "create_app", "include_optional_routers"]

OPTIONAL_ROUTERS = ("dpllm.ldp.ingest",)
"""Modules whose ``router`` (a FastAPI ``APIRouter``) is included when importable."""


class _StateLedger:
    """The server's ledger for local-DP charges, opened when first needed."""

    def __init__(self, state: ServerState) -> None:
        self._state = state

    def record_local(
        self, *, user: str, window: str, metric: str, cost: Cost, analyst: str = "ldp"
    ) -> None:
        self._state.ledger().record_local(
            user=user, window=window, metric=metric, cost=cost, analyst=analyst
        )

    def local_spent(self, user: str, window: str) -> Cost:
        return self._state.ledger().local_spent(user, window)


def _ldp_ingest(settings: Settings, state: ServerState) -> Any:
    """The LDP ingest of ``[ldp.metrics]``: reports in ``[ldp] store``, each user's
    local ε recorded in the shared ledger (one report per user, metric and week)."""
    from dpllm.ldp.ingest import LDPIngest, LDPStore
    from dpllm.ldp.mechanisms import make_randomizer

    metrics = {
        m.name: make_randomizer(m.mechanism, epsilon=m.epsilon, domain=m.domain)
        for m in settings.ldp_metrics
    }
    store = LDPStore(settings.resolve(settings.ldp_store), ledger=_StateLedger(state))
    return LDPIngest(store, metrics, today=lambda: state.today())  # the server's clock


def include_optional_routers(
    app: FastAPI, modules: tuple[str, ...] = OPTIONAL_ROUTERS
) -> list[str]:
    """Include the ``router`` of each importable module; return the ones included.

    The hook for endpoints built elsewhere (``dpllm.ldp.ingest``): the server works
    without them.
    """
    included = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        router = getattr(module, "router", None)
        if isinstance(router, APIRouter):
            app.include_router(router)
            included.append(name)
    return included


def _upstream(
    settings: Settings,
    redactor: TextRedactor | None,
    environ: Mapping[str, str] | None,
    metrics: Metrics,
) -> tuple[Any, Any, UpstreamClient | None]:
    """The protected SDK client, the raw one, and the lean client when it fits the URL."""
    if settings.model.provider != "openai":
        return None, None, None
    import openai

    from dpllm.chat.wrapper import NoRedaction, wrap

    m = settings.model
    raw = openai.AsyncOpenAI(
        base_url=m.base_url,
        api_key=m.api_key or "unused",
        timeout=m.timeout,
        max_retries=m.max_retries,
    )
    if redactor is None:
        if settings.redaction_enabled:
            from dpllm.redact import Redactor

            redactor = Redactor()
        else:
            redactor = NoRedaction()
    if not isinstance(redactor, NoRedaction):  # (NoRedaction: nothing to count, nor offload)
        redactor = MeteredRedactor(redactor, metrics)
    wrapped = wrap(
        raw,
        redactor=redactor,
        unsupported=settings.guard_unsupported,
        max_attempts=m.max_attempts,
    )
    lean = None
    if m.base_url and lean_eligible(m.base_url, environ):
        from dpllm import __version__

        try:
            lean = UpstreamClient(
                m.base_url,
                api_key=m.api_key or "unused",
                timeout=m.timeout,
                max_retries=m.max_retries,
                user_agent=f"dpllm/{__version__}",
            )
        except ValueError as exc:  # never echoes the key
            raise ConfigError(str(exc), field="model") from None
    return wrapped, raw, lean


def create_app(
    settings: Settings,
    *,
    redactor: TextRedactor | None = None,
    ledger_opener: LedgerOpener | None = None,
    engine_opener: Callable[[], Engine] | None = None,
    environ: Mapping[str, str] | None = None,
    today: Callable[[], dt.date] | None = None,
) -> FastAPI:
    """The proxy app for ``settings``.

    Args:
        settings: validated settings (``Settings.load(path).from_env(os.environ)``).
        redactor: the redactor (``None``: a :class:`dpllm.redact.Redactor`, or none
            when ``[redaction] enabled = false``). Build it once; it loads spaCy.
        ledger_opener: opens the ledger from its URL (default
            :func:`dpllm.ledger.factory.open_ledger`).
        engine_opener: opens the data engine (default: from ``settings.data``).
        environ: the process environment (``dpllm serve`` passes ``os.environ``):
            its proxy variables decide, as they do for the SDK's client, whether
            non-streaming chat may use the lean upstream client
            (:func:`dpllm.server.upstream.lean_eligible`). ``None``: this process's
            ``os.environ``, which the SDK's client reads too, so both paths agree.
        today: the current UTC date, read per request (default: the system
            clock); decides which weeks are complete.

    Returns:
        The FastAPI app (serve it with uvicorn).
    """
    from dpllm import __version__
    from dpllm.server import routes_chat, routes_stats

    metrics = Metrics()
    wrapped, raw, lean = _upstream(
        settings, redactor, os.environ if environ is None else environ, metrics
    )
    state = ServerState(
        settings,
        upstream=wrapped,
        raw_upstream=raw,
        lean_upstream=lean,
        ledger_opener=ledger_opener,
        engine_opener=engine_opener,
        today=today,
    )
    state.metrics = metrics

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        state.protect_executor.shutdown(wait=False, cancel_futures=True)
        if lean is not None:
            await lean.aclose()
        if raw is not None:
            await raw.close()

    app = FastAPI(
        title="dpllm proxy",
        version=__version__,
        description=(
            "OpenAI-compatible chat completions with PII redaction and a precision guard; "
            "differentially private statistics and privacy-budget endpoints. "
            "Authenticate with `Authorization: Bearer <key>`."
        ),
        lifespan=lifespan,
    )
    app.state.dpllm = state
    install_error_handlers(app)
    install_openapi(app, settings.server_limits)
    app.include_router(health.router)
    app.include_router(routes_chat.router)
    app.router.routes[0:0] = routes_chat.serving_routes()  # served first; documented above
    app.include_router(routes_stats.router)
    include_optional_routers(app)
    if settings.ldp_metrics:
        app.state.ldp_ingest = _ldp_ingest(settings, state)
    app.add_middleware(ApiKeyMiddleware, keys=settings.api_keys)
    app.add_middleware(LimitsMiddleware, limits=settings.server_limits)  # before the key check
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(RequestLogMiddleware)  # added last: outermost
    return app
