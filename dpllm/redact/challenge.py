"""A harder labelled corpus, by category: what issue #20 measured the redactor on.

``python -m dpllm.redact.challenge OUT.jsonl`` writes it from a fixed seed. Every
value is synthetic. Each record has ``category``, ``lang``, ``text`` and gold
``spans`` (must be redacted) or ``decoys`` (must stay), each ``{start, end, kind}``.

Categories (sizes at the default seed):

* ``zh_name`` (600): Chinese names of 2–4 characters, single and compound
  surnames, in feedback, weekly summaries and English sentences, at the start,
  middle and end of a text, glued to punctuation, digits and Latin letters;
* ``en_name`` (300): English first + last names in English text, and in Chinese
  text (``老师 John Smith 讲得很好``);
* ``en_address`` (150): street addresses in English text;
* ``ip_zh`` (120): IPv4 addresses glued to Chinese characters;
* ``structured`` (400): mobile and landline numbers, resident IDs (valid, and
  mistyped ones beside an ID word), bank cards, e-mail addresses, IPs;
* ``decoy`` (1,000+): words that begin with a surname character (何时, 高数,
  方法 …) and eponyms (高斯分布, 黎曼积分 …) in feedback sentences, ten-digit
  statistics, order numbers, mistyped IDs with no ID word, dates and ratings.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from dpllm.redact.challenge_added import add_cases
from dpllm.redact.corpus import _DOMAINS, _ID_WEIGHTS, _PROVINCES, _luhn_complete

__all__ = ["CATEGORIES", "DECOY_WORDS", "generate", "score", "write_jsonl"]

CATEGORIES = ("structured", "zh_name", "en_name", "en_address", "ip_zh", "decoy")
SEED = 20261201

_SINGLE = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程"
    "苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝"
    "龚邵万钱严覃武戴莫孔向汤常温康施文牛樊葛邢安齐易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰焦俞"
)
_COMPOUND = "欧阳 司马 诸葛 上官 皇甫 东方 慕容 令狐 尉迟 长孙 宇文 夏侯 端木 公孙 司徒".split()
_GIVEN = (
    "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍建国红梅志宏鹏辉晓丹宇欣怡子涵浩然"
    "雨轩梓萱思远佳琪嘉文博昊天泽瑞琳诗婷雅晨阳旭峰凯婉清逸飞俊豪铭睿雪薇颖慧"
)
_EN_FIRST = (
    "Emily James Olivia Liam Sophia Noah Ava Lucas Mia Ethan Grace Daniel Chloe Henry Zoe Samuel "
    "Lily Owen Hannah Jack Ella Ryan Nora Leo Ruby Adam Clara Isaac Alice Oscar Mark Laura Peter"
).split()
_EN_LAST = (
    "Carter Bennett Hughes Foster Morgan Turner Parker Collins Reed Sullivan Hayes Brooks Coleman "
    "Ward Fisher Gordon Palmer Russell Griffin Walsh Barnes Porter Hudson Marshall Smith Clark"
).split()
_STREETS = (
    "Baker Elm Maple Oak Cedar Pine Church Mill Station Victoria King Queen High Park".split()
)
_STREET_KIND = "Street Road Avenue Lane Drive Close Way Boulevard".split()
_CITIES = "Springfield Riverton Oakville Fairview Greenwood Lakeside Milton Ashford".split()

_ZH_FEEDBACK = [
    "{n}老师讲得很清楚，作业也批改得很及时。",
    "感谢{n}同学在小组项目里的帮助！",
    "助教{n}回复问题很快",
    "{n}",
    "本周{n}提交了三份作业，进度正常。",
    "学员{n}反映实验环境经常断线。",
    "我是{n}，想请假一周。",
    "请{n}下课后来办公室一趟",
    "上课时{n}提的问题很好：为什么要用对数？",
    "和{n}一起复习效果不错",
    "点名：{n}、{m}缺席。",
    "{n}说作业太多了",
]
_EN_WITH_ZH = [
    "Thanks to {n} for the slides.",
    "{n} said the lab was too hard this week.",
    "The TA {n} answered quickly",
    "Please ask {n} about the quiz, she knows.",
]
_EN_NAME_EN = [
    "Thanks to {n} for the slides.",
    "{n} said the lab was too hard this week.",
    "I emailed {n} yesterday but got no reply",
    "Group B (with {n}) finished early.",
    "Our tutor, {n}, explained the proofs well.",
]
_EN_NAME_ZH = [
    "老师 {n} 讲得很好",
    "感谢{n}的帮助。",
    "助教{n}回复很及时",
    "我和 {n} 一组，合作愉快。",
]
_ADDRESS = [
    "I live at {a} and the parcel never came.",
    "Send the certificate to {a}, please.",
    "The workshop moved to {a} this week.",
    "My address is {a}",
]
_IP_ZH = [
    "服务器地址{ip}登录失败",
    "我的IP是{ip}，一直连不上。",
    "请把{ip}加入白名单",
    "实验机{ip}上的作业丢了",
    "访问{ip}时提示超时。",
]
# Words that begin with a surname character, course words and eponyms: must stay.
DECOY_WORDS = (
    "何时 何必 何况 何处 何种 何等 高数 高等数学 高中 高考 高效 高兴 高度 高级 高斯分布 高斯消元 黎曼积分 黎曼和 柯西序列 柯西不等式 欧拉公式 贝叶斯定理 泊松分布 "
    "马尔可夫链 傅里叶变换 拉格朗日乘数 牛顿迭代 洛必达法则 泰勒展开 方法 方便 方向 方面 方差 方程 文件 文章 文本 文献 马上 周末 周期 周围 黄金 白天 白板 金额 "
    "钱包 张贴 张开 李子 王道 陈述 杨辉三角 林业 罗列 郑重 梁柱 谢谢 宋体 唐诗 许多 许可 韩语 邓巴数 曹冲称象 曾经 肖像 田野 董事 潘多拉 于是 蔡勒公式 余弦 "
    "余数 杜邦分析 叶子 程序 程度 魏尔斯特拉斯 吕氏春秋 丁字 任务 任何 任意 姜汁 钟表 陆续 汪洋 范围 范数 金融 石头 夏天 夏令营 韦达定理 付款 付出 白话 熊猫 "
    "秦朝 江河 尹字 薛定谔方程 段落 雷达 侯爵 龙卷风 史料 陶瓷 贺卡 顾及 毛病 万一 万能 严格 严重 武器 戴帽子 莫非 向量 常数 常见 温度 康托集 施密特正交化 "
    "文艺 牛奶 樊笼 邢台 安全 安排 齐次方程 易错 乔木 庞加莱猜想 颜色 章节 鲁棒性 岳阳楼 翟字 殷切 申请 欧姆定律 耿直 关于 关键 焦点 高数老师 方差分析 "
    "周考 周报 马氏距离 曲线积分 毕业设计 时间复杂度 于是乎 何谓 林地 罗尔定理 梁山 谢幕 宋朝 唐朝 冯氏 邓小平理论 田径 丁香 卢沟桥 石油 夏至 付费 孟德尔定律 "
    "江南 龙门 史记 贺岁 毛泽东思想 万有引力 武汉 戴森球 孔明灯 向日葵 汤圆 常识 温习 施工 文科 牛顿第二定律 冯诺依曼结构 牛顿迭代法 高阶导数 方阵 文档 马虎 周全 "
    "黄昏 白纸 金字塔 钱款 张量 李代数 王牌 陈旧 杨氏模量 林荫道 罗盘 梁板 谢绝 宋词 唐宋 许久 韩国 冯氏文字 邓氏 曹溪 彭城 曾几何时 田字格 董事会 袁大头 "
    "潘通色卡 于今 蒋氏 蔡元培奖 余量 杜绝 叶片 程序设计 魏晋 吕梁 丁点 任课 沈阳 姚江 卢浮宫 姜黄 崔嵬 钟点 谭腿 陆地 汪汪 范例 金属 石墨 廖落 贾人 "
    "夏季 韦伯 付诸 白色 邹鲁 孟春 熊熊 秦岭 邱陵 江苏 尹喜 薛定谔的猫 段位 雷同 侯鸟 龙头 史诗 陶冶 黎明 贺词 顾问 毛笔 郝氏 龚滩 邵阳 万物 钱塘江 严谨 "
    "武术 戴维南定理 莫尔斯电码 孔径 向心力 汤匙 常微分方程 温差 康德 施肥 文理 牛市 樊城 葛根 邢窑 安静 齐全 易懂 乔迁 伍长 庞大 颜料 倪瓒画风 庄重 聂氏 章程 "
    "鲁迅文学奖 岳麓书院 翟墨 殷实 詹森不等式 申论 欧几里得距离 耿耿 关系 兰花 焦虑 俞氏"
).split()
_DECOY_CONTEXT = [
    "{w}的内容有点难，希望多讲几道例题。",
    "老师讲{w}讲得很好",
    "我觉得{w}需要多练习。",
    "这周主要复习{w}",
    "{w}部分的作业太多了！",
    "关于{w}，课件第三页有错别字。",
]
_NUMBER_DECOYS = [
    ("全年访问量{x}次，同比增长12%。", "stat10"),
    ("The platform served {x} requests last year.", "stat10"),
    ("本学期累计提交{x}份作业", "stat10"),
    ("订单号{o}已发货", "order"),
    ("Order {o} was refunded.", "order"),
    ("编号{b}的记录有误", "bad_id"),
]


class _Writer:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.records: list[dict[str, Any]] = []
        self.set = "base"

    def add(
        self, category: str, lang: str, template: str, values: dict[str, str], gold: bool
    ) -> None:
        """Fill ``template``; every ``{key}`` value is a gold span (or a decoy)."""
        text, marks = "", []
        rest = template
        while "{" in rest:
            head, _, tail = rest.partition("{")
            key, _, rest = tail.partition("}")
            text += head
            value = values[key]
            marks.append({"start": len(text), "end": len(text) + len(value), "kind": key})
            text += value
        text += rest
        rec: dict[str, Any] = {
            "id": f"{category}-{len(self.records):05d}",
            "category": category,
            "lang": lang,
            "text": text,
            "spans": marks if gold else [],
            "decoys": [] if gold else marks,
            "set": self.set,
        }
        self.records.append(rec)

    # -- values ---------------------------------------------------------------------
    def zh_name(self) -> str:
        r = self.r
        surname = r.choice(_COMPOUND) if r.random() < 0.2 else r.choice(_SINGLE)
        size = r.choice((1, 2, 2)) if len(surname) == 1 else r.choice((1, 2))
        return surname + "".join(r.choice(_GIVEN) for _ in range(size))

    def en_name(self) -> str:
        return f"{self.r.choice(_EN_FIRST)} {self.r.choice(_EN_LAST)}"

    def mobile(self) -> str:
        r = self.r
        return r.choice(("138", "139", "150", "186", "177")) + "".join(
            r.choice("0123456789") for _ in range(8)
        )

    def resident_id(self, *, valid: bool) -> str:
        r = self.r
        body = (
            r.choice(_PROVINCES)
            + f"{r.randint(1, 99):02d}{r.randint(1, 99):02d}"
            + f"{r.randint(1960, 2006)}{r.randint(1, 12):02d}{r.randint(1, 28):02d}"
            + f"{r.randint(0, 999):03d}"
        )
        total = sum(int(d) * w for d, w in zip(body, _ID_WEIGHTS, strict=True))
        check = "10X98765432"[total % 11]
        if not valid:
            check = r.choice([c for c in "0123456789X" if c != check])
        return body + check

    def ip(self) -> str:
        r = self.r
        return ".".join(str(r.randint(1, 254)) for _ in range(4))


def generate(seed: int = SEED, *, added: bool = True) -> list[dict[str, Any]]:
    """The challenge corpus as records (see the module docstring).

    ``added``: also the cases of :mod:`dpllm.redact.challenge_added` (``set: "added"``),
    written in the second round of issue #20 before the fixes they check.
    """
    w = _Writer(seed)
    r = w.r
    for i in range(600):
        if i % 5 == 4:
            w.add("zh_name", "en", r.choice(_EN_WITH_ZH), {"n": w.zh_name()}, True)
        else:
            template = r.choice(_ZH_FEEDBACK)
            w.add("zh_name", "zh", template, {"n": w.zh_name(), "m": w.zh_name()}, True)
    for i in range(300):
        if i % 3 == 2:
            w.add("en_name", "zh", r.choice(_EN_NAME_ZH), {"n": w.en_name()}, True)
        else:
            w.add("en_name", "en", r.choice(_EN_NAME_EN), {"n": w.en_name()}, True)
    for _ in range(150):
        address = (
            f"{r.randint(1, 399)} {r.choice(_STREETS)} {r.choice(_STREET_KIND)}, "
            f"{r.choice(_CITIES)}"
        )
        w.add("en_address", "en", r.choice(_ADDRESS), {"a": address}, True)
    for _ in range(120):
        w.add("ip_zh", "zh", r.choice(_IP_ZH), {"ip": w.ip()}, True)
    structured: list[tuple[str, Callable[[], str]]] = [
        ("手机号{x}，有事联系", lambda: w.mobile()),
        ("Call me on {x} after six.", lambda: w.mobile()),
        ("办公室电话 {x}", lambda: f"010-{r.randint(20000000, 89999999)}"),
        ("身份证号{x}已登记", lambda: w.resident_id(valid=True)),
        ("身份证号：{x}（可能输错了）", lambda: w.resident_id(valid=False)),
        ("ID card number {x}", lambda: w.resident_id(valid=False)),
        ("退款请打到银行卡{x}", lambda: _luhn_complete("62" + "".join(r.choice("0123456789") for _ in range(15)))),
        ("邮箱{x}", lambda: f"user{r.randint(1, 999)}@{r.choice(_DOMAINS)}"),
        ("Server {x} is down.", lambda: w.ip()),
    ]  # fmt: skip
    for i in range(400):
        template, make = structured[i % len(structured)]
        w.add("structured", "zh" if any("\u4e00" <= c <= "\u9fff" for c in template) else "en",
              template, {"x": make()}, True)  # fmt: skip
    for word in DECOY_WORDS:
        for template in r.sample(_DECOY_CONTEXT, 2):  # two contexts each
            w.add("decoy", "zh", template, {"w": word}, False)
    for i in range(150):
        template, kind = _NUMBER_DECOYS[i % len(_NUMBER_DECOYS)]
        value = {
            "stat10": str(r.randint(1_000_000_000, 9_999_999_999)),
            "order": f"DD{r.randint(10**11, 10**12 - 1)}",
            "bad_id": w.resident_id(valid=False),
        }[kind]
        key = "o" if kind == "order" else "b" if kind == "bad_id" else "x"
        w.add("decoy", "zh" if "{x}次" in template or "份" in template or "号" in template
              or "编号" in template else "en", template, {key: value}, False)  # fmt: skip
    if added:
        w.set = "added"
        add_cases(w, random.Random(seed + 1))
    return w.records


class _Analyzer(Protocol):
    def analyze(self, text: str, *, language: str = ...) -> tuple[tuple[Any, ...], str]: ...


def score(analyzer: _Analyzer, records: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Per category, ``(good, total)``.

    A gold span is good when the predicted spans cover every character of it (a
    partial cover leaks the rest); a decoy is good when no predicted span touches it.
    The language is detected (``auto``), as the wrapper and the proxy do.
    """
    out: dict[str, list[int]] = {c: [0, 0] for c in CATEGORIES}
    for rec in records:
        spans, _ = analyzer.analyze(rec["text"])
        covered = [False] * len(rec["text"])
        for sp in spans:
            for i in range(sp.start, sp.end):
                covered[i] = True
        tally = out[rec["category"]]
        for gold in rec["spans"]:
            tally[1] += 1
            tally[0] += all(covered[gold["start"] : gold["end"]])
        for decoy in rec["decoys"]:
            tally[1] += 1
            tally[0] += not any(covered[decoy["start"] : decoy["end"]])
    return {c: (good, total) for c, (good, total) in out.items()}


def write_jsonl(path: Path, seed: int = SEED) -> int:
    """Write the corpus; return the number of records."""
    records = generate(seed)
    with path.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    return len(records)


if __name__ == "__main__":  # pragma: no cover
    print(write_jsonl(Path(sys.argv[1])))
