"""The official openai SDK (sync, async, streaming) against a live ``dpllm serve``."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from pathlib import Path

import openai
import pytest

from dpllm.redact import Redactor
from dpllm.testing import FakeOpenAIServer
from tests.server.conftest import KEYS, RESPONSES, LiveServer, Proxy, make_settings

NAME = "Emily Clark"
PHONE = "13987654321"
PROMPT = [{"role": "user", "content": f"I am {NAME}, phone {PHONE}. Summarise my week."}]


def _client(proxy: Proxy, who: str = "alice") -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.base_url, api_key=KEYS[who], max_retries=0)


def _aclient(proxy: Proxy, who: str = "alice") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=proxy.base_url, api_key=KEYS[who], max_retries=0)


def _sent(proxy: Proxy) -> str:
    return str(proxy.upstream.completion_requests[-1].messages)


def test_sync_prompt_leaves_pseudonymised(proxy: Proxy) -> None:
    proxy.upstream.enqueue("Noted.")
    with _client(proxy) as client:
        reply = client.chat.completions.create(model="fake-model", messages=PROMPT)
    assert reply.choices[0].message.content == "Noted."
    sent = _sent(proxy)
    assert NAME not in sent and PHONE not in sent
    assert "<PERSON_" in sent and "<PHONE_NUMBER_" in sent
    request = proxy.upstream.completion_requests[-1]
    assert request.headers["authorization"] == "Bearer upstream-secret"  # never the caller's key


def test_sync_answer_has_new_pii_redacted(proxy: Proxy) -> None:
    proxy.upstream.enqueue("Thanks. Please also call John Smith on 13812345678 today.")
    with _client(proxy) as client:
        reply = client.chat.completions.create(model="fake-model", messages=PROMPT)
    text = reply.choices[0].message.content or ""
    assert "13812345678" not in text and "John Smith" not in text
    assert "<PHONE_NUMBER>" in text
    assert reply.object == "chat.completion" and reply.usage is not None


def test_async_client(proxy: Proxy) -> None:
    async def run() -> str:
        proxy.upstream.enqueue("All good, see you next week.")
        async with _aclient(proxy) as client:
            reply = await client.chat.completions.create(model="fake-model", messages=PROMPT)
        return reply.choices[0].message.content or ""

    assert asyncio.run(run()) == "All good, see you next week."
    assert NAME not in _sent(proxy)


def test_sync_stream_redacted(proxy: Proxy) -> None:
    proxy.upstream.enqueue(
        "Here is your summary for this week. Call 138 1234 5678 if needed. Bye now."
    )
    with _client(proxy) as client:
        stream = client.chat.completions.create(model="fake-model", messages=PROMPT, stream=True)
        pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
    text = "".join(pieces)
    assert "1234" not in text and "<PHONE_NUMBER>" in text
    assert text.startswith("Here is your summary") and text.endswith("Bye now.")


def test_async_stream(proxy: Proxy) -> None:
    async def run() -> str:
        proxy.upstream.enqueue("One sentence here. Another one, with mail a.b@example.org. End.")
        async with _aclient(proxy) as client:
            stream = await client.chat.completions.create(
                model="fake-model", messages=PROMPT, stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    text = asyncio.run(run())
    assert "a.b@example.org" not in text and text.endswith("End.")


@pytest.mark.parametrize("failure", ["stream_error_after", "stream_abort_after"])
def test_stream_fails_closed(proxy: Proxy, failure: str) -> None:
    text = (
        "The first sentence is long enough to be released on its own, since a redaction "
        "unit ends at a sentence end only once it holds at least four hundred characters "
        "of text (the default unit size), so it goes on for a while, with words about the "
        "course, the lectures, the weekly exercises, the reading list and the exam, and "
        "then some more words about the labs, the office hours and the forum, until it is "
        "finally long enough to end. "
        "Then a secret part that must never leave 138 1234 5678"
    )
    # fail a few words into the second sentence (the fake upstream streams word by word)
    words_before = len(text.split("Then a secret")[0].split(" "))
    proxy.upstream.enqueue(text, **{failure: words_before + 3})
    received: list[str] = []
    with _client(proxy) as client, pytest.raises(openai.APIError):
        stream = client.chat.completions.create(model="fake-model", messages=PROMPT, stream=True)
        for chunk in stream:
            if chunk.choices:
                received.append(chunk.choices[0].delta.content or "")
    got = "".join(received)
    assert "secret" not in got and "1234" not in got
    assert got.startswith("The first sentence")


def test_releases_attached_regenerate(proxy: Proxy) -> None:
    proxy.upstream.enqueue("This week we received 157 responses.")
    proxy.upstream.enqueue("This week we received about 160 responses.")
    with _client(proxy) as client:
        reply = client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "Summarise the feedback count."}],
            extra_body={"dpllm": {"releases": [RESPONSES.to_dict()]}},
        )
    assert reply.choices[0].message.content == "This week we received about 160 responses."
    first, second = proxy.upstream.completion_requests[-2:]
    assert "dpllm" not in first.body
    assert "157" in str(second.messages[-2]) and "160" in str(second.messages[-1])
    assert reply.usage is not None and reply.usage.completion_tokens == 6 + 7  # both attempts
    assert reply.usage.prompt_tokens == 10 + 10


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        b'{"object": "chat.completion"}',
        b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": ["Emily"]}}]}',
    ],
    ids=["not-json", "not-object", "no-choices", "content-not-text"],
)
def test_malformed_upstream_answer_fails_closed(proxy: Proxy, raw: bytes) -> None:
    proxy.upstream.enqueue(raw_body=raw)
    with _client(proxy) as client, pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="fake-model", messages=PROMPT)
    assert info.value.status_code == 502
    assert "Emily" not in str(info.value.body)


def test_unknown_upstream_fields_pass_through(proxy: Proxy) -> None:
    body = {
        "id": "x", "object": "chat.completion", "created": 0, "model": "fake-model",
        "system_fingerprint": "fp_1", "provider_extra": {"k": 1},
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": "Call 13812345678."}}],
    }  # fmt: skip
    proxy.upstream.enqueue(raw_body=json.dumps(body).encode())
    with _client(proxy) as client:
        reply = client.chat.completions.create(model="fake-model", messages=PROMPT)
    assert reply.choices[0].message.content == "Call <PHONE_NUMBER>."
    assert reply.system_fingerprint == "fp_1" and reply.usage is None
    assert (reply.model_extra or {}).get("provider_extra") == {"k": 1}


def test_upstream_error_is_502(proxy: Proxy) -> None:
    proxy.upstream.enqueue_error(500, "boom")
    with _client(proxy) as client, pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="fake-model", messages=PROMPT)
    assert info.value.status_code == 502
    body = info.value.body
    assert isinstance(body, dict) and body["type"] == "upstream_error"


def test_upstream_timeout_is_504(proxy: Proxy) -> None:
    proxy.upstream.enqueue("late", delay=3.0)
    with _client(proxy) as client, pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="fake-model", messages=PROMPT)
    assert info.value.status_code == 504


def test_models_pass_through(proxy: Proxy) -> None:
    with _client(proxy) as client:
        ids = [m.id for m in client.models.list()]
    assert ids == ["fake-model"]


def test_logs_hold_no_prompt_text_or_key(proxy: Proxy, caplog: pytest.LogCaptureFixture) -> None:
    proxy.upstream.enqueue("Fine.")
    with caplog.at_level(logging.INFO, logger="dpllm"), _client(proxy) as client:
        client.chat.completions.create(model="fake-model", messages=PROMPT)
    records = [r for r in caplog.records if r.name.startswith("dpllm.server")]
    lines = [getattr(r, "dpllm", {}) for r in records]
    line = next(
        f for f in lines if f.get("event") == "request" and f.get("path") == "/v1/chat/completions"
    )
    assert line["status"] == 200 and line["messages"] == 1 and line["releases"] is False
    dump = " ".join(str(getattr(r, "dpllm", "")) + r.getMessage() for r in records)
    assert NAME not in dump and PHONE not in dump and "Summarise" not in dump
    assert KEYS["alice"] not in dump and "alice" in dump


def test_upstream_status_is_reported(proxy: Proxy) -> None:
    proxy.upstream.enqueue_error(503, "overloaded while reading Emily Clark's prompt")
    with _client(proxy) as client, pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="fake-model", messages=PROMPT)
    assert info.value.status_code == 502
    body = info.value.body
    assert isinstance(body, dict) and body["upstream_status"] == 503
    assert "Emily" not in str(body)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port  # nothing listens once the probe is closed


def test_upstream_down_is_502(tmp_path: Path, redactor: Redactor) -> None:
    from dpllm.server import create_app

    settings = make_settings(tmp_path, f"http://127.0.0.1:{_free_port()}/v1")
    with LiveServer(create_app(settings, redactor=redactor)) as live:
        client = openai.OpenAI(base_url=live.url + "/v1", api_key=KEYS["alice"], max_retries=0)
        with client, pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model="fake-model", messages=PROMPT)
    assert info.value.status_code == 502
    body = info.value.body
    assert isinstance(body, dict) and body["code"] == "upstream_unreachable"


def test_proxied_upstream_keeps_the_sdk_client(tmp_path: Path, redactor: Redactor) -> None:
    """HTTP_PROXY applies to the upstream: chat goes through the SDK's client (as before)."""
    from dpllm.server import create_app

    with FakeOpenAIServer() as upstream:
        settings = make_settings(tmp_path, upstream.base_url)
        app = create_app(settings, redactor=redactor, environ={"HTTP_PROXY": "http://proxy:3128"})
        assert app.state.dpllm.lean_upstream is None
        direct = create_app(settings, redactor=redactor, environ={})
        assert direct.state.dpllm.lean_upstream is not None
        upstream.enqueue("Call 13812345678.")
        upstream.enqueue_error(500)
        with LiveServer(app) as live:
            client = openai.OpenAI(base_url=live.url + "/v1", api_key=KEYS["alice"], max_retries=0)
            with client:
                reply = client.chat.completions.create(model="fake-model", messages=PROMPT)
                with pytest.raises(openai.APIStatusError) as info:
                    client.chat.completions.create(model="fake-model", messages=PROMPT)
    assert reply.choices[0].message.content == "Call <PHONE_NUMBER>."
    assert NAME not in str(upstream.completion_requests[0].messages)
    assert info.value.status_code == 502
    body = info.value.body
    assert isinstance(body, dict) and body["upstream_status"] == 500


