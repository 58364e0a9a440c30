"""The guard's rules, as tables: over-precise / outside-band / unsupported, and compliant text."""

from __future__ import annotations

import pytest

from dpllm.errors import GuardError
from dpllm.guard import Guard, Rule
from dpllm.release import Release

from .conftest import make_release

OP, OUT, UNS = Rule.OVER_PRECISE, Rule.OUTSIDE_BAND, Rule.UNSUPPORTED

# (text, mention, release) — each text states exactly one over-precise figure.
OVER_PRECISE: list[tuple[str, str, str]] = [
    ("We received 157 responses this week.", "157 responses", "responses"),
    ("There were 163 responses.", "163 responses", "responses"),
    ("Feedback came from 158 responses.", "158 responses", "responses"),
    ("About 157 responses arrived.", "About 157 responses", "responses"),
    ("Roughly 161 responses.", "Roughly 161 responses", "responses"),
    ("around 159 ratings were given", "around 159 ratings", "responses"),
    ("152–168 responses", "152–168 responses", "responses"),
    ("between 155 and 165 responses", "between 155 and 165 responses", "responses"),
    ("more than 157 responses", "more than 157 responses", "responses"),
    ("The average rating was 4.37 stars.", "4.37 stars", "mean_rating"),
    ("Mean rating: 4.31", "4.31", "mean_rating"),
    ("rated 4.30 on average", "4.30", "mean_rating"),
    ("an average of about 4.28 stars", "about 4.28 stars", "mean_rating"),
    ("The mean score was 4.312.", "4.312", "mean_rating"),
    ("Ratings averaged 4.35 points.", "4.35 points", "mean_rating"),
    ("62.4% were positive.", "62.4%", "positive_share"),
    ("A positive share of 61.8 percent.", "61.8 percent", "positive_share"),
    ("about 62.0% liked it", "about 62.0%", "positive_share"),
    ("~62.4% positive", "~62.4%", "positive_share"),
    ("1,234 active users", "1,234 active users", "active_users"),
    ("1234 users logged in", "1234 users", "active_users"),
    ("1 234 users", "1 234 users", "active_users"),
    ("approximately 1,236 users", "approximately 1,236 users", "active_users"),
    ("1.234k users", "1.234k users", "active_users"),
    ("The course had 1,241 active users.", "1,241 active users", "active_users"),
    ("本周共收到157条反馈。", "157条", "responses"),
    ("共有163条评论。", "163条", "responses"),
    ("大约157条反馈", "大约157条", "responses"),
    ("约161条", "约161条", "responses"),
    ("一百五十七条反馈", "一百五十七条", "responses"),
    ("152到168条反馈", "152到168条", "responses"),
    ("平均评分4.37分。", "4.37分", "mean_rating"),
    ("平均得分为四点三七分", "四点三七分", "mean_rating"),
    ("平均评分约4.28星", "约4.28星", "mean_rating"),
    ("平均４．３７分", "４．３７分", "mean_rating"),
    ("好评率62.4%。", "62.4%", "positive_share"),
    ("好评率为百分之六十二点四", "百分之六十二点四", "positive_share"),
    ("约62.4％的同学表示满意", "约62.4％", "positive_share"),
    ("活跃用户1234人", "1234人", "active_users"),
    ("一千二百三十四名活跃用户", "一千二百三十四名", "active_users"),
    ("活跃用户约1,236位", "约1,236位", "active_users"),
    ("本周有１２３４名活跃用户", "１２３４名", "active_users"),
    ("反馈共157条左右", "157条左右", "responses"),
    ("超过1233人活跃", "超过1233人", "active_users"),
]

# Text that states every figure at or above the allowed precision, inside the band,
# or only public constants. None of these may raise a violation.
COMPLIANT: list[str] = [
    "About 160 responses this week.",
    "We received roughly 160 responses.",
    "Between 150 and 170 responses arrived.",
    "150–170 responses",
    "150-170 responses (95% CI)",
    "160 responses",
    "around 200 responses",
    "The average rating was about 4.3 stars.",
    "Mean rating 4.3 ± 0.2 on a 1–5 scale.",
    "Ratings averaged 4.3 out of 5.",
    "An average near 4 stars.",
    "4.1–4.5 stars",
    "About 62% were positive.",
    "Roughly 60% liked it.",
    "59–65% positive",
    "About 1,230 active users.",
    "around 1,200 users",
    "1.2k users",
    "roughly 1,230 users in week 47 (2026-W47)",
    "Data from 2026-11-16 to 2026-11-22, ε = 0.5.",
    "Most 5-star ratings praised the labs.",
    "Three themes stood out: 1. pacing, 2. labs, 3. grading.",
    "1. Pacing\n2. Labs\n3. Grading",
    "The top 3 requests were about labs.",
    "Over the last 7 days, about 160 responses.",
    "Feedback for the 3rd week was mixed.",
    "本周约160条反馈。",
    "共收到150到170条反馈。",
    "大约160条反馈，平均评分约4.3分（满分5分）。",
    "平均评分4.3分左右。",
    "平均四点三分。",
    "好评率约62%。",
    "好评率约百分之六十二。",
    "约1,230名活跃用户。",
    "活跃用户约1.2千人",
    "第47周（2026-W47），隐私预算ε=0.5。",
    "本周（11月16日至11月22日）收到约160条反馈。",
    "过去7天内，约160条反馈。",
    "1到5分的量表上，平均约4.3分。",
    "十分满意的同学很多，一些同学提到了实验课。",
    "第一，节奏太快；第二，作业太多。",
    "约一百六十条反馈",
    "160条左右的反馈",
    "两个方面值得注意。",
    "多数同学给了5星。",
]


