"""The NLP engine's context enhancer scores exactly as Presidio's lemma enhancer does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from presidio_analyzer import AnalyzerEngine
from presidio_analyzer.context_aware_enhancers import LemmaContextAwareEnhancer

from dpllm.redact import Redactor

CORPUS = Path(__file__).parents[1] / "data" / "redact_corpus.jsonl"


def test_fast_context_enhancer_equals_presidios(redactor: Redactor) -> None:
    ours = redactor._analyzer
    reference = AnalyzerEngine(
        registry=ours.registry,
        nlp_engine=ours.nlp_engine,
        supported_languages=["en", "zh"],
        context_aware_enhancer=LemmaContextAwareEnhancer(
            context_prefix_count=5, context_suffix_count=2
        ),
    )
    records = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    enhanced = 0
    for record in records:
        text, lang = record["text"], record["lang"]
        got = ours.analyze(text=text, language=lang, return_decision_process=True)
        expected = reference.analyze(text=text, language=lang, return_decision_process=True)

        def key(results: list[Any]) -> list[tuple[Any, ...]]:
            return sorted(
                (
                    r.entity_type,
                    r.start,
                    r.end,
                    r.score,
                    r.analysis_explanation.supportive_context_word,
                )
                for r in results
            )

        assert key(got) == key(expected), text
        enhanced += sum(bool(r.analysis_explanation.supportive_context_word) for r in got)
    assert enhanced > 100  # context words did raise scores in the comparison
