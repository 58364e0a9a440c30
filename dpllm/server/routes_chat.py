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

import inspect
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from dpllm.config import ApiKey
from dpllm.errors import ModelBadResponse
from dpllm.protection import UNSET, take_dpllm_options
from dpllm.server.errors import status_and_body
from dpllm.server.logging import log_event
from dpllm.server.state import ServerState, caller, server_state
from dpllm.wrapper import drive_async, off_loop

__all__ = ["ChatCompletionRequest", "router"]

router = APIRouter(tags=["chat"])


class ChatMessage(BaseModel):
    """One chat message (other OpenAI fields pass through)."""

    model_config = ConfigDict(extra="allow")

    role: str = Field(min_length=1, max_length=64)
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat-completions request; unknown fields are forwarded as they are."""

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


def forward_arguments(body: ChatCompletionRequest, default_model: str) -> dict[str, Any]:
    """The request as ``create(**kwargs)``: known parameters by name, the rest in ``extra_body``."""
    global _KNOWN
    if _KNOWN is None:
        _KNOWN = _create_parameters()
    raw = wire_body(body, default_model)
    extra: dict[str, Any] = {}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _KNOWN:
            kwargs[key] = value
        else:
            extra[key] = value
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def wire_body(body: ChatCompletionRequest, default_model: str) -> dict[str, Any]:
    """The request as JSON again (only the fields the caller sent), with the model set."""
    raw = body.model_dump(exclude_unset=True)  # nested: the messages are dicts too
    raw["model"] = body.model or default_model
    return raw


@router.post("/v1/chat/completions", summary="Chat completion, protected (JSON or SSE)")
async def chat_completions(
    request: Request,
    body: ChatCompletionRequest,
    key: ApiKey = Depends(caller),
    state: ServerState = Depends(server_state),
) -> Any:
    """Forward a chat completion to the upstream with redaction and the precision guard."""
    if state.upstream is None:
        raise HTTPException(503, "no upstream model is configured ([model] provider = 'openai')")
    wire = wire_body(body, state.settings.model.model)
    # On the request's own log line (RequestLogMiddleware): one line per request.
    request.state.log = {
        "model": wire["model"],
        "stream": body.stream,
        "messages": len(body.messages),
        "releases": bool(body.dpllm and body.dpllm.get("releases")),
    }
    if not body.stream:
        return JSONResponse(await _complete(state, wire))
    kwargs = forward_arguments(body, state.settings.model.model)
    result = await state.upstream.chat.completions.create(**kwargs)
    return StreamingResponse(
        _sse(result, key.analyst),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _complete(state: ServerState, wire: dict[str, Any]) -> dict[str, Any]:
    """A non-streaming completion, protected, in the wire format end to end.

    The same protection as the wrapper (:meth:`CallState.exchange_wire`, driven
    by :func:`dpllm.wrapper.drive_async`), but the upstream's JSON is neither
    validated into SDK models nor dumped back: the SDK client is used for its
    transport, retries and error mapping only (``post(..., cast_to=bytes)``).
    """
    assert state.upstream is not None
    releases = UNSET
    if "dpllm" in wire:
        _, releases = take_dpllm_options({"extra_body": {"dpllm": wire.pop("dpllm")}})
    protection = state.upstream.protection
    pool = state.protect_executor
    call_state = await off_loop(
        protection.offload, protection.begin, wire.pop("messages"), releases, executor=pool
    )
    client = state.raw_upstream

    async def call(messages: list[dict[str, Any]]) -> dict[str, Any]:
        raw: bytes = await client.post(
            "/chat/completions", body={**wire, "messages": messages}, cast_to=bytes
        )
        try:
            decoded = json.loads(raw)
        except ValueError as exc:
            raise ModelBadResponse(
                "the upstream's answer is not JSON; nothing was passed on"
            ) from exc
        if not isinstance(decoded, dict):
            raise ModelBadResponse("the upstream's answer is not a JSON object")
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
