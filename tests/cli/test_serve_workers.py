"""``dpllm serve --workers 2`` runs two processes that serve the same app and ledger."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from dpllm.config import hash_api_key


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_workers_serve_and_share_the_ledger(tmp_path: Path) -> None:
    config = tmp_path / "dpllm.toml"
    config.write_text(
        f"""
[ledger]
url = "{tmp_path / "ledger.db"}"

[redaction]
enabled = false

[[server.keys]]
hash = "{hash_api_key("key-worker-test")}"
analyst = "alice"
pools = ["weekly"]
""",
        "utf-8",
    )
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DPLLM_"))}
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dpllm",
            "serve",
            "--config",
            str(config),
            "--port",
            str(port),
            "--workers",
            "2",
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (tmp_path / "serve.log").read_text("utf-8")
            time.sleep(0.1)
        else:
            raise AssertionError("the workers never answered /healthz")
        headers = {"Authorization": "Bearer key-worker-test"}
        answers = {
            httpx.get(url + "/v1/budget", headers=headers, timeout=5).status_code for _ in range(8)
        }
        assert answers == {200}
        # two worker processes under the uvicorn supervisor
        children = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        assert len(children) >= 2
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
