"""The weekly job with a model that cites figures by reference: nothing for the guard to refuse."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpllm.config import ModelSettings
from dpllm.data.demo import DEMO_COURSES, DemoData
from dpllm.testing import FakeOpenAIServer
from dpllm.weekly.job import run_weekly
from tests.weekly.helpers import WEEK, make_demo, settings_for, shared_redactor

EN = (
    "This week students left [[feedback_count]] feedback records, from [[active_users]] active "
    "students. The mean rating was [[mean_rating]] stars out of 5: [[share_positive]] of ratings "
    "were positive and [[share_negative]] negative. Five-star ratings numbered "
    "[[rating_histogram.5]] and one-star ratings [[rating_histogram.1]]. All figures are "
    "approximate by design."
)
ZH = (
    "本周学生共提交[[feedback_count]]条反馈，来自[[active_users]]名活跃学生。平均评分为"
    "[[mean_rating]]分（满分5分），好评占[[share_positive]]，差评占[[share_negative]]。"
    "五星评分[[rating_histogram.5]]条。以上数字均为近似值。"
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DemoData]:
    return make_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(model="loopback-model") as srv:
        yield srv


@pytest.mark.parametrize(("lang", "answer"), [("en", EN), ("zh", ZH)])
def test_an_answer_in_references_passes_the_guard_first_time(
    tmp_path: Path,
    demo: tuple[Path, DemoData],
    server: FakeOpenAIServer,
    lang: str,
    answer: str,
) -> None:
    db, _ = demo
    server.enqueue(answer)
    model = ModelSettings(
        provider="openai", base_url=server.base_url, api_key="t", model="loopback-model",
        max_retries=0, timeout=10.0,
    )  # fmt: skip
    settings = dataclasses.replace(settings_for(tmp_path, db, model=model), lang=lang)
    report = run_weekly(settings, WEEK, redactor=shared_redactor(), courses=DEMO_COURSES)
    gen = report.generation
    assert gen.source == "model" and gen.model_calls == 1
    [attempt] = gen.attempts
    assert attempt.violations == () and attempt.warnings == ()
    assert "[[" not in report.text and ("about " in report.text or "约" in report.text)
    prompt = server.completion_requests[0].messages[-1]["content"]
    assert "[[feedback_count]]" in prompt and "[[rating_histogram.5]]" in prompt


def test_an_unknown_reference_is_refused_and_the_model_asked_for_known_ones(
    tmp_path: Path, demo: tuple[Path, DemoData], server: FakeOpenAIServer
) -> None:
    db, _ = demo
    server.enqueue("Students left [[feedback_total]] feedback records.")
    server.enqueue("Students left [[feedback_count]] feedback records.")
    model = ModelSettings(
        provider="openai", base_url=server.base_url, api_key="t", model="loopback-model",
        max_retries=0, timeout=10.0,
    )  # fmt: skip
    report = run_weekly(
        settings_for(tmp_path, db, model=model), WEEK, redactor=shared_redactor(),
        courses=DEMO_COURSES,
    )  # fmt: skip
    first, second = report.generation.attempts
    assert [str(v.rule) for v in first.violations] == ["unknown-reference"]
    assert second.violations == () and report.generation.source == "model"
    follow_up = server.completion_requests[1].messages[-1]["content"]
    assert "[[feedback_count]]" in follow_up and "[[mean_rating]]" in follow_up
