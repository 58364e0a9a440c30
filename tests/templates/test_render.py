"""Rendering: golden weekly prompts in both languages, the sandbox, the context rules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpllm.errors import (
    RawReleaseError,
    TemplateError,
    TemplateLintError,
    TemplateSecurityError,
    TemplateUndefinedError,
)
from dpllm.templates import SEEDED_MARK, PromptEnvironment, synthetic_context

from .conftest import MakeRelease

GOLDEN = Path(__file__).parent / "golden"
# Set UPDATE_GOLDEN=1 to rewrite the golden files after an intended change; review the diff.
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from the golden file"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_weekly_messages_golden(
    env: PromptEnvironment, weekly_context: dict[str, object], lang: str
) -> None:
    messages = env.render_messages("weekly", weekly_context, lang=lang)
    assert [m["role"] for m in messages] == ["system", "user"]
    check_golden(f"weekly_system.{lang}.txt", messages[0]["content"])
    check_golden(f"weekly_user.{lang}.txt", messages[1]["content"])
    assert not messages.seeded
    assert SEEDED_MARK not in messages[1]["content"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_weekly_fallback_golden(
    env: PromptEnvironment, weekly_context: dict[str, object], lang: str
) -> None:
    check_golden(
        f"weekly_fallback.{lang}.txt", env.render_fallback("weekly", weekly_context, lang=lang)
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_weekly_without_optional_topics(
    env: PromptEnvironment, weekly_context_without_topics: dict[str, object], lang: str
) -> None:
    user = env.render_messages("weekly", weekly_context_without_topics, lang=lang)[1]["content"]
    fallback = env.render_fallback("weekly", weekly_context_without_topics, lang=lang)
    for text in (user, fallback):
        assert "workload" not in text
    # None for an optional release counts as absent.
    context = weekly_context_without_topics | {"topic_counts": None}
    assert env.render_fallback("weekly", context, lang=lang) == fallback


def test_figures_of_a_render(env: PromptEnvironment, weekly_context: dict[str, object]) -> None:
    messages = env.render_messages("weekly", weekly_context, lang="en")
    user = messages[1]["content"]
    assert "about 210" in user and "3.9 ± 0.2" in user and "about 72% (66–78%)" in user
    assert {"210", "3.9", "0.2", "72", "66", "78", "5"} <= messages.figures
    for figure in messages.figures:
        assert figure in user
    assert env.render_fallback("weekly", weekly_context).figures >= {"210", "190", "230"}


def test_language_default_and_override(weekly_context: dict[str, object]) -> None:
    zh = PromptEnvironment(lang="zh")
    assert zh.lang == "zh"
    assert "约 210 条" in zh.render_fallback("weekly", weekly_context)
    assert "about 210" in zh.render_fallback("weekly", weekly_context, lang="en")
    with pytest.raises(TemplateError, match="unknown language"):
        PromptEnvironment(lang="fr")
    with pytest.raises(TemplateError, match="unknown language"):
        zh.render_fallback("weekly", weekly_context, lang="de")


# -- the sandbox ---------------------------------------------------------------

H = "{#- dpllm\nreleases: r\nmetadata: week\n-#}\n"


@pytest.fixture
def raw_env() -> PromptEnvironment:
    """No lint on render: the sandbox alone must hold."""
    return PromptEnvironment(lint_on_render=False, include_builtin=False)


@pytest.mark.parametrize(
    "body",
    [
        "{{ week.__class__ }}",
        "{{ week.__class__.__mro__[1].__subclasses__() }}",
        "{{ week|attr('__init__') }}",
        "{{ (week|attr('__class__')).__base__ }}",
        "{{ r._require_scalar }}",
        "{{ r.value }}",
        "{{ r['value'] }}",
        "{{ r.interval }}",
        "{{ r.noise_scale }}",
        "{{ r|attr('values') }}",
        "{{ [r]|map(attribute='value')|join }}",
        "{% for i in range(10**6) %}{% endfor %}",
        "{{ range(100000)|length }}",
        "{{ 'x' * 10**7 }}",
        "{{ 2 ** 100000 }}",
    ],
)
def test_sandbox_escapes_are_refused(
    raw_env: PromptEnvironment, release: MakeRelease, body: str
) -> None:
    with pytest.raises(TemplateSecurityError, match=r"<string>:5: "):
        raw_env.render_string(H + body, {"r": release("r"), "week": "W1"})


def test_a_refused_attribute_never_yields_the_value(
    raw_env: PromptEnvironment, release: MakeRelease
) -> None:
    # Printing a list shows its items' reprs; the refused attribute is an Undefined.
    body = H + "{{ [r]|map(attribute='value')|list }}"
    text = raw_env.render_string(body, {"r": release("r", 160.4), "week": "W1"})
    assert "160" not in text


def test_sandbox_allows_public_release_fields(
    raw_env: PromptEnvironment, release: MakeRelease
) -> None:
    body = H + "{{ r.name }} {{ r.kind }} {{ r.small }}"
    text = raw_env.render_string(body, {"r": release("r"), "week": "W1"})
    assert text == "r count False\n"


@pytest.mark.parametrize(
    "body",
    ["{{ r }}", "{{ 'v=' ~ r }}", "{{ '%s' % r }}", "{{ '{}'.format(r) }}", "{{ r|string }}"],
)
def test_a_raw_release_fails_at_render(
    raw_env: PromptEnvironment, release: MakeRelease, body: str
) -> None:
    with pytest.raises(RawReleaseError, match=r"<string>:5: .*cannot be (printed|formatted) raw"):
        raw_env.render_string(H + body, {"r": release("r"), "week": "W1"})


def test_lint_on_render_refuses_templates_with_findings(
    env: PromptEnvironment, release: MakeRelease
) -> None:
    with pytest.raises(TemplateLintError, match=r"<string>:5:4: DP001") as info:
        env.render_string(H + "{{ r }}", {"r": release("r"), "week": "W1"})
    assert [i.code for i in info.value.issues] == ["DP001"]  # type: ignore[attr-defined]


# -- undefined names and the context -------------------------------------------------


def test_strict_undefined_names_the_missing_variable(
    raw_env: PromptEnvironment, release: MakeRelease
) -> None:
    with pytest.raises(TemplateUndefinedError, match=r"<string>:6: 'nowhere' is undefined"):
        raw_env.render_string(H + "ok\n{{ nowhere }}", {"r": release("r"), "week": "W1"})


def test_missing_required_names_are_named(env: PromptEnvironment) -> None:
    with pytest.raises(TemplateUndefinedError, match=r"missing 'r', 'week'"):
        env.render_string(H + "{{ r|approx }} {{ week }}", {})
    with pytest.raises(TemplateUndefinedError, match="'feedback_count'"):
        env.render_fallback("weekly", {"week": "W1", "course_names": []})


def test_context_values_are_checked(env: PromptEnvironment, release: MakeRelease) -> None:
    body = H + "{{ r|approx }} {{ week }}"
    with pytest.raises(TemplateError, match="declared as a release but is a float"):
        env.render_string(body, {"r": 160.4, "week": "W1"})
    with pytest.raises(TemplateError, match="inside public metadata"):
        env.render_string(body, {"r": release("r"), "week": release("w")})
    with pytest.raises(TemplateError, match=r"\['k'\]\[0\] holds Release"):
        env.render_string(body, {"r": release("r"), "week": {"k": [release("w")]}})
    with pytest.raises(TemplateError, match="neither a Release nor public metadata"):
        env.render_string(body, {"r": release("r"), "week": object()})
    with pytest.raises(TemplateError, match="must be finite"):
        env.render_string(body, {"r": release("r"), "week": float("nan")})
    with pytest.raises(TemplateError, match="'lang' is set by the environment"):
        env.render_string(body, {"r": release("r"), "week": "W1", "lang": "en"})
    with pytest.raises(TemplateError, match="neither a Release nor public metadata"):
        PromptEnvironment(metadata={"courses": object()})


def test_undeclared_context_names_are_not_passed_on(
    raw_env: PromptEnvironment, release: MakeRelease
) -> None:
    with pytest.raises(TemplateUndefinedError, match="'extra' is undefined"):
        raw_env.render_string(H + "{{ extra }}", {"r": release("r"), "week": "W", "extra": "x"})


def test_environment_metadata_joins_every_render(release: MakeRelease) -> None:
    env = PromptEnvironment(metadata={"week": "2026-W09"}, include_builtin=False)
    assert env.search_path == ()
    assert env.render_string(H + "{{ week }} {{ r|approx }}", {"r": release("r")}) == (
        "2026-W09 about 160\n"
    )


def test_templates_need_a_header(env: PromptEnvironment) -> None:
    with pytest.raises(TemplateError, match="no context declaration"):
        env.render_string("hello", {})


def test_unknown_template_and_syntax_errors(env: PromptEnvironment) -> None:
    with pytest.raises(TemplateError, match="'nope/system.en.j2' not found"):
        env.render_messages("nope", {})
    with pytest.raises(TemplateError, match=r"<string>:5: syntax error"):
        env.render_string(H + "{% for %}", {})


def test_filter_errors_carry_the_template_line(
    env: PromptEnvironment, release: MakeRelease
) -> None:
    hist = release("r", (1.0, 2.0), ((0.0, 3.0), (1.0, 4.0)), labels=("a", "b"))
    with pytest.raises(TemplateError, match=r"<string>:6: .*index it by label"):
        env.render_string(H + "x\n{{ r|approx }}", {"r": hist, "week": "W"})


# -- seeded releases -----------------------------------------------------------------


def test_seeded_releases_are_refused_by_default(env: PromptEnvironment) -> None:
    context = synthetic_context(env.declaration("weekly/user.en.j2"))
    with pytest.raises(TemplateError, match="seeded .*NOT FOR PUBLICATION"):
        env.render_messages("weekly", context)


def test_seeded_releases_render_marked_when_allowed() -> None:
    env = PromptEnvironment(allow_seeded=True)
    context = synthetic_context(env.declaration("weekly/user.en.j2"))
    for lang in ("en", "zh"):
        fallback = env.render_fallback("weekly", context, lang=lang)
        assert fallback.startswith(SEEDED_MARK + "\n") and fallback.seeded
        messages = env.render_messages("weekly", context, lang=lang)
        assert messages.seeded and messages[1]["content"].startswith(SEEDED_MARK)


def test_user_folders_come_before_builtin_prompts(
    tmp_path: Path, weekly_context: dict[str, object]
) -> None:
    (tmp_path / "weekly").mkdir()
    (tmp_path / "weekly" / "fallback.en.j2").write_text(
        "{#- dpllm\nreleases: mean_rating\nmetadata: week\n-#}\nOurs: {{ mean_rating|band }}\n"
    )
    env = PromptEnvironment([tmp_path])
    assert env.search_path[0] == tmp_path
    assert env.render_fallback("weekly", weekly_context) == "Ours: 3.9 ± 0.2\n"
    assert "weekly/system.en.j2" in env.list_templates()
