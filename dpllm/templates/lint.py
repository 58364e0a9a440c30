"""The template linter: proves, from the Jinja syntax tree, that no Release is printed raw.

:func:`lint` parses a template (``Environment.parse``) and follows every value that
may carry a :class:`~dpllm.release.Release` — the names the front matter declares as
releases, their components (``hist["5"]``), ``{% set %}`` aliases, loop variables,
``namespace`` attributes and macro parameters — to every place it could become text.

Codes:

======  =====================================================================
DP001   an output ``{{ ... }}`` that may carry a Release does not end in a DP filter
DP002   access to a raw value or private field (``.value``, ``.interval``, ``_x``,
        ``__class__``, ``["values"]``, ``map(attribute="value")`` …)
DP003   the ``|attr`` filter (dynamic attribute access defeats the checks)
DP004   string building on a Release (``~``, ``%``, ``.format``, ``|format``,
        ``|join``, ``|string`` and other text filters)
DP005   arithmetic, comparison or numeric conversion of a Release
DP006   a macro that prints a parameter raw is called with a Release
DP007   a filter or test the environment does not know
DP008   a name missing from the template's declared context
DP009   missing or malformed ``{#- dpllm ... -#}`` front matter
DP010   template syntax error
======  =====================================================================

The analysis is conservative: a value it cannot prove Release-free is treated as a
Release. Calls to macros imported from other files are treated as Release-carrying.
Columns are best-effort (Jinja nodes carry lines only; the column is that of the
first occurrence of the offending name on the line, else 1).

Privacy: reads template text only; no data, no cost.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from jinja2 import TemplateSyntaxError, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from dpllm.errors import TemplateError
from dpllm.templates.declaration import Declaration
from dpllm.templates.filters import DP_FILTER_NAMES, FILTERS

__all__ = [
    "RAW_RELEASE_ATTRIBUTES",
    "RELEASE_ATTRIBUTES",
    "LintIssue",
    "lint",
]

RELEASE_ATTRIBUTES = frozenset(
    {
        "name",
        "kind",
        "unit",
        "labels",
        "window",
        "confidence",
        "privacy_unit",
        "is_vector",
        "small",
        "estimand",
    }
)
"""Public attributes of a Release a template may read (they carry no noisy value).

