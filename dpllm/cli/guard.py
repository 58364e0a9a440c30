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
