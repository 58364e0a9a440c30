"""Presidio's phone recognizer without the work that can never produce a match.

Presidio's :class:`PhoneRecognizer` runs ``phonenumbers.PhoneNumberMatcher`` once per region.
The matcher finds candidates with a loose pattern (any digit run with punctuation) and parses
every one of them; in feedback text most candidates are prices, ratings, counts and years with
one to four digits, and parsing them was half of the redactor's time on Chinese text.

A parsed number's digits all come from the candidate (decimal digits, or letters of a vanity
number), except for a country code implied by the preferred region and the digits a few
regions' national-prefix transform rules prepend. So a candidate with fewer such characters than
the shortest valid number can be rejected before parsing, and the matches stay exactly those of
the stock recognizer (``tests/redact/test_phone.py`` checks both the bound and the equality).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import phonenumbers
from phonenumbers import (
    COUNTRY_CODES_FOR_NON_GEO_REGIONS,
    SUPPORTED_REGIONS,
    NumberParseException,
    PhoneMetadata,
    PhoneNumberMatcher,
)
from presidio_analyzer import EntityRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

__all__ = ["FastPhoneRecognizer", "min_number_digits"]

# The shortest digit group a national-prefix transform rule captures (NF: ``([0-258]\d{4})$``;
# the others capture 6–11 digits); the transform may prepend digits to it.
_MIN_TRANSFORM_CAPTURE = 5
_PLUS = frozenset("+\uff0b")


def _min_national(metadata: Any) -> int:
    """Fewest national digits a valid number of this region is written with."""
    lengths = [n for n in metadata.general_desc.possible_length if n > 0]
    shortest = min(lengths) if lengths else 1
    if metadata.national_prefix_transform_rule:
        shortest = min(shortest, _MIN_TRANSFORM_CAPTURE)
    return shortest


def _all_metadata() -> list[Any]:
    found = [PhoneMetadata.metadata_for_region(r) for r in SUPPORTED_REGIONS]
    found += [
        PhoneMetadata.metadata_for_nongeo_region(c) for c in COUNTRY_CODES_FOR_NON_GEO_REGIONS
    ]
    return [md for md in found if md is not None]


def min_number_digits(region: str) -> tuple[int, int]:
    """The fewest digits (or vanity letters) a candidate needs to parse as a valid number.

    ``parse`` takes a number's country code from a plus sign, an international dialling
    prefix (at least one digit), the region's own code, or the preferred region (implied);
    every other digit of the number is written in the candidate.

    Args:
        region: The matcher's preferred region.

    Returns:
        ``(with_plus, without_plus)``: the bound for candidates containing a plus sign (a
        written country code plus the shortest national number of any region, or a national
        number of ``region``), and for the others (where a written country code needs an
        international prefix too).
    """
    written = min(len(str(md.country_code)) + _min_national(md) for md in _all_metadata())
    md = PhoneMetadata.metadata_for_region(region.upper())
    implied = _min_national(md) if md is not None else written
    return max(1, min(written, implied)), max(1, min(1 + written, implied))


class _PrefilteredMatcher(PhoneNumberMatcher):
    """A matcher that skips parsing candidates too short to be any valid number."""

    def __init__(self, text: str, region: str, *, leniency: int, bounds: tuple[int, int]) -> None:
        super().__init__(text, region, leniency=leniency)
        self._with_plus, self._without_plus = bounds

    # Overrides a private method of phonenumbers' matcher (its single parse site, also used
    # for inner matches); the equality test against the stock recognizer guards upgrades.
    def _parse_and_verify(self, candidate: str, offset: int) -> Any:
        if len(candidate) < self._with_plus:
            return None
        need = self._with_plus if _PLUS.intersection(candidate) else self._without_plus
        if sum(ch.isdecimal() or ch.isalpha() for ch in candidate) < need:
            return None
        return super()._parse_and_verify(candidate, offset)


class FastPhoneRecognizer(PhoneRecognizer):
    """:class:`PhoneRecognizer` with candidates too short to be a number skipped unparsed.

    Args:
        supported_language: Language of the texts it analyses.
        supported_regions: Preferred regions for numbers written without a country code.
        leniency: ``phonenumbers.Leniency`` level (Presidio's default: 1, VALID).
    """

    def __init__(
        self,
        *,
        supported_language: str = "en",
        supported_regions: Collection[str] = ("US", "GB"),
        leniency: int = 1,
    ) -> None:
        super().__init__(
            supported_language=supported_language,
            supported_regions=tuple(supported_regions),
            leniency=leniency,
        )
        self._leniency = leniency
        self._bounds = {region: min_number_digits(region) for region in self.supported_regions}

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        """Find phone numbers exactly as the stock recognizer does, region by region."""
        results = []
        result_for: Any = self._get_recognizer_result  # untyped in Presidio
        for region in self.supported_regions:
            matcher = _PrefilteredMatcher(
                text, region, leniency=self._leniency, bounds=self._bounds[region]
            )
            for match in matcher:
                found = region
                try:
                    found = phonenumbers.region_code_for_number(
                        phonenumbers.parse(text[match.start : match.end])
                    )
                except NumberParseException:
                    pass
                results.append(result_for(match, text, found, nlp_artifacts))
        return list(EntityRecognizer.remove_duplicates(results))
