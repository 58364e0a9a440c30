"""FastUrlRecognizer finds exactly what stock Presidio's URL recognizer finds."""

from __future__ import annotations

import random

from presidio_analyzer.predefined_recognizers import UrlRecognizer

from dpllm.redact.url import FastUrlRecognizer, anchored
from tests.redact.conftest import corpus_texts, same_spans_as_stock


def _url_like(rng: random.Random) -> str:
    pieces = [
        "www.",
        "www2.",
        "http://",
        "https://",
        ".com",
        ".co.uk",
        ".cn",
        ".ORG",
        ".io",
        ".",
        "..",
        "-",
        "/",
        "/path?q=1",
        "@",
        "example",
        "Ex4mple",
        "ſk",
        "K",
        "3.14",
        "e.g.",
        "mail.example.edu.cn",
        " ",
        "，",
        "网址",
        "'",
        '"',
        "(",
        ")",
        "a.b",
        "1.2.3.4",
        "ÿ.com",
    ]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))


def test_only_the_schemeless_pattern_changes() -> None:
    stock = UrlRecognizer()
    changed = [p.name for p in stock.patterns if anchored(p).regex != p.regex]
    assert changed == ["Non schema URL"]


def test_matches_equal_stock_presidio() -> None:
    stock, fast = UrlRecognizer(), FastUrlRecognizer()
    rng = random.Random(20261129)
    texts = [_url_like(rng) for _ in range(3_000)]
    found = same_spans_as_stock(stock, fast, "URL", [*texts, *corpus_texts()])
    assert found > 500
