"""What the guard says about a figure, field by field, and the edges of its rules.

The rule tables (``test_rules.py``) check which rule a figure breaks; these check the
rest of the promise: each violation's span, mention, allowed forms and message, in the
language of the figure's own line; the threshold below which a plain figure is wording;
the 60 characters of context a generic word ("average", "share") may come from; a
decimal proportion read in points at the edges of its band; and a figure accepted for
faithfully stating another release only when that release is of the same kind.
"""

from __future__ import annotations

import pytest

from dpllm.errors import GuardError
from dpllm.guard import Guard, Rule, Violation
from dpllm.release import Release

from .conftest import make_release

OP, OUT, UNS, REF = Rule.OVER_PRECISE, Rule.OUTSIDE_BAND, Rule.UNSUPPORTED, Rule.UNKNOWN_REFERENCE


@pytest.fixture
def responses() -> Guard:
    return Guard({"responses": make_release("responses", 160.0, 150.0, 170.0, unit="responses")})


# ----------------------------------------------------------------------------- whole verdicts
def test_an_over_precise_figure_in_english(releases: dict[str, Release]) -> None:
    [v] = Guard(releases).check("We received 157 responses.").violations
    assert v == Violation(
        span=(12, 25),
        rule=OP,
        release="responses",
        mention="157 responses",
        allowed="about 160 responses",
        allowed_range="150–170 responses",
        message='"157 responses" is more precise than responses\'s error band allows; '
        'write "about 160 responses" or "150–170 responses".',
    )


def test_an_over_precise_figure_in_chinese(releases: dict[str, Release]) -> None:
    [v] = Guard(releases).check("共157条反馈").violations
    assert v == Violation(
        (1, 5), OP, "responses", "157条", "约160条", "150–170条",
        "“157条”比responses的误差范围允许的更精确；请写成“约160条”或“150–170条”。",
    )  # fmt: skip


def test_a_figure_outside_the_band_in_english(releases: dict[str, Release]) -> None:
    [v] = Guard(releases).check("Ratings: 4.9 stars.").violations
    assert v == Violation(
        (9, 18), OUT, "mean_rating", "4.9 stars", "about 4.3 stars", "4.1–4.6 stars",
        '"4.9 stars" is inconsistent with mean_rating\'s released interval 4.1–4.6 stars; '
        'write "about 4.3 stars" or "4.1–4.6 stars".',
    )  # fmt: skip


def test_a_figure_outside_the_band_in_chinese(releases: dict[str, Release]) -> None:
    [v] = Guard(releases).check("约190条反馈").violations
    assert v == Violation(
        (0, 5), OUT, "responses", "约190条", "约160条", "150–170条",
        "“约190条”与responses的发布区间150–170条不符；请写成“约160条”或“150–170条”。",
    )  # fmt: skip


def test_both_rules_broken_by_one_figure(releases: dict[str, Release]) -> None:
    over, out = Guard(releases).check("The rating was 4.87 stars.", language="zh").violations
    assert (over.rule, out.rule) == (OP, OUT)
    assert over.message == "“4.87 stars”比mean_rating的误差范围允许的更精确；请写成“约4.3 stars”或“4.1–4.6 stars”。"  # fmt: skip
    assert out.message == "“4.87 stars”与mean_rating的发布区间4.1–4.6 stars不符；请写成“约4.3 stars”或“4.1–4.6 stars”。"  # fmt: skip


def test_an_unsupported_figure_names_the_releases(releases: dict[str, Release]) -> None:
    [v] = Guard(releases).check("About 40 students complained.").violations
    assert v == Violation(
        (0, 17), UNS, None, "About 40 students", None, None,
        '"About 40 students" matches none of the released statistics (responses, '
        "mean_rating, active_users, positive_share); remove it.",
    )  # fmt: skip
    [zh] = Guard(releases).check("其中12%的同学").violations
    assert zh == Violation(
        (2, 5), UNS, None, "12%", None, None,
        "“12%”不对应任何已发布的统计量（responses, mean_rating, active_users, "
        "positive_share）；请删去该数字。",
    )  # fmt: skip


