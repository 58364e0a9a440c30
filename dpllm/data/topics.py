"""Topics: counts over a public vocabulary, top-k selection, and keyword discovery.

The vocabulary (topic → keywords in Chinese and English) is public: it comes
from config, not from the data, so releasing one count per topic reveals no
category. Texts are segmented with jieba (Chinese) — the vocabulary's keywords
are added to a private jieba dictionary so that they segment as whole words —
and English words are matched lower-cased.

Per user and window, a topic counts **at most once**, and at most ``L``
(``max_topics``) topics count; when a user mentions more, ``L`` are kept by a
keyed pseudo-random choice (HMAC with a secret salt), so no analyst can steer
which. Keywords outside the vocabulary are released only through DP partition
selection (:class:`NewKeywords`, off by default).

**Where the bounds are applied: in the engine** (:func:`dpllm.data.bounded.topic_totals`).
:class:`TopicCounts` and :class:`TopTopics` run entirely in the engine's SQL: at
most ``T`` (``max_texts``) texts per user and window are kept — the latest, by
timestamp, chosen before any matching — then the public vocabulary is matched
there (an English keyword as a whole ASCII word in any letter case, a Chinese
keyword as a substring), each topic counts once per user, and at most ``L`` topics
per user are kept by the keyed choice. Only per-topic user counts leave the
engine. :meth:`Vocabulary.matches` is the same matching rule in Python (the
reference the engines are tested against).

The engine's rule differs from jieba's segmentation (:meth:`Vocabulary.topics_in`,
still used by :class:`NewKeywords`) in one way: a Chinese keyword inside a longer
word (``老师`` in ``老师傅``, ``练习`` in ``练习题``) matches in the engine, where
jieba keeps the longer word. Of the 82 texts of the demo phrases and the test
corpus, they differ on one (``练习题设计得好``: "the exercise problems are well
designed", homework by the engine's rule, no topic by jieba's).

.. versionchanged:: unreleased topics are matched and bounded in the engine (were:
   every text segmented in Python); ``max_texts`` bounds the texts read per user.

:class:`NewKeywords` still segments texts in Python with jieba; its rows come from
:func:`dpllm.data.sql.user_texts`, at most :data:`~dpllm.data.sql.TEXTS_PER_USER` texts
per user, each cut to :data:`~dpllm.data.sql.TEXT_CHARS` characters — a per-user bound
applied in the SQL before any tokenising, so one user's many long texts cannot stretch
the work (a timing channel).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dpllm.data import bounded, sql
from dpllm.data.base import Exact, Scope, _check_bound, _Priced, keyed_choice
from dpllm.errors import ConfigError, DataError, InvalidPrivacyParameter
from dpllm.privacy.mechanisms import DiscreteLaplace, Mechanism, permute_and_flip
from dpllm.privacy.noise import NoiseSource, SecureNoise
from dpllm.release import Cost, Release

__all__ = [
    "DEFAULT_MAX_TEXTS",
    "DEFAULT_MAX_TOPICS",
    "DEFAULT_VOCABULARY",
    "NewKeywords",
    "Topic",
    "TopicCounts",
    "TopTopics",
    "Vocabulary",
]

_WORD = re.compile(r"\w+")

DEFAULT_MAX_TOPICS = 3
"""L, topics counted per user per window: the config's default
(``[bounds] max_topics_per_user``)."""

DEFAULT_MAX_TEXTS = 10
"""T, texts read per user per window by the topic queries (the latest T): bounds
the matching work one user can cause before any of it is done."""


@dataclass(frozen=True, slots=True)
class Topic:
    """One topic of the public vocabulary and its keywords."""

    name: str
    zh: tuple[str, ...] = ()
    en: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "zh", tuple(self.zh))
        object.__setattr__(self, "en", tuple(k.lower() for k in self.en))
        if not self.name or not isinstance(self.name, str):
            raise ConfigError("a topic needs a name", field="topics")
        if not (self.zh or self.en):
            raise ConfigError(f"topic {self.name!r} has no keywords", field="topics")
        for k in self.zh + self.en:
            if not k or any(ch.isspace() for ch in k):
                raise ConfigError(
                    f"topic {self.name!r}: keyword {k!r} must be one word without spaces",
                    field="topics",
                )
        try:
            bounded.keyword_pattern(self.en, self.zh)
        except DataError as exc:
            raise ConfigError(f"topic {self.name!r}: {exc}", field="topics") from None

    def matches(self, text: str) -> bool:
        """Whether ``text`` mentions this topic by the engines' rule (see the module doc)."""
        return _pattern(self).search(text) is not None


