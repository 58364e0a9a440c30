"""What every command shares: the configuration it reads, the ledger it opens, exit codes.

**One configuration.** A command that reads data, the ledger, pools, templates or the
model takes ``-c/--config FILE``. Without it, ``./dpllm.toml`` is used when present,
then the file ``$DPLLM_CONFIG`` names; with neither, dpllm's defaults (relative
paths then resolve against the working directory). The environment overrides
(``DPLLM_LEDGER``, ``OPENAI_*``, ``DPLLM_MODEL``) apply on top, here at the edge
(:meth:`~dpllm.config.Settings.from_env`); nothing below the CLI reads them.

**Either ledger.** :func:`open_ledger` turns the configured ledger URL (a path,
``sqlite:///path`` or ``postgresql://…``) into its backend through
:func:`dpllm.ledger.factory.open_ledger`; an unknown scheme is a
:class:`~dpllm.errors.ConfigError`, never a file named like a URL.

**Exit codes** (for schedulers and alerting):

====  ======================================================================
0     done
1     findings (lint, audit), or an error no other code covers
2     usage or input error: bad option, bad config (field and line named), bad week
3     privacy budget: refused, or queued for approval (nothing was spent)
4     the data or the ledger is unavailable (missing source, unreachable
      database, locked: another run of the same week is in progress)
5     the model failed (the message says whether a fallback was written)
130   interrupted (Ctrl-C / SIGINT); 143: terminated (SIGTERM). What was kept
      and the command that resumes are printed.
====  ======================================================================
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from dpllm.config import Settings
    from dpllm.ledger.factory import ManagedLedger

__all__ = [
    "CONFIG_ENV",
    "EXIT_BUDGET",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_MODEL",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "ConfigOption",
    "LedgerOverride",
    "Terminated",
    "exit_code",
    "find_config",
    "load_settings",
    "open_ledger",
    "terminate_as_interrupt",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3
EXIT_UNAVAILABLE = 4
EXIT_MODEL = 5
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

CONFIG_ENV = "DPLLM_CONFIG"
CONFIG_NAME = "dpllm.toml"

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help=f"The {CONFIG_NAME} (default: ./{CONFIG_NAME}, then ${CONFIG_ENV}, then defaults).",
    ),
]

LedgerOverride = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="Ledger URL: a file path, sqlite:///path or postgresql://user@host/db "
        "(default: [ledger] url of the config, or $DPLLM_LEDGER).",
    ),
]


def find_config(explicit: Path | None, *, cwd: Path, environ: Mapping[str, str]) -> Path | None:
    """The config file a command reads: ``explicit``, ``cwd/dpllm.toml``, ``$DPLLM_CONFIG``.

    Returns ``None`` when none applies (the command uses dpllm's defaults). A path
    that does not exist is returned as is: loading it then fails with a clear error.
    """
    if explicit is not None:
        return explicit
    local = cwd / CONFIG_NAME
    if local.is_file():
        return local
    named = environ.get(CONFIG_ENV, "").strip()
    return Path(named) if named else None


def load_settings(
    explicit: Path | None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    ledger: str | None = None,
) -> Settings:
    """The settings of a command: the found config (or defaults), environment applied.

    Args:
        explicit: ``-c/--config``.
        environ: the environment (default ``os.environ``; read here, at the edge).
        cwd: the working directory (default: the process's).
        ledger: a ``--ledger`` URL, which wins over the config and ``$DPLLM_LEDGER``
            (a relative path is relative to the working directory).

    Raises:
        ConfigError: the config cannot be read or is invalid (field and line named).
    """
    import dataclasses

    from dpllm.config import Settings

    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    path = find_config(explicit, cwd=cwd, environ=environ)
    settings = Settings.load(path) if path is not None else Settings(base_dir=str(cwd))
    settings = settings.from_env(environ)
    if ledger is not None:
        from dpllm.ledger.factory import ledger_kind

        if ledger_kind(ledger) == "sqlite" and "://" not in ledger:
            ledger = str((cwd / ledger).resolve())
        settings = dataclasses.replace(settings, ledger=ledger)
    return settings


def open_ledger(settings: Settings, *, create: bool = True) -> ManagedLedger:
    """The ledger ``settings`` name, SQLite or PostgreSQL (see the module docstring).

    Raises:
        ConfigError: an unknown URL scheme. LedgerUnavailable: it cannot be opened.
    """
    from dpllm.ledger.factory import open_ledger as open_url

    return open_url(settings.ledger, base_dir=settings.base_dir, create=create)


def exit_code(error: BaseException) -> int:
    """The exit code of an error (the table in the module docstring)."""
    from dpllm.errors import (
        BudgetError,
        ChargeInProgress,
        ConfigError,
        DataError,
        InvalidPrivacyParameter,
        LedgerError,
        ModelError,
        TemplateError,
        UnknownTicket,
    )

    if isinstance(error, Terminated):
        return EXIT_TERMINATED
    if isinstance(error, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(error, UnknownTicket):
        return EXIT_USAGE
    if isinstance(error, LedgerError | ChargeInProgress | DataError):
        return EXIT_UNAVAILABLE
    if isinstance(error, BudgetError):
        return EXIT_BUDGET
    if isinstance(error, ConfigError | TemplateError | InvalidPrivacyParameter):
        return EXIT_USAGE
    if isinstance(error, ModelError):
        return EXIT_MODEL
    return EXIT_ERROR


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
