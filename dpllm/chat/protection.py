"""The protection one chat-completion call gets: the per-call vault, guard and exchange.

:class:`Protection` holds the wrapper's settings; :meth:`Protection.begin` turns a
call's messages into their protected form and returns a :class:`CallState`, whose
:meth:`~CallState.exchange` is the call as a generator free of I/O (it yields the
messages to send and receives each ``ChatCompletion``), driven by the sync and
async clients of :mod:`dpllm.chat.wrapper` and by the proxy. See :mod:`dpllm.chat.wrapper` for
the behaviour.

Privacy: post-processing only; no privacy budget is spent.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from dpllm.chat.fields import StreamGate, protect_message, safe_completion
from dpllm.chat.generate import GenerationResult, RedactionLike, generation_flow
from dpllm.chat.models import Completion, Usage
from dpllm.chat.streaming import (
    DEFAULT_MAX_HOLD,
    DEFAULT_MIN_RELEASE,
    blind_tokens,
    rewrite_violations,
    split_units,
)
from dpllm.errors import ConfigError, InvalidPrivacyParameter, ModelBadResponse
from dpllm.guard import Guard, GuardReport, text_language
from dpllm.redact.vault import Vault
from dpllm.release import Release

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion

__all__ = [
    "POLICIES",
    "UNSET",
    "CallState",
    "NoRedaction",
    "Protection",
    "TextRedactor",
    "parse_releases",
    "take_dpllm_options",
]

POLICIES = ("pseudonymise", "redact")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class TextRedactor(Protocol):
    """What the wrapper needs of a redactor (``dpllm.redact.Redactor`` fits)."""

    def redact(
        self, text: str, *, language: str = "auto", allow: Collection[str] = ()
    ) -> RedactionLike: ...

    def pseudonymise(
        self, text: str, *, vault: Vault, language: str = "auto", allow: Collection[str] = ()
    ) -> RedactionLike: ...


@dataclass(frozen=True, slots=True)
class _Plain:
    text: str
    counts: Mapping[str, int] = field(default_factory=dict)


class NoRedaction:
    """A :class:`TextRedactor` that changes nothing: an explicit opt-out.

    Only for a trusted upstream or a benchmark baseline; the guard still runs
    when releases are attached.
    """

    def redact(
        self, text: str, *, language: str = "auto", allow: Collection[str] = ()
    ) -> RedactionLike:
        return _Plain(text)

    def pseudonymise(
        self, text: str, *, vault: Vault, language: str = "auto", allow: Collection[str] = ()
    ) -> RedactionLike:
        return _Plain(text)


class _BlindGuard(Guard):
    """The guard, reading pseudonym tokens' hex tails as letters (same offsets)."""

    def check(self, text: str, *, language: str = "auto") -> GuardReport:
        return super().check(blind_tokens(text), language=language)


def parse_releases(raw: object) -> tuple[Release, ...]:
    """Releases attached to a call: ``Release`` objects, their dicts, or a name → either map.

    Raises:
        InvalidPrivacyParameter: not a list of releases.
    """
    items: list[object]
    if isinstance(raw, Mapping):
        items = list(raw.values())
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        raise InvalidPrivacyParameter(
            "dpllm.releases must be a list of releases (Release.to_dict() objects)"
        )
    out = []
    for item in items:
        if isinstance(item, Release):
            out.append(item)
        elif isinstance(item, Mapping):
            out.append(Release.from_dict(item))
        else:
            raise InvalidPrivacyParameter(f"not a release: {type(item).__name__}")
    return tuple(out)


UNSET: Any = object()


