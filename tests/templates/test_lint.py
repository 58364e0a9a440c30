"""The linter: every bypass is caught, clean templates pass."""

from __future__ import annotations

import pytest

from dpllm.templates import Declaration, LintIssue, lint

HEADER = """{#- dpllm
releases: mean_rating, hist, share
metadata: week, courses, params
-#}
"""


def codes(body: str) -> list[str]:
    return [issue.code for issue in lint(HEADER + body)]


CLEAN = [
    "{{ mean_rating|band }}",
    "{{ mean_rating|approx|upper }}",
    "{{ hist['5']|count }} and {{ hist[\"1\"]|count('records') }}",
    "{% for label in hist.labels %}{{ label }}: {{ hist[label]|approx }}{% endfor %}",
    "{% for label, r in hist.components() %}{{ label }} {{ r|interval }}{% endfor %}",
    "{% for r in hist %}{{ r|approx }}{% endfor %}",
    "{% set m = mean_rating %}{{ m|band }}",
    "{% set text = mean_rating|approx %}{{ text }}",
    "{% if hist['1'].small %}few{% endif %}{{ mean_rating.unit }} {{ mean_rating.name }}",
    "{{ (mean_rating.confidence * 100)|round|int }}%",
    "{{ week }} {{ courses|join(', ') }} {{ params.max_words|default(200) }} {{ lang }}",
    "{{ share|pct if share is defined else 'n/a' }}",
    "{% macro line(label, r) %}{{ label }}: {{ r|approx }}{% endmacro %}{{ line('Mean', mean_rating) }}",
    "{{ hist|map('approx')|join(', ') }}",
    "{{ hist|length }} bins",
    "{% for i in range(3) %}{{ i }}{% endfor %}",
]


@pytest.mark.parametrize("body", CLEAN)
def test_clean_templates_pass(body: str) -> None:
    assert lint(HEADER + body) == []


BYPASSES = [
    # raw output, directly and through every alias
    ("{{ mean_rating }}", "DP001"),
    ("{{ hist['5'] }}", "DP001"),
    ("{{ hist }}", "DP001"),
    ("{% set m = mean_rating %}{{ m }}", "DP001"),
    ("{% set pair = (week, mean_rating) %}{{ pair }}", "DP001"),
    ("{% for r in hist %}{{ r }}{% endfor %}", "DP001"),
    ("{% for l, r in hist.components() %}{{ r }}{% endfor %}", "DP001"),
    ("{% set ns = namespace(x=1) %}{% set ns.x = mean_rating %}{{ ns.x }}", "DP001"),
    ("{{ mean_rating|default('-') }}", "DP001"),
    ("{{ mean_rating if week else 'x' }}", "DP001"),
    ("{{ week or mean_rating }}", "DP001"),
    ("{{ [mean_rating]|first }}", "DP001"),
    # raw fields and private attributes
    ("{{ mean_rating.value }}", "DP002"),
    ("{{ mean_rating.values[0] }}", "DP002"),
    ("{{ mean_rating.interval[0] }}", "DP002"),
    ("{{ mean_rating.noise_scale }}", "DP002"),
    ("{{ mean_rating['value'] }}", "DP002"),
    ("{{ mean_rating._secret }}", "DP002"),
    ("{{ mean_rating.__class__ }}", "DP002"),
    ("{{ week.__class__.__mro__ }}", "DP002"),
    ("{{ mean_rating.cost }}", "DP002"),
    ("{{ mean_rating.mystery }}", "DP002"),
    ("{{ hist|map(attribute='value')|join }}", "DP002"),
    ("{{ hist|sum(attribute='values') }}", "DP002"),
    # |attr
    ("{{ mean_rating|attr('value') }}", "DP003"),
    ("{{ week|attr('upper') }}", "DP003"),
    # string building
    ("{{ 'mean: ' ~ mean_rating }}", "DP004"),
    ("{{ '%s' % mean_rating }}", "DP004"),
    ("{{ '%.3f' % (mean_rating,) }}", "DP004"),
    ("{{ '{}'.format(mean_rating) }}", "DP004"),
    ("{{ '%s'|format(mean_rating) }}", "DP004"),
    ("{{ mean_rating|string }}", "DP004"),
    ("{{ hist|join(', ') }}", "DP004"),
    ("{{ ', '.join(hist) }}", "DP004"),
    ("{{ mean_rating|tojson }}", "DP004"),
    ("{{ hist|map('string')|join }}", "DP004"),
    ("{% set s = mean_rating|string %}{{ s }}", "DP004"),
    # arithmetic, comparison, numbers
    ("{{ (mean_rating * 2)|band }}", "DP005"),
    ("{{ (mean_rating + 0)|approx }}", "DP005"),
    ("{% if mean_rating > 4 %}good{% endif %}", "DP005"),
    ("{{ mean_rating|round }}", "DP005"),
    ("{{ mean_rating|float }}", "DP005"),
    ("{{ -mean_rating }}", "DP005"),
    # macros that print a Release raw
    ("{% macro show(x) %}{{ x }}{% endmacro %}{{ show(mean_rating) }}", "DP006"),
    ("{% macro show(a, x) %}{{ a }}={{ x }}{% endmacro %}{{ show('m', x=mean_rating) }}", "DP006"),
    ("{% macro show(x) %}{{ 'v' ~ x }}{% endmacro %}{{ show(hist['5']) }}", "DP006"),
    # unknown filters and tests, undeclared names
    ("{{ mean_rating|exact }}", "DP007"),
    ("{% if week is prime %}x{% endif %}", "DP007"),
    ("{{ secret_total }}", "DP008"),
    ("{{ secret_total|approx }}", "DP008"),
]


