"""FastPhoneRecognizer: the digit bound is sound and the matches equal stock Presidio's."""

from __future__ import annotations

import json
import random
from pathlib import Path

import phonenumbers
import pytest
from phonenumbers import PhoneNumberFormat, PhoneNumberType
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

from dpllm.redact.phone import FastPhoneRecognizer, min_number_digits

CORPUS = Path(__file__).parents[1] / "data" / "redact_corpus.jsonl"
REGIONS = ("CN", "US", "GB")
FORMATS = (PhoneNumberFormat.E164, PhoneNumberFormat.INTERNATIONAL, PhoneNumberFormat.NATIONAL)


def _examples() -> list[str]:
    out: list[str] = []
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        for kind in vars(PhoneNumberType).values():
            if not isinstance(kind, int):
                continue
            number = phonenumbers.example_number_for_type(region, kind)
            if number is not None:
                out.extend(phonenumbers.format_number(number, fmt) for fmt in FORMATS)
    return out


def _spans(recognizer: PhoneRecognizer, text: str) -> list[tuple[int, int, float]]:
    return sorted((r.start, r.end, r.score) for r in recognizer.analyze(text, ["PHONE_NUMBER"]))


@pytest.mark.parametrize(
    ("region", "bounds"), [("CN", (6, 7)), ("US", (6, 7)), ("GB", (6, 7)), ("NF", (5, 5))]
)
def test_bounds(region: str, bounds: tuple[int, int]) -> None:
    assert min_number_digits(region) == bounds


@pytest.mark.parametrize("region", REGIONS)
def test_every_example_number_clears_the_bound(region: str) -> None:
    """Whatever stock matching finds in any region's example numbers is long enough."""
    with_plus, without_plus = min_number_digits(region)
    found = 0
    for text in _examples():
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=1):
            raw = match.raw_string
            need = with_plus if "+" in raw else without_plus
            assert sum(ch.isdecimal() or ch.isalpha() for ch in raw) >= need, raw
            found += 1
    assert found > 500


def _phone_like(rng: random.Random) -> str:
    pieces = ["+86 ", "+1 ", "+44 ", "00", "011", "0", "(0755) ", "1", "＋", "ext. ", "x", "转"]
    seps = [" ", "-", ".", "/", "", "，", "张伟", "电话", "$", "%", "abc"]
    out: list[str] = []
    for _ in range(rng.randint(1, 5)):
        if rng.random() < 0.4:
            out.append(rng.choice(pieces))
        out.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 11))))
        out.append(rng.choice(seps))
    return "".join(out)


def test_matches_equal_stock_presidio() -> None:
    stock = PhoneRecognizer(supported_regions=REGIONS)
    fast = FastPhoneRecognizer(supported_regions=REGIONS)
    rng = random.Random(20261123)
    texts = [_phone_like(rng) for _ in range(1000)]
    texts += [json.loads(line)["text"] for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    found = 0
    for text in texts:
        expected = _spans(stock, text)
        assert _spans(fast, text) == expected, text
        found += len(expected)
    assert found > 300  # the table exercises real matches, not only rejections
