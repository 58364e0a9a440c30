"""The precision guard: number reading (:mod:`.extract`), matching (:mod:`.targets`),
the rules (:mod:`.rules`) and figures by reference (:mod:`.references`)."""

from __future__ import annotations

from dpllm.guard.extract import NumberMention, extract_mentions, text_language
from dpllm.guard.references import Resolved, resolve_references
from dpllm.guard.rules import Guard, GuardReport, Rule, Violation

__all__ = [
    "Guard",
    "GuardReport",
    "NumberMention",
    "Resolved",
    "Rule",
    "Violation",
    "extract_mentions",
    "resolve_references",
    "text_language",
]
