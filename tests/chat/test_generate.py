"""The regenerate loop against a loopback server, through the official openai SDK."""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

import pytest

from dpllm.chat.generate import GenerationResult, generate
from dpllm.chat.models import OfflineWriter, OpenAIModelClient
from dpllm.errors import ConfigError, GuardError, ModelTimeout
from dpllm.release import Release
from dpllm.testing import FakeOpenAIServer
from dpllm.testing.releases import fake_release

PHONE = "13812345678"
PHONE_RE = re.compile(r"1[3-9]\d{9}")


@dataclass(frozen=True)
class _Redaction:
    text: str
    counts: Mapping[str, int] = field(default_factory=dict)


class RegexRedactor:
    """A tiny stand-in for the Presidio redactor: mainland mobile numbers only."""

    def redact(
        self, text: str, *, language: str = "auto", allow: Collection[str] = ()
    ) -> _Redaction:
        found = PHONE_RE.findall(text)
        return _Redaction(PHONE_RE.sub("<PHONE_NUMBER>", text), {"PHONE_NUMBER": len(found)})


def _release(name: str, value: float, lo: float, hi: float, kind: str, unit: str) -> Release:
    return fake_release(name, value, lo, hi, kind=kind, unit=unit, window=None)


RELEASES = {
    "responses": _release("responses", 160.0, 150.0, 170.0, "count", "responses"),
    "mean_rating": _release("mean_rating", 4.31, 4.11, 4.51, "mean", "stars"),
}
MESSAGES = [
    {"role": "system", "content": "Write a short weekly summary."},
    {"role": "user", "content": "反馈：约160条（150–170），平均评分约4.3分。"},
]
FALLBACK = "本周约160条反馈，平均评分约4.3分（满分5分）。"
LEAKY = f"本周共收到157条反馈，平均评分4.37分。有同学留下电话{PHONE}。"
GOOD = "本周约160条反馈，平均评分约4.3分。"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def _client(srv: FakeOpenAIServer, **kw: float) -> OpenAIModelClient:
    return OpenAIModelClient(
        base_url=srv.base_url,
        api_key="test",
        model="m",
        timeout=kw.get("timeout", 5.0),
        max_retries=int(kw.get("max_retries", 0)),
    )


def _run(srv: FakeOpenAIServer, **kw: object) -> GenerationResult:
    client_kw = {k: kw.pop(k) for k in ("timeout", "max_retries") if k in kw}
    return generate(
        MESSAGES,
        fallback_text=FALLBACK,
        releases=RELEASES,
        model=_client(srv, **client_kw),  # type: ignore[arg-type]
        redactor=RegexRedactor(),
        **kw,  # type: ignore[arg-type]
    )


def _assert_no_leak(result: GenerationResult, srv: FakeOpenAIServer, logs: str) -> None:
    assert PHONE not in repr(result) and PHONE not in result.text
    for attempt in result.attempts:
        assert attempt.text is None or PHONE not in attempt.text
        assert all(PHONE not in v.mention and PHONE not in v.message for v in attempt.violations)
    for request in srv.completion_requests:
        assert PHONE not in str(request.body)
    assert PHONE not in logs


