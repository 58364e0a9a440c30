"""The prompt environment: a Jinja sandbox that renders Releases only through DP filters.

:class:`PromptEnvironment` wraps an ``ImmutableSandboxedEnvironment`` with
``StrictUndefined`` and a loader over user folders and the built-in ``prompts/``.
Every render:

1. reads the template's ``{#- dpllm ... -#}`` declaration and (by default) lints it,
   refusing a template with findings;
2. checks the context: Releases under names declared as ``releases``, public
   metadata (str, numbers, booleans, dates, lists/dicts of them) under the rest;
   anything else is refused, and undeclared names are not passed on;
3. refuses seeded (test) releases unless ``allow_seeded=True``, in which case the
   text starts with :data:`SEEDED_MARK`;
4. renders, binding the DP filters to the language and recording every figure they
   emit (``.figures`` on the result, for the redactor's allow-list).

A Release that still reaches text unfiltered raises :class:`~dpllm.errors.RawReleaseError`
(its ``str`` refuses), and the sandbox refuses private attributes, the raw fields
of a Release, ranges above ``max_range`` items and huge ``*``/``**`` results.

Privacy: rendering is post-processing of Releases: free. The context may hold no
statistic that is not a Release.
"""

from __future__ import annotations

import datetime as _dt
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import jinja2
from jinja2 import FileSystemLoader, StrictUndefined, pass_context
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import generate_lorem_ipsum

from dpllm.errors import (
    RawReleaseError,
    TemplateError,
    TemplateLintError,
    TemplateSecurityError,
    TemplateUndefinedError,
)
from dpllm.release import Release
from dpllm.templates.declaration import Declaration
from dpllm.templates.filters import FILTERS, LANGS, Phrase
from dpllm.templates.limits import (
    MAX_OUTPUT_CHARS,
    check_call,
    check_str_format,
    guard_filters,
    guarded_lipsum,
)
from dpllm.templates.lint import RELEASE_ATTRIBUTES, RELEASE_VALUED_ATTRIBUTES, LintIssue, lint

__all__ = [
    "DEFAULT_MAX_RANGE",
    "SEEDED_MARK",
    "Messages",
    "PromptEnvironment",
    "RenderedText",
    "builtin_prompts_dir",
]

SEEDED_MARK = "[SEEDED — NOT FOR PUBLICATION]"
"""First line of any text rendered from seeded (test or synthetic) releases."""

DEFAULT_MAX_RANGE = 1_000
"""Largest ``range()`` a template may build."""

MAX_SEQUENCE_PRODUCT = 100_000
"""Largest string or list a template may build with ``*``."""

TEMPLATE_SUFFIX = ".j2"
_STATE_KEY = "dpllm:render"  # not an identifier, so no template can name it
_PUBLIC_SCALARS = (str, int, float, bool, _dt.date, _dt.time, type(None))
_MAX_METADATA_DEPTH = 8


def builtin_prompts_dir() -> Path:
    """The built-in ``prompts/`` folder.

    Returns:
        ``<checkout>/prompts`` when running from a source checkout, else the copy the
        wheel installs as ``dpllm/_prompts``.
    """
    package = Path(__file__).resolve().parent.parent
    checkout = package.parent / "prompts"
    return checkout if checkout.is_dir() else package / "_prompts"


class RenderedText(str):
    """Rendered text; ``figures`` holds every number string a DP filter wrote into it."""

    figures: frozenset[str]
    template: str
    seeded: bool

    def __new__(
        cls, text: str, *, figures: Iterable[str] = (), template: str = "", seeded: bool = False
    ) -> RenderedText:
        self = super().__new__(cls, text)
        self.figures = frozenset(figures)
        self.template = template
        self.seeded = seeded
        return self


