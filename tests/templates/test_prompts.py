"""The shipped prompts/ folder: every template lints clean and declares its context."""

from __future__ import annotations

import pytest

from dpllm.templates import PromptEnvironment, builtin_prompts_dir

TEMPLATES = sorted(
    p.relative_to(builtin_prompts_dir()).as_posix() for p in builtin_prompts_dir().rglob("*.j2")
)
WEEKLY_RELEASES = {
    "feedback_count",
    "active_users",
    "mean_rating",
    "rating_histogram",
    "share_positive",
    "share_negative",
}


def test_the_weekly_prompt_is_complete() -> None:
    expected = {
        f"weekly/{part}.{lang}.j2"
        for part in ("system", "user", "fallback")
        for lang in ("en", "zh")
    }
    assert expected <= set(TEMPLATES)


@pytest.mark.parametrize("name", TEMPLATES)
def test_every_prompt_lints_clean(env: PromptEnvironment, name: str) -> None:
    source, _ = env.source(name)
    assert env.lint(source) == []


@pytest.mark.parametrize("name", [t for t in TEMPLATES if "/user." in t or "/fallback." in t])
def test_weekly_templates_declare_the_weekly_releases(env: PromptEnvironment, name: str) -> None:
    declared = env.declaration(name)
    assert declared.releases == WEEKLY_RELEASES
    assert declared.optional_releases == {"topic_counts"}
    assert declared.metadata == {"week", "course_names"}
