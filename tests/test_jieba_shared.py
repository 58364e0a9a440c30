"""Private jieba tokenizers share one loaded dictionary and nothing else."""

from __future__ import annotations

import pytest

from dpllm._jieba import private_tokenizer


def test_the_dictionary_is_loaded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import jieba

    private_tokenizer()  # loaded here, or already by an earlier user in this process
    loads: list[object] = []
    monkeypatch.setattr(jieba.Tokenizer, "initialize", lambda self, *a: loads.append(self))
    tokenizer = private_tokenizer()
    assert loads == [] and tokenizer.initialized
    assert list(tokenizer.cut("我喜欢这门课")) == ["我", "喜欢", "这门", "课"]


def test_words_added_to_one_tokenizer_stay_there() -> None:
    first, second = private_tokenizer(), private_tokenizer()
    text = "这门课的课件资料很好"
    before = list(second.cut(text))
    first.add_word("课件资料", freq=10_000_000)
    assert "课件资料" in list(first.cut(text))
    assert list(second.cut(text)) == before
    assert "课件资料" not in list(private_tokenizer().cut(text))
    assert first.FREQ is not second.FREQ and len(second.FREQ) > 300_000
