"""The embedded ledger: one SQLite file, safe for many processes at once.

Durability and atomicity come from SQLite itself: WAL journal,
``synchronous=FULL`` (a commit is on disk before it returns), ``BEGIN
IMMEDIATE`` (a charge takes the write lock before it reads the balances, so no
two writers interleave) and a busy timeout (writers queue rather than fail).
Each process — and each thread — opens its own connection; a forked child never
uses its parent's.

A charge is one transaction: a conditional ``UPDATE`` per pool on the path
(window cap, then lifetime cap; see :mod:`dpllm.ledger.sql`), the charge row
keyed by the query id, one ``charge_parts`` row per pool and an audit line. If
any pool refuses, the transaction rolls back to a savepoint and commits only
the refusal's audit line (or the approval ticket when the pool queues).

The semantics — order of a release, cache, refunds, leases and takeover after
a crash, pools and windows — are those of :mod:`dpllm.ledger.base`.
"""

from __future__ import annotations

from dpllm.ledger._sql_ledger import SQLCharge, SQLLedger
from dpllm.ledger._sqlite_base import (
    DEFAULT_BUSY_SECONDS,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_WAIT_SECONDS,
    SQLiteBase,
)

__all__ = [
    "DEFAULT_BUSY_SECONDS",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_WAIT_SECONDS",
    "SQLiteCharge",
    "SQLiteLedger",
]

SQLiteCharge = SQLCharge
"""The handle :meth:`SQLiteLedger.charging` yields (the same class on every backend)."""


class SQLiteLedger(SQLiteBase, SQLLedger):
    """A persistent, atomic privacy-budget ledger in one SQLite file.

    Args:
        path: the database file; its directory is created when ``create``.
        create: create the file when missing (``False``: it must exist).
        lease_seconds: an in-progress charge whose owner has not stored within
            this time may be taken over by a retry (see the module docstring).
        wait_seconds: how long a caller waits for a concurrent charge of the
            same query id before :class:`~dpllm.errors.ChargeInProgress`.
        busy_seconds: SQLite busy timeout for the write lock.
        clock: POSIX-time source for the audit log and leases (tests inject one).

    Raises:
        LedgerUnavailable: the file cannot be opened or written.
        LedgerError: the schema is newer than this dpllm, or damaged.

    Privacy: enforces every pool's per-window cap (ε or ρ per user per window)
    and lifetime cap (per user over all windows) on every charge.
    """
