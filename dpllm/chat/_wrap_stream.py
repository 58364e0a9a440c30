"""Guarded streams: ``ChatCompletionChunk``\\ s whose every model-written field was made safe.

:class:`GuardedStream` (sync) and :class:`AsyncGuardedStream` wrap the SDK's
``Stream`` / ``AsyncStream``. Each chunk is dumped to the wire format and goes
through the call's :class:`~dpllm.chat.fields.StreamGate` (one hold-back per text
field per choice, tool arguments held whole until the choice finishes,
``logprobs`` dropped), the same gate the proxy's SSE uses.

Fail closed: an exception from the upstream discards every held character and
propagates; a stream that ends while a choice has not finished raises
:class:`~dpllm.errors.ModelBadResponse` and emits nothing more.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from dpllm.chat.fields import Pending
from dpllm.errors import ModelBadResponse

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionChunk

    from dpllm.chat.protection import CallState

__all__ = ["AsyncGuardedStream", "GuardedStream"]


def _where(exc: Any) -> str:
    first = exc.errors()[0]["loc"] if exc.errors() else ()
    return ".".join(str(p) for p in first) or "the top level"


def _not_json(exc: json.JSONDecodeError) -> ModelBadResponse:
    return ModelBadResponse(
        f"the upstream sent a stream event that is not JSON ({exc.msg}); the stream was stopped"
    )


def _parsed(upstream: Any) -> Iterator[Any]:
    """The SDK's chunks; an event it cannot parse as JSON is ModelBadResponse."""
    it = iter(upstream)
    while True:
        try:
            chunk = next(it)
        except StopIteration:
            return
        except json.JSONDecodeError as exc:
            raise _not_json(exc) from None
        yield chunk


async def _aparsed(upstream: Any) -> AsyncIterator[Any]:
    it = upstream.__aiter__()
    while True:
        try:
            chunk = await it.__anext__()
        except StopAsyncIteration:
            return
        except json.JSONDecodeError as exc:
            raise _not_json(exc) from None
        yield chunk


class _Gate:
    """Per-stream state: the shared :class:`~dpllm.chat.fields.StreamGate` over SDK chunks."""

    def __init__(self, state: CallState) -> None:
        self.state = state
        self.gate = state.stream_gate()

    def take(self, chunk: ChatCompletionChunk) -> Pending:
        dump = getattr(chunk, "model_dump", None)
        if dump is None:  # the SDK passes a JSON list (or number) event on as is
            raise ModelBadResponse(
                "the upstream sent a stream event that is not a chat-completion chunk; "
                "the stream was stopped"
            )
        # warnings=False: a field of the wrong type is refused below, not warned about.
        return self.gate.take(dump(mode="json", exclude_unset=True, warnings=False))

    def emit(self, pending: Pending) -> ChatCompletionChunk | None:
        from openai.types.chat import ChatCompletionChunk
        from pydantic import ValidationError

        out = self.gate.emit(pending)
        if out is None:
            return None
        try:
            return ChatCompletionChunk.model_validate(out)
        except ValidationError as exc:
            raise ModelBadResponse(
                f"the upstream sent a malformed stream chunk (at {_where(exc)}); "
                "the stream was stopped"
            ) from None

    def abort(self) -> None:
        self.gate.abort()

    def check_finished(self) -> None:
        self.gate.check_finished()


class GuardedStream:
    """A sync stream of protected ``ChatCompletionChunk``\\ s (iterate it, or use ``with``)."""

    def __init__(self, upstream: Any, state: CallState) -> None:
        self._upstream = upstream
        self._gate = _Gate(state)
        self._iter = self._chunks()

    @property
    def response(self) -> Any:
        """The upstream HTTP response (``httpx.Response``)."""
        return self._upstream.response

    def _chunks(self) -> Iterator[ChatCompletionChunk]:
        gate = self._gate
        try:
            for chunk in _parsed(self._upstream):
                out = gate.emit(gate.take(chunk))
                if out is not None:
                    yield out
        except BaseException:
            gate.abort()
            raise
        gate.check_finished()

    def __iter__(self) -> Iterator[ChatCompletionChunk]:
        return self

    def __next__(self) -> ChatCompletionChunk:
        return next(self._iter)

    def close(self) -> None:
        """Close the upstream response; anything held is dropped."""
        self._gate.abort()
        self._upstream.close()

    def __enter__(self) -> GuardedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncGuardedStream:
    """An async stream of protected ``ChatCompletionChunk``\\ s (``async for`` it)."""

    def __init__(self, upstream: Any, state: CallState) -> None:
        self._upstream = upstream
        self._gate = _Gate(state)
        self._iter = self._chunks()

    @property
    def response(self) -> Any:
        """The upstream HTTP response (``httpx.Response``)."""
        return self._upstream.response

    async def _process(self, pending: Pending) -> ChatCompletionChunk | None:
        if not pending.work or not self._gate.state.p.offload:
            return self._gate.emit(pending)
        return await asyncio.to_thread(self._gate.emit, pending)

    async def _chunks(self) -> AsyncGenerator[ChatCompletionChunk, None]:
        gate = self._gate
        try:
            async for chunk in _aparsed(self._upstream):
                out = await self._process(gate.take(chunk))
                if out is not None:
                    yield out
        except BaseException:
            gate.abort()
            raise
        gate.check_finished()

    def __aiter__(self) -> AsyncIterator[ChatCompletionChunk]:
        return self

    async def __anext__(self) -> ChatCompletionChunk:
        return await self._iter.__anext__()

    async def close(self) -> None:
        """Close the upstream response; anything held is dropped."""
        self._gate.abort()
        await self._iter.aclose()
        await self._upstream.close()

    async def __aenter__(self) -> AsyncGuardedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
