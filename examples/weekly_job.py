"""The weekly summary job built in Python: demo data → DP releases → redacted, guarded report.

Run it from the repository root (it writes into ./weekly-example/)::

    .venv/bin/python examples/weekly_job.py

The same pipeline as ``dpllm weekly``, step by step: load the config, make the
demo data, run the job (charging the ledger once for the week; a second run is
served from the release cache and spends nothing), then write report.md,
report.json and the charts.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dpllm.config import Settings
from dpllm.data.demo import DEMO_COURSES, DEMO_END_WEEK, generate_demo, write_demo
from dpllm.weekly.job import run_weekly
from dpllm.weekly.report import describe_source, write_report
from dpllm.weekly.wiring import build_redactor

HERE = Path(__file__).resolve().parent


def main(folder: Path = Path("weekly-example")) -> None:
    folder.mkdir(exist_ok=True)
    # The commented config that `dpllm init` writes, read from this folder's copy.
    settings = Settings.load(HERE / "dpllm.toml")
    settings = dataclasses.replace(
        settings,
        base_dir=str(folder.resolve()),  # data, ledger and reports live in `folder`
        data=dataclasses.replace(settings.data, path="demo.db"),
    )
    if not (folder / "demo.db").exists():
        write_demo(generate_demo(users=800, weeks=2), folder / "demo.db")

    redactor = build_redactor(settings)  # Presidio + spaCy + jieba: build once, reuse
    for run in ("first run", "rerun"):
        report = run_weekly(settings, DEMO_END_WEEK, courses=DEMO_COURSES, redactor=redactor)
        spent = report.spent.describe() if report.fresh else "nothing (cached releases)"
        print(f"{run}: charged {spent}; text from {describe_source(report)}")

    written = write_report(report, settings.resolve(settings.output_dir) / report.week)
    print(report.text)
    for name, path in written.items():
        print(f"wrote {name}: {path}")


if __name__ == "__main__":
    main()
