"""Honest retries, counted at the upstream: one deadline per request, no retries on top
of the proxy's (``x-should-retry``), upstream 4xx passed through, attempts stopped when
the client goes away; ``/v1/stats`` refusals the SDK must not retry."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from dpllm.redact import Redactor
from dpllm.testing import FakeOpenAIServer
from tests.server.conftest import KEYS, LiveServer, Proxy, make_settings

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture()
def proxy2(tmp_path: Path, redactor: Redactor) -> Iterator[Proxy]:
    """A proxy that retries the upstream twice (``max_retries = 2``) within 2 s."""
    from dpllm.server import create_app

    with FakeOpenAIServer() as upstream:
        settings = make_settings(tmp_path, upstream.base_url, timeout=2.0, max_retries=2)
        with LiveServer(create_app(settings, redactor=redactor)) as live:
            yield Proxy(live.url, upstream, settings, tmp_path / "ledger.db")


def sdk(proxy: Proxy, who: str = "alice") -> openai.OpenAI:
    # the SDK's defaults: 2 retries of its own on 408/409/429/5xx unless told not to
    return openai.OpenAI(base_url=proxy.base_url, api_key=KEYS[who], timeout=30)


def test_an_upstream_400_is_a_400_asked_once(proxy2: Proxy) -> None:
    proxy2.upstream.enqueue_error(400, "bad parameter", times=10)
    with pytest.raises(openai.BadRequestError) as info:
        sdk(proxy2).chat.completions.create(model="fake-model", messages=HI)  # type: ignore[arg-type]
    assert info.value.status_code == 400
    assert info.value.response.headers["x-should-retry"] == "false"
    assert len(proxy2.upstream.completion_requests) == 1


def test_an_upstream_500_is_a_502_and_the_sdk_does_not_multiply_it(proxy2: Proxy) -> None:
    proxy2.upstream.enqueue_error(500, retry_after=0, times=20)
    with pytest.raises(openai.APIStatusError) as info:
        sdk(proxy2).chat.completions.create(model="fake-model", messages=HI)  # type: ignore[arg-type]
    assert info.value.status_code == 502
    assert info.value.response.headers["x-should-retry"] == "false"
    # the proxy's 1 + 2 retries; the SDK's own retries would make it 9
    assert len(proxy2.upstream.completion_requests) == 3


def test_an_upstream_timeout_is_a_504_within_the_one_deadline(proxy2: Proxy) -> None:
    proxy2.upstream.enqueue("late", delay=5.0, times=5)
    r = httpx.post(
        proxy2.base_url + "/chat/completions",
        json={"messages": HI},
        headers=proxy2.headers("alice"),
        timeout=30,
    )
    assert r.status_code == 504, r.text
    assert r.headers["x-should-retry"] == "false"
    assert len(proxy2.upstream.completion_requests) == 1  # the deadline is spent


def test_a_retry_after_past_the_deadline_is_not_waited_for(proxy2: Proxy) -> None:
    proxy2.upstream.enqueue_error(503, retry_after=30, times=5)
    r = httpx.post(
        proxy2.base_url + "/chat/completions",
        json={"messages": HI},
        headers=proxy2.headers("alice"),
        timeout=30,
    )
    assert r.status_code == 502, r.text
    assert r.json()["error"]["upstream_status"] == 503
    assert len(proxy2.upstream.completion_requests) == 1


def test_an_upstream_429_is_a_429_the_sdk_does_not_retry(proxy2: Proxy) -> None:
    proxy2.upstream.enqueue_error(429, retry_after=0, times=20)
    with pytest.raises(openai.RateLimitError) as info:
        sdk(proxy2).chat.completions.create(model="fake-model", messages=HI)  # type: ignore[arg-type]
    assert info.value.response.headers["x-should-retry"] == "false"
    assert len(proxy2.upstream.completion_requests) == 3


def test_attempts_stop_when_the_client_disconnects(tmp_path: Path, redactor: Redactor) -> None:
    from dpllm.server import create_app

    with FakeOpenAIServer() as upstream:
        settings = make_settings(tmp_path, upstream.base_url, timeout=30.0, max_retries=8)
        with LiveServer(create_app(settings, redactor=redactor)) as live:
            upstream.enqueue_error(500, retry_after=0.5, times=20)
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(
                    live.url + "/v1/chat/completions",
                    json={"messages": HI},
                    headers={"Authorization": f"Bearer {KEYS['alice']}"},
                    timeout=httpx.Timeout(30, read=0.25),  # gone before the first backoff ends
                )
            time.sleep(1.6)  # three more attempts, had the proxy gone on
            assert len(upstream.completion_requests) == 1


def test_a_stats_refusal_tells_the_sdk_not_to_retry(proxy2: Proxy) -> None:
    headers = proxy2.headers("alice")
    url = proxy2.base_url + "/stats/mean_rating"
    # pool "tiny" holds ε = 0.05; mean_rating costs 0.3: refused, nothing spent
    import datetime as dt

    year, week, _ = dt.datetime.now(dt.UTC).isocalendar()
    this_week = {"week": f"{year}-W{week:02d}", "allow_incomplete": "true"}
    r = httpx.get(url, params={"pool": "tiny", **this_week}, headers=headers, timeout=30)
    assert r.status_code == 429, r.text
    assert r.headers["x-should-retry"] == "false"
    assert int(r.headers["retry-after"]) > 0  # this week's cap: the next week may allow it
    r = httpx.get(url, params={"pool": "tiny", "week": "2026-W01"}, headers=headers, timeout=30)
    assert r.status_code == 429 and "retry-after" not in r.headers  # a past week stays spent
    # pool "queued" queues instead: 202 with a ticket, ask again later
    r = httpx.get(url, params={"pool": "queued", "week": "2026-W40"}, headers=headers, timeout=30)
    assert r.status_code == 202, r.text
    assert r.headers["x-should-retry"] == "false"
    assert int(r.headers["retry-after"]) > 0
