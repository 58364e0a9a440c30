"""Bounded work per request: the ``[server.limits]`` checks, before any real work.

Where each limit is enforced (``docs/server.md`` lists the settings):

=====================  ==========================================  ======
limit                  checked                                     answer
=====================  ==========================================  ======
``max_header_bytes``   by the HTTP server as the head arrives       431
                       (:mod:`dpllm.server.protocol`), and again
                       here, before authentication
``max_body_bytes``     here: ``Content-Length``, then every chunk  413
                       as it is received (never read past it)
``max_depth``          :func:`check_json`, on every chat body      400
lone surrogates        :func:`check_json` (``"\\ud800"`` is JSON,  400
                       but no text: it cannot be encoded)
``max_messages``,      :func:`check_chat`, before redaction        400
``max_content_parts``,
``max_n``
``max_text_chars``     :func:`check_chat`, before redaction        413
``max_text_chars``     :func:`check_answer`, on the upstream's     502
                       answer before it is redacted
=====================  ==========================================  ======

Every refusal costs what was read so far and nothing else: no key check for a
header bomb, no redaction, no upstream call, no ledger write.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dpllm.config import ServerLimits
from dpllm.errors import ModelBadResponse, RequestRejected, RequestTooLarge

__all__ = [
    "LimitsMiddleware",
    "check_answer",
    "check_chat",
    "check_json",
    "may_hold_surrogate",
    "refusal",
]

# A surrogate escaped in JSON (\ud800), or UTF-8-encoded (ED A0-BF ..: json.loads decodes
# bytes with "surrogatepass", so these become lone surrogates too).
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89abcdefABCDEF]|\xed[\xa0-\xbf]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_EMPTY_NAME = re.compile(rb"(?:^|&)=")


def refusal(status: int, message: str, code: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Headers and body of a refusal in OpenAI's error shape (no retry: same answer)."""
    body = json.dumps(
        {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": code,
            }
        }
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-should-retry", b"false"),
    ]
    return headers, body


