"""A malformed upstream stream is ModelBadResponse (502 in the proxy), never an internal error.

Found against a real ``dpllm serve``: an upstream SSE event that is not JSON, a
JSON list, or a delta whose ``content`` is a number ended the proxy's stream with
``internal server error`` (status 500: JSONDecodeError, AttributeError and a
pydantic ValidationError leaked from the SDK and from re-validating the chunk).
"""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from dpllm.chat.wrapper import NoRedaction, wrap
from dpllm.errors import ModelBadResponse

PROMPT = [{"role": "user", "content": "hi"}]
BAD_STREAMS = {
    "not JSON": b"data: {not json}\n\ndata: [DONE]\n\n",
    "a JSON list": b"data: [1]\n\ndata: [DONE]\n\n",
    "numeric content": (
        b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
        b'"choices":[{"index":0,"delta":{"content":5}}]}\n\ndata: [DONE]\n\n'
    ),
}


def _transport(body: bytes) -> httpx.MockTransport:
    return httpx.MockTransport(
        lambda request: httpx.Response(
            200, content=body, headers={"content-type": "text/event-stream"}
        )
    )


@pytest.mark.parametrize("body", BAD_STREAMS.values(), ids=BAD_STREAMS.keys())
def test_sync_stream(body: bytes) -> None:
    client = openai.OpenAI(
        api_key="x",
        base_url="http://upstream/v1",
        max_retries=0,
        http_client=httpx.Client(transport=_transport(body)),
    )
    wrapped = wrap(client, redactor=NoRedaction())
    with pytest.raises(ModelBadResponse):
        for _ in wrapped.chat.completions.create(model="m", messages=PROMPT, stream=True):
            pass


@pytest.mark.parametrize("body", BAD_STREAMS.values(), ids=BAD_STREAMS.keys())
def test_async_stream(body: bytes) -> None:
    async def run() -> None:
        client = openai.AsyncOpenAI(
            api_key="x",
            base_url="http://upstream/v1",
            max_retries=0,
            http_client=httpx.AsyncClient(transport=_transport(body)),
        )
        wrapped = wrap(client, redactor=NoRedaction())
        stream = await wrapped.chat.completions.create(model="m", messages=PROMPT, stream=True)
        async for _ in stream:
            pass

    with pytest.raises(ModelBadResponse):
        asyncio.run(run())
