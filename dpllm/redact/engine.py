"""The :class:`Redactor`: Presidio analysis in English and Chinese, offline, then an operator.

Flow: reject text that is not valid Unicode (a lone surrogate) → normalise full-width
ASCII (offsets kept) → detect the language → cut a very long text into units of at most
:data:`CHUNK_CHARS` characters (bounded memory; cuts never inside a span or a name) →
per unit, Presidio's analyzer with this module's registry, plus a pass of the other
script's name finder over the runs of that script (English NER on the Latin runs of
Chinese text, Chinese name finding on the Han runs of English text) → drop allow-listed
spans (caller's strings, dates, ISO weeks) → resolve overlaps → an operator rewrites the
spans, left to right.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from dpllm.errors import InvalidText, RedactionError
from dpllm.redact.names_en import is_eponym as names_eponym
from dpllm.redact.names_en import name_extent
from dpllm.redact.nlp import EN_MODEL_PACKAGE, DualNlpEngine, FastContextEnhancer
from dpllm.redact.operators import (
    HmacOperator,
    MaskOperator,
    Operator,
    OperatorRegistry,
    PlaceholderOperator,
)
from dpllm.redact.phone import FastPhoneRecognizer
from dpllm.redact.recognizers_en import EnGivenNameRecognizer, EnStreetAddressRecognizer
from dpllm.redact.recognizers_zh import (
    AsciiEmailRecognizer,
    CnBankCardRecognizer,
    CnCreditCardRecognizer,
    CnLandlineRecognizer,
    CnMobileRecognizer,
    CnPassportRecognizer,
    CnResidentIdContextRecognizer,
    CnResidentIdRecognizer,
    GluedIpRecognizer,
    normalize_width,
)
from dpllm.redact.units import iter_units
from dpllm.redact.url import FastUrlRecognizer
from dpllm.redact.vault import Vault

__all__ = [
    "DEFAULT_SCORE_THRESHOLD",
    "ENTITY_PRIORITY",
    "RedactionResult",
    "Redactor",
    "Span",
    "detect_language",
]

DEFAULT_SCORE_THRESHOLD = 0.4
#: Tie-break between overlapping spans of equal score: earlier wins.
ENTITY_PRIORITY: tuple[str, ...] = (
    "CN_RESIDENT_ID",
    "CN_BANK_CARD",
    "CREDIT_CARD",
    "IBAN_CODE",
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "CN_LANDLINE",
    "CN_PASSPORT",
    "IP_ADDRESS",
    "PERSON",
    "URL",
    "LOCATION",
)
_LANGUAGES = ("auto", "en", "zh")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_LATIN_RUN_ONLY = re.compile(r"[A-Za-z]+")
#: Texts longer than this are analysed in units of at most this many characters.
CHUNK_CHARS = 20_000
# Cross-script passes: a capitalised Latin word inside Chinese text, two Han characters
# inside English text; everything of the other script is blanked (offsets kept).
_LATIN_NAME = re.compile(r"(?<![A-Za-z])[A-Z][a-z]+(?![A-Za-z])")
_HAN_RUN = re.compile(r"[\u3400-\u9fff]{2}")
_LATIN_RUN = re.compile(
    r"[A-Za-z\u00c0-\u024f](?:[A-Za-z\u00c0-\u024f.'\- ]*[A-Za-z\u00c0-\u024f])?"
)
_FRAME = ("I met ", " today. ")
_NOT_HAN = re.compile(r"[^\u3400-\u9fff\uf900-\ufaff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Never redacted: dates, ISO week labels, times (the pipeline renders them everywhere).
_BUILTIN_ALLOW = re.compile(
    r"(?<![0-9A-Za-z])(?:"
    r"\d{4}-W\d{2}(?:-\d)?"
    r"|\d{4}[-/.]\d{1,2}[-/.]\d{1,2}"
    r"|\d{4}年\d{1,2}月(?:\d{1,2}[日号])?"
    r"|\d{1,2}:\d{2}(?::\d{2})?"
    r")(?![0-9A-Za-z])"
)


def detect_language(text: str) -> str:
    """Guess ``zh`` or ``en`` from the share of CJK characters among letters.

    Args:
        text: Any text.

    Returns:
        ``"zh"`` when at least a fifth of the letters are CJK ideographs, else ``"en"``.
    """
    # summed over runs: no list of one string per character (a 10 MB text)
    cjk = sum(m.end() - m.start() for m in _CJK_RUN.finditer(text))
    latin = sum(m.end() - m.start() for m in _LATIN_RUN_ONLY.finditer(text))
    return "zh" if cjk and cjk * 4 >= latin else "en"


@dataclass(frozen=True, slots=True)
class Span:
    """One detection: entity type, offsets into the original text and score (no value)."""

    entity: str
    start: int
    end: int
    score: float


@dataclass(frozen=True)
class RedactionResult:
    """A redacted text with what was found, safe to log (no raw values).

    Attributes:
        text: The redacted text.
        spans: Detections, sorted by start, with offsets into the *original* text.
        counts: Entity type → number of spans.
        language: The language the text was analysed as.
    """

    text: str
    spans: tuple[Span, ...]
    counts: Mapping[str, int]
    language: str


def _builtin_operators(hmac_key: bytes | None) -> dict[str, Callable[[], Operator]]:
    def hashed() -> Operator:
        if hmac_key is None:
            raise RedactionError("operator 'hash' needs a key: Redactor(hmac_key=...)")
        return HmacOperator(key=hmac_key)

    return {"replace": PlaceholderOperator, "mask": MaskOperator, "hash": hashed}


class Redactor:
    """Finds and rewrites personal data in English and Chinese text, without network access.

    Build it once (loading spaCy and jieba takes seconds) and share it: :meth:`redact` and
    :meth:`analyze` are safe to call from several threads, since the analyzer is only read
    after construction, which also warms every pattern up.

    Args:
        en_model: Package name of the English spaCy model.
        score_threshold: Spans scoring below this are ignored.
        hmac_key: Key for the ``hash`` operator (≥ 16 bytes). dpllm never holds a default key.
        phone_regions: Regions for Presidio's phone recognizer (``CN`` always included).
        operators: Extra named operators for this instance.
        ner_prefilter: Run English NER only on sentences holding a capitalised (or caseless)
            word that may begin a name; ``False`` runs it on the whole text. Same names on the
            shipped corpus either way (see :mod:`dpllm.redact.prefilter`).

    Raises:
        RedactionError: When Presidio, the spaCy model or jieba cannot be set up.
    """

    def __init__(
        self,
        *,
        en_model: str = EN_MODEL_PACKAGE,
        score_threshold: float = DEFAULT_SCORE_THRESHOLD,
        hmac_key: bytes | None = None,
        phone_regions: Collection[str] = ("CN", "US", "GB"),
        operators: Mapping[str, Callable[[], Operator]] | None = None,
        ner_prefilter: bool = True,
    ) -> None:
        if not 0.0 <= score_threshold <= 1.0:
            raise RedactionError("score_threshold must be within [0, 1]")
        if hmac_key is not None:
            HmacOperator(key=hmac_key)  # validates the key now, not at first use
        self._threshold = score_threshold
        self.operators = OperatorRegistry(_builtin_operators(hmac_key) | dict(operators or {}))
        regions = tuple(dict.fromkeys(["CN", *phone_regions]))
        try:
            self._analyzer = _build_presidio(en_model, regions, ner_prefilter)
        except RedactionError:
            raise
        except Exception as exc:
            raise RedactionError(f"cannot build the Presidio analyzer: {exc}") from exc
        self._lock = threading.Lock()
        for warm in ("Call 13812345678 or a@b.com, Emily.", "联系张伟13812345678，邮箱a@b.cn"):
            self.analyze(warm)

    def analyze(
        self, text: str, *, language: str = "auto", allow: Collection[str] = ()
    ) -> tuple[tuple[Span, ...], str]:
        """Detect personal data without changing the text.

        Args:
            text: The text to analyse.
            language: ``auto`` (by CJK share), ``en`` or ``zh``.
            allow: Strings never to redact (rendered statistics, labels …).

        Returns:
            The non-overlapping spans sorted by start, and the language used.

        Raises:
            RedactionError: For a non-string text, an unknown language or a Presidio failure.
        """
        if not isinstance(text, str):
            raise RedactionError(f"text must be str, not {type(text).__name__}")
        if language not in _LANGUAGES:
            raise RedactionError(f"language must be one of {_LANGUAGES}, not {language!r}")
        bad = _SURROGATE.search(text)
        if bad is not None:
            raise InvalidText(
                f"the text holds a lone surrogate (U+{ord(bad.group()):04X}) at offset "
                f"{bad.start()}: it is not valid Unicode text; send UTF-8 text"
            )
        norm = normalize_width(text)
        lang = detect_language(norm) if language == "auto" else language
        if not norm.strip():
            return (), lang
        if len(norm) <= CHUNK_CHARS:
            return _resolve(_drop_allowed(norm, self._analyze_piece(norm, lang), allow)), lang
        # Bounded memory: spaCy and jieba see one unit at a time, taken one by one from
        # the text; units end at sentence ends or safe white space (never inside a span, a
        # name or a date), so spans, allowed windows and overlaps are settled per unit
        # and only the final spans are kept.
        out: list[Span] = []
        at = 0
        for unit in iter_units(norm, min_unit=CHUNK_CHARS // 2, max_unit=CHUNK_CHARS):
            unit_lang = detect_language(unit) if language == "auto" else language
            for sp in _resolve(_drop_allowed(unit, self._analyze_piece(unit, unit_lang), allow)):
                out.append(Span(sp.entity, sp.start + at, sp.end + at, sp.score))
            at += len(unit)
        return tuple(out), lang

    def _analyze_piece(self, norm: str, lang: str) -> list[Span]:
        """One Presidio pass in ``lang``, plus the other script's names (mixed text)."""
        spans = [
            _grown(norm, sp) if lang == "en" else sp
            for sp in self._presidio(norm, lang, None)
            if _phone_in_context(norm, sp) and not _eponym(norm, sp)
        ]
        if lang == "zh" and _LATIN_NAME.search(norm):
            # English NER on the Latin runs of Chinese text ("老师 John Smith 讲得很好").
            spans += [_grown(norm, sp) for sp in self._latin_runs(norm) if not _eponym(norm, sp)]
        elif lang == "en" and _HAN_RUN.search(norm):
            # Chinese name finding on the Han runs of English text ("Thanks to 张伟").
            blanked = _NOT_HAN.sub(" ", norm)
            spans += _within_runs(norm, self._presidio(blanked, "zh", ["PERSON"]), _NOT_HAN)
        return spans

    def _latin_runs(self, norm: str) -> list[Span]:
        """PERSON spans in the Latin runs of Chinese text, each run read in an English frame.

        Alone, or with its Chinese neighbours blanked, a run like ``Noah Palmer`` gives
        spaCy's NER no context and is often missed; framed as ``I met Noah Palmer
        today.`` it is read as in English text. All runs go in one call; spans are
        mapped back to the run's offsets and anything found in the frame is dropped.
        """
        framed, where = _framed_runs(norm)
        if not framed:
            return []
        out = []
        for sp in self._presidio(framed, "en", ["PERSON"]):
            i = bisect.bisect_right([w[0] for w in where], sp.start) - 1
            if i < 0:
                continue
            f_start, o_start, length = where[i]
            start, end = sp.start - f_start, min(sp.end - f_start, length)
            if start < 0 or start >= end:
                continue
            out.extend(_trimmed(norm, Span(sp.entity, o_start + start, o_start + end, sp.score)))
        return out

    def _presidio(self, text: str, lang: str, entities: list[str] | None) -> list[Span]:
        try:
            raw = self._analyzer.analyze(
                text=text, language=lang, entities=entities, score_threshold=self._threshold
            )
        except RedactionError:
            raise
        except Exception as exc:
            raise RedactionError(f"Presidio failed to analyse the text: {exc}") from exc
        return [Span(r.entity_type, r.start, r.end, round(float(r.score), 4)) for r in raw]

    def redact(
        self,
        text: str,
        *,
        language: str = "auto",
        operator: str | Operator = "replace",
        allow: Collection[str] = (),
        scope: str | None = None,
    ) -> RedactionResult:
        """Detect personal data and rewrite it with an operator.

        Args:
            text: The text to redact.
            language: ``auto``, ``en`` or ``zh``.
            operator: ``replace`` (typed placeholders), ``mask``, ``hash`` (keyed HMAC), a
                registered name, or any :class:`Operator` (e.g. a :class:`Vault`).
            allow: Strings never redacted even when a recognizer fires on them.
            scope: Pseudonym scope for ``hash`` and vault tokens (same value → same token
                within one scope).

        Returns:
            The :class:`RedactionResult`.

        Raises:
            RedactionError: On bad arguments, an unknown operator or a Presidio failure.
        """
        op = self.operators.get(operator) if isinstance(operator, str) else operator
        spans, lang = self.analyze(text, language=language, allow=allow)
        redacted = self._apply(text, spans, op, lang, scope or "")
        counts = Counter(s.entity for s in spans)
        return RedactionResult(
            text=redacted,
            spans=spans,
            counts=MappingProxyType(dict(sorted(counts.items()))),
            language=lang,
        )

    def redact_units(
        self,
        units: Sequence[str],
        *,
        language: str = "auto",
        operator: str | Operator = "replace",
        allow: Collection[str] = (),
        scope: str | None = None,
    ) -> list[RedactionResult]:
        """:meth:`redact` of each unit, in order; each result equals its own call's.

        The English units' NER runs in one model pass first
        (:meth:`~dpllm.redact.nlp.DualNlpEngine.prefetch`), which spares most of the
        per-call cost of redacting an answer unit by unit (the wrapper and the proxy do,
        so that streams equal non-streams).

        Raises:
            RedactionError: As :meth:`redact`.
        """
        if isinstance(units, str):
            raise RedactionError("units must be a sequence of strings, not one string")
        english = []
        for unit in units:
            if not isinstance(unit, str) or _SURROGATE.search(unit) or len(unit) > CHUNK_CHARS:
                continue
            norm = normalize_width(unit)
            lang = detect_language(norm) if language == "auto" else language
            if lang == "en" and norm.strip():
                english.append(norm)
            elif lang == "zh" and _LATIN_NAME.search(norm):
                framed, _ = _framed_runs(norm)  # the English pass over its Latin runs
                if framed:
                    english.append(framed)
        with self._analyzer.nlp_engine.prefetch(english, "en"):
            return [
                self.redact(u, language=language, operator=operator, allow=allow, scope=scope)
                for u in units
            ]

    def pseudonymise(
        self,
        text: str,
        *,
        vault: Vault,
        language: str = "auto",
        allow: Collection[str] = (),
        scope: str | None = None,
    ) -> RedactionResult:
        """Replace personal data with the vault's stable tokens; undo with ``vault.restore``.

        Args:
            text: Text about to leave the process (e.g. a prompt).
            vault: Where the token ↔ value pairs are kept (in memory).
            language: ``auto``, ``en`` or ``zh``.
            allow: Strings never replaced.
            scope: Extra scope mixed into the tokens.

        Returns:
            The :class:`RedactionResult` whose ``text`` carries tokens.

        Raises:
            RedactionError: As :meth:`redact`.
        """
        return self.redact(text, language=language, operator=vault, allow=allow, scope=scope)

    def _apply(
        self, text: str, spans: tuple[Span, ...], op: Operator, language: str, scope: str
    ) -> str:
        """Rewrite the spans (non-overlapping, sorted) left to right: linear in the text."""
        if not spans:
            return text
        pieces: list[str] = []
        at = 0
        try:
            for s in spans:
                pieces.append(text[at : s.start])
                value = text[s.start : s.end]
                pieces.append(op.apply(value, entity=s.entity, language=language, scope=scope))
                at = s.end
        except RedactionError:
            raise
        except Exception as exc:
            raise RedactionError(f"the operator failed: {exc}") from exc
        pieces.append(text[at:])
        return "".join(pieces)


