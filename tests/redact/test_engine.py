"""Redactor behaviour: languages, operators, allow-list, vault, offline guarantee, corpus."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from dpllm.errors import RedactionError
from dpllm.redact import MaskOperator, Redactor, Span, Vault, detect_language
from dpllm.redact.engine import _BUILTIN_ALLOW, ENTITY_PRIORITY, _drop_allowed, _resolve
from dpllm.redact.evaluate import STRUCTURED, evaluate, load_corpus

CORPUS = Path(__file__).parents[1] / "data" / "redact_corpus.jsonl"
ZH = "我叫张伟，手机号13812345678，邮箱zhangwei@example.com，谢谢。"
EN = "Hi, I'm Emily Carter. Call me at 138-1234-5678 or email emily.carter@example.com."


@pytest.mark.parametrize(
    ("text", "lang"),
    [(ZH, "zh"), (EN, "en"), ("", "en"), ("Week 2026-W47: 张伟 said hi to everyone here", "en")],
)
def test_detect_language(text: str, lang: str) -> None:
    assert detect_language(text) == lang


def test_placeholders_per_language(redactor: Redactor) -> None:
    zh = redactor.redact(ZH)
    assert zh.language == "zh"
    assert zh.text == "我叫[姓名]，手机号[手机号]，邮箱[邮箱]，谢谢。"
    assert dict(zh.counts) == {"EMAIL_ADDRESS": 1, "PERSON": 1, "PHONE_NUMBER": 1}
    en = redactor.redact(EN)
    assert en.text == "Hi, I'm <PERSON>. Call me at <PHONE_NUMBER> or email <EMAIL_ADDRESS>."
    for span in en.spans:  # offsets point into the original
        assert EN[span.start : span.end] in {
            "Emily Carter",
            "138-1234-5678",
            "emily.carter@example.com",
        }


def test_result_is_frozen_and_logs_no_values(redactor: Redactor) -> None:
    result = redactor.redact(ZH)
    with pytest.raises(AttributeError):
        result.text = "x"  # type: ignore[misc]
    assert "13812345678" not in repr(result.spans) + repr(dict(result.counts))


def test_mask_and_hash(redactor: Redactor) -> None:
    masked = redactor.redact("手机13812345678", operator="mask").text
    assert masked == "手机***********"
    kept = redactor.redact("手机13812345678", operator=MaskOperator(keep=4)).text
    assert kept == "手机*******5678"
    a = redactor.redact("手机13812345678", operator="hash", scope="s1").text
    b = redactor.redact("电话13812345678", operator="hash", scope="s1").text
    c = redactor.redact("手机13812345678", operator="hash", scope="s2").text
    assert a[2:] == b[2:] and a.startswith("手机[手机号_") and a != c


def test_hash_needs_a_key() -> None:
    bare = Redactor.__new__(Redactor)  # avoid reloading models: only the registry matters
    from dpllm.redact.engine import _builtin_operators
    from dpllm.redact.operators import OperatorRegistry

    bare.operators = OperatorRegistry(_builtin_operators(None))
    with pytest.raises(RedactionError, match="hmac_key"):
        bare.operators.get("hash")


@pytest.mark.parametrize("bad", [{"language": "fr"}, {"operator": "nope"}, {"allow": "3074185296"}])
def test_bad_arguments(redactor: Redactor, bad: dict[str, object]) -> None:
    with pytest.raises(RedactionError):
        redactor.redact(ZH, **bad)  # type: ignore[arg-type]


def test_allow_list(redactor: Redactor) -> None:
    text = "Week 2026-W47 had 3074185296 views; call 415-555-0134."
    # a bare ten-digit statistic with no phone word near it is not a phone number (#20)
    assert redactor.redact(text).counts.get("PHONE_NUMBER") == 1
    assert redactor.redact("call 3074185296").counts.get("PHONE_NUMBER") == 1
    allowed = redactor.redact(text, allow=["3074185296"])
    assert allowed.text == "Week 2026-W47 had 3074185296 views; call <PHONE_NUMBER>."
    zh = redactor.redact("本周访问量13074185296次", allow=["13074185296"])
    assert zh.spans == ()


def test_allowed_substring_does_not_shield_a_longer_number(redactor: Redactor) -> None:
    assert redactor.redact("手机13812345678", allow=["1381"]).counts == {"PHONE_NUMBER": 1}


def test_vault_round_trip(redactor: Redactor) -> None:
    vault = Vault()
    text = "张伟的手机是138 1234 5678，邮箱zhangwei@example.com。张伟下周到。"
    pseudo = redactor.pseudonymise(text, vault=vault)
    assert "13812345678" not in pseudo.text.replace(" ", "") and "张伟" not in pseudo.text
    tokens = vault.tokens()
    assert len(tokens) == 3  # 张伟 twice → one token
    restored = {vault.restore(token) for token in tokens}
    assert restored == {"张伟", "138 1234 5678", "zhangwei@example.com"}
    answer = "好的，" + "、".join(tokens) + "。"
    assert vault.restore(answer) == "好的，" + "、".join(vault.restore(t) for t in tokens) + "。"
    assert vault.restore(pseudo.text) == text
    assert "张伟" not in repr(vault)


def test_vaults_do_not_share_tokens(redactor: Redactor) -> None:
    one, two = Vault(), Vault()
    a = redactor.pseudonymise(EN, vault=one).text
    b = redactor.pseudonymise(EN, vault=two).text
    assert a != b and two.restore(a) == a


def test_concurrent_redaction(redactor: Redactor) -> None:
    expected = redactor.redact(ZH).text
    results: list[str] = []

    def work() -> None:
        results.extend(redactor.redact(ZH).text for _ in range(5))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 20


def test_offline_guarantee(no_network: None) -> None:
    fresh = Redactor()  # construction (spaCy, jieba, tldextract) with sockets refused
    assert fresh.redact(ZH).counts["EMAIL_ADDRESS"] == 1
    assert fresh.redact(EN).counts["EMAIL_ADDRESS"] == 1


def test_long_chinese_text(redactor: Redactor) -> None:
    text = (ZH + "课程内容很丰富，老师讲得很清楚。") * 400  # ~20,000 characters
    result = redactor.redact(text)
    assert result.counts["PHONE_NUMBER"] == 400


def test_targets_on_shipped_corpus(redactor: Redactor) -> None:
    records = load_corpus(CORPUS)
    assert sum(r["lang"] == "zh" for r in records) >= 300
    assert sum(r["lang"] == "en" for r in records) >= 300
    assert sum(len(r["spans"]) for r in records) >= 800
    report = evaluate(redactor, records)
    for entity in STRUCTURED:
        score = report.scores[entity]
        assert score.recall >= 0.99 and score.precision >= 0.97, (entity, score)
    assert report.scores["PERSON"].recall >= 0.85
    assert report.decoy_hits == {}


def test_corpus_is_reproducible() -> None:
    from dpllm.redact.corpus import generate

    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    import json

    assert [json.loads(line) for line in lines] == generate()


def _naive_resolve(spans: list[Span]) -> tuple[Span, ...]:
    """Character by character: each goes to the best span that covers it (then runs)."""
    rank = {e: i for i, e in enumerate(ENTITY_PRIORITY)}
    ordered = sorted(
        spans, key=lambda s: (-s.score, rank.get(s.entity, len(rank)), s.start - s.end, s.start)
    )
    owner: dict[int, int] = {}
    for k, span in enumerate(ordered):
        for position in range(span.start, span.end):
            owner.setdefault(position, k)
    runs: list[list[int]] = []
    for position in sorted(owner):
        k = owner[position]
        if runs and runs[-1][2] == k and runs[-1][1] == position:
            runs[-1][1] = position + 1
        else:
            runs.append([position, position + 1, k])
    return tuple(Span(ordered[k].entity, a, b, ordered[k].score) for a, b, k in runs)


def test_a_partial_overlap_keeps_the_rest_of_the_losing_span_redacted() -> None:
    """A better LOCATION over the start of a URL: the rest of the URL is still redacted."""
    resolved = _resolve([Span("URL", 5, 20, 0.5), Span("LOCATION", 0, 9, 0.85)])
    assert resolved == (Span("LOCATION", 0, 9, 0.85), Span("URL", 9, 20, 0.5))


@pytest.mark.parametrize("seed", range(20))
def test_overlap_resolution_and_allow_windows_match_the_quadratic_reference(seed: int) -> None:
    rng = random.Random(seed)
    entities = [*ENTITY_PRIORITY, "OTHER"]
    spans = []
    for _ in range(rng.randint(0, 60)):
        start = rng.randint(0, 200)
        spans.append(
            Span(
                rng.choice(entities),
                start,
                start + rng.randint(1, 25),
                rng.choice([0.5, 0.85, 1.0]),
            )
        )
    assert _resolve(list(spans)) == _naive_resolve(spans)
    text = "".join(rng.choice("0123456789 -年月日W:") for _ in range(240))
    allow = ["".join(rng.choice("0123456789") for _ in range(rng.randint(1, 4))) for _ in range(3)]
    windows = [(m.start(), m.end()) for m in _BUILTIN_ALLOW.finditer(text)]
    for needle in allow:
        windows += [(i, i + len(needle)) for i in range(len(text)) if text.startswith(needle, i)]
    expected = [
        s
        for s in spans
        if text[s.start : s.end].strip() not in set(allow)
        and not any(a <= s.start and s.end <= b for a, b in windows)
    ]
    assert _drop_allowed(text, list(spans), allow) == expected


def test_redact_units_equals_each_unit_redacted_alone(redactor: Redactor) -> None:
    """One NER pass for all units (redact_units) gives each unit its own call's result."""
    import json

    from dpllm.redact.units import split_units

    records = [json.loads(x) for x in CORPUS.read_text(encoding="utf-8").splitlines()]
    for lang in ("en", "zh"):
        text = " ".join(r["text"] for r in records if r["lang"] == lang)[:6000]
        text += (
            " 老师 Emily Clark 讲得很好。" if lang == "zh" else " Thanks to 张伟 and Ivy Tanaka."
        )
        units = split_units(text, min_unit=160, max_unit=480)
        assert len(units) > 5
        together = [r.text for r in redactor.redact_units(units)]
        alone = [redactor.redact(u).text for u in units]
        assert together == alone
    assert redactor._analyzer.nlp_engine._batch  # the batched path was the one tested
