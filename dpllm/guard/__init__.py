"""The precision guard: number extraction (:mod:`.extract`) and the rules (:mod:`.rules`)."""

from __future__ import annotations

from dpllm.guard.extract import NumberMention, extract_mentions, text_language
from dpllm.guard.rules import Guard, GuardReport, Rule, Violation

__all__ = [
    "Guard",
    "GuardReport",
    "NumberMention",
    "Rule",
    "Violation",
    "extract_mentions",
    "text_language",
]