_BARE = re.compile(r"[0-9]{7,12}")
_CN_MOBILE = re.compile(r"1[3-9][0-9]{9}")
_PHONE_CONTEXT = re.compile(
    r"phone|tel\b|call|mobile|cell|fax|contact|number|whatsapp|text me|ring|dial|reach"
    r"|电话|手机|联系|致电|号码|热线|来电|拨打|微信|座机",
    re.IGNORECASE,
)
_CONTEXT_CHARS = 24
# Letters glued to the digits, directly or by a hyphen/underscore: a code's prefix.
_CODE_BEFORE = re.compile(r"[A-Za-z][A-Za-z0-9]*[\-_]?$")


def _phone_in_context(text: str, sp: Span) -> bool:
    """Whether a span may stand; a bare digit run is a phone number only near a phone word.

    A run of 7–12 ASCII digits with no ``+``, spaces, dashes or brackets has a phone
    number's shape by length alone; in feedback and summaries it is far more often a
    statistic (``served 1234567890 requests``), so it stays a PHONE_NUMBER only with a
    word like *phone*, *call*, 电话 or 手机 within :data:`_CONTEXT_CHARS` characters
    before it (or 8 after). A mainland mobile number (``1[3-9]`` + 9 digits) keeps its
    verdict: that shape is specific enough. Other entities always stand.
    """
    if sp.entity != "PHONE_NUMBER":
        return True
    if (
        _CODE_BEFORE.search(text, max(0, sp.start - 12), sp.start)
        and "+" not in text[sp.start : sp.end]
    ):
        return False  # the digits of a code (INV-2026-004512, SF1234…), not a phone number
    if not _BARE.fullmatch(text, sp.start, sp.end):
        return True
    if _CN_MOBILE.fullmatch(text, sp.start, sp.end):
        return True
    window = text[max(0, sp.start - _CONTEXT_CHARS) : sp.start] + " " + text[sp.end : sp.end + 8]
    return _PHONE_CONTEXT.search(window) is not None


