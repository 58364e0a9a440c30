"""Chinese person names in segmented text: surname + given-name characters, common words kept.

jieba's part-of-speech dictionary alone is a poor name finder: it tags hundreds of
common words ``nr`` (陈述, 许可, 叶子, 田野 …) and eponyms too (高斯分布, 黎曼积分),
while a name it has never seen is cut in odd places (马 + 天华, 向 + 诗天, 欧阳 + 玉).
This finder reads characters, using jieba's segmentation and dictionary only as
evidence against a candidate:

1. a candidate starts where a jieba token starts, with a surname (a compound one
   such as 欧阳, 司徒, 尉迟 first, else a single one);
2. the given name is the next one or two Han characters, each one common in given
   names (:data:`GIVEN_CHARS`, written from general knowledge of Chinese naming,
   not from any test set); two characters unless the pair is itself a common word
   (李明天 → 李明) or the second begins one with what follows;
3. it is vetoed when the candidate is a common dictionary word (a non-``nr`` word,
   or an ``nr`` word so frequent it is mostly a word: 叶子, 黎明), when it ends in a
   noun suffix (李子, 王道), or when an eponym suffix follows (高斯分布, 欧拉公式,
   马尔可夫链 …).

Candidates from jieba's own ``nr`` tag for three-character words stay (rarer
characters), with the same vetoes.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["COMPOUND_SURNAMES", "EPONYM_SUFFIXES", "GIVEN_CHARS", "find_names"]

COMPOUND_SURNAMES = frozenset(
    "欧阳 司马 上官 诸葛 东方 皇甫 慕容 令狐 尉迟 长孙 宇文 夏侯 端木 公孙 司徒 司空 澹台 "
    "公冶 太史 申屠 轩辕 钟离 闾丘 南宫 西门 独孤 百里 呼延 赫连 万俟 濮阳 淳于 单于 拓跋".split()
)
#: Characters common in given names (351).
GIVEN_CHARS = frozenset(
    "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍建国红梅志宏鹏辉晓丹宇欣怡涵浩然"
    "雨轩梓萱思远佳琪嘉文博俊峰斌婷雪琳颖慧莉倩秋燕凤洁琴云彬林鑫昊睿泽晨阳旭瑞凯航宁婉婧诗"
    "琦璐茜蕾薇莹雯岚瑶悦妍曦彤淑珍翠荣德福贵春兵飞龙海亮毅剑坤永健成安天逸清铭豪晶宏玲丰"
    "淼森鹤鸿麟骏驰腾翔宸煜炎烨熙灿昕昱晖晗暄曼蔓菲芬芸芷苓若茹荷莲菊蓉蕙馨香月星辰晴露"
    "霖霏雅静娴婕媛嫣姝妮娅娇婵姗姿嫦柔蓓贝琳琼瑾瑜璇珊珂瑛琬瑗璟瑄琰琛玮玥珏琪瑞璞璋"
    "锦钰铮锋锐镇鑫钧铭钊銮斐彦韬弘毅勋劲卓越群立新振家兴盛光耀辉永长富康乐欢喜庆祥瑞"
    "和顺泰安宁静怡然晓曙光启明朗华夏中正仁义礼智信忠孝廉勤俭朴诚实良善美丽雄伟壮志"
    "杰俊秀英豪雄彪虎豹鹰鸣鹏凌霄云峰岳嵩岩崇峻松柏桦桐楠樟槐杉枫梧棠栋梁材楷模"
    "帆舟舸航海涛波澜浪潇湘沁涓溪澄清洁淳润泽渊源深浩瀚淑贤惠慧敏捷聪颖悟达通"
    "子轩梓涵宇晨辰睿哲泽言谦谨恺恒悦怡欣馨蕊蓝紫彤红丹青翠碧绿黛墨白雪冰洁凝霜"
    "胜利军兵武威振东南西北方圆满园林松竹梅菊兰芝萱茗苗禾稼穗丰登秋冬春夏"
    "立伟建平红艳霞娟芬燕玲萍丽敏静洁琳颖倩莹婷雯蕾薇菁菡涵萌媚娥嫱姣妤婧嫚"
    "一二三"
) - frozenset("西方北白绿青紫蓝黛墨冰霜二三圆满园中正")
#: An eponym or a term follows: 高斯分布, 欧拉公式, 黎曼积分, 马尔可夫链.
EPONYM_SUFFIXES = (
    "分布 积分 定理 定律 公式 方程 变换 级数 不等式 序列 猜想 法则 展开 消元 模量 距离 分析 "
    "算法 函数 矩阵 空间 效应 原理 模型 检验 分解 假设 悖论 常数 曲线 极限 定则 结构 正交 "
    "三角 迭代 判别 判据 估计 过程 链 数 和 环 群 图 树 式 法 型 积 核 体 氏 派 学 主义".split()
)
# Suffixes that make a common noun of a surname character (李子, 桌子, 王道).
_NOUN_ENDINGS = frozenset("子儿头道家们氏式")
# Transliteration characters: 高斯, 黎曼, 柯西, 牛顿, 潘多拉 … are foreign eponyms.
_TRANSLIT = frozenset("斯曼尔夫顿西拉特勒邦巴多克姆普洛泊傅贝叶欧拉朗莱卡罗诺")
_FUNCTION = frozenset("的了说在是和与到去来也都就还很给让把被对向跟们则又再要会能想提")
# Person cues: a name often sits right after a role word or a verb that takes a person
# (联系人：, 学员：, 转告, 建议, 由 …) or right before a title or a person's verb (同学,
# 老师, 负责, 回复 …). Where such a cue frames a surname + one or two Han characters,
# the given name need not be in GIVEN_CHARS (子墨, 梦琪, 骁 are not).
LEFT_CUES = (
    "联系人：", "联系人:", "学员：", "学生：", "成员：", "姓名：", "名字：", "点名：", "负责人：",
    "转告", "建议", "感谢", "谢谢", "我是", "我叫", "名叫", "告诉", "通知", "提醒", "表扬", "批评",
    "同学", "老师", "助教", "学员", "由", "和", "与", "跟", "请", "让", "给", "找", "问", "、",
)  # fmt: skip
RIGHT_CUES = (
    "同学", "老师", "教授", "助教", "先生", "女士", "同志", "经理", "主任", "博士", "学长", "学姐",
    "师兄", "师姐", "班长", "组长", "说", "问", "提", "回复", "反映", "提交", "请假", "缺席", "负责",
    "迟交", "在群", "和", "与", "跟", "、", "：", ":",
)  # fmt: skip
# Topic cues: the word is what is studied or discussed (复习唐诗, 关于黎明, 史诗部分), not
# who; a candidate in such a frame with no person cue is a word (a dictionary ``nr`` word
# such as 唐诗, 黎明, 康德 or an unknown one such as 孟春, 伍长).
TOPIC_BEFORE = (
    "复习", "预习", "学习", "学", "讲", "讲解", "解释", "解释一下", "关于", "考", "考试", "用到",
    "用到了", "举", "理解", "掌握", "背诵", "背", "阅读", "读", "研究", "介绍", "涉及", "练习",
    "推导", "证明", "计算", "默写", "欣赏", "参观", "游览",
)  # fmt: skip
TOPIC_AFTER = (
    "部分", "的内容", "内容", "这一节", "这一章", "这节", "这章", "一节", "一章", "那页", "那一页",
    "的例子", "例子", "的例题", "例题", "习题", "的作业", "的题", "的知识", "知识点", "的概念",
    "概念", "公式", "定理", "章节", "课件", "的推导", "的证明", "的原理", "原理",
)  # fmt: skip
_LEFT_SET = frozenset(cue.rstrip(":：") for cue in LEFT_CUES)
_RIGHT_SET = frozenset(RIGHT_CUES)
_TOPIC_BEFORE_SET = frozenset(TOPIC_BEFORE)
_TOPIC_AFTER_SET = frozenset(TOPIC_AFTER)


def _ends_with_any(text: str, end: int, cues: frozenset[str]) -> bool:
    """Whether ``text[:end]`` ends with one of ``cues`` (set lookups, cues ≤ 5 chars)."""
    return any(text[max(0, end - k) : end] in cues for k in range(1, 6) if k <= end)


def _starts_with_any(text: str, start: int, cues: frozenset[str]) -> bool:
    """Whether ``text[start:]`` starts with one of ``cues`` (set lookups, cues ≤ 5 chars)."""
    return any(text[start : start + k] in cues for k in range(1, 6) if start + k <= len(text))


# Characters that end a one-character given name: function words and adverbs (阎昕多参加 …).
_AFTER_GIVEN = frozenset("的了说在是和与到去来也都就还很给让把被对向跟们则又再要会能想提多不没已")
_COMMON_NR = 1000  # an ``nr`` dictionary word this frequent is mostly a word (叶子, 孔明)
_COMMON_PROPER = 50  # a place, organisation or other proper noun (``ns``, ``nt``, ``nz``)
_COMMON = 20  # any other dictionary word


def _is_han(ch: str) -> bool:
    return "\u3400" <= ch <= "\u9fff"


def _common_word(
    word: str, tags: Mapping[str, str], freq: Mapping[str, int], *, at_least: int = _COMMON
) -> bool:
    """A dictionary word seen at least ``at_least`` times (``nr`` words: :data:`_COMMON_NR`)."""
    tag = tags.get(word)
    count = freq.get(word) or 0
    if tag is None or count <= 0:
        return False
    if tag.startswith("nr"):
        return count >= max(_COMMON_NR, at_least)
    if tag in ("ns", "nt", "nz"):
        return count >= max(_COMMON_PROPER, at_least)
    return count >= at_least


def find_names(
    text: str,
    starts: list[int],
    words: list[str],
    surnames: frozenset[str],
    tags: Mapping[str, str],
    freq: Mapping[str, int],
) -> list[tuple[int, int, float]]:
    """Person names in ``text`` as ``(start, end, score)``, sorted, not overlapping.

    A candidate may start where a jieba token starts, anywhere inside a token that
    is not a dictionary word (jieba's HMM glues neighbours onto unknown names:
    请史伟), or at the last character of a two-character dictionary word when two
    given-name characters follow (时常娟: 上课时 + 常娟). A one-character
    conjunction or preposition that is also a surname (和, 向, 于) does not start a
    name when a name starts right after it (和安昊梅).

    Args:
        text: the text jieba segmented.
        starts, words: jieba's tokens and their offsets.
        surnames: single-character surnames.
        tags, freq: jieba's dictionary (part of speech, frequency).
    """
    token_of: dict[int, tuple[int, str]] = {}
    for start, word in zip(starts, words, strict=True):
        for k in range(len(word)):
            token_of[start + k] = (start, word)
    out: list[tuple[int, int, float]] = []
    last_end = 0
    for i in range(len(text)):
        if i < last_end or i not in token_of:
            continue
        t_start, token = token_of[i]
        in_dictionary = (freq.get(token) or 0) > 0
        if i == t_start:
            found = _candidate(text, i, token, surnames, tags, freq, given_needed=1)
            if found is not None and len(token) == 1 and tags.get(token, "")[:1] in ("c", "p"):
                nxt = token_of.get(i + 1)
                if nxt is not None and nxt[0] == i + 1:
                    after = _candidate(text, i + 1, nxt[1], surnames, tags, freq, given_needed=1)
                    # 和 + a name, or 和 + a word (和安全教育): the conjunction, not a name
                    if after is not None or (len(nxt[1]) >= 2 and _common_word(nxt[1], tags, freq)):
                        found = None
        elif not in_dictionary:
            found = _candidate(text, i, "", surnames, tags, freq, given_needed=1)
        elif (
            len(token) == 2 and i == t_start + 1 and tags.get(token, "")[:1] not in ("p", "c", "u")
        ):
            # 上课时 | 常娟 starts inside 时常; never inside a preposition or conjunction
            # (关于 | 岳阳楼 is no 于岳阳)
            found = _candidate(text, i, "", surnames, tags, freq, given_needed=2)
        else:
            found = None
        if (i == t_start or not in_dictionary) and (
            text[i] in surnames or text[i : i + 2] in COMPOUND_SURNAMES
        ):
            cued = _cued(text, i, token if i == t_start else "", surnames, tags, freq)
            if cued is not None and (found is None or cued[0] > found[0]):
                found = cued
        if (
            found is not None
            and _topic(text, i, found[0])
            and not _strong(text[i : found[0]], freq)
        ):
            found = None
        if found is not None:
            out.append((i, *found))
            last_end = found[0]
    return out


def _apart(text: str, k: int) -> bool:
    """Position ``k`` is outside the text, white space or ASCII (not Chinese punctuation)."""
    return k < 0 or k >= len(text) or text[k].isspace() or text[k].isascii()


def _strong(name: str, freq: Mapping[str, int]) -> bool:
    """Surname + two given-name characters, and no dictionary word: a name in any frame."""
    given = name[2:] if name[:2] in COMPOUND_SURNAMES else name[1:]
    return len(given) == 2 and all(ch in GIVEN_CHARS for ch in given) and not freq.get(name)


def _left_cue(text: str, i: int) -> bool:
    before = text[max(0, i - 10) : i].rstrip(" :：")  # cues are short: a bounded look-back
    return _ends_with_any(before, len(before), _LEFT_SET)


def _topic(text: str, start: int, end: int) -> bool:
    """Whether a topic cue frames ``text[start:end]`` and no person cue does."""
    if _left_cue(text, start) or _starts_with_any(text, end, _RIGHT_SET):
        return False
    return _ends_with_any(text, start, _TOPIC_BEFORE_SET) or _starts_with_any(
        text, end, _TOPIC_AFTER_SET
    )


def _surname_at(text: str, i: int, surnames: frozenset[str]) -> str | None:
    """The surname ``text`` starts with at ``i`` (a compound one first), or ``None``."""
    if text[i : i + 2] in COMPOUND_SURNAMES:
        return text[i : i + 2]
    return text[i] if text[i] in surnames else None


def _cued(
    text: str,
    i: int,
    token: str,
    surnames: frozenset[str],
    tags: Mapping[str, str],
    freq: Mapping[str, int],
) -> tuple[int, float] | None:
    """A name framed by person cues (:data:`LEFT_CUES`, :data:`RIGHT_CUES`), any given name.

    A surname at ``i`` and one or two Han characters, with a cue word on one side and,
    on the other, a cue, a punctuation mark, a non-Han character, the text's edge, a
    function word after the name (多, 的 …) or, on the left, a jieba token that is
    exactly the candidate and no dictionary word (昨天 | 侯奕辰 | 在群里). A candidate
    beginning with a common word (关于, 高数) is refused; the eponym suffixes are not
    checked when a right cue follows (张伟和 is a name before 和, not 黎曼和).
    """
    n = len(text)
    surname = _surname_at(text, i, surnames)
    if surname is None:
        return None
    if len(surname) == 1 and _common_word(text[i : i + 2], tags, freq):
        return None
    left_cue = _left_cue(text, i)
    left_edge = i == 0 or not _is_han(text[i - 1])
    g = i + len(surname)
    for size in (2, 1):
        end = g + size
        if end > n or not all(_is_han(ch) for ch in text[g:end]):
            continue
        if any(ch in _AFTER_GIVEN for ch in text[g:end]):
            continue
        right_cue = _starts_with_any(text, end, _RIGHT_SET)
        right_edge = end == n or not _is_han(text[end]) or text[end] in _AFTER_GIVEN
        unit = token == text[i:end] and not (freq.get(token) or 0) > 0
        left = left_cue or left_edge or unit
        # alone between spaces or Latin text (a Chinese name in English text)
        alone = _apart(text, i - 1) and _apart(text, end)
        if not ((left_cue and (right_cue or right_edge)) or (right_cue and left) or alone):
            continue
        if not (left_cue and right_cue) and not any(ch in GIVEN_CHARS for ch in text[g:end]):
            continue  # one cue only: a given-name character must back it (高数老师)
        name = text[i:end]
        if _vetoed(text, end, name, surname, "", tags, freq, eponyms=not right_cue):
            return None
        return end, 0.7
    return None


def _candidate(
    text: str,
    i: int,
    first: str,
    surnames: frozenset[str],
    tags: Mapping[str, str],
    freq: Mapping[str, int],
    *,
    given_needed: int,
) -> tuple[int, float] | None:
    """``(end, score)`` of a name starting at ``i``, or ``None``; ``first``: the token at ``i``."""
    n = len(text)
    surname = _surname_at(text, i, surnames)
    if surname is None:
        return None
    g = i + len(surname)
    size = 0
    while size < 2 and g + size < n and text[g + size] in GIVEN_CHARS:
        size += 1
    if size == 2 and (
        _common_word(text[g : g + 2], tags, freq, at_least=200)
        or (g + 3 <= n and _common_word(text[g + 1 : g + 3], tags, freq, at_least=200))
        or text[g + 1] in _FUNCTION
    ):
        size = 1
    if size < given_needed:
        return None
    jieba_name = len(first) == 3 and tags.get(first, "").startswith("nr") and first[0] in surnames
    if size == 0 and not jieba_name:
        return None
    end = g + size if size else i + len(first)
    if jieba_name and end < i + 3 and not _common_word(first, tags, freq):
        end = i + 3
    name = text[i:end]
    if len(set(name)) < 2 or len(name) < 2:
        return None
    if _vetoed(text, end, name, surname, first, tags, freq):
        return None
    return end, (0.75 if len(surname) == 2 or len(name) >= 3 else 0.65)


def _vetoed(
    text: str,
    end: int,
    name: str,
    surname: str,
    first: str,
    tags: Mapping[str, str],
    freq: Mapping[str, int],
    *,
    eponyms: bool = True,
) -> bool:
    if any(ch in _TRANSLIT for ch in name[len(surname) :]):
        return True
    if len(name) == 2 and name[1] in _NOUN_ENDINGS:
        return True
    # the candidate, or the jieba token it starts, is a common word (高兴, 安静, 韩国)
    if _common_word(name, tags, freq):
        return True
    if first and len(first) > len(surname) and _common_word(first, tags, freq):
        return True
    rest = text[end : end + 3]
    return eponyms and any(rest.startswith(suffix) for suffix in EPONYM_SUFFIXES)