@pytest.mark.parametrize(("text", "mention", "release"), OVER_PRECISE)
def test_over_precise_mentions_are_caught(
    releases: dict[str, Release], text: str, mention: str, release: str
) -> None:
    report = Guard(releases).check(text)
    over = [v for v in report.violations if v.rule is OP]
    assert [(v.mention, v.release) for v in over] == [(mention, release)], report.violations
    v = over[0]
    assert text[v.span[0] : v.span[1]] == v.mention
    assert v.allowed and v.allowed_range


@pytest.mark.parametrize("text", COMPLIANT)
def test_compliant_phrasings_pass(releases: dict[str, Release], text: str) -> None:
    report = Guard(releases).check(text)
    assert report.ok, report.violations
    assert not report.warnings


def test_table_sizes() -> None:
    zh = sum(1 for t, _, _ in OVER_PRECISE if any("\u4e00" <= c <= "\u9fff" for c in t))
    assert len(OVER_PRECISE) >= 40 and zh >= 15 and len(OVER_PRECISE) - zh >= 15
    zh_ok = sum(1 for t in COMPLIANT if any("\u4e00" <= c <= "\u9fff" for c in t))
    assert len(COMPLIANT) >= 40 and zh_ok >= 15 and len(COMPLIANT) - zh_ok >= 15


# (text, [(rule, release)])
OTHER_RULES: list[tuple[str, list[tuple[Rule, str | None]]]] = [
    ("The average rating was 4.9 stars.", [(OUT, "mean_rating")]),
    ("平均评分3.6分", [(OUT, "mean_rating")]),
    ("About 140 responses.", [(OUT, "responses")]),
    ("The average rating was 3.9 stars.", [(OUT, "mean_rating")]),
    ("约190条反馈", [(OUT, "responses")]),
    ("About 68% were positive.", [(OUT, "positive_share")]),
    ("fewer than 130 responses", [(OUT, "responses")]),
    ("A 12% drop since last week.", [(UNS, None)]),
    ("下降了12%。", [(UNS, None)]),
    ("About 40 students complained about the labs.", [(UNS, None)]),
    ("The median reply took 3.5 hours.", []),
    ("平均评分4.87分", [(OP, "mean_rating"), (OUT, "mean_rating")]),
]


@pytest.mark.parametrize(("text", "expected"), OTHER_RULES)
def test_outside_band_and_unsupported(
    releases: dict[str, Release], text: str, expected: list[tuple[Rule, str | None]]
) -> None:
    report = Guard(releases).check(text)
    assert [(v.rule, v.release) for v in report.violations] == expected


def test_unsupported_can_be_a_warning(releases: dict[str, Release]) -> None:
    report = Guard(releases, unsupported="warning").check("A 12% drop.")
    assert report.ok
    assert [w.rule for w in report.warnings] == [UNS]


def test_allowed_constants_are_not_unsupported(releases: dict[str, Release]) -> None:
    assert not Guard(releases).check("The course has 240 seats.").ok
    assert Guard(releases, allowed_constants=[240]).check("The course has 240 seats.").ok


def test_allowed_forms_follow_the_language(releases: dict[str, Release]) -> None:
    en = Guard(releases).check("We received 157 responses.").violations[0]
    assert (en.allowed, en.allowed_range) == ("about 160 responses", "150–170 responses")
    zh = Guard(releases).check("共157条反馈").violations[0]
    assert (zh.allowed, zh.allowed_range) == ("约160条", "150–170条")
    assert "约160条" in zh.message
    pct = Guard(releases).check("62.4% positive").violations[0]
    assert (pct.allowed, pct.allowed_range) == ("about 62%", "59–65%")


def test_allowed_forms_pass_the_guard(releases: dict[str, Release]) -> None:
    guard = Guard(releases)
    for text in ("157 responses", "4.37 stars", "62.4%", "1,234 users", "157条", "4.37分"):
        for v in guard.check(text).violations:
            assert guard.check(str(v.allowed)).ok, v.allowed
            assert guard.check(str(v.allowed_range)).ok, v.allowed_range


def test_small_counts_are_stated_as_fewer_than() -> None:
    small = make_release("complaints", 2.0, 0.0, 4.5, unit="responses")
    v = Guard({"complaints": small}).check("Only 2 responses mentioned noise.").violations
    assert v == ()
    v = Guard({"complaints": small}).check("Only 2.0 responses.").violations
    assert v[0].allowed == "fewer than 5 responses"


def test_vector_releases_are_checked_per_component() -> None:
    hist = Release(
        name="stars",
        values=(3.0, 41.0),
        intervals=((0.0, 9.0), (20.0, 62.0)),
        mechanism="discrete_laplace",
        noise_scale=2.0,
        cost=make_release("x", 1, 0, 2).cost,
        fingerprint="fp",
        labels=("1", "5"),
        unit="responses",
    )
    report = Guard([hist]).check("43 responses gave 5 stars.")
    assert [(v.rule, v.release) for v in report.violations] == [(OP, "stars[5]")]
    assert Guard([hist]).check("About 40 responses gave 5 stars.").ok


def test_bad_input_raises_guard_error(releases: dict[str, Release]) -> None:
    with pytest.raises(GuardError):
        Guard(releases, unsupported="ignore")
    with pytest.raises(GuardError):
        Guard({"x": 3})  # type: ignore[dict-item]
    with pytest.raises(GuardError):
        Guard(releases).check(b"157")  # type: ignore[arg-type]
    with pytest.raises(GuardError):
        Guard(releases).check("157", language="fr")
