"""Recognizers for Chinese formats, built on Presidio's :class:`PatternRecognizer`.

Every pattern uses ASCII-only lookarounds instead of ``\\b``: Python's ``\\b`` treats Chinese
characters as word characters, so ``手机13812345678`` has no word boundary before the digits.
The recognizers run on text whose full-width ASCII (``１３８``, ``＠``) was mapped one-to-one to
half-width, so offsets stay those of the original text (see :func:`normalize_width`).

Validators (GB 11643 checksum, birth dates, Luhn) are plain functions so tests can table them.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable

from presidio_analyzer import Pattern, PatternRecognizer

__all__ = [
    "CnBankCardRecognizer",
    "CnCreditCardRecognizer",
    "CnLandlineRecognizer",
    "CnMobileRecognizer",
    "CnPassportRecognizer",
    "CnResidentIdContextRecognizer",
    "CnResidentIdRecognizer",
    "GluedIpRecognizer",
    "AsciiEmailRecognizer",
    "luhn_ok",
    "normalize_width",
    "resident_id_ok",
]

_B = r"(?<![0-9A-Za-z])"  # ASCII-only left boundary
_E = r"(?![0-9A-Za-z])"  # ASCII-only right boundary

# Full-width ASCII block U+FF01..U+FF5E maps one-to-one to U+0021..U+007E, and the
# ideographic space to a space: lengths and offsets are preserved.
_WIDTH = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
_WIDE = re.compile("[\uff01-\uff5e\u3000]")

# First two digits of a resident ID: province-level codes (GB/T 2260).
_PROVINCES = frozenset(
    "11 12 13 14 15 21 22 23 31 32 33 34 35 36 37 41 42 43 44 45 46 "
    "50 51 52 53 54 61 62 63 64 65 71 81 82 83".split()
)
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def normalize_width(text: str) -> str:
    """Map full-width ASCII characters to half-width, keeping every offset.

    Args:
        text: Any text.

    Returns:
        A string of the same length where ``１３８`` became ``138`` and ``＠`` became ``@``.
    """
    if _WIDE.search(text) is None and type(text) is str:
        return text  # nothing to map: no copy (a 10 MB text stays one string)
    return text.translate(_WIDTH)


def _digits(text: str) -> str:
    """The digits of a card or phone number (separators and the letters of ``ext`` dropped)."""
    return "".join(ch for ch in text if ch.isdigit())


def luhn_ok(number: str) -> bool:
    """Check the Luhn (mod 10) checksum of a card number; separators are ignored.

    Args:
        number: Digits, possibly with spaces or dashes.

    Returns:
        True when the digits pass the Luhn check.
    """
    digits = [int(ch) for ch in number if ch.isdigit()]
    if not digits:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _valid_date(year: int, month: int, day: int) -> bool:
    try:
        _dt.date(year, month, day)
    except ValueError:
        return False
    return True


def resident_id_ok(number: str) -> bool:
    """Validate a mainland resident ID number (GB 11643-1999).

    The 18-digit form needs a province code, a real birth date and the ISO 7064 MOD 11-2
    check character; the 15-digit legacy form (birth year 19YY, no checksum) needs a province
    code and a real date.

    Args:
        number: The candidate, 15 or 18 characters (the last may be ``X``).

    Returns:
        True when the number is structurally valid.
    """
    s = number.upper()
    if len(s) == 18:
        if not s[:17].isdigit() or not (s[17].isdigit() or s[17] == "X"):
            return False
        if s[:2] not in _PROVINCES:
            return False
        if not _valid_date(int(s[6:10]), int(s[10:12]), int(s[12:14])):
            return False
        total = sum(int(c) * w for c, w in zip(s[:17], _ID_WEIGHTS, strict=True))
        return _ID_CHECK[total % 11] == s[17]
    if len(s) == 15 and s.isdigit():
        return s[:2] in _PROVINCES and _valid_date(1900 + int(s[6:8]), int(s[8:10]), int(s[10:12]))
    return False


class _Recognizer(PatternRecognizer):
    """A pattern recognizer whose validator is a plain function (True → score 1.0)."""

    ENTITY = ""
    PATTERNS: list[Pattern] = []
    CONTEXT: list[str] = []

    def __init__(self, *, language: str = "zh") -> None:
        super().__init__(
            supported_entity=self.ENTITY,
            patterns=list(self.PATTERNS),
            context=list(self.CONTEXT),
            supported_language=language,
            name=f"{type(self).__name__}_{language}",
        )

    def validate_result(self, pattern_text: str) -> bool | None:
        return self._check(pattern_text)

    def _check(self, pattern_text: str) -> bool | None:
        return None


class CnMobileRecognizer(_Recognizer):
    """Mainland mobile numbers: ``13812345678``, ``+86 138-1234-5678``, ``86 138 1234 5678``."""

    ENTITY = "PHONE_NUMBER"
    PATTERNS = [
        Pattern(
            "cn_mobile",
            _B + r"(?:(?:\+|00)?86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}" + _E,
            0.85,
        ),
        Pattern(
            "cn_mobile_paren_prefix",
            r"\((?:\+|00)?86\)[ -]?1[3-9]\d(?:[ -]?\d{4}){2}" + _E,
            0.85,
        ),
    ]
    CONTEXT = ["手机", "电话", "联系", "号码", "致电", "短信", "微信", "mobile", "phone", "call"]


class CnLandlineRecognizer(_Recognizer):
    """Mainland landlines with an area code: ``010-12345678``, ``(0755) 8765 4321``."""

    ENTITY = "CN_LANDLINE"
    _AREA = r"(?:0(?:10|2\d)|0[3-9]\d{2})"
    PATTERNS = [
        Pattern(
            "cn_landline",
            _B
            + r"(?:(?:\+|00)?86[ -]?)?(?:\("
            + _AREA
            + r"\)|"
            + _AREA
            + r")[ -]?[2-9]\d{2,3}[ -]?\d{4}"
            + r"(?:(?:转|-|ext\.?)\d{1,5})?"
            + _E,
            0.6,
        ),
    ]
    CONTEXT = ["电话", "座机", "固话", "办公", "总机", "联系", "tel", "phone", "office"]

    def _check(self, pattern_text: str) -> bool | None:
        digits = _digits(pattern_text.split("转")[0])
        return None if 10 <= len(digits) <= 16 else False


class CnResidentIdRecognizer(_Recognizer):
    """Resident ID numbers: 18 digits with the GB 11643 checksum, or the 15-digit legacy form."""

    ENTITY = "CN_RESIDENT_ID"
    PATTERNS = [
        Pattern("cn_id_18", _B + r"[1-8]\d{16}[\dXx]" + _E, 0.5),
        Pattern("cn_id_15", _B + r"[1-8]\d{14}" + _E, 0.3),
    ]
    CONTEXT = ["身份证", "证件", "居民身份", "公民身份", "id", "identity"]

    def _check(self, pattern_text: str) -> bool | None:
        if not resident_id_ok(pattern_text):
            return False
        # An 18-digit number with a checksum and a real date is near-certain; the 15-digit
        # form has no checksum, so it keeps its low score until context raises it.
        return True if len(pattern_text) == 18 else None


class CnResidentIdContextRecognizer(_Recognizer):
    """An ID-shaped number right after an ID word, redacted even with a wrong check digit.

    A mistyped resident ID is still someone's ID: 18 characters with a province
    code and a real birth date, within a few characters after 身份证, 证件号,
    ``ID card``, ``ID number`` or ``identity``. Without such a word a number with a
    bad checksum is left alone (order numbers and statistics have this shape too).
    """

    ENTITY = "CN_RESIDENT_ID"
    PATTERNS = [
        Pattern(
            "cn_id_after_id_word",
            r"(?<=(?:身份证|证件|居民身份|公民身份|\bID\s*card|\bID\s*number|\bidentity)"
            r"[^0-9A-Za-z]{0,6}(?:号码|号|number|no\.?|#)?[^0-9A-Za-z]{0,4})"
            r"[1-8]\d{16}[\dXx]" + _E,
            0.85,
        )
    ]

    def _check(self, pattern_text: str) -> bool | None:
        s = pattern_text
        if s[:2] not in _PROVINCES or not _valid_date(int(s[6:10]), int(s[10:12]), int(s[12:14])):
            return False
        return True


class GluedIpRecognizer(_Recognizer):
    """IPv4 addresses glued to Chinese characters (``地址192.168.1.10登录``).

    Presidio's IP pattern needs ``\\b``, which never holds between a Chinese character
    and a digit; this one uses ASCII-only lookarounds, and refuses a fifth number
    (``1.2.3.4.5`` is a version, not an address).
    """

    ENTITY = "IP_ADDRESS"
    _OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
    PATTERNS = [
        Pattern(
            "ipv4_glued",
            r"(?<![0-9A-Za-z.])" + rf"{_OCTET}(?:\.{_OCTET}){{3}}" + r"(?![0-9A-Za-z]|\.[0-9])",
            0.6,
        )
    ]
    CONTEXT = ["ip", "地址", "服务器", "server", "host", "主机"]


_CARD_BODY = r"(?:\d{16,19}|\d{4}(?:[ -]\d{4}){3}(?:[ -]?\d{1,3})?|\d{6}[ -]\d{10,13})"


class CnBankCardRecognizer(_Recognizer):
    """China UnionPay / domestic debit cards: 16–19 digits, prefix 62, 60 or 9, Luhn-valid."""

    ENTITY = "CN_BANK_CARD"
    PATTERNS = [Pattern("cn_bank_card", _B + r"(?=62|60|9)" + _CARD_BODY + _E, 0.5)]
    CONTEXT = [
        "银行卡",
        "卡号",
        "储蓄卡",
        "借记卡",
        "账号",
        "账户",
        "银联",
        "bank",
        "card",
        "account",
    ]

    def _check(self, pattern_text: str) -> bool | None:
        digits = _digits(pattern_text)
        return 16 <= len(digits) <= 19 and luhn_ok(digits)


class CnCreditCardRecognizer(_Recognizer):
    """Visa, Mastercard, Amex, Discover and JCB numbers that sit next to Chinese characters.

    Presidio's own credit-card pattern uses ``\\b``, which never matches between a Chinese
    character and a digit; this one uses ASCII-only lookarounds.
    """

    ENTITY = "CREDIT_CARD"
    PATTERNS = [
        Pattern(
            "cn_credit_card",
            _B + r"(?=4|5[1-5]|2[2-7]|3[47]|35|6011|65)(?:" + _CARD_BODY + r"|3[47]\d{13})" + _E,
            0.5,
        ),
        Pattern("amex_grouped", _B + r"3[47]\d{2}[ -]\d{6}[ -]\d{5}" + _E, 0.5),
    ]
    CONTEXT = ["信用卡", "卡号", "visa", "master", "credit", "card"]

    def _check(self, pattern_text: str) -> bool | None:
        digits = _digits(pattern_text)
        return 15 <= len(digits) <= 19 and luhn_ok(digits)


class CnPassportRecognizer(_Recognizer):
    """Chinese passports: ``E12345678``, ``EA1234567``, ``G12345678`` and older P/S/D forms.

    The shape is weak evidence on its own (it resembles product codes), so the base score is
    below the redactor's threshold and context words (护照, passport) lift it.
    """

    ENTITY = "CN_PASSPORT"
    PATTERNS = [
        Pattern(
            "cn_passport",
            _B + r"(?:E[A-HJ-NP-Z0-9]\d{7}|G\d{8}|[DPS]E?\d{7})" + _E,
            0.3,
        )
    ]
    CONTEXT = ["护照", "passport", "证件"]

    def __init__(self, *, language: str = "zh") -> None:
        super().__init__(language=language)
        # Passports are upper case; Presidio compiles with IGNORECASE by default.
        self.global_regex_flags = 0


class AsciiEmailRecognizer(_Recognizer):
    """E-mail addresses whose boundaries are ASCII, so ``邮箱ab@x.cn谢谢`` yields ``ab@x.cn``.

    The domain's public suffix is checked with an injected offline ``tldextract`` extractor.
    """

    ENTITY = "EMAIL_ADDRESS"
    _LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    PATTERNS = [
        Pattern(
            "ascii_email",
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9_%+-](?:[A-Za-z0-9._%+-]{0,62}[A-Za-z0-9_%+-])?@"
            + _LABEL
            + r"(?:\."
            + _LABEL
            + r")+(?![A-Za-z0-9-])",
            0.5,
        )
    ]
    CONTEXT = ["邮箱", "邮件", "电邮", "email", "mail"]

    def __init__(self, *, has_suffix: Callable[[str], bool], language: str = "zh") -> None:
        super().__init__(language=language)
        self._has_suffix = has_suffix

    def _check(self, pattern_text: str) -> bool | None:
        return self._has_suffix(pattern_text.partition("@")[2])  # the pattern admits one @
