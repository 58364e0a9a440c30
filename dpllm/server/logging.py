"""Structured JSON request logs with request ids, as pure ASGI middleware.

One line per request on the ``dpllm.server`` logger::

    {"event": "request", "request_id": "…", "method": "POST",
     "path": "/v1/chat/completions", "status": 200, "ms": 3.1,
     "analyst": "alice", "key": "sha256:3f2a9c1b",
     "model": "gpt-4o-mini", "stream": false, "messages": 2, "releases": true}

(the last fields are the route's own, from ``scope["state"]["log"]``).

No prompt or model text, no query strings, and never a key (only its hash
prefix). The request id is taken from a sane ``X-Request-ID`` header or made up,
and echoed in the response's ``X-Request-ID``. :func:`configure_json_logging` is
called by ``dpllm serve`` (the edge), never at import.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import sys
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dpllm.config import ApiKey
from dpllm.server.auth import fingerprint

__all__ = [
    "JsonFormatter",
    "RequestLogMiddleware",
    "configure_json_logging",
    "log_event",
    "new_request_id",
]

log = logging.getLogger("dpllm.server")
_SANE_ID = re.compile(r"^[A-Za-z0-9._\-]{1,64}$")
# Request ids only correlate log lines: unique, not secret. A PRNG seeded from the OS
# (per process: workers differ) instead of uuid4, whose os.urandom is a system call
# per request (tens of µs on a loaded VM).
_IDS = random.Random(os.urandom(32))


def new_request_id() -> str:
    """32 random hex digits (uuid4's length), made without a system call."""
    return f"{_IDS.getrandbits(128):032x}"


def log_event(event: str, **fields: Any) -> None:
    """Log a structured event (fields must hold no prompt text)."""
    log.info(event, extra={"dpllm": {"event": event, **fields}})


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, and the event's fields."""

    _second: int = -1
    _stamp: str = ""

    def _time(self, record: logging.LogRecord) -> str:
        second = int(record.created)  # the stamp has seconds: made once a second
        if second != self._second:
            self._stamp = self.formatTime(record, "%Y-%m-%dT%H:%M:%S")
            self._second = second
        return self._stamp

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": self._time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, "dpllm", None)
        if isinstance(fields, dict):
            payload.update(fields)
        else:
            payload["message"] = record.getMessage()
        return json.dumps(payload, ensure_ascii=False, default=str)


def configure_json_logging(level: int = logging.INFO) -> None:
    """Send ``dpllm.*`` logs to stderr as JSON lines (called by ``dpllm serve``).

    Also turns off, for the process, what no line written here uses: the caller's
    file and line (a stack walk per record), thread, process and multiprocessing
    names (``os.getpid()`` is a system call per record) — the "Optimization"
    switches of Python's logging HOWTO. Records keep those attributes, as ``None``.
    """
    logging._srcfile = None  # the HOWTO's documented switch
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("dpllm")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


class RequestLogMiddleware:
    """Assigns a request id and logs one structured line per HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming_id(scope) or new_request_id()
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        started = time.perf_counter()
        status = 500
        logged = False

        def log_request() -> None:
            nonlocal logged
            logged = True
            key = state.get("api_key")
            route_fields = state.get("log")  # what the route adds (no prompt text)
            log_event(
                "request",
                request_id=request_id,
                method=scope.get("method"),
                path=scope.get("path"),
                status=status,
                ms=round((time.perf_counter() - started) * 1000, 2),
                analyst=key.analyst if isinstance(key, ApiKey) else None,
                key=fingerprint(key.key_hash) if isinstance(key, ApiKey) else None,
                **(route_fields if isinstance(route_fields, dict) else {}),
            )

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", ()))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                log_request()  # before the client can see the end of the response
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if not logged:  # failed or disconnected before the last body message
                log_request()


def _incoming_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _SANE_ID.match(text) else None
    return None
