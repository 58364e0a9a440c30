"""``dpllm templates``: lint prompt templates and preview them with synthetic releases."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dpllm.cli._common import ExitCode, JsonOption, fail, info, print_json

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
    as_json: JsonOption = False,
) -> None:
    """Lint templates: every Release must be printed through a DP filter.

    Prints one file:line:col: CODE message line per finding and exits 1 when there are any.
    """
    from dpllm.templates import PromptEnvironment, builtin_prompts_dir

    env = PromptEnvironment()
    files = _template_files(paths or [builtin_prompts_dir()])
    found: list[dict[str, object]] = []
    for file in files:
        try:
            source = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            found.append(
                {"file": str(file), "line": 1, "col": 1, "code": "DP010",
                 "message": f"cannot read the template: {exc}",
                 "text": f"{file}:1:1: DP010 cannot read the template: {exc}"}
            )  # fmt: skip
            continue
        for issue in env.lint(source):
            found.append(
                {"file": str(file), "line": issue.line, "col": issue.column, "code": issue.code,
                 "message": issue.message, "text": issue.format(str(file))}
            )  # fmt: skip
    if as_json:
        print_json([{k: v for k, v in item.items() if k != "text"} for item in found])
    else:
        for item in found:
            typer.echo(str(item["text"]))
    if found:
        info(f"{len(found)} finding(s) in {len(files)} template(s)")
        raise typer.Exit(1)
    info(f"{len(files)} template(s) lint clean")


def preview_command(
    template: Annotated[
        str,
        typer.Argument(
            help="A prompt (weekly), a template name (weekly/user.en.j2) or a template file."
        ),
    ],
    lang: Annotated[str, typer.Option("--lang", help="zh or en.")] = "en",
    as_json: JsonOption = False,
) -> None:
    """Render a template with synthetic releases, marked [SEEDED — NOT FOR PUBLICATION]."""
    from dpllm.errors import TemplateError, TemplateLintError
    from dpllm.templates import PromptEnvironment, synthetic_context

    if lang not in ("en", "zh"):
        raise typer.BadParameter("use zh or en", param_hint="--lang")
    path = Path(template)
    search: list[Path] = []
    if path.is_file():
        search, template = [path.parent], path.name
    env = PromptEnvironment(search, lang=lang, allow_seeded=True)
    if template.endswith(_SUFFIXES):
        names = [template]
    else:
        names = [f"{template}/{part}.{lang}.j2" for part in ("system", "user", "fallback")]
    try:
        rendered = {n: env.render(n, synthetic_context(env.declaration(n))) for n in names}
    except TemplateLintError as exc:
        raise fail(str(exc), ExitCode.FINDINGS) from exc  # lint findings, as in `lint`
    except TemplateError as exc:
        raise fail(str(exc), ExitCode.USAGE) from exc
    if as_json:
        print_json({"seeded": True, "templates": rendered})
    elif len(names) == 1:
        typer.echo(rendered[names[0]], nl=False)
    else:
        for name, text in rendered.items():
            typer.echo(f"===== {name} (synthetic releases) =====")
            typer.echo(text, nl=False)


def register(app: typer.Typer) -> None:
    """Add the ``templates`` command group to the dpllm CLI."""
    group = typer.Typer(
        name="templates", help="Lint and preview prompt templates.", no_args_is_help=True
    )
    group.command("lint")(lint_command)
    group.command("preview")(preview_command)
    app.add_typer(group, name="templates")
