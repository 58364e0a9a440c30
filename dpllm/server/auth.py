"""API-key authentication as pure ASGI middleware (as starlette's trustedhost.py).

``Authorization: Bearer <key>``: the key is hashed (``sha256:``, as stored in
``dpllm.toml``) and looked up; the matching :class:`~dpllm.config.ApiKey` is put
in ``scope["state"]["api_key"]`` for the routes. No key, or an unknown one, is a
401 in OpenAI's error shape. Public paths (health, OpenAPI docs) need no key.
The key itself is never stored or logged: only its hash's first 8 hex digits
(:func:`fingerprint`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from starlette.types import ASGIApp, Receive, Scope, Send

from dpllm.config import ApiKey, hash_api_key

__all__ = ["PUBLIC_PATHS", "ApiKeyMiddleware", "fingerprint"]

PUBLIC_PATHS = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


def fingerprint(key_hash: str) -> str:
    """A log-safe prefix of a key's hash: ``sha256:3f2a9c1b``."""
    return key_hash[: len("sha256:") + 8]


class ApiKeyMiddleware:
    """Authenticates every HTTP request outside :data:`PUBLIC_PATHS`.

    Args:
        app: the wrapped ASGI app.
        keys: the configured keys (hashed).
        public: paths that need no key.
    """

    def __init__(
        self, app: ASGIApp, *, keys: Iterable[ApiKey], public: Iterable[str] = PUBLIC_PATHS
    ) -> None:
        self.app = app
        self.keys: Mapping[str, ApiKey] = {k.key_hash: k for k in keys}
        self.public = frozenset(public)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.public:
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        if token is None:
            await _deny(send, "missing API key: send 'Authorization: Bearer <key>'")
            return
        key = self.keys.get(hash_api_key(token))
        if key is None:
            await _deny(send, "invalid API key")
            return
        scope.setdefault("state", {})["api_key"] = key
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> str | None:
    """The token of ``Authorization: Bearer <token>``, exactly as sent.

    One space after the scheme and a token without whitespace: a key with stray
    whitespace is not the key (nothing is stripped, so the only token that
    authenticates is the configured key itself, byte for byte).
    """
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            text: str = bytes(value).decode("latin-1")
            scheme, _, token = text.partition(" ")
            # token.split() == [token]: one word, no whitespace anywhere (str.isspace's)
            if scheme.lower() == "bearer" and token and token.split() == [token]:
                return token
            return None
    return None


async def _deny(send: Send, message: str) -> None:
    body = json.dumps(
        {
            "error": {
                "message": message,
                "type": "authentication_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b"Bearer"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
