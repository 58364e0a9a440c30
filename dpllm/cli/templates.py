"""``dpllm templates``: lint prompt templates and preview them with synthetic releases."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register"]

_SUFFIXES = (".j2", ".jinja", ".jinja2")


def _template_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix in _SUFFIXES))
        elif path.is_file():
            files.append(path)
        else:
            raise typer.BadParameter(f"{path} does not exist", param_hint="PATH")
    return files


def lint_command(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Template files or folders (default: the built-in prompts/)."),
    ] = None,
) -> None:
    """Lint templates: every Release must be printed through a DP filter.

    Prints ``file:line:col: CODE message`` per finding and exits 1 when there are any.
    """
    from dpllm.templates import PromptEnvironment, builtin_prompts_dir

    env = PromptEnvironment()
    files = _template_files(paths or [builtin_prompts_dir()])
    findings = 0
    for file in files:
        try:
            source = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            typer.echo(f"{file}:1:1: DP010 cannot read the template: {exc}")
            findings += 1
            continue
        for issue in env.lint(source):
            typer.echo(issue.format(str(file)))
            findings += 1
    if findings:
        typer.echo(f"{findings} finding(s) in {len(files)} template(s)", err=True)
        raise typer.Exit(1)
    typer.echo(f"{len(files)} template(s) lint clean", err=True)


def preview_command(
    template: Annotated[
        str,
        typer.Argument(
            help="A prompt (weekly), a template name (weekly/user.en.j2) or a template file."
        ),
    ],
    lang: Annotated[str, typer.Option("--lang", help="zh or en.")] = "en",
) -> None:
    """Render a template with synthetic releases, marked [SEEDED — NOT FOR PUBLICATION]."""
    from dpllm.errors import TemplateError
    from dpllm.templates import PromptEnvironment, synthetic_context

    if lang not in ("en", "zh"):
        raise typer.BadParameter("use zh or en", param_hint="--lang")
    path = Path(template)
    search: list[Path] = []
    if path.is_file():
        search, template = [path.parent], path.name
    env = PromptEnvironment(search, lang=lang, allow_seeded=True)
    try:
        if template.endswith(_SUFFIXES):
            text = env.render(template, synthetic_context(env.declaration(template)))
            typer.echo(text, nl=False)
            return
        names = [f"{template}/{part}.{lang}.j2" for part in ("system", "user", "fallback")]
        for name in names:
            typer.echo(f"===== {name} (synthetic releases) =====")
            typer.echo(env.render(name, synthetic_context(env.declaration(name))), nl=False)
    except TemplateError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def register(app: typer.Typer) -> None:
    """Add the ``templates`` command group to the dpllm CLI."""
    group = typer.Typer(
        name="templates", help="Lint and preview prompt templates.", no_args_is_help=True
    )
    group.command("lint")(lint_command)
    group.command("preview")(preview_command)
    app.add_typer(group, name="templates")
