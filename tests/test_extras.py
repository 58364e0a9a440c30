"""A feature whose extra is not installed raises MissingExtra naming the pip command.

The missing module is simulated by ``sys.modules[name] = None``, which makes
``import name`` raise ``ModuleNotFoundError`` exactly as on an install without it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import dpllm
from dpllm._extras import EXTRAS, require
from dpllm.errors import ConfigError, DPLLMError, MissingExtra


def _missing(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def _forget(monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    """Drop ``prefix`` and its submodules from sys.modules (restored after the test)."""
    for name in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
        monkeypatch.delitem(sys.modules, name)


def test_require_returns_the_module_when_installed() -> None:
    import json

    assert require("json", extra="charts", feature="x") is json


def test_require_names_the_extra_and_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing(monkeypatch, "duckdb")
    with pytest.raises(MissingExtra) as info:
        require("duckdb", extra="duckdb", feature="DuckDB data sources")
    err = info.value
    assert str(err) == (
        "DuckDB data sources: the optional package 'duckdb' is not installed; "
        'install it with: pip install "dpllm[duckdb]"'
    )
    assert (err.module, err.extra) == ("duckdb", "duckdb")
    # One of dpllm's errors, and still what a caller catching ImportError expects.
    assert isinstance(err, DPLLMError)
    assert isinstance(err, ConfigError)  # the CLI's config/usage exit code
    assert isinstance(err, ImportError)


def test_require_of_a_submodule(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both: an earlier test may have imported matplotlib.figure, which would be found
    # in sys.modules without looking at its parent.
    _missing(monkeypatch, "matplotlib", "matplotlib.figure")
    with pytest.raises(
        MissingExtra, match=r"'matplotlib\.figure' .* pip install \"dpllm\[charts\]\""
    ):
        require("matplotlib.figure", extra="charts", feature="charts")


def test_unknown_extra_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown extra"):
        require("json", extra="nope", feature="x")


def test_every_extra_is_declared_in_pyproject() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[1]
    declared = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    assert set(EXTRAS) <= set(declared)
    assert set(declared["all"][0].partition("[")[2].rstrip("]").split(",")) == set(EXTRAS)


def test_duckdb_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _missing(monkeypatch, "duckdb")
    with pytest.raises(MissingExtra, match=r'pip install "dpllm\[duckdb\]"'):
        dpllm.DuckDBEngine(tmp_path / "feedback.parquet")


def test_postgres_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing(monkeypatch, "psycopg")
    with pytest.raises(MissingExtra, match=r'pip install "dpllm\[postgres\]"'):
        dpllm.PostgresEngine("postgresql://nobody@127.0.0.1:1/none")


def test_postgres_ledger_through_the_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    _forget(monkeypatch, "dpllm.ledger.postgres")
    _missing(monkeypatch, "psycopg")
    with pytest.raises(MissingExtra, match=r'pip install "dpllm\[postgres\]"') as info:
        dpllm.open_ledger("postgresql://nobody@127.0.0.1:1/none")
    assert isinstance(info.value, ConfigError)  # the CLI's config/usage exit code


def test_server(monkeypatch: pytest.MonkeyPatch) -> None:
    _forget(monkeypatch, "dpllm.server")
    _missing(monkeypatch, "fastapi")
    with pytest.raises(MissingExtra, match=r'pip install "dpllm\[server\]"'):
        import dpllm.server  # noqa: F401


def test_ldp_ingest(monkeypatch: pytest.MonkeyPatch) -> None:
    _forget(monkeypatch, "dpllm.ldp.ingest")
    _missing(monkeypatch, "fastapi")
    with pytest.raises(MissingExtra, match=r'pip install "dpllm\[server\]"'):
        import dpllm.ldp.ingest  # noqa: F401


def test_weekly_charts(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpllm.testing.releases import fake_release
    from dpllm.weekly.charts import histogram_png

    _missing(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtra, match=r'pip install "dpllm\[charts\]"'):
        histogram_png(fake_release("rating_histogram", 10, 5, 15), week="2026-W47")


def test_dpllm_serve_without_the_server_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from dpllm.cli import app

    _forget(monkeypatch, "dpllm.server")
    _missing(monkeypatch, "uvicorn", "fastapi")
    result = CliRunner().invoke(app, ["serve", "--config", "missing.toml"])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert 'pip install "dpllm[server]"' in result.output