@functools.lru_cache(maxsize=256)
def _pattern(topic: Topic) -> re.Pattern[str]:
    return re.compile(bounded.keyword_pattern(topic.en, topic.zh))


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The public topic vocabulary (hashable, part of a query's fingerprint)."""

    topics: tuple[Topic, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(self.topics))
        names = [t.name for t in self.topics]
        if not names:
            raise ConfigError("the topic vocabulary is empty", field="topics")
        if len(set(names)) != len(names):
            raise ConfigError("topic names must be distinct", field="topics")

    @classmethod
    def from_mapping(cls, data: dict[str, dict[str, Iterable[str]]]) -> Vocabulary:
        """``{"homework": {"zh": ["作业"], "en": ["homework"]}, …}`` → Vocabulary."""
        return cls(
            tuple(
                Topic(name, tuple(kw.get("zh", ())), tuple(kw.get("en", ())))
                for name, kw in data.items()
            )
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.topics)

    def keyword_index(self) -> dict[str, set[str]]:
        index: dict[str, set[str]] = defaultdict(set)
        for t in self.topics:
            for k in t.zh + t.en:
                index[k.lower()].add(t.name)
        return index

    def tokens(self, text: str) -> set[str]:
        """The lower-cased words of ``text`` (jieba for Chinese, with the keywords added)."""
        return {w.lower() for w in _tokenizer(self).cut(text, HMM=False) if _WORD.fullmatch(w)}

    def matches(self, text: str) -> set[str]:
        """The topics ``text`` mentions by the engines' rule (whole ASCII words for
        English keywords, substrings for Chinese ones): the Python reference of
        :func:`dpllm.data.bounded.topic_totals`."""
        return {t.name for t in self.topics if t.matches(text)}

    def keywords(self) -> tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]:
        """``(name, English keywords, Chinese keywords)`` per topic, for the engine's SQL."""
        return tuple((t.name, t.en, t.zh) for t in self.topics)

    def topics_in(self, text: str) -> set[str]:
        index = _index(self)
        found: set[str] = set()
        for token in self.tokens(text):
            found |= index.get(token, set())
        return found


@functools.lru_cache(maxsize=8)
def _index(vocabulary: Vocabulary) -> dict[str, set[str]]:
    return vocabulary.keyword_index()


@functools.lru_cache(maxsize=8)
def _tokenizer(vocabulary: Vocabulary) -> Any:
    """A private jieba tokenizer with the vocabulary's Chinese keywords (never the global one)."""
    from dpllm._jieba import private_tokenizer

    tokenizer = private_tokenizer()
    for topic in vocabulary.topics:
        for word in topic.zh:
            tokenizer.add_word(word, freq=100_000)
    return tokenizer


