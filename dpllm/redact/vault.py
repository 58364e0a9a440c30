"""A reversible, in-memory pseudonym vault for one conversation.

Before a model call, :meth:`Redactor.pseudonymise` swaps personal data for stable tokens
(``<PERSON_3f2a9c1b0d>``, ``[手机号_8e1d…]``) recorded here; :meth:`Vault.restore` puts the
originals back into the model's answer for the local caller. The key is random per vault
unless one is given, so tokens are stable within a vault (and its scope) and meaningless
outside it. Nothing is written anywhere.
"""

from __future__ import annotations

import re
import secrets
import threading

from dpllm.errors import RedactionError
from dpllm.redact.operators import HmacOperator
from dpllm.redact.recognizers_zh import normalize_width

__all__ = ["Vault"]

_SEPARATORS = re.compile(r"[\s\-()]")
_NUMERIC = frozenset(
    {"PHONE_NUMBER", "CN_LANDLINE", "CN_RESIDENT_ID", "CN_BANK_CARD", "CREDIT_CARD", "IBAN_CODE"}
)


class Vault:
    """Token ↔ value table for one call or conversation; thread-safe.

    Args:
        key: HMAC key (≥ 16 bytes); a fresh random key when omitted.
        scope: Mixed into every token, so different scopes never share tokens.

    Raises:
        RedactionError: When the key is too short.
    """

    def __init__(self, *, key: bytes | None = None, scope: str = "") -> None:
        self._hmac = HmacOperator(key=key if key is not None else secrets.token_bytes(32))
        self.scope = scope
        self._by_token: dict[str, str] = {}
        self._by_value: dict[tuple[str, str, str], str] = {}
        self._lock = threading.Lock()
        self._pattern: re.Pattern[str] | None = None

    def __len__(self) -> int:
        return len(self._by_token)

    def __repr__(self) -> str:  # never show the values
        return f"Vault(scope={self.scope!r}, tokens={len(self)})"

    @staticmethod
    def _canonical(entity: str, value: str) -> str:
        value = normalize_width(value)
        if entity in _NUMERIC:
            return _SEPARATORS.sub("", value).upper()
        if entity == "EMAIL_ADDRESS":
            return value.lower()
        return value

    def apply(self, value: str, *, entity: str, language: str, scope: str) -> str:
        """Return the token for ``value``, recording it (the :class:`Operator` protocol).

        The same value (up to spacing, width and case where they do not matter) gets the
        same token; the first spelling seen is the one :meth:`restore` writes back.
        """
        canonical = self._canonical(entity, value)
        full_scope = f"{self.scope}\x1e{scope}"
        key = (entity, language, canonical)
        with self._lock:
            token = self._by_value.get(key)
            if token is not None:
                return token
            for length in (10, 16, 32, 64):
                op = HmacOperator(key=self._hmac.key, length=length)
                token = op.apply(canonical, entity=entity, language=language, scope=full_scope)
                if token not in self._by_token:
                    break
            else:  # pragma: no cover - a 256-bit collision
                raise RedactionError("pseudonym collision; use a new Vault")
            self._by_token[token] = value
            self._by_value[key] = token
            self._pattern = None
            return token

    def restore(self, text: str) -> str:
        """Replace every token of this vault found in ``text`` with its original value.

        Args:
            text: Typically the model's answer to a pseudonymised prompt.

        Returns:
            The text with originals restored; unknown tokens are left as they are.
        """
        with self._lock:
            if not self._by_token:
                return text
            if self._pattern is None:
                tokens = sorted(self._by_token, key=len, reverse=True)
                self._pattern = re.compile("|".join(map(re.escape, tokens)))
            pattern, table = self._pattern, dict(self._by_token)
        return pattern.sub(lambda m: table[m.group(0)], text)

    def tokens(self) -> tuple[str, ...]:
        """Return the tokens issued so far (not the values)."""
        with self._lock:
            return tuple(self._by_token)
