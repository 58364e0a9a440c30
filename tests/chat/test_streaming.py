"""The hold-back buffer: safe cuts, fail-closed discard, and no span ever split."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpllm.chat.streaming import HoldBack, blind_tokens, safe_cut

SPANS = ["138 1234 5678", "a.b@example.org", "<PERSON_3f2a9c1b0d>", "4.37", "+86 10 1234 5678"]


@pytest.mark.parametrize(
    "text,cut",
    [
        ("short.", 0),
        ("A whole first sentence that is long enough. And more", 44),
        (
            "数据显示本周的反馈数量明显增加了很多很多很多很多很多很多很多很多很多很多很多很多很多。然后",
            43,
        ),
        ("The mean was 4.37 and it kept going on and on without a full stop", 0),
    ],
)
def test_safe_cut(text: str, cut: int) -> None:
    assert safe_cut(text, min_release=10) == cut


def test_long_run_cut_never_inside_a_phone_number() -> None:
    text = "word " * 20 + "call 138 1234 5678 now"
    i = safe_cut(text, min_release=10, max_hold=50)
    assert 0 < i and "138 1234 5678" not in text[:i] and text[:i].endswith("word ")


def test_discard_drops_held_text() -> None:
    seen: list[str] = []
    hb = HoldBack(lambda s: seen.append(s) or s.upper(), min_release=5)
    assert hb.feed("Hello there. Secret 138") == "HELLO THERE. "
    assert hb.held == len("Secret 138")
    assert hb.discard() == len("Secret 138")
    assert seen == ["Hello there. "]
    with pytest.raises(ValueError):
        hb.feed("more")


def test_blind_tokens_keeps_offsets() -> None:
    text = "Ask <PERSON_3f2a9c1b0d> about 160"
    blind = blind_tokens(text)
    assert len(blind) == len(text) and blind.endswith("160") and "3f2a" not in blind


words = st.sampled_from(
    ["the", "mean", "was", "good.", "call", "ok!", "。", "\n", "看", "rating", *SPANS]
)


@given(st.lists(words, min_size=1, max_size=60), st.lists(st.integers(1, 9), min_size=1))
def test_any_chunking_releases_everything_once_and_never_splits_a_span(
    parts: list[str], sizes: list[int]
) -> None:
    text = " ".join(parts)
    segments: list[str] = []
    hb = HoldBack(lambda s: segments.append(s) or s, min_release=8, max_hold=40)
    out, i, k = [], 0, 0
    while i < len(text):
        n = sizes[k % len(sizes)]
        out.append(hb.feed(text[i : i + n]))
        i, k = i + n, k + 1
    out.append(hb.flush())
    assert "".join(out) == text
    for span in SPANS:
        for m in re.finditer(re.escape(span), text):
            pos = 0
            for seg in segments:
                assert not (pos < m.start() < pos + len(seg) < m.end())
                pos += len(seg)
