"""Model clients: the official ``openai`` SDK for any OpenAI-compatible server, and an offline writer.

:class:`ModelClient` is the one method the generator needs. Two implementations:

* :class:`OpenAIModelClient` — ``openai.OpenAI`` against any ``base_url``
  (hosted, vLLM, Ollama, llama.cpp). The SDK does the bounded retries (429,
  5xx, timeouts, connection errors, ``max_retries`` times with backoff and
  ``Retry-After``); what still fails is mapped into dpllm's tree:

  ========================================  =====================
  SDK error                                 dpllm error
  ========================================  =====================
  ``APITimeoutError``                       :class:`ModelTimeout`
  ``APIConnectionError``                    :class:`ModelUnreachable`
  ``AuthenticationError`` (401), 403        :class:`ModelAuthError`
  ``RateLimitError`` (429)                  :class:`ModelRateLimited`
  other status errors (5xx, 400, 404 …),
  malformed body, no choices, no content    :class:`ModelBadResponse`
  ========================================  =====================

  Error messages carry the status and the server's error type, never the
  prompt or any model text.

* :class:`OfflineWriter` — needs no network: returns a fixed text (the
  template's deterministic fallback rendering) or calls a function of the
  messages, so the pipeline runs on a fresh machine without a model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from dpllm.errors import (
    ModelAuthError,
    ModelBadResponse,
    ModelError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnreachable,
)

if TYPE_CHECKING:
    import openai

__all__ = ["Completion", "ModelClient", "OfflineWriter", "OpenAIModelClient", "Usage"]

Messages = Sequence[Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __post_init__(self) -> None:
        if self.prompt_tokens < 0 or self.completion_tokens < 0:
            raise ValueError("token counts cannot be negative")

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, slots=True, repr=False)
class Completion:
    """What a model returned.

    ``text`` is the model's raw text: it has not been redacted or guarded, so it
    must go through :func:`dpllm.chat.generate.generate` before anyone reads it. The
    repr leaves it out, so a stray log line cannot leak it.
    """

    text: str
    model: str
    usage: Usage
    latency_s: float
    finish_reason: str | None = None

    def __repr__(self) -> str:
        return (
            f"<Completion model={self.model} chars={len(self.text)} "
            f"tokens={self.usage.total_tokens} finish={self.finish_reason}>"
        )


class ModelClient(Protocol):
    """Anything that answers a list of chat messages with one completion."""

    def complete(self, messages: Messages, **options: Any) -> Completion:
        """Answer ``messages``; ``options`` override the client's defaults (temperature …)."""
        ...


class OpenAIModelClient:
    """A :class:`ModelClient` over the official ``openai`` SDK.

    Args:
        base_url: the server's OpenAI-compatible base URL (``http://host:8000/v1``).
        api_key: the API key (any non-empty string for servers that ignore it).
        model: the model id.
        temperature: the default sampling temperature.
        timeout: seconds per request (the SDK's timeout).
        max_retries: retries the SDK makes on 429, 5xx, timeouts and connection errors.

    Raises:
        ValueError: a parameter is out of range.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        temperature: float = 0.2,
        timeout: float = 30.0,
        max_retries: int = 2,
    ) -> None:
        import openai

        if not model:
            raise ValueError("model must name a model id")
        if not (timeout > 0):
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an integer ≥ 0, got {max_retries!r}")
        self.model = model
        self.temperature = temperature
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "unused", timeout=timeout, max_retries=max_retries
        )

    def close(self) -> None:
        """Close the underlying HTTP connections."""
        self._client.close()

    def complete(self, messages: Messages, **options: Any) -> Completion:
        """One chat completion.

        Args:
            messages: chat messages (``{"role": ..., "content": ...}``).
            **options: per-call overrides passed to ``chat.completions.create``
                (``temperature``, ``max_tokens``, ``model`` …).

        Returns:
            The :class:`Completion` (raw text; redact and guard it before use).

        Raises:
            ModelError: one of ``ModelTimeout``, ``ModelUnreachable``, ``ModelAuthError``,
                ``ModelRateLimited``, ``ModelBadResponse`` (see the module docstring).
        """
        import openai

        params: dict[str, Any] = {"model": self.model, "temperature": self.temperature}
        params.update(options)
        params["messages"] = [dict(m) for m in messages]
        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(**params)
        except openai.OpenAIError as exc:
            raise map_openai_error(exc) from exc
        latency = time.perf_counter() - started
        choices = getattr(response, "choices", None)
        if not choices:
            raise ModelBadResponse("the model server answered without choices; check the model id")
        choice = choices[0]
        text = getattr(getattr(choice, "message", None), "content", None)
        if not isinstance(text, str) or not text.strip():
            raise ModelBadResponse(
                f"the model returned no text (finish_reason={choice.finish_reason!r})"
            )
        usage = getattr(response, "usage", None)
        return Completion(
            text=text,
            model=str(getattr(response, "model", None) or params["model"]),
            usage=Usage(
                int(getattr(usage, "prompt_tokens", 0) or 0),
                int(getattr(usage, "completion_tokens", 0) or 0),
            ),
            latency_s=latency,
            finish_reason=choice.finish_reason,
        )


def map_openai_error(exc: openai.OpenAIError) -> ModelError:
    """The dpllm error for an ``openai`` SDK error (the caller raises it ``from exc``).

    Args:
        exc: any exception the SDK raised.

    Returns:
        A :class:`ModelError` subclass instance; the message holds the status and
        the error type, never the request or response text.
    """
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return ModelTimeout(
            "the model call timed out after the allowed retries; raise the timeout or "
            "check the server's load"
        )
    if isinstance(exc, openai.APIConnectionError):
        return ModelUnreachable(
            "the model server cannot be reached; check base_url and that the server is running"
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        kind = _error_type(exc.body)
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
            return ModelAuthError(
                f"the model server refused the credentials (HTTP {status}{kind}); check api_key"
            )
        if isinstance(exc, openai.RateLimitError):
            return ModelRateLimited(
                f"the model server kept rate-limiting (HTTP 429{kind}) after the allowed "
                "retries; retry later or raise max_retries"
            )
        return ModelBadResponse(f"the model server answered HTTP {status}{kind}")
    if isinstance(exc, openai.APIResponseValidationError):
        return ModelBadResponse("the model server's response does not follow the API schema")
    if isinstance(exc, openai.APIError):
        return ModelBadResponse(f"the model server reported an error{_error_type(exc.body)}")
    return ModelError(f"the model call failed ({type(exc).__name__})")


def _error_type(body: object) -> str:
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("type"), str):
            return f", {inner['type']}"
    return ""


class OfflineWriter:
    """A :class:`ModelClient` that needs no network.

    Args:
        text_or_callable: the text to return (the template's deterministic
            fallback rendering), or a function of the messages returning it.
        model: the model name reported in the completion.
    """

    def __init__(
        self, text_or_callable: str | Callable[[Messages], str], *, model: str = "offline"
    ) -> None:
        self._source = text_or_callable
        self.model = model

    def complete(self, messages: Messages, **options: Any) -> Completion:
        """Return the fixed text (or the function's text) at once, with zero usage.

        Raises:
            ModelBadResponse: the function returned something other than text.
        """
        text = self._source(messages) if callable(self._source) else self._source
        if not isinstance(text, str):
            raise ModelBadResponse(f"the offline writer produced {type(text).__name__}, not text")
        return Completion(
            text=text, model=self.model, usage=Usage(), latency_s=0.0, finish_reason="stop"
        )
