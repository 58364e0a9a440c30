"""``dpllm weekly`` (the weekly summary job) and ``dpllm init`` (a commented dpllm.toml).

Exit codes of ``dpllm weekly`` (also in ``--help`` and the README):

====  ==========================================================================
0     done: the report is written
1     any other error (template, redaction, guard, output folder); no report
2     configuration or usage error (the message names the field and line)
3     privacy budget exhausted: nothing was spent; the message shows what the
      plan asked and what is left
4     model failure: the message says whether a fallback report was written
5     data error: missing source, unknown column, bad week, refused data
6     the ledger cannot be used (unreadable, locked, newer schema)
====  ==========================================================================
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from dpllm.config import Settings
    from dpllm.weekly.job import WeeklyReport

__all__ = [
    "DEMO_DIR",
    "EXIT_BUDGET",
    "EXIT_CONFIG",
    "EXIT_DATA",
    "EXIT_ERROR",
    "EXIT_LEDGER",
    "EXIT_MODEL",
    "EXIT_OK",
    "demo_settings",
    "example_config",
    "last_complete_week",
    "register",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONFIG = 2
EXIT_BUDGET = 3
EXIT_MODEL = 4
EXIT_DATA = 5
EXIT_LEDGER = 6

DEMO_DIR = "dpllm-demo"
TREND_QUERIES = ("mean_rating", "feedback_count")

_EXIT_HELP = (
    "Exit codes: 0 done; 1 other error (no report); 2 config or usage error; "
    "3 budget exhausted (nothing spent); 4 model failure (the message says whether a "
    "fallback report was written); 5 data error; 6 ledger unusable."
)


def example_config() -> str:
    """The commented ``dpllm.toml`` that ``dpllm init`` writes (packaged with dpllm)."""
    return (Path(__file__).resolve().parent.parent / "dpllm.example.toml").read_text("utf-8")


def demo_settings(folder: str | os.PathLike[str], *, lang: str = "en") -> Settings:
    """The built-in demo configuration: the example config, rooted at ``folder``.

    Data ``demo.db``, ledger ``ledger.db`` and reports ``reports/`` inside ``folder``.
    """
    from dpllm.config import Settings

    settings = Settings.parse(example_config(), base_dir=str(Path(folder).resolve()))
    data = dataclasses.replace(settings.data, path="demo.db", dataset_id="dpllm-demo")
    return dataclasses.replace(settings, data=data, ledger="ledger.db", lang=lang)


def last_complete_week(today: dt.date) -> str:
    """The last ISO week that ended before ``today`` (read from the clock at this edge)."""
    from dpllm.windows import iso_week

    return iso_week(today - dt.timedelta(days=today.isoweekday()))


def _ensure_demo_data(settings: Settings) -> bool:
    """Generate the seeded demo data at the settings' data path when absent."""
    from dpllm.data.demo import generate_demo, write_demo

    path = settings.resolve(settings.data.path)
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    write_demo(generate_demo(), path)
    return True


def _fail(console: Console, code: int, message: str) -> typer.Exit:
    from rich.markup import escape

    # Escape: "[plan.queries.x, line 3]" would otherwise be read as Rich markup.
    console.print(f"[bold red]error:[/bold red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def weekly(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="The dpllm.toml (default: ./dpllm.toml)."),
    ] = None,
    week: Annotated[
        str | None, typer.Option("--week", help="ISO week to report on, e.g. 2026-W47.")
    ] = None,
    last_complete: Annotated[
        bool,
        typer.Option(
            "--last-complete",
            help="Report on the last ISO week that ended before today (the default).",
        ),
    ] = False,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help=f"Run on seeded demo data in ./{DEMO_DIR}/ (generated if absent), offline.",
        ),
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder (overrides [output] dir).")
    ] = None,
    lang: Annotated[str | None, typer.Option("--lang", help="Report language, en or zh.")] = None,
) -> None:
    """Turn a week of feedback into a DP report: report.md, report.json and charts.

    Every figure is a ledger-charged DP release (charged once per week: a rerun
    spends nothing and gives the same figures); the text is redacted and
    precision-guarded. Exit codes: 0 done; 1 other error (no report); 2 config or
    usage error; 3 budget exhausted (nothing spent); 4 model failure (the message
    says whether a fallback report was written); 5 data error; 6 ledger unusable.
    """
    from rich.console import Console

    from dpllm.config import Settings
    from dpllm.errors import (
        BudgetError,
        ConfigError,
        DataError,
        DPLLMError,
        LedgerError,
        ModelError,
    )

    console = Console(stderr=True)
    if week and last_complete:
        raise typer.BadParameter("give --week or --last-complete, not both", param_hint="--week")
    if lang is not None and lang not in ("en", "zh"):
        raise typer.BadParameter("must be en or zh", param_hint="--lang")
    try:
        if demo and config is None:
            settings = demo_settings(DEMO_DIR, lang=lang or "en")
        else:
            settings = Settings.load(config or Path("dpllm.toml"))
            if lang is not None:
                settings = dataclasses.replace(settings, lang=lang)
        settings = settings.from_env(os.environ)
        if out is not None:
            settings = dataclasses.replace(settings, output_dir=str(out.resolve()))
    except ConfigError as exc:
        raise _fail(console, EXIT_CONFIG, str(exc)) from None

    from dpllm.data.demo import DEMO_COURSES, DEMO_END_WEEK

    if week is None:
        week = DEMO_END_WEEK if demo else last_complete_week(dt.datetime.now(dt.UTC).date())
    try:
        if demo and _ensure_demo_data(settings):
            console.print(f"generated demo data in {settings.resolve(settings.data.path)}")
        report, folder = _run(settings, week, console, demo=demo, courses=DEMO_COURSES)
    except ConfigError as exc:
        raise _fail(console, EXIT_CONFIG, str(exc)) from None
    except BudgetError as exc:
        if isinstance(exc, LedgerError):
            raise _fail(console, EXIT_LEDGER, str(exc)) from None
        raise _fail(console, EXIT_BUDGET, f"privacy budget: {exc}") from None
    except DataError as exc:
        raise _fail(console, EXIT_DATA, str(exc)) from None
    except ModelError as exc:
        raise _fail(console, EXIT_MODEL, f"model failure: {exc}; no report was written") from None
    except (DPLLMError, OSError) as exc:
        raise _fail(console, EXIT_ERROR, f"{exc}; no report was written") from None
    _summary(report, folder)
    if report.model_error:
        raise _fail(
            console,
            EXIT_MODEL,
            f"model failure: {report.model_error}; a fallback report (the deterministic "
            f"template text, redacted and guarded) was written to {folder}",
        )


