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
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from dpllm.chat.fields import Pending

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionChunk

    from dpllm.chat.protection import CallState

__all__ = ["AsyncGuardedStream", "GuardedStream"]


class _Gate:
    """Per-stream state: the shared :class:`~dpllm.chat.fields.StreamGate` over SDK chunks."""

    def __init__(self, state: CallState) -> None:
        self.state = state
        self.gate = state.stream_gate()

    def take(self, chunk: ChatCompletionChunk) -> Pending:
        return self.gate.take(chunk.model_dump(mode="json", exclude_unset=True))

    def emit(self, pending: Pending) -> ChatCompletionChunk | None:
        from openai.types.chat import ChatCompletionChunk

        out = self.gate.emit(pending)
        return None if out is None else ChatCompletionChunk.model_validate(out)

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
            for chunk in self._upstream:
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
            async for chunk in self._upstream:
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
