"""``dpllm.wrap``: redaction and the precision guard around any ``chat.completions.create``.

One line protects code that already uses the official ``openai`` SDK::

    client = dpllm.wrap(OpenAI())            # or AsyncOpenAI()
    reply = client.chat.completions.create(model=..., messages=[...])

For every call the wrapper

1. **pseudonymises** the text of each input message (content, content parts,
   assistant tool-call arguments, tool results) through a fresh, per-call
   :class:`~dpllm.redact.Vault` (``policy="pseudonymise"``, the default), or
   replaces personal data with typed placeholders (``policy="redact"``), before
   anything leaves the process;
2. **redacts** every string the model wrote (content, tool-call arguments JSON-aware,
   ``function_call``, ``refusal``, reasoning fields, unknown fields; ``logprobs``
   dropped — see :mod:`dpllm.chat.fields`);
3. when releases are attached, runs the **precision guard** and regenerates as in
   :func:`dpllm.chat.generate.generation_flow` (the same loop: the answer is redacted,
   checked, and the model is asked again naming each violation); after
   ``max_attempts`` violating answers the last one is returned with each
   violating figure rewritten to its allowed form ("about 160 responses");
4. **restores** the vault's originals in the answer for the caller (under
   ``policy="redact"`` the answer keeps its placeholders).

**Attaching releases** — per call, through the request body, the same way over
the SDK and over the proxy's wire format::

    client.chat.completions.create(
        model=..., messages=...,
        extra_body={"dpllm": {"releases": [release, ...]}},   # Release or its to_dict()
    )

The ``dpllm`` key is removed before the request is forwarded. ``wrap(...,
releases=...)`` sets a default for every call; a per-call ``"releases"`` (even
an empty list) overrides it.

**Streaming** (``stream=True``) returns a stream of ``ChatCompletionChunk``
whose text passes through :class:`~dpllm.chat.streaming.HoldBack`: it is released a
redaction unit at a time (whole sentences, never cut inside a name; the
concatenated stream equals the non-streamed redaction) after redaction and the
guard (violating figures rewritten, since streamed text cannot be regenerated). An upstream error mid-stream
discards the held text and raises; a stream that ends without a finish reason
raises :class:`~dpllm.errors.ModelBadResponse` (fail closed).

Errors of the upstream call are the SDK's own exceptions (the wrapper is a
drop-in); dpllm's own failures (redaction, malformed releases) are
:class:`~dpllm.errors.DPLLMError`\\ s. ``chat.completions.with_raw_response``,
``.parse``, ``.stream``, the legacy ``completions`` and ``responses`` APIs are
refused: they would reach the model unprotected (use ``.unwrapped`` to opt out
explicitly). Everything else passes through to the wrapped client.

Privacy: post-processing only; no privacy budget is spent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Generator, Mapping, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, TypeVar, overload

from dpllm.chat.protection import (
    POLICIES,
    NoRedaction,
    Protection,
    TextRedactor,
    parse_releases,
    take_dpllm_options,
)
from dpllm.errors import ConfigError
from dpllm.release import Release

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletion

    from dpllm.chat._wrap_stream import AsyncGuardedStream, GuardedStream
    from dpllm.chat.protection import CallState

__all__ = [
    "POLICIES",
    "NoRedaction",
    "Protection",
    "TextRedactor",
    "WrappedAsyncOpenAI",
    "WrappedOpenAI",
    "drive_async",
    "off_loop",
    "wrap",
]

_REFUSED = frozenset({"with_raw_response", "with_streaming_response", "parse", "stream"})
_REFUSED_CLIENT = frozenset({"completions", "responses"})

ReleasesArg = Mapping[str, Release] | Sequence[Release]
R = TypeVar("R")

# -- the wrapped clients -----------------------------------------------------------------


class _Passthrough:
    _target: Any

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class _Completions(_Passthrough):
    def __init__(self, target: Any, protection: Protection) -> None:
        self._target = target
        self._protection = protection

    def __getattr__(self, name: str) -> Any:
        if name in _REFUSED:
            raise AttributeError(
                f"chat.completions.{name} is not protected by dpllm; call create(...), or use "
                "the client's .unwrapped to opt out explicitly"
            )
        return getattr(self._target, name)


class _SyncCompletions(_Completions):
    def create(self, **kwargs: Any) -> ChatCompletion | GuardedStream:
        """``chat.completions.create`` with dpllm's protections (see :mod:`dpllm.chat.wrapper`)."""
        kwargs, releases = take_dpllm_options(kwargs)
        state = self._protection.begin(kwargs.pop("messages"), releases)
        if kwargs.get("stream"):
            from dpllm.chat._wrap_stream import GuardedStream

            upstream = self._target.create(messages=state.outgoing, **kwargs)
            return GuardedStream(upstream, state)
        exchange = state.exchange()
        try:
            request = next(exchange)
            while True:
                response = self._target.create(messages=request, **kwargs)
                try:
                    request = exchange.send(response)
                except StopIteration as stop:
                    result: ChatCompletion = stop.value
                    return result
        finally:
            exchange.close()


