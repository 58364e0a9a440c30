"""The English NER pre-filter: run spaCy's NER only around the words that may begin a name.

spaCy's NER is the dominant cost of English redaction, yet it is only asked for ``PERSON`` and
``LOCATION``, which English writes with capitals. :func:`candidate_words` finds the words with
an upper-case letter or in a script without case (Chinese, Arabic …), except

* a sentence's first word when it is a common English word that is not also a given name
  (``The``, ``Please``, ``Call`` — never ``Will``, ``Grace`` or ``Mark``; see
  :data:`COMMON_FIRST_WORDS` and :data:`NAME_LIKE_WORDS`). Sentences are split by a regex
  that never breaks after a short capitalised word with a period (``Mr.``, ``Dr.``, ``J.``),
  so ``Dr. Will`` does not make ``Will`` a first word;
* words glued to a digit (``DD2026…``, ``2026-W08``: the engine drops entities with digits)
  and words in an e-mail address or URL (those recognizers score above NER and win);
* ``I`` (``I'm``, ``I'd`` …), weekdays, months that are not also names, and all-caps words in
  :data:`ACRONYMS` (``ID``, ``PDF`` …; never ``US`` or ``UK``, which NER calls places).

:func:`candidate_token_windows` keeps each candidate's tokens with :data:`CONTEXT_TOKENS`
tokens on either side and merges ranges that overlap or touch; the engine runs NER once on
those tokens (cut from the full text's doc, so tokens and their norms are the same) joined by a
:data:`SEPARATOR` token, and :class:`TokenWindows` maps entities back. The pinned model's NER
reads a token through a CNN of depth 4 with window 1 (four tokens either side), so a candidate
is embedded as in the full text; on the shipped corpus and the benchmark texts the names found
are identical (tested). :func:`ner_windows` is the same idea in characters, with
:data:`CONTEXT_WORDS` whitespace-separated words either side (a word is one or more tokens, so
it keeps more: ~40% more tokens on the benchmark's English texts, where numbers, dates and
addresses are words of several tokens). Sentence-sized ranges were tried first: they kept
about as much text but changed NER's answer at the joins.

.. versionchanged:: 0.1.0
   The engine reads token windows (:func:`candidate_token_windows`) instead of word windows.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

__all__ = [
    "ACRONYMS",
    "COMMON_FIRST_WORDS",
    "CONTEXT_TOKENS",
    "CONTEXT_WORDS",
    "NAME_LIKE_WORDS",
    "SEPARATOR",
    "TokenWindows",
    "candidate_token_windows",
    "candidate_words",
    "is_candidate",
    "ner_windows",
    "sentence_ranges",
    "token_windows",
]

#: Joins windows that do not touch: a paragraph break, which NER does not read across.
SEPARATOR = "\n\n"
#: Words kept either side of a candidate by :func:`ner_windows` (a word is one or more tokens).
CONTEXT_WORDS = 4
#: Tokens kept either side of a candidate: the receptive field of the pinned model's NER.
CONTEXT_TOKENS = 4

#: English words that are also given names: never treated as a skippable first word.
NAME_LIKE_WORDS = frozenset(
    "will may mark bill grace rose hope joy faith june april august jack frank ray dawn rich "
    "chase miles drew lee pat sue don art gene guy victor sunny summer autumn ruby iris jean "
    "max ben sam bob rob dick nick bert carol holly ivy daisy lily violet amber crystal pearl "
    "angel destiny harmony melody patience prudence charity constance honor justice king "
    "earl duke prince major sterling cash clay dale glen heath brook river rock stone wood "
    "hunter archer baker carter cooper fisher mason porter tanner turner walker ward young "
    "brown green white black gray grey long short little law best love case hall hill page "
    "price wells west north lane penny sandy ginger olive hazel ash jade robin wren teddy "
    "sonny christian nelson jordan morgan taylor parker reed gordon barnes hayes brooks".split()
)

# Function words and the words a sentence in feedback, support or chat text usually opens
# with. A first word outside this list counts as a candidate, so a short list only costs speed.
_COMMON = (
    "a about above after again against all almost also although always am among an and "
    "another any anyone anything anyway are around as at back be because been before being "
    "below besides between both but by can cannot could did do does doing done down during "
    "each either else even ever every everyone everything except few first for from further "
    "had has have having he hence her here hers herself him himself his how however if in "
    "indeed into is it its itself just last least less many me meanwhile might more moreover "
    "most mostly much must my myself neither never nevertheless next no nobody none nor not "
    "nothing now of off often on once one only onto or other others otherwise our ours "
    "ourselves out over own per perhaps please quite rather really regarding same several she "
    "should since so some someone something sometimes still such than that the their theirs "
    "them themselves then there therefore these they this those though through thus to "
    "together too toward towards under unless until up upon us very via was we well were what "
    "whatever when whenever where whereas wherever whether which while who whoever whom whose "
    "why with within without would yet you your yours yourself yourselves "
    "hi hello hey dear thanks thank thankyou sorry yes yeah okay ok sure great good nice bad "
    "fine cool wow oh ah well anyway overall honestly actually basically unfortunately "
    "fortunately luckily sadly hopefully maybe probably definitely certainly clearly "
    "obviously apparently generally usually recently currently finally firstly secondly "
    "lastly additionally also furthermore otherwise instead still again today tomorrow "
    "yesterday tonight soon later earlier now then recently lately "
    "call contact email write send reach ask tell let give take make get keep put check see "
    "look find note remember please refund cancel pay charge confirm update change add "
    "remove delete reset open close try use help show explain book register enrol enroll "
    "submit upload download reply respond forward attach sign join leave visit "
    "i'm i've i'd i'll im ive "
    "my our your his her their its this that these those there here what which who "
    "office phone mobile card bank account student students course courses class classes "
    "lecture lectures lesson lessons teacher teachers tutor homework assignment assignments "
    "exam exams test tests quiz grade grades score scores rating ratings week weeks month "
    "months year years day days order orders payment payments price prices fee fees total "
    "passport address number numbers id email emails message messages question questions "
    "answer answers problem problems issue issues feedback review reviews comment comments "
    "service support team staff system website site app page video videos audio slides "
    "material materials content topic topics project projects report reports data result "
    "results time times deadline schedule room building library lab labs session sessions "
    "meeting meetings event events program programme workshop seminar tuition refunds "
    "too very so much many more most less few some any all both each every no not none "
    "great good bad poor excellent terrible awful amazing awesome helpful useful boring "
    "interesting difficult easy hard clear unclear confusing long short fast slow "
    "new old next previous first second third final main other another same different "
    "note notes ps btw fyi re fw fwd subject attached attachment regards best cheers "
    "is are was were do does did have has had can could will would should may might must "
    "it's that's there's here's what's who's let's don't doesn't didn't can't won't isn't "
    "aren't wasn't weren't haven't hasn't hadn't couldn't wouldn't shouldn't"
)
#: Skippable first words: the list above minus anything in :data:`NAME_LIKE_WORDS`.
COMMON_FIRST_WORDS = frozenset(_COMMON.split()) - NAME_LIKE_WORDS

#: All-caps words NER does not call a person or a place (``US``/``UK``/``EU`` are not here).
ACRONYMS = frozenset(
    "ID IDS OK PDF FAQ TA TAS AM PM URL SMS PIN QR ETA GPA HR UI API CV PS FYI ASAP RSVP "
    "NB TBD TBA DM IM CC BCC RE FW FWD VIP MOOC PPT DOC XLS CSV MP3 MP4 HTML CEO CTO".split()
)
_ALWAYS_SKIP = frozenset(
    "I Monday Tuesday Wednesday Thursday Friday Saturday Sunday Mon Tue Tues Wed Thu Thur "
    "Thurs Fri Sat Sun January February March July September October November December "
    "Jan Feb Mar Apr Jul Sep Sept Oct Nov Dec".split()
)

# A sentence ends at `.`, `!`, `?` or `…` (plus closing quotes and brackets) before whitespace,
# or at a line break. The negative look-behind keeps `Mr.`, `Dr.`, `Prof.`, `J.` (a
# capitalised word of up to four letters before a period) inside the sentence.
_BOUNDARY = re.compile(
    r"(?:(?<![A-Z])(?<![A-Z][a-z])(?<![A-Z][a-z]{2})(?<![A-Z][a-z]{3})\.+|[!?…]+)"
    r"[\"'”’)\]]*(?=\s)|\n"
)
# A word holding an upper-case or non-ASCII letter, with the letters and digits glued to it
# (so ``DD2026`` and ``2026-W08`` show their digits); lower-case ASCII words never match.
_CANDIDATE = re.compile(r"(?<![^\W_])[^\W_]*(?:[A-Z]|[^\W\x00-\x7f])(?:[^\W_]|['’\-][^\W_])*")
_ADDRESS = re.compile(r"\S*(?:@|://)\S*|(?<!\S)www\.\S*", re.IGNORECASE)
_WORD_CHAR = re.compile(r"\w")
_NON_SPACE = re.compile(r"\S+")
_APOSTROPHE = re.compile(r"['’]")


def sentence_ranges(text: str) -> list[tuple[int, int]]:
    """Split ``text`` into sentences, as ``(start, end)`` without surrounding whitespace."""
    ranges: list[tuple[int, int]] = []
    pos = 0
    for m in _BOUNDARY.finditer(text):
        _append_stripped(text, pos, m.end(), ranges)
        pos = m.end()
    _append_stripped(text, pos, len(text), ranges)
    return ranges


def _append_stripped(text: str, start: int, end: int, out: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        out.append((start, end))


def is_candidate(word: str, *, first: bool) -> bool:
    """Whether ``word`` may begin a name; ``first``: it opens its sentence."""
    if any(ch.isdigit() for ch in word) or not any(map(_cased_or_caseless, word)):
        return False
    base = _APOSTROPHE.split(word, maxsplit=1)[0]
    if base in _ALWAYS_SKIP or (word.isupper() and word in ACRONYMS):
        return False
    return not (first and word.lower() in COMMON_FIRST_WORDS)


def candidate_words(text: str) -> list[tuple[int, int]]:
    """Offsets of the words in ``text`` that may begin a name (see the module docstring)."""
    sentences = sentence_ranges(text)
    sentence_starts = [s for s, _ in sentences]
    addresses = [(m.start(), m.end()) for m in _ADDRESS.finditer(text)]
    found: list[tuple[int, int]] = []
    a = 0
    for m in _CANDIDATE.finditer(text):
        start, end = m.span()
        while a < len(addresses) and addresses[a][1] <= start:
            a += 1
        if a < len(addresses) and addresses[a][0] <= start:
            continue  # inside an e-mail address or URL
        i = bisect.bisect_right(sentence_starts, start) - 1
        first = i >= 0 and _WORD_CHAR.search(text, sentence_starts[i], start) is None
        if is_candidate(m.group(), first=first):
            found.append((start, end))
    return found


def _cased_or_caseless(ch: str) -> bool:
    """An upper-case letter, or a letter without case (CJK, Arabic …: NER may name those)."""
    return ch.isupper() or (ch.isalpha() and not ch.islower())


@dataclass(frozen=True, slots=True)
class TokenWindows:
    """Token ranges ``[start, end)`` of the full doc that NER reads, in order, non-overlapping.

    NER reads them joined, one separator token between neighbours; :meth:`to_full` maps a
    token range of the joined doc back to the full doc's tokens.
    """

    starts: tuple[int, ...]
    ends: tuple[int, ...]
    opens: tuple[int, ...] = field(default=(), compare=False)
    """Per window, the full doc's token where its first candidate begins (empty: unknown).

    The tokens before it are context only: NER must not open an entity there, since its
    decoding state there is not the full text's (see :meth:`blocked`)."""

    def blocked(self) -> list[bool]:
        """Per token of the joined doc: whether NER must keep it out of every entity.

        The separators, and a window's left context when the window starts inside the
        text: there the greedy decoder's state depends on text the window cut off, and
        an entity opened there (``tomorrow at 10am``) could run over the candidate and
        hide a name. From the first candidate on, every token is embedded as in the full
        text (the window keeps the model's receptive field), and decoding goes on from a
        closed state, where a name begins.
        """
        out: list[bool] = []
        for i, (start, end) in enumerate(zip(self.starts, self.ends, strict=True)):
            if out:
                out.append(True)  # the separator
            first = self.opens[i] if self.opens and start > 0 else start
            out.extend(k < first for k in range(start, end))
        return out

    def joined_starts(self) -> list[int]:
        """Index of each window's first token in the joined doc."""
        out, pos = [], 0
        for start, end in zip(self.starts, self.ends, strict=True):
            out.append(pos)
            pos += end - start + 1  # the window, then one separator token
        return out

    def to_full(self, start: int, end: int, joined: list[int]) -> tuple[int, int] | None:
        """Map joined tokens ``[start, end)`` to the full doc, or None if they cross a join."""
        i = bisect.bisect_right(joined, start) - 1
        if i < 0 or end - joined[i] > self.ends[i] - self.starts[i]:
            return None
        shift = self.starts[i] - joined[i]
        return start + shift, end + shift


