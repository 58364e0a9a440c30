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

from dpllm.cli._common import (
    EncodingOption,
    ExitCode,
    JsonOption,
    fail,
    info,
    print_json,
    read_text_input,
    status,
)

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
    return fail(message, ExitCode.UNAVAILABLE)


def _redactor(**kwargs: Any) -> Any:
    from dpllm.errors import RedactionError
    from dpllm.redact import Redactor

    with status("loading the redactor (Presidio, spaCy, jieba)"):
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
        encoding: EncodingOption = "utf-8",
        as_json: JsonOption = False,
    ) -> None:
        """Redact FILE (or stdin) to stdout; counts per entity go to stderr."""
        from dpllm.errors import RedactionError

        _quiet_jieba()
        content = read_text_input(file, encoding=encoding)
        key: bytes | None = None
        if operator is _Op.HASH:
            raw = os.environ.get(KEY_ENV)
            try:
                key = bytes.fromhex(raw) if raw else secrets.token_bytes(32)
            except ValueError as exc:
                raise fail(f"${KEY_ENV} must be hex (≥ 32 hex digits)", ExitCode.USAGE) from exc
        redactor = _redactor(hmac_key=key)
        try:
            with status(f"redacting {len(content):,} characters"):
                result = redactor.redact(
                    content, language=lang.value, operator=operator.value, allow=allow
                )
        except RedactionError as exc:
            raise _fail(str(exc)) from exc
        if as_json:
            print_json(
                {"language": result.language, "counts": dict(result.counts), "text": result.text}
            )
            return
        sys.stdout.write(result.text)
        counts = ", ".join(f"{k}={v}" for k, v in result.counts.items()) or "nothing found"
        info(f"[{result.language}] {counts}")

    @group.command("eval")
    def evaluate_cmd(
        corpus: Path = typer.Argument(..., help="JSONL corpus: lang, text, spans, decoys, allow."),
        as_json: JsonOption = False,
    ) -> None:
        """Print precision, recall and F1 per entity on a labelled corpus."""
        from dpllm.errors import RedactionError
        from dpllm.redact.evaluate import evaluate, load_corpus

        _quiet_jieba()
        read_text_input(str(corpus))  # a clear error for a missing/odd file
        try:
            records = load_corpus(corpus)
        except RedactionError as exc:
            raise fail(str(exc), ExitCode.USAGE) from exc
        redactor = _redactor()
        try:
            with status(f"evaluating on {len(records)} record(s)"):
                report = evaluate(redactor, records)
        except RedactionError as exc:
            raise _fail(str(exc)) from exc
        if as_json:
            print_json(
                {
                    "texts": report.texts,
                    "decoys": report.decoys,
                    "decoy_hits": dict(report.decoy_hits),
                    "entities": {
                        name: {
                            "tp": s.tp,
                            "fp": s.fp,
                            "fn": s.fn,
                            "precision": s.precision,
                            "recall": s.recall,
                            "f1": s.f1,
                        }
                        for name, s in report.scores.items()
                    },
                }
            )
            return
        typer.echo(report.table())

    app.add_typer(group, name="redact")
