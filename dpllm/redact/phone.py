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

A second test, :class:`NumberShape`, rejects most of the remaining candidates (order numbers,
statistics, dates, card and ID numbers: four in five on the benchmark texts) for the regions they
cannot belong to. A candidate of ASCII digits, spaces and ``-./()`` carries no plus sign, no
extension and no letters, so ``parse`` gives it the preferred region's country code and its
national significant number is what is left of its digits after an optional written country
code and national prefixes; ``is_valid_number`` then needs that rest to match the pattern of
one number type (fixed line, mobile, toll free …) of a region with that code. One regular
expression per preferred region checks exactly that, unless the digits begin with the region's
international prefix or the region rewrites national prefixes (then the candidate is parsed as
before).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import phonenumbers
from phonenumbers import (
    COUNTRY_CODE_TO_REGION_CODE,
    COUNTRY_CODES_FOR_NON_GEO_REGIONS,
    SUPPORTED_REGIONS,
    Leniency,
    NumberParseException,
    PhoneMetadata,
    PhoneNumberMatcher,
)
from presidio_analyzer import EntityRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

__all__ = ["FastPhoneRecognizer", "NumberShape", "min_number_digits"]

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


# The descriptions phonenumbers' _number_type_helper tries: a valid number matches one.
_NUMBER_TYPES = (
    "premium_rate",
    "toll_free",
    "shared_cost",
    "voip",
    "personal_number",
    "pager",
    "uan",
    "voicemail",
    "fixed_line",
    "mobile",
)
# Characters that cannot begin an extension, a vanity number or an international number.
_PLAIN_CANDIDATE = re.compile(r"[0-9 ().\-/]+")
_DIGITS = re.compile(r"\d")
# Every pattern of phonenumbers' inner matching needs one of these (a slash, a bracket, a dot,
# white space, or a dash other than "-"); without them a candidate has no inner match.
_INNER_MARK = re.compile(r"[/(.\s\u2012-\u2015\uff0d]")


@dataclass(frozen=True)
class NumberShape:
    """Which plain candidates can parse as a valid number of a preferred region.

    Attributes:
        valid: Optional written country code, optional national prefixes, then a national
            number of some region sharing the country code (the pattern of one of its number
            types: fixed line, mobile, toll free …).
        international: The region's international dialling prefix.
    """

    valid: re.Pattern[str]
    international: re.Pattern[str]

    @classmethod
    def for_region(cls, region: str) -> NumberShape | None:
        """The shape of ``region``'s numbers, or None when it cannot be told without parsing."""
        md = PhoneMetadata.metadata_for_region(region.upper())
        if md is None or md.country_code is None or md.national_prefix_transform_rule:
            return None
        if not md.international_prefix:
            return None
        patterns = []
        for other in COUNTRY_CODE_TO_REGION_CODE.get(md.country_code, ()):
            other_md = PhoneMetadata.metadata_for_region(other)
            if other_md is None:
                return None
            for kind in _NUMBER_TYPES:
                desc = getattr(other_md, kind)
                if desc is not None and desc.national_number_pattern:
                    patterns.append(desc.national_number_pattern)
        prefix = md.national_prefix_for_parsing
        national = f"(?:{prefix})*" if prefix else ""
        body = "|".join(f"(?:{p})" for p in patterns)
        return cls(
            valid=re.compile(f"(?:{md.country_code})?{national}(?:{body})"),
            international=re.compile(md.international_prefix),
        )

    def possible(self, candidate: str) -> bool:
        """False only when parsing ``candidate`` cannot give a valid number of the region."""
        if not _PLAIN_CANDIDATE.fullmatch(candidate):
            return True
        digits = "".join(_DIGITS.findall(candidate))
        if self.international.match(digits):
            return True
        return self.valid.fullmatch(digits) is not None


class _PrefilteredMatcher(PhoneNumberMatcher):
    """A matcher that skips parsing candidates that cannot be a valid number of its region."""

    def __init__(
        self,
        text: str,
        region: str,
        *,
        leniency: int,
        bounds: tuple[int, int],
        shape: NumberShape | None,
        international: dict[tuple[str, int], Any] | None = None,
    ) -> None:
        super().__init__(text, region, leniency=leniency)
        self._with_plus, self._without_plus = bounds
        self._shape = shape
        self._international = international

    # Overrides a private method of phonenumbers' matcher (its single parse site, also used
    # for inner matches); the equality test against the stock recognizer guards upgrades.
    def _parse_and_verify(self, candidate: str, offset: int) -> Any:
        if len(candidate) < self._with_plus:
            return None
        need = self._with_plus if _PLUS.intersection(candidate) else self._without_plus
        if sum(ch.isdecimal() or ch.isalpha() for ch in candidate) < need:
            return None
        if self._shape is not None and not self._shape.possible(candidate):
            return None
        if self._international is None or candidate[0] not in _PLUS:
            return super()._parse_and_verify(candidate, offset)
        # A candidate opening with a plus sign carries its own country code: parsing and
        # verifying it (at VALID leniency) does not depend on the preferred region, so the
        # other regions' matchers of the same text reuse the answer.
        key = (candidate, offset)
        if key not in self._international:
            self._international[key] = super()._parse_and_verify(candidate, offset)
        return self._international[key]

    # Overrides a private method too: it tries each of six patterns on every rejected
    # candidate, and none can match without an _INNER_MARK character (pinned by a test).
    def _extract_inner_match(self, candidate: str, offset: int) -> Any:
        if _INNER_MARK.search(candidate) is None:
            return None
        return super()._extract_inner_match(candidate, offset)


class FastPhoneRecognizer(PhoneRecognizer):
    """:class:`PhoneRecognizer` with candidates that cannot be a number skipped unparsed.

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
        # The shape test rejects what cannot be a *valid* number: sound only at VALID or
        # stricter (POSSIBLE accepts numbers that are not valid).
        self._shapes = {
            region: NumberShape.for_region(region) if leniency >= Leniency.VALID else None
            for region in self.supported_regions
        }

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        """Find phone numbers exactly as the stock recognizer does, region by region."""
        results = []
        result_for: Any = self._get_recognizer_result  # untyped in Presidio
        international: dict[tuple[str, int], Any] | None = (
            {} if self._leniency == Leniency.VALID else None
        )
        for region in self.supported_regions:
            matcher = _PrefilteredMatcher(
                text,
                region,
                leniency=self._leniency,
                bounds=self._bounds[region],
                shape=self._shapes[region],
                international=international,
            )
            for match in matcher:
                found = region
                raw = text[match.start : match.end]
                if _PLUS.intersection(raw):  # without one, parse(raw) has no region: it raises
                    try:
                        found = phonenumbers.region_code_for_number(phonenumbers.parse(raw))
                    except NumberParseException:
                        pass
                results.append(result_for(match, text, found, nlp_artifacts))
        return list(EntityRecognizer.remove_duplicates(results))
