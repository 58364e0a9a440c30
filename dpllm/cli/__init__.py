"""The ``dpllm`` command line (Typer).

Each topic lives in its own module in this package and exposes
``register(app: typer.Typer) -> None``; modules are discovered here, so adding a
command group never edits this file. Topic modules import heavy dependencies
(Presidio, spaCy, DuckDB …) inside their commands, so ``dpllm --help`` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    name="dpllm",
    help="Differentially private statistics for LLM prompts, with redaction and a precision guard.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """dpllm: DP statistics in LLM prompts, redacted and precision-guarded."""


@app.command()
def version() -> None:
    """Print dpllm's version."""
    from dpllm import __version__

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
