"""What every ``dpllm`` command shares: exit codes, error mapping, options, output.

The convention (``docs/cli-conventions.md``; ``tests/cli/test_conventions.py``
walks every command and enforces it):

* one exit-code table, :class:`ExitCode`, used by every command; an error is
  mapped to its code in one place, :func:`exit_code_for`;
* no traceback reaches a user: the root group (:class:`DpllmGroup`) catches
  every exception a command lets escape, prints ``error: …`` (a message that
  says what to do) and exits with the documented code. ``--verbose`` adds the
  traceback for an unexpected error;
* ``--quiet``/``--verbose`` on every command (added here, so a command
  registered later gets them too), ``--json`` on every command that prints
  results (:data:`JsonOption`), ``--encoding`` where text is read
  (:data:`EncodingOption`);
* output: :func:`emit` prints rich renderables unwrapped and without trailing
  spaces when stdout is not a terminal; :func:`status` shows a spinner on a
  terminal and one plain line otherwise; colours follow ``NO_COLOR``.

**One configuration.** A command that reads data, the ledger, pools, templates or the
model takes ``-c/--config FILE`` (:data:`ConfigOption`). Without it, ``./dpllm.toml``
is used when present, then the file ``$DPLLM_CONFIG`` names; with neither, dpllm's
defaults (relative paths then resolve against the working directory). The environment
overrides (``DPLLM_LEDGER``, ``OPENAI_*``, ``DPLLM_MODEL``) apply on top, here at the
edge (:meth:`~dpllm.config.Settings.from_env`); nothing below the CLI reads them.

**Either ledger.** :func:`open_ledger` turns the configured ledger URL (a path,
``sqlite:///path`` or ``postgresql://…``) into its backend through
:func:`dpllm.ledger.factory.open_ledger`; an unknown scheme is a
:class:`~dpllm.errors.ConfigError`, never a file named like a URL.

**Interruptions.** SIGTERM unwinds like Ctrl-C inside :func:`terminate_as_interrupt`
(:class:`Terminated`, exit 143); what was kept and the command that resumes are printed.

This module only imports Typer and the standard library at import time, so
``dpllm --help`` stays fast.
"""

from __future__ import annotations

import codecs
import functools
import json
import signal
import sqlite3
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

from dpllm.cli._settings import (
    CONFIG_ENV,
    ConfigOption,
    LedgerOverride,
    find_config,
    load_settings,
    open_ledger,
)

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

__all__ = [
    "CONFIG_ENV",
    "EXIT_BUDGET",
    "EXIT_CODES_HELP",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_MODEL",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "HELP_OPTION_NAMES",
    "ConfigOption",
    "DpllmGroup",
    "EncodingOption",
    "ExitCode",
    "JsonOption",
    "LedgerOverride",
    "Terminated",
    "console",
    "emit",
    "exit_code",
    "exit_code_for",
    "fail",
    "find_config",
    "info",
    "is_quiet",
    "is_verbose",
    "load_settings",
    "open_ledger",
    "print_json",
    "read_text_input",
    "status",
    "steps",
    "terminate_as_interrupt",
]


class ExitCode(IntEnum):
    """The exit status of every ``dpllm`` command."""

    OK = 0
    """Done."""
    FINDINGS = 1
    """The command ran and found something: guard violations, lint findings, a failed audit."""
    USAGE = 2
    """Usage or input error: a bad option, an unreadable or malformed file, a bad config."""
    BUDGET = 3
    """The privacy budget refused the request, or queued it for approval. Nothing was spent."""
    UNAVAILABLE = 4
    """Data, ledger or another resource is unavailable (missing data, locked ledger, port in use)."""
    MODEL = 5
    """The language model failed (the message says whether a fallback was written)."""
    INTERNAL = 70
    """A bug in dpllm (an unexpected exception); ``--verbose`` prints the traceback."""
    INTERRUPTED = 130
    """Interrupted (Ctrl-C / SIGINT); what was kept and how to resume are printed."""
    TERMINATED = 143
    """Terminated (SIGTERM); what was kept and how to resume are printed."""


# The table as plain constants, for code that compares or returns codes.
EXIT_OK = ExitCode.OK
EXIT_ERROR = ExitCode.FINDINGS
EXIT_USAGE = ExitCode.USAGE
EXIT_BUDGET = ExitCode.BUDGET
EXIT_UNAVAILABLE = ExitCode.UNAVAILABLE
EXIT_MODEL = ExitCode.MODEL
EXIT_INTERRUPTED = ExitCode.INTERRUPTED
EXIT_TERMINATED = ExitCode.TERMINATED


EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 findings (violations, lint, audit); 2 usage or input error; "
    "3 budget refused or queued (nothing spent); 4 data, ledger or port unavailable; "
    "5 model failed; 70 internal error; 130 interrupted; 143 terminated."
)
"""The table in one line, printed at the foot of ``dpllm --help``."""


def exit_code_for(exc: BaseException) -> ExitCode:
    """The documented exit code of an exception that ends a command."""
    import dpllm.errors as e

    if isinstance(exc, Terminated):
        return ExitCode.TERMINATED
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(exc, e.BudgetError):
        # The ledger unusable, locked by another run, or the same query being charged
        # by another process right now: unavailable, retry later.
        if isinstance(exc, e.LedgerError | e.ChargeInProgress):
            return ExitCode.UNAVAILABLE
        if isinstance(exc, e.UnknownTicket):
            return ExitCode.USAGE
        return ExitCode.BUDGET  # exceeded, pending, in progress, failed-after-read
    if isinstance(exc, e.ModelError):
        return ExitCode.MODEL
    if isinstance(exc, e.InvalidWindow):  # a malformed, future or unfinished week (a DataError)
        return ExitCode.USAGE
    if isinstance(exc, e.InputError | e.ConfigError | e.InvalidPrivacyParameter):
        return ExitCode.USAGE
    if isinstance(exc, e.GuardError | e.TemplateError | e.UnsafeIdentifier):
        return ExitCode.USAGE
    if isinstance(exc, e.DataError | e.RedactionError):
        return ExitCode.UNAVAILABLE
    if isinstance(exc, UnicodeError):
        return ExitCode.USAGE
    if isinstance(exc, OSError | sqlite3.Error):
        return ExitCode.UNAVAILABLE
    if isinstance(exc, e.DPLLMError):
        return ExitCode.USAGE
    return ExitCode.INTERNAL


def _message(exc: BaseException) -> str:
    from dpllm.errors import DPLLMError

    if isinstance(exc, DPLLMError):
        return str(exc)
    if isinstance(exc, UnicodeError):
        return (
            f"cannot decode the input ({exc.__class__.__name__}: {exc}); save it as UTF-8, "
            "or pass the file's encoding where the command takes --encoding"
        )
    if isinstance(exc, sqlite3.Error):
        return f"cannot use the SQLite database: {exc}; check the path and its permissions"
    if isinstance(exc, OSError):
        where = f" {exc.filename}" if exc.filename else ""
        return f"cannot use{where}: {exc.strerror or exc}; check the path and its permissions"
    return (
        f"internal error: {exc.__class__.__name__}: {exc}. This is a bug in dpllm; "
        "rerun with --verbose and report the traceback"
    )


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> typer.Exit:
    """Print ``error: message`` on stderr and return the :class:`typer.Exit` to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(int(code))


# ---------------------------------------------------------------- verbosity


_META_QUIET = "dpllm.quiet"
_META_VERBOSE = "dpllm.verbose"


def _meta_flag(key: str) -> bool:
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(key))


def is_quiet() -> bool:
    """``--quiet`` was given: print results only (no progress, notes or summaries)."""
    return _meta_flag(_META_QUIET)


def is_verbose() -> bool:
    """``--verbose`` was given: more detail, and the traceback of an unexpected error."""
    return _meta_flag(_META_VERBOSE)


def _remember(key: str) -> Any:
    def callback(ctx: typer.Context, value: bool) -> None:
        if value:
            ctx.meta[key] = True

    return callback


def _verbosity_params() -> list[Any]:
    """Fresh ``--quiet``/``--verbose`` parameters (copies of one Typer-built template)."""
    import copy

    return [copy.copy(p) for p in _verbosity_template()]


@functools.cache
def _verbosity_template() -> tuple[Any, ...]:
    """``--quiet``/``--verbose`` built by Typer once (so help renders them like any option)."""
    template = typer.Typer(add_completion=False)

    @template.command()
    def _cmd(
        quiet: Annotated[
            bool,
            typer.Option(
                "--quiet",
                "-q",
                expose_value=False,
                callback=_remember(_META_QUIET),
                help="Print results only: no progress, notes or summaries.",
            ),
        ] = False,
        verbose: Annotated[
            bool,
            typer.Option(
                "--verbose",
                "-v",
                expose_value=False,
                callback=_remember(_META_VERBOSE),
                help="More detail; the traceback of an unexpected error.",
            ),
        ] = False,
    ) -> None:
        """Template of the shared options."""

    return tuple(typer.main.get_command(template).params)


JsonOption = Annotated[
    bool,
    typer.Option("--json", help="Print machine-readable JSON on stdout (schema in the docs)."),
]
"""``--json``: every command that prints results takes it."""

EncodingOption = Annotated[
    str,
    typer.Option(
        "--encoding",
        help="Encoding of the input text (utf-8, gbk, gb18030, utf-16 …).",
    ),
]
"""``--encoding``: every command that reads text takes it."""


# ---------------------------------------------------------------- help rendering


class _Argument(TyperArgument):
    """An argument shown as ``NAME`` / ``[NAME]`` in the usage line (not ``{name}``)."""

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")


def _show_help(ctx: Any, param: Any, value: bool) -> None:
    """``--help``: Typer's rich help; when stdout is not a terminal, without trailing spaces."""
    if not value or ctx.resilient_parsing:
        return
    if sys.stdout.isatty():
        typer.echo(ctx.get_help(), color=ctx.color)
        ctx.exit()
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):  # Typer's rich help prints to sys.stdout
        text = ctx.get_help()
    lines = (buffer.getvalue() + text).splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    typer.echo("\n".join(line.rstrip() for line in lines))
    ctx.exit()


