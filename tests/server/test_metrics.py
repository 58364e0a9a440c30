"""``/metrics`` (Prometheus text: counts by route, entity, rule and pool, never text) and
``/healthz`` (the ledger read, the upstream probed and the probe cached)."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dpllm.redact import Redactor
from dpllm.server.health import UpstreamProbe
from dpllm.server.metrics import Metrics
from dpllm.testing import FakeOpenAIServer
from tests.server.conftest import RESPONSES, LiveServer, Proxy, make_settings

PHONE = "13812345678"


@pytest.fixture()
def fresh(tmp_path: Path, redactor: Redactor) -> Iterator[Proxy]:
    from dpllm.server import create_app

    with FakeOpenAIServer() as upstream:
        settings = make_settings(tmp_path, upstream.base_url)
        with LiveServer(create_app(settings, redactor=redactor)) as live:
            yield Proxy(live.url, upstream, settings, tmp_path / "ledger.db")


def value(text: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert match, f"{series} not in:\n{text}"
    return float(match.group(1))


def test_metrics_count_without_a_word_of_text(fresh: Proxy) -> None:
    chat = fresh.base_url + "/chat/completions"
    alice = fresh.headers("alice")
    fresh.upstream.enqueue(f"Call Emily Clark on {PHONE}.")
    r = httpx.post(chat, json={"messages": [{"role": "user", "content": "hi"}]}, headers=alice)
    assert r.status_code == 200 and PHONE not in r.text
    fresh.upstream.enqueue("This week we received 157 responses.")  # over-precise
    fresh.upstream.enqueue("This week we received about 160 responses.")
    body = {"messages": [{"role": "user", "content": "hi"}]}
    body["dpllm"] = {"releases": [RESPONSES.to_dict()]}  # type: ignore[assignment]
    assert httpx.post(chat, json=body, headers=alice).status_code == 200
    fresh.upstream.enqueue_error(500)
    assert httpx.post(chat, json={"messages": [{"role": "user", "content": "x"}]}, headers=alice)
    stats = fresh.base_url + "/stats/feedback_count"
    assert (
        httpx.get(stats, params={"pool": "weekly", "week": "2026-W47"}, headers=alice).status_code
        == 200
    )
    refused = httpx.get(
        fresh.base_url + "/stats/mean_rating",
        params={"pool": "tiny", "week": "2026-W47"},
        headers=alice,
    )
    assert refused.status_code == 429

    r = httpx.get(fresh.url + "/metrics", headers=fresh.headers("admin"))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = r.text
    ok_chat = 'dpllm_http_requests_total{method="POST",route="/v1/chat/completions",status="200"}'
    assert value(text, ok_chat) == 2
    assert value(text, 'dpllm_redactions_total{entity="PHONE_NUMBER"}') >= 1
    assert value(text, 'dpllm_guard_violations_total{rule="over-precise"}') == 1
    assert value(text, 'dpllm_upstream_errors_total{error="ModelBadResponse"}') == 1
    assert value(text, 'dpllm_budget_charges_total{pool="weekly"}') == 1
    assert value(text, 'dpllm_budget_refusals_total{pool="tiny",reason="exceeded"}') == 1
    route = 'route="/v1/stats/{query}"'
    assert value(text, f"dpllm_http_request_duration_seconds_count{{{route}}}") == 2
    assert value(text, f'dpllm_http_request_duration_seconds_bucket{{{route},le="+Inf"}}') == 2
    for secret in (PHONE, "Emily", "Clark", "157", "hi"):
        assert not re.search(rf"\b{secret}\b", text), secret


def test_metrics_need_an_admin_key(fresh: Proxy) -> None:
    assert httpx.get(fresh.url + "/metrics").status_code == 401
    assert httpx.get(fresh.url + "/metrics", headers=fresh.headers("alice")).status_code == 403


def test_the_text_format_escapes_label_values() -> None:
    metrics = Metrics()
    metrics.inc("dpllm_budget_charges_total", pool='we"ird\\pool\n')
    assert 'dpllm_budget_charges_total{pool="we\\"ird\\\\pool\\n"} 1' in metrics.render()
    with pytest.raises(KeyError):
        metrics.inc("dpllm_made_up_total")


# -- health ------------------------------------------------------------------------------


def test_health_reports_a_reachable_upstream(fresh: Proxy) -> None:
    r = httpx.get(fresh.url + "/healthz")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"
    assert r.json()["ledger"] == "ok" and r.json()["upstream"] == "ok"
    assert any(req.path.endswith("/models") for req in fresh.upstream.requests)


def test_health_reports_an_unreachable_upstream(tmp_path: Path, redactor: Redactor) -> None:
    from dpllm.server import create_app

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens once closed
    settings = make_settings(tmp_path, f"http://127.0.0.1:{port}/v1")
    with LiveServer(create_app(settings, redactor=redactor)) as live:
        r = httpx.get(live.url + "/healthz", timeout=30)
    assert r.status_code == 200  # statistics still work
    assert r.json()["status"] == "degraded" and r.json()["upstream"] == "unreachable"


def test_the_probe_is_cached() -> None:
    now = [100.0]
    calls = []

    async def probe() -> None:
        calls.append(now[0])
        if len(calls) == 2:
            raise ConnectionError("down")

    checker = UpstreamProbe(probe, ttl=15.0, clock=lambda: now[0])

    async def run() -> list[tuple[str, float | None]]:
        out = [await checker.status()]
        now[0] += 10
        out.append(await checker.status())  # cached
        now[0] += 10
        out.append(await checker.status())  # probed again: down
        return out

    assert asyncio.run(run()) == [("ok", 0.0), ("ok", 10.0), ("unreachable", 0.0)]
    assert len(calls) == 2
    assert asyncio.run(UpstreamProbe(None).status()) == ("not_configured", None)