``estimand`` is text made from the query's configuration (its bounds), never
from the data.
"""

RELEASE_VALUED_ATTRIBUTES = frozenset({"components"})
"""Attributes of a Release that yield Releases (still need a DP filter)."""

RAW_RELEASE_ATTRIBUTES = frozenset(
    {"value", "values", "interval", "intervals", "half_width", "noise_scale", "cost",
     "fingerprint", "to_dict", "with_values", "delta", "small_threshold"}
)  # fmt: skip
"""Fields that expose a raw number; flagged on any object."""

# Non-DP filters that hand their input (or items of it) on unchanged.
_PASS_THROUGH_FILTERS = frozenset(
    {"default", "d", "first", "last", "list", "reverse", "batch", "slice", "select", "reject",
     "selectattr", "rejectattr", "map", "items", "dictsort", "random", "unique", "groupby"}
)  # fmt: skip
# Non-DP filters whose result carries nothing of the Release but its shape.
_SHAPE_FILTERS = frozenset({"length"})
_NUMERIC_FILTERS = frozenset(
    {"int", "float", "round", "abs", "sum", "min", "max", "filesizeformat"}
)
_DEFAULT_GLOBALS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace"})
_IMPLICIT = frozenset({"loop", "self", "caller", "varargs", "kwargs"})
_RAW_OUTPUT_CODES = frozenset({"DP001", "DP004", "DP005", "DP006"})
_DP_LIST = "|band, |approx, |interval, |pct or |count"


@dataclass(frozen=True, slots=True, order=True)
class LintIssue:
    """One finding of :func:`lint`.

    Args:
        line: 1-based line in the template source.
        column: 1-based column (best-effort).
        code: ``DP001`` … ``DP010`` (see the module docstring).
        message: what is wrong and what to write instead.
    """

    line: int
    column: int
    code: str
    message: str

    def format(self, path: str) -> str:
        """``path:line:col: CODE message`` (the CLI's output format)."""
        return f"{path}:{self.line}:{self.column}: {self.code} {self.message}"


@dataclass(frozen=True, slots=True)
class _Macro:
    params: tuple[str, ...]
    raw_params: frozenset[str]


class _Linter:
    def __init__(
        self,
        lines: list[str],
        declared: Declaration,
        filters: Collection[str],
        tests: Collection[str],
        globals_: Collection[str],
        *,
        report_undeclared: bool = True,
    ) -> None:
        self.lines = lines
        self.declared = declared
        self.filters = filters
        self.tests = tests
        self.globals = globals_
        self.report_undeclared = report_undeclared
        self.issues: list[LintIssue] = []
        self.scope: dict[str, str | None] = {}
        self.macros: dict[str, _Macro] = {}
        self._undeclared_seen: set[str] = set()
        self.namespaces: set[str] = set()

    # -- reporting -------------------------------------------------------------------
    def issue(self, node: nodes.Node, code: str, message: str, needle: str = "") -> None:
        line = node.lineno or 1
        column = 1
        if needle and 0 < line <= len(self.lines):
            found = self.lines[line - 1].find(needle)
            column = found + 1 if found >= 0 else 1
        self.issues.append(LintIssue(line, column, code, message))

    # -- statements ------------------------------------------------------------------
    def stmts(self, body: Iterable[nodes.Node]) -> None:
        for node in body:
            self.stmt(node)

    def stmt(self, node: nodes.Node) -> None:
        if isinstance(node, nodes.Output):
            for child in node.nodes:
                if isinstance(child, nodes.TemplateData):
                    continue
                origin = self.taint(child)
                if origin is not None:
                    self.issue(
                        child,
                        "DP001",
                        f"{origin} is printed without a DP filter; end the expression in {_DP_LIST}",
                        _needle(child),
                    )
        elif isinstance(node, nodes.Assign):
            self.bind(node.target, self.taint(node.node), node.lineno)
        elif isinstance(node, nodes.AssignBlock):
            if node.filter is not None:
                self.taint(node.filter)
            self.stmts(node.body)
            self.bind(node.target, None, node.lineno)
        elif isinstance(node, nodes.For):
            origin = self.taint(node.iter)
            item = f"loop variable over {origin}" if origin else None
            if item and _is_components_call(node.iter) and isinstance(node.target, nodes.Tuple):
                # ``for label, r in x.components()``: the label is public, r a Release.
                label, *rest = node.target.items
                self.bind(label, None, node.lineno)
                for target in rest:
                    self.bind(target, item, node.lineno)
            else:
                self.bind(node.target, item, node.lineno)
            if node.test is not None:
                self.taint(node.test)
            self.stmts(node.body)
            self.stmts(node.else_)
        elif isinstance(node, nodes.If):
            self.taint(node.test)
            self.stmts(node.body)
            for elif_ in node.elif_:
                self.stmt(elif_)
            self.stmts(node.else_)
        elif isinstance(node, nodes.Macro):
            self.macro(node)
        elif isinstance(node, nodes.CallBlock):
            self.taint(node.call)
            for arg in node.args:
                self.scope.setdefault(arg.name, None)
            self.stmts(node.body)
        elif isinstance(node, nodes.FilterBlock):
            self.taint(node.filter)
            self.stmts(node.body)
        elif isinstance(node, nodes.With):
            for target, value in zip(node.targets, node.values, strict=False):
                self.bind(target, self.taint(value), node.lineno)
            self.stmts(node.body)
        elif isinstance(node, nodes.Import):
            self.scope[node.target] = None
        elif isinstance(node, nodes.FromImport):
            for name in node.names:
                self.scope[name if isinstance(name, str) else name[1]] = None
        else:
            for part in node.iter_child_nodes():
                if isinstance(part, nodes.Expr):
                    self.taint(part)
                else:
                    self.stmt(part)

    def bind(self, target: nodes.Node, origin: str | None, lineno: int) -> None:
        if isinstance(target, nodes.Name):
            alias = f"{target.name!r} (set from {origin}, line {lineno})" if origin else None
            # Flow-insensitive: once tainted, a name stays tainted.
            if alias is not None or target.name not in self.scope:
                self.scope[target.name] = alias
        elif isinstance(target, nodes.NSRef):
            self.namespaces.add(target.name)
            if origin:
                self.scope[target.name] = f"namespace {target.name!r} (holds {origin})"
            else:
                self.scope.setdefault(target.name, None)
        elif isinstance(target, nodes.Tuple):
            for item in target.items:
                self.bind(item, origin, lineno)

    def macro(self, node: nodes.Macro) -> None:
        params = tuple(arg.name for arg in node.args)
        for default in node.defaults:
            self.taint(default)
        base = dict(self.scope) | {p: None for p in params}
        base |= {"caller": None, "varargs": None, "kwargs": None}
        raw: set[str] = set()
        for param in params:
            probe = self.child(report_undeclared=False)
            probe.scope = base | {param: f"macro parameter {param!r}"}
            probe.stmts(node.body)
            if any(i.code in _RAW_OUTPUT_CODES for i in probe.issues):
                raw.add(param)
        self.macros[node.name] = _Macro(params, frozenset(raw))
        self.scope[node.name] = None
        body = self.child(report_undeclared=self.report_undeclared)
        body.scope = base
        body._undeclared_seen = self._undeclared_seen
        body.stmts(node.body)
        self.issues.extend(body.issues)

    def child(self, *, report_undeclared: bool) -> _Linter:
        linter = _Linter(
            self.lines,
            self.declared,
            self.filters,
            self.tests,
            self.globals,
            report_undeclared=report_undeclared,
        )
        linter.macros = dict(self.macros)
        linter.namespaces = self.namespaces
        return linter

    # -- expressions -----------------------------------------------------------------
    def taint(self, node: nodes.Node) -> str | None:
        """Record issues inside ``node``; return what Release it may carry, if any."""
        if isinstance(node, nodes.Name):
            return self.name(node)
        if isinstance(node, (nodes.Const, nodes.TemplateData)):
            return None
        if isinstance(node, nodes.Getattr):
            base = self.taint(node.node)
            if isinstance(node.node, nodes.Name) and node.node.name in self.namespaces:
                # Any attribute of a namespace may hold what was assigned to it.
                return self.attribute(node, None, node.attr) or base
            return self.attribute(node, base, node.attr)
        if isinstance(node, (nodes.And, nodes.Or)):
            left, right = self.taint(node.left), self.taint(node.right)
            return left if left is not None else right
        if isinstance(node, nodes.Getitem):
            base = self.taint(node.node)
            self.taint(node.arg)
            if isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
                key = node.arg.value
                if key.startswith("_") or key in RAW_RELEASE_ATTRIBUTES:
                    return self.attribute(node, base, key)
            return f"a component of {base}" if base else None
        if isinstance(node, nodes.Filter):
            return self.filter(node)
        if isinstance(node, nodes.Test):
            self.taint(node.node)
            self.arguments(node)
            if node.name not in self.tests:
                self.issue(node, "DP007", f"unknown test {node.name!r}", node.name)
            return None
        if isinstance(node, nodes.Call):
            return self.call(node)
        if isinstance(node, nodes.Concat):
            origins = [self.taint(n) for n in node.nodes]
            if any(origins):
                first = next(o for o in origins if o)
                self.issue(node, "DP004", f"'~' builds a string from {first}; {_fix()}", "~")
            return None
        if isinstance(node, nodes.BinExpr):
            left, right = self.taint(node.left), self.taint(node.right)
            if left or right:
                origin = left or right
                if isinstance(node, nodes.Mod):
                    self.issue(
                        node, "DP004", f"'%' formats {origin} as a raw number; {_fix()}", "%"
                    )
                else:
                    self.issue(
                        node,
                        "DP005",
                        f"arithmetic '{node.operator}' on {origin}; compute derived figures "
                        "as post-processing in Python, then print them with a DP filter",
                        node.operator,
                    )
            return None
        if isinstance(node, nodes.UnaryExpr):
            origin = self.taint(node.node)
            if origin and not isinstance(node, nodes.Not):
                self.issue(node, "DP005", f"unary '{node.operator}' on {origin}", node.operator)
            return None
        if isinstance(node, nodes.Compare):
            origins = [self.taint(node.expr)] + [self.taint(op.expr) for op in node.ops]
            origin = next((o for o in origins if o), None)
            if origin:
                self.issue(
                    node,
                    "DP005",
                    f"comparison on {origin} reads its raw value; test '.small' or "
                    "compare labels instead",
                    _needle(node.expr),
                )
            return None
        if isinstance(node, nodes.CondExpr):
            self.taint(node.test)
            then = self.taint(node.expr1)
            otherwise = self.taint(node.expr2) if node.expr2 is not None else None
            return then if then is not None else otherwise
        # And/Or, List, Tuple, Dict, Pair, Slice … carry whatever their parts carry.
        found: str | None = None
        for child in node.iter_child_nodes():
            origin = self.taint(child)
            found = found or origin
        return found

    def name(self, node: nodes.Name) -> str | None:
        if node.name in self.scope:
            return self.scope[node.name]
        if node.name in self.declared.release_names:
            return f"release {node.name!r}"
        if node.name in self.declared.metadata_names or node.name in self.globals:
            return None
        if node.name in _IMPLICIT or node.name in self.macros:
            return None
        if self.report_undeclared and node.name not in self._undeclared_seen:
            self._undeclared_seen.add(node.name)
            self.issue(
                node,
                "DP008",
                f"{node.name!r} is not in the template's declared context; add it to the "
                "'releases:' or 'metadata:' line of the {#- dpllm ... -#} header",
                node.name,
            )
        # Unknown: it may be a Release.
        return f"undeclared {node.name!r}"

    def attribute(self, node: nodes.Node, base: str | None, attr: str) -> str | None:
        if attr.startswith("_"):
            self.issue(node, "DP002", f"access to private attribute {attr!r} is refused", attr)
            return None
        if attr in RAW_RELEASE_ATTRIBUTES:
            self.issue(
                node,
                "DP002",
                f"'.{attr}' reads a raw number{' of ' + base if base else ''}; {_fix()}",
                attr,
            )
            return None
        if base is None or attr in RELEASE_ATTRIBUTES:
            return None
        if attr in RELEASE_VALUED_ATTRIBUTES:
            return base
        self.issue(
            node,
            "DP002",
            f"'.{attr}' is not a public attribute of {base}; templates may read "
            f"{', '.join(sorted(RELEASE_ATTRIBUTES))} and components()",
            attr,
        )
        return None

    def arguments(self, node: nodes.Filter | nodes.Test | nodes.Call) -> list[str | None]:
        origins = [self.taint(arg) for arg in node.args]
        for kw in node.kwargs:
            origins.append(self.taint(kw.value))
        for extra in (node.dyn_args, node.dyn_kwargs):
            if extra is not None:
                origins.append(self.taint(extra))
        return origins

    def filter(self, node: nodes.Filter) -> str | None:
        base = self.taint(node.node) if node.node is not None else None
        args = self.arguments(node)
        name = node.name
        if name not in self.filters:
            self.issue(node, "DP007", f"unknown filter {name!r}", name)
            return None
        if name == "attr":
            self.issue(
                node,
                "DP003",
                "'|attr' looks attributes up dynamically and is refused; "
                "use plain attribute syntax so the linter can check it",
                "attr",
            )
            return None
        for kw in node.kwargs:
            if kw.key == "attribute" and isinstance(kw.value, nodes.Const):
                for part in str(kw.value.value).split("."):
                    self.attribute(node, base, part)
        origin = base or next((a for a in args if a), None)
        if name in DP_FILTER_NAMES:
            return None
        if origin is None or name in _SHAPE_FILTERS:
            return None
        if name == "map" and node.args and isinstance(node.args[0], nodes.Const):
            mapped = node.args[0].value
            if mapped in DP_FILTER_NAMES:
                return None
            self.issue(node, "DP004", f"map({mapped!r}) turns {origin} into text; {_fix()}", name)
            return None
        if name in _PASS_THROUGH_FILTERS:
            return origin
        code = "DP005" if name in _NUMERIC_FILTERS else "DP004"
        self.issue(
            node, code, f"'|{name}' on {origin} shows it without its error band; {_fix()}", name
        )
        return None

    def call(self, node: nodes.Call) -> str | None:
        callee = node.node
        args = self.arguments(node)
        origin = next((a for a in args if a), None)
        if isinstance(callee, nodes.Name) and callee.name in self.macros:
            macro = self.macros[callee.name]
            bound: list[tuple[str, str | None]] = list(zip(macro.params, args, strict=False))
            bound += [(kw.key, self.taint(kw.value)) for kw in node.kwargs]
            for param, arg_origin in bound:
                if arg_origin and param in macro.raw_params:
                    self.issue(
                        node,
                        "DP006",
                        f"macro {callee.name!r} prints parameter {param!r} without a DP filter, "
                        f"and is passed {arg_origin}; apply {_DP_LIST} inside the macro",
                        callee.name,
                    )
            return None
        if isinstance(callee, nodes.Getattr) and callee.attr in ("format", "format_map", "join"):
            self.taint(callee.node)
            if origin:
                self.issue(
                    node,
                    "DP004",
                    f"'.{callee.attr}()' formats {origin} as text; {_fix()}",
                    callee.attr,
                )
            return None
        return self.taint(callee) or origin


def _is_components_call(node: nodes.Node) -> bool:
    return (
        isinstance(node, nodes.Call)
        and isinstance(node.node, nodes.Getattr)
        and node.node.attr in RELEASE_VALUED_ATTRIBUTES
    )


def _fix() -> str:
    return f"print it with {_DP_LIST}"


def _needle(node: nodes.Node) -> str:
    if isinstance(node, nodes.Name):
        return node.name
    for child in node.find_all(nodes.Name):
        return child.name
    return ""


def lint(
    source: str,
    *,
    declared: Declaration | None = None,
    filters: Collection[str] | None = None,
    tests: Collection[str] | None = None,
    globals_: Collection[str] | None = None,
) -> list[LintIssue]:
    """Check that ``source`` cannot print a Release without a DP filter.

    Args:
        source: the template text.
        declared: its context; default: read from the ``{#- dpllm ... -#}`` header.
        filters: filter names the rendering environment knows (default: Jinja's
            built-ins plus :data:`~dpllm.templates.filters.FILTERS`).
        tests: test names it knows (default: Jinja's built-ins).
        globals_: global names it defines (default: Jinja's sandbox globals).

    Returns:
        The issues, sorted by line and column; empty when the template is clean.

    Privacy: reads template text only; no data, no cost.
    """
    env = ImmutableSandboxedEnvironment()
    filters = filters if filters is not None else set(env.filters) | set(FILTERS)
    tests = tests if tests is not None else set(env.tests)
    globals_ = globals_ if globals_ is not None else _DEFAULT_GLOBALS
    issues: list[LintIssue] = []
    if declared is None:
        try:
            declared = Declaration.from_source(source)
        except TemplateError as exc:
            issues.append(LintIssue(1, 1, "DP009", f"malformed front matter: {exc}"))
            declared = Declaration()
        else:
            if declared is None:
                issues.append(
                    LintIssue(
                        1,
                        1,
                        "DP009",
                        "no context declaration; start the template with "
                        "'{#- dpllm' / 'releases: ...' / 'metadata: ...' / '-#}'",
                    )
                )
                declared = Declaration()
    try:
        tree = env.parse(source)
    except TemplateSyntaxError as exc:
        issues.append(LintIssue(exc.lineno or 1, 1, "DP010", f"syntax error: {exc.message}"))
        return sorted(issues)
    linter = _Linter(source.splitlines(), declared, filters, tests, globals_)
    linter.stmts(tree.body)
    issues.extend(linter.issues)
    return sorted(set(issues))
