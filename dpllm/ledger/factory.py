"""Open the configured ledger from its URL: one place that knows the backends.

``settings.ledger`` is a file path or ``sqlite:///path`` (the embedded SQLite
ledger) or a ``postgresql://`` URL (the shared ledger of several replicas,
:class:`~dpllm.ledger.postgres.PostgresLedger`; needs psycopg). Callers (the server, the CLI) go through :func:`open_ledger` so a new
backend is one branch here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, runtime_checkable

from dpllm.errors import ConfigError
from dpllm.ledger.base import (
    AuditEvent,
    Balance,
    ChargeRecord,
    Ledger,
    PendingRequest,
    PoolSpec,
)
from dpllm.release import Cost
from dpllm.windows import Window

__all__ = ["ManagedLedger", "ensure_pools", "ledger_kind", "open_ledger"]

# A URL scheme: letters, digits, "+", "-", "." before a colon, at least two characters
# (so a Windows drive "C:" is a path). Matched on ASCII only, the whole scheme.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]+):", re.ASCII)
_POSTGRES = ("postgresql://", "postgres://")


@runtime_checkable
class ManagedLedger(Ledger, Protocol):
    """A :class:`Ledger` with the approval queue and local-DP charges (what the server uses)."""

    def pending(self, *, status: str | None = "pending") -> Sequence[PendingRequest]: ...

    def approve(
        self, ticket: str, *, approver: str = "admin", from_pool: str | None = None
    ) -> PendingRequest: ...

    def deny(self, ticket: str, *, approver: str = "admin", reason: str = "") -> PendingRequest: ...

    def balance(self, pool: str, window: Window | str) -> Balance: ...

    def pools(self) -> list[PoolSpec]: ...

    def history(self, *, limit: int | None = None) -> Sequence[AuditEvent]: ...

    def record_local(
        self, *, user: str, window: Window | str, metric: str, cost: Cost, analyst: str = "ldp"
    ) -> None: ...

    def local_spent(self, user: str, window: Window | str) -> Cost: ...

    def local_worst_case(self) -> Cost: ...

    def balances(self) -> list[Balance]: ...

    def lifetime_spent(self, pool: str) -> int: ...

    def delta_lifetime_spent(self, pool: str) -> int: ...

    def unreleased(self) -> list[ChargeRecord]: ...

    def run_lock(self, key: str) -> AbstractContextManager[None]: ...

    def close(self) -> None: ...


def ledger_kind(url: str) -> str:
    """``"postgresql"`` or ``"sqlite"`` for a ledger URL, without opening it.

    Raises:
        ConfigError: an empty URL, or a scheme other than ``sqlite:///``,
            ``postgresql://`` and ``postgres://`` (never read as a file name).
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigError("the ledger URL is empty; use a file path or postgresql://…",
                          field="ledger.url")  # fmt: skip
    if url.startswith(_POSTGRES):
        return "postgresql"
    if url.startswith("sqlite:///"):
        return "sqlite"
    m = _SCHEME.match(url)
    if m is not None or "://" in url:
        scheme = m.group(1) if m is not None else url.split("://", 1)[0]
        raise ConfigError(
            f"unknown ledger URL scheme {scheme + ':'!r} in {_redact(url)!r}; use a file path, "
            "sqlite:///path or postgresql://user@host:port/db",
            field="ledger.url",
        )
    return "sqlite"


def _redact(url: str) -> str:
    """``url`` with any password replaced (for error messages)."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


def open_ledger(url: str, *, base_dir: str | Path = ".", create: bool = True) -> ManagedLedger:
    """The ledger at ``url``: the one place a ledger URL becomes a backend.

    Args:
        url: a path, ``sqlite:///relative/path`` or ``sqlite:////absolute/path`` (SQLite), or ``postgresql://…`` /
            ``postgres://…`` (the shared ledger of several replicas).
        base_dir: relative SQLite paths are resolved against it (the config's folder).
        create: create a missing SQLite file (and its folder); ``False`` for
            commands that only read (``dpllm budget show``). A PostgreSQL
            database must exist; its tables are created on first use.

    Raises:
        ConfigError: an unknown scheme (never a file named like a URL), or a
            backend that is not installed.
        LedgerUnavailable: the database cannot be opened (or, with
            ``create=False``, the SQLite file does not exist).

    .. versionchanged:: unreleased
        ``create``; any ``scheme:`` other than ``sqlite:///`` and
        ``postgresql://`` is refused (``postgresql:/x`` was a file name).
    """
    if ledger_kind(url) == "postgresql":
        # psycopg is the [postgres] extra: without it this raises MissingExtra (a
        # ConfigError) naming `pip install "dpllm[postgres]"`.
        from dpllm.ledger.postgres import PostgresLedger

        ledger: ManagedLedger = PostgresLedger(url)
        return ledger
    from dpllm.ledger.sqlite import SQLiteLedger

    path = Path(url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url)
    # As SQLAlchemy reads it: sqlite:///rel.db is relative, sqlite:////abs/x.db absolute.
    if not path.is_absolute():
        path = Path(base_dir) / path
    return SQLiteLedger(path, create=create)


def ensure_pools(ledger: Ledger, pools: Sequence[PoolSpec]) -> None:
    """Create or update ``pools`` in ``ledger``, parents before children."""
    done: set[str] = set()
    names = {p.name for p in pools}
    remaining = list(pools)
    while remaining:
        ready = [
            p for p in remaining if p.parent is None or p.parent in done or p.parent not in names
        ]
        if not ready:
            raise ConfigError("the pools' parent chain has a cycle", field="pools")
        for p in ready:
            ledger.ensure_pool(p)
            done.add(p.name)
        remaining = [p for p in remaining if p.name not in done]