def test_with_no_release_every_message_says_so() -> None:
    ref, figure = Guard([]).check("[[x]] and 12 responses").violations
    assert ref == Violation(
        (0, 5), REF, None, "[[x]]", None, None,
        '"[[x]]" names no released statistic; the references are: —.',
    )  # fmt: skip
    assert figure.message == '"12 responses" matches none of the released statistics (—); remove it.'  # fmt: skip
    zref, zfig = Guard([]).check("[[x]]和12条").violations
    assert zref.message == "“[[x]]”不是已发布的统计量；可用的引用：—。"
    assert zfig.message == "“12条”不对应任何已发布的统计量（—）；请删去该数字。"


def test_an_unknown_reference_lists_the_known_ones(responses: Guard) -> None:
    guard = Guard(
        {
            "responses": make_release("responses", 160.0, 150.0, 170.0),
            "share": make_release("share", 0.6, 0.5, 0.7, kind="proportion"),
        }
    )
    [v] = guard.check("Of these, [[ total ]] came in.").violations
    assert v == Violation(
        (10, 21), REF, None, "[[ total ]]", None, None,
        '"[[ total ]]" names no released statistic; the references are: [[responses]], [[share]].',
    )  # fmt: skip
    [z] = guard.check("共[[total]]条").violations
    assert (z.span, z.mention) == ((1, 10), "[[total]]")
    assert z.message == "“[[total]]”不是已发布的统计量；可用的引用：[[responses]], [[share]]。"


# ----------------------------------------------------------------------------- languages
BILINGUAL = (
    "We received 157 responses.\n"  # English
    "共157条反馈\n"  # Chinese, ending in a Han character
    "Again 157 responses.\n"  # English after a line that ends in Han
    "共 157 responses\n"  # Chinese by its first character only
    "157条"  # Chinese by its last character only, and the last line
)


def test_each_figure_is_answered_in_the_language_of_its_line(responses: Guard) -> None:
    report = responses.check(BILINGUAL)
    assert report.language == "zh"
    assert [(v.mention, v.allowed) for v in report.violations] == [
        ("157 responses", "about 160 responses"),
        ("157条", "约160条"),
        ("157 responses", "about 160 responses"),
        ("157 responses", "约160 responses"),
        ("157条", "约160条"),
    ]
    zh = [v.message.startswith("“") for v in report.violations]
    assert zh == [False, True, False, True, True]


def test_an_unknown_reference_is_answered_in_its_lines_language(responses: Guard) -> None:
    [first] = responses.check("第一行\n[[nothing]] here").violations
    assert first.message.startswith('"[[nothing]]" names no released statistic')
    [second] = responses.check("[[nothing]] here\n第二行").violations
    assert second.message.startswith('"[[nothing]]" names no released statistic')
    [third] = responses.check("An intro.\n[[nothing]]在这里").violations
    assert third.message.startswith("“[[nothing]]”不是已发布的统计量")


def test_a_language_given_holds_for_every_line(responses: Guard) -> None:
    report = responses.check("[[nothing]]\n157 responses\n共157条", language="zh")
    assert report.language == "zh"
    assert all(v.message.startswith("“") for v in report.violations)
    assert [v.allowed for v in report.violations[1:]] == ["约160 responses", "约160条"]
    report = responses.check("[[nothing]]\n157 responses\n共157条", language="en")
    assert all(v.message.startswith('"') for v in report.violations)
    assert [v.allowed for v in report.violations[1:]] == ["about 160 responses", "about 160 条"]


def test_resolve_writes_the_language_asked_for(responses: Guard) -> None:
    assert responses.resolve("[[responses]]", language="zh").text == "约160"
    assert responses.resolve("[[responses]]", language="en").text == "about 160"
    assert responses.resolve("共[[responses]]条").text == "共约160条"
    with pytest.raises(GuardError, match="^the guard resolves text, got bytes$"):
        responses.resolve(b"[[responses]]")  # type: ignore[arg-type]


