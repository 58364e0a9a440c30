"""Guarded streams: ``ChatCompletionChunk``\\ s whose text passed the hold-back buffer.

:class:`GuardedStream` (sync) and :class:`AsyncGuardedStream` wrap the SDK's
``Stream`` / ``AsyncStream``. Each choice's content deltas go into its own
:class:`~dpllm.chat.streaming.HoldBack`; a chunk carries only text that was released
and processed (redact → guard → restore). Chunks without text (the role chunk,
tool calls, the finish chunk, the usage chunk) pass with their other fields.

Fail closed: an exception from the upstream discards every held character and
propagates; a stream that ends while a choice has not finished raises
:class:`~dpllm.errors.ModelBadResponse` and emits nothing more.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from dpllm.chat.streaming import HoldBack
from dpllm.errors import ModelBadResponse

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionChunk

    from dpllm.chat.protection import CallState

__all__ = ["AsyncGuardedStream", "GuardedStream"]


class _Gate:
    """Per-stream state: one hold-back buffer per choice index."""

    def __init__(self, state: CallState) -> None:
        self.state = state
        self.buffers: dict[int, HoldBack] = {}
        self.finished: set[int] = set()

    def _buffer(self, index: int) -> HoldBack:
        hb = self.buffers.get(index)
        if hb is None:
            p = self.state.p
            hb = HoldBack(self.state.finish, min_release=p.min_release, max_hold=p.max_hold)
            self.buffers[index] = hb
        return hb

    def segments(self, chunk: ChatCompletionChunk) -> list[str]:
        """The raw segment each choice of ``chunk`` releases now (to be processed)."""
        out = []
        for choice in chunk.choices:
            hb = self._buffer(choice.index)
            raw = hb.push(choice.delta.content or "") if choice.index not in self.finished else ""
            if choice.finish_reason is not None and choice.index not in self.finished:
                raw += hb.rest()
                self.finished.add(choice.index)
            out.append(raw)
        return out

    def assemble(self, chunk: ChatCompletionChunk, texts: list[str]) -> ChatCompletionChunk | None:
        """``chunk`` carrying the processed texts; ``None`` when it has nothing to say."""
        if not chunk.choices:
            return chunk  # the usage chunk
        choices = []
        for choice, text in zip(chunk.choices, texts, strict=True):
            delta = choice.delta
            other = bool(
                delta.role or delta.tool_calls or delta.function_call or choice.finish_reason
            )
            if delta.content is None and not text:
                choices.append(choice)
                continue
            if not text and not other:
                continue  # held back
            new_delta = delta.model_copy(update={"content": text})
            choices.append(choice.model_copy(update={"delta": new_delta}))
        if not choices:
            return None
        return chunk.model_copy(update={"choices": choices})

    def abort(self) -> None:
        for hb in self.buffers.values():
            hb.discard()

    def check_finished(self) -> None:
        unfinished = set(self.buffers) - self.finished
        if unfinished:
            self.abort()
            raise ModelBadResponse(
                "the model's stream ended before it finished; the held-back text was withheld. "
                "Retry the request"
            )


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
                texts = [gate.state.finish(s) if s else "" for s in gate.segments(chunk)]
                out = gate.assemble(chunk, texts)
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

    async def _process(self, segments: list[str]) -> list[str]:
        finish: Callable[[str], str] = self._gate.state.finish
        if not any(segments):
            return segments
        if not self._gate.state.p.offload:
            return [finish(s) if s else "" for s in segments]
        return await asyncio.to_thread(lambda: [finish(s) if s else "" for s in segments])

    async def _chunks(self) -> AsyncGenerator[ChatCompletionChunk, None]:
        gate = self._gate
        try:
            async for chunk in self._upstream:
                texts = await self._process(gate.segments(chunk))
                out = gate.assemble(chunk, texts)
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
