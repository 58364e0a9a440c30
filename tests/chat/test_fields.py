"""The field walk of :mod:`dpllm.chat.fields` with a marking function (no redactor)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dpllm.chat.fields import StreamGate, protect_message, safe_arguments, safe_completion
from dpllm.errors import ModelBadResponse


def mark(text: str) -> str:
    return f"<{text}>"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": "x", "n": 1, "l": ["y", 2, null]}', '{"a": "<x>", "n": 1, "l": ["<y>", 2, null]}'),
        ('{"姓名": "张伟"}', '{"姓名": "<张伟>"}'),
        ("not json 138", "[not json 138]"),
        ("", ""),
        ('"just a string"', '"<just a string>"'),
    ],
)
def test_arguments_are_json_aware(raw: str, expected: str) -> None:
    assert safe_arguments(raw, value=mark, text=lambda t: f"[{t}]") == expected


def test_completion_walk_keeps_structure_and_marks_the_rest() -> None:
    response = {
        "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "usage": {"prompt_tokens": 1}, "odd": "text", "odd_list": [{"type": "t", "v": "x"}],
        "choices": [{
            "index": 0, "finish_reason": "stop", "logprobs": {"content": [{"token": "x"}]},
            "stop_reason": "s",
            "message": {"role": "assistant", "content": "hi", "refusal": "no",
                        "tool_calls": [{"id": "i", "type": "function",
                                        "function": {"name": "f", "arguments": '{"k": "v"}'}}]},
        }],
    }  # fmt: skip
    out = safe_completion(response, text=lambda t: f"T{t}", value=mark)
    assert out["id"] == "c" and out["model"] == "m" and out["usage"] == {"prompt_tokens": 1}
    assert out["odd"] == "<text>" and out["odd_list"] == [{"type": "t", "v": "<x>"}]
    choice = out["choices"][0]
    assert choice["logprobs"] is None and choice["stop_reason"] == "<s>"
    message = choice["message"]
    assert message["content"] == "Thi" and message["refusal"] == "Tno"
    assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"k": "<v>"}'}
    assert (
        safe_completion(response, text=mark, value=mark, first="F")["choices"][0]["message"][
            "content"
        ]
        == "F"
    )


def test_prompt_side_keeps_name_and_ids() -> None:
    msg = {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "x",
           "parts": [{"type": "text", "text": "y"}]}  # fmt: skip
    assert protect_message(msg, mark) == {
        "role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "<x>",
        "parts": [{"type": "text", "text": "<y>"}],
    }  # fmt: skip


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "s", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip


def test_stream_holds_arguments_until_the_choice_finishes() -> None:
    gate = StreamGate(text=lambda t: t.upper(), value=mark, min_release=1, max_hold=10)
    outs = []
    for delta in (
        {"role": "assistant", "content": ""},
        {"tool_calls": [{"index": 0, "id": "i", "function": {"name": "f", "arguments": '{"a'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '": "b"}'}}]},
    ):
        outs.append(gate.emit(gate.take(_chunk(delta))))
    assert outs[2] is None  # an argument fragment alone says nothing yet
    assert outs[1] is not None
    assert outs[1]["choices"][0]["delta"]["tool_calls"] == [
        {"index": 0, "id": "i", "function": {"name": "f", "arguments": ""}}
    ]
    last = gate.emit(gate.take(_chunk({}, "tool_calls")))
    assert last is not None
    calls = last["choices"][0]["delta"]["tool_calls"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"a": "<b>"}
    gate.check_finished()


def test_stream_that_never_finishes_fails_closed() -> None:
    gate = StreamGate(text=str.upper, value=mark, min_release=1, max_hold=10)
    gate.emit(gate.take(_chunk({"reasoning_content": "secret"})))
    with pytest.raises(ModelBadResponse):
        gate.check_finished()


def test_stream_chunk_without_choices_list_fails() -> None:
    gate = StreamGate(text=str.upper, value=mark, min_release=1, max_hold=10)
    with pytest.raises(ModelBadResponse):
        gate.take({"choices": "x"})
