"""jieba's bundled dictionary, loaded once per process, under private tokenizers.

Topic counting adds the vocabulary's keywords to its tokenizer and the redactor
reads part-of-speech tags with its own, so neither may use jieba's global
tokenizer nor share one with the other. Each used to load the ~500,000-word
dictionary itself (about a second each, twice in every weekly run). Here the
dictionary is loaded once, and :func:`private_tokenizer` hands out tokenizers
that start from a copy of it (~15 ms): what one adds, no other sees.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

__all__ = ["private_tokenizer"]

_lock = threading.Lock()
_base: Any = None


def private_tokenizer() -> Any:
    """A ``jieba.Tokenizer`` of the caller's own over jieba's bundled dictionary.

    Raises:
        Whatever jieba raises when its dictionary cannot be read (callers wrap it).
    """
    import jieba

    global _base
    with _lock:
        if _base is None:
            base = jieba.Tokenizer()
            log = logging.getLogger("jieba")
            level = log.level
            log.setLevel(logging.WARNING)  # jieba announces its dictionary load at DEBUG
            try:
                base.initialize()
            finally:
                log.setLevel(level)
            _base = base
        tokenizer = jieba.Tokenizer()
        # What Tokenizer.initialize() sets, from the loaded copy (the same dictionary file).
        tokenizer.FREQ = dict(_base.FREQ)
        tokenizer.total = _base.total
        tokenizer.initialized = True
    return tokenizer
