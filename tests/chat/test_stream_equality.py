"""A streamed answer, concatenated, equals the non-streamed redaction of the same answer.

Real Presidio redactor; texts hold names (Latin and Chinese) and numbers at every
offset relative to the unit boundaries; deltas of 1…64 characters. The hold-back
releases whole redaction units only, and each unit is redacted on its own, so the
two paths must agree character for character.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpllm.chat.protection import CallState, Protection
from dpllm.chat.streaming import HoldBack, split_units, unit_end
from dpllm.redact import Redactor

LATIN_NAMES = ["Emily Clark", "John Smith", "Ludwig van Beethoven", "Maria de la Cruz"]
ZH_NAMES = ["张伟", "王小明", "欧阳娜娜"]
NUMBERS = ["13812345678", "138 1234 5678", "4.37", "2,000", "a.b@example.org"]
FILLER = ["the", "course", "was", "Good", "Week", "rating", "and", "很好", "课程", "老师"]
SEPARATORS = [" ", " ", " ", ". ", "\n", "。", "，", ", "]


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


def _state(redactor: Redactor, min_release: int, max_hold: int) -> CallState:
    protection = Protection(
        redactor=redactor, policy="redact", min_release=min_release, max_hold=max_hold
    )
    return protection.begin([{"role": "user", "content": "hi"}])


def _stream(state: CallState, text: str, sizes: list[int]) -> str:
    hb = HoldBack(state.finish, min_release=state.p.min_release, max_hold=state.p.max_hold)
    out, i, k = [], 0, 0
    while i < len(text):
        n = sizes[k % len(sizes)]
        out.append(hb.feed(text[i : i + n]))
        i, k = i + n, k + 1
    out.append(hb.flush())
    return "".join(out)


pieces = st.lists(
    st.tuples(
        st.sampled_from(FILLER + LATIN_NAMES + ZH_NAMES + NUMBERS),
        st.sampled_from(SEPARATORS),
    ),
    min_size=1,
    max_size=160,
)


@pytest.mark.parametrize(("min_release", "max_hold"), [(160, 480), (12, 40)])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=pieces, sizes=st.lists(st.integers(1, 64), min_size=1, max_size=8))
def test_streamed_text_equals_the_non_streamed_redaction(
    redactor: Redactor,
    min_release: int,
    max_hold: int,
    parts: list[tuple[str, str]],
    sizes: list[int],
) -> None:
    state = _state(redactor, min_release, max_hold)
    text = "".join(word + sep for word, sep in parts)
    assert _stream(state, text, sizes) == state.finish(text)


def test_a_name_past_the_hold_limit_is_not_split(redactor: Redactor) -> None:
    """The issue's case: > 480 characters without a sentence end, a name at the limit."""
    state = _state(redactor, 160, 480)
    for pad in range(440, 500, 3):
        text = ("we would like to thank " * 30)[:pad] + " Emily Clark for the help today"
        streamed = _stream(state, text, [7])
        assert streamed == state.finish(text)
        assert "Emily" not in streamed and "Clark" not in streamed


@pytest.mark.parametrize("span", [*LATIN_NAMES, "138 1234 5678", "+86 10 1234 5678"])
def test_no_unit_boundary_falls_inside_a_name_or_number(span: str) -> None:
    filler = "we kept going on about the course and the week without any full stop "
    for pad in range(0, 90):
        text = (filler * 3)[:pad] + " " + span + " " + filler * 2
        units = split_units(text, min_unit=10, max_unit=40)
        assert "".join(units) == text
        cuts = set()
        at = 0
        for unit in units:
            at += len(unit)
            cuts.add(at)
        for m in re.finditer(re.escape(span), text):
            assert not any(m.start() < c < m.end() for c in cuts), (pad, units)


def test_unit_end_waits_for_a_closed_sentence_end() -> None:
    text = "x" * 200 + ". "
    assert unit_end(text, min_unit=160, max_unit=480) is None  # more spaces may follow
    assert unit_end(text + "Next", min_unit=160, max_unit=480) == len(text)
    assert unit_end(text, min_unit=160, max_unit=480, final=True) == len(text)


def test_unbroken_run_is_cut_at_a_hard_bound() -> None:
    text = "字" * 5000
    units = split_units(text, min_unit=10, max_unit=40)
    assert "".join(units) == text and max(len(u) for u in units) == 320
