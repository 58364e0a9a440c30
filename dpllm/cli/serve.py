"""``dpllm serve``: run the OpenAI-compatible proxy; ``dpllm serve hash-key``: hash an API key.

The server reads its configuration (``-c FILE``, else ``./dpllm.toml``, else
``$DPLLM_CONFIG``), whose ``[ledger] url`` may be an SQLite file or a
``postgresql://`` ledger that several replicas share, and the environment (``OPENAI_API_KEY``,
``OPENAI_BASE_URL``, ``DPLLM_MODEL``, ``DPLLM_LEDGER``) here, at the edge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dpllm.cli._common import (
    ConfigOption,
    ExitCode,
    JsonOption,
    exit_code_for,
    fail,
    find_config,
    print_json,
)

__all__ = ["register", "serve_app", "worker_app"]

serve_app = typer.Typer(
    name="serve",
    help="Run the OpenAI-compatible proxy (chat, DP statistics, budget).",
    invoke_without_command=True,
)


@serve_app.callback()
def serve(
    ctx: typer.Context,
    config: ConfigOption = None,
    host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to bind.")] = 8000,
    log_level: Annotated[
        str, typer.Option("--log-level", help="debug, info, warning, error or critical")
    ] = "info",
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            help="Worker processes (each loads its own redactor; they share the ledger).",
        ),
    ] = 1,
) -> None:
    """Serve the proxy described by CONFIG on HOST:PORT."""
    if ctx.invoked_subcommand is not None:
        return
    if log_level not in _LOG_LEVELS:
        raise typer.BadParameter(
            f"must be one of {', '.join(_LOG_LEVELS)}, got {log_level!r}", param_hint="--log-level"
        )
    import logging
    import os

    from dpllm._extras import require
    from dpllm.config import Settings
    from dpllm.errors import DPLLMError, MissingExtra

    try:
        require("uvicorn", extra="server", feature="dpllm serve")
        from dpllm.server import create_app
        from dpllm.server.logging import configure_json_logging
        from dpllm.server.protocol import uvicorn_options
    except MissingExtra as exc:  # installed without the [server] extra
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    import uvicorn

    from dpllm.errors import ConfigError

    _check_port(host, port)
    try:
        found = find_config(config, cwd=Path.cwd(), environ=os.environ)
        if found is None:
            raise ConfigError(
                "no dpllm.toml here and $DPLLM_CONFIG is not set; the server needs its "
                "[[server.keys]]: pass -c FILE, or create one with `dpllm init`"
            )
        settings = Settings.load(found).from_env(os.environ)
        if not settings.api_keys:
            typer.echo(
                "warning: no [[server.keys]] configured: every request will be refused (401). "
                "Make one with `dpllm serve hash-key`",
                err=True,
            )
        configure_json_logging(getattr(logging, log_level.upper(), logging.INFO))
        if workers > 1:
            # Each worker process builds its own app from the same config file
            # (validated above, so a bad file fails here, once, not per worker).
            os.environ[_CONFIG_ENV] = os.path.abspath(found)
            uvicorn.run(
                f"{__name__}:worker_app",
                factory=True,
                workers=workers,
                host=host,
                port=port,
                log_level=log_level,
                access_log=False,
                ws="none",
                **uvicorn_options(settings.server_limits),
            )
            return
        app = create_app(settings, environ=os.environ)
    except DPLLMError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        ws="none",
        **uvicorn_options(settings.server_limits),
    )


_CONFIG_ENV = "DPLLM_SERVE_CONFIG"


_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def _check_port(host: str, port: int) -> None:
    """Fail with exit 4 and a clear message when HOST:PORT cannot be bound.

    uvicorn would log the bind error and exit with its own status; checking first
    (with the same SO_REUSEADDR uvicorn uses) gives the documented code. A port
    taken between this check and uvicorn's bind still fails, in uvicorn's words.
    """
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            hint = (
                "stop the process using it or pick another port with --port"
                if not isinstance(exc, socket.gaierror)
                else "check --host (an address of this machine, e.g. 127.0.0.1 or 0.0.0.0)"
            )
            raise fail(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; {hint}",
                ExitCode.UNAVAILABLE,
            ) from None


def worker_app() -> Any:
    """The app of one ``--workers`` process (an edge: reads the environment)."""
    import os

    from dpllm.config import Settings
    from dpllm.server import create_app

    settings = Settings.load(os.environ[_CONFIG_ENV]).from_env(os.environ)
    return create_app(settings, environ=os.environ)


@serve_app.command("hash-key")
def hash_key(
    key: Annotated[str | None, typer.Argument(help="The key (prompted for when omitted).")] = None,
    new: Annotated[bool, typer.Option("--new", help="Generate a fresh random key.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Print the sha256: form of an API key (for a server key entry in dpllm.toml)."""
    import secrets

    from dpllm.config import hash_api_key

    if new:
        key = "dpllm-" + secrets.token_urlsafe(32)
    elif key is None:
        key = typer.prompt("API key", hide_input=True)
    if not key:
        raise typer.BadParameter("the key is empty")
    if as_json:
        print_json({"key": key, "hash": hash_api_key(key)} if new else {"hash": hash_api_key(key)})
        return
    if new:
        typer.echo(f"key:  {key}")
    typer.echo(f'hash = "{hash_api_key(key)}"' if new else hash_api_key(key))


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command group to the ``dpllm`` app."""
    app.add_typer(serve_app, name="serve")