def _framed_runs(norm: str) -> tuple[str, list[tuple[int, int, int]]]:
    """The Latin runs of Chinese text holding a capitalised word, each in the English frame.

    Returns the framed text (empty: no such run) and, per run, ``(framed start,
    original start, length)``.
    """
    framed: list[str] = []
    where: list[tuple[int, int, int]] = []
    at = 0
    for m in _LATIN_RUN.finditer(norm):
        if not _LATIN_NAME.search(m.group()):
            continue
        piece = f"{_FRAME[0]}{m.group()}{_FRAME[1]}"
        where.append((at + len(_FRAME[0]), m.start(), len(m.group())))
        framed.append(piece)
        at += len(piece)
    return "".join(framed), where


def _grown(text: str, sp: Span) -> Span:
    """A PERSON span with the half of the name NER left out (see ``name_extent``)."""
    if sp.entity != "PERSON":
        return sp
    start, end = name_extent(text, sp.start, sp.end)
    return sp if (start, end) == (sp.start, sp.end) else Span(sp.entity, start, end, sp.score)


def _eponym(text: str, sp: Span) -> bool:
    return sp.entity in ("PERSON", "LOCATION") and names_eponym(text, sp.start, sp.end)


def _within_runs(text: str, spans: list[Span], other: re.Pattern[str]) -> list[Span]:
    """Spans of a blanked pass cut back to their own script's characters.

    A pass over text whose other-script characters were blanked may join two runs
    across the blank ("Smith 讲 Brown"); each piece keeps only what lies between
    other-script characters, trimmed of white space.
    """
    out = []
    for sp in spans:
        start = sp.start
        for m in other.finditer(text, sp.start, sp.end):
            out.extend(_trimmed(text, Span(sp.entity, start, m.start(), sp.score)))
            start = m.end()
        out.extend(_trimmed(text, Span(sp.entity, start, sp.end, sp.score)))
    return out


