"""Figures by reference: the model writes ``[[mean_rating]]``, dpllm writes the figure.

A template may ask the model to cite each figure as a reference to the release
it comes from — ``[[feedback_count]]``, ``[[mean_rating]]``, a component as
``[[topic_counts.refund]]`` — instead of writing the number. After generation,
:func:`resolve_references` replaces every reference to a known release with that
release's allowed phrasing in the language of the line it stands in ("about
160" / "约160", "about 62%" / "约62%", "fewer than 5" / "少于5"), the very form
the guard accepts. A reference to nothing known is left in place; the guard
reports it (rule ``unknown-reference``), so the model is asked again.

A model that follows the instruction gives the guard nothing to refuse; one that
writes literal numbers is checked by the rules as before.

Post-processing of released values only: free.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from dpllm.guard.extract import text_language
from dpllm.guard.targets import Target
from dpllm.rounding import format_number

__all__ = ["REFERENCE", "Resolved", "allowed_phrase", "reference_name", "resolve_references"]

REFERENCE = re.compile(r"\[\[\s*([^\[\]\n]{1,80}?)\s*\]\]")
"""``[[name]]`` or ``[[name.component]]`` (at most 80 characters, one line)."""


def reference_name(target_name: str) -> str:
    """How a target is cited: ``topic_counts[refund]`` → ``topic_counts.refund``."""
    if target_name.endswith("]") and "[" in target_name:
        base, _, label = target_name[:-1].partition("[")
        return f"{base}.{label}"
    return target_name


def allowed_phrase(t: Target, language: str) -> str:
    """The figure of ``t`` as the band allows it, without a unit word.

    Counts whose whole interval lies below the small-count threshold read
    "fewer than 5"; proportions carry a percent sign.
    """
    if t.small_threshold is not None and t.hi < t.small_threshold:
        n = format_number(t.small_threshold, 1.0)
        return f"少于{n}" if language == "zh" else f"fewer than {n}"
    value = format_number(max(t.value, 0.0) if t.is_count else t.value, t.step)
    suffix = "%" if t.category == "proportion" and t.scale == 100 else ""
    return f"约{value}{suffix}" if language == "zh" else f"about {value}{suffix}"


@dataclass(frozen=True, slots=True)
class Resolved:
    """A text with its references replaced.

    Attributes:
        text: the text, each known reference replaced by its allowed phrase.
        resolved: the references replaced, in order (``"mean_rating"`` …).
        unknown: the references left in place because no release has that name.
    """

    text: str
    resolved: tuple[str, ...]
    unknown: tuple[str, ...]


def resolve_references(text: str, targets: Iterable[Target], *, language: str = "auto") -> Resolved:
    """Replace every ``[[reference]]`` to a known target with its allowed phrase.

    Args:
        text: the model's answer.
        targets: the guard's targets (:attr:`dpllm.guard.Guard.targets`).
        language: ``"en"``, ``"zh"`` or ``"auto"`` (the language of each line).

    Returns:
        A :class:`Resolved`.
    """
    if "[[" not in text:
        return Resolved(text, (), ())
    by_ref = {reference_name(t.name): t for t in targets}
    by_ref.update({t.name: t for t in targets})
    done: list[str] = []
    unknown: list[str] = []

    def replace(m: re.Match[str]) -> str:
        ref = m.group(1)
        t = by_ref.get(ref)
        if t is None:
            unknown.append(ref)
            return m.group(0)
        done.append(ref)
        lang = language
        if lang == "auto":
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.end())
            line = text[start : end if end != -1 else len(text)]
            lang = text_language(REFERENCE.sub("", line))
        return allowed_phrase(t, lang)

    out = _DOUBLED.sub(r"\1", REFERENCE.sub(replace, text))
    return Resolved(out, tuple(done), tuple(unknown))


# "约[[x]]" → "约约160": the model's own approximation word is kept, ours dropped.
_DOUBLED = re.compile(
    r"((?:\b(?:about|around|roughly|approximately|some|nearly)|约|大约|大概|~)\s*)(?:about |约)",
    re.IGNORECASE,
)
