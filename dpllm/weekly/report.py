"""Writing a :class:`~dpllm.weekly.WeeklyReport`: ``report.md`` and ``report.json``.

Everything written here comes from releases (noisy, interval-carrying values) and
from texts that passed the redactor and the precision guard. Figures in the
Markdown table are stated to the granularity their interval supports (the rule of
:mod:`dpllm.rounding`); the JSON keeps the releases whole, as the ledger stores
them (they are the published DP values). No raw model text, no data row and no
exact aggregate reaches either file.

Files are written atomically (a temporary file, then a rename), so a reader never
sees half a report and a rerun replaces the previous one.

Privacy: formatting releases is post-processing: free.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dpllm.chat.generate import Attempt
from dpllm.release import RELEASES_SCHEMA, Release
from dpllm.rounding import format_interval, format_number, granularity, outward
from dpllm.weekly.job import WeeklyReport

__all__ = [
    "REPORT_JSON",
    "REPORT_MD",
    "describe_source",
    "estimand_lines",
    "figure_rows",
    "guard_summary",
    "text_source",
    "render_markdown",
    "report_dict",
    "write_atomic",
    "write_report",
]

REPORT_MD = "report.md"
REPORT_JSON = "report.json"

_TITLE = {"en": "Weekly feedback summary", "zh": "每周反馈总结"}
_HEAD = {
    "en": ("Figures", "Privacy budget", "How this report was made"),
    "zh": ("数据", "隐私预算", "报告是如何生成的"),
}


def _estimate(part: Release) -> tuple[str, str]:
    """A scalar release as (estimate, interval) text at the precision it supports."""
    lo, hi = part.interval
    if part.small:
        return f"< {part.small_threshold:g}", "suppressed (small)"
    if part.kind == "proportion":
        step = granularity((hi - lo) * 50.0)
        a, b = outward(lo * 100.0, hi * 100.0, step)
        pct = [format_number(x, step) for x in (part.value * 100.0, max(a, 0.0), min(b, 100.0))]
        return f"{pct[0]}%", f"{pct[1]}% – {pct[2]}%"
    step = granularity((hi - lo) / 2.0, integer=part.kind == "count")
    return format_number(part.value, step), format_interval(lo, hi, step)  # outwards


def figure_rows(report: WeeklyReport) -> list[tuple[str, str, str, str, str]]:
    """Rows of the figures table: (figure, estimate, interval, mechanism, cost)."""
    rows: list[tuple[str, str, str, str, str]] = []
    items: list[tuple[str, Release, bool]] = [(n, r, False) for n, r in report.releases.items()]
    items += [(n, r, True) for n, r in report.derived.items()]
    for name, rel, free in items:
        if free:
            cost = "free (post-processing)"
        else:
            note = (
                ""
                if name in report.fresh
                else " (paid earlier: taken over, not charged again)"
                if name in report.resumed
                else " (cached: not charged)"
            )
            cost = rel.cost.describe() + (f", δ = {rel.delta:g}" if rel.delta else "") + note
        parts: Iterator[tuple[str, Release]] = (
            rel.components() if rel.is_vector else iter([("", rel)])
        )
        for label, part in parts:
            estimate, interval = _estimate(part)
            figure = f"{name}[{label}]" if label else name
            rows.append((figure, estimate, interval, rel.mechanism, cost))
    return rows


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + "|".join("---" for _ in header) + "|", *map(line, rows)]


def text_source(report: WeeklyReport) -> str:
    """Where the final text came from: ``"model"``, ``"fallback"`` or ``"offline"``.

    The offline writer is a model client to the generation loop, so its text is
    ``"model"`` there; a reader wants to know that no language model wrote it.
    """
    return "offline" if report.model == "offline" else report.generation.source


def describe_source(report: WeeklyReport) -> str:
    """``text_source`` in words, for the report and the command line."""
    source = text_source(report)
    if source == "offline":
        return "the template's deterministic text (offline writer, no language model)"
    if source == "fallback":
        why = "the model failed" if report.model_error else "no answer passed the guard"
        return f"the template's fallback text ({why})"
    return f"the model ({report.model})"


def guard_summary(report: WeeklyReport) -> str:
    """The guard's work in one phrase: violations fixed, or found before the fallback."""
    found = sum(len(a.violations) for a in report.generation.attempts)
    if text_source(report) == "model":
        return f"{found} guard violation(s) fixed"
    return (
        f"{found} guard violation(s) found in the model's answers"
        if found
        else "no guard violation"
    )