def token_windows(windows: list[tuple[int, int]], token_starts: list[int]) -> TokenWindows:
    """The tokens of character windows that start and end on token boundaries."""
    starts = [bisect.bisect_left(token_starts, lo) for lo, _ in windows]
    ends = [bisect.bisect_left(token_starts, hi) for _, hi in windows]
    return TokenWindows(starts=tuple(starts), ends=tuple(ends))


def candidate_token_windows(
    text: str, token_starts: list[int], *, context: int = CONTEXT_TOKENS
) -> TokenWindows:
    """The tokens NER must read: each candidate's tokens with ``context`` tokens either side.

    Args:
        text: English text (already width-normalised).
        token_starts: Start offset of each token of ``text``'s doc, ascending.
        context: Tokens kept on either side of each candidate.

    Returns:
        Sorted token ranges, merged where they overlap or touch; empty without a candidate.
    """
    starts: list[int] = []
    ends: list[int] = []
    opens: list[int] = []
    n = len(token_starts)
    for start, end in candidate_words(text):
        first = max(0, bisect.bisect_right(token_starts, start) - 1)
        lo = max(0, first - context)
        hi = min(n, bisect.bisect_left(token_starts, end) + context)
        if ends and lo <= ends[-1]:
            ends[-1] = max(ends[-1], hi)
        else:
            starts.append(lo)
            ends.append(hi)
            opens.append(first)
    return TokenWindows(starts=tuple(starts), ends=tuple(ends), opens=tuple(opens))


def ner_windows(text: str, *, context: int = CONTEXT_WORDS) -> list[tuple[int, int]]:
    """The parts of ``text`` NER must read: each candidate with ``context`` words either side.

    Args:
        text: English text (already width-normalised).
        context: Whitespace-separated words kept on either side of each candidate.

    Returns:
        Sorted, non-touching ``(start, end)`` windows that begin and end on non-space
        characters (so on token boundaries); empty when ``text`` has no candidate.
    """
    candidates = candidate_words(text)
    if not candidates:
        return []
    words = [(m.start(), m.end()) for m in _NON_SPACE.finditer(text)]
    word_starts = [w for w, _ in words]
    merged: list[tuple[int, int]] = []
    for start, end in candidates:
        first = bisect.bisect_right(word_starts, start) - 1 - context
        last = bisect.bisect_left(word_starts, end) - 1 + context
        lo, hi = words[max(0, first)][0], words[min(len(words) - 1, last)][1]
        if merged and not text[merged[-1][1] : lo].strip():
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))  # overlapping or touching
        else:
            merged.append((lo, hi))
    return merged
