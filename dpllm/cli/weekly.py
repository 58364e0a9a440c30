"""``dpllm weekly`` (the weekly summary job) and ``dpllm init`` (a commented dpllm.toml).

0     done: the report is written
2     configuration, template or usage error (the message names the field and line)
3     privacy budget exhausted or queued: nothing was spent; the message shows
      what the plan asked and what is left
4     data or ledger unavailable: missing source, unknown column, refused data;
      a ledger that is unreadable, locked or of a newer schema; an unwritable folder
5     model failure: the message says whether a fallback report was written
=======
Exit codes of ``dpllm weekly`` (the table of every command: ``dpllm --help``,
``docs/cli-conventions.md``):

====  ==========================================================================
0     done: the report is written (or, with ``--dry-run``, the run fits)
1     any other error (redaction, guard, output folder); no report
2     usage or input error: bad option, config (field and line named), week,
      template
3     privacy budget refused or queued for approval: nothing was spent; the
      message shows what the plan asked and what is left
4     the data or the ledger is unavailable (missing source, unreachable or
      unusable ledger, another run of the same week holds its lock)
5     model failure: the message says whether a fallback report was written
130   interrupted (SIGINT); 143 terminated (SIGTERM): the message says what was
      kept and the command that resumes the run
====  ==========================================================================
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dpllm.cli._common import (
    EXIT_BUDGET,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_MODEL,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    ConfigOption,
    ExitCode,
    JsonOption,
    LedgerOverride,
    exit_code,
    fail,
    info,
    is_quiet,
    load_settings,
    print_json,
    terminate_as_interrupt,
)
from dpllm.cli._dryrun import dry_run_of, run_dry, trend_plan, trend_weeks

if TYPE_CHECKING:
    from dpllm.config import Settings
    from dpllm.weekly.job import WeeklyJob, WeeklyReport
    from dpllm.windows import Window

__all__ = [
    "DEMO_DIR",
    "EXIT_BUDGET",
    "EXIT_CONFIG",
    "EXIT_DATA",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_LEDGER",
    "EXIT_MODEL",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "demo_settings",
    "dry_run_of",
    "example_config",
    "last_complete_week",
    "parse_window_option",
    "register",
]

EXIT_CONFIG = EXIT_USAGE
EXIT_DATA = EXIT_UNAVAILABLE
EXIT_LEDGER = EXIT_UNAVAILABLE

DEMO_DIR = "dpllm-demo"

_EXIT_HELP = (
    "Exit codes: 0 done; 1 other error (no report); 2 usage, config, week or template "
    "error; 3 budget exhausted or queued for approval (nothing spent); 4 data or ledger "
    "unavailable, or the week is being run by another process; 5 model failure (the "
    "message says whether a fallback report was written); 130 interrupted, 143 "
    "terminated (what was kept and how to resume are printed)."
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


def parse_window_option(value: str | None) -> Window | None:
    """Parse a ``--week`` value once, at the edge (a malformed week exits 2).

    Raises:
        typer.BadParameter: not a canonical ISO week in range (usage error, exit 2).
    """
    from dpllm.errors import InvalidWindow
    from dpllm.windows import Window

    if value is None:
        return None
    try:
        return Window.parse(value)
    except InvalidWindow as exc:
        raise typer.BadParameter(str(exc), param_hint="--week") from None


def utc_today() -> dt.date:
    """Today's UTC date: the CLI's one read of the clock, passed down as ``today``."""
    from dpllm.windows import utc_today as today

    return today()


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
    config: ConfigOption = None,
    week: Annotated[
        str | None,
        typer.Option(
            "--week",
            help="ISO week to report on, written exactly like 2026-W47 (a complete week).",
        ),
    ] = None,
    last_complete: Annotated[
        bool,
        typer.Option(
            "--last-complete",
            help="Report on the last complete ISO week (the one that ended before today, "
            "UTC); the default without --week. For schedulers.",
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
    ledger: LedgerOverride = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Lint the templates, open the data and the ledger, and print each "
            "query's cost, expected interval and the pools' balance after the run; "
            "spend and write nothing.",
        ),
    ] = False,
    allow_incomplete: Annotated[
        bool,
        typer.Option(
            "--allow-incomplete",
            help="Also release the current, unfinished week (the report says so).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Turn a week of feedback into a DP report: report.md, report.json and charts.

    Every figure is a ledger-charged DP release (charged once per week: a rerun
    spends nothing and gives the same figures); the text is redacted and
    precision-guarded. An interrupted run is resumed by the same command: what it
    paid is taken over, nothing is charged twice.
    """
    from dpllm.errors import ConfigError

    window = parse_window_option(week)
    if week and last_complete:
        raise typer.BadParameter("give --week or --last-complete, not both", param_hint="--week")
    if lang is not None and lang not in ("en", "zh"):
        raise typer.BadParameter("must be en or zh", param_hint="--lang")
    try:
        if demo and config is None:
            settings = demo_settings(DEMO_DIR, lang=lang or "en").from_env(os.environ)
        else:
            settings = load_settings(config, ledger=ledger)
            if lang is not None:
                settings = dataclasses.replace(settings, lang=lang)
        if out is not None:
            settings = dataclasses.replace(settings, output_dir=str(out.resolve()))
    except ConfigError as exc:
        raise fail_with(EXIT_USAGE, str(exc)) from None

    from dpllm.data.demo import DEMO_COURSES, DEMO_END_WEEK
    from dpllm.errors import WindowNotReady
    from dpllm.windows import Window

    today = utc_today()
    if window is None:
        window = Window.parse(DEMO_END_WEEK if demo else last_complete_week(today))
    try:
        window.require_ready(today, allow_incomplete=allow_incomplete)
    except WindowNotReady as exc:
        raise typer.BadParameter(str(exc), param_hint="--week") from None
    resume = _resume_command(
        config, window.key, demo=demo, ledger=ledger, out=out, lang=lang,
        allow_incomplete=allow_incomplete,
    )  # fmt: skip
    try:
        with terminate_as_interrupt():
            if demo and _ensure_demo_data(settings):
                info(f"generated demo data in {settings.resolve(settings.data.path)}")
            if dry_run:
                run_dry(
                    settings, window, courses=DEMO_COURSES if demo else (), today=today,
                    allow_incomplete=allow_incomplete, as_json=as_json, demo=demo,
                )  # fmt: skip
                return
            report, folder = _run(
                settings, window, demo=demo, courses=DEMO_COURSES, resume=resume, today=today,
                allow_incomplete=allow_incomplete,
            )  # fmt: skip
    except _Interrupted as exc:
        raise fail_with(exc.code, str(exc)) from None
    except KeyboardInterrupt as exc:  # before the job opened: nothing was touched
        code = exit_code(exc)
        what = "terminated (SIGTERM)" if code == EXIT_TERMINATED else "interrupted"
        raise fail_with(code, f"{what} before anything was charged. Run again: {resume}") from None
    except Exception as exc:  # noqa: BLE001 - every error gets its exit code and message
        raise _error(exc) from None
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