def _without_title(text: str, title: str) -> str:
    """The text without a first line that repeats the report's title (the fallback's does)."""
    first, _, rest = text.strip().partition("\n")
    if first.lstrip("# ").strip().casefold().startswith(title.casefold()):
        return rest.strip()
    return text.strip()


def estimand_lines(report: WeeklyReport) -> list[str]:
    """What each figure estimates, in words (the bounded statistic, not the raw one)."""
    items = [*report.releases.items(), *report.derived.items()]
    named = [(name, rel.estimand) for name, rel in items if rel.estimand]
    if not named:
        return []
    return [
        "",
        "What each figure estimates: the statistic *after* the per-user bounds that make "
        "the noise finite. When some users exceed a bound, the figure is below the raw "
        "one (a bias, not noise), and the interval covers the bounded statistic.",
        "",
        *(f"- {name}: {text}" for name, text in named),
    ]


def render_markdown(report: WeeklyReport) -> str:
    """``report.md``: the summary, the figures with intervals and costs, the budget."""
    lang = report.lang if report.lang in _TITLE else "en"
    figures, budget, how = _HEAD[lang]
    level = f"{next(iter(report.releases.values())).confidence:.0%}" if report.releases else ""
    title = f"{_TITLE[lang]} — {report.week}"
    out = [f"# {title}", "", _without_title(report.text, _TITLE[lang]), "", f"## {figures}", ""]
    out += _table(
        ("figure", "estimate", f"{level} interval", "mechanism", "privacy cost"),
        figure_rows(report),
    )
    out += [
        "",
        "Privacy unit: one user (all of a user's records in the week). Figures are noisy "
        "estimates; each is stated only as precisely as its interval allows.",
        *estimand_lines(report),
        "",
        f"## {budget}",
        "",
    ]
    out += _table(
        ("pool", "window", "spent", "window cap", "remaining", "lifetime spent / cap",
         "δ spent / cap", "δ remaining", "δ lifetime spent / cap"),
        [
            (
                b.pool,
                b.window,
                f"{b.symbol} {b.spent:g}",
                f"{b.symbol} {b.window_cap:g}",
                f"{b.symbol} {b.remaining:g}",
                f"{b.symbol} {b.lifetime_spent:g} / "
                + ("∞" if b.lifetime_cap is None else f"{b.lifetime_cap:g}"),
                f"δ {b.delta_spent:g} / {b.delta_window_cap:g}",
                f"δ {b.delta_remaining:g}",
                f"δ {b.delta_lifetime_spent:g} / "
                + ("∞" if b.delta_lifetime_cap is None else f"{b.delta_lifetime_cap:g}"),
            )
            for b in report.budget
        ],
    )  # fmt: skip
    out += [
        "",
        "δ is the small chance that a release reveals more than its ε: it is charged "
        "only by approximate-DP releases and capped per window and over the lifetime.",
    ]
    if report.fresh:
        out += ["", f"This run charged {report.spent.describe()} ({len(report.fresh)} releases)."]
    elif report.resumed:
        out += [
            "",
            "This run charged nothing new: it released on charges paid before it (an interrupted run's or an approval's).",
        ]
    else:
        out += ["", "This run spent nothing: every release came from the ledger's cache."]
    gen = report.generation
    counts = ", ".join(f"{k} × {v}" for k, v in sorted(gen.redaction_counts.items())) or "none"
    fixes = sum(len(a.violations) for a in gen.attempts)
    out += [
        "",
        f"## {how}",
        "",
        f"- Writer: {report.model} ({gen.model_calls} call(s)); final text from "
        f"{describe_source(report)}.",
        f"- Precision guard: {fixes} violation(s) found and sent back for rewriting"
        + ("." if text_source(report) == "model" or not fixes else "; the fallback text was used."),
        f"- Redaction: {counts}.",
    ]
    if report.model_error:
        out.append(f"- Model error: {report.model_error} (the fallback text was used).")
    return "\n".join(out) + "\n"


