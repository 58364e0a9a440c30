"""Run locks: one process at a time runs a job (the weekly job of one week) on a ledger.

Two schedulers (two cron hosts, a CronJob whose previous pod still runs) must not run
the same week at once. The ledger already makes that *safe* — a query id is charged
at most once, a live owner is waited for — but not *tidy*: the second run would wait
on the first one's charges and then write a second copy of the report. The run lock
makes the second one stop at once with :class:`~dpllm.errors.RunLocked`, before it
reads or charges anything.

Both backends use a lock the operating system or the server drops when its holder
dies, so a ``kill -9`` never leaves a week locked (no lease to wait out):

* **PostgreSQL** — a session-level advisory lock (``pg_try_advisory_lock``) on a
  connection of its own, held for the run; the server releases it when that session
  ends, however it ends. The lock's key is a 64-bit hash of the run's key, in the
  ``dpllm-run:`` namespace.
* **SQLite** — an exclusive ``flock`` on a file beside the ledger
  (``ledger.db.locks/<key>.lock``); the kernel releases it when the holder's file
  descriptor closes, which includes its death. (A lock *row* in the ledger would need
  a lease: a dead holder's row stays until the lease runs out.)

Each lock file (or the lock's connection's ``application_name``) names its holder
(host and pid), so the error can say who holds the week.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dpllm.errors import LedgerUnavailable, RunLocked

__all__ = [
    "advisory_key",
    "advisory_lock",
    "file_lock",
    "holder_text",
    "lock_file_name",
]


def holder_text() -> str:
    """``host pid N``: who holds a lock (written where the other side can read it)."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def advisory_key(key: str) -> int:
    """The signed 64-bit PostgreSQL advisory-lock key of a run key (stable across hosts)."""
    digest = hashlib.sha256(f"dpllm-run:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def lock_file_name(key: str) -> str:
    """A file name for ``key``: its readable part plus a hash (distinct keys, distinct files)."""
    readable = re.sub(r"[^A-Za-z0-9_.\-]", "_", key, flags=re.ASCII)[:80]
    return f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.lock"


def _locked(key: str, holder: str) -> RunLocked:
    who = holder.strip() or "another process"
    return RunLocked(
        f"the run {key!r} is already running ({who}); nothing was done. Wait for it to "
        "finish (its report will be written), or, if that process is gone, run again: "
        "the lock is released when its holder exits, however it exits",
        key=key,
    )


@contextmanager
def file_lock(folder: Path, key: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``folder/<key>.lock`` (SQLite ledgers).

    Raises:
        RunLocked: another open file description holds it (another process, or
            another lock in this one).
        LedgerUnavailable: the lock file cannot be created.
    """
    import fcntl

    path = folder / lock_file_name(key)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise LedgerUnavailable(f"cannot create the run lock {path}: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _locked(key, os.pread(fd, 200, 0).decode("utf-8", "replace")) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder_text().encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def advisory_lock(url: str, key: str, *, connect_timeout: int = 5) -> Iterator[None]:
    """Hold a PostgreSQL session advisory lock for ``key`` on a connection of its own.

    The connection's ``application_name`` names the holder, so a refused caller can
    say who holds the lock. Closing the session releases the lock in any case; it is
    unlocked first so that a pooler keeping server sessions (pgbouncer in session
    mode) does not keep it.

    Raises:
        RunLocked: another session holds ``key``.
        LedgerUnavailable: the server cannot be reached, or the lock query failed.
    """
    import psycopg

    lock_id = advisory_key(key)
    try:
        conn = psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=connect_timeout,
            application_name=f"dpllm-run {holder_text()}"[:63],
        )
    except psycopg.OperationalError as exc:
        where = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)
        raise LedgerUnavailable(
            f"cannot reach the PostgreSQL ledger at {where}: {str(exc).strip()}"
        ) from exc
    try:
        try:
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_id,)).fetchone()
            holder = None
            if not (got and got[0]):
                row = conn.execute(
                    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a "
                    "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                    "AND l.classid::bigint = %s AND l.objid::bigint = %s LIMIT 1",
                    ((lock_id >> 32) & 0xFFFFFFFF, lock_id & 0xFFFFFFFF),
                ).fetchone()
                holder = str(row[0]).removeprefix("dpllm-run ") if row else ""
        except psycopg.Error as exc:
            raise LedgerUnavailable(
                f"the PostgreSQL ledger's run lock failed: {str(exc).strip()}"
            ) from exc
        if holder is not None:
            raise _locked(key, holder)
        yield
        with contextlib.suppress(psycopg.Error):
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock_id,))
    finally:
        conn.close()
