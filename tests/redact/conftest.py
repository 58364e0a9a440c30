from __future__ import annotations

import json
import socket
from collections.abc import Iterable, Iterator
from pathlib import Path
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


CORPUS = Path(__file__).parents[1] / "data" / "redact_corpus.jsonl"


def corpus_texts() -> list[str]:
    """Every text of the shipped labelled corpus."""
    return [json.loads(line)["text"] for line in CORPUS.read_text(encoding="utf-8").splitlines()]


def same_spans_as_stock(stock: Any, fast: Any, entity: str, texts: Iterable[str]) -> int:
    """Assert ``fast`` finds exactly ``stock``'s spans and scores in every text; the count."""

    def spans(recognizer: Any, text: str) -> list[tuple[int, int, float]]:
        return sorted((r.start, r.end, r.score) for r in recognizer.analyze(text, [entity]))

    found = 0
    for text in texts:
        expected = spans(stock, text)
        assert spans(fast, text) == expected, text
        found += len(expected)
    return found
