"""No head-of-line blocking: one request stuck in redaction does not hold up the others.

The redactor blocks on a text holding ``HEAVY`` until the test lets it go: small
requests sent meanwhile must all be answered, by the pool's other thread(s). With
the old single protection thread per process they would wait for the heavy one
(and fail here at the client timeout). No timing is asserted.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from dpllm.server.state import protect_workers
from dpllm.testing import FakeOpenAIServer
from tests.server.conftest import LiveServer, Proxy, make_settings


class GatedRedactor:
    """Changes nothing; blocks on any text holding ``HEAVY`` until ``release`` is set."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.seen: list[str] = []

    def _pass(self, text: str) -> Any:
        self.seen.append(text)
        if "HEAVY" in text:
            self.entered.set()
            self.release.wait(60)
        return SimpleNamespace(text=text, counts={})

    def redact(self, text: str, *, language: str = "auto", allow: Collection[str] = ()) -> Any:
        return self._pass(text)

    def pseudonymise(
        self, text: str, *, vault: Any, language: str = "auto", allow: Collection[str] = ()
    ) -> Any:
        return self._pass(text)


@pytest.fixture()
def gated(tmp_path: Path) -> Iterator[tuple[Proxy, GatedRedactor]]:
    from dpllm.server import create_app

    redactor = GatedRedactor()
    with FakeOpenAIServer() as upstream:
        upstream.enqueue("Fine.", times=50)
        settings = make_settings(tmp_path, upstream.base_url, timeout=30.0)
        app = create_app(settings, redactor=redactor)
        with LiveServer(app) as live:
            try:
                yield Proxy(live.url, upstream, settings, tmp_path / "ledger.db"), redactor
            finally:
                redactor.release.set()


def test_the_pool_has_a_thread_per_core_and_at_least_two() -> None:
    assert protect_workers(0) >= 2
    assert protect_workers(3) == 3


def test_small_requests_are_served_while_a_heavy_one_is_redacted(
    gated: tuple[Proxy, GatedRedactor],
) -> None:
    proxy, redactor = gated
    url = proxy.base_url + "/chat/completions"
    heavy: dict[str, Any] = {}

    def send_heavy() -> None:
        body = {"messages": [{"role": "user", "content": "HEAVY work"}]}
        heavy["r"] = httpx.post(url, json=body, headers=proxy.headers("alice"), timeout=60)

    thread = threading.Thread(target=send_heavy)
    thread.start()
    assert redactor.entered.wait(30), "the heavy request never reached the redactor"
    for i in range(5):
        body = {"messages": [{"role": "user", "content": f"small {i}"}]}
        r = httpx.post(url, json=body, headers=proxy.headers("bob"), timeout=20)
        assert r.status_code == 200, r.text
        assert not redactor.release.is_set()  # the heavy one is still held
    assert "r" not in heavy
    redactor.release.set()
    thread.join(60)
    assert heavy["r"].status_code == 200, heavy["r"].text


def test_an_abandoned_request_stops_its_redaction(tmp_path: Path) -> None:
    """A client that leaves while its request is being redacted does not keep a pool
    thread busy to the end: the texts after the one in hand are never redacted (one
    client could otherwise hold every thread by sending heavy requests and leaving)."""
    from dpllm.server import create_app

    redactor = GatedRedactor()
    with FakeOpenAIServer() as upstream:
        settings = make_settings(tmp_path, upstream.base_url, timeout=30.0)
        app = create_app(settings, redactor=redactor)
        state = app.state.dpllm
        with LiveServer(app) as live:
            proxy = Proxy(live.url, upstream, settings, tmp_path / "ledger.db")
            try:
                messages = [{"role": "user", "content": "HEAVY work"}]
                messages += [{"role": "user", "content": f"after {i}"} for i in range(20)]
                with pytest.raises(httpx.TimeoutException):  # the client gives up and leaves
                    httpx.post(
                        proxy.base_url + "/chat/completions",
                        json={"messages": messages},
                        headers=proxy.headers("alice"),
                        timeout=1.0,
                    )
                assert redactor.entered.is_set()
                for _ in range(600):  # until the server has seen the client go
                    if "dpllm_client_disconnects_total 1" in state.metrics.render():
                        break
                    threading.Event().wait(0.05)
                else:
                    pytest.fail("the server never saw the client disconnect")
            finally:
                redactor.release.set()
            state.protect_executor.shutdown(wait=True)  # the held job has ended
    assert not [t for t in redactor.seen if t.startswith("after")]
    assert upstream.completion_requests == []