class Messages(list[dict[str, str]]):
    """Chat messages (``{"role": ..., "content": ...}``) plus the figures rendered into them."""

    figures: frozenset[str]
    seeded: bool

    def __init__(
        self,
        messages: Iterable[dict[str, str]],
        *,
        figures: Iterable[str] = (),
        seeded: bool = False,
    ) -> None:
        super().__init__(messages)
        self.figures = frozenset(figures)
        self.seeded = seeded


@dataclass(slots=True)
class _RenderState:
    lang: str
    figures: list[str] = field(default_factory=list)


def _bind(name: str, fn: Callable[..., Phrase]) -> Callable[..., str]:
    @pass_context
    def bound(context: Context, value: Any, *args: Any, **kwargs: Any) -> str:
        state = context.get(_STATE_KEY)
        if not isinstance(state, _RenderState):
            raise TemplateError(f"|{name} ran outside a PromptEnvironment render")
        phrase = fn(value, state.lang, *args, **kwargs)
        state.figures.extend(phrase.figures)
        return str(phrase)

    bound.__name__ = name
    bound.__doc__ = fn.__doc__
    return bound


class _Sandbox(ImmutableSandboxedEnvironment):
    """The sandbox, with Release attributes locked down and size caps on ``*``/``**``."""

    intercepted_binops = frozenset({"*", "**"})

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if isinstance(obj, Release):
            return attr in RELEASE_ATTRIBUTES or attr in RELEASE_VALUED_ATTRIBUTES
        return super().is_safe_attribute(obj, attr, value)

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        check_call(obj, args, kwargs)  # "x".ljust(10**10) and the like
        return super().call(context, obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        fmt, is_map = value.__self__, value.__name__ == "format_map"

        def checked(*args: Any, **kwargs: Any) -> str:
            if is_map:
                mapping = args[0] if args and isinstance(args[0], Mapping) else {}
                check_str_format(fmt, (), dict(mapping))
            else:
                check_str_format(fmt, args, kwargs)
            return wrapped(*args, **kwargs)

        return checked

    def call_binop(self, context: Context, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(times, int):
                    if len(seq) * times > MAX_SEQUENCE_PRODUCT:
                        raise SecurityError(
                            f"'*' would build {len(seq) * times} items; the cap is "
                            f"{MAX_SEQUENCE_PRODUCT}"
                        )
            return operator.mul(left, right)
        if isinstance(right, (int, float)) and abs(right) > 100:
            raise SecurityError(f"'**' with exponent {right} is refused (cap 100)")
        return operator.pow(left, right)


def _check_public(value: object, path: str, depth: int = 0) -> None:
    if isinstance(value, Release):
        raise TemplateError(
            f"{path} holds Release {value.name!r} inside public metadata, where the linter "
            "cannot follow it; pass it under a name declared in 'releases:'"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise TemplateError(f"{path} is {value!r}; metadata must be finite")
    if isinstance(value, _PUBLIC_SCALARS):
        return
    if depth >= _MAX_METADATA_DEPTH:
        raise TemplateError(f"{path} nests deeper than {_MAX_METADATA_DEPTH} levels")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TemplateError(f"{path} has a non-string key {key!r}")
            _check_public(item, f"{path}[{key!r}]", depth + 1)
        return
    if isinstance(value, (list, tuple, set, frozenset)):
        for i, item in enumerate(value):
            _check_public(item, f"{path}[{i}]", depth + 1)
        return
    raise TemplateError(
        f"{path} is a {type(value).__name__}, which is neither a Release nor public metadata "
        "(str, int, float, bool, date, or lists/dicts of them)"
    )


def _template_line(tb: TracebackType | None, filename: str | None) -> int | None:
    line = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in (filename, "<template>"):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class PromptEnvironment:
    """Sandboxed Jinja for prompts, with DP filters, linting and context checks.

    Args:
        search_path: folders searched first for templates (user prompts).
        lang: default language, ``"en"`` or ``"zh"`` (a render may override it).
        metadata: public metadata added to every render (course names from config …).
        include_builtin: also search the built-in ``prompts/`` folder (last).
        allow_seeded: render seeded releases, marking the text with :data:`SEEDED_MARK`
            (for tests and previews); by default they are refused.
        lint_on_render: lint each template before rendering and refuse one with findings.
        max_range: the largest ``range()`` a template may build.

    Raises:
        TemplateError: unknown language or metadata that is not public.

    Privacy: renders Releases through DP filters only (post-processing, free).
    """

    def __init__(
        self,
        search_path: Sequence[str | Path] = (),
        *,
        lang: str = "en",
        metadata: Mapping[str, object] | None = None,
        include_builtin: bool = True,
        allow_seeded: bool = False,
        lint_on_render: bool = True,
        max_range: int = DEFAULT_MAX_RANGE,
    ) -> None:
        if lang not in LANGS:
            raise TemplateError(f"unknown language {lang!r}; use one of {', '.join(LANGS)}")
        paths = [Path(p) for p in search_path]
        if include_builtin:
            paths.append(builtin_prompts_dir())
        self._search_path = tuple(paths)
        self._lang = lang
        self._metadata = dict(metadata or {})
        for key, value in self._metadata.items():
            _check_public(value, f"metadata {key!r}")
        self._allow_seeded = allow_seeded
        self._lint_on_render = lint_on_render
        self._lint_cache: dict[str, list[LintIssue]] = {}
        self._env = _Sandbox(
            loader=FileSystemLoader([str(p) for p in paths]),
            undefined=StrictUndefined,
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
        )
        self._env.filters.update({n: _bind(n, fn) for n, fn in FILTERS.items()})
        guard_filters(self._env.filters)
        self._env.globals["lipsum"] = guarded_lipsum(generate_lorem_ipsum)

        def capped_range(*args: int) -> range:
            rng = range(*args)
            if len(rng) > max_range:
                raise SecurityError(f"range of {len(rng)} items exceeds the cap of {max_range}")
            return rng

        self._env.globals["range"] = capped_range

    # -- introspection ------------------------------------------------------------
    @property
    def lang(self) -> str:
        """The default language."""
        return self._lang

    @property
    def search_path(self) -> tuple[Path, ...]:
        """Folders searched for templates, in order."""
        return self._search_path

    @property
    def filter_names(self) -> frozenset[str]:
        """Every filter a template may use (Jinja's built-ins and the DP filters)."""
        return frozenset(self._env.filters)

    def list_templates(self) -> list[str]:
        """Names of all ``*.j2`` templates on the search path."""
        return sorted(n for n in self._env.list_templates() if n.endswith(TEMPLATE_SUFFIX))

    def source(self, name: str) -> tuple[str, str | None]:
        """The text and file name of template ``name``.

        Raises:
            TemplateError: no such template on the search path.
        """
        loader = self._env.loader
        assert loader is not None
        try:
            text, filename, _ = loader.get_source(self._env, name)
        except jinja2.TemplateNotFound as exc:
            where = ", ".join(str(p) for p in self._search_path)
            raise TemplateError(f"template {name!r} not found in {where}") from exc
        return text, filename

    def declaration(self, name: str) -> Declaration:
        """The declared context of template ``name``.

        Raises:
            TemplateError: no such template, or no / a malformed front matter.
        """
        text, _ = self.source(name)
        return self._declaration(text, name)

    def lint(self, source: str) -> list[LintIssue]:
        """Lint template text against this environment's filters and globals."""
        return lint(
            source,
            filters=self.filter_names,
            tests=frozenset(self._env.tests),
            globals_=frozenset(self._env.globals),
        )

    # -- rendering ----------------------------------------------------------------
    def render(
        self, name: str, context: Mapping[str, object] | None = None, *, lang: str | None = None
    ) -> RenderedText:
        """Render template ``name`` (e.g. ``"weekly/user.en.j2"``).

        Args:
            name: the template's path under a search-path folder.
            context: Releases and public metadata, by declared name.
            lang: overrides the environment's language.

        Returns:
            The text, with ``.figures`` (number strings the DP filters wrote).

        Raises:
            TemplateLintError: the template has lint findings (``lint_on_render``).
            TemplateUndefinedError: a required name is missing (the message names it).
            TemplateSecurityError: the sandbox refused an operation.
            RawReleaseError: a Release reached text without a DP filter.
            TemplateError: anything else wrong with the template or the context.

        Privacy: post-processing of the Releases in ``context``; free.
        """
        text, filename = self.source(name)
        try:
            template = self._env.get_template(name)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"{name}:{exc.lineno}: syntax error: {exc.message}") from exc
        return self._render(template, text, name, filename, context, lang)

    def render_string(
        self,
        source: str,
        context: Mapping[str, object] | None = None,
        *,
        lang: str | None = None,
        name: str = "<string>",
    ) -> RenderedText:
        """Render template text (which needs its own ``{#- dpllm ... -#}`` header).

        Same checks, returns and raises as :meth:`render`.
        """
        try:
            template = self._env.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"{name}:{exc.lineno}: syntax error: {exc.message}") from exc
        return self._render(template, source, name, None, context, lang)

    def render_messages(
        self, prompt: str, context: Mapping[str, object] | None = None, *, lang: str | None = None
    ) -> Messages:
        """The system and user messages of prompt ``prompt`` (e.g. ``"weekly"``).

        Renders ``<prompt>/system.<lang>.j2`` and ``<prompt>/user.<lang>.j2``.

        Returns:
            ``[{"role": "system", ...}, {"role": "user", ...}]`` with ``.figures``.

        Raises:
            TemplateError: as :meth:`render`.

        Privacy: post-processing of the Releases in ``context``; free.
        """
        lang = self._check_lang(lang)
        system = self.render(f"{prompt}/system.{lang}{TEMPLATE_SUFFIX}", context, lang=lang)
        user = self.render(f"{prompt}/user.{lang}{TEMPLATE_SUFFIX}", context, lang=lang)
        return Messages(
            [{"role": "system", "content": system}, {"role": "user", "content": user}],
            figures=system.figures | user.figures,
            seeded=system.seeded or user.seeded,
        )

    def render_fallback(
        self, prompt: str, context: Mapping[str, object] | None = None, *, lang: str | None = None
    ) -> RenderedText:
        """The deterministic no-model report ``<prompt>/fallback.<lang>.j2``.

        Raises:
            TemplateError: as :meth:`render`.

        Privacy: post-processing of the Releases in ``context``; free.
        """
        lang = self._check_lang(lang)
        return self.render(f"{prompt}/fallback.{lang}{TEMPLATE_SUFFIX}", context, lang=lang)

    # -- internals ----------------------------------------------------------------
    def _check_lang(self, lang: str | None) -> str:
        lang = self._lang if lang is None else lang
        if lang not in LANGS:
            raise TemplateError(f"unknown language {lang!r}; use one of {', '.join(LANGS)}")
        return lang

    def _declaration(self, source: str, name: str) -> Declaration:
        try:
            declared = Declaration.from_source(source)
        except TemplateError as exc:
            raise TemplateError(f"{name}: malformed front matter: {exc}") from exc
        if declared is None:
            raise TemplateError(
                f"{name}: no context declaration; start the template with a "
                "'{#- dpllm' / 'releases: ...' / 'metadata: ...' / '-#}' comment"
            )
        return declared

    def _check_lint(self, source: str, name: str) -> None:
        issues = self._lint_cache.get(source)
        if issues is None:
            issues = self._lint_cache[source] = self.lint(source)
        if issues:
            listing = "\n".join(issue.format(name) for issue in issues)
            raise TemplateLintError(
                f"template {name} fails the linter; fix these before rendering:\n{listing}",
                issues=tuple(issues),
            )

    def _context(
        self, declared: Declaration, context: Mapping[str, object] | None, name: str, lang: str
    ) -> tuple[dict[str, object], bool]:
        merged = self._metadata | dict(context or {})
        if "lang" in merged or _STATE_KEY in merged:
            raise TemplateError(f"{name}: 'lang' is set by the environment; pass lang=... instead")
        seeded = False
        for key, value in merged.items():
            if key in declared.release_names:
                if value is None and key in declared.optional_releases:
                    continue
                if not isinstance(value, Release):
                    raise TemplateError(
                        f"{name}: {key!r} is declared as a release but is a "
                        f"{type(value).__name__}; pass the Release itself"
                    )
                if value.seeded:
                    if not self._allow_seeded:
                        raise TemplateError(
                            f"{name}: release {value.name!r} is seeded (test data) and is "
                            "NOT FOR PUBLICATION; use PromptEnvironment(allow_seeded=True) "
                            "only for tests and previews"
                        )
                    seeded = True
            elif key in declared.metadata_names or not isinstance(value, Release):
                # Releases under names this template does not declare are dropped
                # below (one context can serve a prompt's system and user templates).
                _check_public(value, f"{name}: {key!r}")
        missing = sorted(n for n in declared.required if merged.get(n) is None)
        if missing:
            raise TemplateUndefinedError(
                f"{name}: the context is missing {', '.join(repr(m) for m in missing)}; "
                "the template declares them as required"
            )
        ctx: dict[str, object] = {
            k: v for k, v in merged.items() if k in declared.names and v is not None
        }
        ctx["lang"] = lang
        return ctx, seeded

    def _render(
        self,
        template: jinja2.Template,
        source: str,
        name: str,
        filename: str | None,
        context: Mapping[str, object] | None,
        lang: str | None,
    ) -> RenderedText:
        lang = self._check_lang(lang)
        declared = self._declaration(source, name)
        if self._lint_on_render:
            self._check_lint(source, name)
        ctx, seeded = self._context(declared, context, name, lang)
        state = _RenderState(lang)
        ctx[_STATE_KEY] = state
        try:
            text = _capped_text(template, ctx)
        except Exception as exc:  # noqa: BLE001 - every failure is translated below
            raise _translate(exc, name, filename) from exc
        text = text.strip() + "\n"
        if seeded:
            text = f"{SEEDED_MARK}\n{text}"
        return RenderedText(text, figures=state.figures, template=name, seeded=seeded)


def _capped_text(template: jinja2.Template, ctx: Mapping[str, object]) -> str:
    """``template.render(ctx)``, refused once the text passes :data:`MAX_OUTPUT_CHARS`."""
    parts: list[str] = []
    size = 0
    for chunk in template.generate(ctx):
        size += len(chunk)
        if size > MAX_OUTPUT_CHARS:
            raise SecurityError(
                f"the rendered text passes {MAX_OUTPUT_CHARS} characters; a prompt is far shorter"
            )
        parts.append(chunk)
    return "".join(parts)


def _translate(exc: Exception, name: str, filename: str | None) -> Exception:
    line = _template_line(exc.__traceback__, filename)
    where = f"{name}:{line}" if line else name
    if isinstance(exc, RawReleaseError):
        return RawReleaseError(f"{where}: {exc}")
    if isinstance(exc, TemplateUndefinedError):
        return TemplateUndefinedError(f"{where}: {exc}")
    if isinstance(exc, TemplateError):
        return TemplateError(f"{where}: {exc}")
    if isinstance(exc, SecurityError):
        return TemplateSecurityError(f"{where}: the sandbox refused: {exc}")
    if isinstance(exc, jinja2.UndefinedError):
        return TemplateUndefinedError(
            f"{where}: {exc.message}; declare it in the template header and pass it in the context"
        )
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return TemplateError(f"{name}:{exc.lineno}: syntax error: {exc.message}")
    if isinstance(exc, OverflowError):
        return TemplateSecurityError(f"{where}: {exc}")
    return TemplateError(f"{where}: {type(exc).__name__}: {exc}")
