"""``dpllm guard check``: print the precision-guard violations of any text.

``-r FILE`` is a releases document (schema ``dpllm.releases/1``: the weekly
job's ``report.json`` and ``dpllm stats --json`` output are both one), or,
for one release more, a plain list of ``Release.to_dict()`` records. Exit
status (the table of every command): 0 clean, 1 violations found, 2 unusable input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from dpllm.cli._common import EncodingOption, JsonOption, print_json, read_text_input

guard_app = typer.Typer(help="Check texts with the precision guard.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(guard_app, name="guard")


def load_releases(path: Path) -> list[Any]:
    """Read the releases of a releases document (``dpllm.releases/1``) or a list of records.

    Raises:
        GuardError: the file is missing, unreadable or not a releases document.
    """
    from dpllm.errors import GuardError, InputError, InvalidPrivacyParameter
    from dpllm.release import read_releases_document

    try:
        text = read_text_input(str(path))
    except InputError as exc:
        raise GuardError(f"releases file: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise GuardError(
            f"{path} is not JSON ({exc}); give the weekly job's report.json or the output "
            "of dpllm stats --json"
        ) from None
    try:
        return list(read_releases_document(data).values())
    except InvalidPrivacyParameter as exc:
        raise GuardError(f"{path}: {exc}") from None


@guard_app.command("check")
def check(
    releases: Annotated[
        Path,
        typer.Option(
            "--releases",
            "-r",
            help="Releases to check against: a report.json or dpllm stats --json output.",
        ),
    ],
    file: Annotated[str, typer.Argument(help="Text file to check, or - for standard input.")] = "-",
    unsupported: Annotated[
        str, typer.Option(help="'violation' or 'warning' for figures that match no release.")
    ] = "violation",
    language: Annotated[
        str, typer.Option(help="en, zh or auto (language of the allowed forms).")
    ] = "auto",
    encoding: EncodingOption = "utf-8",
    as_json: JsonOption = False,
) -> None:
    """Print the violations of a text against released statistics (exit 1 if any)."""
    from dpllm.guard import Guard

    text = read_text_input(file, encoding=encoding)
    loaded = load_releases(releases)
    # As in the weekly job: the small-count threshold ("fewer than 5") is public
    # wording, not a figure.
    thresholds = {r.small_threshold for r in loaded if r.small_threshold}
    guard = Guard(loaded, unsupported=unsupported, allowed_constants=thresholds)
    report = guard.check(text, language=language)
    if as_json:
        print_json(
            [
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
                for severity, group in (
                    ("violation", report.violations),
                    ("warning", report.warnings),
                )
                for v in group
            ]
        )
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
