"""The guard's fit cache and blanking: pure helpers checked against what they stand for.

``_fit_key`` is the cache key of ``_fit`` (which releases a figure's form may speak of):
two figures with the same key must fit every target alike, or the cache would answer a
figure with another's fit. ``_blank`` blanks the union of spans and keeps the rest.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from dpllm.guard.extract import NumberMention
from dpllm.guard.rules import _blank, _fit, _fit_key


@dataclass(frozen=True)
class _Target:  # what _fit reads of a Target
    category: str
    scale: float
    unit_key: str
    is_count: bool


MENTIONS = [
    NumberMention(
        span=(0, 1),
        text="x",
        value=(lo + hi) / 2,
        step=0.1,
        lo=lo,
        hi=hi,
        percent=percent,
        decimal=decimal,
        unit_key=unit,
        category=category,
    )  # fmt: skip
    for percent, decimal, unit, (lo, hi), category in itertools.product(
        (False, True),
        (False, True),
        ("", "records", "hours"),
        ((0.0, 0.0), (0.0, 0.5), (0.5, 1.0), (1.0, 1.0), (1.0, 2.0), (-0.5, 0.5), (3.0, 4.0)),
        (None, "rating", "count", "users"),
    )
]
TARGETS = [
    _Target(category, scale, unit, is_count)
    for category, scale, unit, is_count in itertools.product(
        ("proportion", "average", "count"), (1.0, 100.0), ("", "records", "hours"), (False, True)
    )
]


def test_mentions_with_one_cache_key_fit_every_target_alike() -> None:
    by_key: dict[object, NumberMention] = {}
    for m in MENTIONS:
        first = by_key.setdefault(_fit_key(m), m)
        for t in TARGETS:
            assert _fit(m, t) == _fit(first, t), (m, first, t)  # type: ignore[arg-type]


def test_the_key_tells_apart_what_the_fit_tells_apart() -> None:
    """A decimal share at either end of [0, 1], and a rating, each change the fit."""
    share = _Target("proportion", 100.0, "", False)
    count = _Target("count", 1.0, "", True)
    base = MENTIONS[0]
    edge_low = NumberMention(span=(0, 1), text="0", value=0.0, step=0.1, lo=0.0, hi=0.5,
                             decimal=True)  # fmt: skip
    edge_high = NumberMention(span=(0, 1), text="1", value=1.0, step=0.1, lo=0.5, hi=1.0,
                              decimal=True)  # fmt: skip
    above = NumberMention(span=(0, 1), text="1.5", value=1.5, step=0.1, lo=1.0, hi=2.0,
                          decimal=True)  # fmt: skip
    rating = NumberMention(span=(0, 1), text="4", value=4.0, step=1.0, lo=4.0, hi=4.0,
                           category="rating")  # fmt: skip
    plain = NumberMention(span=(0, 1), text="4", value=4.0, step=1.0, lo=4.0, hi=4.0)
    assert _fit(edge_low, share) == _fit(edge_high, share) == 0  # type: ignore[arg-type]
    assert _fit(above, share) is None and _fit(base, share) is None  # type: ignore[arg-type]
    assert _fit_key(edge_low) != _fit_key(base) and _fit_key(edge_high) != _fit_key(base)
    assert _fit_key(above) != _fit_key(edge_low)
    assert _fit(rating, count) is None and _fit(plain, count) is not None  # type: ignore[arg-type]
    assert _fit_key(rating) != _fit_key(plain)


@pytest.mark.parametrize(
    ("text", "spans", "expected"),
    [
        ("abcdef", [], "abcdef"),
        ("abcdef", [(1, 2)], "a cdef"),
        ("abcdef", [(0, 2)], "  cdef"),
        ("abcdef", [(1, 3), (2, 4)], "a   ef"),
        ("abcdefghij", [(0, 5), (1, 2), (7, 8)], "     fg ij"),  # a span inside another
        ("abcdef", [(4, 6), (1, 2)], "a cd  "),  # any order
    ],
)
def test_blank_replaces_the_union_of_spans_and_keeps_the_rest(
    text: str, spans: list[tuple[int, int]], expected: str
) -> None:
    out = _blank(text, spans)
    assert out == expected and len(out) == len(text)