class _AsyncCompletions(_Completions):
    async def create(self, **kwargs: Any) -> ChatCompletion | AsyncGuardedStream:
        """``chat.completions.create`` with dpllm's protections (see :mod:`dpllm.chat.wrapper`)."""
        kwargs, releases = take_dpllm_options(kwargs)
        offload = self._protection.offload
        state: CallState = await off_loop(
            offload, self._protection.begin, kwargs.pop("messages"), releases
        )
        if kwargs.get("stream"):
            from dpllm.chat._wrap_stream import AsyncGuardedStream

            upstream = await self._target.create(messages=state.outgoing, **kwargs)
            return AsyncGuardedStream(upstream, state)

        async def call(messages: list[dict[str, Any]]) -> ChatCompletion:
            response: ChatCompletion = await self._target.create(messages=messages, **kwargs)
            return response

        return await drive_async(state.exchange(), call, offload=offload)


T = TypeVar("T")


async def off_loop(
    offload: bool, fn: Callable[..., T], *args: Any, executor: Executor | None = None
) -> T:
    """``fn(*args)``, in a worker thread when ``offload`` (CPU-heavy redaction).

    ``executor``: the pool to use (``None``: the event loop's default one).
    """
    if not offload:
        return fn(*args)
    if executor is None:
        return await asyncio.to_thread(fn, *args)
    return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)


async def drive_async(
    exchange: Generator[list[dict[str, Any]], R, R],
    call: Callable[[list[dict[str, Any]]], Awaitable[R]],
    *,
    offload: bool,
    executor: Executor | None = None,
) -> R:
    """Run a :meth:`~dpllm.chat.protection.CallState.exchange` against an async model call.

    Each protection step (redaction, the guard) runs in a worker thread when
    ``offload`` is true (in ``executor`` if given), so a heavy redactor does not
    stall other requests on the event loop. Shared by the async wrapper and the proxy.
    """
    try:
        request = next(exchange)
        while True:
            response = await call(request)
            # StopIteration cannot cross a thread's future: _step returns it as a value.
            done, value = await off_loop(offload, _step, exchange, response, executor=executor)
            if done:
                result: R = value
                return result
            request = value
    finally:
        exchange.close()


def _step(exchange: Generator[list[dict[str, Any]], R, R], response: R) -> tuple[bool, Any]:
    try:
        return False, exchange.send(response)
    except StopIteration as stop:
        return True, stop.value


class _Chat(_Passthrough):
    def __init__(self, target: Any, completions: _Completions) -> None:
        self._target = target
        self.completions = completions


class _WrappedClient(_Passthrough):
    _completions_class: type[_Completions] = _SyncCompletions

    def __init__(self, client: Any, protection: Protection) -> None:
        self._target = client
        self.protection = protection
        self.chat = _Chat(client.chat, self._completions_class(client.chat.completions, protection))

    @property
    def unwrapped(self) -> Any:
        """The wrapped SDK client itself: calls through it are **not** protected."""
        return self._target

    def __getattr__(self, name: str) -> Any:
        if name in _REFUSED_CLIENT:
            raise AttributeError(
                f"client.{name} is not protected by dpllm; use chat.completions.create, or "
                ".unwrapped to opt out explicitly"
            )
        return getattr(self._target, name)

    def with_options(self, **options: Any) -> Any:
        """The SDK's ``with_options``, still wrapped."""
        return type(self)(self._target.with_options(**options), self.protection)

    def __repr__(self) -> str:
        return f"<dpllm.wrap({type(self._target).__name__}) policy={self.protection.policy}>"