def _trimmed(text: str, sp: Span) -> list[Span]:
    start, end = sp.start, sp.end
    while start < end and not text[start].isalnum():
        start += 1
    while end > start and not text[end - 1].isalnum():
        end -= 1
    return [Span(sp.entity, start, end, sp.score)] if end > start else []


def _drop_allowed(norm: str, spans: list[Span], allow: Collection[str]) -> list[Span]:
    if isinstance(allow, str):
        raise RedactionError("allow must be a collection of strings, not one string")
    windows = [(m.start(), m.end()) for m in _BUILTIN_ALLOW.finditer(norm)]
    values = set()
    for item in allow:
        needle = normalize_width(str(item)).strip()
        if not needle:
            continue
        values.add(needle)
        start = norm.find(needle)
        while start != -1:
            windows.append((start, start + len(needle)))
            start = norm.find(needle, start + 1)
    if not windows:
        return spans
    # A span is allowed when some window contains it: among the windows starting at or before
    # the span, the furthest end must reach the span's end (sorted starts + running max end,
    # so long texts with many dates stay O(n log n)).
    windows.sort()
    starts = [a for a, _ in windows]
    reach: list[int] = []
    for _, b in windows:
        reach.append(max(b, reach[-1]) if reach else b)
    kept = []
    for span in spans:
        if norm[span.start : span.end].strip() in values:
            continue
        i = bisect.bisect_right(starts, span.start)
        if i and reach[i - 1] >= span.end:
            continue
        kept.append(span)
    return kept


