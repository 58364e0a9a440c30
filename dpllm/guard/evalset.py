"""An adversarial evaluation set for the precision guard, generated from releases and templates.

:func:`build_cases` writes, for four domains (course feedback, customer support,
app usage, a shop), sentences in English and Chinese that state each release's
figure in many wordings (the *categories*: digits, full-width digits, English
number words and decimals, percent words, fractions, dozens, Chinese numerals,
成/折/分之, magnitudes with and without currency, decimals as proportions,
ranges, dates beside figures, a figure naming one release but lying in another
one's band). Every sentence comes in a **compliant** version (the figure as the
release's band allows) and **violating** versions (one more digit than the band
allows, or a value outside the band), so recall and false flags are measured on
the same wording.

:func:`evaluate` runs a guard over the cases and returns the counts per
category; ``dpllm guard eval`` prints them. Everything is deterministic (fixed
seed); the releases are synthetic and marked ``seeded`` (never published).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from dpllm.guard.evaldata import DOMAINS, Spec, domain_releases, topic_specs
from dpllm.release import Release
from dpllm.rounding import granularity, round_to

__all__ = ["Case", "CategoryScore", "build_cases", "domain_releases", "evaluate"]

SEED = 19


@dataclass(frozen=True, slots=True)
class Case:
    """One sentence and whether the guard must refuse it."""

    id: str
    category: str
    domain: str
    lang: str
    text: str
    violating: bool
    release: str


@dataclass(slots=True)
class CategoryScore:
    """Counts of one category: violating cases caught, compliant cases flagged."""

    violating: int = 0
    caught: int = 0
    compliant: int = 0
    flagged: int = 0
    misses: list[str] = field(default_factory=list)
    false_flags: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.caught / self.violating if self.violating else 1.0

    @property
    def false_flag_rate(self) -> float:
        return self.flagged / self.compliant if self.compliant else 0.0


# --------------------------------------------------------------------------- number wording
_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_FULL = str.maketrans("0123456789.%", "０１２３４５６７８９．％")


def _en_int(n: int) -> str:
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _ONES[n % 10])
    for size, word in ((1_000_000, "million"), (1000, "thousand"), (100, "hundred")):
        if n >= size:
            head = f"{_en_int(n // size)} {word}"
            return head if n % size == 0 else f"{head} {_en_int(n % size)}"
    raise AssertionError(n)


def _decimals(step: float) -> int:
    return max(0, -math.floor(math.log10(step) + 1e-9)) if step < 1 else 0


def _en_words(value: float, step: float) -> str:
    d = _decimals(step)
    text = f"{value:.{d}f}"
    whole, _, frac = text.partition(".")
    out = _en_int(int(whole))
    if frac:
        out += " point " + " ".join(_ONES[int(c)] for c in frac)
    return out


_ZH_D = "零一二三四五六七八九"


def _zh_small(n: int) -> str:  # 0 < n < 10000
    out, zero = "", False
    for size, word in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        q, n = divmod(n, size)
        if q:
            if zero:
                out += "零"
            out += _ZH_D[q] + word
            zero = False
        elif out:
            zero = True
    return out


def _zh_int(n: int) -> str:
    if n == 0:
        return "零"
    parts: list[str] = []
    for size, word in ((100_000_000, "亿"), (10_000, "万"), (1, "")):
        q, n = divmod(n, size)
        if q:
            small = _zh_small(q)
            if parts and q < 1000:
                small = "零" + small
            parts.append(small + word)
    text = "".join(parts)
    return text[1:] if text.startswith("一十") else text


def _zh_words(value: float, step: float) -> str:
    d = _decimals(step)
    whole, _, frac = f"{value:.{d}f}".partition(".")
    out = _zh_int(int(whole))
    return out + ("点" + "".join(_ZH_D[int(c)] for c in frac) if frac else "")


def _digits(value: float, step: float, sep: bool = True) -> str:
    d = _decimals(step)
    return f"{value:,.{d}f}" if sep else f"{value:.{d}f}"


# --------------------------------------------------------------------------- values
def _g(spec: Spec, scale: float = 1.0) -> float:
    return granularity((spec.hi - spec.lo) / 2 * scale, integer=spec.kind == "count")


def _compliant_values(spec: Spec, scale: float = 1.0) -> list[tuple[float, float]]:
    """(value, step) pairs a faithful text may state (in the release's scale × ``scale``)."""
    g = _g(spec, scale)
    lo, hi = spec.lo * scale, spec.hi * scale
    out = [(round_to(spec.value * scale, g), g)]
    coarse = round_to(spec.value * scale, g * 10)
    if lo - 5 * g <= coarse <= hi + 5 * g and coarse != 0:
        out.append((coarse, g * 10))
    return out


def _over_precise(spec: Spec, scale: float = 1.0) -> tuple[float, float] | None:
    g = _g(spec, scale)
    fine = g / 10
    if spec.kind == "count" and fine < 1:
        return None
    v = round_to(spec.value * scale, fine)
    if abs(round_to(v, g) - v) < fine / 2:  # the last digit would be 0: nudge it
        v = round_to(v + 3 * fine, fine)
    return v, fine


def _read_step(v: float, step: float) -> float:
    """The precision a reader (and the guard) reads ``v`` to: "200" says ± 50."""
    if step < 1 or v == 0:
        return step
    n, s = round(v), 1.0
    while n % 10 == 0:
        n //= 10
        s *= 10
    return max(s, step)


def _outside(spec: Spec, others: Iterable[Spec], scale: float = 1.0) -> tuple[float, float]:
    """A value at the band's granularity, clearly outside this band and every other one,
    even read with the slack its own rounding allows."""
    g = _g(spec, scale)
    hw = (spec.hi - spec.lo) / 2 * scale
    bands = [(s.lo * scale, s.hi * scale) for s in (spec, *others)]
    for k in (4, -4, 6, -6, 9, -9, 14, -14, 20, 30):
        v = round_to(spec.value * scale + k * max(hw, g), g)
        slack = _read_step(v, g) / 2 + g
        if v > 0 and all(v + slack < lo or v - slack > hi for lo, hi in bands):
            return v, g
    raise AssertionError(spec.name)


# --------------------------------------------------------------------------- sentences
_EN_APPROX = ("about ", "around ", "roughly ", "approximately ", "")
_ZH_APPROX = ("约", "大约", "大概", "")

_EN_BEFORE = (
    "The {label} this week was {num}.",
    "{Label}: {num}.",
    "This week, the {label} came to {num}, within the expected range.",
    "As for the {label}, it stood at {num} over the period.",
)
_EN_AFTER = (
    "We counted {num} {label} this week.",
    "There were {num} {label} in total.",
    "In all, {num} {label} were recorded across the period.",
)
_ZH_BEFORE = (
    "本周{label}为{num}。",
    "{label}：{num}",
    "本期{label}在{num}上下浮动。",
    "从数据看，{label}达到{num}。",
)
_ZH_AFTER = (
    "本周共有{num}{label}。",
    "统计期内记录到{num}{label}。",
)


@dataclass(frozen=True, slots=True)
class _Wording:
    category: str
    langs: tuple[str, ...]
    applies: Callable[[Spec], bool]
    render: Callable[[Spec, float, float, str, random.Random], str | None]
    scale: Callable[[Spec], float] = lambda s: 100.0 if s.kind == "proportion" else 1.0


def _unit(spec: Spec, lang: str) -> str:
    return spec.en_unit if lang == "en" else spec.zh_unit


def _plain(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str:
    if spec.kind == "proportion":
        return _digits(v, step) + ("%" if lang == "zh" or rnd.random() < 0.5 else " percent")
    return _digits(v, step) + _unit(spec, lang)


def _full(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str:
    return _plain(spec, v, step, lang, rnd).translate(_FULL)


def _en_num_words(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str:
    return _en_words(v, step) + _unit(spec, lang)


def _percent_words(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str:
    if lang == "zh":
        return "百分之" + _zh_words(v, step)
    return _en_words(v, step) + rnd.choice((" percent", " per cent"))


def _zh_num(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str:
    return _zh_words(v, step) + _unit(spec, lang)


def _cheng(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str | None:
    tenths, rest = divmod(round(v), 10)
    if step >= 10 and rest == 0 and 0 < tenths < 10:
        return _ZH_D[tenths] + rnd.choice(("成", "折"))
    if step == 1 and rest and 0 < tenths < 10:
        return _ZH_D[tenths] + "成" + _ZH_D[rest]
    return None


def _fenzhi(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str | None:
    frac = _fraction(v, step)
    if frac is None:
        return None
    n, d = frac
    return f"{_zh_int(d)}分之{_zh_int(n)}"


def _fraction(v: float, step: float) -> tuple[int, int] | None:
    """n/d with v ≈ 100·n/d to within step/2, smallest d."""
    for d in (2, 3, 4, 5, 10, 20, 25, 30, 40, 50):
        n = round(v * d / 100)
        if 0 < n < d and math.gcd(n, d) == 1 and abs(100 * n / d - v) <= step / 2:
            if step >= _fraction_step(d):
                return n, d
    return None


def _fraction_step(d: int) -> float:
    return 10.0 ** math.floor(math.log10(100 / d))


def _en_fraction(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str | None:
    frac = _fraction(v, step)
    if frac is None:
        return None
    n, d = frac
    return f"{_en_int(n)} {rnd.choice(('in', 'out of'))} {_en_int(d)}"


def _dozen(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str | None:
    if v % 12 and v != 6:
        return None
    if v == 6:
        return "half a dozen"
    k = int(v // 12)
    return "a dozen" if k == 1 else f"{_en_int(k)} dozen"


def _mag_en(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str | None:
    if v >= 1_000_000:
        m, s = v / 1e6, step / 1e6
        num = _digits(m, s, sep=False)
        word = rnd.choice(("M", " million"))
    elif v >= 10_000:
        m, s = v / 1e3, step / 1e3
        num = _digits(m, s, sep=False)
        word = rnd.choice(("k", "K", " thousand"))
    else:
        return None
    if spec.unit == "yuan":
        return rnd.choice((f"¥{num}{word}", f"{num}{word} yuan", f"RMB {num}{word}"))
    return f"{num}{word}"


def _mag_zh(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str | None:
    if v < 10_000:
        return None
    if v >= 100_000_000 or (v >= 1_000_000 and rnd.random() < 0.2):
        m, s, word = v / 1e8, step / 1e8, "亿"
    else:
        m, s, word = v / 1e4, step / 1e4, "万"
    num = _digits(m, s, sep=False)
    if rnd.random() < 0.3 and s >= 1:
        num = _zh_words(m, s)
    return num + word + _unit(spec, lang)


def _decimal_prop(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str:
    return _digits(v / 100, step / 100)


def _range(spec: Spec, v: float, step: float, lang: str, rnd: random.Random) -> str | None:
    # v is the centre; a band of ± 2 steps (same precision as v)
    lo, hi = v - 2 * step, v + 2 * step
    if lo <= 0:
        return None
    pct = spec.kind == "proportion"
    a, b = _digits(lo, step), _digits(hi, step)
    u = "%" if pct else _unit(spec, lang)
    if lang == "zh":
        return rnd.choice((f"{a}到{b}{u}", f"{a}–{b}{u}", f"{a}至{b}{u}"))
    return rnd.choice((f"{a}–{b}{u}", f"between {a} and {b}{u}", f"{a} to {b}{u}"))


_WORDINGS: tuple[_Wording, ...] = (
    _Wording("digits", ("en", "zh"), lambda s: True, _plain),
    _Wording("full-width digits", ("zh", "en"), lambda s: True, _full),
    _Wording("en number words", ("en",), lambda s: s.kind != "proportion", _en_num_words),
    _Wording("percent words", ("en", "zh"), lambda s: s.kind == "proportion", _percent_words),
    _Wording("en fractions", ("en",), lambda s: s.kind == "proportion", _en_fraction),
    _Wording("dozens", ("en",), lambda s: s.kind == "count" and s.value < 100, _dozen),
    _Wording("zh numerals", ("zh",), lambda s: s.kind != "proportion", _zh_num),
    _Wording("zh 成/折/分之", ("zh",), lambda s: s.kind == "proportion", _cheng),
    _Wording("zh 成/折/分之", ("zh",), lambda s: s.kind == "proportion", _fenzhi),
    _Wording("magnitudes", ("en",), lambda s: s.value >= 10_000, _mag_en),
    _Wording("magnitudes", ("zh",), lambda s: s.value >= 10_000, _mag_zh),
    _Wording("decimal proportions", ("en", "zh"), lambda s: s.kind == "proportion", _decimal_prop),
    _Wording("ranges", ("en", "zh"), lambda s: True, _range),
)


def _sentence(spec: Spec, lang: str, num: str, rnd: random.Random, frame_i: int) -> str:
    labels = spec.en if lang == "en" else spec.zh
    label = labels[frame_i % len(labels)]
    frames: tuple[str, ...]
    if lang == "en":
        frames = _EN_AFTER if spec.noun and frame_i % 2 == 0 else _EN_BEFORE
        approx = _EN_APPROX[frame_i % len(_EN_APPROX)]
    else:
        frames = _ZH_AFTER if spec.noun and frame_i % 2 == 0 else _ZH_BEFORE
        approx = _ZH_APPROX[frame_i % len(_ZH_APPROX)]
    frame = frames[frame_i % len(frames)]
    if num.startswith(("between", "half", "a dozen")) or "到" in num or "至" in num:
        approx = ""
    text = frame.format(label=label, Label=label[:1].upper() + label[1:], num=approx + num)
    return text


_DATES_EN = (
    "From November 16–22, 2026, ",
    "In the week of 16–22 Nov 2026, ",
    "Between 2026-11-16 and 2026-11-22, ",
    "For week 47 (Nov 16 to Nov 22), ",
)
_DATES_ZH = (
    "11 月 16 日—22 日，",
    "2026年11月16日至22日，",
    "第47周（11月16日到22日）",
    "本周（11/16–11/22）",
)


def build_cases(seed: int = SEED) -> list[Case]:
    """The whole evaluation set (deterministic for a given ``seed``)."""
    rnd = random.Random(seed)
    cases: list[Case] = []
    n = 0

    def add(category: str, domain: str, lang: str, text: str, violating: bool, rel: str) -> None:
        nonlocal n
        n += 1
        cases.append(Case(f"{n:05d}", category, domain, lang, text, violating, rel))

    for domain, specs in DOMAINS.items():
        all_specs = specs + (topic_specs() if domain == "course" else ())
        for spec in all_specs:
            others = [s for s in all_specs if s is not spec]
            for w in _WORDINGS:
                if not w.applies(spec):
                    continue
                scale = w.scale(spec)
                variants: list[tuple[bool, float, float]] = [
                    (False, v, st) for v, st in _compliant_values(spec, scale)
                ]
                op = _over_precise(spec, scale)
                if op is not None:
                    variants.append((True, *op))
                variants.append((True, *_outside(spec, others, scale)))
                if w.category == "dozens":
                    variants = _dozen_variants(spec, others)
                if w.category in ("en fractions", "zh 成/折/分之"):
                    variants = _fraction_variants(spec, others)
                for lang in w.langs:
                    for frame_i in range(3):
                        for violating, v, st in variants:
                            num = w.render(spec, v, st, lang, rnd)
                            if num is None:
                                continue
                            text = _sentence(spec, lang, num, rnd, frame_i)
                            add(w.category, domain, lang, text, violating, spec.name)
            # dates as constants beside a figure
            for lang in ("en", "zh"):
                dates = _DATES_EN if lang == "en" else _DATES_ZH
                scale = 100.0 if spec.kind == "proportion" else 1.0
                ok = _compliant_values(spec, scale)[0]
                bad = _outside(spec, others, scale)
                for i, date in enumerate(dates):
                    for violating, (v, st) in ((False, ok), (True, bad)):
                        num = _plain(spec, v, st, lang, rnd)
                        body = _sentence(spec, lang, num, rnd, i)
                        body = body[:1].lower() + body[1:] if lang == "en" else body
                        add("dates", domain, lang, date + body, violating, spec.name)
    # the loophole: a sentence names one topic and states a figure in another topic's band
    topics = topic_specs()
    for spec in topics:
        for other in topics:
            if other is spec:
                continue
            for lang in ("en", "zh"):
                for i in range(2):
                    for violating, v in ((False, round_to(spec.value, 1)), (True, other.value)):
                        label = (spec.en if lang == "en" else spec.zh)[i]
                        if lang == "en":
                            text = f"{label[:1].upper() + label[1:]} was mentioned around {v:.0f} times."
                        else:
                            text = f"{label}被提及约{v:.0f}次。"
                        add(
                            "named release, other's band",
                            "course",
                            lang,
                            text,
                            violating,
                            spec.name,
                        )
    # Wordings read later (mixed fractions, digits one by one …), appended with their own
    # random generator so that the cases above stay as they were.
    from dpllm.guard.evalextra import extra_cases  # (it imports this module's helpers)

    extra_cases(seed, add)
    return cases


def _dozen_variants(spec: Spec, others: list[Spec]) -> list[tuple[bool, float, float]]:
    """Multiples of a dozen (and half a dozen) inside the band, and far outside every band."""
    candidates = [6.0, *(12.0 * k for k in range(1, 9))]
    inside = [c for c in candidates if spec.lo <= c <= spec.hi]
    outside = [
        c
        for c in candidates
        if abs(c - spec.value) < 40
        and all(not (s.lo - 1 <= c <= s.hi + 1) for s in (spec, *others))
    ]
    return [(False, c, 1.0) for c in inside[:1]] + [(True, c, 1.0) for c in outside[:2]]


def _fraction_variants(spec: Spec, others: list[Spec]) -> list[tuple[bool, float, float]]:
    """Compliant and violating fractions (in points) for a proportion."""
    lo, hi = spec.lo * 100, spec.hi * 100
    out: list[tuple[bool, float, float]] = []
    for d in (2, 3, 4, 5, 10, 20, 25, 30, 40, 50):
        for k in range(1, d):
            if math.gcd(k, d) != 1:
                continue
            v, st = 100 * k / d, _fraction_step(d)
            stated = (v - st / 2, v + st / 2)
            inside = stated[1] >= lo and stated[0] <= hi
            far = stated[1] < lo - 3 and stated[0] > -1 or stated[0] > hi + 3
            if st < granularity((hi - lo) / 2):
                continue
            if inside and sum(1 for ok, *_ in out if not ok) < 2:
                out.append((False, v, st))
            elif far and sum(1 for ok, *_ in out if ok) < 2 and abs(v - spec.value * 100) < 40:
                out.append((True, v, st))
    return out


def evaluate(
    cases: Iterable[Case], check: Callable[[str, Mapping[str, Release], str], bool]
) -> dict[str, CategoryScore]:
    """Score ``check(text, releases, lang) → flagged`` per category (and ``"all"``).

    Returns:
        Category → :class:`CategoryScore`, with an ``"all"`` entry and a
        ``"domain: …"`` entry per domain.
    """
    releases = {d: domain_releases(d) for d in DOMAINS}
    scores: dict[str, CategoryScore] = {}
    for case in cases:
        flagged = check(case.text, releases[case.domain], case.lang)
        for key in ("all", case.category, f"domain: {case.domain}"):
            s = scores.setdefault(key, CategoryScore())
            if case.violating:
                s.violating += 1
                s.caught += flagged
                if not flagged:
                    s.misses.append(case.text)
            else:
                s.compliant += 1
                s.flagged += flagged
                if flagged:
                    s.false_flags.append(case.text)
    return scores
