"""≥ 1,000 spellings of two data weeks through every entry point: one window per data week.

The CLI (``dpllm stats`` and ``dpllm weekly`` through Typer's runner), the HTTP
server (the FastAPI app in-process) and the Python API (``WeeklyJob``,
``StatsRunner``, ``run_weekly``) each get every spelling. Only the canonical
``YYYY-Www`` is accepted; everything else is a usage error (exit 2), a 400 or an
:class:`~dpllm.errors.InvalidWindow` — never a 500 or a traceback — and the
ledger ends with exactly one window, charged once, per data week.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import click.testing
import pytest
import typer
from fastapi.testclient import TestClient

from dpllm.chat.wrapper import NoRedaction
from dpllm.cli import app as cli_app
from dpllm.config import Settings, hash_api_key
from dpllm.data.demo import generate_demo, write_demo
from dpllm.errors import InvalidWindow
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.weekly.job import WeeklyJob, run_weekly
from dpllm.windows import Window
from tests.test_windows import UNICODE_ZEROS, spellings, unicode_digits

DATA_WEEKS = ("2024-W09", "2024-W10")
TODAY = dt.date(2024, 6, 3)
KEY = "key-alice-0123456789"

CONFIG = f"""
[data]
path = "demo.db"
dataset_id = "demo"
[ledger]
url = "ledger.db"
[[pools]]
name = "global"
window_cap = 10.0
[[pools]]
name = "weekly"
parent = "global"
window_cap = 5.0
[plan]
pool = "weekly"
[plan.queries]
feedback_count = 0.2
active_users = 0.2
mean_rating = 0.5
rating_histogram = 0.4
[redaction]
enabled = false
[[server.keys]]
hash = "{hash_api_key(KEY)}"
analyst = "alice"
pools = ["weekly"]
"""


def _mutate(key: str, rng: random.Random) -> str:
    """One to three random changes that keep the week recognisable to a human."""
    text = key
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(4)
        if kind == 0:
            text = unicode_digits(text, rng.choice(UNICODE_ZEROS), rng)
        elif kind == 1:
            text += rng.choice(["\n", " ", "\t", "\r\n", "\u3000", "\u2028", "\x0b"])
        elif kind == 2:
            text = text.replace("-", rng.choice(["", " ", "_", "/", "–", "−", "‐", "--"]), 1)
        else:
            text = text.replace("W", rng.choice(["w", "Ｗ", "ｗ", "W0", " W", "W "]), 1)
    return text


def all_spellings(count: int = 1_000) -> list[str]:
    rng = random.Random(20261201)
    out: set[str] = set()
    for key in DATA_WEEKS:
        out.update(spellings(key, rng))
    while len(out) < count:
        out.add(_mutate(rng.choice(DATA_WEEKS), rng))
    out -= set(DATA_WEEKS)
    # The canonical keys too, several times each: accepted, charged once.
    return sorted(out) + list(DATA_WEEKS) * 3


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("edges")
    write_demo(generate_demo(users=40, weeks=2, seed=5, end_week=DATA_WEEKS[-1]), root / "demo.db")
    (root / "dpllm.toml").write_text(CONFIG, encoding="utf-8")
    return root


def _windows(root: Path) -> dict[str, int]:
    ledger = SQLiteLedger(root / "ledger.db", create=False)
    try:
        return {b.window: b.spent for b in ledger.balances() if b.pool == "weekly"}
    finally:
        ledger.close()


def test_a_thousand_spellings_through_cli_http_and_python(root: Path) -> None:
    texts = all_spellings()
    assert len(set(texts)) >= 1_000
    settings = Settings.load(root / "dpllm.toml")

    # -- Python -----------------------------------------------------------------------------
    python_ok: set[str] = set()
    with WeeklyJob(settings, today=TODAY) as job:
        for text in texts:
            try:
                releases = job.release(text, {"feedback_count": job.plan["feedback_count"]})
            except InvalidWindow:
                with pytest.raises(InvalidWindow):
                    run_weekly(settings, text, today=TODAY)  # refused before anything is built
                continue
            python_ok.add(releases["feedback_count"].window or "")
            assert text == Window.parse(text).key
    assert python_ok == set(DATA_WEEKS)

    # -- HTTP (the app in-process) ----------------------------------------------------------
    from dpllm.server import create_app

    app = create_app(settings, redactor=NoRedaction(), today=lambda: TODAY)
    statuses: dict[int, int] = {}
    http_ok: set[str] = set()
    with TestClient(app, raise_server_exceptions=False) as client:
        headers = {"Authorization": f"Bearer {KEY}"}
        for text in texts:
            r = client.get("/v1/stats/feedback_count", params={"week": text}, headers=headers)
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            if r.status_code == 200:
                http_ok.add(r.json()["week"])
                assert r.json()["cached"] is True  # Python released it: same query id
                assert text in DATA_WEEKS
            else:
                assert r.status_code == 400, (text, r.text)
            b = client.get("/v1/budget", params={"week": text}, headers=headers)
            assert b.status_code == (200 if text in DATA_WEEKS else 400), (text, b.text)
    assert http_ok == set(DATA_WEEKS)
    assert set(statuses) == {200, 400}

    # -- CLI (Typer's runner, in-process) ---------------------------------------------------
    runner = click.testing.CliRunner()
    command = typer.main.get_command(cli_app)  # built once: Typer rebuilds it per invoke
    config = str(root / "dpllm.toml")
    for i, text in enumerate(texts):
        args = ["stats", "-c", config, "--week", text, "--query", "feedback_count", "--json"]
        result = runner.invoke(command, args)
        expected = 0 if text in DATA_WEEKS else 2
        assert result.exit_code == expected, (text, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), text
        if i % 20 == 0 and text not in DATA_WEEKS:  # the weekly job's --week, on a sample
            weekly = runner.invoke(command, ["weekly", "-c", config, "--week", text])
            assert weekly.exit_code == 2, (text, weekly.output)

    # -- the ledger: one window per data week, charged once ---------------------------------
    assert _windows(root) == {w: 200_000 for w in DATA_WEEKS}
