"""Size caps on what a template can make Python build (memory bombs).

The sandbox already caps ``range()`` and ``*``/``**``. A template can still ask
Python for a huge string through a width or a count: ``"x"|indent(10**10)``,
``"x"|center(10**10)``, ``"%.10000000000f"|format(1)``, ``"{:>10000000000}".format(1)``,
``"x".ljust(10**10)``, ``s|replace("", s)``, ``[1]|batch(10**10, 0)``,
``lipsum(10**9)``. Each allocates gigabytes before anything is printed; these
guards check the size first and raise :class:`jinja2.exceptions.SecurityError`
(which the environment reports as :class:`~dpllm.errors.TemplateSecurityError`).
:data:`MAX_OUTPUT_CHARS` caps the rendered text as a whole.

Not covered (a residual risk of a hostile template author, who is trusted to
write prompts): loops that only burn CPU, e.g. three nested ``range(1000)``.

Privacy: none (rendering is post-processing).
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, MutableMapping
from typing import Any

from jinja2.exceptions import SecurityError

__all__ = [
    "MAX_BUILT",
    "MAX_OUTPUT_CHARS",
    "check_call",
    "check_str_format",
    "guard_filters",
    "guarded_lipsum",
]

MAX_BUILT = 100_000
"""Largest width, count or growth (characters or items) one call may ask for."""

MAX_OUTPUT_CHARS = 1_000_000
"""Largest rendered text (characters): a prompt is a few thousand."""

_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|[0-9]*)(?:\.(\*|[0-9]*))?", re.ASCII)
_DIGITS = re.compile(r"[0-9]+", re.ASCII)


def _refuse_over(n: int, what: str) -> None:
    if n > MAX_BUILT:
        raise SecurityError(f"{what} would build {n} characters or items; the cap is {MAX_BUILT}")


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _check_width(width: object, what: str) -> None:
    _refuse_over(_int(width), what)


def _check_replace(s: object, old: object, new: object, count: object = None) -> None:
    if not (isinstance(s, str) and isinstance(old, str) and isinstance(new, str)):
        return
    n = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        n = min(n, count)
    _refuse_over(n * len(new), "replace")


def _check_percent(fmt: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if not isinstance(fmt, str):
        return
    star = False
    for m in _PERCENT_SPEC.finditer(fmt):
        for part in m.groups():
            if part == "*":
                star = True
            elif part:
                _refuse_over(int(part), "a %-format width or precision")
    if star:
        for value in (*args, *kwargs.values()):
            _refuse_over(_int(value), "a %-format width or precision")


def _check_format_spec(spec: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if "{" in spec:  # a nested field: its width comes from the arguments
        for value in (*args, *kwargs.values()):
            _refuse_over(_int(value), "a format width or precision")
    for digits in _DIGITS.findall(spec):
        _refuse_over(int(digits), "a format width or precision")


def check_str_format(fmt: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse ``fmt.format(*args, **kwargs)`` when a field's width or precision is huge."""
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # malformed: str.format raises its own error
    for _literal, _name, spec, _conversion in fields:
        if spec:
            _check_format_spec(spec, args, kwargs)


def check_call(obj: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse a call of a ``str`` method from a template that would build a huge string."""
    owner = getattr(obj, "__self__", None)
    if not isinstance(owner, str):
        return
    name = getattr(obj, "__name__", "")
    first = args[0] if args else next(iter(kwargs.values()), None)
    if name in ("ljust", "rjust", "center", "zfill"):
        _check_width(first, f"str.{name}")
    elif name == "expandtabs":
        _refuse_over(_int(first if args or kwargs else 8) * owner.count("\t"), "str.expandtabs")
    elif name == "replace" and len(args) >= 2:
        _check_replace(owner, args[0], args[1], args[2] if len(args) > 2 else kwargs.get("count"))


def _wrap(original: Callable[..., Any], check: Callable[..., None]) -> Callable[..., Any]:
    """``original`` with ``check`` run first on its arguments, after the context Jinja
    passes to filters marked ``pass_eval_context`` or ``pass_environment`` (which
    includes its async-aware built-ins such as ``slice``)."""
    skip = 1 if getattr(original, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(original)  # keeps Jinja's pass_* marker
    def guarded(*args: Any, **kwargs: Any) -> Any:
        check(*args[skip:], **kwargs)
        return original(*args, **kwargs)

    return guarded


def _center(value: object, width: object = 80, *_: object, **__: object) -> None:
    _check_width(width, "center")


def _indent(s: object, width: object = 4, *_: object, **kw: object) -> None:
    width = kw.get("width", width)
    size = len(width) if isinstance(width, str) else _int(width)
    lines = s.count("\n") + 1 if isinstance(s, str) else 1
    _refuse_over(size * lines, "indent")


def _replace(s: object, old: object = "", new: object = "", count: object = None) -> None:
    _check_replace(s, old, new, count)


def _batch(value: object, linecount: object = 0, *_: object, **__: object) -> None:
    _check_width(linecount, "batch")


def _slice(value: object, slices: object = 0, *_: object, **__: object) -> None:
    _check_width(slices, "slice")


def _percent(value: object, *args: Any, **kwargs: Any) -> None:
    _check_percent(value, args, kwargs)


def _tojson(value: object, indent: object = None) -> None:
    size = len(indent) if isinstance(indent, str) else _int(indent)
    if size > 100:
        raise SecurityError(f"tojson indent {size} is refused (cap 100)")


_CHECKS: dict[str, Callable[..., None]] = {
    "center": _center,
    "indent": _indent,
    "replace": _replace,
    "batch": _batch,
    "slice": _slice,
    "format": _percent,
    "tojson": _tojson,
}


def guard_filters(filters: MutableMapping[str, Callable[..., Any]]) -> None:
    """Wrap Jinja's size-taking built-in filters in ``filters`` with their caps."""
    for name, check in _CHECKS.items():
        if name in filters:
            filters[name] = _wrap(filters[name], check)


def guarded_lipsum(original: Callable[..., str]) -> Callable[..., str]:
    """Jinja's ``lipsum(n, html, min, max)`` global with ``n × max`` words capped."""

    @functools.wraps(original)
    def lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # noqa: A002
        _refuse_over(_int(n) * _int(max), "lipsum")
        return original(n, html, min, max)

    return lipsum
