"""English-text recognizers Presidio lacks offline: street addresses.

spaCy's small English model tags a city (GPE) now and then and a street almost
never (``71 Oak Road`` came back as ``71 <PERSON>``); an address has a shape a
pattern finds reliably: a house number, one to three capitalised words, a street
type, and optionally a flat number, a town, and a US state with a ZIP code.
"""

from __future__ import annotations

import re

from presidio_analyzer import Pattern, PatternRecognizer

__all__ = ["EnStreetAddressRecognizer"]

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
