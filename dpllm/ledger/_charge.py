"""The charge handle of the SQL ledgers (split from :mod:`dpllm.ledger._sql_ledger`).

:class:`SQLCharge` is what :meth:`~dpllm.ledger._sql_ledger.SQLLedger.charging`
yields: it stores the release (checking that it claims no more ε or δ than was
charged) and, on leaving the block, refunds, fails or abandons the charge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpllm.errors import LedgerError
from dpllm.ledger import _rows
from dpllm.release import Cost, Release

if TYPE_CHECKING:
    from dpllm.ledger._sql_ledger import SQLLedger

__all__ = ["SQLCharge"]


class SQLCharge:
    """The handle :meth:`SQLLedger.charging` yields (see :class:`dpllm.ledger.base.Charge`)."""

    def __init__(
        self,
        ledger: SQLLedger,
        *,
        query_id: str,
        cost: Cost,
        owner: str | None,
        cached: Release | None,
        refundable: bool,
        charged: bool = False,
        delta: int = 0,
    ) -> None:
        self._ledger = ledger
        self._delta = delta
        self._charged = charged
        self._query_id = query_id
        self._cost = cost
        self._owner = owner
        self._cached = cached
        self._refundable = refundable
        self._data_read = False
        self._stored = False

    @property
    def query_id(self) -> str:
        return self._query_id

    @property
    def cached(self) -> Release | None:
        """The release already stored for this query id; then nothing was charged."""
        return self._cached

    @property
    def charged(self) -> bool:
        """True when this handle wrote a new charge (not a cache hit, a wait for
        another caller's charge, a takeover, or an approved charge)."""
        return self._charged

    def data_read(self) -> None:
        """Mark that the data is about to be read: from here on the charge is never refunded."""
        if self._cached is not None:
            raise LedgerError("this query id is answered from the cache; do not read the data")
        self._data_read = True

    def store(self, release: Release) -> None:
        """Store ``release`` under the query id, durably, before it is returned.

        Raises:
            InvalidPrivacyParameter: the release claims more than was charged, or
                it is seeded and this is not a test ledger.
            ChargeInProgress: another process stored a release for this query id
                first (this one's lease had expired); return ``get_release`` instead.
        """
        if self._cached is not None or self._stored:
            raise LedgerError(f"a release is already stored for query id {self._query_id!r}")
        _rows.check_release_cost(release, self._cost)
        _rows.check_release_delta(release, self._delta)
        self._ledger.check_seeded(release)
        self._ledger._store(self._query_id, release)
        self._stored = True

    def _finish(self, error: BaseException | None) -> None:
        if self._cached is not None or self._stored or self._owner is None:
            return
        if not self._data_read and self._refundable:
            self._ledger._refund(self._query_id, self._owner, failed=error is not None)
        elif self._data_read and isinstance(error, Exception):
            # Only the class name: an exception's message may carry record contents.
            self._ledger._fail(self._query_id, self._owner, type(error).__name__[:200])
        else:
            self._ledger._abandon(self._query_id, self._owner)
