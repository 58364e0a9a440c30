"""The weekly summary job: one command turns a week of feedback into a report.

``job`` (the run), ``wiring`` (the pieces a run is built from), ``report`` (files on disk),
``charts`` (matplotlib figures).
"""

from __future__ import annotations

from dpllm.weekly.job import WeeklyJob, WeeklyReport, run_weekly

__all__ = ["WeeklyJob", "WeeklyReport", "run_weekly"]
