"""The configuration and the ledger every command reads (re-exported by :mod:`dpllm.cli._common`).

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
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from dpllm.config import Settings
    from dpllm.ledger.factory import ManagedLedger

__all__ = [
    "CONFIG_ENV",
    "CONFIG_NAME",
    "ConfigOption",
    "LedgerOverride",
    "find_config",
    "load_settings",
    "open_ledger",
]

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
