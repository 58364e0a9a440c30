"""Synthetic, seeded releases for previewing a template (``dpllm templates preview``).

Nothing here reads data: the figures are fixed made-up numbers, and every Release is
marked ``seeded=True`` so a render shows ``[SEEDED — NOT FOR PUBLICATION]`` and a
default :class:`~dpllm.templates.PromptEnvironment` refuses them outright.

Privacy: no data is read; nothing is charged.
"""

from __future__ import annotations

from dpllm.release import Cost, Release
from dpllm.templates.declaration import Declaration

__all__ = ["SYNTHETIC_TOPICS", "synthetic_context", "synthetic_release"]

SYNTHETIC_TOPICS = ("workload", "pace", "materials", "assessment")
"""Topic labels of the synthetic ``topic_counts``."""

# name -> (kind, unit, labels, values, interval half-widths)
_WEEKLY: dict[str, tuple[str, str, tuple[str, ...], tuple[float, ...], tuple[float, ...]]] = {
    "feedback_count": ("count", "records", (), (163.4,), (12.6,)),
    "active_users": ("count", "users", (), (48.2,), (6.3,)),
    "mean_rating": ("mean", "stars", (), (4.12,), (0.23,)),
    "rating_histogram": (
        "count",
        "records",
        ("1", "2", "3", "4", "5"),
        (1.7, 9.8, 28.4, 61.2, 60.9),
        (2.5, 5.9, 5.9, 5.9, 5.9),
    ),
    "share_positive": ("proportion", "", (), (0.742,), (0.061,)),
    "share_negative": ("proportion", "", (), (0.071,), (0.038,)),
    "topic_counts": (
        "count",
        "records",
        SYNTHETIC_TOPICS,
        (41.3, 22.8, 3.1, 17.6),
        (7.4, 7.4, 1.5, 7.4),
    ),
}


def synthetic_release(name: str, *, window: str = "2026-W01") -> Release:
    """A seeded, made-up Release named ``name`` (weekly names get plausible shapes).

    Args:
        name: a weekly release name (``mean_rating`` …) or any other name, which
            gets a scalar count.
        window: the window label to stamp on it.

    Returns:
        A Release with ``seeded=True`` and ``mechanism="synthetic"``.

    Privacy: no data is read; the numbers are constants.
    """
    kind, unit, labels, values, halves = _WEEKLY.get(
        name, ("count", "records", (), (57.3,), (8.1,))
    )
    return Release(
        name=name,
        values=values,
        intervals=tuple((v - h, v + h) for v, h in zip(values, halves, strict=True)),
        mechanism="synthetic",
        noise_scale=0.0,
        cost=Cost.zero(),
        fingerprint=f"synthetic:{name}",
        kind=kind,
        unit=unit,
        labels=labels,
        window=window,
        seeded=True,
    )


def synthetic_context(declared: Declaration, *, week: str = "2026-W01") -> dict[str, object]:
    """A render context for ``declared``: synthetic releases and placeholder metadata.

    Every declared release (optional ones too) gets a synthetic Release; required
    metadata gets a placeholder (``week`` a week label, ``course_names`` two made-up
    courses, anything else ``"<name>"``); optional metadata is left out.

    Privacy: no data is read; nothing is charged.
    """
    context: dict[str, object] = {
        n: synthetic_release(n, window=week) for n in declared.release_names
    }
    for name in declared.metadata:
        if name == "week":
            context[name] = week
        elif name == "course_names":
            context[name] = ["Synthetic Course A", "Synthetic Course B"]
        else:
            context[name] = f"<{name}>"
    return context
