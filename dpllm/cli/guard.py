"""``dpllm guard check``: print the precision-guard violations of any text.

``releases.json`` is a list of ``Release.to_dict()`` records, or an object with a
``"releases"`` list (as the weekly job's ``report.json``). Exit status: 0 clean,
1 violations found, 2 unusable input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

guard_app = typer.Typer(help="Check texts with the precision guard.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(guard_app, name="guard")


def load_releases(path: Path) -> list[Any]:
    """Read releases from a JSON file (a list, or ``{"releases": [...]}``).

    Raises:
        GuardError: the file is missing or malformed.
    """
    from dpllm.errors import GuardError, InvalidPrivacyParameter
    from dpllm.release import Release

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GuardError(f"cannot read releases from {path}: {exc}") from exc
    if isinstance(data, dict):
        data = data.get("releases")
    if not isinstance(data, list):
        raise GuardError(f"{path} must hold a list of releases or an object with a 'releases' list")
    try:
        return [Release.from_dict(item) for item in data]
    except (InvalidPrivacyParameter, AttributeError) as exc:
        raise GuardError(f"{path}: malformed release record: {exc}") from exc


@guard_app.command("check")
def check(
    file: str = typer.Argument("-", help="Text file to check, or - for standard input."),
    releases: Path = typer.Option(..., "--releases", "-r", help="releases.json to check against."),
    unsupported: str = typer.Option(
        "violation", help="'violation' or 'warning' for figures that match no release."
    ),
    language: str = typer.Option("auto", help="en, zh or auto (language of the allowed forms)."),
    as_json: bool = typer.Option(False, "--json", help="Print the violations as JSON."),
) -> None:
    """Print the violations of a text against released statistics (exit 1 if any)."""
    from dpllm.errors import GuardError
    from dpllm.guard import Guard

    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except OSError as exc:
        typer.echo(f"error: cannot read {file}: {exc}", err=True)
        raise typer.Exit(2) from exc
    try:
        guard = Guard(load_releases(releases), unsupported=unsupported)
        report = guard.check(text, language=language)
    except GuardError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        items = [
            {
                "start": v.span[0],
                "end": v.span[1],
                "rule": str(v.rule),
                "release": v.release,
                "mention": v.mention,
                "allowed": v.allowed,
                "allowed_range": v.allowed_range,
                "severity": severity,
            }
            for severity, group in (("violation", report.violations), ("warning", report.warnings))
            for v in group
        ]
        typer.echo(json.dumps(items, ensure_ascii=False, indent=2))
    else:
        for severity, group in (("violation", report.violations), ("warning", report.warnings)):
            for v in group:
                line = text.count("\n", 0, v.span[0]) + 1
                typer.echo(f"{severity}: line {line} [{v.rule}] {v.message}")
        if report.ok and not report.warnings:
            typer.echo(f"ok: {len(report.mentions)} figure(s) checked, no violation")
    raise typer.Exit(0 if report.ok else 1)


@guard_app.command("eval")
def evaluate_guard(
    misses: int = typer.Option(0, "--misses", help="Print up to N missed and N wrongly flagged."),
    category: str = typer.Option("", "--category", help="Only cases of this category."),
    as_json: bool = typer.Option(False, "--json", help="Print the scores as JSON."),
) -> None:
    """Score the guard on its generated adversarial set: recall and false flags per category."""
    from dpllm.guard import Guard
    from dpllm.guard.evalset import build_cases, evaluate

    cases = [c for c in build_cases() if not category or c.category == category]
    guards: dict[int, Guard] = {}

    def flagged(text: str, releases: Any, lang: str) -> bool:
        guard = guards.setdefault(id(releases), Guard(releases))
        return not guard.check(text, language=lang).ok

    scores = evaluate(cases, flagged)
    order = [
        "all",
        *sorted(k for k in scores if k != "all" and not k.startswith("domain")),
        *sorted(k for k in scores if k.startswith("domain")),
    ]
    if as_json:
        rows = {
            k: {
                "violating": scores[k].violating,
                "recall": scores[k].recall,
                "compliant": scores[k].compliant,
                "false_flag_rate": scores[k].false_flag_rate,
            }
            for k in order
        }
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    typer.echo(
        f"{'category':32} {'violating':>9} {'recall':>7} {'compliant':>9} {'false flags':>11}"
    )
    for k in order:
        s = scores[k]
        typer.echo(
            f"{k:32} {s.violating:9d} {s.recall:7.1%} {s.compliant:9d} {s.false_flag_rate:11.1%}"
        )
    if misses:
        typer.echo("\nmissed:")
        for text in scores["all"].misses[:misses]:
            typer.echo(f"  {text}")
        typer.echo("wrongly flagged:")
        for text in scores["all"].false_flags[:misses]:
            typer.echo(f"  {text}")
