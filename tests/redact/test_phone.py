"""FastPhoneRecognizer: the digit bound is sound and the matches equal stock Presidio's."""

from __future__ import annotations

import random

import phonenumbers
import pytest
from phonenumbers import PhoneNumberFormat, PhoneNumberType
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

from dpllm.redact.phone import FastPhoneRecognizer, NumberShape, min_number_digits
from tests.redact.conftest import corpus_texts, same_spans_as_stock

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


@pytest.mark.parametrize("region", REGIONS)
def test_every_example_number_has_the_shape(region: str) -> None:
    """Whatever stock matching finds in any region's example numbers passes the shape test."""
    shape = NumberShape.for_region(region)
    assert shape is not None
    found = 0
    for text in _examples():
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=1):
            assert shape.possible(match.raw_string), match.raw_string
            found += 1
    assert found > 500


@pytest.mark.parametrize(
    ("region", "candidate", "possible"),
    [
        ("CN", "13812345678", True),
        ("CN", "+86 138 1234 5678", True),  # a plus sign: always parsed
        ("CN", "0086 13812345678", True),  # the international prefix: always parsed
        ("US", "2026322368140961", False),  # an order number
        ("US", "(023) 25608210", False),  # a Chinese landline: no NANPA area code starts 0
        ("US", "1 212 555 0123", True),
        ("GB", "4431193485", False),  # a statistic
        ("GB", "020 7946 0018", True),
        ("GB", "ext 1234", True),  # letters: parsed as before
    ],
)
def test_number_shape(region: str, candidate: str, possible: bool) -> None:
    shape = NumberShape.for_region(region)
    assert shape is not None
    assert shape.possible(candidate) is possible


def test_inner_matches_need_a_mark() -> None:
    """The inner-match shortcut holds for the installed phonenumbers' patterns."""
    from phonenumbers import phonenumbermatcher

    from dpllm.redact.phone import _INNER_MARK

    rng = random.Random(7)
    alphabet = "0123456789-+#*xX~,;:'\"[]{}_=ab" + "０１２" + "\u2010\u2011\u2212\u30fc"
    for _ in range(5_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16)))
        if _INNER_MARK.search(text) is None:
            assert not any(p.search(text) for p in phonenumbermatcher._INNER_MATCHES), text


def _phone_like(rng: random.Random) -> str:
    pieces = ["+86 ", "+1 ", "+44 ", "00", "011", "0", "(0755) ", "1", "＋", "ext. ", "x", "转"]
    pieces += ["86", "44", "0044", "1795", "(", ")", "180020", "01144"]
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
    texts = [_phone_like(rng) for _ in range(3000)]
    found = same_spans_as_stock(stock, fast, "PHONE_NUMBER", [*texts, *corpus_texts()])
    assert found > 300  # the table exercises real matches, not only rejections


def test_possible_leniency_keeps_numbers_that_are_not_valid() -> None:
    """The shape test is for VALID leniency; at POSSIBLE (0) the fast recognizer still
    finds what stock finds."""
    stock = PhoneRecognizer(supported_regions=REGIONS, leniency=0)
    fast = FastPhoneRecognizer(supported_regions=REGIONS, leniency=0)
    assert same_spans_as_stock(stock, fast, "PHONE_NUMBER", ["call 555 0123 now"]) == 1
