"""Private jieba tokenizers share one loaded dictionary and nothing else."""

from __future__ import annotations

from dpllm._jieba import private_tokenizer


def test_words_added_to_one_tokenizer_stay_there() -> None:
    first, second = private_tokenizer(), private_tokenizer()
    text = "这门课的课件资料很好"
    before = list(second.cut(text))
    first.add_word("课件资料", freq=10_000_000)
    assert "课件资料" in list(first.cut(text))
    assert list(second.cut(text)) == before
    assert "课件资料" not in list(private_tokenizer().cut(text))
    assert first.FREQ is not second.FREQ and len(second.FREQ) > 300_000
