"""Operators: what a detected span becomes. Detection never depends on them.

An :class:`Operator` maps one detected value to its replacement. The built-ins are typed
placeholders (``<PHONE_NUMBER>`` in English, ``[手机号]`` in Chinese), masking, keyed HMAC
pseudonyms and the reversible :class:`~dpllm.redact.vault.Vault`. They register by name in an
:class:`OperatorRegistry` instance (no process-wide registry).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from dpllm.errors import RedactionError

__all__ = [
    "ENTITY_LABELS_ZH",
    "HmacOperator",
    "MaskOperator",
    "Operator",
    "OperatorRegistry",
    "PlaceholderOperator",
    "placeholder",
]

#: Chinese placeholder labels per entity type (English placeholders use the type itself).
ENTITY_LABELS_ZH: Mapping[str, str] = MappingProxyType(
    {
        "PERSON": "姓名",
        "LOCATION": "地点",
        "PHONE_NUMBER": "手机号",
        "CN_LANDLINE": "座机号",
        "EMAIL_ADDRESS": "邮箱",
        "CN_RESIDENT_ID": "身份证号",
        "CN_BANK_CARD": "银行卡号",
        "CREDIT_CARD": "信用卡号",
        "CN_PASSPORT": "护照号",
        "IBAN_CODE": "IBAN",
        "IP_ADDRESS": "IP地址",
        "URL": "网址",
    }
)


def placeholder(entity: str, language: str, suffix: str = "") -> str:
    """Render a typed placeholder: ``<ENTITY>`` for English, ``[标签]`` for Chinese.

    Args:
        entity: The entity type, e.g. ``PHONE_NUMBER``.
        language: ``en`` or ``zh``.
        suffix: Appended inside the brackets after ``_`` (pseudonym tokens).

    Returns:
        The placeholder text.
    """
    tail = f"_{suffix}" if suffix else ""
    if language == "zh":
        return f"[{ENTITY_LABELS_ZH.get(entity, entity)}{tail}]"
    return f"<{entity}{tail}>"


class Operator(Protocol):
    """Turns one detected value into its replacement."""

    def apply(self, value: str, *, entity: str, language: str, scope: str) -> str:
        """Return the replacement for ``value`` (an ``entity`` in ``language`` text)."""
        ...


@dataclass(frozen=True)
class PlaceholderOperator:
    """Replace each value with its typed placeholder (``<EMAIL_ADDRESS>``, ``[邮箱]``)."""

    def apply(self, value: str, *, entity: str, language: str, scope: str) -> str:
        """Return the placeholder for ``entity`` in ``language``."""
        return placeholder(entity, language)


@dataclass(frozen=True)
class MaskOperator:
    """Mask a value's characters, keeping the last ``keep`` letters or digits and separators.

    Args:
        char: The masking character.
        keep: How many trailing alphanumerics stay visible (0 hides everything).
    """

    char: str = "*"
    keep: int = 0

    def __post_init__(self) -> None:
        if len(self.char) != 1:
            raise RedactionError("MaskOperator.char must be exactly one character")
        if self.keep < 0:
            raise RedactionError("MaskOperator.keep must be ≥ 0")

    def apply(self, value: str, *, entity: str, language: str, scope: str) -> str:
        """Return ``value`` with its letters and digits masked (separators stay)."""
        alnum = sum(ch.isalnum() for ch in value)
        visible_from = alnum - self.keep if self.keep < alnum // 2 else alnum
        out, seen = [], 0
        for ch in value:
            if ch.isalnum():
                out.append(ch if seen >= visible_from else self.char)
                seen += 1
            else:
                out.append(ch)
        return "".join(out)


def _digest(key: bytes, entity: str, value: str, scope: str) -> str:
    message = "\x1f".join((scope, entity, value)).encode("utf-8")
    return hmac.new(key, message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class HmacOperator:
    """Keyed pseudonyms: the same value, entity and scope always give the same token.

    Args:
        key: The HMAC-SHA256 key (≥ 16 bytes), owned by the caller; dpllm keeps no secret.
        length: Hex digits of the digest kept in the token.
    """

    key: bytes = field(repr=False)
    length: int = 10

    def __post_init__(self) -> None:
        if not isinstance(self.key, bytes) or len(self.key) < 16:
            raise RedactionError("the HMAC key must be at least 16 bytes; pass hmac_key=")
        if not 6 <= self.length <= 64:
            raise RedactionError("HmacOperator.length must be between 6 and 64")

    def apply(self, value: str, *, entity: str, language: str, scope: str) -> str:
        """Return a token like ``<PERSON_3f2a9c1b0d>`` / ``[姓名_3f2a9c1b0d]``."""
        return placeholder(entity, language, _digest(self.key, entity, value, scope)[: self.length])


class OperatorRegistry:
    """Named operators, one registry per :class:`~dpllm.redact.Redactor` (no globals).

    Args:
        factories: Initial name → factory table (copied).
    """

    def __init__(self, factories: Mapping[str, Callable[[], Operator]] | None = None) -> None:
        self._factories: dict[str, Callable[[], Operator]] = dict(factories or {})

    def register(self, name: str, factory: Callable[[], Operator]) -> None:
        """Register ``factory`` under ``name`` (replacing any previous one)."""
        self._factories[name] = factory

    def names(self) -> tuple[str, ...]:
        """Return the registered names, sorted."""
        return tuple(sorted(self._factories))

    def get(self, name: str) -> Operator:
        """Build the operator registered under ``name``.

        Raises:
            RedactionError: When no operator has that name.
        """
        try:
            factory = self._factories[name]
        except KeyError:
            raise RedactionError(
                f"unknown operator {name!r}; choose one of {', '.join(self.names())}"
            ) from None
        return factory()