@pytest.mark.parametrize(
    "raw",
    [
        b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
        b'{"messages": [{"role": "user", "content": "hi"}], "top_p": Infinity}',
        b"not json",
        b"[1, 2]",
        b"{}",
        b'{"messages": []}',
        b'{"messages": ["hi"]}',
        b'{"messages": [{"content": "hi"}]}',
        b'{"messages": [{"role": "", "content": "hi"}]}',
        b'{"messages": [{"role": "user", "content": 5}]}',
        b'{"messages": [{"role": "user", "content": ["part"]}]}',
        b'{"messages": [{"role": "user", "content": "hi"}], "model": 5}',
        b'{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}',
        b'{"messages": [{"role": "user", "content": "hi"}], "dpllm": [1]}',
        b"[" * 100_000,
        b'{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e400}',
    ],
)
def test_malformed_request_is_400(proxy: Proxy, raw: bytes) -> None:
    import httpx

    sent = len(proxy.upstream.completion_requests)
    r = httpx.post(
        proxy.base_url + "/chat/completions",
        content=raw,
        headers={**proxy.headers("alice"), "Content-Type": "application/json"},
    )
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and isinstance(error["message"], str)
    assert len(proxy.upstream.completion_requests) == sent  # nothing was forwarded


def test_request_schema_is_documented(proxy: Proxy) -> None:
    import httpx

    spec = httpx.get(proxy.url + "/openapi.json").json()
    op = spec["paths"]["/v1/chat/completions"]["post"]
    schema = op["requestBody"]["content"]["application/json"]["schema"]
    assert schema["required"] == ["messages"] and schema["properties"]["messages"]["minItems"] == 1
    assert schema["properties"]["messages"]["items"]["properties"]["role"]["maxLength"] == 64
    assert op["security"] == [{"HTTPBearer": []}]


def test_without_environ_the_process_environment_decides(
    tmp_path: Path, redactor: Redactor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """create_app(environ=None) reads os.environ, as the SDK's client does: an HTTP_PROXY
    there keeps non-streaming chat on the SDK's client too."""
    from dpllm.server import create_app

    settings = make_settings(tmp_path, "http://127.0.0.1:9/v1")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert create_app(settings, redactor=redactor).state.dpllm.lean_upstream is None
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)
    monkeypatch.delenv("all_proxy", raising=False)
    assert create_app(settings, redactor=redactor).state.dpllm.lean_upstream is not None


def test_a_line_break_in_the_upstream_key_is_a_config_error(
    tmp_path: Path, redactor: Redactor
) -> None:
    from dataclasses import replace

    from dpllm.errors import ConfigError
    from dpllm.server import create_app

    settings = make_settings(tmp_path, "http://127.0.0.1:9/v1")
    settings = replace(settings, model=replace(settings.model, api_key="sk-1\r\nX-Evil: 1"))
    with pytest.raises(ConfigError) as info:
        create_app(settings, redactor=redactor, environ={})
    assert "sk-1" not in str(info.value)
