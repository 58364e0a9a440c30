"""PII redaction for English and Chinese text with Presidio, fully offline."""

from __future__ import annotations

from dpllm.redact.engine import RedactionResult, Redactor, Span, detect_language
from dpllm.redact.operators import (
    HmacOperator,
    MaskOperator,
    Operator,
    OperatorRegistry,
    PlaceholderOperator,
)
from dpllm.redact.vault import Vault

__all__ = [
    "HmacOperator",
    "MaskOperator",
    "Operator",
    "OperatorRegistry",
    "PlaceholderOperator",
    "RedactionResult",
    "Redactor",
    "Span",
    "Vault",
    "detect_language",
]
