"""Errors as HTTP answers in OpenAI's error shape: ``{"error": {message, type, param, code}}``.

================================================  ======  =====================
error                                              status  ``error.type``
================================================  ======  =====================
no / unknown API key                               401     authentication_error
a pool or endpoint that is not the caller's        403     permission_error
unknown statistic, ticket or pool                  404     not_found
malformed request, releases, value overflow; a    400     invalid_request_error
bad, future or unfinished week (nothing spent)
over a ``[server.limits]`` size                    413     invalid_request_error
headers over ``max_header_bytes``                  431     invalid_request_error
ticket already decided, charge in progress         409     conflict
budget exhausted (nothing spent)                   429     budget_exceeded
upstream refused the request (HTTP 4xx)            4xx     upstream_error
redaction or guard failure (nothing sent)          500     dpllm_error
upstream model error / unreachable                 502     upstream_error
upstream model timeout                             504     upstream_timeout
ledger unavailable (nothing charged)               503     ledger_unavailable
================================================  ======  =====================

A queued request is not an error: 202 with ``{"status": "pending", "ticket": …}``.
Messages never contain prompt or model text.

``x-should-retry`` (read by the openai SDKs) is ``false`` on every answer a retry
cannot change (4xx) and on upstream failures (502, 504): the proxy has already
retried them within the request's deadline, and a client retrying on top
multiplies the upstream calls. 409 (charge in progress) and 503 (ledger) carry
``Retry-After``; 429 carries it when the exhausted window is the current week
(the seconds until it ends; a lifetime cap may still refuse then); 202 carries it
as the interval to ask again while an approver decides.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from dpllm.errors import (
    BudgetError,
    BudgetExceeded,
    BudgetPending,
    ChargeInProgress,
    ConfigError,
    DataError,
    DPLLMError,
    InvalidPrivacyParameter,
    InvalidText,
    InvalidWindow,
    LedgerError,
    ModelBadResponse,
    ModelError,
    ModelTimeout,
    ModelUnreachable,
    RequestRejected,
    RequestTooLarge,
    UnknownPool,
    UnknownTicket,
)
from dpllm.windows import iso_week, week_bounds

__all__ = ["NO_RETRY", "error_body", "install_error_handlers", "status_and_body"]

_HTTP_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found",
    405: "invalid_request_error",
    409: "conflict",
    422: "invalid_request_error",
    413: "invalid_request_error",
    429: "budget_exceeded",
    431: "invalid_request_error",
    503: "service_unavailable",
}


def error_body(
    message: str, type_: str, *, code: str | None = None, **extra: Any
) -> dict[str, Any]:
    """OpenAI's error JSON."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code, **extra}}


NO_RETRY = {"x-should-retry": "false"}
PENDING_RETRY_AFTER = 60
"""Seconds a 202 (queued for approval) suggests waiting before asking again."""

# Upstream HTTP statuses passed through as they are: the request itself was refused
# (not the proxy's key: 401/403 are the operator's to fix, a 502).
_PASS_THROUGH = frozenset({400, 404, 405, 409, 413, 415, 422, 429})


def _until_window_end(window: object) -> dict[str, str]:
    """``Retry-After``: the seconds until ``window`` ends, when it is the current week."""
    now = dt.datetime.now(dt.UTC)
    if not isinstance(window, str) or window != iso_week(now):
        return {}
    _, end = week_bounds(window)
    return {"Retry-After": str(max(1, math.ceil((end - now).total_seconds())))}


