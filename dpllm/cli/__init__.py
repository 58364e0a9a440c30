"""The ``dpllm`` command line (Typer).

Each topic lives in its own module in this package and exposes
``register(app: typer.Typer) -> None``; modules are discovered here, so adding a
command group never edits this file. Topic modules import heavy dependencies
(Presidio, spaCy, DuckDB …) inside their commands, so ``dpllm --help`` stays fast.

The root group (:class:`dpllm.cli._common.DpllmGroup`) applies the CLI
convention to every registered command (``--quiet``/``--verbose``, help
rendering) and turns every error into a message and a documented exit code;
see ``docs/cli-conventions.md``.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Annotated

import typer

from dpllm.cli._common import EXIT_CODES_HELP, HELP_OPTION_NAMES, DpllmGroup, JsonOption

__all__ = ["app", "main"]

app = typer.Typer(
    name="dpllm",
    cls=DpllmGroup,
    help="Differentially private statistics for LLM prompts, with redaction and a precision guard.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": HELP_OPTION_NAMES},
)


def _print_version(value: bool) -> None:
    if value:
        from dpllm import __version__

        typer.echo(f"dpllm {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            is_eager=True,
            expose_value=False,
            callback=_print_version,
            help="Print dpllm's version and exit.",
        ),
    ] = False,
) -> None:
    """dpllm: DP statistics in LLM prompts, redacted and precision-guarded."""


@app.command()
def version(as_json: JsonOption = False) -> None:
    """Print dpllm's version."""
    from dpllm import __version__
    from dpllm.cli._common import print_json

    if as_json:
        print_json({"version": __version__})
    else:
        typer.echo(__version__)


def _register_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(app)


_register_all()


def main() -> None:
    """Console-script entry point."""
    app()