def take_dpllm_options(kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Split ``extra_body["dpllm"]`` off a ``create`` call's keyword arguments.

    Returns:
        The arguments to forward (without the ``dpllm`` key) and the releases
        given for this call (``UNSET`` when none were named).
    """
    extra = kwargs.get("extra_body")
    if not isinstance(extra, Mapping) or "dpllm" not in extra:
        return kwargs, UNSET
    options = extra["dpllm"]
    rest = {k: v for k, v in extra.items() if k != "dpllm"}
    out = dict(kwargs)
    if rest:
        out["extra_body"] = rest
    else:
        out.pop("extra_body")
    if not isinstance(options, Mapping):
        raise InvalidPrivacyParameter(
            'extra_body["dpllm"] must be an object like {"releases": [...]}'
        )
    unknown = set(options) - {"releases"}
    if unknown:
        raise InvalidPrivacyParameter(f"unknown dpllm option(s): {', '.join(sorted(unknown))}")
    return out, options.get("releases", UNSET)


@dataclass(frozen=True, slots=True)
class Protection:
    """The wrapper's settings, shared by every call (and by the proxy).

    Args:
        redactor: the redactor for inputs and answers.
        policy: ``"pseudonymise"`` (restore originals in the answer) or ``"redact"``.
        releases: default releases for every call (``()``: no guard unless a call attaches some).
        unsupported: ``"violation"`` or ``"warning"`` for figures no release supports.
        max_attempts: model calls at most when the guard finds violations.
        language: ``"auto"``, ``"en"`` or ``"zh"``.
        allow: terms never redacted (course names …).
        fallback_text: text returned when every attempt violates (redacted and
            guarded first); ``None``: the last answer with its figures rewritten.
        min_release, max_hold: the streaming hold-back (see :mod:`dpllm.chat.streaming`).
    """

    redactor: TextRedactor
    policy: str = "pseudonymise"
    releases: tuple[Release, ...] = ()
    unsupported: str = "violation"
    max_attempts: int = 3
    language: str = "auto"
    allow: tuple[str, ...] = ()
    fallback_text: str | None = None
    min_release: int = DEFAULT_MIN_RELEASE
    max_hold: int = DEFAULT_MAX_HOLD

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError(
                f"must be one of {', '.join(POLICIES)}; got {self.policy!r}", field="policy"
            )
        if self.unsupported not in ("violation", "warning"):
            raise ConfigError("must be 'violation' or 'warning'", field="unsupported")
        if (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise ConfigError(
                f"must be an integer ≥ 1, got {self.max_attempts!r}", field="max_attempts"
            )
        if self.language not in ("auto", "en", "zh"):
            raise ConfigError("must be 'auto', 'en' or 'zh'", field="language")

    @property
    def offload(self) -> bool:
        """Whether redaction is heavy enough to run off an event loop."""
        return type(self.redactor) is not NoRedaction  # a subclass may redact after all

    def begin(self, messages: Sequence[Mapping[str, Any]], releases: Any = UNSET) -> CallState:
        """Prepare one call: protect its messages, build its guard.

        Raises:
            InvalidPrivacyParameter: malformed releases or messages.
            RedactionError: the redactor failed (nothing was sent).
        """
        chosen = self.releases if releases is UNSET else parse_releases(releases)
        guard = _BlindGuard(chosen, unsupported=self.unsupported) if chosen else None
        vault = Vault() if self.policy == "pseudonymise" else None
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise InvalidPrivacyParameter("messages must be a list of chat messages")
        state = CallState(self, vault, guard)
        state.outgoing = [state.protect_message(m) for m in messages]
        return state


class CallState:
    """One call's vault, guard and protected messages; turns raw answers into safe ones."""

    def __init__(self, protection: Protection, vault: Vault | None, guard: Guard | None) -> None:
        self.p = protection
        self.vault = vault
        self.guard = guard
        self.outgoing: list[dict[str, Any]] = []

    # -- inputs --------------------------------------------------------------
    def _protect_text(self, text: str) -> str:
        if self.vault is not None:
            return self.p.redactor.pseudonymise(
                text, vault=self.vault, language=self.p.language, allow=self.p.allow
            ).text
        return self.p.redactor.redact(text, language=self.p.language, allow=self.p.allow).text

    def protect_message(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """One input message with its text, tool arguments and tool results protected."""
        if not isinstance(message, Mapping):
            raise InvalidPrivacyParameter("each message must be an object with role and content")
        return protect_message(message, self._protect_text)

    # -- outputs -------------------------------------------------------------
    @property
    def allow(self) -> tuple[str, ...]:
        tokens = self.vault.tokens() if self.vault is not None else ()
        return (*self.p.allow, *tokens)

    def restore(self, text: str) -> str:
        return self.vault.restore(text) if self.vault is not None else text

    def units(self, raw: str) -> list[str]:
        """``raw`` in the units it is redacted in, streamed or not (see :func:`split_units`)."""
        return split_units(raw, min_unit=self.p.min_release, max_unit=self.p.max_hold)

    def redact_units(self, raw: str) -> str:
        """Redact ``raw`` unit by unit: the same result whatever whole units it is cut into."""
        allow = self.allow
        redact = self.p.redactor.redact
        # A model's answer is not the caller's input: a lone surrogate in it is the
        # upstream's fault, so it is replaced (U+FFFD), never an error for the caller.
        raw = _SURROGATE.sub("\ufffd", raw)
        if not self.p.offload:  # NoRedaction returns each unit as it is: no need to cut
            return raw
        units = self.units(raw)
        many = getattr(self.p.redactor, "redact_units", None)
        if many is not None:  # one NER pass for all units; each unit's result as its own
            return "".join(r.text for r in many(units, language=self.p.language, allow=allow))
        return "".join(redact(u, language=self.p.language, allow=allow).text for u in units)

    def finish(self, raw: str) -> str:
        """Raw model text → what the caller may read: resolve → redact → guard → restore.

        Figures cited by reference (``[[mean_rating]]``) become the release's allowed
        phrase first, as in :func:`~dpllm.chat.generate.generation_flow`, so a streamed
        answer reads the same as a non-streamed one.
        """
        if self.guard is not None:
            raw = self.guard.resolve(raw, language=self.p.language).text
        clean = self.redact_units(raw)
        if self.guard is not None:
            report = self.guard.check(clean, language=self.p.language)
            if not report.ok:
                clean = rewrite_violations(clean, report.violations, language=report.language)
        return self.restore(clean)

    def finish_value(self, raw: str) -> str:
        """A model-written data value (a tool argument's string) → redact → restore, no guard."""
        return self.restore(self.redact_units(raw))

    def stream_gate(self) -> StreamGate:
        """A :class:`~dpllm.chat.fields.StreamGate` for one stream of this call."""
        return StreamGate(
            text=self.finish,
            value=self.finish_value,
            min_release=self.p.min_release,
            max_hold=self.p.max_hold,
        )

    def _flow_redactor(self) -> _FlowRedactor:
        return _FlowRedactor(self)

    def from_result(self, result: GenerationResult) -> str:
        if result.source == "model":
            return self.restore(result.text)
        if self.p.fallback_text is not None:
            return self.finish(self.p.fallback_text)
        last = next(a for a in reversed(result.attempts) if a.source == "model" and a.text)
        language = self.p.language if self.p.language != "auto" else text_language(last.text or "")
        return self.restore(rewrite_violations(last.text or "", last.violations, language=language))

    # -- the exchange (pure: the driver does the I/O) ---------------------------
    def exchange(self) -> Generator[list[dict[str, Any]], ChatCompletion, ChatCompletion]:
        """Yields the messages to send; receives each response; returns the safe one."""
        return self._exchange(_SDK)

    def exchange_wire(
        self,
    ) -> Generator[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
        """:meth:`exchange` over OpenAI's wire format: responses are decoded JSON objects.

        For the proxy, which forwards JSON: no SDK model is built or dumped per call.

        Raises:
            ModelBadResponse: a response that is not a chat completion object.
        """
        return self._exchange(_WIRE)

    def _exchange(self, shape: _Shape[R]) -> Generator[list[dict[str, Any]], R, R]:
        if self.guard is None:
            response = yield self.outgoing
            shape.content(response)  # validates the shape
            return shape.finish(self, response, [response], None)
        flow = generation_flow(
            self.outgoing,
            fallback_text="",
            guard=self.guard,
            redactor=self._flow_redactor(),
            max_attempts=self.p.max_attempts,
            allow=self.allow,
            language=self.p.language,
        )
        request = next(flow)
        responses: list[R] = []
        while True:
            response = yield [dict(m) for m in request]
            responses.append(response)
            text = shape.content(response)
            if text is None:  # a tool call, no text: nothing to guard
                flow.close()
                return shape.finish(self, response, responses, None)
            try:
                request = flow.send(Completion(text, shape.model(response), Usage(), 0.0))
            except StopIteration as stop:
                return shape.finish(self, response, responses, self.from_result(stop.value))


R = TypeVar("R")


class _Shape(Protocol[R]):
    """How the exchange reads and rewrites one representation of a response."""

    def content(self, response: R) -> str | None: ...

    def model(self, response: R) -> str: ...

    def finish(self, state: CallState, response: R, responses: list[R], first: str | None) -> R:
        """``response`` with every choice's text made safe (choice 0's is ``first`` if given)."""
        ...


class _SdkShape:
    """``openai`` ``ChatCompletion`` objects (the wrapper)."""

    def content(self, response: ChatCompletion) -> str | None:
        if not response.choices:
            return None
        return response.choices[0].message.content

    def model(self, response: ChatCompletion) -> str:
        return str(response.model)

    def finish(
        self,
        state: CallState,
        response: ChatCompletion,
        responses: list[ChatCompletion],
        first: str | None,
    ) -> ChatCompletion:
        from openai.types.chat import ChatCompletion

        wire = [r.model_dump(mode="json", exclude_unset=True) for r in responses]
        safe = _WIRE.finish(state, wire[-1], wire, first)
        return ChatCompletion.model_validate(safe)


_USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


class _WireShape:
    """Decoded chat-completion JSON (the proxy). Fails closed on an unexpected shape."""

    def _choices(self, response: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        choices = response.get("choices") if isinstance(response, Mapping) else None
        if not isinstance(choices, list) or not all(
            isinstance(c, Mapping) and isinstance(c.get("message"), Mapping) for c in choices
        ):
            raise ModelBadResponse(
                "the upstream answered something that is not a chat completion "
                "(no list of choices with a message); nothing was passed on"
            )
        for c in choices:
            if not isinstance(c["message"].get("content"), str | None):
                raise ModelBadResponse(
                    "the upstream's message content is not text; nothing was passed on"
                )
        return choices

    def content(self, response: dict[str, Any]) -> str | None:
        choices = self._choices(response)
        if not choices:
            return None
        content: str | None = choices[0]["message"].get("content")
        return content

    def model(self, response: dict[str, Any]) -> str:
        return str(response.get("model", ""))

    def finish(
        self,
        state: CallState,
        response: dict[str, Any],
        responses: list[dict[str, Any]],
        first: str | None,
    ) -> dict[str, Any]:
        self._choices(response)  # validates the shape
        out = safe_completion(response, text=state.finish, value=state.finish_value, first=first)
        usages = [r.get("usage") for r in responses]
        if len(responses) > 1 and all(
            isinstance(u, Mapping) and all(isinstance(u.get(f), int) for f in _USAGE_FIELDS)
            for u in usages
        ):
            summed = {f: sum(u[f] for u in usages if isinstance(u, Mapping)) for f in _USAGE_FIELDS}
            out["usage"] = {**response["usage"], **summed}
        return out


_SDK: _Shape[Any] = _SdkShape()
_WIRE: _Shape[Any] = _WireShape()


@dataclass(frozen=True, slots=True)
class _FlowRedactor:
    """The generation flow's redactor protocol, redacting unit by unit as streams do."""

    state: CallState

    def redact(
        self, text: str, *, language: str = "auto", allow: Collection[str] = ()
    ) -> RedactionLike:
        redactor = self.state.p.redactor
        pieces = []
        counts: dict[str, int] = {}
        units = self.state.units(text)
        many = getattr(redactor, "redact_units", None)
        results = (
            many(units, language=language, allow=allow)
            if many is not None
            else [redactor.redact(unit, language=language, allow=allow) for unit in units]
        )
        for result in results:
            pieces.append(result.text)
            for entity, k in result.counts.items():
                counts[entity] = counts.get(entity, 0) + k
        return _Plain("".join(pieces), counts)