def status_and_body(exc: BaseException) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The status, body and headers for an exception raised while serving."""
    status, body, headers = _status_and_body(exc)
    retry_helps = status == 409 and "Retry-After" in headers  # a charge in progress
    if (400 <= status < 500 and not retry_helps) or status in (502, 504):
        headers = {**NO_RETRY, **headers}
    return status, body, headers


def _status_and_body(exc: BaseException) -> tuple[int, dict[str, Any], dict[str, str]]:
    import openai

    if isinstance(exc, BudgetPending):
        return (
            202,
            {"status": "pending", "ticket": exc.ticket, "message": str(exc)},
            {**NO_RETRY, "Retry-After": str(PENDING_RETRY_AFTER)},
        )
    if isinstance(exc, RequestRejected):
        code = "request_too_large" if isinstance(exc, RequestTooLarge) else "invalid_request"
        body = error_body(str(exc), "invalid_request_error", code=code)
        body["error"]["param"] = exc.param
        return exc.status, body, {}
    if isinstance(exc, OverflowError):
        # A value the request named is out of range (week=9999-W52 ends in year 10000).
        return (
            400,
            error_body(
                "a value in the request is out of range (a week or a number too large)",
                "invalid_request_error",
                code="invalid_request",
            ),
            {},
        )
    if isinstance(exc, BudgetExceeded):
        return (
            429,
            error_body(
                f"{exc}. Nothing was spent.",
                "budget_exceeded",
                code="budget_exceeded",
                pool=exc.pool,
                window=exc.window,
                requested=exc.requested,
                remaining=exc.remaining,
                charged=0,
            ),
            _until_window_end(exc.window),
        )
    if isinstance(exc, ChargeInProgress):
        return (
            409,
            error_body(str(exc), "conflict", code="charge_in_progress"),
            {"Retry-After": "1"},
        )
    if isinstance(exc, UnknownTicket):
        return 404, error_body(str(exc), "not_found", code="unknown_ticket"), {}
    if isinstance(exc, LedgerError):
        return (
            503,
            error_body(
                f"the privacy-budget ledger is unavailable; nothing was charged. ({exc})",
                "ledger_unavailable",
                code="ledger_unavailable",
            ),
            {"Retry-After": "5"},
        )
    if isinstance(exc, BudgetError):
        return 409, error_body(str(exc), "conflict", code="budget_conflict"), {}
    if isinstance(exc, UnknownPool):
        return 404, error_body(str(exc), "not_found", code="unknown_pool"), {}
    if isinstance(exc, InvalidPrivacyParameter | ConfigError | InvalidText | InvalidWindow):
        return 400, error_body(str(exc), "invalid_request_error", code="invalid_request"), {}
    if isinstance(exc, DataError):
        return 500, error_body(str(exc), "data_error", code="data_error"), {}
    if isinstance(exc, ModelTimeout | openai.APITimeoutError):
        return (
            504,
            error_body(
                "the upstream model timed out after the allowed retries",
                "upstream_timeout",
                code="upstream_timeout",
            ),
            {},
        )
    upstream_status = (
        exc.status_code
        if isinstance(exc, openai.APIStatusError)
        else exc.status
        if isinstance(exc, ModelError)
        else None
    )
    if upstream_status in _PASS_THROUGH:
        # The upstream refused the request itself: the client's to fix, not to retry.
        assert upstream_status is not None
        return (
            upstream_status,
            error_body(
                f"the upstream model refused the request (HTTP {upstream_status})",
                "upstream_error",
                code="upstream_rejected",
                upstream_status=upstream_status,
            ),
            {},
        )
    if isinstance(exc, openai.APIStatusError):
        return (
            502,
            error_body(
                f"the upstream model answered HTTP {exc.status_code}",
                "upstream_error",
                code="upstream_error",
                upstream_status=exc.status_code,
            ),
            {},
        )
    if isinstance(exc, ModelError) and exc.status is not None:
        return (
            502,
            error_body(
                str(exc),  # dpllm's own words: the status and the error type, no upstream text
                "upstream_error",
                code="upstream_error",
                upstream_status=exc.status,
            ),
            {},
        )
    if isinstance(exc, ModelUnreachable | openai.APIConnectionError):
        return (
            502,
            error_body(
                "the upstream model cannot be reached",
                "upstream_error",
                code="upstream_unreachable",
            ),
            {},
        )
    if isinstance(exc, ModelBadResponse):
        # dpllm's own words (the proxy's refusal of an answer), never the upstream's text
        return 502, error_body(str(exc), "upstream_error", code="upstream_bad_response"), {}
    if isinstance(exc, ModelError | openai.OpenAIError):
        return (
            502,
            error_body(
                f"the upstream model failed ({type(exc).__name__})",
                "upstream_error",
                code="upstream_error",
            ),
            {},
        )
    if isinstance(exc, DPLLMError):
        return (
            500,
            error_body(
                f"dpllm refused to answer ({type(exc).__name__}); nothing was sent to the reader",
                "dpllm_error",
                code=type(exc).__name__,
            ),
            {},
        )
    return 500, error_body("internal server error", "server_error", code="internal_error"), {}


def _respond(exc: BaseException) -> JSONResponse:
    status, body, headers = status_and_body(exc)
    return JSONResponse(body, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Map dpllm, SDK, validation and HTTP errors to OpenAI-shaped JSON."""
    import openai

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, ModelError | openai.OpenAIError):
            state = getattr(request.app.state, "dpllm", None)
            if state is not None:
                state.metrics.inc("dpllm_upstream_errors_total", error=type(exc).__name__)
        return _respond(exc)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        type_ = _HTTP_TYPES.get(
            exc.status_code, "server_error" if exc.status_code >= 500 else "invalid_request_error"
        )
        headers = dict(exc.headers or {})
        if exc.status_code < 500 or exc.status_code == 503:  # 503 here: not configured
            headers = {**NO_RETRY, **headers}
        return JSONResponse(
            error_body(str(exc.detail), type_), status_code=exc.status_code, headers=headers
        )

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
            for e in exc.errors()
        )
        return JSONResponse(
            error_body(
                f"invalid request: {problems}", "invalid_request_error", code="invalid_request"
            ),
            status_code=400,
            headers=NO_RETRY,
        )

    app.add_exception_handler(DPLLMError, on_error)
    app.add_exception_handler(OverflowError, on_error)
    app.add_exception_handler(openai.OpenAIError, on_error)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(Exception, on_error)
