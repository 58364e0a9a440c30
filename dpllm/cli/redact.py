"""``dpllm redact``: redact a file or stdin, or evaluate the redactor on a labelled corpus.

``dpllm redact [FILE|-] [--lang auto|zh|en] [--operator replace|mask|hash]`` and
``dpllm redact eval CORPUS``. Presidio and spaCy are imported inside the commands so that
``dpllm --help`` stays fast.
"""

from __future__ import annotations

import os
import secrets
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

__all__ = ["register"]

KEY_ENV = "DPLLM_REDACT_KEY"


class _Lang(StrEnum):
    AUTO = "auto"
    ZH = "zh"
    EN = "en"


class _Op(StrEnum):
    REPLACE = "replace"
    MASK = "mask"
    HASH = "hash"


class _DefaultToText(TyperGroup):
    """Runs ``text`` when the first argument is not a subcommand (``dpllm redact FILE``)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # click Context (vendored)
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["text", *args]
        return super().parse_args(ctx, args)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _redactor(**kwargs: Any) -> Any:
    from dpllm.errors import RedactionError
    from dpllm.redact import Redactor

    try:
        return Redactor(**kwargs)
    except RedactionError as exc:
        raise _fail(str(exc)) from exc


def _quiet_jieba() -> None:
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)  # jieba sets its logger to DEBUG on import


def register(app: typer.Typer) -> None:
    """Add the ``redact`` command group to the dpllm CLI."""
    group = typer.Typer(
        cls=_DefaultToText,
        help="Redact personal data (zh/en, offline), or evaluate on a labelled corpus.",
        no_args_is_help=False,
    )

    @group.command("text")
    def text(
        file: str = typer.Argument("-", help="A UTF-8 text file, or - for stdin."),
        lang: _Lang = typer.Option(_Lang.AUTO, "--lang", help="Language, or auto by CJK share."),
        operator: _Op = typer.Option(
            _Op.REPLACE,
            "--operator",
            help=f"replace: typed placeholders; mask: ****; hash: keyed HMAC tokens "
            f"(key from ${KEY_ENV} as hex, else a random key for this run).",
        ),
        allow: list[str] = typer.Option([], "--allow", help="A string never to redact."),
    ) -> None:
        """Redact FILE (or stdin) to stdout; counts per entity go to stderr."""
        from dpllm.errors import RedactionError

        _quiet_jieba()
        try:
            content = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _fail(f"cannot read {file}: {exc}") from exc
        key: bytes | None = None
        if operator is _Op.HASH:
            raw = os.environ.get(KEY_ENV)
            try:
                key = bytes.fromhex(raw) if raw else secrets.token_bytes(32)
            except ValueError as exc:
                raise _fail(f"${KEY_ENV} must be hex (≥ 32 hex digits)") from exc
        redactor = _redactor(hmac_key=key)
        try:
            result = redactor.redact(
                content, language=lang.value, operator=operator.value, allow=allow
            )
        except RedactionError as exc:
            raise _fail(str(exc)) from exc
        sys.stdout.write(result.text)
        counts = ", ".join(f"{k}={v}" for k, v in result.counts.items()) or "nothing found"
        typer.echo(f"[{result.language}] {counts}", err=True)

    @group.command("eval")
    def evaluate_cmd(
        corpus: Path = typer.Argument(..., help="JSONL corpus: lang, text, spans, decoys, allow."),
    ) -> None:
        """Print precision, recall and F1 per entity on a labelled corpus."""
        from dpllm.errors import RedactionError
        from dpllm.redact.evaluate import evaluate, load_corpus

        _quiet_jieba()
        try:
            records = load_corpus(corpus)
            report = evaluate(_redactor(), records)
        except RedactionError as exc:
            raise _fail(str(exc)) from exc
        typer.echo(report.table())

    app.add_typer(group, name="redact")
