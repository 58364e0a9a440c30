"""Wrap an OpenAI client: prompts leave pseudonymised, answers come back redacted and guarded.

Runs against a loopback fake model, so it needs no network or key:

    .venv/bin/python examples/wrap_client.py
"""

from __future__ import annotations

from openai import OpenAI

import dpllm
from dpllm.release import Cost, Release
from dpllm.testing import FakeOpenAIServer

responses = Release(
    name="responses", values=(160.0,), intervals=((150.0, 170.0),), mechanism="discrete_laplace",
    noise_scale=4.0, cost=Cost.pure(0.5), fingerprint="example", kind="count", unit="responses",
)  # fmt: skip

with FakeOpenAIServer() as model:
    model.enqueue("We received 157 responses. Call John Smith on 13812345678.")
    model.enqueue("We received about 160 responses. Call John Smith on 13812345678.")
    client = dpllm.wrap(OpenAI(base_url=model.base_url, api_key="unused"))
    reply = client.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "I am Emily Clark. How many responses came in?"}],
        extra_body={"dpllm": {"releases": [responses]}},
    )
    print("the model saw:", model.completion_requests[0].messages[0]["content"])
    print("you read:     ", reply.choices[0].message.content)