def test_a_figure_without_a_unit_gets_no_suffix(releases: dict[str, Release]) -> None:
    [v] = Guard(releases).check("Mean rating: 4.37").violations
    assert (v.allowed, v.allowed_range) == ("about 4.3", "4.1–4.6")


# ----------------------------------------------------------------------------- unsupported
ONLY = {"responses": make_release("responses", 1600.0, 1500.0, 1700.0, unit="responses")}


def test_a_negative_figure_is_sized_by_its_magnitude() -> None:
    [v] = Guard(ONLY).check("The balance was -12.").violations
    assert (v.rule, v.mention) == (UNS, "-12")
    assert Guard(ONLY).check("The balance was -9.").ok


@pytest.mark.parametrize(
    "text",
    [
        "at most 3 complained",  # a bound
        "between 3 and 5 complained",  # a range
        "about 4 complained",  # an approximation word
        "a 0.5 share",  # a decimal
        "5%",
        "百分之五",
        "3 students",  # a unit
    ],
)
def test_a_small_figure_stated_as_a_statistic_is_unsupported(text: str) -> None:
    assert [v.rule for v in Guard(ONLY).check(text).violations] == [UNS]


def test_an_allowed_constant_is_not_unsupported_unless_a_range() -> None:
    guard = Guard(ONLY, allowed_constants=[40, 3])
    assert guard.check("Of them, 40 complained.").ok
    assert not guard.check("between 3 and 40 complained").ok
    assert guard.check("fewer than 40 complained").ok  # a bound at a constant: a threshold


# ----------------------------------------------------------------------------- generic words
TIE = {
    "cnt": make_release("cnt", 40.0, 30.0, 50.0),
    "avg": make_release("avg", 40.0, 30.0, 50.0, kind="mean"),
}


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("It was 41.", "cnt"),  # no generic word: the first release
        ("Average: 41.", "avg"),  # at the very start, capitalised
        ("The average was 41.", "avg"),
        ("average. It was 41.", "cnt"),  # the word ends at the sentence before
        ("平均41", "avg"),
        ("mean share mean 41", "avg"),  # the nearest word decides
        ("share mean share 41", "cnt"),
        ("mean " + "z" * 51 + " was 41", "cnt"),  # begins 61 characters back: too far
        (" mean " + "z" * 50 + " was 41", "avg"),  # begins 60 characters back
    ],
)
def test_a_generic_word_before_the_figure_breaks_ties(text: str, target: str) -> None:
    assert Guard(TIE).check(text).matches == (target,)


def test_with_no_generic_word_no_kind_is_preferred() -> None:
    guard = Guard(
        {
            "avg": make_release("avg", 0.41, 0.30, 0.50, kind="mean"),
            "prop": make_release("prop", 0.41, 0.30, 0.50, kind="proportion"),
        }
    )
    assert guard.check("It was 0.4.").matches == ("avg",)
    assert guard.check("The share was 0.4.").matches == ("prop",)
    assert guard.check("mean share mean 0.4").matches == ("avg",)


# ----------------------------------------------------------------------------- decimal proportions
def _share(lo: float, hi: float) -> Guard:
    return Guard({"p": make_release("p", 0.62, lo, hi, kind="proportion", unit="share")})


@pytest.mark.parametrize(
    ("text", "rules"),
    [
        ("The share was 0.65.", []),  # the band's top, in points
        ("The share was 0.66.", [OUT]),
        ("The share was 0.65–0.70.", []),  # touches the band at its top
        ("The share was 0.70–0.80.", [OUT]),
        ("The share was 0.50–0.60.", []),
        ("The share was 0.50–0.58.", [OUT]),
    ],
)
def test_a_decimal_proportion_is_read_in_points(text: str, rules: list[Rule]) -> None:
    assert [v.rule for v in _share(0.59, 0.65).check(text).violations] == rules


