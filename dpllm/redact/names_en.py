"""Given names and eponym heads for English-script person names (written from general knowledge).

spaCy's small English model misses many ``First Last`` names in short feedback
sentences (``Thanks to Lucas Gordon for the slides``, ``Mentor: Ivy Tanaka``).
A given name from :data:`GIVEN_NAMES` followed by a capitalised word is a strong
sign of a person on its own; :data:`AMBIGUOUS_GIVEN` are given names that are also
common capitalised words (``Grace Period``, ``Mark Scheme``, ``Will Power``), which
the list recogniser leaves to the NER. :data:`EPONYM_HEADS` are the nouns that make
a name an eponym or a term (``Markov chain``, ``Euler's formula``, ``Hilbert
space``): a PERSON or LOCATION span they follow is not personal data.
"""

from __future__ import annotations

import re

__all__ = [
    "AMBIGUOUS_GIVEN",
    "EPONYM_HEADS",
    "GIVEN_NAMES",
    "NOT_SURNAMES",
    "is_eponym",
    "name_extent",
]

GIVEN_NAMES = frozenset(
    # English-speaking countries
    "Aaron Abigail Adam Adrian Aiden Alan Albert Alex Alexander Alexandra Alexis Alice Alicia "
    "Alison Allison Amanda Amber Amelia Amy Andrea Andrew Angela Anna Anne Annie Anthony Ariana "
    "Arthur Ashley Audrey Austin Ava Barbara Beatrice Becky Benjamin Bella Beth Bethany Betty "
    "Blake Brandon Brenda Brian Brianna Brittany Brooke Bryan Caleb Cameron Camila Carl Carla "
    "Carlos Caroline Carolyn Catherine Charles Charlie Charlotte Chelsea Cheryl Chloe Chris "
    "Christina Christine Christopher Claire Clara Cody Colin Connor Courtney Craig Cynthia Daisy "
    "Daniel Danielle David Deborah Declan Denise Dennis Derek Diana Diane Dominic Donald Donna "
    "Dorothy Douglas Dylan Edward Eleanor Elena Eli Elijah Elizabeth Ella Ellie Emily Emma Eric "
    "Erica Erin Esme Ethan Eva Evan Evelyn Felix Fiona Florence Frances Freya Gabriel Gabriella "
    "Gary Gavin George Georgia Gerald Gillian Gloria Greg Gregory Hailey Hannah Harold Harriet "
    "Harry Harvey Heather Helen Henry Holly Hugo Ian Imogen Isaac Isabel Isabella Isla Ivy "
    "Jacob Jake James Jamie Jane Janet Jared Jasmine Jason Jasper Jeffrey Jenna Jennifer Jeremy "
    "Jerry Jesse Jessica Joan Joanna Joe Joel John Jonathan Joseph Joshua Joyce Judith Julia "
    "Julian Julie Justin Karen Katherine Kathleen Katie Kayla Keith Kelly Kenneth Kevin Kimberly "
    "Kyle Laura Lauren Leah Leo Leon Liam Lily Linda Lisa Logan Louis Louise Lucas Lucy Luke "
    "Lydia Madison Maggie Margaret Maria Marie Marilyn Marcus Martha Martin Mary Matthew Maya "
    "Megan Melissa Mia Michael Michelle Mila Mildred Molly Nancy Naomi Natalie Nathan Nicholas "
    "Nicole Nina Noah Nora Oliver Olivia Oscar Owen Paige Pamela Patricia Patrick Paul Peter "
    "Philip Phoebe Rachel Rebecca Rhys Richard Riley Robert Roger Ronald Rosie Rowan Russell "
    "Ruth Ryan Samantha Samuel Sandra Sara Sarah Scarlett Scott Sean Sebastian Sharon Shirley "
    "Sienna Simon Sophia Sophie Stanley Stella Stephanie Stephen Steven Susan Sylvia Tessa "
    "Theo Theodore Thomas Timothy Tobias Toby Tracy Tyler Valerie Vanessa Vincent Violet "
    "Walter Wayne Wendy William Wyatt Zachary Zoe Zoey "
    # elsewhere (Europe, Latin America, Africa, South and East Asia, Middle East)
    "Ahmed Aisha Ali Amir Ana Andrei Anya Arjun Astrid Beatriz Bjorn Carmen Chiara Dalia Diego "
    "Dmitri Elif Emre Fatima Francesca Hana Hanna Hassan Hiroshi Ibrahim Ines Ingrid Ivan Javier "
    "Jorge Juan Kenji Kofi Lars Leila Lina Luca Lucia Magnus Marco Mateo Mehmet Min Mohammed "
    "Nadia Nikhil Nils Olga Omar Pablo Priya Rahul Raj Ravi Rosa Sakura Sanjay Santiago Sofia "
    "Soren Sven Takeshi Tariq Yara Yuki Yusuf Zainab Zara Nikolai Pierre Sergei Layla Mariam "
    "Chidi Amara Kwame Ngozi Tomas Lukas Jonas Matteo Giulia Alessandro Lorenzo Ananya Aditya".split()
)
#: Given names that are also common capitalised words in titles and terms.
AMBIGUOUS_GIVEN = frozenset(
    "Will Mark May June April August Grace Hope Joy Faith Bill Frank Rose Summer Autumn Dawn "
    "Art Guy Pat Sunny Chase Miles Drew Rich Ray Max Victor Georgia Jordan Austin Florence "
    "Paris Virginia Carolina Sydney Victoria Lincoln Washington Jackson".split()
)
GIVEN_NAMES = GIVEN_NAMES - AMBIGUOUS_GIVEN
#: Capitalised words that follow a given name without being a surname.
NOT_SURNAMES = frozenset(
    "I The A An And Or But Of In On At To For From With By Is Was Are Were Has Had Will Can "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April "
    "May June July August September October November December League Period Street Road "
    "Avenue Lane Drive University College School Station Airport".split()
)
#: Nouns that make the name before them a term (eponyms), lower-case.
EPONYM_HEADS = frozenset(
    "theorem theorems lemma law laws distribution distributions equation equations transform "
    "transforms series chain chains process processes space spaces method methods algorithm "
    "algorithms test tests effect effects principle formula formulas formulae inequality "
    "conjecture number numbers constant function functions matrix matrices form integral sum "
    "sequence sequences filter filters coding code trial trials diagram diagrams machine "
    "machines multiplier multipliers equilibrium razor force triangle paradox problem model "
    "models criterion coefficient correlation index estimator statistic operator polynomial "
    "polynomials curve curves elimination rule rules scale unit units limit field fields "
    "identity lattice graph graphs tree trees network networks inference information "
    "procedure analysis decomposition interpolation approximation expansion product".split()
)

