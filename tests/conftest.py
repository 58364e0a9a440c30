"""Shared fixtures: a clean environment, and a throwaway PostgreSQL database."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

PG_ADMIN_DSN = os.environ.get(
    "DPLLM_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No DPLLM_* or OPENAI_* variable of the developer's shell leaks into a test."""
    for key in list(os.environ):
        if key.startswith(("DPLLM_", "OPENAI_")):
            monkeypatch.delenv(key, raising=False)


def _pg_unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL is required in CI but {reason}")
    pytest.skip(f"PostgreSQL not available: {reason}")


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The admin DSN of a reachable PostgreSQL server (skips locally, fails in CI)."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover
        _pg_unavailable("psycopg is not installed")
    try:
        with psycopg.connect(PG_ADMIN_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means "not available"
        _pg_unavailable(f"cannot connect to {PG_ADMIN_DSN}: {exc}")
    return PG_ADMIN_DSN


@pytest.fixture
def pg_dsn(pg_server: str) -> Iterator[str]:
    """A fresh, empty database for one test; dropped afterwards."""
    import psycopg

    name = f"dpllm_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = pg_server.rsplit("/", 1)[0] + f"/{name}"
    try:
        yield dsn
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