def test_over_precise_and_leaky_answer_then_a_compliant_one(
    server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.enqueue(LEAKY, prompt_tokens=20, completion_tokens=30)
    server.enqueue(GOOD, prompt_tokens=40, completion_tokens=10)
    result = _run(server)
    assert (result.source, result.text, result.model_calls) == ("model", GOOD, 2)
    first, second = result.attempts
    assert first.redaction_counts == {"PHONE_NUMBER": 1} and "<PHONE_NUMBER>" in str(first.text)
    assert [(str(v.rule), v.mention) for v in first.violations] == [
        ("over-precise", "157条"),
        ("over-precise", "4.37分"),
    ]
    assert second.violations == () and second.model == "m"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (60, 40)
    # The retry carried the redacted answer and named each violation with its allowed form.
    retry = server.completion_requests[1].messages
    assert retry[:2] == MESSAGES and retry[2] == {"role": "assistant", "content": first.text}
    follow_up = retry[3]["content"]
    assert retry[3]["role"] == "user"
    for expected in ("157条", "约160条", "150–170条", "4.37分", "约4.3分"):
        assert expected in follow_up
    _assert_no_leak(result, server, caplog.text)


def test_always_violating_falls_back(
    server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.enqueue(LEAKY, times=3)
    result = _run(server)
    assert (result.source, result.text, result.model_calls) == ("fallback", FALLBACK, 3)
    assert [a.source for a in result.attempts] == ["model"] * 3 + ["fallback"]
    assert all(a.violations for a in result.attempts[:3])
    assert server.pending == 0 and result.error is None
    _assert_no_leak(result, server, caplog.text)


def test_max_attempts_is_respected(server: FakeOpenAIServer) -> None:
    server.enqueue(LEAKY, times=2)
    assert _run(server, max_attempts=1).model_calls == 1
    with pytest.raises(ConfigError):
        _run(server, max_attempts=0)


def test_rate_limited_then_success(server: FakeOpenAIServer) -> None:
    server.enqueue_error(429, retry_after=0.01)
    server.enqueue(GOOD)
    result = _run(server, max_retries=2)
    assert (result.source, result.model_calls, len(server.completion_requests)) == ("model", 1, 2)


def test_timeout_falls_back_with_the_error_recorded(
    server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.enqueue(LEAKY, delay=2.0)
    result = _run(server, timeout=0.3)
    assert result.source == "fallback" and result.text == FALLBACK
    assert result.error is not None and result.error.startswith("ModelTimeout")
    assert result.attempts[0].text is None
    _assert_no_leak(result, server, caplog.text)


def test_timeout_can_raise(server: FakeOpenAIServer) -> None:
    server.enqueue(GOOD, delay=2.0)
    with pytest.raises(ModelTimeout):
        _run(server, timeout=0.3, on_model_error="raise")


def test_server_error_falls_back(server: FakeOpenAIServer) -> None:
    server.enqueue_error(500, "upstream exploded")
    result = _run(server)
    assert result.source == "fallback"
    assert result.error is not None and result.error.startswith("ModelBadResponse")
    assert "500" in result.error


def test_unreachable_model_falls_back() -> None:
    with FakeOpenAIServer() as srv:
        client = _client(srv)
    result = generate(
        MESSAGES, fallback_text=FALLBACK, releases=RELEASES, model=client, redactor=RegexRedactor()
    )
    assert result.source == "fallback" and str(result.error).startswith("ModelUnreachable")


def test_violating_fallback_is_refused() -> None:
    with pytest.raises(GuardError):
        generate(
            MESSAGES,
            fallback_text="共157条反馈",
            releases=RELEASES,
            model=OfflineWriter("共157条反馈"),
            redactor=RegexRedactor(),
        )


def test_offline_writer_needs_no_network() -> None:
    result = generate(
        MESSAGES,
        fallback_text=FALLBACK,
        releases=RELEASES,
        model=OfflineWriter(FALLBACK),
        redactor=RegexRedactor(),
    )
    assert (result.source, result.text, result.usage.total_tokens) == ("model", FALLBACK, 0)


def test_bad_on_model_error_option() -> None:
    with pytest.raises(ConfigError):
        generate(
            MESSAGES,
            fallback_text=FALLBACK,
            releases=RELEASES,
            model=OfflineWriter(FALLBACK),
            redactor=RegexRedactor(),
            on_model_error="ignore",
        )


def test_end_to_end_with_the_presidio_redactor(
    server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    from dpllm.redact import Redactor

    caplog.set_level(logging.DEBUG, logger="dpllm")
    server.enqueue(LEAKY)
    server.enqueue(GOOD)
    result = generate(
        MESSAGES,
        fallback_text=FALLBACK,
        releases=RELEASES,
        model=_client(server),
        redactor=Redactor(),
    )
    assert (result.source, result.text, result.model_calls) == ("model", GOOD, 2)
    assert result.redaction_counts.get("PHONE_NUMBER", 0) >= 1
    _assert_no_leak(result, server, caplog.text)
