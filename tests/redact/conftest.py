from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from dpllm.redact import Redactor

KEY = b"synthetic-test-key-0123456789abcdef"


@pytest.fixture(scope="session")
def redactor() -> Redactor:
    """One Redactor per session: loading spaCy and jieba takes seconds."""
    return Redactor(hmac_key=KEY)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make every attempted socket connection fail loudly."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield
