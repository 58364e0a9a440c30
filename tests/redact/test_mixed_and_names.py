"""Issue #20: mixed scripts, Chinese names and the words that must stay, numbers by context,
odd and large input — with the real redactor, and the labelled challenge corpus."""

from __future__ import annotations

import pytest

from dpllm.errors import InvalidText, RedactionError
from dpllm.redact import Redactor
from dpllm.redact.challenge import CATEGORIES, DECOY_WORDS, generate, score
from dpllm.redact.engine import CHUNK_CHARS


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("老师 John Smith 讲得很好", "John Smith"),
        ("感谢Emily Clark的帮助。", "Emily Clark"),
        ("Thanks to 张伟 for the slides.", "张伟"),
        ("司徒兰 said the lab was too hard this week.", "司徒兰"),
        ("服务器地址192.168.1.10登录失败", "192.168.1.10"),
        ("我的IP是10.0.0.5，一直连不上。", "10.0.0.5"),
        ("身份证号：110101199003071234（可能输错了）", "110101199003071234"),
        ("ID card number 110101199003071234", "110101199003071234"),
        ("I live at 71 Oak Road, Greenwood and the parcel never came.", "71 Oak Road, Greenwood"),
        ("Send it to 221B Baker Street, London please.", "221B Baker Street"),
        ("请史伟下课后来办公室一趟", "史伟"),
        ("上课时章慧超提的问题很好", "章慧超"),
        ("和欧阳玉一起复习效果不错", "欧阳玉"),
        ("我是公孙晨磊，想请假一周。", "公孙晨磊"),
        ("点名：尉迟瑞薇、夏侯欣磊缺席。", "夏侯欣磊"),
        ("call 3074185296 tonight", "3074185296"),
    ],
)
def test_found(redactor: Redactor, text: str, secret: str) -> None:
    out = redactor.redact(text).text
    for part in secret.split():
        assert part not in out, out


@pytest.mark.parametrize(
    "text",
    [
        "这周主要复习高数",
        "老师讲高斯分布讲得很好",
        "关于黎曼积分，课件第三页有错别字。",
        "何时交作业？",
        "马尔可夫链的部分太难了",
        "我觉得方差分析需要多练习。",
        "叶子和李子都是例子",
        "The platform served 1234567890 requests last year.",
        "全年访问量5948948344次，同比增长12%。",
        "编号110101199003071234的记录有误",  # bad checksum, no ID word
    ],
)
def test_kept(redactor: Redactor, text: str) -> None:
    assert redactor.analyze(text)[0] == (), redactor.redact(text).text


def test_lone_surrogate_is_a_clear_error(redactor: Redactor) -> None:
    with pytest.raises(InvalidText, match="lone surrogate") as info:
        redactor.redact("hello \ud800 world")
    assert isinstance(info.value, RedactionError) and isinstance(info.value, ValueError)


def test_text_beyond_one_chunk_is_analysed_in_units(redactor: Redactor) -> None:
    filler = "The course went well and the exercises were clear. " * 40
    planted = ["Call 13812345678 now.", "Mail zhang.wei@example.com today.", "联系张伟。"]
    parts = []
    while sum(len(p) for p in parts) < 3 * CHUNK_CHARS:
        parts.append(filler)
        parts.append(planted[len(parts) // 2 % 3] + " ")
    text = "".join(parts)
    assert len(text) > 3 * CHUNK_CHARS
    result = redactor.redact(text)
    assert "13812345678" not in result.text and "zhang.wei@" not in result.text
    assert "张伟" not in result.text
    assert result.counts["PHONE_NUMBER"] == text.count("13812345678")


def test_challenge_corpus_is_big_enough_and_labelled() -> None:
    records = generate()
    by = {c: [r for r in records if r["category"] == c] for c in CATEGORIES}
    assert sum(len(r["spans"]) for r in by["zh_name"]) >= 500
    word_decoys = [d for r in by["decoy"] for d in r["decoys"] if d["kind"] == "w"]
    assert len(word_decoys) >= 500 and len(set(DECOY_WORDS)) == len(DECOY_WORDS)
    for r in records:
        for mark in r["spans"] + r["decoys"]:
            assert 0 <= mark["start"] < mark["end"] <= len(r["text"])


#: Floors a little under the figures measured when this was written (notes/issue-20*.md), so
#: a regression fails; not the issue's goals where those were not reached (en_name).
FLOORS = {
    "structured": 0.995,
    "zh_name": 0.95,
    "en_name": 0.96,
    "en_address": 0.95,
    "ip_zh": 1.0,
    "decoy": 0.99,
}


def test_challenge_corpus_figures(redactor: Redactor) -> None:
    figures = score(redactor, generate())
    shares = {c: good / total for c, (good, total) in figures.items()}
    low = {c: round(shares[c], 4) for c, floor in FLOORS.items() if shares[c] < floor}
    assert not low, shares


@pytest.mark.parametrize(
    "text",
    [
        "Mentor: Ivy Tanaka",
        "Thanks to Lucas Gordon for the slides.",
        "小组成员：Priya Okafor、Tobias Lindqvist",
    ],
)
def test_given_name_and_a_capitalised_surname_is_a_person(redactor: Redactor, text: str) -> None:
    out = redactor.redact(text).text
    for name in ("Ivy Tanaka", "Gordon", "Okafor", "Lindqvist"):
        assert name not in out


@pytest.mark.parametrize(
    "text",
    [
        "The Markov Chain slides were the best part.",
        "I still don't get Euler's formula or the Hilbert Space.",
        "We redid the Wilcoxon test; the Grace Period ends Friday.",
        "Invoice INV-2026-004512 was paid on time.",
    ],
)
def test_eponyms_terms_and_codes_stay(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text).text == text


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("联系人：邹子墨", "邹子墨"),
        ("昨天侯奕辰在群里问了第二题", "侯奕辰"),
        ("建议常二虎多参加答疑。", "常二虎"),
        ("江卫东和李雨萌的报告写得最好", "江卫东"),
        ("Feedback from 胡亚楠: more examples please.", "胡亚楠"),
    ],
)
def test_a_name_framed_by_person_cues_is_found(redactor: Redactor, text: str, name: str) -> None:
    assert name not in redactor.redact(text).text


@pytest.mark.parametrize(
    "text",
    [
        "这周主要复习唐诗",
        "黎明部分的作业太多了！",
        "关于孟春，课件第三页有错别字。",
        "和安全教育相关的题都不会",
        "关于岳阳楼，课件第三页有错别字。",
    ],
)
def test_words_in_a_topic_frame_stay(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text).text == text
