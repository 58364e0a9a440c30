"""Hand-made releases for tests and examples: always marked ``seeded`` (never publish)."""

from __future__ import annotations

from dpllm.release import Cost, Release

__all__ = ["fake_release"]


def fake_release(
    name: str,
    value: float,
    lo: float,
    hi: float,
    *,
    kind: str = "count",
    unit: str = "",
    window: str | None = "2026-W47",
) -> Release:
    """A scalar release with the given value and interval, flagged as not for publication.

    It was never computed from data and costs nothing real; the ε shown (0.5) is
    only there so code that prints costs has one to print.
    """
    return Release(
        name=name,
        values=(value,),
        intervals=((lo, hi),),
        mechanism="discrete_laplace",
        noise_scale=4.0,
        cost=Cost.pure(0.5),
        fingerprint=f"fp-{name}",
        kind=kind,
        unit=unit,
        window=window,
        seeded=True,
    )