def _error(exc: Exception) -> typer.Exit:
    from dpllm.errors import BudgetError, BudgetPending, DPLLMError, LedgerError, ModelError

    code = exit_code(exc)
    if isinstance(exc, BudgetError) and not isinstance(exc, LedgerError):
        prefix = "approval needed" if isinstance(exc, BudgetPending) else "privacy budget"
        return fail_with(code, f"{prefix}: {exc}")
    if isinstance(exc, ModelError):
        return fail_with(code, f"model failure: {exc}; no report was written")
    if isinstance(exc, DPLLMError | OSError):
        suffix = "" if code in (EXIT_USAGE, EXIT_UNAVAILABLE) else "; no report was written"
        return fail_with(code, f"{exc}{suffix}")
    raise exc


def _resume_command(
    config: Path | None,
    week: str,
    *,
    demo: bool,
    ledger: str | None,
    out: Path | None = None,
    lang: str | None = None,
    allow_incomplete: bool = False,
) -> str:
    """The command that resumes this run (the same week, config and options)."""
    import shlex

    parts = ["dpllm", "weekly"]
    if config is not None:
        parts += ["-c", str(config.resolve())]
    if demo:
        parts.append("--demo")
    if ledger is not None:
        parts += ["--ledger", ledger]
    if out is not None:
        parts += ["--out", str(out.resolve())]
    if lang is not None:
        parts += ["--lang", lang]
    if allow_incomplete:
        parts.append("--allow-incomplete")
    parts += ["--week", week]
    return shlex.join(parts)