def test_a_decimal_just_beyond_the_band_is_outside_it() -> None:
    """0.66 states 65.5–66.5 points: outside 59–65.497, by 0.003 points."""
    assert [v.rule for v in _share(0.59, 0.65497).check("It was 0.66.").violations] == [OUT]
    assert [v.rule for v in _share(0.595, 0.65).check("It was 0.50–0.59.").violations] == [OUT]


# ----------------------------------------------------------------------------- another release
def test_a_figure_faithful_to_another_release_of_its_kind_is_accepted() -> None:
    guard = Guard(
        {
            "wide": make_release("wide", 160.0, 60.0, 260.0, unit="responses"),
            "narrow": make_release("narrow", 160.0, 150.0, 170.0, unit="responses"),
        }
    )
    report = guard.check("We got 160 responses.")
    assert report.ok and report.matches == ("narrow",)


def test_a_figure_faithful_only_to_a_release_of_another_kind_is_refused() -> None:
    guard = Guard(
        {
            "wide": make_release("wide", 160.0, 60.0, 260.0, unit="responses"),
            "narrow": make_release("narrow", 160.0, 150.0, 170.0, kind="mean", unit="responses"),
        }
    )
    report = guard.check("We got 160 responses.")
    assert [(v.rule, v.release) for v in report.violations] == [(OP, "wide")]


# ----------------------------------------------------------------------------- allowed forms
def test_a_count_band_starts_at_zero_but_a_mean_band_may_not() -> None:
    guard = Guard(
        {
            "c": make_release("c", 12.0, -3.0, 27.0, unit="responses"),
            "m": make_release("m", 12.0, -3.0, 27.0, kind="mean", unit="hours"),
        }
    )
    [count] = guard.check("We got 13 responses.").violations
    assert count.allowed_range == "0–30 responses"
    [mean] = guard.check("It took 13 hours.").violations
    assert mean.allowed_range == "-10–30 hours"


def test_a_count_below_its_small_threshold_is_stated_as_fewer_than() -> None:
    below = Guard({"c": make_release("c", 2.0, 0.0, 4.5, unit="responses")})
    assert below.check("Only 2.0 responses.").violations[0].allowed == "fewer than 5 responses"
    assert below.check("仅2.0条反馈").violations[0].allowed == "少于5条"
    at = Guard({"c": make_release("c", 2.0, 0.0, 5.0, unit="responses")})
    [v] = at.check("Only 2.0 responses.").violations
    assert (v.allowed, v.allowed_range) == ("about 2 responses", "0–5 responses")
    assert at.check("仅2.0条反馈").violations[0].allowed == "约2条"


# ----------------------------------------------------------------------------- what fits a release
@pytest.mark.parametrize(
    "text",
    [
        "Of them, 62 complained.",  # a plain integer is never a proportion
        "62 users",
        "0.62 users",  # nor a decimal with a unit
        "The positive share was 0.62 stars.",
        "The positive share was 4.3.",  # nor a decimal above 1, even when named
        "The positive share was 1.5.",
    ],
)
def test_only_a_unitless_decimal_in_0_to_1_states_a_proportion(text: str) -> None:
    share = make_release("positive_share", 0.62, 0.59, 0.65, kind="proportion", unit="share")
    report = Guard({"positive_share": share}).check(text)
    assert report.matches == (None,)
    assert [v.rule for v in report.violations] == [UNS]


def test_a_plain_one_is_not_a_proportion_of_100_percent() -> None:
    share = make_release("positive_share", 0.62, 0.59, 0.65, kind="proportion", unit="share")
    report = Guard({"positive_share": share}).check("The positive share was 1.")
    assert report.ok and report.matches == (None,)


@pytest.mark.parametrize(
    ("lo", "hi", "text"),
    [(0.0, 0.04, "The share was 0.00–0.04."), (0.96, 1.0, "The share was 1.0.")],
)
def test_a_decimal_proportion_may_be_0_or_1(lo: float, hi: float, text: str) -> None:
    report = _share(lo, hi).check(text)
    assert report.ok and report.matches == ("p",)


