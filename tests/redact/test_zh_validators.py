"""The Chinese recognizers' validators, tabled at their boundaries (all numbers synthetic).

The check characters and digits are computed here from the published definitions
(ISO 7064 MOD 11-2 with weights 2^(17-i) mod 11; Luhn by digit sums), not with the
code under test. No spaCy model is loaded: each recognizer is built on its own.
"""

from __future__ import annotations

import pytest

from dpllm.redact.recognizers_zh import (
    AsciiEmailRecognizer,
    CnBankCardRecognizer,
    CnCreditCardRecognizer,
    CnLandlineRecognizer,
    CnMobileRecognizer,
    CnPassportRecognizer,
    CnResidentIdContextRecognizer,
    CnResidentIdRecognizer,
    GluedIpRecognizer,
    _Recognizer,
    luhn_ok,
    normalize_width,
    resident_id_ok,
)


def id18(region: str, birth: str, seq: str = "002") -> str:
    """An 18-character resident ID with a correct check character."""
    body = region + birth + seq
    total = sum(int(c) * pow(2, 17 - i, 11) for i, c in enumerate(body))
    return body + "10X98765432"[total % 11]


def bad_check(number: str) -> str:
    """The same ID with a wrong check character."""
    return number[:17] + ("0" if number[17] != "0" else "1")


def luhn(body: str) -> str:
    """``body`` followed by its Luhn check digit."""
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch) * (2 if i % 2 == 0 else 1)  # the check digit will sit to the right
        total += d // 10 + d % 10
    return body + str(-total % 10)


def test_the_independent_helpers_agree_with_published_examples() -> None:
    assert id18("110105", "19491231") == "11010519491231002X"
    assert luhn("411111111111111") == "4111111111111111"
    assert luhn("555555555555444") == "5555555555554444"


# -- resident_id_ok -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "ok"),
    [
        (id18("110105", "20000229"), True),  # a leap day (a 3-digit year 000 is no year)
        (id18("110105", "19000229"), False),  # 1900 was no leap year
        (id18("110105", "19490231"), False),  # 31 February, correct check character
        (id18("110105", "19490230"), False),
        (id18("110105", "19491331"), False),  # month 13
        (id18("440305", "19881010"), True),
        (bad_check(id18("440305", "19881010")), False),
        (id18("110105", "19491231").lower(), True),  # a lower-case x is the same ID
        ("1101051949123100" + "2A", False),  # a letter that is not X
        ("11010519491231A02X", False),  # a letter in the body, check character fine
        ("110105491231002" + "1", False),  # 16 digits: neither form
        ("110105491231002" + "12", False),  # 17 digits
        ("110105200229002", True),  # legacy form: 1920-02-29
        ("110105000229002", False),  # 1900-02-29 does not exist
        ("110105960229002", True),  # 1996-02-29
        ("110105490231002", False),  # 1949-02-31
        ("110105490230002", False),
        ("990105491231002", False),  # no such province
        ("11010549123100A", False),
    ],
)
def test_resident_id_checksum_and_birth_date(number: str, ok: bool) -> None:
    assert resident_id_ok(number) is ok


# -- luhn_ok ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "ok"),
    [
        ("5555555555554444", True),  # a 5 doubled is 10 → 1
        ("5555555555554445", False),
        ("378282246310005", True),
        ("378282246310006", False),
        ("6200000000000005", True),
        ("6200000000000006", False),
        ("0", True),
        ("18", True),  # 1 doubled is 2, + 8 = 10
        ("19", False),
        ("a-b", False),
    ],
)
def test_luhn_table(number: str, ok: bool) -> None:
    assert luhn_ok(number) is ok


# -- the recognizers' validators --------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "ok"),
    [
        (luhn("620000000000000"), True),  # 16 digits
        (luhn("62000000000000000"), True),  # 18
        (luhn("620000000000000000"), True),  # 19
        (luhn("62000000000000"), False),  # 15: too short for a domestic card
        (luhn("6200000000000000000"), False),  # 20: too long
        ("6200 0000 0000 0005", True),
        ("6200000000000006", False),
    ],
)
def test_bank_card_length_and_luhn(number: str, ok: bool) -> None:
    assert CnBankCardRecognizer().validate_result(number) is ok


@pytest.mark.parametrize(
    ("number", "ok"),
    [
        (luhn("37828224631000"), True),  # 15 (Amex)
        (luhn("411111111111111"), True),  # 16
        (luhn("411111111111111111"), True),  # 19
        (luhn("4111111111111"), False),  # 14
        (luhn("4111111111111111111"), False),  # 20
        ("4111-1111-1111-1112", False),  # 16 digits, Luhn fails
        ("3782 822463 10005", True),
    ],
)
def test_credit_card_length_and_luhn(number: str, ok: bool) -> None:
    assert CnCreditCardRecognizer().validate_result(number) is ok


@pytest.mark.parametrize(
    ("number", "result"),
    [
        ("010-2345678", None),  # 10 digits: the shortest landline (undecided: context)
        ("010-234567", False),  # 9
        ("+86 0755-8765-4321", None),  # 14
        ("+86 0755-8765-4321-12", None),  # 16
        ("+86 0755-8765-4321-123", False),  # 17
        ("+86 0755-8765-4321转12345", None),  # what follows 转 is the extension
        ("+86 0755-8765-4321ext12", None),  # the letters of ext are not digits
        ("+86 0755-8765-4321EXT12", None),
    ],
)
def test_landline_digit_count(number: str, result: bool | None) -> None:
    assert CnLandlineRecognizer().validate_result(number) is result


