"""The granularity rule: how precisely a noisy figure may be stated.

Shared by the template filters (which write figures) and the precision guard
(which checks figures a model wrote), so both apply one rule:

    **A figure may be stated to the largest power of ten not above its
    interval's half-width** (``granularity``), and never finer than 1 for a
    count. A value with interval 150–170 (half-width 10) is "about 160"; a mean
    4.31 ± 0.2 (half-width 0.2 → granularity 0.1) is "4.3"; a count ± 7 is
    stated to the unit (granularity 1).

Everything here is post-processing of released values: free.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

__all__ = [
    "decimals_for",
    "format_interval",
    "format_number",
    "granularity",
    "is_as_coarse_as",
    "outward",
    "round_directed",
    "round_to",
]

# Never state a figure finer than this, whatever its interval (guards against
# an exact, sensitivity-0 release printing 17 significant digits).
MIN_GRANULARITY = 1e-6


def granularity(half_width: float, *, integer: bool = False) -> float:
    """The largest power of ten not above ``half_width``.

    Args:
        half_width: half the width of the release's confidence interval (≥ 0).
        integer: the quantity is a count; the granularity is then at least 1.

    Returns:
        A power of ten (``10**k``). A zero half-width gives 1 for counts and
        ``MIN_GRANULARITY`` otherwise.
    """
    if not math.isfinite(half_width) or half_width < 0:
        raise ValueError(f"half_width must be finite and ≥ 0, got {half_width!r}")
    if half_width <= 0:
        return 1.0 if integer else MIN_GRANULARITY
    # Guard against 10**floor(log10(x)) being off by one for exact powers of ten.
    k = math.floor(math.log10(half_width))
    if 10.0 ** (k + 1) <= half_width * (1 + 1e-12):
        k += 1
    elif 10.0**k > half_width * (1 + 1e-12):
        k -= 1
    g = 10.0**k
    if integer:
        g = max(g, 1.0)
    return max(g, MIN_GRANULARITY)


def decimals_for(step: float) -> int:
    """Number of decimals needed to print multiples of ``step`` (0 for step ≥ 1)."""
    if step >= 1:
        return 0
    return max(0, -math.floor(math.log10(step) + 1e-12))


def round_to(value: float, step: float) -> float:
    """Round ``value`` to a multiple of ``step`` (half-even, in decimal arithmetic)."""
    if step <= 0:
        raise ValueError("step must be > 0")
    q = Decimal(repr(step))
    rounded = (Decimal(repr(value)) / q).quantize(Decimal(1), rounding=ROUND_HALF_EVEN) * q
    result = float(rounded)
    return 0.0 if result == 0 else result


def format_number(value: float, step: float, *, thousands: str = ",") -> str:
    """``value`` rounded to ``step`` and printed with just the needed decimals."""
    rounded = round_to(value, step)
    d = decimals_for(step)
    text = f"{rounded:,.{d}f}" if thousands else f"{rounded:.{d}f}"
    if thousands and thousands != ",":
        text = text.replace(",", thousands)
    return text


def round_directed(value: float, step: float, rounding: str) -> float:
    """``value`` rounded to a multiple of ``step`` in ``rounding``'s direction
    (``decimal.ROUND_FLOOR`` / ``ROUND_CEILING``), exactly, in decimal arithmetic."""
    q = Decimal(repr(step))
    ratio = Decimal(repr(value)) / q
    nearest = ratio.quantize(Decimal(1))
    # A relative tolerance keeps float noise (0.19999999999999973) from moving a
    # bound a whole step outwards.
    if abs(ratio - nearest) <= Decimal("1e-9") * max(Decimal(1), abs(ratio)):
        ratio = nearest
    result = float(ratio.quantize(Decimal(1), rounding=rounding) * q)
    return 0.0 if result == 0 else result


def outward(lo: float, hi: float, step: float) -> tuple[float, float]:
    """``[lo, hi]`` rounded **outwards** to multiples of ``step``: a band printed
    never looks narrower than it is (``[895, 925]`` at step 10 is ``890 – 930``)."""
    if step <= 0:
        raise ValueError("step must be > 0")
    return round_directed(lo, step, ROUND_FLOOR), round_directed(hi, step, ROUND_CEILING)


def format_interval(lo: float, hi: float, step: float, *, sep: str = " – ") -> str:
    """An interval rounded outwards to ``step`` and printed like :func:`format_number`."""
    a, b = outward(lo, hi, step)
    return format_number(a, step) + sep + format_number(b, step)


def is_as_coarse_as(stated_step: float, allowed_step: float) -> bool:
    """True when a figure stated to ``stated_step`` is no finer than ``allowed_step``."""
    return stated_step >= allowed_step * (1 - 1e-9)