class _Interrupted(Exception):
    """An interruption, with what was kept; raised out of :func:`_run`."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _kept(job: WeeklyJob, week: Window, signal_name: str, resume: str) -> str:
    """What an interrupted run kept, and how to resume it."""
    try:
        states = job.states(week)
    except Exception as exc:  # noqa: BLE001 - the ledger may be what was interrupted
        return (
            f"{signal_name} during the run of {week}; the ledger could not be read to say "
            f"what was kept ({type(exc).__name__}). Nothing is charged twice on a rerun. "
            f"Resume with: {resume}"
        )
    released = [n for n, st in states.items() if st == "released"]
    paid = [n for n, st in states.items() if st == "paid"]
    todo = [n for n, st in states.items() if st == "new"]
    parts = [f"{signal_name} during the run of {week}; no report was written."]
    parts.append(
        f"Kept: {len(released)} release(s) stored"
        + (f" ({', '.join(released)})" if released else "")
        + f", {len(paid)} charge(s) paid but not released"
        + (f" ({', '.join(paid)}: the rerun takes them over, not charging again)" if paid else "")
        + f"; {len(todo)} query(ies) not charged"
        + (f" ({', '.join(todo)})" if todo else "")
        + "."
    )
    parts.append(f"Resume with: {resume}")
    return " ".join(parts)


def _run(
    settings: Settings,
    week: Window,
    *,
    demo: bool,
    courses: tuple[str, ...],
    resume: str,
    today: dt.date,
    allow_incomplete: bool,
) -> tuple[WeeklyReport, Path]:
    from dpllm.cli._common import steps
    from dpllm.weekly.job import WeeklyJob
    from dpllm.weekly.report import write_report

    _check_writable(settings.resolve(settings.output_dir) / week.key)
    labels = {
        "statistics": "computing DP statistics (cached releases are free)",
        "render": "rendering the prompt",
        "redactor": "loading the redactor (Presidio, spaCy, jieba)",
        "generate": "writing, redacting and guarding the summary",
    }
    with WeeklyJob(
        settings,
        courses=courses if demo else (),
        today=today,
        allow_incomplete=allow_incomplete,
    ) as job:
        try:
            with steps(f"weekly report {week}", total=len(labels) + 2) as advance:

                def step(name: str) -> None:
                    advance(labels.get(name, name))

                if demo:
                    # The demo also releases the trend figures of the weeks before, so the
                    # trend chart has points (each week charged once, to its own window).
                    step("trend weeks")
                    trend = trend_plan(job)
                    earlier = [w.key for w in trend_weeks(week)]
                    job.release_weeks(earlier, trend)  # one read for all
                report = job.run(week, progress=step)
                step("writing report.md, report.json and the charts")
                folder = settings.resolve(settings.output_dir) / week.key
                write_report(report, folder)
        except KeyboardInterrupt as exc:
            code = exit_code(exc)
            name = "terminated (SIGTERM)" if code == EXIT_TERMINATED else "interrupted (SIGINT)"
            raise _Interrupted(_kept(job, week, name, resume), code) from None
    return report, folder


def _check_writable(folder: Path) -> None:
    """Refuse an output folder that cannot be written *before* anything is charged.

    Raises:
        OSError: the nearest existing part of ``folder`` is a file, or not writable
            (exit 4, "unavailable").
    """
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        problem = f"{existing} is a file, not a folder"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = f"no permission to write in {existing}"
    else:
        return
    raise OSError(
        f"cannot write the report to {folder}: {problem}; nothing was charged. "
        "Fix [output] dir in dpllm.toml (or pass --out)"
    )


def _summary(report: WeeklyReport, folder: Path) -> None:
    from dpllm.weekly.report import describe_source, guard_summary

    typer.echo(report.text.strip())
    if is_quiet():
        return
    typer.echo()
    if report.fresh:
        spent = f"charged {report.spent.describe()} for {len(report.fresh)} new release(s)"
    elif report.resumed:
        spent = "charged nothing new"
    else:
        spent = "spent nothing (every release came from the ledger's cache)"
    if report.resumed:
        spent += (
            f"; resumed {len(report.resumed)} release(s) paid before this run, by an "
            f"interrupted run or an approval ({', '.join(report.resumed)}), not charged again"
        )
    left = "; ".join(f"{b.pool} {b.symbol} {b.remaining:g} left" for b in report.budget)
    typer.echo(f"{report.week}: {spent}; {left} this week.")
    gen = report.generation
    redacted = sum(gen.redaction_counts.values())
    typer.echo(
        f"writer: {report.model}, {gen.model_calls} call(s), {guard_summary(report)}, "
        f"{redacted} item(s) redacted; text from {describe_source(report)}."
    )
    typer.echo(f"report: {folder / 'report.md'} (+ report.json, charts)")


def fail_with(code: int, message: str) -> typer.Exit:
    """``error: message`` on stderr and the exit of ``code`` (see :func:`fail`)."""
    return fail(message, ExitCode(code))


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
