"""The OpenAPI document as the server behaves: every status it answers, and the limits.

FastAPI's generated document says 422 for validation errors (dpllm answers 400 in
OpenAI's error shape), omits what middleware answers (401 from the key check,
413 and 431 from the limits) and what routes answer through exceptions (429, 502,
503, 504 …), and knows nothing of ``[server.limits]``. :func:`install_openapi`
post-processes it once per app, so that a client generated from it, or a fuzzer
that checks status-code conformance against it, meets no surprise.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from dpllm.config import ServerLimits
from dpllm.server.auth import PUBLIC_PATHS

__all__ = ["ERROR_SCHEMA", "install_openapi"]

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}

_ERROR_REF = {"$ref": "#/components/schemas/Error"}
_JSON_ERROR = {"application/json": {"schema": _ERROR_REF}}

_EVERYWHERE = {
    "413": "The body is over [server.limits] max_body_bytes",
    "431": "The headers are over [server.limits] max_header_bytes",
}
_WITH_KEY = {"401": "No or unknown API key"}
_LEDGER = {"503": "The privacy-budget ledger is unavailable (nothing charged)"}
_BY_PATH: dict[str, dict[str, str]] = {
    "/v1/chat/completions": {
        "400": "Not a chat-completions request, or over a [server.limits] shape limit",
        "404": "The upstream refused the request (HTTP 404, passed through)",
        "409": "The upstream refused the request (HTTP 409, passed through)",
        "415": "The upstream refused the request (HTTP 415, passed through)",
        "422": "The upstream refused the request (HTTP 422, passed through)",
        "429": "The upstream kept rate-limiting after the proxy's retries",
        "502": "The upstream failed, or answered what dpllm will not pass on",
        "503": "No upstream model is configured",
        "504": "The upstream did not answer within the request's deadline",
    },
    "/v1/models": {
        "502": "The upstream failed or cannot be reached",
        "503": "No upstream model is configured",
        "504": "The upstream did not answer in time",
    },
    "/v1/stats/{query}": {
        "202": "Queued for approval: a ticket, no value (ask again after Retry-After)",
        "403": "Not one of your pools",
        "404": "Not a statistic of the plan, or a week that does not exist",
        "409": "The same statistic is being charged (Retry-After)",
        "429": "The pool's budget is exhausted; nothing was spent",
        **_LEDGER,
    },
    "/v1/budget": {"404": "A week that does not exist (53 in a 52-week year)", **_LEDGER},
    "/v1/admin/pending": {"403": "Not an admin key", **_LEDGER},
    "/v1/admin/tickets/{ticket}/approve": {
        "403": "Not an admin key",
        "404": "No such ticket",
        "409": "Already decided",
        **_LEDGER,
    },
    "/v1/admin/tickets/{ticket}/deny": {
        "403": "Not an admin key",
        "404": "No such ticket",
        "409": "Already decided",
        **_LEDGER,
    },
    "/healthz": {"503": "The ledger does not answer"},
}
_LDP_NOT_CONFIGURED = "Local-DP ingest is not configured ([ldp.metrics] is empty)"
# dpllm.ldp.ingest answers its own errors as {"error": code, "detail": text}
_LDP_ERROR = {
    "application/json": {
        "schema": {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
        }
    }
}
_LDP_REPORT = {
    "type": "object",
    "required": ["metric", "window", "user", "mechanism", "epsilon", "payload"],
    "properties": {
        "metric": {"type": "string", "description": "A configured [ldp.metrics] name"},
        "window": {"type": "string", "description": "ISO week, e.g. 2026-W47"},
        "user": {"type": "string"},
        "mechanism": {"type": "string", "enum": ["krr", "oue"]},
        "epsilon": {"type": "number", "description": "The metric's configured ε"},
        "payload": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
    },
}


def _ldp(path: str, op: dict[str, Any]) -> None:
    """The local-DP endpoints as :mod:`dpllm.ldp.ingest` answers them."""
    responses = op.setdefault("responses", {})
    responses["422"] = {
        "description": "An invalid report or request (dpllm.ldp.ingest's error shape)",
        "content": _LDP_ERROR,
    }
    responses["503"] = {"description": _LDP_NOT_CONFIGURED, "content": _LDP_ERROR}
    if path.endswith("/reports"):
        responses.setdefault(
            "409",
            {"description": "A second report of a user, metric and week", "content": _LDP_ERROR},
        )
        op.setdefault(
            "requestBody",
            {"required": True, "content": {"application/json": {"schema": _LDP_REPORT}}},
        )


def _respond(op: dict[str, Any], status: str, description: str, *, openai: bool) -> None:
    responses: dict[str, Any] = op.setdefault("responses", {})
    if status in responses:
        return
    entry: dict[str, Any] = {"description": description}
    if openai and status not in ("202",):
        entry["content"] = _JSON_ERROR
    responses[status] = entry


def _chat_body(schema: dict[str, Any], limits: ServerLimits) -> None:
    """The limits that positive data must respect, in the request body's schema."""
    # Only the limits answered 400: a fuzzer's negative data must meet a 400 (the
    # size limits, max_text_chars and max_body_bytes, answer 413 and are not drawn here).
    props = schema["properties"]
    messages = props["messages"]
    messages["maxItems"] = limits.max_messages
    content = messages["items"]["properties"]["content"]
    for option in content.get("anyOf", []):
        if option.get("type") == "array":
            option["maxItems"] = limits.max_content_parts
    props["dpllm"] = {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    "releases": {
                        "anyOf": [
                            {"type": "array", "items": {"type": "object"}},
                            {"type": "object", "additionalProperties": {"type": "object"}},
                        ],
                        "description": "Release.to_dict() objects (a list, or by name); "
                        "the guard checks the answer's figures against them (a malformed "
                        "release is a 400)",
                    }
                },
                "additionalProperties": False,
            },
            {"type": "null"},
        ],
        "description": 'dpllm options: {"releases": [...]}, removed before forwarding.',
    }
    props["n"] = {
        "anyOf": [{"type": "integer", "minimum": 1, "maximum": limits.max_n}, {"type": "null"}],
        "description": "Choices to generate ([server.limits] max_n at most).",
    }


