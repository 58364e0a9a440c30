"""A deterministic, labelled, synthetic PII corpus in Chinese and English.

``python -m dpllm.redact.corpus OUT.jsonl`` regenerates ``tests/data/redact_corpus.jsonl``
from a fixed seed. Every value is synthetic: names from common-name tables, numbers with the
right shape and checksum but drawn at random, e-mail domains under ``example.*``. Each record
carries gold ``spans``, ``decoys`` (order numbers, prices, dates, ratings, week labels,
statistics: never to be redacted) and ``allow`` (the statistics the pipeline would pass in).
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dpllm.redact.nlp import ZH_SURNAMES

__all__ = ["DEFAULT_SEED", "generate", "write_jsonl"]

DEFAULT_SEED = 20261123

_ZH_SURNAMES = sorted(ZH_SURNAMES)[:120]
_ZH_GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍建国红梅志宏鹏辉晓丹宇欣怡子涵浩然雨轩梓萱思远佳琪嘉欣文博"
_EN_FIRST = (
    "Emily James Olivia Liam Sophia Noah Ava Lucas Mia Ethan Grace Daniel Chloe Henry Zoe "
    "Samuel Lily Owen Hannah Jack Ella Ryan Nora Leo Ruby Adam Clara Isaac Alice Oscar"
).split()
_EN_LAST = (
    "Carter Bennett Hughes Foster Morgan Turner Parker Collins Reed Sullivan Hayes Brooks "
    "Coleman Ward Fisher Gordon Palmer Russell Griffin Walsh Barnes Porter Hudson Marshall"
).split()
_PROVINCES = "11 12 13 14 15 21 22 23 31 32 33 34 35 36 37 41 42 43 44 45 46 50 51 52 53 61".split()
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_MOBILE_PREFIX = "130 131 132 133 135 136 137 138 139 150 151 152 153 155 156 157 158 159 166 \
170 176 177 178 180 181 182 183 185 186 187 188 189 191 198 199".split()
_AREA = ["010", "021", "022", "023", "020", "0755", "0571", "0512", "0731", "0851"]
_DOMAINS = ["example.com", "example.cn", "example.org", "mail.example.net", "edu.example.cn"]
_FULL = str.maketrans({chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)})


def _luhn_complete(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return body + str((10 - total % 10) % 10)


class _Gen:
    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    def digits(self, n: int) -> str:
        return "".join(self.r.choice("0123456789") for _ in range(n))

    def zh_name(self) -> str:
        given = self.r.choice(_ZH_GIVEN) + (
            self.r.choice(_ZH_GIVEN) if self.r.random() < 0.7 else ""
        )
        return self.r.choice(_ZH_SURNAMES) + given

    def en_name(self) -> str:
        return f"{self.r.choice(_EN_FIRST)} {self.r.choice(_EN_LAST)}"

    def mobile(self, zh: bool) -> str:
        n = self.r.choice(_MOBILE_PREFIX) + self.digits(8)
        style = self.r.randrange(6)
        if style == 1:
            n = f"{n[:3]}-{n[3:7]}-{n[7:]}"
        elif style == 2:
            n = f"+86 {n[:3]} {n[3:7]} {n[7:]}"
        elif style == 3:
            n = f"86-{n}"
        elif style == 4 and zh:
            n = n.translate(_FULL)
        return n

    def resident_id(self) -> str:
        year = self.r.randint(1950, 2006)
        month, day = self.r.randint(1, 12), self.r.randint(1, 28)
        body = (
            f"{self.r.choice(_PROVINCES)}{self.digits(4)}{year}{month:02d}{day:02d}{self.digits(3)}"
        )
        total = sum(int(c) * w for c, w in zip(body, _ID_WEIGHTS, strict=True))
        return body + "10X98765432"[total % 11]

    def email(self) -> str:
        local = self.r.choice(
            ["zhang.wei", "li_na", "wangfang88", "emily.c", "j.bennett", "stu2026"]
        )
        return f"{local}{self.r.randint(1, 999)}@{self.r.choice(_DOMAINS)}"

    def bank_card(self) -> str:
        n = _luhn_complete("62" + self.digits(self.r.choice([13, 14, 16])))
        return " ".join(n[i : i + 4] for i in range(0, len(n), 4)) if self.r.random() < 0.3 else n

    def credit_card(self) -> str:
        prefix = self.r.choice(["4", "51", "53", "55"])
        n = _luhn_complete(prefix + self.digits(15 - len(prefix)))
        return "-".join(n[i : i + 4] for i in range(0, 16, 4)) if self.r.random() < 0.4 else n

    def landline(self) -> str:
        area = self.r.choice(_AREA)
        local = str(self.r.randint(2, 8)) + self.digits(7 if len(area) == 3 else 6)
        return f"{area}-{local}" if self.r.random() < 0.7 else f"({area}) {local}"

    def passport(self) -> str:
        return "E" + self.digits(8) if self.r.random() < 0.6 else "EA" + self.digits(7)

    # decoys
    def order(self) -> str:
        return self.r.choice(["2026", "DD2026", "SO-2026"]) + self.digits(
            self.r.choice([8, 10, 12])
        )

    def price(self, zh: bool) -> str:
        v = f"{self.r.randint(9, 4999)}.{self.r.choice(['00', '90', '99'])}"
        return f"¥{v}" if zh else f"${v}"

    def date(self, zh: bool) -> str:
        m, d = self.r.randint(1, 12), self.r.randint(1, 28)
        return f"2026年{m}月{d}日" if zh and self.r.random() < 0.6 else f"2026-{m:02d}-{d:02d}"

    def rating(self) -> str:
        return f"{self.r.randint(1, 4)}.{self.r.randint(0, 9)}/5"

    def week(self) -> str:
        return f"2026-W{self.r.randint(1, 52):02d}"

    def stat(self) -> str:
        return str(self.r.randint(1_000_000_000, 9_999_999_999))


_ZH_TEMPLATES = [
    "我是{PERSON}，手机号{PHONE_NUMBER}，订单{order}在{date}付款{price}。",
    "请联系{PERSON}老师，电话{PHONE_NUMBER}，邮箱{EMAIL_ADDRESS}谢谢",
    "学员{PERSON}的身份证号{CN_RESIDENT_ID}已登记，{week}评分{rating}。",
    "退款请打到银行卡{CN_BANK_CARD}，户名{PERSON}，金额{price}。",
    "信用卡{CREDIT_CARD}被扣款{price}，订单号{order}，日期{date}。",
    "办公室座机{CN_LANDLINE}，联系人{PERSON}，本周{week}共有{stat}次访问。",
    "出国交流需要护照号{CN_PASSPORT}，申请人{PERSON}，手机{PHONE_NUMBER}。",
    "课程很好，评分{rating}，{week}的满意度统计为{stat}。",
    "{PERSON}同学反馈：作业太多了，邮箱{EMAIL_ADDRESS}可以联系我。",
    "有问题打{PHONE_NUMBER}或者发邮件到{EMAIL_ADDRESS}，{date}之前回复。",
    "本人{PERSON}，证件号码{CN_RESIDENT_ID}，电话{PHONE_NUMBER}。",
    "助教{PERSON}说{date}补课，价格{price}，订单{order}。",
]
_EN_TEMPLATES = [
    "Hi, I'm {PERSON}. Reach me at {PHONE_NUMBER} about order {order} from {date}.",
    "Please contact {PERSON} by email at {EMAIL_ADDRESS}; the course costs {price}.",
    "My card {CREDIT_CARD} was charged {price} on {date} for order {order}.",
    "The lecture by {PERSON} was great, I'd rate it {rating} for {week}.",
    "Refund to my UnionPay bank card {CN_BANK_CARD}, account holder {PERSON}.",
    "Office phone {CN_LANDLINE}, ask for {PERSON}. Week {week} had {stat} page views.",
    "Passport number {CN_PASSPORT} belongs to {PERSON}, who enrolled on {date}.",
    "Student ID card: resident ID {CN_RESIDENT_ID}, mobile {PHONE_NUMBER}.",
    "Too much homework this week ({week}), rating {rating}, total {stat} submissions.",
    "Thanks to {PERSON} and {PERSON} for the help, email me at {EMAIL_ADDRESS}.",
    "Call {PHONE_NUMBER} or write to {EMAIL_ADDRESS} before {date}.",
    "{PERSON} said the lab fee of {price} is due by {date}.",
]
_DECOYS = {"order", "price", "date", "rating", "week", "stat"}
_SLOT = re.compile(r"\{(\w+)\}")


def _fill(template: str, gen: _Gen, zh: bool) -> dict[str, Any]:
    makers: dict[str, Callable[[], str]] = {
        "PERSON": gen.zh_name if zh else gen.en_name,
        "PHONE_NUMBER": lambda: gen.mobile(zh),
        "CN_RESIDENT_ID": gen.resident_id,
        "EMAIL_ADDRESS": gen.email,
        "CN_BANK_CARD": gen.bank_card,
        "CREDIT_CARD": gen.credit_card,
        "CN_LANDLINE": gen.landline,
        "CN_PASSPORT": gen.passport,
        "order": gen.order,
        "price": lambda: gen.price(zh),
        "date": lambda: gen.date(zh),
        "rating": gen.rating,
        "week": gen.week,
        "stat": gen.stat,
    }
    text, spans, decoys, allow, pos = "", [], [], [], 0
    for m in _SLOT.finditer(template):
        text += template[pos : m.start()]
        slot = m.group(1)
        value = makers[slot]()
        item = {"start": len(text), "end": len(text) + len(value)}
        if slot in _DECOYS:
            decoys.append({"kind": slot, **item})
            if slot == "stat":
                allow.append(value)
        else:
            spans.append({"entity": slot, **item})
        text += value
        pos = m.end()
    text += template[pos:]
    return {"text": text, "spans": spans, "decoys": decoys, "allow": allow}


def generate(*, n_per_language: int = 320, seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    """Generate the corpus records, the same for the same arguments.

    Args:
        n_per_language: Records per language.
        seed: Seed of the private random generator.

    Returns:
        Records with ``id``, ``lang``, ``text``, ``spans``, ``decoys`` and ``allow``.
    """
    gen = _Gen(random.Random(seed))
    records = []
    for lang, templates in (("zh", _ZH_TEMPLATES), ("en", _EN_TEMPLATES)):
        for i in range(n_per_language):
            record = _fill(templates[i % len(templates)], gen, lang == "zh")
            records.append({"id": f"{lang}-{i:04d}", "lang": lang, **record})
    return records


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    """Write records as UTF-8 JSON lines (keys sorted, non-ASCII kept)."""
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")


if __name__ == "__main__":  # pragma: no cover
    write_jsonl(Path(sys.argv[1]), generate())
