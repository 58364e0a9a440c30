"""More categories of the guard's evaluation set: wordings read since the set was first fixed.

Mixed fractions ("four and a third stars"), digits read out one by one
("one-five-seven", "一五七"), fraction words before a verb ("a third were
positive") and dates in Chinese numerals ("二〇二六年十一月十六日至二十二日，").
Each comes in compliant and violating versions, labelled from the release specs
(never from the guard). :func:`extra_cases` is appended to
:func:`dpllm.guard.evalset.build_cases` with its own random generator, so the
earlier cases stay exactly as they were.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from dpllm.guard.evaldata import DOMAINS, Spec, topic_specs
from dpllm.guard.evalset import (
    _compliant_values,
    _en_int,
    _fraction_variants,
    _g,
    _outside,
    _over_precise,
    _plain,
    _sentence,
)
from dpllm.rounding import is_as_coarse_as

__all__ = ["extra_cases"]

Add = Callable[[str, str, str, str, bool, str], None]
"""add(category, domain, lang, text, violating, release)."""

_MEAN_KINDS = ("mean", "median", "average")
# (numerator, denominator, English words)
_PARTS = ((1, 2, "a half"), (1, 3, "a third"), (2, 3, "two thirds"), (1, 4, "a quarter"),
          (3, 4, "three quarters"))  # fmt: skip
_DIGIT_WORDS = "zero one two three four five six seven eight nine".split()
_ZH_DIGITS = "〇一二三四五六七八九"
_DEN_WORDS = {2: ("half", "halves"), 3: ("third", "thirds"), 4: ("quarter", "quarters"),
              5: ("fifth", "fifths"), 10: ("tenth", "tenths")}  # fmt: skip
# Fraction words before a verb, per proportion release ("{f}" is the fraction).
_SHARE_FRAMES = {
    "share_positive": (
        "{F} were positive ratings this week.",
        "Of all ratings, {f} were positive.",
    ),
    "share_first_contact": (
        "{F} were resolved at first contact.",
        "Of all tickets, {f} were resolved at first contact.",
    ),
    "crash_rate": ("{F} ended in a crash.", "Of all sessions, {f} ended in a crash."),
    "share_returned": ("{F} were returned.", "Of all orders, {f} were returned."),
}
_ZH_DATES = ("二〇二六年十一月十六日至二十二日，", "十一月十六日到二十二日，", "二〇二六年十一月，")


def _mixed_variants(spec: Spec, others: list[Spec]) -> list[tuple[bool, str, float]]:
    """(violating, words, value) for "w and n/d" near the band: inside, over-precise, outside."""
    g = _g(spec)
    step = 0.1  # a third, a half, a quarter: stated to a tenth (fraction_step / 100)
    near = [s for s in others if s.kind in _MEAN_KINDS and s.unit == spec.unit]
    out: list[tuple[bool, str, float]] = []
    for w in range(max(1, math.floor(spec.lo) - 4), math.ceil(spec.hi) + 5):
        for n, d, words in _PARTS:
            v = w + n / d
            inside = v + step / 2 >= spec.lo and v - step / 2 <= spec.hi
            gap = max(spec.lo - v, v - spec.hi)
            clear = all(v + 1 < s.lo or v - 1 > s.hi for s in near)
            if inside and is_as_coarse_as(step, g):
                label = False
            elif inside:
                label = True  # over-precise: "228 and a half yuan" for a step of 1
            elif gap > max(1.0, spec.hi - spec.lo) and clear:
                label = True
            else:
                continue
            if sum(1 for ok, *_ in out if ok == label) < 2:
                out.append((label, f"{_en_int(w)} and {words}", v))
    return out


def _digit_string(v: float, step: float, lang: str) -> str | None:
    """157 → "one-five-seven" / "一五七", when reading it back gives ``step``."""
    n = round(v)
    if not 100 <= n < 100_000 or abs(n - v) > 1e-9:  # two digits are "two or three"
        return None
    zeros = len(str(n)) - len(str(n).rstrip("0"))
    if 10.0**zeros != step:
        return None  # "one-six-zero" reads as ± 5: only values stated to that step
    if lang == "zh":
        return "".join(_ZH_DIGITS[int(c)] for c in str(n))
    return "-".join(_DIGIT_WORDS[int(c)] for c in str(n))


def _fraction_words(n: int, d: int) -> str | None:
    if d not in _DEN_WORDS:
        return None
    if (n, d) == (1, 2):
        return "half"
    single, plural = _DEN_WORDS[d]
    return f"a {single}" if n == 1 else f"{_DIGIT_WORDS[n]} {plural}"


def extra_cases(seed: int, add: Add) -> None:
    """Append the extra categories' cases through ``add`` (deterministic for ``seed``)."""
    rnd = random.Random(seed + 1)
    for domain, specs in DOMAINS.items():
        all_specs = list(specs) + (list(topic_specs()) if domain == "course" else [])
        for spec in all_specs:
            others = [s for s in all_specs if s is not spec]
            if spec.kind in _MEAN_KINDS:
                for violating, words, _ in _mixed_variants(spec, others):
                    for frame_i in range(3):
                        num = words + spec.en_unit
                        text = _sentence(spec, "en", num, rnd, frame_i)
                        add("en mixed fractions", domain, "en", text, violating, spec.name)
            if spec.kind == "count":
                variants = [(False, v, st) for v, st in _compliant_values(spec)]
                op = _over_precise(spec)
                if op is not None:
                    variants.append((True, *op))
                variants.append((True, *_outside(spec, others)))
                for lang in ("en", "zh"):
                    unit = spec.en_unit if lang == "en" else spec.zh_unit
                    for violating, v, st in variants:
                        spelled = _digit_string(v, st, lang)
                        if spelled is None:
                            continue
                        for frame_i in range(2):
                            text = _sentence(spec, lang, spelled + unit, rnd, frame_i)
                            add("digits one by one", domain, lang, text, violating, spec.name)
            if spec.name in _SHARE_FRAMES:
                for violating, v, _st in _fraction_variants(spec, others):
                    frac = _fraction(v)
                    share = None if frac is None else _fraction_words(*frac)
                    if share is None:
                        continue
                    for frame in _SHARE_FRAMES[spec.name]:
                        text = frame.format(f=share, F=share[:1].upper() + share[1:])
                        add("en fraction words", domain, "en", text, violating, spec.name)
            scale = 100.0 if spec.kind == "proportion" else 1.0
            ok = _compliant_values(spec, scale)[0]
            bad = _outside(spec, others, scale)
            for i, date in enumerate(_ZH_DATES):
                for violating, (v, st) in ((False, ok), (True, bad)):
                    body = _sentence(spec, "zh", _plain(spec, v, st, "zh", rnd), rnd, i)
                    add("zh numeral dates", domain, "zh", date + body, violating, spec.name)


def _fraction(v: float) -> tuple[int, int] | None:
    """(n, d) with 100·n/d == v for the denominators that have words."""
    for d in _DEN_WORDS:
        n = round(v * d / 100)
        if 0 < n < d and math.gcd(n, d) == 1 and abs(100 * n / d - v) < 1e-9:
            return n, d
    return None
