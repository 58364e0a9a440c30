"""Test helpers other projects (and dpllm's own tests) can use: a fake OpenAI server."""

from __future__ import annotations

from dpllm.testing.fake_openai import FakeOpenAIServer, RecordedRequest, ScriptedReply

__all__ = ["FakeOpenAIServer", "RecordedRequest", "ScriptedReply"]
