"""docs/operations.md and examples/ops/: the walkthrough runs as written, the scheduler
examples parse and call the weekly job the way the guide says."""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dpllm.cli import app

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "operations.md"
OPS = ROOT / "examples" / "ops"


def _weekly_options() -> set[str]:
    help_text = CliRunner().invoke(app, ["weekly", "--help"]).output
    return set(re.findall(r"--[a-z][a-z-]+", help_text)) | {"-c"}


def test_the_cronjob_manifest_is_valid_yaml_and_runs_the_weekly_job() -> None:
    doc = yaml.safe_load((OPS / "weekly-cronjob.yaml").read_text("utf-8"))
    assert doc["apiVersion"] == "batch/v1" and doc["kind"] == "CronJob"
    spec = doc["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    assert len(spec["schedule"].split()) == 5
    job = spec["jobTemplate"]["spec"]
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    args = container["args"]
    assert args[0] == "weekly" and "--last-complete" in args
    assert {a for a in args if a.startswith("-")} <= _weekly_options()
    env = {e["name"]: e for e in container["env"]}
    assert env["DPLLM_LEDGER"]["valueFrom"]["secretKeyRef"]["key"] == "url"
    # The no-retry exit codes are the budget and config codes of the CLI.
    (rule,) = job["podFailurePolicy"]["rules"]
    assert rule["onExitCodes"]["values"] == [2, 3]
    mounts = {m["name"] for m in container["volumeMounts"]}
    assert mounts == {v["name"] for v in pod["volumes"]}


def test_the_systemd_units_parse_and_run_the_weekly_job() -> None:
    service = configparser.ConfigParser(strict=False, interpolation=None)
    service.read_string((OPS / "dpllm-weekly.service").read_text("utf-8"))
    command = shlex.split(service["Service"]["ExecStart"])
    assert command[1:3] == ["weekly", "--last-complete"]
    assert service["Service"]["Type"] == "oneshot"
    timer = configparser.ConfigParser(strict=False, interpolation=None)
    timer.read_string((OPS / "dpllm-weekly.timer").read_text("utf-8"))
    assert timer["Timer"]["OnCalendar"].startswith("Mon ")
    assert timer["Timer"]["Persistent"] == "true"


def test_the_crontab_runs_the_weekly_job_weekly() -> None:
    jobs = [
        line
        for line in (OPS / "crontab").read_text("utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#") and "=" not in line.split()[0]
    ]
    assert len(jobs) == 1
    fields = jobs[0].split(None, 5)
    assert fields[4] == "1" and "dpllm weekly --last-complete" in fields[5]
    assert "%" not in fields[5]  # cron would turn it into a newline


def _walkthrough() -> str:
    text = DOC.read_text("utf-8")
    block = text.split("<!-- walkthrough -->", 1)[1]
    m = re.search(r"```bash\n(.*?)```", block, re.DOTALL)
    assert m is not None
    return m.group(1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.slow
def test_the_replicated_walkthrough_runs_as_written(tmp_path: Path, pg_dsn: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "dpllm"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m dpllm "$@"\n', encoding="utf-8")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    work = tmp_path / "site"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPLLM_", "OPENAI_"))}
    env.update(
        PATH=f"{bin_dir}:{env['PATH']}",
        PYTHONPATH=str(ROOT),
        LEDGER=pg_dsn,
        PORT_A=str(_free_port()),
        PORT_B=str(_free_port()),
    )
    proc = subprocess.run(
        ["bash", "-c", _walkthrough()], cwd=work, env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = " ".join(proc.stdout.split())
    assert "the run would charge ε = 1.6 and fits" in out  # the dry run
    assert "charged ε = 1.6 for 5 new release(s)" in out  # the run
    assert "spent nothing" in out  # the rerun
    a = json.loads((work / "a.json").read_text())
    b = json.loads((work / "b.json").read_text())
    assert a["pools"] == b["pools"]  # both replicas: one budget
    (weekly,) = [p for p in a["pools"] if p["pool"] == "weekly"]
    assert weekly["micro"] == {"spent": 1_600_000, "remaining": 200_000,
                               "lifetime_spent": 1_600_000}  # fmt: skip
    assert "ε 0.2" in out and "ε 1.6" in out  # and `dpllm budget show` says the same
    assert not any(p.name.startswith("postgres") for p in work.rglob("*"))
