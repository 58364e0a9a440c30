"""Every field a model writes is redacted: through ``dpllm serve`` and through ``dpllm.wrap``.

The official ``openai`` SDK talks to a live proxy on loopback (or a wrapped SDK
client talks to the fake upstream directly); the fake upstream answers with
personal data in tool-call arguments, ``function_call``, ``refusal``,
``reasoning_content``, ``logprobs`` and unknown fields, streamed and not. Nothing
of it may reach the caller in clear, and tool arguments must stay valid JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from dpllm.chat.wrapper import wrap
from dpllm.redact import Redactor
from tests.server.conftest import KEYS, Proxy

PHONE = "13812345678"
MAIL = "emily.clark@example.org"
SECRETS = (PHONE, MAIL, "12345678", "clark@")
PROMPT = [{"role": "user", "content": "Send my summary."}]

TOOL_ARGS = {"to": MAIL, "phone": PHONE, "copies": 3, "tags": ["weekly", f"ring {PHONE}"]}
MESSAGE: dict[str, Any] = {
    "content": None,
    "refusal": f"I will not dial {PHONE}.",
    "reasoning_content": f"The user wrote from {MAIL}; their number is {PHONE}.",
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "send_mail", "arguments": json.dumps(TOOL_ARGS)},
        }
    ],
    "function_call": {"name": "send_mail", "arguments": json.dumps({"to": MAIL})},
    "provider_note": f"cached for {PHONE}",
    "provider_meta": {"trace": {"who": MAIL}, "id": "keep-me"},
}
LOGPROBS = {
    "content": [
        {"token": PHONE, "logprob": -0.1, "bytes": list(PHONE.encode()), "top_logprobs": []}
    ]
}


Route = Callable[[], openai.OpenAI]


@pytest.fixture(params=["proxy", "wrap"])
def route(
    request: pytest.FixtureRequest, proxy: Proxy, redactor: Redactor
) -> Iterator[Callable[[], Any]]:
    """An SDK client through the proxy, or a wrapped SDK client on the fake upstream."""
    clients: list[Any] = []

    def make() -> Any:
        if request.param == "proxy":
            client: Any = openai.OpenAI(
                base_url=proxy.base_url, api_key=KEYS["alice"], max_retries=0
            )
        else:
            raw = openai.OpenAI(base_url=proxy.upstream.base_url, api_key="x", max_retries=0)
            client = wrap(raw, redactor=redactor)
        clients.append(client)
        return client

    yield make
    for c in clients:
        c.close()


def _clear(dumped: str) -> None:
    for secret in SECRETS:
        assert secret not in dumped, f"{secret!r} reached the caller"


def test_every_field_of_a_completion_is_redacted(route: Callable[[], Any], proxy: Proxy) -> None:
    proxy.upstream.enqueue(
        "", message=MESSAGE, choice={"logprobs": LOGPROBS}, finish_reason="tool_calls"
    )
    reply = route().chat.completions.create(model="fake-model", messages=PROMPT, logprobs=True)
    dumped = reply.model_dump_json()
    _clear(dumped)
    message = reply.choices[0].message
    call = message.tool_calls[0]
    assert call.id == "call_1" and call.function.name == "send_mail"
    args = json.loads(call.function.arguments)  # still valid JSON
    assert args["copies"] == 3 and args["tags"][0] == "weekly"
    assert args["phone"] == "<PHONE_NUMBER>" and args["tags"][1] == "ring <PHONE_NUMBER>"
    assert json.loads(message.function_call.arguments)["to"] == "<EMAIL_ADDRESS>"
    assert message.refusal == "I will not dial <PHONE_NUMBER>."
    extra = message.model_extra or {}
    assert "<EMAIL_ADDRESS>" in extra["reasoning_content"]
    assert extra["provider_note"] == "cached for <PHONE_NUMBER>"
    assert extra["provider_meta"] == {"trace": {"who": "<EMAIL_ADDRESS>"}, "id": "keep-me"}
    assert reply.choices[0].logprobs is None


def _fragments(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_every_field_of_a_stream_is_redacted(route: Callable[[], Any], proxy: Proxy) -> None:
    args = json.dumps(TOOL_ARGS)
    events: list[dict[str, Any]] = []
    for piece in _fragments(MESSAGE["reasoning_content"], 5):
        events.append({"delta": {"reasoning_content": piece}})
    for piece in _fragments(f"Dial {PHONE} now.", 3):
        events.append({"delta": {"content": piece}, "logprobs": {"content": [{"token": piece, "logprob": 0.0, "top_logprobs": []}]}})  # fmt: skip
    events.append({"delta": {"refusal": f"No, not {PHONE[:5]}"}})
    events.append({"delta": {"refusal": f"{PHONE[5:]}."}})
    first = {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "send_mail", "arguments": ""}}  # fmt: skip
    events.append({"delta": {"tool_calls": [first]}})
    for piece in _fragments(args, 4):
        events.append({"delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}})
    events.append({"delta": {"provider_note": f"for {MAIL}"}})
    proxy.upstream.enqueue(None, events=events, finish_reason="tool_calls")
    stream = route().chat.completions.create(
        model="fake-model", messages=PROMPT, stream=True, logprobs=True
    )
    chunks = list(stream)
    _clear("".join(c.model_dump_json() for c in chunks))
    fields: dict[str, str] = {}
    arguments = ""
    names = []
    for chunk in chunks:
        for choice in chunk.choices:
            assert choice.logprobs is None
            delta = choice.delta
            for key in ("content", "refusal"):
                fields[key] = fields.get(key, "") + (getattr(delta, key) or "")
            for key, value in (delta.model_extra or {}).items():
                fields[key] = fields.get(key, "") + (value or "")
            for call in delta.tool_calls or []:
                if call.function and call.function.name:
                    names.append((call.id, call.function.name))
                arguments += (call.function.arguments or "") if call.function else ""
    assert fields["content"] == "Dial <PHONE_NUMBER> now."
    assert fields["refusal"] == "No, not <PHONE_NUMBER>."
    assert "<EMAIL_ADDRESS>" in fields["reasoning_content"]
    assert fields["provider_note"] == "for <EMAIL_ADDRESS>"
    assert names == [("call_1", "send_mail")]
    parsed = json.loads(arguments)
    assert parsed["phone"] == "<PHONE_NUMBER>" and parsed["copies"] == 3


def test_prompt_tool_calls_and_tool_results_are_pseudonymised(
    route: Callable[[], Any], proxy: Proxy
) -> None:
    history = [
        {"role": "user", "content": "Mail my tutor."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": json.dumps({"mail": MAIL})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": f"Tutor phone: {PHONE}"},
    ]
    proxy.upstream.enqueue("Done.")
    route().chat.completions.create(model="fake-model", messages=history)
    sent = proxy.upstream.completion_requests[-1].messages
    _clear(json.dumps(sent))
    assert sent[1]["tool_calls"][0]["id"] == "call_9"
    assert sent[1]["tool_calls"][0]["function"]["name"] == "lookup"
    assert "mail" in json.loads(sent[1]["tool_calls"][0]["function"]["arguments"])
    assert sent[2]["tool_call_id"] == "call_9"


def test_lone_surrogate_in_a_prompt_is_400(proxy: Proxy) -> None:
    """JSON may escape a lone surrogate (the SDK refuses to send one, other clients do not)."""
    import httpx

    before = len(proxy.upstream.completion_requests)
    body = b'{"model": "fake-model", "messages": [{"role": "user", "content": "hi \\ud800"}]}'
    response = httpx.post(
        proxy.base_url + "/chat/completions",
        content=body,
        headers={**proxy.headers("alice"), "Content-Type": "application/json"},
    )
    assert response.status_code == 400, response.text
    assert "surrogate" in response.text
    assert len(proxy.upstream.completion_requests) == before  # nothing was sent


def test_lone_surrogate_in_a_prompt_is_a_clear_wrapper_error(
    proxy: Proxy, redactor: Redactor
) -> None:
    from dpllm.errors import InvalidText

    raw = openai.OpenAI(base_url=proxy.upstream.base_url, api_key="x", max_retries=0)
    with wrap(raw, redactor=redactor) as client, pytest.raises(InvalidText):
        client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi \udc00"}]
        )


def test_lone_surrogate_in_an_answer_is_replaced(route: Callable[[], Any], proxy: Proxy) -> None:
    body = (
        b'{"id": "x", "object": "chat.completion", "created": 0, "model": "fake-model", '
        b'"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", '
        b'"content": "odd \\ud800 text, call 13812345678"}}]}'
    )
    proxy.upstream.enqueue(raw_body=body)
    reply = route().chat.completions.create(model="fake-model", messages=PROMPT)
    assert reply.choices[0].message.content == "odd \ufffd text, call <PHONE_NUMBER>"
