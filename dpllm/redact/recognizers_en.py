"""English-text recognizers Presidio lacks offline: street addresses, ``First Last`` names.

spaCy's small English model tags a city (GPE) now and then and a street almost
never (``71 Oak Road`` came back as ``71 <PERSON>``); an address has a shape a
pattern finds reliably: a house number, one to three capitalised words, a street
type, and optionally a flat number, a town, and a US state with a ZIP code.
"""

from __future__ import annotations

import re

from presidio_analyzer import Pattern, PatternRecognizer

from dpllm.redact.names_en import GIVEN_NAMES, NOT_SURNAMES

__all__ = ["EnGivenNameRecognizer", "EnStreetAddressRecognizer"]

_STREET_TYPES = (
    "Street|St|Road|Rd|Avenue|Ave|Lane|Ln|Drive|Dr|Close|Way|Boulevard|Blvd|Court|Ct|Place|Pl"
    "|Terrace|Crescent|Square|Sq|Highway|Hwy|Parkway|Pkwy|Row|Walk|Gardens|Grove|Hill|Mews"
)
_WORD = r"[A-Z][a-z]+\.?"
_ADDRESS = (
    r"(?<![0-9A-Za-z])[0-9]{1,5}[A-Za-z]?\s+"
    rf"(?:{_WORD}\s+){{1,3}}(?:{_STREET_TYPES})\b\.?"
    r"(?:,?\s+(?:Apt|Flat|Suite|Unit)\.?\s*[0-9]+[A-Za-z]?)?"
    rf"(?:,\s*{_WORD}(?:\s{_WORD})?(?=[\s,.!?;:)]|$))?"
    r"(?:,?\s+[A-Z]{2}\s+[0-9]{5}(?:-[0-9]{4})?)?"
)


class EnStreetAddressRecognizer(PatternRecognizer):
    """Street addresses (``221B Baker Street, London``, ``12 Elm Rd, Apt 4``) as LOCATION."""

    def __init__(self, *, language: str = "en") -> None:
        super().__init__(
            supported_entity="LOCATION",
            patterns=[Pattern("en_street_address", _ADDRESS, 0.7)],
            context=["address", "live", "lives", "send", "deliver", "地址", "住"],
            supported_language=language,
            name=f"EnStreetAddressRecognizer_{language}",
            global_regex_flags=re.DOTALL | re.MULTILINE,  # case matters: no IGNORECASE
        )


_SURNAME = r"(?:Mc|Mac|O['’]|D['’])?[A-Z][a-z]+(?:-[A-Z][a-z]+)?"


def _given_name_pattern() -> str:
    names = "|".join(sorted(GIVEN_NAMES, key=lambda s: (-len(s), s)))
    return rf"(?<![A-Za-z'’\-])(?:{names})(?:\s+[A-Z]\.)?\s+{_SURNAME}(?![A-Za-z])"


class EnGivenNameRecognizer(PatternRecognizer):
    """``First Last`` names whose first name is a known given name (``Ivy Tanaka``) as PERSON.

    spaCy's small model misses many such names in short sentences; the list
    (:data:`~dpllm.redact.names_en.GIVEN_NAMES`) leaves out given names that are
    also common capitalised words (``Grace Period``), and a second word that is a
    function word, a weekday, a month or an institution word is not a surname.
    Eponyms (``Markov chain``) are dropped by the engine afterwards.
    """

    def __init__(self, *, language: str = "en") -> None:
        super().__init__(
            supported_entity="PERSON",
            patterns=[Pattern("en_given_name", _given_name_pattern(), 0.7)],
            context=[],
            supported_language=language,
            name=f"EnGivenNameRecognizer_{language}",
            global_regex_flags=re.DOTALL | re.MULTILINE,  # case matters: no IGNORECASE
        )

    def validate_result(self, pattern_text: str) -> bool | None:
        """Reject a second word that is not a surname (``Emily On``, ``Lucas Monday``)."""
        return pattern_text.split()[-1] not in NOT_SURNAMES
