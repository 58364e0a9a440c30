"""The CLI convention (docs/cli-conventions.md), checked on every command of the app.

The walk is generic: a command added later (by any module's ``register``) is
covered without editing this file. A command that prints no results is listed
in ``NO_RESULTS`` with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from dpllm import __version__
from dpllm.cli import app
from dpllm.cli._common import EXIT_CODES_HELP, ExitCode, console, emit

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli-conventions.md"

NO_RESULTS = {
    "serve": "runs the server until stopped; it prints logs, not results",
}
"""Commands exempt from ``--json``, and why."""


def _commands() -> list[tuple[str, Any]]:
    """``(path, click command)`` of every command a user can run (groups with a body too)."""
    root = typer.main.get_command(app)
    found: list[tuple[str, Any]] = []

    def walk(prefix: str, cmd: Any) -> None:
        if isinstance(cmd, TyperGroup):
            if cmd.invoke_without_command and prefix:
                found.append((prefix, cmd))
            for name, sub in cmd.commands.items():
                walk(f"{prefix} {name}".strip(), sub)
        else:
            found.append((prefix, cmd))

    walk("", root)
    return found


COMMANDS = _commands()
IDS = [path for path, _ in COMMANDS]


def _options(cmd: Any) -> set[str]:
    return {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}


def test_the_walk_finds_every_command() -> None:
    assert {"weekly", "stats", "guard check", "budget show", "redact text", "audit", "plan"} <= set(
        IDS
    )


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=IDS)
def test_every_command_has_quiet_and_verbose(path: str, cmd: Any) -> None:
    assert {"--quiet", "-q", "--verbose", "-v"} <= _options(cmd), path


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=IDS)
def test_every_command_that_prints_results_has_json(path: str, cmd: Any) -> None:
    if path in NO_RESULTS:
        assert "--json" not in _options(cmd)
        return
    assert "--json" in _options(cmd), f"{path}: add `as_json: JsonOption = False`"


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=IDS)
def test_help_renders_cleanly(path: str, cmd: Any) -> None:
    result = CliRunner().invoke(app, [*path.split(), "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert "<bool>" not in out, "a flag shows a type"
    assert not re.search(r"\{[a-z_]+\}", out), "an argument shows as {name}"
    assert "``" not in out and "`" not in out, "raw backticks"
    assert " ".join(out.split()).count("Exit codes") <= 1, "exit codes printed twice"
    assert "Traceback" not in out
    assert all(line == line.rstrip() for line in out.splitlines()), "trailing spaces when piped"
    usage = next(line for line in out.splitlines() if "Usage:" in line)
    for arg in (p for p in cmd.params if p.param_type_name == "argument"):
        assert arg.name.upper() in usage, f"{path}: argument {arg.name} not upper-case in usage"


def test_rich_markup_does_not_swallow_brackets() -> None:
    out = " ".join(CliRunner().invoke(app, ["weekly", "--help"]).output.split())
    assert "Output folder (overrides [output] dir)" in out


def test_version_on_the_root_and_completion() -> None:
    runner = CliRunner()
    for flag in ("--version", "-V"):
        result = runner.invoke(app, [flag])
        assert result.exit_code == 0 and result.output.strip() == f"dpllm {__version__}"
    assert runner.invoke(app, ["version", "--json"]).output.strip().startswith("{")
    root = typer.main.get_command(app)
    assert {"--install-completion", "--show-completion"} <= _options(root)
    root_help = " ".join(runner.invoke(app, ["--help"]).output.split())
    assert " ".join(EXIT_CODES_HELP.split()) in root_help


def test_the_documented_exit_code_table_is_the_code_table() -> None:
    text = DOCS.read_text("utf-8")
    table = dict(re.findall(r"^\|\s*(\d+)\s*\|\s*`?([A-Z_]+)`?\s*\|", text, flags=re.M))
    assert {int(k): v for k, v in table.items()} == {int(c): c.name for c in ExitCode}
    for code in ExitCode:
        assert f"{int(code)} " in EXIT_CODES_HELP


def test_no_color_turns_colours_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    coloured = console()
    with coloured.capture() as cap:
        coloured.print("[red]refused[/red]")
    assert "\x1b[31m" in cap.get()  # the check below can fail
    monkeypatch.setenv("NO_COLOR", "1")
    plain = console()
    with plain.capture() as cap:
        plain.print("[red]refused[/red]")
    assert "\x1b[31m" not in cap.get() and "refused" in cap.get()


def test_piped_tables_are_not_wrapped_and_have_no_trailing_spaces(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from rich.table import Table

    table = Table(title="wide")
    for col in ("query", "estimate", "95% interval", "mechanism", "cost"):
        table.add_column(col)
    table.add_row("mean_rating", "3.62", "3.55 – 3.68", "laplace" * 6, "ε = 0.2 " * 8)
    emit(table)
    out = capsys.readouterr().out
    assert all(line == line.rstrip() for line in out.splitlines()), "trailing spaces"
    row = next(line for line in out.splitlines() if "mean_rating" in line)
    assert "laplace" * 6 in row and row.count("ε = 0.2") == 8 and len(row) > 120


def test_quickstart_piped_output_is_clean() -> None:
    result = CliRunner().invoke(app, ["quickstart", "--users", "50"])
    assert result.exit_code == 0, result.output
    assert all(line == line.rstrip() for line in result.output.splitlines())
    payload = CliRunner().invoke(app, ["quickstart", "--users", "50", "--json"]).output
    import json

    data = json.loads(payload)
    assert set(data["releases"]) == {"active_users", "mean_rating"}


def test_quiet_silences_notes_and_verbose_shows_a_bug_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def boom(**_: Any) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("dpllm.data.demo.generate_demo", boom)
    result = CliRunner().invoke(app, ["demo-data", "--out", "x.db"])
    assert result.exit_code == ExitCode.INTERNAL
    assert "internal error: ZeroDivisionError: a bug" in result.output
    assert "Traceback" not in result.output
    verbose = CliRunner().invoke(app, ["demo-data", "--out", "x.db", "--verbose"])
    assert verbose.exit_code == ExitCode.INTERNAL and "Traceback" in verbose.output


def test_long_steps_print_plain_lines_when_piped_and_nothing_when_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.weekly.helpers import shared_redactor

    monkeypatch.setattr("dpllm.redact.Redactor", lambda **_: shared_redactor())
    text = "Write to ana.lopez@example.com about week 47.\n"
    result = CliRunner().invoke(app, ["redact", "-"], input=text)
    assert result.exit_code == 0, result.output
    assert "ana.lopez@example.com" not in result.stdout
    assert result.stderr.splitlines()[:2] == [
        "loading the redactor (Presidio, spaCy, jieba) …",
        f"redacting {len(text)} characters …",
    ]
    quiet = CliRunner().invoke(app, ["redact", "-", "--quiet"], input=text)
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == result.stdout
