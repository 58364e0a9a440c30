"""Precision, recall and F1 per entity of a :class:`Redactor` on a labelled JSONL corpus.

A prediction counts as a true positive when it overlaps a gold span of the same entity that
no earlier prediction claimed; decoys (order numbers, prices, dates …) are counted separately:
any prediction overlapping one is a decoy hit.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dpllm.errors import RedactionError
from dpllm.redact.engine import Span

__all__ = ["EntityScore", "EvalReport", "evaluate", "load_corpus"]

#: Structured entities held to the issue's targets (recall ≥ 0.99, precision ≥ 0.97).
STRUCTURED = ("PHONE_NUMBER", "CN_RESIDENT_ID", "EMAIL_ADDRESS", "CN_BANK_CARD", "CREDIT_CARD")


class _Analyzer(Protocol):
    def analyze(
        self, text: str, *, language: str = ..., allow: Any = ...
    ) -> tuple[tuple[Span, ...], str]: ...


@dataclass(frozen=True)
class EntityScore:
    """Counts and scores for one entity type."""

    entity: str
    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float:
        """TP / (TP + FP); 1.0 when nothing was predicted."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        """TP / (TP + FN); 1.0 when there was nothing to find."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        """Harmonic mean of precision and recall."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass(frozen=True)
class EvalReport:
    """Per-entity scores, decoy hits by kind, and corpus size."""

    scores: Mapping[str, EntityScore]
    decoy_hits: Mapping[str, int]
    decoys: int
    texts: int

    def table(self) -> str:
        """Render a fixed-width text table (entity, support, P, R, F1) plus decoy hits."""
        lines = [f"{'entity':<16}{'gold':>6}{'pred':>6}{'P':>8}{'R':>8}{'F1':>8}"]
        for name in sorted(self.scores):
            s = self.scores[name]
            lines.append(
                f"{name:<16}{s.tp + s.fn:>6}{s.tp + s.fp:>6}"
                f"{s.precision:>8.3f}{s.recall:>8.3f}{s.f1:>8.3f}"
            )
        hits = sum(self.decoy_hits.values())
        detail = ", ".join(f"{k}={v}" for k, v in sorted(self.decoy_hits.items())) or "none"
        lines.append(f"decoys redacted: {hits} of {self.decoys} ({detail}); texts: {self.texts}")
        return "\n".join(lines)


def load_corpus(path: Path) -> list[dict[str, Any]]:
    """Read a JSONL corpus (``lang``, ``text``, ``spans``, optional ``decoys``, ``allow``).

    Raises:
        RedactionError: When the file is missing or a line is not a valid record.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RedactionError(f"cannot read corpus {path}: {exc}") from exc
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record["text"], str) or not isinstance(record["spans"], list):
                raise TypeError("text must be a string and spans a list")
        except (ValueError, KeyError, TypeError) as exc:
            raise RedactionError(f"{path}:{number}: not a corpus record ({exc})") from exc
        records.append(record)
    return records


def _overlaps(a: Span | Mapping[str, Any], start: int, end: int) -> bool:
    s, e = (a.start, a.end) if isinstance(a, Span) else (a["start"], a["end"])
    return bool(s < end and start < e)


def evaluate(redactor: _Analyzer, records: Iterable[Mapping[str, Any]]) -> EvalReport:
    """Score ``redactor`` on labelled records.

    Args:
        redactor: Anything with the :meth:`Redactor.analyze` signature.
        records: Corpus records (see :func:`load_corpus`); ``allow`` is passed through.

    Returns:
        The :class:`EvalReport`.
    """
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    decoy_hits: Counter[str] = Counter()
    n_decoys = n_texts = 0
    for record in records:
        n_texts += 1
        predicted, _ = redactor.analyze(
            record["text"], language=record.get("lang", "auto"), allow=record.get("allow", ())
        )
        gold = list(record["spans"])
        claimed = [False] * len(gold)
        for p in predicted:
            match = next(
                (
                    i
                    for i, g in enumerate(gold)
                    if not claimed[i]
                    and g["entity"] == p.entity
                    and _overlaps(p, g["start"], g["end"])
                ),
                None,
            )
            if match is None:
                fp[p.entity] += 1
            else:
                claimed[match] = True
                tp[p.entity] += 1
        for g, hit in zip(gold, claimed, strict=True):
            if not hit:
                fn[g["entity"]] += 1
        for decoy in record.get("decoys", ()):
            n_decoys += 1
            if any(_overlaps(p, decoy["start"], decoy["end"]) for p in predicted):
                decoy_hits[decoy["kind"]] += 1
    names = set(tp) | set(fp) | set(fn)
    scores = {n: EntityScore(n, tp[n], fp[n], fn[n]) for n in sorted(names)}
    return EvalReport(scores, dict(decoy_hits), n_decoys, n_texts)
