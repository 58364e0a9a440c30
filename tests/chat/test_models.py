"""The OpenAI client against a real loopback server, driven by the official SDK."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from dpllm.chat.models import OfflineWriter, OpenAIModelClient
from dpllm.errors import (
    ModelAuthError,
    ModelBadResponse,
    ModelRateLimited,
    ModelTimeout,
    ModelUnreachable,
)
from dpllm.testing import FakeOpenAIServer

MESSAGES = [{"role": "user", "content": "Summarise the week."}]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def client(srv: FakeOpenAIServer, **kw: object) -> OpenAIModelClient:
    options: dict[str, object] = {"timeout": 5.0, "max_retries": 0}
    options.update(kw)
    return OpenAIModelClient(base_url=srv.base_url, api_key="test", model="m", **options)  # type: ignore[arg-type]


def test_completion_text_usage_and_request(server: FakeOpenAIServer) -> None:
    server.enqueue("About 160 responses.", prompt_tokens=12, completion_tokens=3)
    c = client(server).complete(MESSAGES, temperature=0.0)
    assert (c.text, c.model, c.finish_reason) == ("About 160 responses.", "m", "stop")
    assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens) == (12, 3, 15)
    assert c.latency_s >= 0 and "About" not in repr(c)
    [req] = server.completion_requests
    assert req.messages == MESSAGES and req.body["temperature"] == 0.0
    assert req.headers["authorization"] == "Bearer test"


def test_rate_limit_then_success_is_retried_by_the_sdk(server: FakeOpenAIServer) -> None:
    server.enqueue_error(429, retry_after=0.01)
    server.enqueue("ok")
    assert client(server, max_retries=2).complete(MESSAGES).text == "ok"
    assert len(server.completion_requests) == 2


def test_rate_limit_after_retries(server: FakeOpenAIServer) -> None:
    server.enqueue_error(429, retry_after=0.01, times=2)
    with pytest.raises(ModelRateLimited) as info:
        client(server, max_retries=1).complete(MESSAGES)
    assert isinstance(info.value.__cause__, openai.RateLimitError)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, ModelAuthError),
        (403, ModelAuthError),
        (500, ModelBadResponse),
        (400, ModelBadResponse),
    ],
)
def test_status_errors_are_mapped(server: FakeOpenAIServer, status: int, error: type) -> None:
    server.enqueue_error(status, "secret prompt echo")
    with pytest.raises(error) as info:
        client(server).complete(MESSAGES)
    assert str(status) in str(info.value) and "secret prompt echo" not in str(info.value)
    assert isinstance(info.value.__cause__, openai.APIStatusError)


def test_timeout(server: FakeOpenAIServer) -> None:
    server.enqueue("late", delay=2.0)
    with pytest.raises(ModelTimeout) as info:
        client(server, timeout=0.3).complete(MESSAGES)
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value.__cause__, openai.APITimeoutError)


def test_unreachable() -> None:
    with FakeOpenAIServer() as srv:
        url = srv.base_url
    c = OpenAIModelClient(base_url=url, api_key="t", model="m", max_retries=0, timeout=2.0)
    with pytest.raises(ModelUnreachable) as info:
        c.complete(MESSAGES)
    assert isinstance(info.value, ConnectionError)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}',
        b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", '
        b'"choices": [{"index": 0, "message": {"role": "assistant", "content": null}, '
        b'"finish_reason": "stop"}]}',
    ],
)
def test_malformed_or_empty_responses(server: FakeOpenAIServer, raw: bytes) -> None:
    server.enqueue(raw_body=raw)
    with pytest.raises(ModelBadResponse):
        client(server).complete(MESSAGES)


def test_bad_parameters() -> None:
    with pytest.raises(ValueError):
        OpenAIModelClient(base_url="http://127.0.0.1:1/v1", api_key="k", model="m", timeout=0)
    with pytest.raises(ValueError):
        OpenAIModelClient(base_url="http://127.0.0.1:1/v1", api_key="k", model="m", max_retries=-1)


def test_offline_writer() -> None:
    assert OfflineWriter("fallback").complete(MESSAGES).text == "fallback"
    writer = OfflineWriter(lambda msgs: f"{len(msgs)} message")
    c = writer.complete(MESSAGES)
    assert (c.text, c.model, c.usage.total_tokens) == ("1 message", "offline", 0)


def test_fake_server_streams_through_the_sdk(server: FakeOpenAIServer) -> None:
    server.enqueue("About 160 responses.")
    sdk = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
    stream = sdk.chat.completions.create(model="m", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "About 160 responses."
    assert [m.id for m in sdk.models.list()] == ["fake-model"]


def test_fake_server_mid_stream_error_and_abort(server: FakeOpenAIServer) -> None:
    sdk = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
    server.enqueue("one two three", stream_error_after=1, error_message="boom")
    with pytest.raises(openai.APIError):
        for _ in sdk.chat.completions.create(model="m", messages=MESSAGES, stream=True):  # type: ignore[arg-type]
            pass
    server.enqueue("one two three", stream_abort_after=1)
    got: list[str] = []
    with pytest.raises(Exception):  # noqa: B017 - the transport's error type is the SDK's business
        for chunk in sdk.chat.completions.create(model="m", messages=MESSAGES, stream=True):  # type: ignore[arg-type]
            got.append(chunk.choices[0].delta.content or "")
    assert "three" not in "".join(got)
