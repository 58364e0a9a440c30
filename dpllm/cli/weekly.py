"""``dpllm weekly`` (the weekly summary job) and ``dpllm init`` (a commented dpllm.toml).

Exit codes of ``dpllm weekly`` (the table of every command, ``dpllm --help``;
``docs/cli-conventions.md``):

====  ==========================================================================
0     done: the report is written
2     configuration, template or usage error (the message names the field and line)
3     privacy budget exhausted or queued: nothing was spent; the message shows
      what the plan asked and what is left
4     data or ledger unavailable: missing source, unknown column, refused data;
      a ledger that is unreadable, locked or of a newer schema; an unwritable folder
5     model failure: the message says whether a fallback report was written
====  ==========================================================================
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dpllm.cli._common import ExitCode, JsonOption, exit_code_for, fail, info, is_quiet, print_json

if TYPE_CHECKING:
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

EXIT_OK = int(ExitCode.OK)
EXIT_ERROR = int(ExitCode.UNAVAILABLE)  # kept for callers; there is no "other error" code now
EXIT_CONFIG = int(ExitCode.USAGE)
EXIT_BUDGET = int(ExitCode.BUDGET)
EXIT_MODEL = int(ExitCode.MODEL)
EXIT_DATA = int(ExitCode.UNAVAILABLE)
EXIT_LEDGER = int(ExitCode.UNAVAILABLE)

DEMO_DIR = "dpllm-demo"
TREND_QUERIES = ("mean_rating", "feedback_count")

_EXIT_HELP = (
    "Exit codes: 0 done; 2 config or usage error; 3 budget exhausted or queued (nothing "
    "spent); 4 data or ledger unavailable; 5 model failure (the message says whether a "
    "fallback report was written)."
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
    as_json: JsonOption = False,
) -> None:
    """Turn a week of feedback into a DP report: report.md, report.json and charts.

    Every figure is a ledger-charged DP release (charged once per week: a rerun
    spends nothing and gives the same figures); the text is redacted and
    precision-guarded.
    """
    from dpllm.config import Settings
    from dpllm.errors import BudgetError, ConfigError, DPLLMError, LedgerError, ModelError

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
        raise fail(str(exc), ExitCode.USAGE) from None

    from dpllm.data.demo import DEMO_COURSES, DEMO_END_WEEK

    if week is None:
        week = DEMO_END_WEEK if demo else last_complete_week(dt.datetime.now(dt.UTC).date())
    _check_week(week)
    try:
        if demo and _ensure_demo_data(settings):
            info(f"generated demo data in {settings.resolve(settings.data.path)}")
        report, folder = _run(settings, week, demo=demo, courses=DEMO_COURSES)
    except (DPLLMError, OSError) as exc:
        code = exit_code_for(exc)
        if isinstance(exc, BudgetError) and not isinstance(exc, LedgerError):
            message = f"privacy budget: {exc}"
        elif isinstance(exc, ModelError):
            message = f"model failure: {exc}; no report was written"
        elif isinstance(exc, OSError):
            message = f"cannot write the report: {exc}; no report was written"
        else:
            message = f"{exc}; no report was written"
        raise fail(message, code) from None
    if as_json:
        _json_summary(report, folder)
    else:
        _summary(report, folder)
    if report.model_error:
        raise fail(
            f"model failure: {report.model_error}; a fallback report (the deterministic "
            f"template text, redacted and guarded) was written to {folder}",
            ExitCode.MODEL,
        )


def _check_week(week: str) -> None:
    from dpllm.errors import DataError
    from dpllm.windows import parse_week

    try:
        parse_week(week)
    except DataError as exc:
        raise typer.BadParameter(str(exc), param_hint="--week") from None


def _run(
    settings: Settings, week: str, *, demo: bool, courses: tuple[str, ...]
) -> tuple[WeeklyReport, Path]:
    from dpllm.cli._common import steps
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
        steps(f"weekly report {week}", total=len(labels) + 2) as advance,
        WeeklyJob(settings, courses=courses if demo else ()) as job,
    ):

        def step(name: str) -> None:
            advance(labels.get(name, name))

        if demo:
            # The demo also releases the trend figures of the weeks before, so the trend
            # chart has points (each week charged once, to its own window; reruns free).
            step("trend weeks")
            trend = {n: job.plan[n] for n in TREND_QUERIES if n in job.plan}
            for earlier in previous_weeks(week, 8)[:-1]:
                job.release(earlier, trend)
        report = job.run(week, progress=step)
        step("writing report.md, report.json and the charts")
        folder = settings.resolve(settings.output_dir) / week
        write_report(report, folder)
    return report, folder


def _summary(report: WeeklyReport, folder: Path) -> None:
    from dpllm.weekly.report import describe_source, guard_summary

    typer.echo(report.text.strip())
    if is_quiet():
        return
    typer.echo()
    if report.fresh:
        spent = f"charged {report.spent.describe()} for {len(report.fresh)} new release(s)"
    else:
        spent = "spent nothing (every release came from the ledger's cache)"
    left = "; ".join(f"{b.pool} {b.symbol} {b.remaining:g} left" for b in report.budget)
    typer.echo(f"{report.week}: {spent}; {left} this week.")
    gen = report.generation
    redacted = sum(gen.redaction_counts.values())
    typer.echo(
        f"writer: {report.model}, {gen.model_calls} call(s), {guard_summary(report)}, "
        f"{redacted} item(s) redacted; text from {describe_source(report)}."
    )
    typer.echo(f"report: {folder / 'report.md'} (+ report.json, charts)")


def _json_summary(report: WeeklyReport, folder: Path) -> None:
    from dataclasses import asdict

    from dpllm.weekly.report import REPORT_JSON, REPORT_MD, text_source

    gen = report.generation
    print_json(
        {
            "week": report.week,
            "folder": str(folder),
            "report_md": str(folder / REPORT_MD),
            "report_json": str(folder / REPORT_JSON),
            "charged": sorted(report.fresh),
            "spent_this_run": report.spent.to_dict(),
            "budget": [asdict(b) for b in report.budget],
            "model": report.model,
            "model_calls": gen.model_calls,
            "source": text_source(report),
            "guard_violations": sum(len(a.violations) for a in gen.attempts),
            "redaction_counts": dict(gen.redaction_counts),
            "model_error": report.model_error,
            "text": report.text,
        }
    )


def init(
    path: Annotated[Path, typer.Argument(help="Where to write the config.")] = Path("dpllm.toml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Write a commented dpllm.toml (every setting of the weekly job, with defaults)."""
    from dpllm.errors import InputError

    if path.is_dir():
        raise InputError(f"{path} is a folder; give a file name, e.g. {path / 'dpllm.toml'}")
    if path.exists() and not force:
        raise InputError(f"{path} exists; use --force to overwrite it")
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise InputError(f"{blocker} is a file, not a folder; choose another path for the config")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(example_config(), encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot write {path}: {exc.strerror or exc}; choose a folder you can write to"
        ) from None
    if as_json:
        print_json({"path": str(path)})
        return
    typer.echo(f"wrote {path}; edit [data] and [plan.queries], then run: dpllm weekly -c {path}")


def register(app: typer.Typer) -> None:
    """Add ``weekly`` and ``init`` to the ``dpllm`` app."""
    app.command("weekly", epilog=_EXIT_HELP)(weekly)
    app.command("init")(init)
