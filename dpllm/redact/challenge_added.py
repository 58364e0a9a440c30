"""Cases added to the challenge corpus by the second round of issue #20 (``set: "added"``).

Written before the fixes they check, held-out style: other first names, surnames and
given-name characters than :mod:`dpllm.redact.challenge`, other sentence shapes, and
new kinds of decoys (English eponyms and course terms, ticket and invoice codes, ISBNs,
large figures in Chinese summaries). The rules' word lists were not written from these.
Every value is synthetic; real public figures are left out of the decoys.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

__all__ = ["add_cases"]

# Chinese names written as whole names: common, less common and rare given-name characters.
_ZH_GIVEN = (
    "静怡 志强 俊杰 子豪 欣然 晓燕 文静 国华 海燕 建军 秀兰 桂芳 丽娟 德明 永刚 春梅 雨萌 一鸣 思琪 "
    "若曦 景行 承泽 书瑶 沐阳 可馨 嘉怡 佳豪 浩宇 梦琪 雅婷 振宇 立新 红霞 少华 美玲 宏伟 淑芬 "
    "亚楠 晓东 卫东 秋实 语嫣 凯文 锦程 子墨 奕辰 昭阳 慧敏 玉梅 小龙 大海 二虎 莉 倩 军 辉 "
    "颖 超 洁 鹏 娇 宁 蕾 雯 斌 峥 骁 珺 玮 昕"
).split()
_ZH_SURNAMES = (
    "王 李 张 刘 陈 杨 赵 黄 周 吴 徐 孙 胡 朱 高 林 何 郭 马 罗 梁 宋 郑 谢 韩 唐 冯 于 董 萧 程 曹 "
    "袁 邓 许 傅 沈 曾 彭 吕 苏 卢 蒋 蔡 贾 丁 魏 薛 叶 阎 余 潘 杜 戴 夏 钟 汪 田 任 姜 范 方 石 姚 "
    "谭 廖 邹 熊 金 陆 郝 孔 白 崔 康 毛 邱 秦 江 史 顾 侯 邵 孟 龙 万 段 雷 钱 汤 尹 黎 易 常 武 乔 "
    "贺 赖 龚 文 欧阳 司马 诸葛 上官 东方 夏侯"
).split()
_ZH_CONTEXTS = [
    "{n}同学这周缺了两次课。",
    "建议{n}多参加答疑。",
    "{n}和{m}的报告写得最好",
    "这次小组展示由{n}负责",
    "联系人：{n}",
    "{n}老师的板书很清楚",
    "本周表现突出的学员：{n}",
    "请转告{n}，作业已批改。",
    "{n}：实验报告迟交。",
    "昨天{n}在群里问了第二题",
    "Feedback from {n}: more examples please.",
    "{n} and I redid the lab on Friday.",
]
_EN_FIRST = (
    "Ivy Maya Felix Hugo Iris Jasper Nina Theo Sara Omar Priya Diego Hana Kofi Elena Marcus Tessa "
    "Rhys Naomi Caleb Freya Arjun Leila Tobias Ingrid Mateo Anya Declan Yusuf Beatrice Wyatt "
    "Harriet Soren Dalia Rowan Esme"
).split()
_EN_LAST = (
    "Novak Okafor Lindqvist Moreau Tanaka Kowalski Fitzgerald Abernathy Ramirez Haddad Whitaker "
    "Sinclair Petrov Nakamura Castellano Brennan Dubois Mensah Oduya Fairbanks Holloway "
    "Gallagher Pemberton Sato Varga Quinlan Delacroix Ashworth Kaur Mbeki"
).split()
_EN_CONTEXTS_EN = [
    "{n} uploaded the wrong file twice.",
    "Can {n} share the notes from Monday?",
    "Feedback from {n}: more worked examples please.",
    "Shout-out to {n}, who fixed the grader.",
    "Please forward this to {n} and {m}.",
    "Mentor: {n}",
    "{n}'s answer to question 3 was the clearest.",
    "Office hours with {n} were really useful",
    "We asked {n} to check the marking.",
]
_EN_CONTEXTS_ZH = [
    "我想感谢 {n} 老师的耐心。",
    "和{n}讨论之后我懂了",
    "小组成员：{n}、{m}",
    "本周由{n}负责答疑。",
]
# Surname-initial words and eponyms not in the first list (no real people's names).
_ZH_DECOYS = (
    "何尝 何止 高铁 高峰 高手 高原 高压 高分 高斯核 高斯函数 方式 方案 方块 方言 文字 文化 文学 "
    "马路 马达 周到 周边 周长 黄色 黄河 白菜 白云 金钱 金牌 钱币 张力 王国 陈列 杨树 林木 罗马 "
    "郑州 谢意 宋代 唐代 许愿 冯诺依曼体系 彭罗斯阶梯 田地 董事长 叶绿素 程式 苏打 拉普拉斯变换 "
    "伯努利分布 柯西定理 高斯白噪声 欧拉角 黎曼猜想 雅可比矩阵 马尔科夫决策 费马大定理 韦恩图 "
    "罗尔中值定理 贝塞尔函数 施瓦茨不等式 范德蒙行列式 史密斯圆图 卢瑟福散射 安培定律 焦耳定律 "
    "谢尔宾斯基三角 秦九韶算法 石膏 石英 任性 任职 卢布 姜丝 钟声 陆军 范畴 金星 石榴 夏日 白银 "
    "熊掌 江山 段落 雷电 龙虾 史前 陶器 贺喜 顾客 毛衣 万一 钱财 严肃 武力 莫名 向来 汤面 常规 "
    "温暖 康复 施加 文明 牛肉 安装 齐心 易经 庞然大物 颜值 庄稼 章鱼 鲁班锁 申报 欧元 关心 兰州 "
    "焦距 俞伯牙琴谱 林荫 宋词鉴赏 胡萝卜 朱砂 郭守敬望远镜 孙子兵法 徐志摩诗选 曹冲称象法 "
    "杜甫草堂 梁启超故居 袁隆平杂交稻 苏轼词"
).split()
_ZH_DECOY_CONTEXTS = [
    "期末会考{w}吗？",
    "{w}这一节我没听懂",
    "能不能再解释一下{w}",
    "课件里{w}那页的图看不清",
    "作业第二题用到了{w}",
    "希望下次多举{w}的例子",
]
_EN_DECOYS = (
    "Gaussian Distribution|Bayes Theorem|Markov Chain|Fourier Transform|Pearson Correlation|"
    "Laplace Transform|Euler's formula|Newton's method|Taylor Series|Riemann Sum|Poisson Process|"
    "Bernoulli Trial|Hamming Distance|Turing Machine|Venn Diagram|Boolean Algebra|Cauchy Sequence|"
    "Dijkstra's Algorithm|Kalman Filter|Monte Carlo method|Lagrange Multiplier|Grace Period|"
    "Mark Scheme|Student's t-test|Fisher Information|Wilcoxon test|Gauss-Jordan elimination|"
    "Bellman Equation|Nash Equilibrium|Occam's Razor|Jordan Normal Form|Hilbert Space|"
    "Lorentz Force|Doppler Effect|Pascal's Triangle|Kruskal Algorithm|Huffman Coding"
).split("|")
_EN_DECOY_CONTEXTS = [
    "Week 5 covered the {w} in detail.",
    "I still don't get the {w}.",
    "The {w} slides were the best part.",
    "Can we get more exercises on the {w}?",
]
_NUMBER_DECOYS: list[tuple[str, str, Callable[[random.Random], str]]] = [
    ("Ticket {x} is still open.", "en", lambda r: f"INC{r.randint(10**9, 10**10 - 1)}"),
    ("Invoice {x} was paid on time.", "en", lambda r: f"INV-2026-{r.randint(1, 999_999):06d}"),
    ("Batch {x} finished in 12 minutes.", "en", lambda r: str(r.randint(10**9, 10**10 - 1))),
    ("The textbook's ISBN is {x}.", "en", lambda r: f"978{r.randint(10**9, 10**10 - 1)}"),
    ("平台累计注册用户{x}人", "zh", lambda r: str(r.randint(10**9, 10**10 - 1))),
    ("页面浏览量达到{x}次", "zh", lambda r: str(r.randint(10**8, 10**9 - 1))),
    ("快递单号{x}显示已签收", "zh", lambda r: f"SF{r.randint(10**11, 10**12 - 1)}"),
    ("版本号{x}修复了登录问题", "zh", lambda r: f"2026{r.randint(10**6, 10**7 - 1)}"),
]


# Written after the topic and person cues (round three): names inside topic-like frames,
# and words in person-like frames, to show what the cues cost. Not used to tune anything.
_ZH_NAME_TOPIC = [
    "请复习{n}整理的笔记",
    "关于{n}的请假申请，已经批准。",
    "这部分是{n}讲的，讲得很好",
    "{n}的内容讲得比上周清楚",
    "我觉得{n}讲课太快了。",
    "期末考试由{n}出题",
]
_EN_NAME_ROUND3 = [
    "Many thanks, {n}!",
    "cc {n}",
    "Reviewed by {n} on Tuesday.",
    "{n} (TA) will hold the review session.",
]
# Rarer first names, not in the given-name list of dpllm.redact.names_en (NER alone).
_EN_RARE = (
    "Thaddeus Okoro|Ottilie Brandt|Cosima Reyes|Evander Pike|Philippa Crane|Ximena Duarte|"
    "Lorcan Byrne|Saoirse Quill|Ambrose Tull|Wilhelmina Frost"
).split("|")
_ZH_DECOY_PERSONLIKE = [
    "感谢{w}这门课让我学到很多",
    "建议{w}多安排一些练习",
    "{w}老师讲得很透彻",
    "和{w}相关的题都不会",
]
_ZH_DECOYS_ROUND3 = (
    "高等代数 方差 周报 马克思主义原理 黄金分割 金融学 文献综述 程序设计 许可证 安全教育".split()
)


def _lang(template: str) -> str:
    return "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in template) else "en"


def add_cases(w: Any, r: random.Random) -> None:
    """Append the added cases to the writer ``w`` (see :class:`dpllm.redact.challenge._Writer`)."""

    def zh_name() -> str:
        return r.choice(_ZH_SURNAMES) + r.choice(_ZH_GIVEN)

    def en_name() -> str:
        return f"{r.choice(_EN_FIRST)} {r.choice(_EN_LAST)}"

    for _ in range(240):
        t = r.choice(_ZH_CONTEXTS)
        w.add("zh_name", _lang(t), t, {"n": zh_name(), "m": zh_name()}, True)
    for i in range(240):
        if i % 3 == 2:
            t = r.choice(_EN_CONTEXTS_ZH)
            w.add("en_name", "zh", t, {"n": en_name(), "m": en_name()}, True)
        else:
            t = r.choice(_EN_CONTEXTS_EN)
            w.add("en_name", "en", t, {"n": en_name(), "m": en_name()}, True)
    for word in _ZH_DECOYS:
        for t in r.sample(_ZH_DECOY_CONTEXTS, 2):
            w.add("decoy", "zh", t, {"w": word}, False)
    for word in _EN_DECOYS:
        for t in r.sample(_EN_DECOY_CONTEXTS, 2):
            w.add("decoy", "en", t, {"w": word}, False)
    for t in _ZH_NAME_TOPIC * 5:
        w.add("zh_name", "zh", t, {"n": zh_name()}, True)
    for t in _EN_NAME_ROUND3 * 5:
        w.add("en_name", "en", t, {"n": en_name()}, True)
    for k, name in enumerate(_EN_RARE * 4):
        w.add("en_name", "en", _EN_NAME_ROUND3[k % 4], {"n": name}, True)
    for word in _ZH_DECOYS_ROUND3:
        for t in _ZH_DECOY_PERSONLIKE:
            w.add("decoy", "zh", t, {"w": word}, False)
    for i in range(120):
        t, lang, make = _NUMBER_DECOYS[i % len(_NUMBER_DECOYS)]
        w.add("decoy", lang, t, {"x": make(r)}, False)
