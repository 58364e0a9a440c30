"""Demo data: realistic, synthetic course feedback in Chinese and English.

:func:`generate_demo` is pure (a seeded :class:`random.Random`, no clock, no
files); :func:`write_demo` writes its records to an SQLite file and the list of
embedded personal data to a JSON file beside it.

The data has what real feedback has and what the rest of dpllm must cope with:
skewed activity (most users write once or twice a week, a few write dozens of
times), ratings that follow the topics and their sentiment, some NULL ratings,
and synthetic personal data inside some texts — mainland mobile numbers,
resident ID numbers with valid GB 11643-1999 check digits, e-mail addresses at
reserved example domains, and names — so that redaction has real work. All of
it is invented; none of it belongs to anyone.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

from dpllm.errors import DataError
from dpllm.windows import previous_weeks, week_bounds

__all__ = [
    "DEMO_COURSES",
    "DEMO_END_WEEK",
    "DemoData",
    "DemoRecord",
    "EmbeddedPII",
    "generate_demo",
    "id_check_digit",
    "write_demo",
]

DEMO_END_WEEK = "2026-W47"
"""The last week of the default demo data (fixed, so docs and tests reproduce)."""

DEMO_COURSES = ("calculus", "python101", "databases", "statistics", "english_writing", "ml_intro")

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
_AREAS = ("110101", "110105", "310104", "310115", "440305", "440106", "510107", "330106")
_MOBILE_PREFIXES = ("130", "135", "138", "139", "150", "158", "166", "177", "186", "188", "199")
_SURNAMES = ("王", "李", "张", "刘", "陈", "杨", "赵", "黄", "周", "吴")
_GIVEN = ("伟", "芳", "娜", "秀英", "敏", "静", "丽", "强", "磊", "洋", "艳", "勇", "杰", "娟")
_FIRST = ("Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry", "Ivy", "Jack")
_LAST = ("Smith", "Johnson", "Brown", "Taylor", "Miller", "Wilson", "Moore", "Clark")
_PINYIN = ("wang", "li", "zhang", "liu", "chen", "yang", "zhao", "huang", "zhou", "wu")

# topic → (positive phrases, negative phrases) per language; the keywords match
# dpllm.data.topics.DEFAULT_VOCABULARY.
_PHRASES: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "zh": {
        "teaching": (
            ("老师讲解很清楚", "老师讲课很有激情"),
            ("老师讲解太快，听不懂", "老师讲课有点照本宣科"),
        ),
        "pace": (("节奏刚好，跟得上", "课程进度安排合理"), ("节奏太快了", "进度太慢，有点拖沓")),
        "homework": (("作业很有帮助", "练习题设计得好"), ("作业太多了", "作业批改太慢")),
        "exam": (("考试内容和课堂一致", "期末复习很有用"), ("考试太难了", "测验题目有错误")),
        "materials": (("课件做得很清楚", "资料很丰富"), ("课件错字很多", "讲义和视频对不上")),
        "video": (("视频画质很好", "录播方便复习"), ("视频音质不好", "录播经常缺内容")),
        "difficulty": (("难度适中", "内容简单易懂"), ("难度太大", "内容太难，跟不上")),
        "examples": (("例子很生动", "案例贴近实际"), ("例子太少", "案例太老了")),
        "platform": (("平台很好用", "网站很流畅"), ("平台经常卡顿", "登录总是失败")),
    },
    "en": {
        "teaching": (
            ("The teacher explains everything clearly", "Great lecturer, very engaging"),
            ("The lecturer reads from the slides", "The teacher explains too quickly"),
        ),
        "pace": (
            ("The pace is just right", "Good pacing overall"),
            ("The pace is too fast", "Lectures feel rushed"),
        ),
        "homework": (
            ("The homework really helps", "Useful assignments"),
            ("Too much homework", "The assignments are graded late"),
        ),
        "exam": (
            ("The exam matched the lectures", "Fair quiz questions"),
            ("The exam was unfair", "The quiz had mistakes"),
        ),
        "materials": (
            ("The slides are excellent", "Great notes and materials"),
            ("The slides have typos", "The textbook is outdated"),
        ),
        "video": (
            ("The video quality is great", "Recordings help me review"),
            ("The audio is bad", "The video keeps freezing"),
        ),
        "difficulty": (
            ("The difficulty is about right", "Easy to follow"),
            ("Way too difficult", "The material is too hard"),
        ),
        "examples": (
            ("The examples are very helpful", "Real-world cases"),
            ("Not enough examples", "The examples are confusing"),
        ),
        "platform": (
            ("The platform works well", "The website is fast"),
            ("The platform keeps lagging", "Login fails all the time"),
        ),
    },
}
_TOPICS = tuple(_PHRASES["zh"])
# How much a topic pulls the rating when praised (+) or criticised (−).
_TOPIC_WEIGHT = {
    t: w for t, w in zip(_TOPICS, (1.2, 0.8, 0.7, 1.0, 0.8, 0.6, 0.9, 0.7, 1.1), strict=True)
}


@dataclass(frozen=True, slots=True)
class DemoRecord:
    """One feedback record."""

    id: int
    user_id: str
    course: str
    rating: int | None
    text: str
    ts: str  # 'YYYY-MM-DD HH:MM:SS' UTC


@dataclass(frozen=True, slots=True)
class EmbeddedPII:
    """A piece of synthetic personal data placed in a record's text."""

    record_id: int
    user_id: str
    kind: str  # phone | id_card | email | name
    value: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class DemoData:
    records: tuple[DemoRecord, ...]
    pii: tuple[EmbeddedPII, ...]
    weeks: tuple[str, ...]


