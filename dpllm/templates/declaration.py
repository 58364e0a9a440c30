"""A template's declared context: the front-matter comment every prompt starts with.

Each template opens with a Jinja comment naming what it expects::

    {#- dpllm
    releases: feedback_count, mean_rating, rating_histogram
    optional releases: topic_counts
    metadata: week, course_names
    optional metadata: max_words
    terms: mean_rating = en: mean rating | average rating; zh: 平均评分
    terms: topic_counts.refund = en: refunds; zh: 退款
    description: Weekly summary, user message (English).
    -#}

* ``releases`` are names bound to :class:`~dpllm.release.Release` values; the linter
  treats them as tainted (each output must end in a DP filter) and the renderer
  refuses anything else under those names, and a Release under any other name.
* ``metadata`` are public values (str, numbers, booleans, dates and lists/dicts of
  them): the week label, course names from config, template parameters.
* ``optional`` names may be absent; test them with ``{% if topic_counts is defined %}``.
* ``lang`` (``"en"``/``"zh"``) is always defined and need not be declared.
* ``terms`` (one line per release, or per component as ``name.label``) say how
  readers speak of a release, per language: the first phrase is its label, the
  others synonyms. :meth:`Declaration.with_terms` attaches them to releases that
  declare none, and the precision guard matches figures by them.

Because it is a Jinja comment, the header never reaches the rendered text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from dpllm.errors import TemplateError
from dpllm.release import Release

__all__ = ["ALWAYS_DEFINED", "Declaration"]

ALWAYS_DEFINED = frozenset({"lang"})
"""Metadata every render defines without a declaration."""

_HEADER = re.compile(r"\A\s*\{#-?[ \t]*dpllm[ \t]*\n(?P<body>.*?)-?#\}", re.DOTALL)
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_KEYS = {
    "releases": "releases",
    "optional releases": "optional_releases",
    "metadata": "metadata",
    "optional metadata": "optional_metadata",
}


@dataclass(frozen=True, slots=True)
class Declaration:
    """The names a template expects in its render context.

    Args:
        releases: names that must hold a Release.
        optional_releases: names that may hold a Release or be absent.
        metadata: names that must hold public metadata.
        optional_metadata: names that may hold public metadata or be absent.
        description: one line for humans (``dpllm templates lint`` shows none of it).

    Raises:
        TemplateError: a name is not a plain identifier, starts with ``_`` or is
            declared twice.
    """

    releases: frozenset[str] = frozenset()
    optional_releases: frozenset[str] = frozenset()
    metadata: frozenset[str] = frozenset()
    optional_metadata: frozenset[str] = frozenset()
    description: str = ""
    terms: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for group in (self.releases, self.optional_releases, self.metadata, self.optional_metadata):
            for name in group:
                if not _IDENT.match(name):
                    raise TemplateError(
                        f"declared name {name!r} is not a plain identifier "
                        "(letters, digits, underscore; not starting with _)"
                    )
                if name in seen or name in ALWAYS_DEFINED:
                    raise TemplateError(f"name {name!r} is declared twice (or is the built-in)")
                seen.add(name)

    def with_terms(self, releases: Mapping[str, Release]) -> dict[str, Release]:
        """``releases`` with the declared terms attached where a release declares none.

        A release's own terms win; a vector release gets its components' terms
        (``topic_counts.refund``). The fingerprint is untouched: terms say how a
        figure is read, not what was computed.
        """
        out: dict[str, Release] = {}
        for name, release in releases.items():
            if release.is_vector and not release.component_terms:
                comp = tuple(
                    (ref.partition(".")[2], lang, p)
                    for ref, lang, p in self.terms
                    if ref.partition(".")[0] == name and ref.partition(".")[2] in release.labels
                )
                mine = tuple((lang, p) for ref, lang, p in self.terms if ref == name)
                if comp or mine:
                    release = replace(release, component_terms=comp, terms=release.terms or mine)
            elif not release.terms:
                mine = tuple((lang, p) for ref, lang, p in self.terms if ref == name)
                if mine:
                    release = replace(release, terms=mine)
            out[name] = release
        return out

    @property
    def release_names(self) -> frozenset[str]:
        """Every name that may hold a Release."""
        return self.releases | self.optional_releases

    @property
    def metadata_names(self) -> frozenset[str]:
        """Every name that may hold public metadata (``lang`` included)."""
        return self.metadata | self.optional_metadata | ALWAYS_DEFINED

    @property
    def names(self) -> frozenset[str]:
        """Every declared name."""
        return self.release_names | self.metadata_names

    @property
    def required(self) -> frozenset[str]:
        """Names a render must supply."""
        return self.releases | self.metadata

    @classmethod
    def from_source(cls, source: str) -> Declaration | None:
        """Read the ``{#- dpllm ... -#}`` header at the top of ``source``.

        Returns:
            The declaration, or ``None`` when the template has no header.

        Raises:
            TemplateError: the header is malformed (unknown key, bad name);
                the message gives the line.
        """
        match = _HEADER.match(source)
        if match is None:
            return None
        first_line = source[: match.start("body")].count("\n") + 1
        groups: dict[str, frozenset[str]] = {}
        description = ""
        terms: list[tuple[str, str, str]] = []
        for offset, raw in enumerate(match.group("body").splitlines()):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition(":")
            key = " ".join(key.lower().split())
            if not sep or (key not in _KEYS and key not in ("description", "terms")):
                raise TemplateError(
                    f"line {first_line + offset}: expected 'releases:', 'optional releases:', "
                    f"'metadata:', 'optional metadata:', 'terms:' or 'description:', "
                    f"got {raw.strip()!r}"
                )
            if key == "description":
                description = value.strip()
                continue
            if key == "terms":
                terms.extend(_parse_terms(value, first_line + offset))
                continue
            if _KEYS[key] in groups:
                raise TemplateError(f"line {first_line + offset}: {key!r} given twice")
            names = frozenset(n.strip() for n in value.split(",") if n.strip())
            groups[_KEYS[key]] = names
        try:
            return cls(description=description, terms=tuple(terms), **groups)
        except TemplateError as exc:
            raise TemplateError(f"line {first_line}: {exc}") from exc


_TERMS = re.compile(r"\s*(?P<ref>[A-Za-z][A-Za-z0-9_]*(?:\.[^=\s]+)?)\s*=\s*(?P<body>.+)\Z")


def _parse_terms(value: str, line: int) -> list[tuple[str, str, str]]:
    """``mean_rating = en: mean rating | average rating; zh: 平均评分``."""
    m = _TERMS.match(value)
    if m is None:
        raise TemplateError(
            f"line {line}: expected 'terms: name = en: label | synonym; zh: 标签', got {value!r}"
        )
    out: list[tuple[str, str, str]] = []
    for part in m.group("body").split(";"):
        lang, sep, phrases = part.partition(":")
        lang = lang.strip()
        if not sep or lang not in ("en", "zh"):
            raise TemplateError(
                f"line {line}: terms need a language ('en:' or 'zh:'), got {part!r}"
            )
        out.extend((m.group("ref"), lang, p.strip()) for p in phrases.split("|") if p.strip())
    return out
