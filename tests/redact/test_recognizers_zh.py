"""Parametrised tables for the Chinese recognizers (all values synthetic)."""

from __future__ import annotations

import pytest

from dpllm.redact import Redactor
from dpllm.redact.recognizers_zh import luhn_ok, normalize_width, resident_id_ok

FW = str.maketrans({chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)})


def found(redactor: Redactor, text: str, language: str = "zh") -> list[tuple[str, str]]:
    spans, _ = redactor.analyze(text, language=language)
    return [(s.entity, text[s.start : s.end]) for s in spans if s.entity != "PERSON"]


@pytest.mark.parametrize(
    ("number", "ok"),
    [
        ("11010519491231002X", True),
        ("110105194912310021", False),  # wrong check character
        ("11010519490231002X", False),  # 31 February → invalid date (checksum aside)
        ("99010519491231002X", False),  # no such province
        ("110105491231002", True),  # 15-digit legacy form
        ("110105491331002", False),  # month 13
        ("1101051949123100", False),
    ],
)
def test_resident_id_validator(number: str, ok: bool) -> None:
    assert resident_id_ok(number) is ok


@pytest.mark.parametrize(
    ("number", "ok"),
    [
        ("4111111111111111", True),
        ("4111111111111112", False),
        ("6222 0212 3456 7890 128", True),
        ("", False),
    ],
)
def test_luhn(number: str, ok: bool) -> None:
    assert luhn_ok(number) is ok


def test_normalize_width_keeps_offsets() -> None:
    text = "电话１３８１２３４５６７８，邮箱ａ＠ｂ．ｃｎ"
    assert len(normalize_width(text)) == len(text)
    assert "13812345678" in normalize_width(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("手机13812345678谢谢", [("PHONE_NUMBER", "13812345678")]),
        ("电话：+86 138-1234-5678。", [("PHONE_NUMBER", "+86 138-1234-5678")]),
        ("打86 139 8765 4321吧", [("PHONE_NUMBER", "86 139 8765 4321")]),
        ("手机１３８１２３４５６７８", [("PHONE_NUMBER", "１３８１２３４５６７８")]),
        ("编号138123456789不是手机", []),  # 12 digits: not a mobile
        ("编号10812345678", []),  # no 10x mobile prefix (12x parses as a +1 US number)
        ("座机010-62345678转123", [("CN_LANDLINE", "010-62345678转123")]),
        ("办公电话(0755) 8765 4321。", [("CN_LANDLINE", "(0755) 8765 4321")]),
    ],
)
def test_phone_numbers(redactor: Redactor, text: str, expected: list[tuple[str, str]]) -> None:
    assert found(redactor, text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("身份证11010519491231002X已登记", [("CN_RESIDENT_ID", "11010519491231002X")]),
        ("身份证号：11010519491231002x。", [("CN_RESIDENT_ID", "11010519491231002x")]),
        ("证号110105194912310021错了", []),  # wrong checksum
        ("号码11010519491331002X", []),  # month 13
        ("身份证110105491231002", [("CN_RESIDENT_ID", "110105491231002")]),  # legacy + context
        (
            "身份证１１０１０５１９４９１２３１００２Ｘ",
            [("CN_RESIDENT_ID", "１１０１０５１９４９１２３１００２Ｘ")],
        ),
    ],
)
def test_resident_ids(redactor: Redactor, text: str, expected: list[tuple[str, str]]) -> None:
    assert found(redactor, text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("银行卡6222021234567890128退款", [("CN_BANK_CARD", "6222021234567890128")]),
        ("卡号6222 0212 3456 7890 128。", [("CN_BANK_CARD", "6222 0212 3456 7890 128")]),
        ("卡号6222021234567890129", []),  # Luhn fails
        ("信用卡4111111111111111被扣款", [("CREDIT_CARD", "4111111111111111")]),
        ("卡4111-1111-1111-1111，", [("CREDIT_CARD", "4111-1111-1111-1111")]),
        ("订单2026112300012345", []),
    ],
)
def test_cards(redactor: Redactor, text: str, expected: list[tuple[str, str]]) -> None:
    assert found(redactor, text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("邮箱是zhang.wei@example.com，谢谢", [("EMAIL_ADDRESS", "zhang.wei@example.com")]),
        ("发到li_na@mail.example.cn谢谢", [("EMAIL_ADDRESS", "li_na@mail.example.cn")]),
        ("邮箱ｌｉ＠ｅｘａｍｐｌｅ．ｃｏｍ。", [("EMAIL_ADDRESS", "ｌｉ＠ｅｘａｍｐｌｅ．ｃｏｍ")]),
        ("护照号E12345678请查收", [("CN_PASSPORT", "E12345678")]),
        ("护照EA1234567。", [("CN_PASSPORT", "EA1234567")]),
        ("型号E12345678很好用", []),  # passport shape without context stays below threshold
    ],
)
def test_email_and_passport(redactor: Redactor, text: str, expected: list[tuple[str, str]]) -> None:
    assert found(redactor, text) == expected


@pytest.mark.parametrize(
    "text",
    ["2026-W47 的评分为 4.5/5", "价格¥1299.00，2026年11月23日", "订单DD2026112300，时间10:30"],
)
def test_decoys_not_redacted(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text).spans == ()