def id_check_digit(first17: str) -> str:
    """The GB 11643-1999 check character of the first 17 digits of a resident ID."""
    if len(first17) != 17 or not first17.isdigit():
        raise DataError("a resident ID check digit needs exactly 17 digits")
    total = sum(int(d) * w for d, w in zip(first17, _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11]


def _resident_id(rng: random.Random) -> str:
    birth = dt.date(1970, 1, 1) + dt.timedelta(days=rng.randrange(365 * 35))
    first = f"{rng.choice(_AREAS)}{birth:%Y%m%d}{rng.randrange(1000):03d}"
    return first + id_check_digit(first)


def _pii(rng: random.Random, lang: str) -> tuple[str, list[tuple[str, str]]]:
    """A sentence holding synthetic PII, and the (kind, value) pairs in it."""
    kind = rng.choice(("phone", "id_card", "email", "name_phone"))
    phone = rng.choice(_MOBILE_PREFIXES) + f"{rng.randrange(10**8):08d}"
    if lang == "zh":
        name = rng.choice(_SURNAMES) + rng.choice(_GIVEN)
        if kind == "phone":
            return f"有问题可以打我电话{phone}", [("phone", phone)]
        if kind == "id_card":
            rid = _resident_id(rng)
            return f"我的身份证号是{rid}，成绩登记错了", [("id_card", rid)]
        if kind == "email":
            mail = f"{rng.choice(_PINYIN)}{rng.randrange(100, 999)}@example.com"
            return f"请把资料发到{mail}", [("email", mail)]
        return f"我是{name}，手机{phone}", [("name", name), ("phone", phone)]
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    if kind == "phone":
        return f"Call me at {phone} if needed", [("phone", phone)]
    if kind == "id_card":
        rid = _resident_id(rng)
        return f"my ID number is {rid}", [("id_card", rid)]
    if kind == "email":
        mail = f"{first.lower()}.{last.lower()}@example.org"
        return f"please write to {mail}", [("email", mail)]
    return f"This is {first} {last}, phone {phone}", [("name", f"{first} {last}"), ("phone", phone)]


def generate_demo(
    *,
    users: int = 2000,
    weeks: int = 8,
    seed: int = 1,
    end_week: str = DEMO_END_WEEK,
    pii_rate: float = 0.04,
) -> DemoData:
    """Generate demo feedback (pure: same arguments, same data).

    Args:
        users: number of users (≥ 1).
        weeks: number of ISO weeks, ending with ``end_week``.
        seed: the random seed.
        end_week: the last week (``2026-W47``).
        pii_rate: share of records that carry synthetic personal data.

    Returns:
        :class:`DemoData` with the records, the embedded PII and the weeks.

    Raises:
        DataError: non-positive sizes or a bad week key.
    """
    if users < 1 or weeks < 1 or not 0.0 <= pii_rate <= 1.0:
        raise DataError("users and weeks must be ≥ 1 and pii_rate in [0, 1]")
    rng = random.Random(seed)
    week_keys = tuple(previous_weeks(end_week, weeks))
    starts = [week_bounds(w)[0] for w in week_keys]
    records: list[DemoRecord] = []
    pii: list[EmbeddedPII] = []
    for u in range(users):
        user_id = f"u{u:05d}"
        lang = "zh" if rng.random() < 0.6 else "en"
        courses = rng.sample(DEMO_COURSES, rng.choice((1, 1, 2, 3)))
        mood = rng.gauss(0.0, 0.6)
        # Skewed activity: log-normal rates, and 1% very heavy writers.
        rate = math.exp(rng.gauss(-0.6, 0.9))
        if rng.random() < 0.01:
            rate = rng.uniform(15.0, 40.0)
        for start in starts:
            for _ in range(_poisson(rng, rate)):
                records.append(
                    _record(
                        rng, len(records) + 1, user_id, lang, courses, mood, start, pii, pii_rate
                    )
                )
    return DemoData(tuple(records), tuple(pii), week_keys)


def _poisson(rng: random.Random, lam: float) -> int:
    # Knuth's method; lam ≤ 40 here.
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def _record(
    rng: random.Random,
    rid: int,
    user_id: str,
    lang: str,
    courses: list[str],
    mood: float,
    start: dt.datetime,
    pii: list[EmbeddedPII],
    pii_rate: float,
) -> DemoRecord:
    topics = rng.sample(_TOPICS, rng.choice((1, 1, 2, 2, 3)))
    score = 3.4 + mood
    parts: list[str] = []
    for topic in topics:
        positive = rng.random() < 1.0 / (1.0 + math.exp(-(mood + 0.4) * 2.0))
        score += _TOPIC_WEIGHT[topic] * (0.8 if positive else -1.0)
        parts.append(rng.choice(_PHRASES[lang][topic][0 if positive else 1]))
    sep = "，" if lang == "zh" else ". "
    text = sep.join(parts) + ("。" if lang == "zh" else ".")
    if rng.random() < pii_rate:
        sentence, found = _pii(rng, lang)
        text = text + (" " if lang == "en" else "")
        offset = len(text)
        text += sentence
        for kind, value in found:
            at = text.index(value, offset)
            pii.append(EmbeddedPII(rid, user_id, kind, value, at, at + len(value)))
    rating: int | None = min(5, max(1, round(score + rng.gauss(0.0, 0.7))))
    if rng.random() < 0.01:
        rating = None
    ts = start + dt.timedelta(seconds=rng.randrange(7 * 86400))
    return DemoRecord(rid, user_id, rng.choice(courses), rating, text, f"{ts:%Y-%m-%d %H:%M:%S}")


def write_demo(data: DemoData, out: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write ``data`` to a new SQLite file ``out`` (table ``feedback``) and ``out.pii.json``.

    Returns:
        The database path and the PII list path.

    Raises:
        DataError: ``out`` exists already, or cannot be written.
    """
    path = Path(out)
    pii_path = path.with_name(path.name + ".pii.json")
    if path.exists():
        raise DataError(f"{str(path)!r} exists; remove it or choose another --out")
    try:
        conn = sqlite3.connect(path)
        with conn:
            conn.execute(
                "CREATE TABLE feedback (id INTEGER PRIMARY KEY, user_id TEXT NOT NULL, "
                "course TEXT, rating INTEGER, text TEXT, ts TEXT NOT NULL)"
            )
            conn.executemany(
                "INSERT INTO feedback VALUES (?, ?, ?, ?, ?, ?)",
                [(r.id, r.user_id, r.course, r.rating, r.text, r.ts) for r in data.records],
            )
            conn.execute("CREATE INDEX feedback_ts ON feedback (ts)")
        conn.close()
        pii_path.write_text(
            json.dumps([asdict(p) for p in data.pii], ensure_ascii=False, indent=1) + "\n",
            encoding="utf-8",
        )
    except (OSError, sqlite3.Error) as exc:
        raise DataError(f"cannot write demo data to {str(path)!r}: {exc}") from exc
    return path, pii_path
