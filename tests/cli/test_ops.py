"""Operations: either ledger and one configuration from every command, dry runs, run locks,
signals. PostgreSQL tests use the real server (``pg_dsn``; they fail, not skip, in CI)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpllm.cli import app
from dpllm.cli._common import find_config, load_settings
from dpllm.config import Settings
from dpllm.data.demo import DemoData
from dpllm.errors import ConfigError, RunLocked
from dpllm.ledger.factory import ledger_kind, open_ledger
from dpllm.testing import FakeOpenAIServer
from dpllm.weekly.wiring import _NoRedaction, build_plan
from tests.weekly.helpers import WEEK, demo_config, make_demo

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DemoData]:
    return make_demo(tmp_path_factory.mktemp("demo-ops"))


@pytest.fixture(autouse=True)
def no_presidio(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about operations, not redaction: skip loading spaCy."""
    monkeypatch.setattr("dpllm.weekly.job.build_redactor", lambda settings: _NoRedaction())


def write_config(folder: Path, db: Path, *, ledger: str = "ledger.db", extra: str = "") -> Path:
    return demo_config(folder, db, ledger=ledger, redaction=False, extra=extra)


def plan_cost(config: Path) -> int:
    return sum(q.cost.micro for q in build_plan(Settings.load(config)).values())


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=env)
    return result.exit_code, result.output


