"""Open the configured ledger from its URL: one place that knows the backends.

``settings.ledger`` is a file path or ``sqlite:///path`` (the embedded SQLite
ledger) or a ``postgresql://`` URL (the shared ledger of several replicas,
:class:`~dpllm.ledger.postgres.PostgresLedger`; needs psycopg). Callers (the server, the CLI) go through :func:`open_ledger` so a new
backend is one branch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from dpllm.errors import ConfigError
from dpllm.ledger.base import AuditEvent, Balance, Ledger, PendingRequest, PoolSpec
from dpllm.release import Cost
from dpllm.windows import Window

__all__ = ["ManagedLedger", "ensure_pools", "open_ledger"]


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


def open_ledger(url: str, *, base_dir: str | Path = ".") -> ManagedLedger:
    """The ledger at ``url``.

    Args:
        url: a path, ``sqlite:///path``, or ``postgresql://…``.
        base_dir: relative SQLite paths are resolved against it (the config's folder).

    Raises:
        ConfigError: an unknown scheme, or a backend that is not installed.
        LedgerUnavailable: the database cannot be opened.
    """
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from dpllm.ledger.postgres import PostgresLedger
        except ImportError as exc:  # psycopg is an optional dependency
            raise ConfigError(
                f"a postgresql:// ledger needs psycopg ({exc}); install psycopg[binary] "
                "or use a SQLite path",
                field="ledger.url",
            ) from exc
        ledger: ManagedLedger = PostgresLedger(url)
        return ledger
    path_text = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
    if "://" in path_text:
        raise ConfigError(
            f"unknown ledger URL scheme in {url!r}; use a file path or postgresql://",
            field="ledger.url",
        )
    from dpllm.ledger.sqlite import SQLiteLedger

    path = Path(path_text)
    if not path.is_absolute():
        path = Path(base_dir) / path
    return SQLiteLedger(path)


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