@pytest.mark.parametrize(("body", "code"), BYPASSES)
def test_each_bypass_is_caught(body: str, code: str) -> None:
    assert code in codes(body), lint(HEADER + body)


def test_a_macro_that_filters_its_parameter_is_fine_but_one_printing_raw_is_caught() -> None:
    body = (
        "{% macro ok(label, r) %}{{ label }}: {{ r|band }}{% endmacro %}\n"
        "{% macro bad(label, r) %}{{ label }}: {{ r }}{% endmacro %}\n"
        "{{ ok('a', mean_rating) }}\n"
        "{{ bad('b', mean_rating) }}\n"
        "{{ bad(week, 'x') }}\n"
    )
    issues = lint(HEADER + body)
    assert [(i.code, i.line) for i in issues] == [("DP006", 8)]


def test_issue_positions_and_format() -> None:
    issues = lint(HEADER + "ok\n  {{ week }} {{ mean_rating.value }}\n")
    assert issues == [LintIssue(6, 29, "DP002", issues[0].message)]
    assert issues[0].format("p/x.j2").startswith("p/x.j2:6:29: DP002 '.value' reads a raw number")


def test_undeclared_names_are_named_once_and_treated_as_releases() -> None:
    issues = lint(HEADER + "{{ total }}\n{{ total }}")
    assert [(i.code, i.line) for i in issues] == [("DP001", 5), ("DP008", 5), ("DP001", 6)]
    assert "'total' is not in the template's declared context" in issues[1].message


def test_missing_and_malformed_front_matter() -> None:
    # Without a header every name is undeclared, and may be a Release.
    assert [i.code for i in lint("{{ week }}")] == ["DP009", "DP001", "DP008"]
    bad = "{#- dpllm\nreleases: a\nnumbers: b\n-#}\n{{ a|approx }}"
    issues = lint(bad)
    assert issues[0].code == "DP009" and "line 3" in issues[0].message


def test_explicit_declaration_and_syntax_errors() -> None:
    declared = Declaration(releases=frozenset({"r"}))
    assert lint("{{ r|approx }}", declared=declared) == []
    assert [i.code for i in lint("{{ r }}", declared=declared)] == ["DP001"]
    issues = lint(HEADER + "{% for %}")
    assert issues[-1].code == "DP010" and issues[-1].line == 5


def test_filters_unknown_to_the_environment() -> None:
    assert [i.code for i in lint(HEADER + "{{ week|upper }}", filters={"approx"})] == ["DP007"]