class WrappedOpenAI(_WrappedClient):
    """An ``openai.OpenAI`` client whose ``chat.completions.create`` is protected."""

    _completions_class = _SyncCompletions

    def __enter__(self) -> WrappedOpenAI:
        return self

    def __exit__(self, *exc: object) -> None:
        self._target.close()


class WrappedAsyncOpenAI(_WrappedClient):
    """An ``openai.AsyncOpenAI`` client whose ``chat.completions.create`` is protected."""

    _completions_class = _AsyncCompletions

    async def __aenter__(self) -> WrappedAsyncOpenAI:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._target.close()


@overload
def wrap(
    client: openai.AsyncOpenAI,
    *,
    redactor: TextRedactor | None = ...,
    policy: str = ...,
    releases: ReleasesArg | None = ...,
    unsupported: str = ...,
    max_attempts: int = ...,
    language: str = ...,
    allow: Collection[str] = ...,
    fallback_text: str | None = ...,
) -> WrappedAsyncOpenAI: ...


@overload
def wrap(
    client: openai.OpenAI,
    *,
    redactor: TextRedactor | None = ...,
    policy: str = ...,
    releases: ReleasesArg | None = ...,
    unsupported: str = ...,
    max_attempts: int = ...,
    language: str = ...,
    allow: Collection[str] = ...,
    fallback_text: str | None = ...,
) -> WrappedOpenAI: ...


def wrap(
    client: openai.OpenAI | openai.AsyncOpenAI,
    *,
    redactor: TextRedactor | None = None,
    policy: str = "pseudonymise",
    releases: ReleasesArg | None = None,
    unsupported: str = "violation",
    max_attempts: int = 3,
    language: str = "auto",
    allow: Collection[str] = (),
    fallback_text: str | None = None,
) -> WrappedOpenAI | WrappedAsyncOpenAI:
    """Protect an ``OpenAI`` or ``AsyncOpenAI`` client's ``chat.completions.create``.

    Args:
        client: the SDK client (sync or async).
        redactor: the redactor; ``None`` builds a :class:`dpllm.redact.Redactor`
            (loading spaCy takes seconds: build one and share it).
        policy: ``"pseudonymise"`` (default: originals restored in the answer) or
            ``"redact"`` (placeholders in the prompt and in the answer).
        releases: default releases for every call (each call may attach its own
            through ``extra_body={"dpllm": {"releases": [...]}}``).
        unsupported: ``"violation"`` or ``"warning"`` for figures no release supports.
        max_attempts: model calls at most per ``create`` when the guard objects.
        language: ``"auto"``, ``"en"`` or ``"zh"``.
        allow: terms never redacted.
        fallback_text: text to return when every attempt violates the guard.

    Returns:
        A wrapped client with the same ``chat.completions.create`` surface.

    Raises:
        ConfigError: a bad option. TypeError: not an ``openai`` client.

    Privacy: post-processing of the releases; no budget is spent.
    """
    import openai

    if isinstance(allow, str):  # a str is a Collection[str]: of its letters
        raise ConfigError(
            f"[allow] must be a list of terms, not one string; write allow=[{allow!r}]"
        )
    if redactor is None:
        from dpllm.redact import Redactor

        redactor = Redactor()
    chosen: tuple[Release, ...] = ()
    if releases is not None:
        chosen = parse_releases(releases)
    protection = Protection(
        redactor=redactor,
        policy=policy,
        releases=chosen,
        unsupported=unsupported,
        max_attempts=max_attempts,
        language=language,
        allow=tuple(allow),
        fallback_text=fallback_text,
    )
    if isinstance(client, openai.AsyncOpenAI):
        return WrappedAsyncOpenAI(client, protection)
    if isinstance(client, openai.OpenAI):
        return WrappedOpenAI(client, protection)
    raise TypeError(
        f"dpllm.wrap needs an openai.OpenAI or AsyncOpenAI client, got {type(client).__name__}"
    )