def test_a_rating_is_not_a_count_without_a_unit() -> None:
    count = make_release("cnt", 4.0, 2.0, 6.0)
    assert [v.rule for v in Guard({"cnt": count}).check("rated 4.3 stars").violations] == [UNS]
    mean = make_release("avg", 4.31, 4.11, 4.51, kind="mean")
    report = Guard({"cnt": count, "avg": mean}).check("rated 4.3 stars")
    assert report.ok and report.matches == ("avg",)


def test_a_figure_with_a_unit_is_matched_among_releases_of_that_unit() -> None:
    guard = Guard(
        {
            "responses": make_release("responses", 160.0, 150.0, 170.0, unit="responses"),
            "other": make_release("other", 300.0, 290.0, 310.0),
        }
    )
    report = guard.check("共300条")  # records: the unitless "other" is not what it speaks of
    assert report.matches == (None,) and [v.rule for v in report.violations] == [UNS]


def test_a_figure_inside_a_band_beats_a_nearer_unit_outside_it() -> None:
    guard = Guard(
        {
            "A": make_release("A", 50.0, 46.0, 54.0, unit="responses"),  # "times" fits it (near)
            "B": make_release("B", 42.0, 38.0, 46.0),  # no unit: fits, unknown
        }
    )
    assert guard.check("It happened 42 times.").matches == ("B",)
    assert guard.check("It happened 48 times.").matches == ("A",)


def test_inside_a_band_comes_before_a_better_unit_even_when_it_is_too_fine() -> None:
    guard = Guard(
        {
            "A": make_release("A", 50.0, 46.0, 54.0, unit="responses"),
            "B": make_release("B", 40.0, 20.0, 60.0),  # holds 42, but only to the ten
        }
    )
    report = guard.check("It happened 42 times.")
    assert [(v.rule, v.release) for v in report.violations] == [(OP, "B")]


def test_among_bands_holding_the_figure_the_better_unit_is_matched() -> None:
    guard = Guard(
        {
            "B": make_release("B", 44.0, 38.0, 50.0),  # no unit
            "A": make_release("A", 50.0, 46.0, 54.0, unit="responses"),  # "times" is near
        }
    )
    assert guard.check("It happened 48 times.").matches == ("A",)


def test_two_bands_holding_the_figure_the_first_is_matched() -> None:
    guard = Guard({"a": make_release("a", 150.0, 100.0, 200.0), "b": make_release("b", 146.0, 140.0, 152.0)})  # fmt: skip
    assert guard.check("It was 150.").matches == ("a",)  # 145–155 reaches past b's top


def test_the_match_tolerance_is_inclusive() -> None:
    """共140条 states 135–145: 5 below 150–170, half a half-width (10) away."""
    responses = make_release("responses", 160.0, 150.0, 170.0, unit="responses")
    at = Guard({"responses": responses}, match_tolerance=0.5).check("共140条")
    assert [(v.rule, v.release) for v in at.violations] == [(OUT, "responses")]
    beyond = Guard({"responses": responses}, match_tolerance=0.49).check("共140条")
    assert [(v.rule, v.release) for v in beyond.violations] == [(UNS, None)]


def test_a_named_release_ignores_generic_words() -> None:
    def rel(name: str, kind: str) -> Release:
        return Release(
            name=name, values=(40.0,), intervals=((30.0, 50.0),), mechanism="discrete_laplace",
            noise_scale=1.0, cost=make_release("x", 1, 0, 2).cost, fingerprint=f"fp-{name}",
            seeded=True, kind=kind, terms=(("en", "ratings"),),
        )  # fmt: skip

    guard = Guard([rel("rc", "count"), rel("rm", "mean")])
    assert guard.check("On average the ratings came to 41.").matches == ("rc",)


