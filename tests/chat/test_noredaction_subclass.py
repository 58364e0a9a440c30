"""Only ``NoRedaction`` itself skips the redaction step: a subclass that redacts is run."""

from __future__ import annotations

from collections.abc import Collection

from dpllm.chat.protection import NoRedaction, Protection, _Plain


class _Masking(NoRedaction):
    def redact(self, text: str, *, language: str = "auto", allow: Collection[str] = ()) -> _Plain:
        return _Plain(text.replace("13812345678", "<PHONE>"))


def test_a_redacting_subclass_of_noredaction_is_applied() -> None:
    protection = Protection(redactor=_Masking(), policy="redact")
    state = protection.begin([{"role": "user", "content": "hi"}])
    assert state.finish("call 13812345678 today") == "call <PHONE> today"
    plain = Protection(redactor=NoRedaction(), policy="redact").begin(
        [{"role": "user", "content": "hi"}]
    )
    assert plain.finish("call 13812345678 today") == "call 13812345678 today"
