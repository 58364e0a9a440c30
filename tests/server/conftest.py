"""A live ``dpllm serve`` on loopback (uvicorn in a thread) with a fake upstream, real
Presidio, a real SQLite ledger and demo data."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dpllm.config import ServerLimits, Settings, hash_api_key
from dpllm.redact import Redactor
from dpllm.release import Release
from dpllm.testing import FakeOpenAIServer
from dpllm.testing.releases import fake_release

KEYS = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789", "admin": "key-admin-012345"}
WEEK = "2026-W47"


def release(name: str, value: float, lo: float, hi: float, kind: str, unit: str) -> Release:
    return fake_release(name, value, lo, hi, kind=kind, unit=unit, window=None)


RESPONSES = release("responses", 160.0, 150.0, 170.0, "count", "responses")


@pytest.fixture(scope="session")
def redactor() -> Redactor:
    """One Presidio redactor per session (loading spaCy takes seconds)."""
    return Redactor()


def config_text(
    upstream: str, *, timeout: float = 5.0, extra: str = "", max_retries: int = 0
) -> str:
    h = {name: hash_api_key(k) for name, k in KEYS.items()}
    return f"""
ledger = {{ url = "ledger.db" }}

[data]
path = "demo.db"
dataset_id = "demo"
[data.columns]
timestamp = "ts"

[plan]
pool = "weekly"
[plan.queries]
feedback_count = 0.2
mean_rating = 0.3
active_users = 0.2

[model]
provider = "openai"
base_url = "{upstream}"
api_key = "upstream-secret"
model = "fake-model"
timeout = {timeout}
max_retries = {max_retries}
max_attempts = 3

[[pools]]
name = "global"
window_cap = 10.0
lifetime_cap = 50.0
[[pools]]
name = "weekly"
window_cap = 1.0
parent = "global"
[[pools]]
name = "tiny"
window_cap = 0.05
[[pools]]
name = "queued"
window_cap = 0.05
on_exceed = "queue"
[[pools]]
name = "reserve"
window_cap = 5.0
[[pools]]
name = "team"
window_cap = 1.0

[[server.keys]]
hash = "{h["alice"]}"
analyst = "alice"
pools = ["weekly", "tiny", "queued"]
[[server.keys]]
hash = "{h["bob"]}"
analyst = "bob"
pools = ["team"]
[[server.keys]]
hash = "{h["admin"]}"
analyst = "root"
pools = ["weekly"]
admin = true
{extra}
"""


class LiveServer:
    """uvicorn serving an app on a free loopback port, in a background thread."""

    def __init__(self, app: object, limits: ServerLimits | None = None) -> None:
        import uvicorn

        from dpllm.server.protocol import uvicorn_options

        with socket.socket() as probe:  # a free port; uvicorn binds it itself
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            access_log=False,
            ws="none",
            lifespan="on",
            **uvicorn_options(limits or ServerLimits()),  # as `dpllm serve` runs it
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            self.thread.join(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@dataclass
class Proxy:
    url: str
    upstream: FakeOpenAIServer
    settings: Settings
    ledger_path: Path

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def headers(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {KEYS[who]}"}


def make_settings(
    root: Path, upstream: str, *, timeout: float = 5.0, extra: str = "", max_retries: int = 0
) -> Settings:
    from dpllm.data.demo import generate_demo, write_demo

    if not (root / "demo.db").exists():
        write_demo(generate_demo(users=150, weeks=2, seed=3), root / "demo.db")
    text = config_text(upstream, timeout=timeout, extra=extra, max_retries=max_retries)
    return Settings.parse(text, base_dir=str(root))


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, redactor: Redactor) -> Iterator[Proxy]:
    """A live proxy for the module, its fake upstream, ledger and demo data."""
    from dpllm.server import create_app

    root = tmp_path_factory.mktemp("proxy")
    with FakeOpenAIServer() as upstream:
        settings = make_settings(root, upstream.base_url, timeout=1.0)
        app = create_app(settings, redactor=redactor)
        with LiveServer(app) as live:
            yield Proxy(live.url, upstream, settings, root / "ledger.db")
