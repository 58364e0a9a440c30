"""Demo data: deterministic, skewed, with valid synthetic PII at the stated places."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from dpllm.data.demo import DEMO_COURSES, generate_demo, id_check_digit, write_demo
from dpllm.errors import DataError
from dpllm.windows import iso_week


@pytest.fixture(scope="module")
def demo():  # type: ignore[no-untyped-def]
    return generate_demo(users=300, weeks=3, seed=4)


def test_same_seed_same_data(demo) -> None:  # type: ignore[no-untyped-def]
    assert generate_demo(users=300, weeks=3, seed=4) == demo
    assert generate_demo(users=300, weeks=3, seed=5) != demo


def test_shape(demo) -> None:  # type: ignore[no-untyped-def]
    import datetime as dt

    assert demo.weeks == ("2026-W45", "2026-W46", "2026-W47")
    weeks = {iso_week(dt.datetime.fromisoformat(r.ts)) for r in demo.records}
    assert weeks == set(demo.weeks)
    per_user = Counter(r.user_id for r in demo.records)
    assert max(per_user.values()) >= 10 * (sum(per_user.values()) / len(per_user))  # skewed
    assert {r.course for r in demo.records} <= set(DEMO_COURSES)
    assert any(re.search(r"[\u4e00-\u9fff]", r.text) for r in demo.records)
    assert any(re.search(r"[A-Za-z]{4}", r.text) for r in demo.records)
    assert any(r.rating is None for r in demo.records)


def test_ratings_follow_sentiment(demo) -> None:  # type: ignore[no-untyped-def]
    bad = [
        r.rating for r in demo.records if r.rating and ("太难" in r.text or "too hard" in r.text)
    ]
    good = [
        r.rating for r in demo.records if r.rating and ("很清楚" in r.text or "clearly" in r.text)
    ]
    assert sum(good) / len(good) > sum(bad) / len(bad) + 0.5


def test_pii_list_is_exact(demo) -> None:  # type: ignore[no-untyped-def]
    texts = {r.id: r.text for r in demo.records}
    kinds = Counter(p.kind for p in demo.pii)
    assert set(kinds) == {"phone", "id_card", "email", "name"}
    for p in demo.pii:
        assert texts[p.record_id][p.start : p.end] == p.value
        if p.kind == "phone":
            assert re.fullmatch(r"1[3-9]\d{9}", p.value)
        if p.kind == "id_card":
            assert re.fullmatch(r"\d{17}[\dX]", p.value)
            assert id_check_digit(p.value[:17]) == p.value[17]
        if p.kind == "email":
            assert p.value.endswith(("@example.com", "@example.org"))


@pytest.mark.parametrize(
    ("first17", "check"), [("11010519491231002", "X"), ("44052418800101001", "4")]
)
def test_id_check_digit_known_values(first17: str, check: str) -> None:
    # The two worked examples of GB 11643-1999 itself.
    total = sum(
        int(d) * w
        for d, w in zip(first17, (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2), strict=True)
    )
    assert "10X98765432"[total % 11] == check == id_check_digit(first17)


def test_write_demo(tmp_path: Path, demo) -> None:  # type: ignore[no-untyped-def]
    path, pii = write_demo(demo, tmp_path / "d.db")
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM feedback").fetchone()[0] == len(demo.records)
    conn.close()
    assert len(json.loads(pii.read_text(encoding="utf-8"))) == len(demo.pii)
    with pytest.raises(DataError, match="exists"):
        write_demo(demo, path)
