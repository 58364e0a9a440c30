"""``dpllm.wrap`` around the official SDK: an echoing MockTransport and the loopback fake."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest

from dpllm.chat.wrapper import NoRedaction, WrappedAsyncOpenAI, WrappedOpenAI, wrap
from dpllm.errors import ConfigError, ModelBadResponse
from dpllm.redact import Redactor
from dpllm.testing import FakeOpenAIServer
from tests.server.conftest import RESPONSES

PROMPT = [{"role": "user", "content": "Hi, I am Emily Clark (13987654321)."}]


def _echo(request: httpx.Request) -> httpx.Response:
    """An upstream that answers with the last user message: it sees only what left."""
    body = json.loads(request.content)
    content = body["messages"][-1]["content"]
    return httpx.Response(
        200,
        json={
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "You said: " + content},
                 "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        },
    )  # fmt: skip


def _echo_client(**kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="x", base_url="http://upstream/v1", http_client=httpx.Client(transport=httpx.MockTransport(_echo)), **kwargs
    )  # fmt: skip


def test_pseudonymise_restores_for_the_caller(redactor: Redactor) -> None:
    client = wrap(_echo_client(), redactor=redactor)
    assert isinstance(client, WrappedOpenAI)
    reply = client.chat.completions.create(model="m", messages=PROMPT)
    assert reply.choices[0].message.content == "You said: " + PROMPT[0]["content"]


def test_redact_policy_keeps_placeholders(redactor: Redactor) -> None:
    client = wrap(_echo_client(), redactor=redactor, policy="redact")
    text = client.chat.completions.create(model="m", messages=PROMPT).choices[0].message.content
    assert text is not None
    assert "Emily" not in text and "13987654321" not in text and "<PERSON>" in text


def test_async_wrap(redactor: Redactor) -> None:
    async def run() -> str:
        async def echo(request: httpx.Request) -> httpx.Response:
            return _echo(request)

        raw = openai.AsyncOpenAI(
            api_key="x",
            base_url="http://upstream/v1",
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(echo)),
        )
        client = wrap(raw, redactor=redactor)
        assert isinstance(client, WrappedAsyncOpenAI)
        reply = await client.chat.completions.create(model="m", messages=PROMPT)
        await raw.close()
        return reply.choices[0].message.content or ""

    assert asyncio.run(run()) == "You said: " + PROMPT[0]["content"]


def test_releases_via_extra_body_regenerate_then_rewrite() -> None:
    with FakeOpenAIServer() as srv:
        srv.enqueue("We got 157 responses.", times=2)
        client = wrap(openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0),
                      redactor=NoRedaction(), max_attempts=2)  # fmt: skip
        reply = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "count?"}],
            extra_body={"dpllm": {"releases": [RESPONSES]}, "seed": 7},
        )
        bodies = [r.body for r in srv.completion_requests]
    assert reply.choices[0].message.content == "We got about 160 responses."
    assert len(bodies) == 2 and all("dpllm" not in b and b["seed"] == 7 for b in bodies)
    assert reply.usage is not None and reply.usage.prompt_tokens == 20


def test_default_releases_and_per_call_override() -> None:
    with FakeOpenAIServer() as srv:
        srv.enqueue("We got 157 responses.", times=2)
        client = wrap(openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0),
                      redactor=NoRedaction(), releases=[RESPONSES], max_attempts=1)  # fmt: skip
        guarded = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "?"}]
        )
        free = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "?"}],
            extra_body={"dpllm": {"releases": []}},
        )  # fmt: skip
    assert guarded.choices[0].message.content == "We got about 160 responses."
    assert free.choices[0].message.content == "We got 157 responses."


def test_stream_without_finish_fails_closed() -> None:
    with FakeOpenAIServer() as srv:
        srv.enqueue("Held text 138 1234 5678 that never finishes", stream_abort_after=3)
        client = wrap(openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0),
                      redactor=NoRedaction())  # fmt: skip
        got: list[str] = []
        with pytest.raises((openai.APIError, httpx.HTTPError, ModelBadResponse)):
            for chunk in client.chat.completions.create(model="m", messages=PROMPT, stream=True):
                got.extend(c.delta.content or "" for c in chunk.choices)
    assert "".join(got) == ""


def test_stream_guard_rewrites_figures() -> None:
    with FakeOpenAIServer() as srv:
        srv.enqueue("This week brought us exactly 157 responses in total. Thanks to all of you!")
        client = wrap(openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0),
                      redactor=NoRedaction(), releases=[RESPONSES])  # fmt: skip
        with client.chat.completions.create(model="m", messages=PROMPT, stream=True) as stream:
            text = "".join(c.delta.content or "" for ch in stream for c in ch.choices)
    assert "157" not in text and "about 160 responses" in text


@pytest.mark.parametrize("stream", [False, True])
def test_figures_cited_by_reference_read_the_same_streamed_or_not(stream: bool) -> None:
    answer = "This week brought us [[responses]] in total. Thanks to all of you for writing!"
    with FakeOpenAIServer() as srv:
        srv.enqueue(answer)
        client = wrap(openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0),
                      redactor=NoRedaction(), releases=[RESPONSES])  # fmt: skip
        if stream:
            with client.chat.completions.create(model="m", messages=PROMPT, stream=True) as s:
                text = "".join(c.delta.content or "" for ch in s for c in ch.choices)
        else:
            reply = client.chat.completions.create(model="m", messages=PROMPT)
            text = reply.choices[0].message.content or ""
    assert "[[" not in text and "about 160" in text, text


def test_unprotected_paths_are_refused_and_options_stay_wrapped() -> None:
    client = wrap(_echo_client(), redactor=NoRedaction())
    for name in ("with_raw_response", "with_streaming_response", "parse", "stream"):
        with pytest.raises(AttributeError, match="not protected"):
            getattr(client.chat.completions, name)
    with pytest.raises(AttributeError, match="not protected"):
        _ = client.responses
    assert isinstance(client.with_options(timeout=5), WrappedOpenAI)
    assert client.api_key == "x" and isinstance(client.unwrapped, openai.OpenAI)


def test_bad_options() -> None:
    with pytest.raises(ConfigError):
        wrap(_echo_client(), redactor=NoRedaction(), policy="leak")
    with pytest.raises(ConfigError):
        wrap(_echo_client(), redactor=NoRedaction(), max_attempts=0)
    with pytest.raises(TypeError):
        wrap(object(), redactor=NoRedaction())  # type: ignore[call-overload]
