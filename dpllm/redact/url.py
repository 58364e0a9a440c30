"""Presidio's URL recognizer, with its scheme-less pattern told where a match cannot start.

Presidio's "Non schema URL" pattern, ``(www\\d{0,3}[.])?[a-z0-9.\\-]{1,253}[.](?:com|edu|…)``,
has no left anchor: the regex engine starts at every letter and digit of the text, runs to the
end of the word and backs off to each dot in it, trying some 1,500 top-level domains after each
one. A match is letters, digits, dots and dashes up to a dot followed by a domain, and every
domain begins with a letter; so no match starts where the run of such characters ahead holds no
dot followed by a letter. :class:`FastUrlRecognizer` puts that test first as a look-ahead: the
same matches (``tests/redact/test_url.py`` compares them with the stock recognizer), with the
domain list tried only after a dot and a letter (2.9 → 0.5 ms on 2,000 characters of English).
"""

from __future__ import annotations

from presidio_analyzer import Pattern
from presidio_analyzer.predefined_recognizers import UrlRecognizer

__all__ = ["FastUrlRecognizer", "anchored"]

_SCHEMELESS = "Non schema URL"
_PREFIX = "(?i)((www"
# Implied by any match of the pattern: its start is followed by [a-z0-9.-]* then ".<letter>".
_LOOKAHEAD = r"(?=[a-z0-9.\-]*[.][a-z])"


def anchored(pattern: Pattern) -> Pattern:
    """``pattern`` with the look-ahead when it is Presidio's scheme-less URL pattern.

    Args:
        pattern: One of :class:`UrlRecognizer`'s patterns.

    Returns:
        A new pattern for the scheme-less one (same name and score); any other unchanged.
    """
    if pattern.name != _SCHEMELESS or not pattern.regex.startswith(_PREFIX):
        return pattern
    return Pattern(pattern.name, "(?i)" + _LOOKAHEAD + pattern.regex[4:], pattern.score)


class FastUrlRecognizer(UrlRecognizer):
    """:class:`UrlRecognizer` with the scheme-less pattern anchored (see the module docstring).

    Args:
        supported_language: Language of the texts it analyses.
    """

    def __init__(self, *, supported_language: str = "en") -> None:
        super().__init__(
            patterns=[anchored(p) for p in UrlRecognizer.PATTERNS],
            supported_language=supported_language,
        )
