"""The regenerate loop: call → redact → guard → ask again naming each violation → fallback.

:func:`generation_flow` is the loop as a generator, free of I/O: it yields the
messages to send, receives the model's :class:`~dpllm.chat.models.Completion` (or the
:class:`~dpllm.errors.ModelError` the call raised), and returns a
:class:`GenerationResult`. :func:`generate` drives it with a
:class:`~dpllm.chat.models.ModelClient`; an async caller (the proxy) can drive the same
flow with its own client.

The loop, for up to ``max_attempts`` calls:

1. figures the model cited by reference (``[[mean_rating]]``, see
   :mod:`dpllm.guard.references`) are replaced by their allowed wording, and the
   text is **redacted** at once; the raw text is dropped, never stored, returned
   or logged;
2. the redacted text is **guarded** against the releases;
3. clean → returned (source ``"model"``); violations → the redacted answer and a
   follow-up user message naming each violation and its allowed form are
   appended, and the model is asked again.

After ``max_attempts`` violating answers, or a model error (the SDK has already
retried 429/5xx/timeouts), the **fallback text** (the template's deterministic
rendering) is redacted, guarded and returned (source ``"fallback"``), with the
error recorded; ``on_model_error="raise"`` re-raises instead.

Privacy: regenerating reuses the same releases; it spends no privacy budget.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dpllm.chat.models import Completion, ModelClient, Usage
from dpllm.errors import ConfigError, GuardError, ModelError
from dpllm.guard import Guard, GuardReport, Violation
from dpllm.guard.references import reference_name
from dpllm.release import Release

__all__ = [
    "Attempt",
    "GenerationResult",
    "RedactionLike",
    "Redactor",
    "follow_up_message",
    "generate",
    "generation_flow",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_ATTEMPTS = 3


class RedactionLike(Protocol):
    """What a redactor returns: the redacted text and counts per entity type."""

    @property
    def text(self) -> str: ...

    @property
    def counts(self) -> Mapping[str, int]: ...


class Redactor(Protocol):
    """Anything that removes personal data from a text (e.g. ``dpllm.redact.Redactor``)."""

    def redact(
        self, text: str, *, language: str = "auto", allow: Collection[str] = ()
    ) -> RedactionLike: ...


@dataclass(frozen=True, slots=True)
class Attempt:
    """One model call (or the fallback) and what the redactor and the guard made of it.

    Attributes:
        number: 1-based; the fallback is numbered after the last model call.
        source: ``"model"`` or ``"fallback"``.
        text: the **redacted** text, or ``None`` when the call failed.
        violations: the guard's violations of the redacted text.
        warnings: the guard's warnings (unsupported figures in warning mode).
        redaction_counts: entities redacted, per type.
        usage: tokens used by the call.
        latency_s: the call's latency.
        model: the model that answered.
        error: ``"ModelTimeout: …"`` when the call failed.
    """

    number: int
    source: str
    text: str | None
    violations: tuple[Violation, ...] = ()
    warnings: tuple[Violation, ...] = ()
    redaction_counts: Mapping[str, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    model: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class GenerationResult:
    """The outcome of :func:`generate`.

    Attributes:
        text: the final text, redacted and guarded.
        source: ``"model"`` or ``"fallback"``.
        attempts: every attempt, in order (the fallback last, if used).
    """

    text: str
    source: str
    attempts: tuple[Attempt, ...]

    @property
    def model_calls(self) -> int:
        """How many times the model was called."""
        return sum(1 for a in self.attempts if a.source == "model")

    @property
    def usage(self) -> Usage:
        """Tokens used over all attempts."""
        total = Usage()
        for a in self.attempts:
            total = total + a.usage
        return total

    @property
    def latency_s(self) -> float:
        """Model latency over all attempts."""
        return sum(a.latency_s for a in self.attempts)

    @property
    def redaction_counts(self) -> dict[str, int]:
        """Entities redacted over all attempts, per type."""
        out: dict[str, int] = {}
        for a in self.attempts:
            for k, v in a.redaction_counts.items():
                out[k] = out.get(k, 0) + v
        return out

    @property
    def error(self) -> str | None:
        """The model error that ended the loop, if any."""
        return next((a.error for a in self.attempts if a.error), None)


def follow_up_message(report: GuardReport, *, references: Sequence[str] = ()) -> str:
    """The user message asking the model to fix each violation, in the text's language.

    Args:
        report: the guard's report on the (redacted) previous answer.
        references: the references the model may cite instead of writing figures
            (:attr:`dpllm.guard.Guard.references`); when given, each refused figure
            names its reference and the message asks for references.

    Returns:
        Text naming each violating figure and what to write instead.

    .. versionchanged:: 0.2
       ``references``.
    """
    zh = report.language == "zh"
    known = set(references)
    lines = []
    for v in report.violations:
        ref = reference_name(v.release) if v.release else None
        if ref is not None and ref in known:
            cite = f"（或写引用 [[{ref}]]）" if zh else f" (or cite it as [[{ref}]])"
            lines.append(f"- {v.message}{cite}")
        else:
            lines.append(f"- {v.message}")
    if references:
        listed = ", ".join(f"[[{r}]]" for r in references)
        lines.append(
            f"- 最稳妥的做法：不要自己写数字，用引用代替，系统会填入允许的写法：{listed}。"
            if zh
            else "- Safest: do not write figures yourself; cite each as a reference and it "
            f"will be filled in with the allowed wording: {listed}."
        )
    if report.language == "zh":
        head = (
            "你上一次的回答中有数字比数据允许的更精确，或与发布的统计量不符。"
            "请重写整段回答，其他内容保持不变，只按下列要求修改这些数字："
        )
        tail = "不要给出任何其他数字的更精确写法。"
    else:
        head = (
            "Your previous answer states figures more precisely than the data allow, or "
            "figures the released statistics do not support. Rewrite the whole answer, "
            "keeping everything else, and change only these figures:"
        )
        tail = "Do not state any figure more precisely than its error band."
    return "\n".join([head, *lines, tail])


Flow = Generator[list[dict[str, str]], Completion | ModelError, GenerationResult]


def generation_flow(
    messages: Sequence[Mapping[str, str]],
    *,
    fallback_text: str,
    guard: Guard,
    redactor: Redactor,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    allow: Collection[str] = (),
    language: str = "auto",
) -> Flow:
    """The loop as a generator: yields messages, receives completions or errors.

    Args:
        messages: the rendered prompt messages.
        fallback_text: the template's deterministic rendering, used when the model
            does not produce a clean answer.
        guard: the guard built from the releases the prompt was rendered with.
        redactor: removes personal data from every text before anything else sees it.
        max_attempts: model calls at most (≥ 1).
        allow: terms the redactor must keep (course names …).
        language: ``"en"``, ``"zh"`` or ``"auto"``.

    Returns:
        (as ``StopIteration.value``) the :class:`GenerationResult`.

    Raises:
        ConfigError: ``max_attempts`` < 1.
        GuardError: the fallback text itself breaks the guard (a template bug).
    """
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ConfigError(f"must be an integer ≥ 1, got {max_attempts!r}", field="max_attempts")
    conversation = [dict(m) for m in messages]
    attempts: list[Attempt] = []
    for number in range(1, max_attempts + 1):
        outcome = yield [dict(m) for m in conversation]
        if isinstance(outcome, ModelError):
            attempts.append(
                Attempt(number, "model", None, error=f"{type(outcome).__name__}: {outcome}")
            )
            log.warning(
                "model call %d failed (%s); using the fallback", number, type(outcome).__name__
            )
            break
        resolved = guard.resolve(outcome.text, language=language).text
        del outcome
        redacted = redactor.redact(resolved, language=language, allow=allow)
        del resolved  # the raw text goes no further than the redactor
        clean = redacted.text
        report = guard.check(clean, language=language)
        attempt = Attempt(
            number,
            "model",
            clean,
            report.violations,
            report.warnings,
            dict(redacted.counts),
        )
        attempts.append(attempt)
        log.info(
            "attempt %d: %d violation(s) %s, redacted %s",
            number,
            len(report.violations),
            sorted({str(v.rule) for v in report.violations}),
            dict(redacted.counts),
        )
        if report.ok:
            return GenerationResult(clean, "model", tuple(attempts))
        conversation.append({"role": "assistant", "content": clean})
        conversation.append(
            {"role": "user", "content": follow_up_message(report, references=guard.references)}
        )
    redacted = redactor.redact(fallback_text, language=language, allow=allow)
    report = guard.check(redacted.text, language=language)
    if not report.ok:
        raise GuardError(
            "the fallback text breaks the precision guard ("
            + "; ".join(v.message for v in report.violations)
            + "); render its figures through the band filters"
        )
    attempts.append(
        Attempt(
            len(attempts) + 1,
            "fallback",
            redacted.text,
            (),
            report.warnings,
            dict(redacted.counts),
        )
    )
    log.info("using the fallback text after %d model attempt(s)", len(attempts) - 1)
    return GenerationResult(redacted.text, "fallback", tuple(attempts))


def _with_call(attempt: Attempt, call: tuple[Usage, float, str]) -> Attempt:
    usage, latency, model = call
    return Attempt(
        attempt.number,
        attempt.source,
        attempt.text,
        attempt.violations,
        attempt.warnings,
        attempt.redaction_counts,
        usage,
        latency,
        model,
        attempt.error,
    )


def generate(
    messages: Sequence[Mapping[str, str]],
    *,
    fallback_text: str,
    releases: Mapping[str, Release] | Sequence[Release],
    model: ModelClient,
    redactor: Redactor,
    unsupported: str = "violation",
    allowed_constants: Collection[float] = (),
    language: str = "auto",
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    allow: Collection[str] = (),
    on_model_error: str = "fallback",
    model_options: Mapping[str, Any] | None = None,
) -> GenerationResult:
    """Ask the model, redact, guard, regenerate on violations, else fall back.

    Args:
        messages: the rendered prompt messages (from the template layer).
        fallback_text: the template's deterministic fallback rendering.
        releases: the releases the prompt was rendered with (the guard's reference).
        model: the :class:`~dpllm.chat.models.ModelClient` to call.
        redactor: the redactor (``dpllm.redact.Redactor`` or any object with
            ``redact(text, *, language, allow)``).
        unsupported: ``"violation"`` or ``"warning"`` for figures no release supports.
        allowed_constants: values never reported as unsupported.
        language: ``"en"``, ``"zh"`` or ``"auto"``.
        max_attempts: model calls at most (default 3).
        allow: terms the redactor must keep.
        on_model_error: ``"fallback"`` (default: record the error, use the
            fallback text) or ``"raise"``.
        model_options: per-call options for the model (``temperature`` …).

    Returns:
        The :class:`GenerationResult`; its text is redacted and passes the guard.

    Raises:
        ConfigError: a bad option.
        GuardError: the fallback text itself breaks the guard.
        ModelError: a model error, with ``on_model_error="raise"``.

    Privacy: post-processing of ``releases``; no privacy budget is spent, however
    many attempts are made.
    """
    if on_model_error not in ("fallback", "raise"):
        raise ConfigError(
            f"must be 'fallback' or 'raise', got {on_model_error!r}", field="on_model_error"
        )
    guard = Guard(releases, unsupported=unsupported, allowed_constants=allowed_constants)
    flow = generation_flow(
        messages,
        fallback_text=fallback_text,
        guard=guard,
        redactor=redactor,
        max_attempts=max_attempts,
        allow=allow,
        language=language,
    )
    options = dict(model_options or {})
    calls: list[tuple[Usage, float, str]] = []  # metadata only, never the raw text
    request = next(flow)
    while True:
        outcome: Completion | ModelError
        try:
            outcome = model.complete(request, **options)
            calls.append((outcome.usage, outcome.latency_s, outcome.model))
        except ModelError as exc:
            if on_model_error == "raise":
                flow.close()
                raise
            outcome = exc
        try:
            request = flow.send(outcome)
        except StopIteration as stop:
            result: GenerationResult = stop.value
            break
        finally:
            del outcome
    # Attach usage and latency (the flow never sees them, so it never holds raw text longer).
    attempts = list(result.attempts)
    model_attempts = [i for i, a in enumerate(attempts) if a.source == "model" and a.error is None]
    for i, call in zip(model_attempts, calls, strict=True):
        attempts[i] = _with_call(attempts[i], call)
    return GenerationResult(result.text, result.source, tuple(attempts))