@pytest.mark.parametrize(
    ("number", "result"),
    [
        (id18("110105", "19491231"), True),  # checksum and date: near-certain
        (id18("110105", "19491231").lower(), True),
        ("110105491231002", None),  # legacy: no checksum, context decides
        (bad_check(id18("110105", "19491231")), False),
        ("110105491331002", False),
    ],
)
def test_resident_id_scores(number: str, result: bool | None) -> None:
    assert CnResidentIdRecognizer().validate_result(number) is result


@pytest.mark.parametrize(
    ("number", "ok"),
    [
        (bad_check(id18("110105", "19491231")), True),  # a mistyped ID is still an ID
        (bad_check(id18("110105", "20000229")), True),
        (bad_check(id18("440305", "19880101")), True),
        (bad_check(id18("990105", "19491231")), False),  # no such province
        (bad_check(id18("110105", "19490231")), False),  # 31 February
        (bad_check(id18("110105", "19490230")), False),
        (bad_check(id18("110105", "19491301")), False),
        (bad_check(id18("110105", "19000229")), False),
    ],
)
def test_resident_id_after_an_id_word_needs_province_and_date(number: str, ok: bool) -> None:
    assert CnResidentIdContextRecognizer().validate_result(number) is ok


def test_email_suffix_is_checked_on_the_domain() -> None:
    seen: list[str] = []

    def has_suffix(domain: str) -> bool:
        seen.append(domain)
        return domain.endswith(".cn")

    rec = AsciiEmailRecognizer(has_suffix=has_suffix)
    assert rec.validate_result("li.na@mail.example.cn") is True
    assert rec.validate_result("li.na@mail.example.invalid") is False
    assert seen == ["mail.example.cn", "mail.example.invalid"]


# -- construction ------------------------------------------------------------------------

EXAMPLES: list[tuple[type[_Recognizer], str, str]] = [
    (CnMobileRecognizer, "手机13812345678", "13812345678"),
    (CnLandlineRecognizer, "座机010-62345678", "010-62345678"),
    (CnResidentIdRecognizer, "号码11010519491231002X", "11010519491231002X"),
    (CnResidentIdContextRecognizer, "身份证110105194912310020", "110105194912310020"),
    (GluedIpRecognizer, "地址192.168.1.10登录", "192.168.1.10"),
    (CnBankCardRecognizer, "卡号6200000000000005", "6200000000000005"),
    (CnCreditCardRecognizer, "卡4111111111111111", "4111111111111111"),
    (CnPassportRecognizer, "护照E12345678", "E12345678"),
]


def _build(cls: type, **kw: str) -> object:
    if cls is AsciiEmailRecognizer:
        return cls(has_suffix=lambda d: True, **kw)
    return cls(**kw)


@pytest.mark.parametrize(("cls", "text", "expected"), EXAMPLES)
def test_a_recognizer_built_without_a_language_serves_chinese(
    cls: type[_Recognizer], text: str, expected: str
) -> None:
    rec = cls()
    assert rec.supported_language == "zh"
    assert rec.supported_entities == [cls.ENTITY]
    # The words that lift a weak match (a 15-digit ID after 身份证) are carried.
    assert rec.context == list(cls.CONTEXT)
    found = rec.analyze(text, entities=[cls.ENTITY])
    assert [text[r.start : r.end] for r in found] == [expected]


def test_the_email_recognizer_defaults_to_chinese() -> None:
    rec = AsciiEmailRecognizer(has_suffix=lambda d: True)
    assert rec.supported_language == "zh"
    assert rec.context == list(AsciiEmailRecognizer.CONTEXT)
    found = rec.analyze("邮箱ab@x.cn谢谢", entities=["EMAIL_ADDRESS"])
    assert [(r.start, r.end) for r in found] == [(2, 9)]


def test_every_recognizer_has_its_own_name_per_language() -> None:
    """Presidio names the recognizer behind each span; each class and language is one name."""
    classes = [cls for cls, _, _ in EXAMPLES] + [AsciiEmailRecognizer]
    names = []
    for lang in ("en", "zh"):
        for cls in classes:
            rec = _build(cls, language=lang)
            assert rec.supported_language == lang  # type: ignore[attr-defined]
            assert cls.__name__ in rec.name  # type: ignore[attr-defined]
            names.append(rec.name)  # type: ignore[attr-defined]
    assert len(set(names)) == len(names)


def test_passports_are_upper_case() -> None:
    rec = CnPassportRecognizer()
    assert rec.analyze("护照e12345678", entities=["CN_PASSPORT"]) == []


def test_normalize_width_gives_a_plain_str_even_for_a_str_subclass() -> None:
    """spaCy refuses str subclasses: the text handed on is always a plain ``str``."""

    class Marked(str):
        pass

    for text in ("plain ascii", "全角１２３"):
        out = normalize_width(Marked(text))
        assert type(out) is str
    assert normalize_width(Marked("plain ascii")) == "plain ascii"
    assert normalize_width("全角１２３") == "全角123"