async def _refuse(send: Send, status: int, message: str, code: str) -> None:
    headers, body = refusal(status, message, code)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class LimitsMiddleware:
    """Refuses heads over ``max_header_bytes`` (431) and bodies over ``max_body_bytes`` (413).

    Pure ASGI, outside authentication. A body announced too large is refused
    before a byte of it is read; one that grows too large while it streams in
    (chunked, or a lying client) stops the route with :class:`RequestTooLarge`.

    Args:
        app: the wrapped ASGI app.
        limits: the configured limits.
    """

    def __init__(self, app: ASGIApp, *, limits: ServerLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limits = self.limits
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string", b""))
        length: int | None = None
        for name, value in scope.get("headers", ()):
            head += len(name) + len(value) + 4
            if name == b"content-length":
                length = int(value) if value.isdigit() else None
        if head > limits.max_header_bytes:
            await _refuse(
                send,
                431,
                f"the request's headers are larger than {limits.max_header_bytes} bytes "
                "([server.limits] max_header_bytes)",
                "headers_too_large",
            )
            return
        if _EMPTY_NAME.search(scope.get("query_string", b"")):
            await _refuse(
                send, 400, "the query string has a parameter without a name", "invalid_request"
            )
            return
        cap = limits.max_body_bytes
        if length is not None and length > cap:
            await _refuse(send, 413, _body_message(cap), "request_too_large")
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    raise RequestTooLarge(_body_message(cap))
            return message

        await self.app(scope, counted, send)


def _body_message(cap: int) -> str:
    return f"the request body is larger than {cap} bytes ([server.limits] max_body_bytes)"


def check_json(value: Any, raw: bytes, limits: ServerLimits) -> None:
    """Refuse JSON nested deeper than ``max_depth``, holding a lone surrogate or a
    number out of range.

    ``raw`` is the document ``value`` was parsed from (by :func:`json.loads`: only
    its exact types occur): only when it may hold a surrogate
    (:func:`may_hold_surrogate`) are strings searched (a pair decodes to one
    character; what is left is lone, and cannot be encoded as UTF-8). A float
    that is not finite (``1e400`` parses as infinity) is refused too, in the same
    walk (no ``parse_float`` hook, which costs a Python call per number).

    Raises:
        RequestRejected: too deep, a lone surrogate, or a number out of range (→ 400).
    """
    surrogates = may_hold_surrogate(raw)
    level: list[Any] = [value]
    depth = 0
    while level:
        below: list[Any] = []
        for node in level:
            kind = node.__class__
            if kind is dict:
                if depth >= limits.max_depth:
                    raise _too_deep(limits)
                if surrogates:
                    for key in node:
                        _text(key)
                below.extend(node.values())
            elif kind is list:
                if depth >= limits.max_depth:
                    raise _too_deep(limits)
                below.extend(node)
            elif kind is float:
                if not math.isfinite(node):
                    raise RequestRejected(
                        "a number in the body is out of range (NaN and infinities are not JSON)"
                    )
            elif surrogates and kind is str:
                _text(node)
        level = below
        depth += 1


def _too_deep(limits: ServerLimits) -> RequestRejected:
    return RequestRejected(
        f"the JSON body nests deeper than {limits.max_depth} levels ([server.limits] max_depth)"
    )


def may_hold_surrogate(raw: bytes) -> bool:
    """Whether the JSON document ``raw`` may decode to a string holding a surrogate.

    False for the common case (UTF-8 without an escaped or encoded surrogate):
    one byte scan, and no string of the decoded body needs looking at. True for
    an escape (``\\udc00``), a UTF-8-encoded surrogate (``json.loads`` decodes
    bytes with ``surrogatepass``) and every other encoding (UTF-16/32, a BOM).
    """
    if json.detect_encoding(raw) != "utf-8":
        return True
    return _MAYBE_SURROGATE.search(raw) is not None


def _text(value: str) -> None:
    if _SURROGATE.search(value):
        raise RequestRejected(
            "the body holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text; "
            "send valid Unicode"
        )


def check_chat(body: dict[str, Any], limits: ServerLimits) -> None:
    """Refuse a chat request over ``max_messages``, ``max_content_parts``, ``max_n``
    (400: its shape, as the OpenAPI document states them) or ``max_text_chars`` (413).

    ``body["messages"]`` is already known to be a list of objects.
    """
    messages: list[dict[str, Any]] = body["messages"]
    if len(messages) > limits.max_messages:
        raise RequestRejected(
            f"{len(messages)} messages is more than {limits.max_messages} "
            "([server.limits] max_messages)",
            param="messages",
        )
    parts = chars = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            parts += len(content)
            chars += sum(len(p["text"]) for p in content if isinstance(p.get("text"), str))
    if parts > limits.max_content_parts:
        raise RequestRejected(
            f"{parts} content parts is more than {limits.max_content_parts} "
            "([server.limits] max_content_parts)",
            param="messages",
        )
    if chars > limits.max_text_chars:
        raise RequestTooLarge(
            f"{chars} characters of text is more than {limits.max_text_chars} "
            "([server.limits] max_text_chars)",
            param="messages",
        )
    n = body.get("n")
    if isinstance(n, float) and n.is_integer():  # 2.0 is an integer in JSON Schema's eyes
        n = body["n"] = int(n)
    if n is not None and (
        isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= limits.max_n
    ):
        raise RequestRejected(
            f"n must be an integer from 1 to {limits.max_n} ([server.limits] max_n)", param="n"
        )


def check_answer(answer: dict[str, Any], limits: ServerLimits) -> None:
    """Refuse an upstream answer with more than ``max_n`` choices or ``max_text_chars``
    characters of text in them, before redaction reads it.

    Raises:
        ModelBadResponse: the answer is too large to protect (→ 502; nothing passed on).
    """
    choices = answer.get("choices")
    if not isinstance(choices, list):
        return
    if len(choices) > limits.max_n:
        raise ModelBadResponse(
            f"the upstream answered {len(choices)} choices, more than {limits.max_n} "
            "([server.limits] max_n); nothing was passed on"
        )
    chars = 0
    stack: list[Any] = list(choices)
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            chars += len(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    if chars > limits.max_text_chars:
        raise ModelBadResponse(
            f"the upstream's answer holds more than {limits.max_text_chars} characters of "
            "text ([server.limits] max_text_chars); nothing was passed on"
        )
