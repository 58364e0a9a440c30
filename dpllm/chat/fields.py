"""Every string a model writes in a chat completion, made safe: one walk for wrapper and proxy.

A chat completion carries model-written text in many places besides
``message.content``: ``tool_calls[].function.arguments`` (JSON), the legacy
``function_call``, ``refusal``, reasoning fields (``reasoning_content``,
``reasoning`` …), ``logprobs`` (each token is a piece of the text, in clear),
``audio.transcript``, annotations, and whatever an OpenAI-compatible server adds.
This module is the one place that decides what happens to each of them, for
both representations the code meets (decoded wire JSON; the SDK's models are
dumped to it and validated back) and for both shapes of an answer:

* **Structural strings** are kept verbatim: ``role``, ``id``, ``type``,
  ``object``, ``model``, ``finish_reason``, ``system_fingerprint``,
  ``service_tier``, ``tool_call_id`` and a tool call's function ``name`` (it
  names one of the caller's own tools).
* **Free text** (``content``, ``refusal``, reasoning fields, and any unknown
  string field of a message or delta) goes through ``text``: redact → guard →
  restore, the same as the content.
* **Tool arguments** are JSON: each string *value* goes through ``value``
  (redact → restore, no guard: arguments are data for the caller's code), keys
  and non-strings are kept, and the result is valid JSON again. Arguments that
  do not parse as JSON are redacted as text.
* **logprobs** are dropped (``None``): a token list cannot be redacted without
  re-tokenising, and leaving it would undo every redaction of the content.
* **Anything else** (unknown objects and lists at any level) is walked: every
  string not under a structural key goes through ``value``. Nothing unknown
  passes through in clear (fail closed).

The prompt side (:func:`protect_message`) uses the same rules with
pseudonymisation: content and content parts, assistant ``tool_calls`` arguments
(JSON-aware), ``function_call`` arguments, history ``refusal``/reasoning, and
tool messages' content.

Streams (:class:`StreamGate`): every free-text field of every choice has its own
:class:`~dpllm.chat.streaming.HoldBack`; tool-call and function-call arguments
are held whole until the choice finishes (a JSON value cannot be redacted in
fragments) and are sent, redacted, in the finishing chunk; ids, names and roles
pass at once with empty arguments. ``logprobs`` are dropped.

Privacy: post-processing only; no privacy budget is spent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dpllm.chat.streaming import HoldBack
from dpllm.errors import ModelBadResponse

__all__ = [
    "STRUCTURAL_KEYS",
    "StreamGate",
    "protect_message",
    "safe_arguments",
    "safe_completion",
    "safe_value",
]

Fn = Callable[[str], str]

STRUCTURAL_KEYS = frozenset(
    {
        "role",
        "id",
        "type",
        "object",
        "model",
        "finish_reason",
        "system_fingerprint",
        "service_tier",
        "tool_call_id",
    }
)
"""Keys whose string values are protocol, not model text: kept verbatim anywhere."""

_DROPPED = frozenset({"logprobs"})


def _is_map(value: Any) -> bool:
    """``isinstance(value, Mapping)``, with the common case (a dict) checked first (an ABC's
    check costs several times a type's)."""
    return value.__class__ is dict or isinstance(value, Mapping)


def safe_value(value: Any, fn: Fn) -> Any:
    """``value`` with every string not under a structural key passed through ``fn``."""
    if isinstance(value, str):
        return fn(value)
    if _is_map(value):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _DROPPED:
                out[key] = None
            elif key in STRUCTURAL_KEYS and (item is None or isinstance(item, str | int)):
                out[key] = item
            else:
                out[key] = safe_value(item, fn)
        return out
    if isinstance(value, list):
        return [safe_value(item, fn) for item in value]
    return value


def _json_strings(value: Any, fn: Fn) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _json_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_strings(v, fn) for v in value]
    return value


def safe_arguments(raw: str, *, value: Fn, text: Fn) -> str:
    """Tool-call arguments made safe, JSON-aware.

    Args:
        raw: the arguments as the model wrote them (normally a JSON document).
        value: applied to each string value of the parsed JSON.
        text: applied to the whole string when it is not JSON.

    Returns:
        Valid JSON with the same keys, numbers and structure, string values
        made safe; or ``text(raw)`` when ``raw`` is not JSON.
    """
    if not raw.strip():
        return raw
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        return text(raw)
    return json.dumps(_json_strings(parsed, value), ensure_ascii=False)