def invoke_json(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Like :func:`invoke`, stdout only (progress lines go to stderr)."""
    result = runner.invoke(app, list(args), env=env)
    return result.exit_code, result.stdout


# -- a ledger URL is a backend, never a file named like a URL --------------------------
@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("ledger.db", "sqlite"),
        ("/abs/ledger.db", "sqlite"),
        ("sqlite:///rel.db", "sqlite"),
        ("sqlite:////abs/l.db", "sqlite"),
        ("C:\\ledgers\\l.db", "sqlite"),
        ("postgresql://postgres@127.0.0.1:5432/db", "postgresql"),
        ("postgres://u:p@h/db", "postgresql"),
    ],
)
def test_ledger_kind(url: str, kind: str) -> None:
    assert ledger_kind(url) == kind


@pytest.mark.parametrize(
    "url",
    [
        "postgresql:/postgres@127.0.0.1:5432/db",  # one slash: was a file ./postgresql:/…
        "mysql://root@h/db",
        "redis://h:6379",
        "sqlite://rel.db",
        "sqlite:rel.db",
        "file:///tmp/l.db",
        "",
    ],
)
def test_unknown_schemes_are_config_errors_and_create_nothing(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        open_ledger(url, base_dir=tmp_path)
    assert info.value.field == "ledger.url"
    assert list(tmp_path.iterdir()) == []


def test_a_url_shaped_dpllm_ledger_is_refused_by_stats(
    tmp_path: Path, demo: tuple[Path, DemoData], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"DPLLM_LEDGER": "postgresql:/postgres@127.0.0.1:5432/db"}
    code, out = invoke("stats", "--data", str(demo[0]), "--week", WEEK, env=env)
    assert code == 2 and "unknown ledger URL scheme" in out
    assert list(tmp_path.iterdir()) == []  # no ./postgresql:/… file


# -- one configuration -------------------------------------------------------------------
def test_config_is_found_here_then_in_dpllm_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    (there / "other.toml").write_text('[ledger]\nurl = "there.db"\n', encoding="utf-8")
    env = {"DPLLM_CONFIG": str(there / "other.toml")}
    assert find_config(None, cwd=here, environ={}) is None
    assert find_config(None, cwd=here, environ=env) == there / "other.toml"
    assert load_settings(None, cwd=here, environ=env).resolve("there.db") == there / "there.db"
    (here / "dpllm.toml").write_text('[ledger]\nurl = "here.db"\n', encoding="utf-8")
    assert find_config(None, cwd=here, environ=env) == here / "dpllm.toml"
    assert find_config(Path("x.toml"), cwd=here, environ=env) == Path("x.toml")
    # $DPLLM_LEDGER beats the file; --ledger beats both (relative to the working dir).
    s = load_settings(None, cwd=here, environ={"DPLLM_LEDGER": "env.db"})
    assert s.ledger == "env.db"
    s = load_settings(None, cwd=here, environ={"DPLLM_LEDGER": "env.db"}, ledger="flag.db")
    assert s.ledger == str(here / "flag.db")


def test_every_command_reads_the_found_config(
    tmp_path: Path, demo: tuple[Path, DemoData], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path / "site", demo[0], ledger="state/ledger.db")
    monkeypatch.chdir(tmp_path / "site")
    code, out = invoke("weekly", "--week", WEEK)  # ./dpllm.toml, no -c
    assert code == 0, out
    assert (tmp_path / "site" / "state" / "ledger.db").is_file()
    # stats, budget and plan read the same file: the same ledger, pools and query ids.
    code, out = invoke_json("stats", "--week", WEEK, "--json")
    assert code == 0, out
    payload = json.loads(out)
    assert payload["budget"]["spent_micro"] == plan_cost(config)  # all cached: no new charge
    report = json.loads((tmp_path / "site" / "reports" / WEEK / "report.json").read_text())
    assert (
        payload["releases"]["mean_rating"]["values"] == report["releases"]["mean_rating"]["values"]
    )
    code, out = invoke("budget", "show", "--window", WEEK)
    assert code == 0 and "weekly" in out and "state/ledger.db" in out
    code, out = invoke("plan", "--week", WEEK)
    assert code == 0 and "has ε 0.2 left in 2026-W47" in out and "does NOT fit" in out
    # From elsewhere, $DPLLM_CONFIG names it.
    monkeypatch.chdir(tmp_path)
    code, out = invoke("budget", "history", env={"DPLLM_CONFIG": str(config)})
    assert code == 0 and "release" in out


# -- PostgreSQL from every command ---------------------------------------------------------
def test_every_command_runs_on_a_postgresql_ledger(
    tmp_path: Path, demo: tuple[Path, DemoData], pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, demo[0], ledger=pg_dsn)
    monkeypatch.chdir(tmp_path)
    code, out = invoke("weekly", "-c", str(config), "--week", WEEK, "--dry-run")
    assert code == 0, out
    code, out = invoke("weekly", "-c", str(config), "--week", WEEK)
    assert code == 0, out
    assert "charged ε = 1.6 for 5 new release(s)" in out
    code, out = invoke("budget", "show", "--ledger", pg_dsn, "--window", WEEK)
    assert code == 0 and "ε 1.6" in out and "postgresql://" in out
    code, out = invoke_json("budget", "history", "-c", str(config), "--json")
    assert code == 0 and sum(e["event"] == "release" for e in json.loads(out)) == 5
    # stats via $DPLLM_LEDGER: the same query ids, so everything comes from the cache.
    code, out = invoke_json("stats", "-c", str(config), "--week", WEEK, "--json",
                            env={"DPLLM_LEDGER": pg_dsn})  # fmt: skip
    assert code == 0, out
    assert json.loads(out)["budget"]["spent_micro"] == plan_cost(config)
    code, out = invoke("plan", "-c", str(config), "--week", WEEK)
    assert code == 0 and "has ε 0.2 left" in out
    code, out = invoke("budget", "pending", "--ledger", pg_dsn)
    assert code == 0 and "No requests" in out
    assert not any(p.name.startswith("postgres") for p in tmp_path.rglob("*"))


def test_an_unreachable_postgresql_ledger_exits_4(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    config = write_config(tmp_path, demo[0], ledger="postgresql://postgres@127.0.0.1:1/nope")
    code, out = invoke("weekly", "-c", str(config), "--week", WEEK)
    assert code == 4 and "cannot reach the PostgreSQL ledger" in out


# -- dry runs spend nothing ----------------------------------------------------------------
def _ledger_state(url: str, base: Path) -> tuple[object, ...]:
    ledger = open_ledger(url, base_dir=base, create=False)
    try:
        return (
            [(e.event, e.pool, e.query_id, e.micro) for e in ledger.history()],
            ledger.balances(),
            ledger.unreleased(),
            [r.fingerprint for r in ledger.releases()],
        )
    finally:
        ledger.close()


def test_dry_run_prints_costs_intervals_and_balances_and_spends_nothing(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    config = write_config(tmp_path, demo[0])
    # A first real run of an earlier week, so the ledger exists and has history.
    code, out = invoke("weekly", "-c", str(config), "--week", "2026-W46")
    assert code == 0, out
    before = _ledger_state("ledger.db", tmp_path)
    code, out = invoke("weekly", "-c", str(config), "--week", WEEK, "--dry-run")
    assert code == 0, out
    flat = " ".join(out.split())
    assert "mean_rating" in flat and "ε = 0.5" in flat and "would be charged" in flat
    assert "expected 95% ±" in flat and "lint clean" in flat
    assert "ε 1.8" in flat and "ε 0.2" in flat  # weekly: 1.8 now, 0.2 after
    assert "the run would charge ε = 1.6 and fits" in flat
    code, out = invoke("stats", "-c", str(config), "--week", WEEK, "--dry-run")
    assert code == 0 and "would be charged" in out
    assert _ledger_state("ledger.db", tmp_path) == before
    assert not (tmp_path / "reports" / WEEK).exists()
    # After the run, a dry run shows everything stored and free.
    assert invoke("weekly", "-c", str(config), "--week", WEEK)[0] == 0
    code, out = invoke("weekly", "-c", str(config), "--week", WEEK, "--dry-run")
    assert code == 0 and "stored: free" in out and "would charge ε = 0 " in " ".join(out.split())


def test_dry_run_of_a_plan_that_does_not_fit_exits_3(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    config = write_config(tmp_path, demo[0])
    config.write_text(config.read_text().replace("window_cap = 1.8", "window_cap = 1.0"))
    code, out = invoke("weekly", "-c", str(config), "--week", WEEK, "--dry-run")
    assert code == 3 and "does NOT fit" in out
    assert not (tmp_path / "ledger.db").exists() or _ledger_state("ledger.db", tmp_path)[0] == []


# -- run locks -------------------------------------------------------------------------------
def _hold_lock_and_run(url: str, base: Path, config: Path) -> tuple[int, str]:
    ledger = open_ledger(url, base_dir=base)
    key = f"weekly:feedback:weekly:{WEEK}"
    try:
        with ledger.run_lock(key):
            with pytest.raises(RunLocked):
                with open_ledger(url, base_dir=base).run_lock(key):
                    pass
            return invoke("weekly", "-c", str(config), "--week", WEEK)
    finally:
        ledger.close()


def test_two_runs_of_one_week_do_not_overlap_sqlite(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    config = write_config(tmp_path, demo[0])
    code, out = _hold_lock_and_run("ledger.db", tmp_path, config)
    assert code == 4 and "already running" in out and f"pid {os.getpid()}" in out
    assert _ledger_state("ledger.db", tmp_path)[2] == []  # nothing charged
    assert invoke("weekly", "-c", str(config), "--week", WEEK)[0] == 0  # released after


def test_two_runs_of_one_week_do_not_overlap_postgresql(
    tmp_path: Path, demo: tuple[Path, DemoData], pg_dsn: str
) -> None:
    config = write_config(tmp_path, demo[0], ledger=pg_dsn)
    code, out = _hold_lock_and_run(pg_dsn, tmp_path, config)
    assert code == 4 and "already running" in out and f"pid {os.getpid()}" in out
    assert invoke("weekly", "-c", str(config), "--week", WEEK)[0] == 0


_HOLDER = """
import sys, time
from dpllm.ledger.factory import open_ledger
with open_ledger(sys.argv[1], base_dir=sys.argv[2]).run_lock(sys.argv[3]):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_killed_holder_releases_the_lock(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("pg_dsn") if backend == "postgresql" else "ledger.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, url, str(tmp_path), "k"],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        ledger = open_ledger(url, base_dir=tmp_path)
        with pytest.raises(RunLocked):
            with ledger.run_lock("k"):
                pass
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        for _ in range(200):  # the server notices the dead session on its own schedule
            try:
                with ledger.run_lock("k"):
                    break
            except RunLocked:
                time.sleep(0.05)
        else:
            pytest.fail("the lock of a killed holder was never released")
        ledger.close()
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


# -- signals: what was kept, how to resume -----------------------------------------------------
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_run_says_what_was_kept_and_the_rerun_finishes(
    tmp_path: Path, demo: tuple[Path, DemoData], sig: int, code: int
) -> None:
    with FakeOpenAIServer() as srv:
        srv.enqueue("slow", delay=60)
        extra = f'\n[model]\nprovider = "openai"\nbase_url = "{srv.base_url}"\nmax_retries = 0\n'
        text = write_config(tmp_path, demo[0]).read_text()
        text = text[: text.index("[model]")] + extra.lstrip() + text[text.index("[redaction]") :]
        config = tmp_path / "dpllm.toml"
        config.write_text(text, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "dpllm", "weekly", "-c", str(config), "--week", WEEK],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
            # A test run started in the background inherits SIGINT ignored; the child
            # must see it as a terminal's Ctrl-C does.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        try:
            while not srv.completion_requests and proc.poll() is None:
                time.sleep(0.05)  # waits for the model call to begin (no timing asserted)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
    flat = " ".join(err.split())
    assert proc.returncode == code, err
    assert "Kept: 5 release(s) stored" in flat and "Resume with: dpllm weekly -c" in flat
    assert f"--week {WEEK}" in flat
    # The rerun (offline now) finishes; the week cost exactly the plan.
    config.write_text(write_config(tmp_path, demo[0]).read_text(), encoding="utf-8")
    assert invoke("weekly", "-c", str(config), "--week", WEEK)[0] == 0
    ledger = open_ledger("ledger.db", base_dir=tmp_path)
    assert ledger.balance("weekly", WEEK).spent == plan_cost(config)
    ledger.close()


# -- approvals for a whole run, through the command line -------------------------------------
def test_a_queued_run_is_approved_once_from_the_command_line(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    reserve = '\n[[pools]]\nname = "reserve"\nparent = "global"\nwindow_cap = 2.0\n'
    config = write_config(tmp_path, demo[0], extra=reserve)
    text = config.read_text().replace('on_exceed = "refuse"', 'on_exceed = "queue"')
    config.write_text(text.replace("window_cap = 1.8", "window_cap = 1.0"))
    code, out = invoke("weekly", "-c", str(config), "--week", WEEK)
    flat = " ".join(out.split())
    assert code == 3 and "approval needed:" in flat and "mean_rating" in flat
    ticket = flat.split("ticket ", 1)[1].split()[0]
    code, out = invoke("budget", "pending", "-c", str(config))
    assert code == 0 and out.count(ticket) == 1 and "topic_counts" in out
    code, out = invoke("budget", "approve", ticket, "--from", "reserve", "-c", str(config))
    assert code == 0 and "approved" in out
    code, out = invoke("weekly", "-c", str(config), "--week", WEEK)
    assert code == 0 and "resumed 5 release(s)" in " ".join(out.split())
    ledger = open_ledger("ledger.db", base_dir=tmp_path)
    try:
        assert ledger.balance("weekly", WEEK).spent == plan_cost(config)
        assert ledger.pending(status=None)[0].status == "used"
    finally:
        ledger.close()


def test_dry_run_lints_the_templates_and_exits_1_on_a_finding(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    import shutil

    mine = tmp_path / "prompts" / "weekly"
    shutil.copytree(ROOT / "prompts" / "weekly", mine)
    user = mine / "user.en.j2"
    user.write_text(user.read_text("utf-8") + "\nRaw: {{ mean_rating }}\n", encoding="utf-8")
    config = write_config(tmp_path, demo[0])
    text = config.read_text().replace("dirs = []", f'dirs = ["{tmp_path / "prompts"}"]')
    config.write_text(text)
    code, out = invoke("weekly", "-c", str(config), "--week", WEEK, "--dry-run")
    assert code == 1 and "user.en.j2" in out and "lint finding" in out
    assert not (tmp_path / "reports").exists()


def test_the_resume_command_repeats_the_runs_options(tmp_path: Path) -> None:
    from dpllm.cli.weekly import _resume_command

    cmd = _resume_command(
        tmp_path / "my config.toml", WEEK, demo=False, ledger="postgresql://h/db",
        out=tmp_path / "out", lang="zh",
    )  # fmt: skip
    assert cmd == (
        f"dpllm weekly -c '{tmp_path / 'my config.toml'}' --ledger postgresql://h/db "
        f"--out {tmp_path / 'out'} --lang zh --week {WEEK}"
    )


def test_a_dry_run_speaks_json_when_asked(
    tmp_path: Path, demo: tuple[Path, DemoData], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, demo[0])
    monkeypatch.chdir(tmp_path)
    code, out = invoke_json("weekly", "-c", str(config), "--week", WEEK, "--dry-run", "--json")
    assert code == 0, out
    plan = json.loads(out)  # stdout is one JSON document, nothing else
    assert plan["week"] == WEEK and plan["fits"] is True and plan["charged_nothing"] is True
    assert {q["state"] for q in plan["queries"]} == {"new"}
    assert all(p["remaining_after"] <= p["remaining_now"] for p in plan["pools"])
    assert not (tmp_path / "reports").exists()


def test_a_demo_dry_run_prices_the_trend_weeks_too(
    tmp_path: Path, demo: tuple[Path, DemoData]
) -> None:
    """``weekly --demo`` also releases the trend figures of the 7 weeks before: the dry run
    shows what they would charge, and leaves out weeks already stored."""
    from dpllm.cli._dryrun import TREND_QUERIES, trend_to_pay
    from dpllm.weekly.job import WeeklyJob
    from dpllm.windows import Window
    from tests.weekly.helpers import settings_for

    settings = settings_for(tmp_path, demo[0])
    week = Window.parse(WEEK)
    with WeeklyJob(settings) as job:
        per_week = sum(job.plan[n].cost.micro for n in TREND_QUERIES)
        before = trend_to_pay(job, week)
        assert list(before) == [w.key for w in week.previous(8)[:-1]]
        assert {c.micro for c in before.values()} == {per_week}
        stored = ["2026-W41", "2026-W45"]
        job.release_weeks(stored, {n: job.plan[n] for n in TREND_QUERIES})
        after = trend_to_pay(job, week)
    assert set(after) == set(before) - set(stored)


def test_a_plan_without_the_trend_queries_prices_no_trend_week(
    tmp_path: Path, demo: tuple[Path, DemoData], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trend pricing reads only the plan's own trend queries: with none, nothing."""
    import dpllm.cli._dryrun as dryrun
    from dpllm.weekly.job import WeeklyJob
    from dpllm.windows import Window
    from tests.weekly.helpers import settings_for

    monkeypatch.setattr(dryrun, "TREND_QUERIES", ("no_such_query",))
    with WeeklyJob(settings_for(tmp_path, demo[0])) as job:
        assert dryrun.trend_plan(job) == {}
        assert dryrun.trend_to_pay(job, Window.parse(WEEK)) == {}
