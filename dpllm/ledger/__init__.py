"""The privacy-budget ledger: protocol (:mod:`.base`) and the SQLite backend (:mod:`.sqlite`)."""

from dpllm.ledger.base import (
    AuditEvent,
    Balance,
    Charge,
    ChargeRecord,
    ChargeStatus,
    Ledger,
    PendingRequest,
    PoolSpec,
    release_once,
)
from dpllm.ledger.sqlite import SQLiteLedger

__all__ = [
    "AuditEvent",
    "Balance",
    "Charge",
    "ChargeRecord",
    "ChargeStatus",
    "Ledger",
    "PendingRequest",
    "PoolSpec",
    "SQLiteLedger",
    "release_once",
]
