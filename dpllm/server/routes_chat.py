"""``POST /v1/chat/completions`` (JSON and SSE) and ``GET /v1/models``.

Requests in OpenAI's wire format go to the configured upstream through
:func:`dpllm.wrap`'s protections: messages pseudonymised before they leave,
answers redacted, guarded when the body attaches releases
(``"dpllm": {"releases": [...]}``, removed before forwarding), regenerated, and
restored. A stream is sent as SSE chunks after the hold-back buffer; an upstream
error mid-stream sends an ``error`` event and ends **without** ``data: [DONE]``
and without the held text, so SDK clients raise instead of seeing a clean end.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

from dpllm.chat.protection import UNSET, take_dpllm_options
from dpllm.chat.wrapper import drive_async, off_loop
from dpllm.config import ApiKey, ServerLimits
from dpllm.errors import ModelBadResponse, ModelTimeout
from dpllm.server.abandon import AbandonablePool
from dpllm.server.errors import status_and_body
from dpllm.server.limits import check_answer, check_chat, check_json
from dpllm.server.logging import log_event
from dpllm.server.metrics import MeteredGuard
from dpllm.server.state import ServerState, caller, server_state

__all__ = ["ChatCompletionRequest", "parse_chat_request", "router", "serving_routes"]

if TYPE_CHECKING:
    from dpllm.chat.protection import CallState
    from dpllm.guard import Guard

router = APIRouter(tags=["chat"])
T = TypeVar("T")


class ChatMessage(BaseModel):
    """One chat message (other OpenAI fields pass through)."""

    model_config = ConfigDict(extra="allow")

    role: str = Field(min_length=1, max_length=64)
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat-completions request; unknown fields are forwarded as they are.

    The documented schema of ``POST /v1/chat/completions``; the route checks
    bodies with :func:`parse_chat_request`, which enforces the same rules.
    """

    model_config = ConfigDict(extra="allow")

    model: str | None = Field(default=None, description="Defaults to the configured model.")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    dpllm: dict[str, Any] | None = Field(
        default=None, description='dpllm options: {"releases": [Release.to_dict(), ...]}'
    )


def _create_parameters() -> frozenset[str]:
    from openai.resources.chat.completions import AsyncCompletions

    names = set(inspect.signature(AsyncCompletions.create).parameters)
    return frozenset(names - {"self", "extra_headers", "extra_query", "extra_body", "timeout"})


_KNOWN: frozenset[str] | None = None
_DEFAULT_LIMITS = ServerLimits()


def forward_arguments(wire: dict[str, Any]) -> dict[str, Any]:
    """The wire body as ``create(**kwargs)``: known parameters by name, the rest in ``extra_body``."""
    global _KNOWN
    if _KNOWN is None:
        _KNOWN = _create_parameters()
    extra: dict[str, Any] = {}
    kwargs: dict[str, Any] = {}
    for key, value in wire.items():
        if key in _KNOWN:
            kwargs[key] = value
        else:
            extra[key] = value
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _invalid(loc: tuple[str | int, ...], msg: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body", *loc), "msg": msg, "type": "value_error"}])


def parse_chat_request(raw: bytes, limits: ServerLimits = _DEFAULT_LIMITS) -> dict[str, Any]:
    """The request body, checked as :class:`ChatCompletionRequest` documents it.

    A plain JSON parse and the checks the model declares (no pydantic model is
    built: the body is forwarded as it came, and validating it into a model and
    dumping it back cost more than the rest of the route).

    Returns:
        The body as a JSON object (unknown fields kept).

    Raises:
        RequestValidationError: not a chat-completions request (→ 400).
        RequestRejected: nested too deep, a lone surrogate anywhere (key or value),
            a number out of range (``1e400``), ``n`` out of range (→ 400).
        RequestTooLarge: over ``limits`` (→ 413).
    """
    try:
        body = json.loads(raw, parse_constant=_no_constant)  # 1e400: check_json
    except RecursionError:
        raise _invalid((), "not a JSON document (nested too deeply)") from None
    except ValueError as exc:
        # Say which: an empty body, a syntax error, NaN/Infinity or a huge number.
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        why = "the body is empty" if not raw.strip() else why
        raise _invalid((), f"not a JSON document ({why})") from None
    if not isinstance(body, dict):
        raise _invalid((), "must be a JSON object")
    check_json(body, raw, limits)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _invalid(("messages",), "must be a list of at least one message")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _invalid(("messages", i), "must be an object with a role and content")
        role = message.get("role")
        if not isinstance(role, str) or not 1 <= len(role) <= 64:
            raise _invalid(("messages", i, "role"), "must be a string of 1 to 64 characters")
        content = message.get("content")
        if not (
            content is None
            or isinstance(content, str)
            or (isinstance(content, list) and all(isinstance(part, dict) for part in content))
        ):
            raise _invalid(
                ("messages", i, "content"), "must be text, a list of content parts, or null"
            )
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise _invalid(("model",), "must be a string")
    if not isinstance(body.get("stream", False), bool):
        raise _invalid(("stream",), "must be true or false")
    options = body.get("dpllm")
    if options is not None and not isinstance(options, dict):
        raise _invalid(("dpllm",), 'must be an object like {"releases": [...]}')
    check_chat(body, limits)
    return body


def _inline_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$defs`` references replaced by the definitions (for openapi_extra)."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref.removeprefix("#/$defs/")])
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    inlined: dict[str, Any] = walk(schema)
    return inlined


_REQUEST_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": _inline_defs(ChatCompletionRequest.model_json_schema())}
    },
}


