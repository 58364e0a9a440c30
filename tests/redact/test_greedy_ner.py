"""GreedyNer gives exactly spaCy's entities (labels and token spans), on every kind of text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dpllm.errors import RedactionError
from dpllm.redact.greedy_ner import GreedyNer
from dpllm.redact.nlp import DualNlpEngine
from dpllm.redact.prefilter import SEPARATOR

CORPUS = Path(__file__).parents[1] / "data" / "redact_corpus.jsonl"


@pytest.fixture(scope="module")
def nlp() -> Any:
    engine = DualNlpEngine()
    engine.load()
    return engine._nlp


def _spacy(nlp: Any, text: str) -> list[tuple[str, int, int]]:
    return [(e.label_, e.start, e.end) for e in nlp(text).ents]


def _corpus_texts() -> list[str]:
    records = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    texts = [r["text"] for r in records]
    english = " ".join(r["text"] for r in records if r["lang"] == "en")
    return [*texts, english[:2_000], english[:20_000], SEPARATOR.join(texts[:40])]


def test_same_entities_as_spacy_on_the_corpus(nlp: Any) -> None:
    decoder = GreedyNer(nlp.get_pipe("ner"))
    differences = {}
    total = 0
    for text in _corpus_texts():
        expected = _spacy(nlp, text)
        total += len(expected)
        got = decoder(nlp.make_doc(text))
        if got != expected:
            differences[text[:60]] = (got, expected)
    assert differences == {}
    assert total > 1_000  # the comparison covered many entities, not an empty corner


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "Apple is looking at buying U.K. startup for $1 billion, said Tim Cook in San Francisco.",
        "The Eiffel Tower in Paris was built in 1889.\n\nNew  York City  is big.",
        "  Barack Obama met Angela Merkel in Berlin on 3 March 2015 at 10am; 50% agreed.",
        "Ella",  # one token: no B, only U or O
        "Mr. John Ronald Reuel Tolkien wrote The Lord of the Rings in the 1950s.",
        "the first quarter of 2026 saw three hundred new students from Germany and Japan",
    ],
)
def test_same_entities_as_spacy_in_prose(nlp: Any, text: str) -> None:
    assert GreedyNer(nlp.get_pipe("ner"))(nlp.make_doc(text)) == _spacy(nlp, text)


def test_rejects_a_beam_search_ner(nlp: Any) -> None:
    class Beam:
        cfg = {"beam_width": 4}
        model = nlp.get_pipe("ner").model

    with pytest.raises(RedactionError, match="greedy"):
        GreedyNer(Beam())


def test_another_ner_architecture_falls_back_to_spacy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spaCy or model build GreedyNer does not decode: a warning, spaCy's own NER, the
    same names found."""
    import dpllm.redact.nlp as nlp_module

    def refuse(ner: Any) -> GreedyNer:
        raise RedactionError("not this architecture")

    text = "Yesterday Emily Clark met Professor Wang Wei in Boston to discuss the course."
    fast = DualNlpEngine()
    fast.load()
    monkeypatch.setattr(nlp_module, "GreedyNer", refuse)
    slow = DualNlpEngine()
    with pytest.warns(RuntimeWarning, match="spaCy's own"):
        slow.load()
    assert slow._ner is None and fast._ner is not None
    found = [(e.label_, e.start_char, e.end_char) for e in fast.process_text(text, "en").entities]
    assert found and found == [
        (e.label_, e.start_char, e.end_char) for e in slow.process_text(text, "en").entities
    ]


LEFT_CONTEXT_TEXTS = [
    "Call me tomorrow at 10am New Nguyen.",
    "The course was long and the room was cold. Call me tomorrow at 10am New Nguyen, thanks.",
    "We met last Friday at 3pm Ella Palmer and on Monday morning Owen Price, both late.",
]


@pytest.mark.parametrize("text", LEFT_CONTEXT_TEXTS)
def test_a_window_never_lets_its_cut_context_swallow_a_name(text: str) -> None:
    """A window starting inside the text must not open an entity in its left context
    (there the decoder's state is not the full text's: "tomorrow at 10am" opened a TIME
    that ran over "New Nguyen"). The name is found, with GreedyNer and with spaCy's own
    NER (which sees those tokens preset "outside"), as full NER finds it."""
    from dpllm.redact import Redactor

    windowed, full = Redactor(), Redactor(ner_prefilter=False)
    found = 0
    for name in ("New Nguyen", "Ella Palmer", "Owen Price"):
        if name in text and name not in full.redact(text, language="en").text:
            assert name not in windowed.redact(text, language="en").text
            found += 1
    assert found  # each text has a name full NER finds


def test_spacy_fallback_respects_the_same_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpllm.redact.nlp as nlp_module

    fast = DualNlpEngine()
    fast.load()

    def refuse(ner: Any) -> GreedyNer:
        raise RedactionError("not this architecture")

    monkeypatch.setattr(nlp_module, "GreedyNer", refuse)
    slow = DualNlpEngine()
    with pytest.warns(RuntimeWarning):
        slow.load()
    text = " ".join(LEFT_CONTEXT_TEXTS) + " " + " ".join(_corpus_texts()[:60])
    spans = [
        [(e.label_, e.start_char, e.end_char) for e in engine.process_text(text, "en").entities]
        for engine in (fast, slow)
    ]
    assert spans[0] and spans[0] == spans[1]


def test_a_decoder_that_disagrees_with_spacy_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The load-time check: a spaCy/thinc/blis build GreedyNer decodes differently (here,
    a decoder that finds nothing) falls back to spaCy's own NER."""
    monkeypatch.setattr(GreedyNer, "__call__", lambda self, doc, blocked=None: [])
    engine = DualNlpEngine()
    with pytest.warns(RuntimeWarning, match="spaCy's own"):
        engine.load()
    assert engine._ner is None
    assert engine.process_text("Yesterday Emily Clark met the dean.", "en").entities
