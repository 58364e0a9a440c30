"""Memory bombs through widths and counts are refused before Python builds them.

The sandbox capped ``range()`` and ``*``/``**``, but ``"x"|indent(10**10)`` asked
Python for ten gigabytes (``dpllm templates preview`` hung and grew without
bound); so did the other size-taking filters and ``str`` methods below. Each is
now a :class:`TemplateSecurityError` naming the line, and the rendered text as a
whole is capped. The ordinary small uses still work.
"""

from __future__ import annotations

import pytest

from dpllm.errors import TemplateSecurityError
from dpllm.templates import PromptEnvironment
from dpllm.templates.limits import MAX_OUTPUT_CHARS

H = "{#- dpllm\nmetadata: week\n-#}\n"


@pytest.fixture
def env() -> PromptEnvironment:
    return PromptEnvironment(lint_on_render=False, include_builtin=False)


@pytest.mark.parametrize(
    "body",
    [
        '{{ "x\\ny"|indent(10**10) }}',
        '{{ "x"|indent(width=10**10) }}',
        '{{ "x"|center(10**10) }}',
        '{{ "%10000000000s"|format(1) }}',
        '{{ "%*s"|format(10**10, 1) }}',
        '{{ "%.1000000f"|format(1) }}',
        '{{ "{:>10000000000}".format(1) }}',
        '{{ "{:>{w}}".format(1, w=10**10) }}',
        '{{ "{x:>{w}}".format_map({"x": 1, "w": 10**10}) }}',
        '{{ "x".ljust(10**10) }}',
        '{{ "x".rjust(10**10) }}',
        '{{ "x".center(10**10) }}',
        '{{ "x".zfill(10**10) }}',
        '{{ ("\\t" * 1000).expandtabs(10**6) }}',
        '{{ ("a" * 99999)|replace("", "b" * 99999) }}',
        '{{ ("a" * 99999).replace("", "b" * 99999) }}',
        "{{ [1]|batch(10**10, 0)|list }}",
        "{{ [1]|slice(10**9)|list }}",
        "{{ lipsum(10**7) }}",
        '{{ {"a": [1, 2]}|tojson(indent=10**9) }}',
    ],
)
def test_a_huge_width_or_count_is_refused(env: PromptEnvironment, body: str) -> None:
    with pytest.raises(TemplateSecurityError, match=r"<string>:4: "):
        env.render_string(H + body, {"week": "W1"})


def test_the_rendered_text_is_capped(env: PromptEnvironment) -> None:
    body = '{% set s = "x" * 99999 %}{% for i in range(1000) %}{{ s }}{% endfor %}'
    with pytest.raises(TemplateSecurityError, match=str(MAX_OUTPUT_CHARS)):
        env.render_string(H + body, {"week": "W1"})


def test_small_widths_and_counts_still_work(env: PromptEnvironment) -> None:
    body = (
        '{{ "x"|center(5) }}|{{ "%5.2f"|format(3.14159) }}|{{ "{:>4}".format(7) }}|'
        '{{ "a b"|replace(" ", "-") }}|{{ "x".ljust(3) }}|{{ "a\\nb"|indent(2) }}|'
        "{{ [1, 2, 3]|batch(2)|list }}|{{ [1, 2, 3]|slice(2)|list }}|"
        '{{ "{x}".format_map({"x": 1}) }}'
    )
    text = env.render_string(H + body, {"week": "W1"})
    assert text == "x  | 3.14|   7|a-b|x  |a\n  b|[[1, 2], [3]]|[[1, 2], [3]]|1\n"