def _attempt(a: Attempt) -> dict[str, Any]:
    def violation(v: Any) -> dict[str, Any]:
        return {
            "rule": str(v.rule),
            "release": v.release,
            "mention": v.mention,
            "allowed": v.allowed,
            "allowed_range": v.allowed_range,
            "message": v.message,
            "span": list(v.span),
        }

    return {
        "number": a.number,
        "source": a.source,
        "text": a.text,
        "violations": [violation(v) for v in a.violations],
        "warnings": [violation(v) for v in a.warnings],
        "redaction_counts": dict(a.redaction_counts),
        "usage": {
            "prompt_tokens": a.usage.prompt_tokens,
            "completion_tokens": a.usage.completion_tokens,
        },
        "latency_s": a.latency_s,
        "model": a.model,
        "error": a.error,
    }


def report_dict(report: WeeklyReport, *, charts: Sequence[str] = ()) -> dict[str, Any]:
    """``report.json`` as a dict: releases, costs, budget, attempts, redaction.

    No timings: how long the statistics took depends on the raw data (how many
    records, how long their texts), unnoised, so it is not published.
    ``WeeklyReport.timings`` keeps them for the operator, in memory.

    .. versionchanged:: unreleased ``timings`` left out.
    """
    gen = report.generation
    return {
        # The releases part is a releases document (dpllm.releases/1), the format
        # ``dpllm stats --json`` prints and ``dpllm guard check -r`` reads.
        "schema": RELEASES_SCHEMA,
        "window": report.week,
        "week": report.week,
        "lang": report.lang,
        "prompt": report.prompt,
        "course_names": list(report.course_names),
        "text": report.text,
        "source": text_source(report),
        "model": report.model,
        "model_error": report.model_error,
        "releases": {
            name: {**rel.to_dict(), "charged_this_run": name in report.fresh}
            for name, rel in report.releases.items()
        },
        "derived": {name: rel.to_dict() for name, rel in report.derived.items()},
        "spent_this_run": report.spent.to_dict(),
        "budget": [asdict(b) for b in report.budget],
        "attempts": [_attempt(a) for a in gen.attempts],
        "redaction_counts": gen.redaction_counts,
        "usage": {
            "prompt_tokens": gen.usage.prompt_tokens,
            "completion_tokens": gen.usage.completion_tokens,
        },
        "charts": list(charts),
    }


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the report from its readers
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_report(
    report: WeeklyReport, folder: str | os.PathLike[str], *, charts: bool = True
) -> dict[str, Path]:
    """Write ``report.md``, ``report.json`` and (``charts``) the PNG charts into ``folder``.

    Returns:
        ``{"report.md": path, "report.json": path, "<chart>.png": path, …}``.

    Privacy: post-processing of releases; drawing the trend reads stored releases only.
    """
    out = Path(folder)
    written: dict[str, Path] = {}
    if charts:
        from dpllm.weekly.charts import draw_charts

        for name, png in draw_charts(report).items():
            write_atomic(out / name, png)
            written[name] = out / name
    md = render_markdown(report)
    data = report_dict(report, charts=sorted(written))
    write_atomic(out / REPORT_MD, md)
    written[REPORT_MD] = out / REPORT_MD
    write_atomic(out / REPORT_JSON, json.dumps(data, ensure_ascii=False, indent=1) + "\n")
    written[REPORT_JSON] = out / REPORT_JSON
    return written


def load_json(path: str | os.PathLike[str]) -> Mapping[str, Any]:
    """Read a ``report.json`` back (for tests and tools)."""
    data: Mapping[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data