@router.post(
    "/v1/chat/completions",
    summary="Chat completion, protected (JSON or SSE)",
    # The body is parsed by parse_chat_request, documented here as the model it checks.
    openapi_extra={"requestBody": _REQUEST_BODY, "security": [{"HTTPBearer": []}]},
    responses={
        400: {"description": "Not a chat-completions request (OpenAI error shape)"},
        401: {"description": "No or unknown API key"},
        502: {"description": "The upstream model failed or cannot be reached"},
        504: {"description": "The upstream model timed out"},
    },
)
async def chat_completions(request: Request) -> Any:
    """Forward a chat completion to the upstream with redaction and the precision guard."""
    key = request.scope.get("state", {}).get("api_key")
    if not isinstance(key, ApiKey):  # the ASGI middleware authenticated the caller
        raise HTTPException(401, "missing API key: send 'Authorization: Bearer <key>'")
    state: ServerState = request.app.state.dpllm
    wire = parse_chat_request(await request.body(), state.limits)
    if state.upstream is None:
        raise HTTPException(503, "no upstream model is configured ([model] provider = 'openai')")
    wire["model"] = wire.get("model") or state.settings.model.model
    if "dpllm" in wire and wire["dpllm"] is None:  # null: no options, as the schema says
        del wire["dpllm"]
    options = wire.get("dpllm")
    # On the request's own log line (RequestLogMiddleware): one line per request.
    request.state.log = {
        "model": wire["model"],
        "stream": wire.get("stream", False),
        "messages": len(wire["messages"]),
        "releases": bool(options and options.get("releases")),
    }
    # One deadline for the whole request: every upstream attempt, every wait between
    # attempts and every regeneration the guard asks for.
    deadline = asyncio.get_running_loop().time() + state.settings.model.timeout
    if not wire.get("stream"):
        answer = await _unless_disconnected(request, _complete(state, wire, deadline))
        if answer is None:  # the client is gone: no more upstream attempts, nothing to send
            return Response(status_code=499)
        return JSONResponse(answer)
    opened = _within(deadline, state.upstream.chat.completions.create(**forward_arguments(wire)))
    result = await _unless_disconnected(request, opened)
    if result is None:
        return Response(status_code=499)
    return StreamingResponse(
        _sse(result, key.analyst),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def serving_routes() -> list[BaseRoute]:
    """The routes that serve ``POST /v1/chat/completions``, to be matched before ``router``'s.

    ``router``'s route documents the endpoint (the OpenAPI document is built from
    it); this plain Starlette route, in front of it, serves the same function.
    FastAPI's request handling (dependency solving, body sniffing, its telemetry
    hooks) does nothing for a function that takes the bare ``Request`` and reads
    its own body, and cost ~10 % of the proxy's own CPU per request. Errors go
    through the same exception handlers (Starlette's route uses them as FastAPI's does).
    """
    return [
        _NamedRoute(
            "/v1/chat/completions", chat_completions, methods=["POST"], include_in_schema=False
        )
    ]


class _NamedRoute(Route):
    """A Starlette route that names itself in ``scope["route"]`` as FastAPI's do (the
    ``/metrics`` route label)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.NONE:
            child["route"] = self
        return match, child


async def _within(deadline: float, work: Awaitable[T]) -> T:
    """``work``, or ModelTimeout (504) at ``deadline`` (the SDK client's retries included)."""
    try:
        async with asyncio.timeout_at(deadline):
            return await work
    except TimeoutError:
        raise ModelTimeout(
            "the upstream model did not answer within the [model] timeout "
            "(one deadline for every attempt)"
        ) from None


async def _unless_disconnected(request: Request, work: Awaitable[T]) -> T | None:
    """``work``'s result, or ``None`` (``work`` cancelled) when the client disconnects first.

    The body has been read: the next ASGI message is ``http.disconnect``, sent by the
    server when the client closes the connection (or once the response is sent).
    ``work`` runs in this task (no task of its own, no ``asyncio.wait``): a watcher
    task cancels this one when the disconnect comes first, and the cancellation is
    taken back here (``uncancel``), so that only the watcher's own cancel is absorbed.
    """
    task = asyncio.current_task()
    assert task is not None
    gone = False

    def on_disconnect(watcher: asyncio.Future[None]) -> None:
        nonlocal gone
        if not watcher.cancelled() and watcher.exception() is None and not task.done():
            gone = True
            task.cancel()

    watcher = asyncio.ensure_future(_disconnect(request))
    watcher.add_done_callback(on_disconnect)
    try:
        result = await work
    except asyncio.CancelledError:
        if not gone:  # cancelled from outside (shutdown): not ours to absorb
            raise
        task.uncancel()
    else:
        if gone:  # the work absorbed the cancel itself: keep the task's count balanced
            task.uncancel()
        return result
    finally:
        watcher.remove_done_callback(on_disconnect)
        watcher.cancel()
    log_event("client_disconnected", path=request.url.path)
    request.app.state.dpllm.metrics.inc("dpllm_client_disconnects_total")
    return None


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _complete(state: ServerState, wire: dict[str, Any], deadline: float) -> dict[str, Any]:
    """A non-streaming completion, protected, in the wire format end to end.

    The same protection as the wrapper (:meth:`CallState.exchange_wire`, driven
    by :func:`dpllm.chat.wrapper.drive_async`), but the upstream's JSON is neither
    validated into SDK models nor dumped back. The request goes through the
    lean client (:mod:`dpllm.server.upstream`) when the upstream allows it,
    else through the SDK client's transport, retries and error mapping
    (``post(..., cast_to=bytes)``).
    """
    assert state.upstream is not None
    releases = UNSET
    if "dpllm" in wire:
        _, releases = take_dpllm_options({"extra_body": {"dpllm": wire.pop("dpllm")}})
    protection = state.upstream.protection
    # The pool's jobs stop at their next text once the request is given up (client
    # gone, failure) and, before the upstream call, at the deadline: an abandoned
    # heavy request does not keep a thread (dpllm.server.abandon).
    abandoned = threading.Event()
    loop = asyncio.get_running_loop()
    until = time.monotonic() + (deadline - loop.time())
    pool = AbandonablePool(state.protect_executor, abandoned)
    try:
        call_state = await off_loop(
            protection.offload,
            protection.begin,
            wire.pop("messages"),
            releases,
            executor=AbandonablePool(state.protect_executor, abandoned, until),
        )
        return await _exchange(state, wire, deadline, call_state, pool)
    except BaseException:
        abandoned.set()
        raise


async def _exchange(
    state: ServerState,
    wire: dict[str, Any],
    deadline: float,
    call_state: CallState,
    pool: AbandonablePool,
) -> dict[str, Any]:
    """The upstream calls and the answer's protection of :func:`_complete`."""
    assert state.upstream is not None
    protection = state.upstream.protection
    if call_state.guard is not None:
        # counts violations by rule; the same check() (duck-typed where the guard is used)
        call_state.guard = cast("Guard", MeteredGuard(call_state.guard, state.metrics))
    lean = state.lean_upstream
    client = state.raw_upstream

    async def call(messages: list[dict[str, Any]]) -> dict[str, Any]:
        body = {**wire, "messages": messages}
        if lean is not None:
            answer = await lean.post_json("/chat/completions", body, deadline=deadline)
            check_answer(answer, state.limits)
            return answer
        raw: bytes = await _within(
            deadline, client.post("/chat/completions", body=body, cast_to=bytes)
        )
        try:
            decoded = json.loads(raw)
        except ValueError as exc:
            raise ModelBadResponse(
                "the upstream's answer is not JSON; nothing was passed on"
            ) from exc
        if not isinstance(decoded, dict):
            raise ModelBadResponse("the upstream's answer is not a JSON object")
        check_answer(decoded, state.limits)
        return decoded

    return await drive_async(
        call_state.exchange_wire(), call, offload=protection.offload, executor=pool
    )


async def _sse(stream: Any, analyst: str) -> AsyncIterator[str]:
    try:
        async for chunk in stream:
            yield f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n"
    except Exception as exc:  # noqa: BLE001 - every failure ends the stream as an error
        status, body, _ = status_and_body(exc)
        log_event("stream_error", analyst=analyst, status=status, error=type(exc).__name__)
        yield f"data: {json.dumps(body)}\n\n"
        return
    finally:
        await stream.close()
    yield "data: [DONE]\n\n"


@router.get("/v1/models", summary="The upstream's models")
async def models(key: ApiKey = Depends(caller), state: ServerState = Depends(server_state)) -> Any:
    """``GET /v1/models`` passed through to the upstream."""
    if state.raw_upstream is None:
        raise HTTPException(503, "no upstream model is configured ([model] provider = 'openai')")
    page = await state.raw_upstream.models.list()
    return {"object": "list", "data": [m.model_dump(mode="json") for m in page.data]}
