"""Fixtures of the data tests: one SparkSession for the whole test session.

A JVM takes seconds to start, so the Spark tests share one ``local[2]`` session.
Without PySpark or Java the Spark tests skip on a laptop and fail in CI
(``CI=true``), like the PostgreSQL ones.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest


def _spark_unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Spark is required in CI but {reason}")
    pytest.skip(f"Spark not available: {reason}")


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """A ``local[2]`` SparkSession, started once (skips locally, fails in CI)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        _spark_unavailable("PySpark is not installed (pip install 'dpllm[spark]')")
    java = shutil.which("java") or (
        os.path.join(os.environ["JAVA_HOME"], "bin", "java") if "JAVA_HOME" in os.environ else None
    )
    if java is None:
        _spark_unavailable("no java on PATH and no JAVA_HOME (Spark needs Java 17)")
    probe = subprocess.run([str(java), "-version"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        _spark_unavailable(f"`java -version` failed: {probe.stderr.strip()[:200]}")
    from dpllm.data.spark import spark_session as build

    session = build(
        {
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "1g",
            "spark.log.level": "ERROR",
        },
        app_name="dpllm-tests",
    )
    try:
        yield session
    finally:
        session.stop()