_NEXT_WORD = re.compile(r"(?:['’]s)?[\s\-]*([A-Za-z]+)")
_LAST_WORD = re.compile(r"([A-Za-z]+)\W*$")


def is_eponym(text: str, start: int, end: int) -> bool:
    """Whether the name ``text[start:end]`` names a term, not a person (``Markov chain``).

    Its own last word, or the word after it (past a possessive ``'s``), is a term's
    head noun (:data:`EPONYM_HEADS`): ``Euler's formula``, ``Hilbert space``,
    ``Dijkstra's algorithm``. A span holding a digit (a street address) never is.
    """
    value = text[start:end]
    if any(ch.isdigit() for ch in value):
        return False
    last = _LAST_WORD.search(value)
    if last is not None and last.group(1).lower() in EPONYM_HEADS:
        return True
    nxt = _NEXT_WORD.match(text, end)
    return nxt is not None and nxt.group(1).lower() in EPONYM_HEADS


_WORD_BEFORE = re.compile(r"(?<![A-Za-z'’\-])([A-Z][a-z]+) $")
_WORD_AFTER = re.compile(r" ([A-Z][a-z]+(?:-[A-Z][a-z]+)?)(?![A-Za-z])")


def _name_word(word: str) -> bool:
    from dpllm.redact.prefilter import COMMON_FIRST_WORDS, is_candidate

    return (
        word not in NOT_SURNAMES
        and word.lower() not in COMMON_FIRST_WORDS
        and word.lower() not in EPONYM_HEADS
        and is_candidate(word, first=False)
    )


def name_extent(text: str, start: int, end: int) -> tuple[int, int]:
    """A PERSON span grown over the capitalised name word right beside it, each side.

    spaCy's small model often tags half of a name it does not know (``Evander
    <PERSON>``, ``Lorcan <PERSON>``): leaving the other half in clear leaks it. A
    capitalised word one space away that is not a function word, a weekday, a month,
    an acronym or a term's head noun is taken into the span (one word each side).
    """
    before = _WORD_BEFORE.search(text, max(0, start - 40), start)
    if before is not None and _name_word(before.group(1)):
        start = before.start(1)
    after = _WORD_AFTER.match(text, end)
    if after is not None and _name_word(after.group(1)):
        end = after.end(1)
    return start, end