def test_the_context_window_ends_where_the_figure_begins() -> None:
    tie = Guard(TIE)
    assert tie.check(" mean " + "z" * 50 + " was between 40 and 42").matches == ("avg",)
    assert tie.check("mean " + "z" * 51 + " was between 40 and 42").matches == ("cnt",)


# ----------------------------------------------------------------------------- stated intervals
@pytest.mark.parametrize(
    ("text", "rules"),
    [
        ("fewer than 300 responses", []),  # true: the band lies below 300
        ("少于300条", []),
        ("more than 10 responses", []),
        ("多于10条", []),
        ("超过180条", [OUT]),  # 10 above the band: still matched, and outside it
        ("fewer than 140 responses", [OUT]),
    ],
)
def test_a_bound_states_everything_on_its_side(responses: Guard, text: str, rules: list[Rule]) -> None:  # fmt: skip
    report = responses.check(text)
    assert [v.rule for v in report.violations] == rules
    assert report.matches == ("responses",)


def test_a_literal_zero_states_exactly_zero() -> None:
    small = Guard({"c": make_release("c", 2.0, 0.5, 4.5, unit="responses")})
    assert [v.rule for v in small.check("0 responses").violations] == [OUT]


# ----------------------------------------------------------------------------- constants, spans
def test_a_bound_at_an_allowed_constant_is_a_public_threshold(responses: Guard) -> None:
    releases = {"responses": make_release("responses", 160.0, 150.0, 170.0, unit="responses")}
    assert Guard(releases, allowed_constants=[140]).check("fewer than 140 responses").ok
    assert not responses.check("fewer than 140 responses").ok


def test_a_figure_equal_to_a_constant_is_still_matched() -> None:
    releases = {"responses": make_release("responses", 160.0, 150.0, 170.0, unit="responses")}
    report = Guard(releases, allowed_constants=[160]).check("160 responses")
    assert report.ok and report.matches == ("responses",)


def test_a_public_constants_words_name_nothing() -> None:
    """'2 stars' is the rating scale: its 'stars' does not make 'about 210' a mean rating."""
    guard = Guard(
        {
            "r2": make_release("r2", 210.0, 200.0, 220.0, unit="responses"),
            "mean_rating": make_release("mean_rating", 4.31, 4.11, 4.51, kind="mean", unit="stars"),
        }
    )
    report = guard.check("2 stars: about 210")
    assert report.ok and report.matches == (None, "r2")


def test_a_reference_keeps_the_spans_of_the_figures_after_it(responses: Guard) -> None:
    text = "Note [[x]]: 157 responses"
    report = responses.check(text)
    assert [(v.rule, v.span) for v in report.violations] == [(REF, (5, 10)), (OP, (12, 25))]
    assert text[12:25] == "157 responses"


def test_the_report_holds_the_text_and_what_was_found(releases: dict[str, Release]) -> None:
    text = "About 160 responses; 4.9 stars; week 47."
    report = Guard(releases).check(text)
    assert (report.text, report.language) == (text, "en")
    assert [m.text for m in report.mentions] == ["About 160 responses", "4.9 stars", "47"]
    assert report.matches == ("responses", "mean_rating", None)
    assert [v.rule for v in report.violations] == [OUT] and report.warnings == ()
    assert Guard(releases).check("共157条反馈").language == "zh"


# ----------------------------------------------------------------------------- options
@pytest.mark.parametrize("tolerance", [0.0, 0.5, 3.0, 1e6])
def test_any_finite_tolerance_from_zero_is_accepted(tolerance: float) -> None:
    Guard([], match_tolerance=tolerance)


@pytest.mark.parametrize("tolerance", [-1.0, -1e-9, float("inf"), float("nan"), -float("inf")])
def test_other_tolerances_are_refused(tolerance: float) -> None:
    with pytest.raises(GuardError, match=r"^match_tolerance must be finite and ≥ 0, got "):
        Guard([], match_tolerance=tolerance)