DEFAULT_VOCABULARY = Vocabulary(
    (
        Topic(
            "teaching",
            ("老师", "讲解", "讲课", "授课"),
            ("teacher", "lecturer", "explanation", "explains", "teaching"),
        ),
        Topic("pace", ("节奏", "进度", "太快", "太慢"), ("pace", "pacing", "rushed", "slow")),
        Topic("homework", ("作业", "练习"), ("homework", "assignment", "assignments", "exercises")),
        Topic("exam", ("考试", "测验", "期末"), ("exam", "exams", "quiz", "test")),
        Topic(
            "materials",
            ("课件", "资料", "教材", "讲义"),
            ("slides", "materials", "notes", "textbook"),
        ),
        Topic("video", ("视频", "音质", "画质", "录播"), ("video", "audio", "recording", "sound")),
        Topic("difficulty", ("难度", "太难", "简单"), ("difficult", "hard", "easy", "difficulty")),
        Topic("examples", ("例子", "案例", "实例"), ("examples", "example", "cases")),
        Topic(
            "platform", ("平台", "网站", "卡顿", "登录"), ("platform", "website", "login", "lag")
        ),
    )
)
"""A public vocabulary for course feedback (matches the demo data)."""


def topic_scores_many(
    vocabulary: Vocabulary,
    scope: Scope,
    spans: list[bounded.Span],
    *,
    max_texts: int,
    max_topics: int,
    query: str,
) -> list[Exact]:
    """:func:`topic_scores` for each of ``spans`` (disjoint, sorted) from one statement."""
    limit = min(max_topics, len(vocabulary.topics))
    stmt = bounded.topic_totals(
        scope.columns,
        scope.engine.dialect,
        scope.source,
        spans,
        vocabulary.keywords(),
        max_texts=max_texts,
        max_topics=limit,
        salt=scope.salt,
    )
    counts = [[0] * len(vocabulary.topics) for _ in spans]
    for w, i, n in scope.engine.fetch(stmt, query=query):
        counts[int(w)][int(i)] = int(n)
    return [Exact(tuple(c), vocabulary.names) for c in counts]


class _InEngine:
    """The measure of the topic queries: texts bounded, matched and counted in the engine.

    Shared by :class:`TopicCounts` and :class:`TopTopics`, which differ only in what
    they publish (noisy counts, or a selection).
    """

    if TYPE_CHECKING:  # fields of the concrete queries
        vocabulary: Vocabulary
        max_texts: int
        max_topics: int
        name: str

    def columns_needed(self) -> tuple[str, ...]:
        return ("user", "timestamp", "text")

    def measure(self, scope: Scope) -> Exact:
        (exact,) = self.measure_spans(scope, [(scope.start, scope.end)])
        return exact

    def measure_spans(self, scope: Scope, spans: list[bounded.Span]) -> list[Exact]:
        """The exact aggregate of each of ``spans`` (disjoint, sorted), from one statement."""
        return topic_scores_many(
            self.vocabulary,
            scope,
            spans,
            max_texts=self.max_texts,
            max_topics=self.max_topics,
            query=self.name,
        )


@dataclass(frozen=True, kw_only=True)
class TopicCounts(_InEngine, _Priced):
    """Number of users mentioning each topic of the public vocabulary.

    Bounds, applied in the engine's SQL (:func:`dpllm.data.bounded.topic_totals`):
    at most ``max_texts`` texts per user per window are read (the latest; the
    choice never looks at their content); a user counts a topic at most once per
    window and counts at most ``L = min(max_topics, topics in the vocabulary)``
    topics (keyed choice when they mention more). The text bound only limits the
    work; the sensitivity follows from the topic bounds alone.

    Sensitivity: one user's vector is 0/1 with at most L ones: L1 ≤ L, L2 ≤ √L.

    Privacy: one vector release, ε-DP (discrete Laplace scale L/ε per topic) or
    ρ-zCDP (σ = √L/√(2ρ)) per user per window. A top-k of the noisy counts
    (:func:`dpllm.data.stats.top_k`) is post-processing and free.
    """

    vocabulary: Vocabulary = DEFAULT_VOCABULARY
    max_topics: int = DEFAULT_MAX_TOPICS
    max_texts: int = DEFAULT_MAX_TEXTS
    name: str = "topic_counts"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_bound("max_topics", self.max_topics)
        _check_bound("max_texts", self.max_texts)

    def mechanisms(self) -> tuple[Mechanism, ...]:
        lim = min(self.max_topics, len(self.vocabulary.topics))
        return (self._mechanism(l1=lim, l2=math.sqrt(lim)),)

    def publish(
        self,
        exact: Exact,
        *,
        fingerprint: str,
        window: str,
        confidence: float,
        noise: NoiseSource | None,
    ) -> Release:
        return self._count_release(
            exact,
            unit="users",
            labels=self.vocabulary.names,
            fingerprint=fingerprint,
            window=window,
            confidence=confidence,
            noise=noise,
        )