def _resolve(spans: list[Span]) -> tuple[Span, ...]:
    """Keep the best of overlapping spans: score, then entity priority, then length.

    A span that loses only part of its text to better ones keeps the rest, redacted
    under its own entity: a partial overlap must not leave the remainder in clear (a
    LOCATION ``are?xn`` over a URL ``xn--bcher-kva.de`` left ``--bcher-kva.de``).
    """
    rank = {e: i for i, e in enumerate(ENTITY_PRIORITY)}
    ordered = sorted(
        spans, key=lambda s: (-s.score, rank.get(s.entity, len(rank)), s.start - s.end, s.start)
    )
    # Chosen spans never overlap, so sorted by start they are sorted by end too.
    chosen: list[Span] = []
    starts: list[int] = []
    for span in ordered:
        if span.start >= span.end:  # an empty match has nothing to redact
            continue
        # the chosen spans that overlap this one, in order
        lo = bisect.bisect_right(starts, span.start) - 1
        if lo < 0 or chosen[lo].end <= span.start:
            lo += 1
        hi = bisect.bisect_left(starts, span.end)
        pieces, at = [], span.start
        for other in chosen[lo:hi]:
            if other.start > at:
                pieces.append((at, other.start))
            at = max(at, other.end)
        if at < span.end:
            pieces.append((at, span.end))
        for a, b in pieces:
            i = bisect.bisect_left(starts, a)
            starts.insert(i, a)
            chosen.insert(i, Span(span.entity, a, b, span.score))
    return tuple(chosen)