def test_bad_options_and_input_say_what_is_wrong() -> None:
    with pytest.raises(GuardError, match="^unsupported must be 'violation' or 'warning', got 'x'$"):
        Guard([], unsupported="x")
    with pytest.raises(GuardError, match="^language must be 'en', 'zh' or 'auto', got 'fr'$"):
        Guard([]).check("157", language="fr")
    with pytest.raises(GuardError, match="^the guard checks text, got int$"):
        Guard([]).check(157)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("lo", "hi", "text"),
    [
        (1.85, 2.15, "It took 2.2 hours."),  # 2.2 − 0.05 is 2.1500000000000004 in floats
        (2.35, 2.65, "It took 2.3 hours."),  # 2.3 + 0.05 is 2.3499999999999996
        (10000.35, 10000.65, "It took 10000.7 hours."),  # 1.8e-12 over, at 10⁴
        (10001.45, 10001.75, "It took 10001.4 hours."),
    ],
)
def test_a_figure_reaching_exactly_to_the_band_overlaps_it(lo: float, hi: float, text: str) -> None:
    """Float rounding of value ± step/2 does not push a touching figure out of the band."""
    guard = Guard({"m": make_release("m", (lo + hi) / 2, lo, hi, kind="mean", unit="hours")})
    report = guard.check(text)
    assert report.ok and report.matches == ("m",)


# ----------------------------------------------------------------------------- names
def _termed(name: str, value: float, lo: float, hi: float, term: str = "", **kw: object) -> Release:
    terms = (("en", term),) if term else ()
    return Release(
        name=name, values=(value,), intervals=((lo, hi),), mechanism="discrete_laplace",
        noise_scale=1.0, cost=make_release("x", 1, 0, 2).cost, fingerprint=f"fp-{name}",
        seeded=True, terms=terms, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


TOPICS = Guard([_termed("labs", 41.0, 31.0, 51.0, "labs"), _termed("refund", 40.0, 30.0, 50.0, "refund topic")])  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "In 2026-W47 the refund topic came up about 40 times.",  # a constant at the start
        "On 2026-11-20, the refund topic came up about 40 times.",  # ... and further in
    ],
)
def test_a_public_constant_does_not_move_the_names_after_it(text: str) -> None:
    report = TOPICS.check(text)
    assert report.ok and report.matches[-1] == "refund"


def test_a_name_earlier_in_the_sentence_still_names_a_figure_with_a_unit() -> None:
    """'responses' after the figure names that release too; the refund topic holds 40."""
    guard = Guard(
        [
            _termed("refund", 40.0, 30.0, 50.0, "refund topic"),
            _termed("responses", 160.0, 150.0, 170.0, unit="responses"),
        ]
    )
    report = guard.check("As for the refund topic, about 40 responses.")
    assert report.ok and report.matches == ("refund",)


def test_a_figure_broken_across_lines_takes_the_language_of_its_first_line(
    releases: dict[str, Release],
) -> None:
    report = Guard(releases).check("好评率62.4\n% of users liked it")
    [v] = report.violations
    assert (v.mention, v.rule) == ("62.4\n%", OP)
    assert v.message.startswith("“62.4\n%”比positive_share的误差范围允许的更精确")
    [w] = Guard(releases).check("共157\nresponses came in.").violations
    assert w.allowed == "约160 responses"


@pytest.mark.parametrize(
    ("lo", "hi", "text"),
    [
        (0.5, 123456789.35, "The total was 123456789.4."),  # 1.5e-8 over the top in floats
        (-123456789.85, -0.5, "The change was -123456789.9."),  # ... under the bottom
    ],
)
def test_the_rounding_allowance_scales_with_either_edge(lo: float, hi: float, text: str) -> None:
    """Far from 0 a float's rounding grows: the far edge's size sets the allowance."""
    guard = Guard({"m": make_release("m", (lo + hi) / 2, lo, hi, kind="sum")})
    assert [v.rule for v in guard.check(text).violations] == [OP]  # too fine, not outside