@dataclass(frozen=True, kw_only=True)
class TopTopics(_InEngine, _Priced):
    """The k most-mentioned topics, selected without releasing any count.

    Scores are the bounded per-topic user counts of :class:`TopicCounts`
    (bounded in the engine, as there).

    Sensitivity: adding or removing one user changes each score by at most 1
    (a user counts a topic at most once), all in the same direction (monotonic).

    Privacy: permute-and-flip peeled k times with ε/k each (exponential noise of
    scale k/ε): ε-DP per user per window. Pure ε only. The release lists the
    chosen topics in order, with their rank as the value (no count is released).
    """

    vocabulary: Vocabulary = DEFAULT_VOCABULARY
    k: int = 3
    max_topics: int = DEFAULT_MAX_TOPICS
    max_texts: int = DEFAULT_MAX_TEXTS
    name: str = "top_topics"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.epsilon is None:
            raise InvalidPrivacyParameter("TopTopics is pure ε-DP: give epsilon=, not rho=")
        _check_bound("k", self.k, upper=len(self.vocabulary.topics))
        _check_bound("max_topics", self.max_topics)
        _check_bound("max_texts", self.max_texts)

    def mechanisms(self) -> tuple[Mechanism, ...]:
        """None: permute-and-flip selects labels, it adds no noise to a value."""
        return ()

    @property
    def cost(self) -> Cost:
        assert self.epsilon is not None
        return Cost.pure(self.epsilon)

    def publish(
        self,
        exact: Exact,
        *,
        fingerprint: str,
        window: str,
        confidence: float,
        noise: NoiseSource | None,
    ) -> Release:
        assert self.epsilon is not None
        source = noise or SecureNoise()
        chosen = permute_and_flip(
            exact.values, epsilon=self.epsilon, sensitivity=1.0, k=self.k, noise=source
        )
        ranks = tuple(float(i + 1) for i in range(len(chosen)))
        return Release(
            name=self.name,
            values=ranks,
            intervals=tuple((r, r) for r in ranks),
            mechanism="permute_and_flip",
            noise_scale=self.k / self.epsilon,
            cost=self.cost,
            fingerprint=fingerprint,
            kind="rank",
            unit="rank",
            labels=tuple(exact.labels[i] for i in chosen),
            confidence=confidence,
            window=window,
            seeded=bool(source.seeded),
            small_threshold=None,
            notes=("selection only: values are ranks, not counts",),
        )