def _operations(spec: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    for path, item in spec.get("paths", {}).items():
        for method, op in item.items():
            if method in {"get", "post", "put", "patch", "delete"}:
                yield path, op


def install_openapi(app: FastAPI, limits: ServerLimits) -> None:
    """Make ``app.openapi()`` return the document as the server behaves (built once)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        spec = copy.deepcopy(  # shared dicts (the chat body's schema) stay as they were
            get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
        )
        spec.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
        for path, op in _operations(spec):
            ldp = path.startswith("/v1/ldp/")  # dpllm.ldp.ingest: its own error shape
            responses = op.setdefault("responses", {})
            if "422" in responses:
                if not ldp:  # dpllm.ldp.ingest answers 422 itself for a bad report
                    del responses["422"]
                _respond(op, "400", "Invalid request (OpenAI error shape)", openai=True)
            for status, text in _EVERYWHERE.items():
                _respond(op, status, text, openai=True)
            if path not in PUBLIC_PATHS:
                for status, text in _WITH_KEY.items():
                    _respond(op, status, text, openai=True)
                op.setdefault("security", [{"HTTPBearer": []}])
            for status, text in _BY_PATH.get(path, {}).items():
                _respond(op, status, text, openai=status != "202")
            if ldp:
                _ldp(path, op)
            if path == "/v1/chat/completions":
                body = op["requestBody"]["content"]["application/json"]["schema"]
                _chat_body(body, limits)
                ok = op["responses"]["200"].setdefault("content", {})
                # each event: a chunk object, an error object, or "[DONE]"
                ok.setdefault("text/event-stream", {"schema": {}})
        schemes = spec["components"].setdefault("securitySchemes", {})
        schemes.setdefault("HTTPBearer", {"type": "http", "scheme": "bearer"})
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