def _own_help_option(command: Any, help_names: list[str]) -> None:
    # The help option is built lazily; build it now so it renders like any flag.
    help_option = command.get_help_option(typer.Context(command, help_option_names=help_names))
    if help_option is not None:
        help_option.metavar = ""
        help_option.callback = _show_help


def _polish(command: Any, help_names: list[str]) -> None:
    """Apply the convention to one built command and, recursively, its subcommands."""
    params = list(command.params)
    names = {opt for p in params for opt in (*p.opts, *p.secondary_opts)}
    is_group = isinstance(command, TyperGroup)
    runs_itself = not is_group or command.invoke_without_command
    if runs_itself and "--quiet" not in names:
        command.params.extend(_verbosity_params())
    for param in command.params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""  # no "<bool>" beside a flag
        elif isinstance(param, TyperArgument):
            if param.metavar is None and param.name:
                param.metavar = param.name.upper()
            if type(param) is TyperArgument:
                param.__class__ = _Argument
    _own_help_option(command, help_names)
    if is_group:
        for sub in command.commands.values():
            _polish(sub, help_names)


HELP_OPTION_NAMES = ["-h", "--help"]


class DpllmGroup(TyperGroup):
    """The root group: applies the convention to every command and maps errors to exit codes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for sub in self.commands.values():
            _polish(sub, HELP_OPTION_NAMES)
        _own_help_option(self, HELP_OPTION_NAMES)

    def get_params(self, ctx: Any) -> list[Any]:
        # Typer appends the completion options after __init__, so flags are fixed here.
        params: list[Any] = super().get_params(ctx)
        for param in params:
            if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
                param.metavar = ""
        return params

    def invoke(self, ctx: Any) -> Any:
        from typer._click.exceptions import ClickException

        try:
            return super().invoke(ctx)
        except (typer.Exit, ClickException, typer.Abort, BrokenPipeError):
            raise  # Typer's own handling: messages, usage errors, `| head` closing the pipe
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except Exception as exc:  # noqa: BLE001 - the one place every error becomes a message
            code = exit_code_for(exc)
            if code is ExitCode.INTERNAL and ctx.meta.get(_META_VERBOSE):
                traceback.print_exception(exc, file=sys.stderr)
            raise fail(_message(exc), code) from None


# ---------------------------------------------------------------- output


def console(*, stderr: bool = False) -> Console:
    """A rich console: terminal width on a terminal; unwrapped (wide) when piped.

    Colours follow ``NO_COLOR`` (rich reads it) and are off when not a terminal.
    """
    from rich.console import Console

    probe = Console(stderr=stderr)
    if probe.is_terminal:
        return probe
    return Console(stderr=stderr, width=10_000, soft_wrap=True, color_system=None)


def emit(*renderables: RenderableType, stderr: bool = False) -> None:
    """Print rich renderables; when not a terminal, without wrapping or trailing spaces."""
    out = console(stderr=stderr)
    if out.is_terminal:
        for item in renderables:
            out.print(item)
        return
    with out.capture() as captured:
        for item in renderables:
            out.print(item)
    text = "\n".join(line.rstrip() for line in captured.get().splitlines())
    stream = sys.stderr if stderr else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def info(message: str) -> None:
    """A note for people (stderr), silenced by ``--quiet``."""
    if not is_quiet():
        typer.echo(message, err=True)


def print_json(payload: Any) -> None:
    """JSON on stdout: UTF-8, indented, keys in the order given."""
    typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))


@contextmanager
def status(message: str) -> Iterator[None]:
    """Show a step that may take over a second.

    On a terminal: a rich spinner on stderr with the elapsed time. Piped: one
    plain ``message …`` line on stderr. With ``--quiet``: nothing.
    """
    if is_quiet():
        yield
        return
    err = console(stderr=True)
    if not err.is_terminal:
        typer.echo(f"{message} …", err=True)
        yield
        return
    with err.status(message):
        yield


# ---------------------------------------------------------------- input


MAX_INPUT_BYTES = 256 * 1024 * 1024
"""The most a command reads from one text input (``/dev/zero`` or ``yes |`` never end)."""


def _read_capped(stream: BinaryIO, name: str, *, utf16: bool) -> bytes:
    """Read ``stream`` whole, refusing binary input at once and text past the cap."""
    from dpllm.errors import InputError

    first = stream.read(8192)
    if b"\x00" in first and not utf16:
        raise InputError(f"{name} looks binary (it holds NUL bytes); give a text file")
    chunks, size = [first], len(first)
    while chunk := stream.read(1 << 20):
        size += len(chunk)
        if size > MAX_INPUT_BYTES:
            raise InputError(
                f"{name} is larger than {MAX_INPUT_BYTES >> 20} MiB; split it into smaller files"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def read_text_input(file: str, *, encoding: str = "utf-8") -> str:
    """The text of ``file`` (or standard input for ``-``), decoded with ``encoding``.

    Raises:
        InputError: unknown encoding, missing file, a directory, no permission,
            binary content, or bytes that are not valid in ``encoding`` — each with
            what to do next.
    """
    from dpllm.errors import InputError

    try:
        codecs.lookup(encoding)
    except LookupError:
        raise InputError(
            f"unknown encoding {encoding!r}; use a Python codec name such as utf-8 or gbk"
        ) from None
    try:
        b"a".decode(encoding)  # rot13, base64, zlib … are codecs but not text encodings
    except LookupError:
        raise InputError(
            f"{encoding!r} is not a text encoding; use one such as utf-8, gbk or utf-16"
        ) from None
    except UnicodeError:
        pass  # a text encoding to which one byte is too short (utf-16, utf-32)
    name = "standard input" if file == "-" else file
    utf16 = encoding.lower().replace("-", "").startswith("utf16")
    try:
        if file == "-":
            raw = _read_capped(sys.stdin.buffer, name, utf16=utf16)
        else:
            path = Path(file)
            if path.is_dir():
                raise InputError(f"{file} is a directory; give a text file (or - for stdin)")
            with path.open("rb") as stream:
                raw = _read_capped(stream, name, utf16=utf16)
    except FileNotFoundError:
        raise InputError(f"{name} does not exist; check the path") from None
    except PermissionError:
        raise InputError(
            f"no permission to read {name}; check its permissions (ls -l {file})"
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}") from None
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        hint = " (try --encoding gbk or gb18030 for Chinese text)" if encoding != "gbk" else ""
        raise InputError(
            f"{name} is not valid {encoding} at byte {exc.start}; pass --encoding with its "
            f"encoding{hint}"
        ) from None
    return text.removeprefix("\ufeff")


@contextmanager
def steps(title: str, *, total: int) -> Iterator[Any]:
    """A multi-step task: yields ``advance(description)``.

    On a terminal: a rich progress line (spinner, step, elapsed time) on stderr
    that disappears when done. Piped: one plain line per step on stderr. With
    ``--quiet``: nothing.
    """
    if is_quiet():
        yield lambda description: None
        return
    err = console(stderr=True)
    if not err.is_terminal:
        typer.echo(f"{title} …", err=True)
        yield lambda description: typer.echo(f"  {description} …", err=True)
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task(title, total=total)
        yield lambda description: progress.update(task, description=description, advance=1)


def exit_code(error: BaseException) -> int:
    """The exit code of an error, as an ``int`` (see :func:`exit_code_for`)."""
    return int(exit_code_for(error))


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so it unwinds like Ctrl-C.

    A ``KeyboardInterrupt`` is not an :class:`Exception`: the ledger treats it as an
    interruption from outside (a charge it cuts short is kept, unreleased, for the
    rerun to take over), never as a data-dependent failure.
    """


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Terminated` (the main thread only)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: FrameType | None) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