def _build_presidio(en_model: str, regions: tuple[str, ...], ner_prefilter: bool) -> Any:
    """Build an analyzer whose registry holds only offline recognizers."""
    import tldextract
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.predefined_recognizers import (
        CreditCardRecognizer,
        EmailRecognizer,
        IbanRecognizer,
        IpRecognizer,
        SpacyRecognizer,
    )

    # An extractor that only ever reads the suffix snapshot bundled with tldextract: no URL
    # to fetch, no cache directory. Presidio's EmailRecognizer calls the module-level
    # tldextract.extract, whose default extractor would try the network on first use.
    extractor = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    def has_suffix(domain: str) -> bool:
        parts = extractor(domain)
        return bool(parts.suffix and parts.domain)

    class OfflineEmailRecognizer(EmailRecognizer):
        def validate_result(self, pattern_text: str) -> bool:
            return has_suffix(pattern_text.rsplit("@", 1)[-1])

    nlp = DualNlpEngine(en_model=en_model, ner_prefilter=ner_prefilter)
    nlp.load()
    registry = RecognizerRegistry(supported_languages=["en", "zh"])
    for lang in ("en", "zh"):
        if lang == "en":  # its \w-based boundaries would swallow Chinese characters
            registry.add_recognizer(OfflineEmailRecognizer(supported_language=lang))
        registry.add_recognizer(FastUrlRecognizer(supported_language=lang))
        registry.add_recognizer(IpRecognizer(supported_language=lang))
        registry.add_recognizer(CreditCardRecognizer(supported_language=lang))
        registry.add_recognizer(IbanRecognizer(supported_language=lang))
        registry.add_recognizer(
            FastPhoneRecognizer(supported_language=lang, supported_regions=regions)
        )
        registry.add_recognizer(
            SpacyRecognizer(supported_language=lang, supported_entities=["PERSON", "LOCATION"])
        )
        for cls in (
            CnMobileRecognizer,
            CnLandlineRecognizer,
            CnResidentIdRecognizer,
            CnResidentIdContextRecognizer,
            GluedIpRecognizer,
            CnBankCardRecognizer,
            CnCreditCardRecognizer,
            CnPassportRecognizer,
        ):
            registry.add_recognizer(cls(language=lang))
        registry.add_recognizer(AsciiEmailRecognizer(has_suffix=has_suffix, language=lang))
        registry.add_recognizer(EnStreetAddressRecognizer(language=lang))
        registry.add_recognizer(EnGivenNameRecognizer(language=lang))
    analyzer = AnalyzerEngine(
        registry=registry,
        nlp_engine=nlp,
        supported_languages=["en", "zh"],
        context_aware_enhancer=FastContextEnhancer(),
    )
    return analyzer
