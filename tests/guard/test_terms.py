"""Matching by the terms and unit a release declares; figures by reference; the eval set."""

from __future__ import annotations

import pytest

from dpllm.guard import Guard, Rule
from dpllm.guard.evalset import build_cases, domain_releases, evaluate
from dpllm.release import Cost, Release


def _rel(name: str, value: float, lo: float, hi: float, **kw: object) -> Release:
    return Release(
        name=name, values=(value,), intervals=((lo, hi),), mechanism="discrete_laplace",
        noise_scale=1.0, cost=Cost.pure(0.5), fingerprint=f"fp-{name}", seeded=True, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.fixture
def support() -> Guard:
    return Guard(
        [
            _rel("median_hours", 18.4, 17.9, 18.9, kind="median", unit="hours",
                 terms=(("en", "median resolution time"), ("zh", "解决时间中位数"))),
            _rel("minutes", 7.34, 7.14, 7.54, kind="mean", unit="minutes",
                 terms=(("en", "average call length"),)),
            _rel("reopened", 46, 38, 54, unit="tickets", terms=(("en", "reopened tickets"),)),
            _rel("escalated", 71, 63, 79, unit="tickets", terms=(("en", "escalated tickets"),)),
            _rel("revenue", 1_283_400, 1_251_000, 1_315_800, kind="sum", unit="yuan",
                 terms=(("en", "revenue"), ("zh", "销售额"))),
            _rel("first_contact", 0.412, 0.392, 0.432, kind="proportion", unit="share",
                 terms=(("en", "first-contact resolution rate"), ("zh", "首次解决率"))),
        ]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("The median resolution time was about 18 hours.", True),
        ("The median resolution time was 18.4 hours.", True),
        ("The median resolution time was 18.43 hours.", False),
        ("The median resolution time was about 25 hours.", False),
        ("The average call length was about 7.3 minutes.", True),
        ("The average call length was about 18 minutes.", False),  # hours' value, minutes' unit
        ("There were about 70 escalated tickets.", True),
        ("There were about 50 escalated tickets.", False),  # in the reopened band: still named
        ("Revenue came to ¥1.28M.", True),
        ("Revenue came to RMB 1.3 million.", True),
        ("Revenue came to ¥1.2834M.", False),
        ("销售额约128万元。", True),
        ("销售额约1.5亿元。", False),
        ("The first-contact resolution rate was 0.41.", True),
        ("The first-contact resolution rate was 0.4123.", False),
        ("首次解决率约四成。", True),
        ("首次解决率约六成。", False),
        ("The first-contact resolution rate was about two in five.", True),
        ("A team of 7 days on call handled it.", True),  # days: no release counts days
    ],
)
def test_matching_by_terms_and_units(support: Guard, text: str, ok: bool) -> None:
    report = support.check(text)
    assert report.ok is ok, [v.message for v in report.violations]


def test_an_unnamed_figure_may_be_faithful_to_any_release_of_its_unit(support: Guard) -> None:
    # No release named: about 50 tickets is faithful to the reopened tickets.
    assert support.check("About 50 tickets needed a second look.").ok


def test_named_release_is_not_excused_by_another_band() -> None:
    guard = Guard(domain_releases("course"))
    bad = guard.check("The refund process was mentioned around 50 times.")
    assert [(v.rule, v.release) for v in bad.violations] == [
        (Rule.OUTSIDE_BAND, "topic_counts[refund]")
    ]
    assert guard.check("Lecture videos were mentioned around 50 times.").ok
    assert guard.check("退款被提及约23次，视频约48次。").ok


def test_terms_round_trip_through_json() -> None:
    [release] = [r for r in domain_releases("course").values() if r.is_vector]
    again = Release.from_dict(release.to_dict())
    assert again == release
    assert release["refund"].terms_in("zh") == ("退款", "退款流程")
    plain = _rel("x", 1.0, 0.0, 2.0)
    assert "terms" not in plain.to_dict()  # existing records serialise as before


def test_references_resolve_to_the_allowed_wording() -> None:
    guard = Guard(domain_releases("course"))
    text = "We got [[feedback_count]] feedback records; [[share_positive]] were positive."
    resolved = guard.resolve(text)
    assert resolved.text == "We got about 160 feedback records; about 62% were positive."
    assert resolved.resolved == ("feedback_count", "share_positive")
    assert guard.check(resolved.text).ok
    zh = guard.resolve("共收到约[[feedback_count]]条反馈，退款[[topic_counts.refund]]次。")
    assert zh.text == "共收到约160条反馈，退款约23次。"


def test_unknown_reference_is_a_violation() -> None:
    guard = Guard(domain_releases("course"))
    resolved = guard.resolve("About [[refund_total]] refunds.")
    assert resolved.unknown == ("refund_total",)
    [v] = guard.check(resolved.text).violations
    assert v.rule is Rule.UNKNOWN_REFERENCE and "[[topic_counts.refund]]" in v.message


def test_eval_set_is_large_deterministic_and_balanced() -> None:
    cases = build_cases()
    assert len(cases) >= 1000 and cases == build_cases()
    assert {c.lang for c in cases} == {"en", "zh"} and len({c.domain for c in cases}) == 4
    for category in {c.category for c in cases}:
        mine = [c for c in cases if c.category == category]
        assert any(c.violating for c in mine) and any(not c.violating for c in mine), category


def test_guard_meets_the_goal_on_the_eval_set() -> None:
    guards: dict[int, Guard] = {}

    def flagged(text: str, releases: object, lang: str) -> bool:
        g = guards.setdefault(id(releases), Guard(releases))  # type: ignore[arg-type]
        return not g.check(text, language=lang).ok

    scores = evaluate(build_cases(), flagged)
    for name, s in scores.items():
        assert s.recall >= 0.98 and s.false_flag_rate <= 0.02, (
            name,
            s.misses[:3],
            s.false_flags[:3],
        )