@dataclass(frozen=True, kw_only=True)
class NewKeywords(_Priced):
    """Words outside the vocabulary, released only through DP partition selection.

    Off by default (not in the default catalogue): the set of released words
    depends on the data, which is why it costs δ as well as ε.

    Bounds, applied in Python to the SQL's ``(user key, text)`` rows: each user
    contributes at most ``max_keywords`` (L) distinct words per window, each
    once (keyed choice when more). Words with a digit, shorter
    than two characters, or already in the vocabulary are never candidates.

    Sensitivity and threshold: counts get discrete Laplace noise of scale
    ``b = L/ε`` (L1 sensitivity L). A word is released iff its noisy count is at
    least ``τ = 1 + ⌈b·ln(L/δ)⌉``. A word present only in the larger of two
    neighbouring datasets has exact count 1, so it passes with probability
    ``P(Z ≥ τ−1) ≤ e^{−(τ−1)/b} ≤ δ/L``; at most L such words exist, so the
    selection is (ε, δ)-DP (Korolova et al. 2009; Wilson et al. 2020, §3).

    Privacy: (ε, δ)-DP per user per window. :class:`~dpllm.data.stats.StatsRunner`
    refuses this query unless the caller passes ``accept_delta=True``; δ is then
    charged with ε and capped by the pools' δ caps (default 10⁻⁶ per window), and
    written onto the release.
    """

    delta: float = 1e-6
    max_keywords: int = 3
    vocabulary: Vocabulary = DEFAULT_VOCABULARY
    name: str = "new_keywords"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.epsilon is None:
            raise InvalidPrivacyParameter("NewKeywords is (ε, δ)-DP: give epsilon=, not rho=")
        if not (isinstance(self.delta, float) and 0.0 < self.delta < 1.0):
            raise InvalidPrivacyParameter(f"delta must lie in (0, 1), got {self.delta!r}")
        _check_bound("max_keywords", self.max_keywords, upper=100)

    @property
    def _mech(self) -> DiscreteLaplace:
        assert self.epsilon is not None
        return DiscreteLaplace(epsilon=self.epsilon, sensitivity=self.max_keywords)

    def mechanisms(self) -> tuple[Mechanism, ...]:
        """The counts' noise (the threshold then selects; δ is not in the cost)."""
        return (self._mech,)

    @property
    def threshold(self) -> float:
        b = self._mech.scale
        return 1.0 + math.ceil(b * math.log(self.max_keywords / self.delta))

    def columns_needed(self) -> tuple[str, ...]:
        return ("user", "timestamp", "text")

    def measure(self, scope: Scope) -> Exact:
        if scope.engine.dialect is sql.Dialect.SPARK:
            # Per-user texts would leave the cluster (StatsRunner.check refuses first).
            raise DataError("new_keywords is not available on the spark source")
        known = set(_index(self.vocabulary))
        stmt = sql.user_texts(
            scope.columns, scope.engine.dialect, scope.source, scope.start, scope.end
        )
        words: dict[str, set[str]] = defaultdict(set)
        for user, text in scope.engine.fetch(stmt, query=self.name):
            for w in self.vocabulary.tokens(text):
                if len(w) >= 2 and w not in known and not any(ch.isdigit() for ch in w):
                    words[user].add(w)
        counts: Counter[str] = Counter()
        for user, ws in words.items():
            counts.update(keyed_choice(scope.salt, user, ws, self.max_keywords))
        labels = tuple(sorted(counts))
        return Exact(tuple(counts[w] for w in labels), labels)

    def publish(
        self,
        exact: Exact,
        *,
        fingerprint: str,
        window: str,
        confidence: float,
        noise: NoiseSource | None,
    ) -> Release:
        source = noise or SecureNoise()
        mech = self._mech
        noisy: list[float] = (
            [float(v) for v in mech.randomise(list(exact.values), noise=source)]
            if exact.values
            else []
        )
        hw = mech.half_width(confidence)
        kept = [
            (w, float(v)) for w, v in zip(exact.labels, noisy, strict=True) if v >= self.threshold
        ]
        kept.sort(key=lambda item: (-item[1], item[0]))
        common: dict[str, Any] = {
            "mechanism": "partition_selection",
            "noise_scale": mech.scale,
            "cost": mech.cost,
            "fingerprint": fingerprint,
            "confidence": confidence,
            "window": window,
            "seeded": bool(source.seeded),
            "delta": self.delta,
        }
        if not kept:
            return Release(
                name=self.name,
                values=(0.0,),
                intervals=((0.0, 0.0),),
                kind="selection_size",
                unit="words",
                small_threshold=None,
                notes=(f"no word passed the threshold {self.threshold:g}",),
                **common,
            )
        return Release(
            name=self.name,
            values=tuple(v for _, v in kept),
            intervals=tuple((max(0.0, v - hw), v + hw) for _, v in kept),
            kind="count",
            unit="users",
            labels=tuple(w for w, _ in kept),
            notes=(f"partition selection, threshold {self.threshold:g}",),
            **common,
        )
