"""The English NER pre-filter: which words keep NER, which texts skip it, and no lost names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dpllm.redact.corpus import _EN_FIRST, _EN_LAST
from dpllm.redact.nlp import DualNlpEngine
from dpllm.redact.prefilter import (
    COMMON_FIRST_WORDS,
    CONTEXT_TOKENS,
    CONTEXT_WORDS,
    NAME_LIKE_WORDS,
    TokenWindows,
    candidate_token_windows,
    candidate_words,
    ner_windows,
    sentence_ranges,
    token_windows,
)

CORPUS = Path(__file__).parents[1] / "data" / "redact_corpus.jsonl"


@pytest.fixture(scope="module")
def engine() -> DualNlpEngine:
    engine = DualNlpEngine()
    engine.load()
    return engine


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("John said the homework was too long.", "John"),
        ("The lab was fine. Olivia said so too.", "Olivia"),
        ("Grace said the room was too cold.", "Grace"),  # a name that is also a word
        ("Will is the best teacher I have had.", "Will"),
        ("Mark called twice. Bill never did.", "Bill"),
        ("Mr. Smith called yesterday about the refund.", "Smith"),
        ("Yesterday Dr. Will explained it again.", "Will"),
        ("We thank Prof. Barnes and Mrs. Hayes.", "Hayes"),
        ("Thanks to Grace, Mark, Bill and Rose for the help!", "Rose"),
        ("Attendees:\nHannah\nZoe\nWill", "Will"),
        ("- Grace\n- Mark", "Mark"),
        ("Mary-Jane Watson joined late.", "Mary-Jane"),
        ("Ask for Liam O'Brien at the desk.", "O'Brien"),
        ('"Emily," she said, "call me back."', "Emily"),
        ("(Noah) wrote the report.", "Noah"),
        ("The tutor (Ms. Chen) explained everything clearly.", "Chen"),
        ("Contact: Olivia Turner <olivia.turner@example.com>.", "Olivia"),
        ("the course was run by 王小明 last term.", "王小明"),
        ("We flew to Paris, then to New York.", "Paris"),
        ("Ahmed's feedback: the videos were too long.", "Ahmed's"),
        ("JOHN SMITH WROTE THIS.", "SMITH"),
        ("See you, Leo.", "Leo"),
        ("Émile Zola wrote it.", "Émile"),
    ],
)
def test_keeps_ner_around_possible_names(text: str, name: str) -> None:
    words = [text[a:b] for a, b in candidate_words(text)]
    assert name in words, words
    start = text.index(name)
    assert any(lo <= start and start + len(name) <= hi for lo, hi in ner_windows(text))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "the course was excellent and the homework was easy.",
        "The course was excellent. Everything was clear! Was it hard? No.",
        "Call 18738799269 or write to j.bennett245@edu.example.cn before 2026-10-09.",
        "Please email Wei.Zhang@example.com or see https://example.com/Help/Contact today.",
        "My card 4340135948245928 was charged $12.99 on 2026-05-02 for order DD20268108603709.",
        "I'm happy, I'd rate it 4.2/5 for 2026-W47.",
        "Student ID card: resident ID 53386819900714791X, mobile 17840496640.",
        "Week 2026-W04 had 4431193485 page views. Too much homework this week (2026-W08).",
        "The PDF was broken on Monday and again in October.",
        "Thanks for the help, the TA was great.",
        "yesterday i talked to mia about the quiz.",  # lower-cased: NER would not name it either
    ],
)
def test_skips_ner_without_candidates(text: str) -> None:
    assert ner_windows(text) == []


def test_sentences_do_not_break_after_titles_or_initials() -> None:
    text = "Dr. Will met J. Smith. Then he left!\nNext line"
    assert [text[a:b] for a, b in sentence_ranges(text)] == [
        "Dr. Will met J. Smith.",
        "Then he left!",
        "Next line",
    ]


def test_common_first_words_are_never_names() -> None:
    names = {w.lower() for w in (*_EN_FIRST, *_EN_LAST)}
    assert not COMMON_FIRST_WORDS & (NAME_LIKE_WORDS | names)


def test_windows_cover_the_models_receptive_field(engine: DualNlpEngine) -> None:
    # A window of CONTEXT_WORDS words is at least that many tokens; NER embeds each token
    # from a CNN over `depth * window_size` tokens either side. A new model must fit.
    config = engine._nlp.config["components"]["ner"]["model"]["tok2vec"]["encode"]
    assert config["depth"] * config["window_size"] <= CONTEXT_TOKENS <= CONTEXT_WORDS


def test_token_windows_keep_the_receptive_field_and_merge() -> None:
    text = "Call 198-6755-3365 or ask Ella Palmer today, the room was cold and Owen was late."
    words = text.split(" ")
    token_starts = [m.start() for m in re.finditer(r"\S+", text)]  # a token per word here
    windows = candidate_token_windows(text, token_starts, context=2)
    # Call (first word: skipped), Ella Palmer -> tokens 4..5, Owen -> token 12
    assert windows == TokenWindows(starts=(2, 10), ends=(8, 15))
    assert candidate_token_windows(text, token_starts, context=4) == TokenWindows(
        starts=(0,), ends=(len(words),)
    )
    assert candidate_token_windows("no names here.", [0, 3, 9, 13]) == TokenWindows((), ())


def test_windows_merge_and_map_back_exactly() -> None:
    filler = "the course was long and the room was cold and the slides were late. " * 3
    text = filler + "Ask Emily Carter today. " + filler + "Thanks, Owen."
    windows = ner_windows(text)
    assert len(windows) == 2
    assert all(text[lo] != " " and text[hi - 1] != " " for lo, hi in windows)
    assert "Ask Emily Carter today." in text[windows[0][0] : windows[0][1]]


def test_token_windows_map_joined_tokens_to_the_full_doc() -> None:
    windows = TokenWindows(starts=(2, 10), ends=(5, 12))
    joined = windows.joined_starts()
    assert joined == [0, 4]  # 3 tokens, a separator, then the second window
    assert windows.to_full(0, 3, joined) == (2, 5)
    assert windows.to_full(4, 6, joined) == (10, 12)
    assert windows.to_full(2, 5, joined) is None  # across the separator
    assert token_windows([(3, 9), (20, 25)], [0, 3, 6, 10, 20, 24]) == TokenWindows(
        starts=(1, 4), ends=(3, 6)
    )


def _names(engine: DualNlpEngine, text: str, *, prefilter: bool) -> set[tuple[str, int, int]]:
    engine.ner_prefilter = prefilter
    try:
        entities = engine.process_text(text, "en").entities
    finally:
        engine.ner_prefilter = True
    return {(e.label_, e.start_char, e.end_char) for e in entities}


def _english_texts() -> list[str]:
    records = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    texts = [r["text"] for r in records if r["lang"] == "en"]
    # The benchmark's long texts: sentences next to each other, names near skipped ones.
    joined = " ".join(texts)
    return [*texts, joined[:2_000], joined[:20_000]]


def test_filtered_ner_finds_the_same_names_on_the_corpus(engine: DualNlpEngine) -> None:
    differences = {}
    for text in _english_texts():
        full = _names(engine, text, prefilter=False)
        filtered = _names(engine, text, prefilter=True)
        if full != filtered:
            differences[text[:60]] = (full - filtered, filtered - full)
    assert differences == {}


@pytest.mark.parametrize(
    "text",
    [
        "Hi, I'm Ella Palmer. " + "The homework was long and the room was cold. " * 8,
        "The homework was long. " * 5 + "Dr. Will Turner will teach it. " + "It was fine. " * 5,
        "We thank Prof. Isaac Barnes, Dr. Ruby Walsh, and Mrs. Ella Hayes. The end.",
        "Last week the lecture was cancelled. Lily Collins moved it to Thursday in London.",
    ],
)
def test_filtered_ner_finds_the_same_names_in_prose(engine: DualNlpEngine, text: str) -> None:
    assert _names(engine, text, prefilter=True) == _names(engine, text, prefilter=False)


def test_windows_find_every_person_full_ner_finds_in_generated_prose() -> None:
    """Names after times, titles, dates and week labels, one to four sentences a text: every
    PERSON span full NER finds is covered by the windowed NER's spans."""
    import random

    full, windowed = DualNlpEngine(ner_prefilter=False), DualNlpEngine()
    full.load()
    windowed.load()
    rng = random.Random(7)
    first = ["Emily", "New", "Ella", "Owen", "Mary", "Wang", "Grace", "Will", "Ahmed", "Sofia"]
    last = ["Clark", "Nguyen", "Palmer", "Price", "Johnson", "Wei", "Hayes", "Garcia", "Smith"]
    before = ["Call me tomorrow at 10am", "We met last Friday at 3pm", "Thanks to",
              "In the 2026-W47 session,", "Yesterday at noon", "According to Dr.",
              "After the exam on 12 March,", "The room was cold and"]  # fmt: skip
    after = ["was late.", "asked about homework.", "will send the notes.", "in London."]
    checked = 0
    for _ in range(120):
        text = " ".join(
            f"{rng.choice(before)} {rng.choice(first)} {rng.choice(last)} {rng.choice(after)}"
            for _ in range(rng.randint(1, 4))
        )
        found = [(e.start_char, e.end_char) for e in windowed.process_text(text, "en").entities]
        for e in full.process_text(text, "en").entities:
            if e.label_ == "PERSON":
                checked += 1
                assert any(s <= e.start_char and e.end_char <= t for s, t in found), text
    assert checked > 200