def _safe_function(call: Any, *, value: Fn, text: Fn) -> Any:
    if not _is_map(call):
        return safe_value(call, value)
    out: dict[str, Any] = {}
    for key, item in call.items():
        if key == "name" and isinstance(item, str | None):
            out[key] = item
        elif key == "arguments" and isinstance(item, str):
            out[key] = safe_arguments(item, value=value, text=text)
        else:
            out[key] = safe_value(item, value)
    return out


def _safe_tool_calls(calls: Any, *, value: Fn, text: Fn) -> Any:
    if not isinstance(calls, list):
        return safe_value(calls, value)
    out = []
    for call in calls:
        if not _is_map(call):
            out.append(safe_value(call, value))
            continue
        new: dict[str, Any] = {}
        for key, item in call.items():
            if key in ("function", "custom"):
                new[key] = _safe_function(item, value=value, text=text)
            elif key in STRUCTURAL_KEYS or key == "index":
                new[key] = item if isinstance(item, str | int | None) else safe_value(item, value)
            else:
                new[key] = safe_value(item, value)
        out.append(new)
    return out


def _safe_message_fields(
    message: Mapping[str, Any], *, text: Fn, value: Fn, skip: frozenset[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in message.items():
        if key in skip:
            out[key] = item
        elif key in _DROPPED:
            out[key] = None
        elif key in STRUCTURAL_KEYS and isinstance(item, str | None):
            out[key] = item
        elif key == "tool_calls":
            out[key] = _safe_tool_calls(item, value=value, text=text)
        elif key == "function_call":
            out[key] = _safe_function(item, value=value, text=text)
        elif isinstance(item, str):
            out[key] = text(item)
        elif key == "content" and isinstance(item, list):
            out[key] = [_safe_part(part, text=text, value=value) for part in item]
        else:
            out[key] = safe_value(item, value)
    return out


def _safe_part(part: Any, *, text: Fn, value: Fn) -> Any:
    """A content part: its ``text`` is free text; an image's URL or audio data is kept."""
    if not _is_map(part):
        return safe_value(part, value)
    out: dict[str, Any] = {}
    for key, item in part.items():
        if key == "text" and isinstance(item, str):
            out[key] = text(item)
        elif key in ("image_url", "input_audio", "file") and _is_map(item):
            out[key] = dict(item)  # binary data or a URL the caller supplied
        elif key in STRUCTURAL_KEYS and isinstance(item, str | None):
            out[key] = item
        else:
            out[key] = safe_value(item, value)
    return out


def protect_message(message: Mapping[str, Any], fn: Fn) -> dict[str, Any]:
    """An input message with every free-text field and tool argument passed through ``fn``.

    Kept verbatim: ``role``, ``name`` (a participant label the API restricts to
    ``[A-Za-z0-9_-]``), ``tool_call_id`` and other structural keys, image and
    audio parts. Everything else that is text, including assistant tool-call
    arguments (string values, JSON kept valid) and tool messages, goes through ``fn``.
    """
    return _safe_message_fields(message, text=fn, value=fn, skip=frozenset({"name"}))


def safe_completion(
    response: Mapping[str, Any],
    *,
    text: Fn,
    value: Fn,
    first: str | None = None,
) -> dict[str, Any]:
    """A decoded ``chat.completion`` with every model-written string made safe.

    Args:
        response: the upstream's JSON object (choices already checked to hold messages).
        text: free text → safe text (redact → guard → restore).
        value: a JSON string value → safe (redact → restore).
        first: choice 0's content when the caller already has its safe form
            (the regeneration loop's result).

    Returns:
        A new object; ``logprobs`` dropped, unknown fields walked (fail closed).
    """
    out: dict[str, Any] = {}
    for key, item in response.items():
        if key == "choices" and isinstance(item, list):
            out[key] = [
                _safe_choice(c, i, text=text, value=value, first=first) for i, c in enumerate(item)
            ]
        elif key == "usage":
            out[key] = item if _numeric(item) else safe_value(item, value)
        elif key in ("created",) or (key in STRUCTURAL_KEYS and isinstance(item, str | None)):
            out[key] = item
        else:
            out[key] = safe_value(item, value)
    return out


def _numeric(value: Any) -> bool:
    kind = value.__class__
    if kind is int or kind is float or value is None:
        return True
    if _is_map(value):
        for item in value.values():
            if not _numeric(item):
                return False
        return True
    return isinstance(value, int | float) and not isinstance(value, bool)


def _safe_choice(choice: Any, i: int, *, text: Fn, value: Fn, first: str | None) -> Any:
    if not _is_map(choice):
        return safe_value(choice, value)
    out: dict[str, Any] = {}
    for key, item in choice.items():
        if key == "message" and _is_map(item):
            skip: frozenset[str] = frozenset()
            if i == 0 and first is not None:
                item = {**item, "content": first}
                skip = frozenset({"content"})
            out[key] = _safe_message_fields(item, text=text, value=value, skip=skip)
        elif key in _DROPPED:
            out[key] = None
        elif key == "index" or (key in STRUCTURAL_KEYS and isinstance(item, str | None)):
            out[key] = item
        else:
            out[key] = safe_value(item, value)
    return out


# -- streams ----------------------------------------------------------------------------


@dataclass
class _Choice:
    """One choice's held state in a stream."""

    texts: dict[str, HoldBack] = field(default_factory=dict)
    tool_args: dict[int, list[str]] = field(default_factory=dict)
    function_args: list[str] | None = None
    finished: bool = False


@dataclass
class Pending:
    """A chunk taken by :meth:`StreamGate.take`; :meth:`StreamGate.emit` makes it safe.

    ``work`` is true when emitting needs the redactor (run it off an event loop).
    """

    chunk: dict[str, Any]
    jobs: list[tuple[int, str, str, str]]  # (choice position, kind, key, raw)
    work: bool


class StreamGate:
    """Holds and releases one stream's model-written fields, chunk by chunk.

    Args:
        text: free text → safe text (redact → guard → restore), per released segment.
        value: a JSON string value (or an unknown field's string) → safe.
        min_release, max_hold: the hold-back (see :func:`dpllm.chat.streaming.safe_cut`).

    Use :meth:`take` on each decoded ``chat.completion.chunk``, then
    :meth:`emit` (the redaction step; off the event loop when ``work``), and
    :meth:`check_finished` when the upstream ends; :meth:`abort` on an error.
    """

    def __init__(self, *, text: Fn, value: Fn, min_release: int, max_hold: int) -> None:
        self._text = text
        self._value = value
        self._min = min_release
        self._max = max_hold
        self.choices: dict[int, _Choice] = {}

    def _hold(self, choice: _Choice, key: str) -> HoldBack:
        hb = choice.texts.get(key)
        if hb is None:
            hb = HoldBack(self._text, min_release=self._min, max_hold=self._max)
            choice.texts[key] = hb
        return hb

    def take(self, chunk: Mapping[str, Any]) -> Pending:
        """Buffer ``chunk``'s text; return what it releases, not yet processed.

        Raises:
            ModelBadResponse: a chunk whose choices are not a list of objects.
        """
        choices = chunk.get("choices", [])
        if not isinstance(choices, list) or not all(_is_map(c) for c in choices):
            raise ModelBadResponse(
                "the upstream sent a stream chunk without a list of choices; the stream was stopped"
            )
        jobs: list[tuple[int, str, str, str]] = []
        out_choices: list[dict[str, Any]] = []
        for pos, choice in enumerate(choices):
            index = choice.get("index", 0)
            if not isinstance(index, int):
                raise ModelBadResponse(
                    "a stream choice has no integer index; the stream was stopped"
                )
            state = self.choices.setdefault(index, _Choice())
            delta = choice.get("delta") or {}
            if not _is_map(delta):
                raise ModelBadResponse("a stream choice's delta is not an object")
            new_delta: dict[str, Any] = {}
            for key, item in delta.items():
                if state.finished:
                    break
                if key in STRUCTURAL_KEYS and isinstance(item, str | None):
                    new_delta[key] = item
                elif key == "tool_calls" and isinstance(item, list):
                    heads = self._tool_heads(state, item)
                    if heads:
                        new_delta[key] = heads
                elif key == "function_call" and _is_map(item):
                    args = item.get("arguments")
                    if isinstance(args, str):
                        if state.function_args is None:
                            state.function_args = []
                        state.function_args.append(args)
                    if isinstance(item.get("name"), str):
                        new_delta[key] = {"name": item["name"], "arguments": ""}
                elif isinstance(item, str):
                    raw = self._hold(state, key).push(item)
                    new_delta[key] = ""
                    if raw:
                        jobs.append((pos, "text", key, raw))
                elif item is None:
                    new_delta[key] = None
                elif key not in _DROPPED:
                    jobs.append((pos, "walk", key, json.dumps(item)))
            finish = choice.get("finish_reason")
            if finish is not None and not state.finished:
                state.finished = True
                for key, hb in state.texts.items():
                    raw = hb.rest()
                    new_delta.setdefault(key, "")
                    if raw:
                        jobs.append((pos, "text", key, raw))
                for n, parts in sorted(state.tool_args.items()):
                    jobs.append((pos, "tool", str(n), "".join(parts)))
                if state.function_args is not None:
                    jobs.append((pos, "function", "", "".join(state.function_args)))
            new_choice: dict[str, Any] = {}
            for key, item in choice.items():
                if key == "delta":
                    new_choice[key] = new_delta
                elif key in _DROPPED:
                    new_choice[key] = None
                elif key == "index" or (key in STRUCTURAL_KEYS and isinstance(item, str | None)):
                    new_choice[key] = item
                else:
                    jobs.append((pos, "choice", key, json.dumps(item)))
            out_choices.append(new_choice)
        out: dict[str, Any] = {}
        for name, item in chunk.items():
            if name == "choices":
                out[name] = out_choices
            elif (
                name == "created"
                or (name in STRUCTURAL_KEYS and isinstance(item, str | None))
                or (name == "usage" and _numeric(item))
            ):
                out[name] = item
            else:
                out[name] = None
                jobs.append((-1, "top", name, json.dumps(item)))
        work = bool(jobs)
        return Pending(out, jobs, work)

    def _tool_heads(self, state: _Choice, calls: list[Any]) -> list[dict[str, Any]]:
        heads = []
        for call in calls:
            if not _is_map(call) or not isinstance(call.get("index", 0), int):
                raise ModelBadResponse("a streamed tool call has no integer index")
            k = int(call.get("index", 0))
            fn = call.get("function")
            parts = state.tool_args.setdefault(k, [])
            if _is_map(fn) and isinstance(fn.get("arguments"), str):
                parts.append(fn["arguments"])
            head: dict[str, Any] = {"index": k}
            for key in ("id", "type"):
                if isinstance(call.get(key), str):
                    head[key] = call[key]
            if _is_map(fn) and isinstance(fn.get("name"), str):
                head["function"] = {"name": fn["name"], "arguments": ""}
            if len(head) > 1:
                heads.append(head)
        return heads

    def emit(self, pending: Pending) -> dict[str, Any] | None:
        """The safe chunk for ``pending`` (``None``: nothing to send yet)."""
        chunk = pending.chunk
        choices: list[dict[str, Any]] = chunk.get("choices", [])
        for pos, kind, key, raw in pending.jobs:
            if kind == "top":
                chunk[key] = safe_value(json.loads(raw), self._value)
                continue
            choice = choices[pos]
            delta = choice["delta"]
            if kind == "text":
                delta[key] = delta.get(key, "") + self._text(raw)
            elif kind == "walk":
                delta[key] = safe_value(json.loads(raw), self._value)
            elif kind == "choice":
                choice[key] = safe_value(json.loads(raw), self._value)
            elif kind == "tool":
                args = safe_arguments(raw, value=self._value, text=self._text)
                delta.setdefault("tool_calls", []).append(
                    {"index": int(key), "function": {"arguments": args}}
                )
            elif kind == "function":
                args = safe_arguments(raw, value=self._value, text=self._text)
                delta["function_call"] = {"arguments": args}
        if not choices:
            return chunk
        kept = []
        for choice in choices:
            delta = choice.get("delta", {})
            meaningful = any(
                (v not in ("", None) if k not in ("role",) else v is not None)
                for k, v in delta.items()
            )
            if meaningful or choice.get("finish_reason") is not None:
                kept.append(choice)
        if not kept and choices:
            return None
        chunk["choices"] = kept
        return chunk

    def abort(self) -> int:
        """Drop everything held (an upstream error); return the characters dropped."""
        dropped = 0
        for state in self.choices.values():
            for hb in state.texts.values():
                dropped += hb.discard()
            dropped += sum(len(p) for parts in state.tool_args.values() for p in parts)
            state.tool_args.clear()
            state.function_args = None
        return dropped

    def check_finished(self) -> None:
        """The upstream ended: every choice must have finished, else fail closed.

        Raises:
            ModelBadResponse: a choice never sent its finish reason.
        """
        if any(not s.finished for s in self.choices.values()):
            self.abort()
            raise ModelBadResponse(
                "the model's stream ended before it finished; the held-back text was withheld. "
                "Retry the request"
            )
