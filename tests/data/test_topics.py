"""Topic matching (jieba + English words), per-user bounds, selection and discovery."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from dpllm.data.engines import SQLiteEngine
from dpllm.data.queries import Exact, Scope, keyed_choice
from dpllm.data.sql import ColumnMap
from dpllm.data.topics import DEFAULT_VOCABULARY, NewKeywords, TopicCounts, TopTopics, Vocabulary
from dpllm.errors import ConfigError, InvalidPrivacyParameter
from dpllm.privacy.noise import SeededNoise
from dpllm.windows import week_bounds
from tests.data._helpers import MONDAY, WEEK, Rec, write_sqlite


@pytest.mark.parametrize(
    ("text", "topics"),
    [
        ("老师讲解很清楚，作业有点多", {"teaching", "homework"}),
        ("The PACE is too fast; homework is hard!", {"pace", "homework", "difficulty"}),
        ("视频音质不好，平台经常卡顿", {"video", "platform"}),
        ("nothing special", set()),
        ("老师傅", set()),  # not the keyword 老师 inside another word
    ],
)
def test_topics_in_text(text: str, topics: set[str]) -> None:
    assert DEFAULT_VOCABULARY.topics_in(text) == topics


def test_vocabulary_validation() -> None:
    with pytest.raises(ConfigError):
        Vocabulary(())
    with pytest.raises(ConfigError):
        Vocabulary.from_mapping({"x": {"en": ["two words"]}})
    v = Vocabulary.from_mapping({"food": {"zh": ["食堂"], "en": ["Canteen"]}})
    assert v.topics_in("the canteen") == {"food"} == v.topics_in("食堂很好")


def _scope(tmp_path: Path, recs: list[Rec]) -> Scope:
    start, end = week_bounds(WEEK)
    engine = SQLiteEngine(write_sqlite(tmp_path / "t.db", recs))
    return Scope(engine, ColumnMap(), WEEK, start, end, b"salt")


def test_each_user_counts_a_topic_once_and_at_most_l_topics(tmp_path: Path) -> None:
    t = MONDAY + dt.timedelta(hours=2)
    everything = "老师 节奏 作业 考试 课件 视频 难度 例子 平台"
    recs = [Rec("a", 5.0, "作业 作业 homework", t, None)] * 5 + [Rec("b", 1.0, everything, t, None)]
    scope = _scope(tmp_path, recs)
    exact = TopicCounts(epsilon=1.0, max_topics=2).measure(scope)
    counts = dict(zip(exact.labels, exact.values, strict=True))
    assert sum(counts.values()) == 1 + 2
    assert counts["homework"] >= 1
    assert set(keyed_choice(b"salt", "b", set(DEFAULT_VOCABULARY.names), 2)) <= set(counts)
    # The keyed choice depends on the secret salt.
    choices = {
        tuple(keyed_choice(bytes([i]), "b", set(DEFAULT_VOCABULARY.names), 2)) for i in range(20)
    }
    assert len(choices) > 1


def test_top_topics_selects_without_counts(tmp_path: Path) -> None:
    t = MONDAY + dt.timedelta(hours=2)
    recs = [Rec(f"u{i}", 4.0, "作业太多", t, None) for i in range(60)]
    recs += [Rec(f"v{i}", 4.0, "video lag", t, None) for i in range(30)]
    scope = _scope(tmp_path, recs)
    q = TopTopics(epsilon=2.0, k=2)
    rel = q.publish(
        q.measure(scope), fingerprint="f", window=WEEK, confidence=0.95, noise=SeededNoise(0)
    )
    assert rel.labels[0] == "homework" and rel.values == (1.0, 2.0)
    assert rel.kind == "rank" and rel.cost.epsilon == 2.0
    with pytest.raises(InvalidPrivacyParameter):
        TopTopics(rho=0.5)


def test_new_keywords_need_many_users(tmp_path: Path) -> None:
    t = MONDAY + dt.timedelta(hours=2)
    recs = [Rec(f"u{i}", 4.0, "quantum entanglement", t, None) for i in range(400)]
    recs += [Rec("loner", 4.0, "secretword 13812345678", t, None)]
    scope = _scope(tmp_path, recs)
    q = NewKeywords(epsilon=1.0, delta=1e-6, max_keywords=3)
    exact = q.measure(scope)
    assert "13812345678" not in exact.labels
    rel = q.publish(exact, fingerprint="f", window=WEEK, confidence=0.95, noise=SeededNoise(0))
    assert set(rel.labels) == {"quantum", "entanglement"}
    assert rel.delta == 1e-6 and rel.mechanism == "partition_selection"
    empty = q.publish(
        Exact((1,), ("rare",)),  # one user's word: stays below the threshold
        fingerprint="f",
        window=WEEK,
        confidence=0.95,
        noise=SeededNoise(0),
    )
    assert empty.labels == () and empty.kind == "selection_size"


@pytest.mark.parametrize("kind", ["sqlite", "duckdb", "postgres"])
def test_texts_are_bounded_per_user_before_tokenising(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """One user with many long texts: the SQL hands over at most TEXTS_PER_USER texts of
    at most TEXT_CHARS characters, so tokenising cannot take longer because of them."""
    from dpllm.data.engines import DuckDBEngine
    from dpllm.data.sql import TEXT_CHARS, TEXTS_PER_USER, user_texts
    from tests.data._helpers import write_parquet

    t = MONDAY + dt.timedelta(hours=3)
    heavy = [
        Rec("heavy", 3.0, "作业" * 5_000, t + dt.timedelta(seconds=i), None) for i in range(300)
    ]
    light = [Rec(f"u{i}", 4.0, "homework", t, None) for i in range(10)]
    recs = heavy + light
    engine: Any
    if kind == "sqlite":
        engine = SQLiteEngine(write_sqlite(tmp_path / "t.db", recs))
    elif kind == "duckdb":
        engine = DuckDBEngine(write_parquet(tmp_path / "t.parquet", recs))
    else:
        from dpllm.data.engines import PostgresEngine
        from tests.data._helpers import write_pg

        engine = PostgresEngine(write_pg(request.getfixturevalue("pg_dsn"), recs))
    try:
        start, end = week_bounds(WEEK)
        cols = ColumnMap()
        rows = engine.fetch(user_texts(cols, engine.dialect, engine.relation(cols), start, end))
        mine = [text for user, text in rows if user == "heavy"]
        assert len(mine) == TEXTS_PER_USER and all(len(x) == TEXT_CHARS for x in mine)
        assert sorted(u for u, _ in rows if u != "heavy") == sorted(r.user for r in light)
        scope = Scope(engine, cols, WEEK, start, end, b"salt")
        exact = TopicCounts(epsilon=1.0).measure(scope)
        counts = dict(zip(exact.labels, exact.values, strict=True))
        assert counts["homework"] == 11  # ten light users and the heavy one, once each
    finally:
        engine.close()