def _run(
    settings: Settings, week: str, console: Console, *, demo: bool, courses: tuple[str, ...]
) -> tuple[WeeklyReport, Path]:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from dpllm.weekly.job import WeeklyJob
    from dpllm.weekly.report import write_report
    from dpllm.windows import parse_week, previous_weeks

    parse_week(week)
    labels = {
        "statistics": "computing DP statistics (cached releases are free)",
        "render": "rendering the prompt",
        "redactor": "loading the redactor (Presidio, spaCy, jieba)",
        "generate": "writing, redacting and guarding the summary",
    }
    with (
        Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=not console.is_terminal,
        ) as progress,
        WeeklyJob(settings, courses=courses if demo else ()) as job,
    ):
        task = progress.add_task(f"weekly report {week}", total=len(labels) + 2)

        def step(name: str) -> None:
            progress.update(task, description=labels.get(name, name), advance=1)

        if demo:
            # The demo also releases the trend figures of the weeks before, so the trend
            # chart has points (each week charged once, to its own window; reruns free).
            step("trend weeks")
            trend = {n: job.plan[n] for n in TREND_QUERIES if n in job.plan}
            job.release_weeks(previous_weeks(week, 8)[:-1], trend)  # one read for all
        report = job.run(week, progress=step)
        step("writing report.md, report.json and the charts")
        folder = settings.resolve(settings.output_dir) / week
        write_report(report, folder)
        progress.update(task, description=f"weekly report {week}: done", completed=len(labels) + 2)
    return report, folder


def _summary(report: WeeklyReport, folder: Path) -> None:
    from rich.console import Console

    out = Console(highlight=False)
    out.print(report.text.strip(), markup=False)
    out.print()
    if report.fresh:
        spent = f"charged {report.spent.describe()} for {len(report.fresh)} new release(s)"
    else:
        spent = "spent nothing (every release came from the ledger's cache)"
    left = "; ".join(f"{b.pool} {b.symbol} {b.remaining:g} left" for b in report.budget)
    out.print(f"[bold]{report.week}[/bold]: {spent}; {left} this week.")
    gen = report.generation
    fixes = sum(len(a.violations) for a in gen.attempts)
    redacted = sum(gen.redaction_counts.values())
    out.print(
        f"writer: {report.model}, {gen.model_calls} call(s), {fixes} guard violation(s) "
        f"fixed, {redacted} item(s) redacted; text from the "
        + ("offline writer (the template's text)" if report.model == "offline" else gen.source)
        + "."
    )
    out.print(f"report: {folder / 'report.md'} (+ report.json, charts)", markup=False)


def init(
    path: Annotated[Path, typer.Argument(help="Where to write the config.")] = Path("dpllm.toml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented dpllm.toml (every setting of the weekly job, with defaults)."""
    if path.exists() and not force:
        typer.echo(f"error: {path} exists; use --force to overwrite it", err=True)
        raise typer.Exit(EXIT_CONFIG)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(example_config(), encoding="utf-8")
    typer.echo(f"wrote {path}; edit [data] and [plan.queries], then run: dpllm weekly -c {path}")


def register(app: typer.Typer) -> None:
    """Add ``weekly`` and ``init`` to the ``dpllm`` app."""
    app.command("weekly", epilog=_EXIT_HELP)(weekly)
    app.command("init")(init)
