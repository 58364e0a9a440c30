"""Errors as HTTP answers in OpenAI's error shape: ``{"error": {message, type, param, code}}``.

================================================  ======  =====================
error                                              status  ``error.type``
================================================  ======  =====================
no / unknown API key                               401     authentication_error
a pool or endpoint that is not the caller's        403     permission_error
unknown statistic, ticket or pool                  404     not_found
malformed request or releases; a bad, future or    400     invalid_request_error
unfinished week (nothing spent)
ticket already decided, charge in progress         409     conflict
budget exhausted (nothing spent)                   429     budget_exceeded
redaction or guard failure (nothing sent)          500     dpllm_error
upstream model error / unreachable                 502     upstream_error
upstream model timeout                             504     upstream_timeout
ledger unavailable (nothing charged)               503     ledger_unavailable
================================================  ======  =====================

A queued request is not an error: 202 with ``{"status": "pending", "ticket": …}``.
Messages never contain prompt or model text.
"""

from __future__ import annotations

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
    ModelError,
    ModelTimeout,
    ModelUnreachable,
    UnknownPool,
    UnknownTicket,
)

__all__ = ["error_body", "install_error_handlers", "status_and_body"]

_HTTP_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found",
    405: "invalid_request_error",
    409: "conflict",
    422: "invalid_request_error",
    429: "budget_exceeded",
    503: "service_unavailable",
}


def error_body(
    message: str, type_: str, *, code: str | None = None, **extra: Any
) -> dict[str, Any]:
    """OpenAI's error JSON."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code, **extra}}


def status_and_body(exc: BaseException) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The status, body and headers for an exception raised while serving."""
    import openai

    if isinstance(exc, BudgetPending):
        return 202, {"status": "pending", "ticket": exc.ticket, "message": str(exc)}, {}
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
            {},
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
        return _respond(exc)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        type_ = _HTTP_TYPES.get(
            exc.status_code, "server_error" if exc.status_code >= 500 else "invalid_request_error"
        )
        return JSONResponse(
            error_body(str(exc.detail), type_),
            status_code=exc.status_code,
            headers=dict(exc.headers or {}),
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
        )

    app.add_exception_handler(DPLLMError, on_error)
    app.add_exception_handler(openai.OpenAIError, on_error)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(Exception, on_error)
