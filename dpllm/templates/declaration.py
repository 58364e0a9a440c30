"""A template's declared context: the front-matter comment every prompt starts with.

Each template opens with a Jinja comment naming what it expects::

    {#- dpllm
    releases: feedback_count, mean_rating, rating_histogram
    optional releases: topic_counts
    metadata: week, course_names
    optional metadata: max_words
    description: Weekly summary, user message (English).
    -#}

* ``releases`` are names bound to :class:`~dpllm.release.Release` values; the linter
  treats them as tainted (each output must end in a DP filter) and the renderer
  refuses anything else under those names, and a Release under any other name.
* ``metadata`` are public values (str, numbers, booleans, dates and lists/dicts of
  them): the week label, course names from config, template parameters.
* ``optional`` names may be absent; test them with ``{% if topic_counts is defined %}``.
* ``lang`` (``"en"``/``"zh"``) is always defined and need not be declared.

Because it is a Jinja comment, the header never reaches the rendered text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dpllm.errors import TemplateError

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
        for offset, raw in enumerate(match.group("body").splitlines()):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition(":")
            key = " ".join(key.lower().split())
            if not sep or (key not in _KEYS and key != "description"):
                raise TemplateError(
                    f"line {first_line + offset}: expected 'releases:', 'optional releases:', "
                    f"'metadata:', 'optional metadata:' or 'description:', got {raw.strip()!r}"
                )
            if key == "description":
                description = value.strip()
                continue
            if _KEYS[key] in groups:
                raise TemplateError(f"line {first_line + offset}: {key!r} given twice")
            names = frozenset(n.strip() for n in value.split(",") if n.strip())
            groups[_KEYS[key]] = names
        try:
            return cls(description=description, **groups)
        except TemplateError as exc:
            raise TemplateError(f"line {first_line}: {exc}") from exc
