"""The CLI reference, generated from the Typer app: a mkdocs hook and a script.

As a hook (``hooks:`` in ``mkdocs.yml``) it replaces the marker
``<!-- dpllm-cli-reference -->`` in ``docs/reference/cli.md`` with one section per
command: usage, help text, arguments and options, read from the Click command tree
that Typer builds. Nothing is copied by hand, so the page cannot drift from the
code. ``python scripts/docs_cli_reference.py`` prints the same Markdown.
"""

from __future__ import annotations

import html
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- dpllm-cli-reference -->"


# Typer builds its command tree with its own copy of Click (``typer._click``), so the
# objects are read by duck typing rather than isinstance checks against ``click``.
Command = Any
Context = Any
Param = Any


def _is_group(cmd: Command) -> bool:
    return hasattr(cmd, "list_commands")


def _commands(
    cmd: Command, path: list[str], parent: Context | None
) -> Iterator[tuple[list[str], Command, Context]]:
    ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent)
    yield path, cmd, ctx
    if _is_group(cmd):
        for name in sorted(cmd.list_commands(ctx)):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _commands(sub, [*path, name], ctx)


def _cell(text: str) -> str:
    text = re.sub(r"\[/?(bold|dim|italic|red|green|yellow|cyan|b|i)\]", "", text)
    return " ".join(text.split()).replace("|", "\\|")


def _code(text: str) -> str:
    """Inline code that may hold ``|`` inside a table cell (a code span would show ``\\|``)."""
    escaped = html.escape(" ".join(text.split())).replace("|", "&#124;")
    return f"<code>{escaped}</code>"


def _help(cmd: Command) -> str:
    text = (cmd.help or "").strip()
    # Click's \b marks a paragraph that must not be rewrapped; Markdown needs no marker.
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b")


def _param_row(param: Param, ctx: Context) -> str:
    """One table row, from the same help record ``--help`` prints."""
    record = param.get_help_record(ctx)
    if record is None:
        names, what = param.name.upper(), getattr(param, "help", None) or ""
    else:
        names, what = record
    required = " **required**" if param.required and "required" not in what else ""
    return f"| {_code(names)} | {_cell(what)}{required} |"


def reference() -> str:
    """The Markdown of every ``dpllm`` command."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import typer.main

    from dpllm.cli import app

    root = typer.main.get_command(app)
    parts: list[str] = []
    for path, cmd, ctx in _commands(root, ["dpllm"], None):
        title = " ".join(path)
        parts.append(f"## `{title}`\n")
        usage = " ".join([title, *cmd.collect_usage_pieces(ctx)])
        parts.append(f"```text\n{usage}\n```\n")
        if cmd.help:
            parts.append(_help(cmd) + "\n")
        params = [
            p for p in cmd.get_params(ctx) if not getattr(p, "hidden", False) and p.name != "help"
        ]
        args = [p for p in params if p.param_type_name == "argument"]
        opts = [p for p in params if p.param_type_name == "option"]
        if args:
            parts.append("| argument | |\n|---|---|")
            parts.extend(_param_row(p, ctx) for p in args)
            parts.append("")
        if opts:
            parts.append("| option | |\n|---|---|")
            parts.extend(_param_row(p, ctx) for p in opts)
            parts.append("")
        if _is_group(cmd):
            subs = sorted(cmd.list_commands(ctx))
            parts.append("Commands: " + ", ".join(f"`{title} {s}`" for s in subs) + ".\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs hook: fill the marker of the CLI reference page."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())


if __name__ == "__main__":
    print(reference())
