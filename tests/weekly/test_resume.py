"""An interrupted weekly run is resumed by running it again, at whatever point it stopped.

The job is stopped at many points of its flow — before and after every call into the
ledger (each charge entered and left, ``data_read``, ``store``), the data engine, the
redactor, the model step and the report writing — by an in-process
``KeyboardInterrupt`` (what SIGINT raises) or crash, and at a few points by
``SIGKILL`` of a subprocess running the job. After each stop the same run is started
again on the same ledger, and must finish with the week's total spend equal to the
plan's cost: what the stopped run paid is taken over (never charged twice), what it
refunded is charged once, and the budget check never counts the run's own paid
charges (the week is not blocked by its own run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dpllm.weekly.job as job_module
from dpllm.config import Settings
from dpllm.data.demo import DemoData
from dpllm.data.engines import SQLiteEngine
from dpllm.ledger.base import ChargeStatus
from dpllm.ledger.sqlite import SQLiteLedger
from dpllm.weekly.job import WeeklyJob
from dpllm.weekly.report import write_report
from dpllm.weekly.wiring import _NoRedaction, build_plan
from tests.weekly.faults import Faults, crash, interrupt
from tests.weekly.helpers import WEEK, make_demo, settings_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DemoData]:
    return make_demo(tmp_path_factory.mktemp("demo-resume"))


def _settings(root: Path, db: Path) -> Settings:
    return settings_for(root, db, redaction_enabled=False)


def _plan_cost(settings: Settings) -> int:
    return sum(q.cost.micro for q in build_plan(settings).values())


def _run_job(settings: Settings, faults: Faults, monkeypatch: pytest.MonkeyPatch) -> None:
    """One weekly run (statistics → model step → report files) with every call counted."""
    real_generate = job_module.generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        faults.tick("model:before")
        result = real_generate(*args, **kwargs)
        faults.tick("model:after")
        return result

    monkeypatch.setattr(job_module, "generate", generate)
    ledger = SQLiteLedger(settings.resolve(settings.ledger))
    engine = SQLiteEngine(settings.resolve(settings.data.path))
    try:
        with WeeklyJob(
            settings,
            ledger=faults.wrap(ledger, "ledger"),
            engine=faults.wrap(engine, "engine"),
            redactor=faults.wrap(_NoRedaction(), "redactor"),
        ) as job:
            report = job.run(WEEK)
            faults.tick("report:before")
            write_report(report, settings.resolve(settings.output_dir) / WEEK)
            faults.tick("report:after")
    finally:
        ledger.close()
        engine.close()


def _assert_complete(settings: Settings) -> None:
    """The week is released in full and its spend is exactly the plan's cost."""
    ledger = SQLiteLedger(settings.resolve(settings.ledger))
    try:
        cost = _plan_cost(settings)
        for pool in ("weekly", "global"):
            assert ledger.balance(pool, WEEK).spent == cost, pool
        assert [r for r in ledger.unreleased() if r.window == WEEK] == []
        released = {r.name for r in ledger.releases(window=WEEK)}
        assert released == {q.name for q in settings.plan}
    finally:
        ledger.close()
    assert (settings.resolve(settings.output_dir) / WEEK / "report.json").is_file()


def _count_points(tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    settings = _settings(tmp_path / "count", db)
    faults = Faults()
    _run_job(settings, faults, monkeypatch)
    _assert_complete(settings)
    return faults.points


def _points(tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return _count_points(tmp_path, db, monkeypatch)


def _spread(n: int, k: int) -> list[int]:
    """``k`` distinct 1-based points spread over ``1..n``, both ends included."""
    if n <= k:
        return list(range(1, n + 1))
    return sorted({1 + round(i * (n - 1) / (k - 1)) for i in range(k)})


# Points inside the statistics step take a KeyboardInterrupt (an Exception raised
# there after the data was read would close the query id: a data-dependent failure
# is not retried, by design — see dpllm.ledger.base). Once every release is stored,
# a plain crash is as good as an interrupt.
def _action_for(point: str) -> Callable[[str], None]:
    return crash if point.startswith(("model:", "redactor.", "report:")) else interrupt


def test_a_clean_run_has_many_points(
    tmp_path: Path, demo: tuple[Path, DemoData], monkeypatch: pytest.MonkeyPatch
) -> None:
    points = _points(tmp_path, demo[0], monkeypatch)
    assert len(points) >= 40
    for needed in ("charge.data_read:before", "charge.store:after", "engine.fetch:before",
                   "ledger.charging:entered", "ledger.charging_many:entered",
                   "ledger.store_many:after", "model:before", "report:after"):  # fmt: skip
        assert needed in points, needed


def test_every_interrupted_run_resumes_to_exactly_the_plans_cost(
    tmp_path: Path, demo: tuple[Path, DemoData], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _ = demo
    points = _points(tmp_path, db, monkeypatch)
    chosen = _spread(len(points), 24)
    assert len(chosen) >= 20
    seen_paid = 0
    for at in chosen:
        settings = _settings(tmp_path / f"at{at}", db)
        point = points[at - 1]
        faults = Faults(at, _action_for(point))
        with pytest.raises((KeyboardInterrupt, RuntimeError)):
            _run_job(settings, faults, monkeypatch)
        assert faults.points[-1] == point  # stopped where intended (the run is deterministic)
        ledger = SQLiteLedger(settings.resolve(settings.ledger))
        try:
            paid = [r for r in ledger.unreleased() if r.status is not ChargeStatus.FAILED]
            assert not [r for r in ledger.unreleased() if r.status is ChargeStatus.FAILED]
            seen_paid += bool(paid)
            created = {spec.name for spec in ledger.pools()}
            spent_before = ledger.balance("weekly", WEEK).spent if "weekly" in created else 0
        finally:
            ledger.close()
        assert spent_before <= _plan_cost(settings)
        _run_job(settings, Faults(), monkeypatch)  # the same command, again
        _assert_complete(settings)
    # Some stops left charges paid but not released, which the reruns took over.
    assert seen_paid >= 3


_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import pytest

    from tests.weekly.faults import Faults, kill9
    from tests.weekly.helpers import settings_for
    from tests.weekly.test_resume import _run_job

    root, db, at = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    settings = settings_for(root, db, redaction_enabled=False)
    with pytest.MonkeyPatch.context() as mp:
        _run_job(settings, Faults(at, kill9), mp)
    print("finished without being killed")
    """
)


@pytest.mark.parametrize(
    "point",
    [
        "ledger.charging_many:entered",  # the plan's shared batch: all paid, nothing read
        "charge.data_read:after",
        "ledger.store_many:before",  # read, none of the batch stored
        "ledger.charging:entered",  # the topic query, charged on its own after the batch
        "model:before",
    ],
)
def test_kill_9_of_a_subprocess_is_resumed(
    tmp_path: Path, demo: tuple[Path, DemoData], monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    db, _ = demo
    points = _points(tmp_path, db, monkeypatch)
    at = points.index(point) + 1
    root = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), str(db), str(at)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stdout + proc.stderr
    settings = _settings(root, db)
    ledger = SQLiteLedger(settings.resolve(settings.ledger))
    try:
        left = [r for r in ledger.unreleased() if r.window == WEEK]
        if point != "model:before":
            # The dead process held a charge: its owner is gone, so the rerun takes it over.
            assert left and all(r.owner is not None for r in left[:1])
    finally:
        ledger.close()
    _run_job(settings, Faults(), monkeypatch)
    _assert_complete(settings)
