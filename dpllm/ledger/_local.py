"""Local-DP charges: the ε each user spent on randomised reports, kept in the ledger.

A local-DP report (:mod:`dpllm.ldp.ingest`) costs its *user* the ε of their own
randomiser; nothing is charged to a central pool. The ledger keeps one row per
(metric, window, user) — the primary key makes a second report of the same
user, metric and window impossible, under any concurrency — and an
``ldp_report`` audit line. The user is never stored in clear: rows and audit
lines hold ``h:<hex>`` = HMAC-SHA256(ledger key, user), truncated to 128 bits,
where the ledger key is 256 random bits created once per ledger (in the
``ledger_secrets`` table). Whoever reads the audit log (``dpllm budget history
--json``) cannot link its lines to a user id without that key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import TYPE_CHECKING

from dpllm.errors import DuplicateReport, InvalidPrivacyParameter
from dpllm.ledger import _rows
from dpllm.release import Cost, Measure
from dpllm.windows import Window

if TYPE_CHECKING:
    from dpllm.ledger._sql_base import Conn, SQLBase

__all__ = ["local_spent", "local_worst_case", "record_local"]

_KEY_NAME = "local_user_key"
INSERT_SECRET = """
INSERT INTO ledger_secrets (name, value) VALUES (:name, :value) ON CONFLICT (name) DO NOTHING
"""
SELECT_SECRET = "SELECT value FROM ledger_secrets WHERE name = :name"
INSERT_LOCAL = """
INSERT INTO local_reports (metric, window_key, user_key, measure, micro, analyst, created_at)
VALUES (:metric, :window, :user_key, :measure, :micro, :analyst, :now)
ON CONFLICT (metric, window_key, user_key) DO NOTHING
"""
SELECT_LOCAL_SPENT = """
SELECT COALESCE(SUM(micro), 0) FROM local_reports WHERE user_key = :user_key AND window_key = :window
"""


def _key(ledger: SQLBase, conn: Conn) -> bytes:
    cached: bytes | None = getattr(ledger, "_local_key", None)
    if cached is not None:
        return cached
    row = conn.execute(SELECT_SECRET, {"name": _KEY_NAME}).fetchone()
    if row is None:
        # Inside a write transaction only (record_local). Not cached: this transaction
        # may still roll back, and another process would then create another key.
        conn.execute(INSERT_SECRET, {"name": _KEY_NAME, "value": secrets.token_hex(32)})
        row = conn.execute(SELECT_SECRET, {"name": _KEY_NAME}).fetchone()
        return bytes.fromhex(row[0])
    key = bytes.fromhex(row[0])
    ledger._local_key = key  # type: ignore[attr-defined]
    return key


def _user_key(key: bytes, user: str) -> str:
    return "h:" + hmac.new(key, user.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def _check_user(user: object) -> str:
    if not isinstance(user, str) or not user or len(user) > 512:
        raise InvalidPrivacyParameter(
            f"user must be a non-empty string of ≤ 512 characters, got {type(user).__name__}"
        )
    return user


def record_local(
    ledger: SQLBase, *, user: str, window: Window | str, metric: str, cost: Cost, analyst: str
) -> None:
    """Record that ``user`` spent ``cost`` (local ε) on one report of ``metric`` in ``window``.

    Raises:
        DuplicateReport: this user already has a report of this metric in this
            window (nothing recorded; the first stands).
        InvalidPrivacyParameter: an empty user or metric, or a cost that is not a
            positive pure ε. DataError: a malformed window key.
    """
    _check_user(user)
    window = _rows.check_request(query_id=metric, window=window, cost=cost, analyst=analyst)
    if cost.measure is not Measure.PURE or cost.micro <= 0:
        raise InvalidPrivacyParameter(
            f"a local-DP report costs a positive pure ε (Cost.pure(...)), got {cost.describe()}"
        )
    with ledger._tx() as conn:
        user_key = _user_key(_key(ledger, conn), user)
        cur = conn.execute(
            INSERT_LOCAL,
            {"metric": metric, "window": window, "user_key": user_key, "measure": "pure",
             "micro": cost.micro, "analyst": analyst, "now": ledger._now_text()},
        )  # fmt: skip
        if cur.rowcount != 1:
            raise DuplicateReport(
                f"user {user_key} already reported {metric!r} in {window}; only one report "
                "per user per metric per window counts (nothing was recorded)"
            )
        ledger._audit(
            conn, "ldp_report", analyst=analyst, pool="", window=window, query_id=user_key,
            micro=cost.micro, detail=f"pure; metric={metric}; local ε of user {user_key}",
        )  # fmt: skip


def local_spent(ledger: SQLBase, user: str, window: Window | str) -> Cost:
    """The local ε ``user`` spent in ``window``, summed over metrics (exact micro-units)."""
    _check_user(user)
    window = _rows.check_request(query_id="-", window=window, cost=Cost.zero(), analyst="-")
    with ledger._read() as conn:
        row = conn.execute(SELECT_SECRET, {"name": _KEY_NAME}).fetchone()
        if row is None:
            return Cost.zero()  # no report was ever recorded
        user_key = _user_key(bytes.fromhex(row[0]), user)
        (micro,) = conn.execute(
            SELECT_LOCAL_SPENT, {"user_key": user_key, "window": window}
        ).fetchone()
    return Cost(Measure.PURE, int(micro))


SELECT_LOCAL_WORST = """
SELECT COALESCE(MAX(s), 0) FROM (
    SELECT user_key, SUM(micro) AS s FROM local_reports GROUP BY user_key
) AS per_user
"""


def local_worst_case(ledger: SQLBase) -> Cost:
    """The most local ε any one user has spent, over all metrics and windows (pure ε).

    Privacy: local-DP reports compose with each other and with the central
    releases: a user's worst-case total loss is the central lifetime bound plus this.
    """
    with ledger._read() as conn:
        micro = conn.execute(SELECT_LOCAL_WORST, {}).fetchone()[0]
    return Cost(Measure.PURE, int(micro))
