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

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from dpllm.config import ApiKey
from dpllm.server.errors import status_and_body
from dpllm.server.logging import log_event
from dpllm.server.state import ServerState, caller, server_state

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
    raw = body.model_dump(exclude_unset=True)
    raw["messages"] = [m.model_dump(exclude_unset=True) for m in body.messages]
    raw["model"] = body.model or default_model
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


@router.post("/v1/chat/completions", summary="Chat completion, protected (JSON or SSE)")
async def chat_completions(
    body: ChatCompletionRequest,
    key: ApiKey = Depends(caller),
    state: ServerState = Depends(server_state),
) -> Any:
    """Forward a chat completion to the upstream with redaction and the precision guard."""
    if state.upstream is None:
        raise HTTPException(503, "no upstream model is configured ([model] provider = 'openai')")
    kwargs = forward_arguments(body, state.settings.model.model)
    log_event(
        "chat",
        analyst=key.analyst,
        model=kwargs["model"],
        stream=body.stream,
        messages=len(body.messages),
        releases=bool(body.dpllm and body.dpllm.get("releases")),
    )
    result = await state.upstream.chat.completions.create(**kwargs)
    if not body.stream:
        return JSONResponse(result.model_dump(mode="json", exclude_unset=True))
    return StreamingResponse(
        _sse(result, key.analyst),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
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
