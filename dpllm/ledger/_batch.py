"""Many charges in one transaction (all or nothing), many stores in one transaction.

A backfill charges one query id per (query, window) — 156 for three statistics
over 52 weeks — and each :meth:`~dpllm.ledger._sql_ledger.SQLLedger.charging`
is its own durable transaction (an ``fsync`` on SQLite). The batch here charges
them all in **one** transaction with exactly the statements one charge runs
(per-query lock, read of the charge row, the charge row, its parts, its audit
line, every pool on the path under its cap). It is all or nothing: when any
request is refused — or meets anything but a new charge or a stored release
(a charge in progress, a failed query id, a takeover, a queueing pool) — the
whole transaction rolls back, nothing is charged, and the requests go through
``charging()`` one by one, which waits, takes over, queues and refuses exactly
as it always does (a refusal there refunds the earlier ones, nothing is read).
So a batch changes how many commits there are, never what is charged.

Stores batch the same way: every release and its audit line in one transaction,
each under the same condition as alone (no release stored yet for the query id);
a query id whose release another process stored first returns that release.

Privacy: each query id is charged at most once (its row is the primary key,
checked under the lock) and every charge commits before the handles are
yielded, so no data is read on an uncommitted charge.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dpllm.errors import ChargeInProgress, InvalidPrivacyParameter, LedgerError
from dpllm.ledger import _rows, sql
from dpllm.ledger.base import to_delta_units
from dpllm.release import Cost, Release
from dpllm.windows import Window

if TYPE_CHECKING:
    from dpllm.ledger._sql_ledger import SQLCharge, SQLLedger

__all__ = ["ChargeRequest"]


@dataclass(frozen=True, slots=True)
class ChargeRequest:
    """One charge of a batch: the arguments of :meth:`Ledger.charging`."""

    query_id: str
    pool: str
    window: Window | str
    cost: Cost
    analyst: str = "default"
    description: str = ""
    delta: float = 0.0

    def as_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`Ledger.charging` for this request."""
        return {f: getattr(self, f) for f in self.__slots__}


def _checked(r: ChargeRequest) -> dict[str, Any]:
    kwargs = r.as_kwargs()
    del kwargs["pool"], kwargs["delta"]
    return kwargs


class _Fallback(Exception):
    """The batch met a case that only the one-by-one path handles."""


def _acquire_all(ledger: SQLLedger, requests: Sequence[ChargeRequest]) -> list[SQLCharge] | None:
    """Every request charged (or answered from the cache) in one transaction, or
    None with nothing written."""
    from dpllm.ledger._sql_ledger import SQLCharge

    retry: tuple[type[BaseException], ...] = (_Fallback, *ledger._batch_retry)
    try:
        with ledger._tx() as conn:
            handles: list[SQLCharge] = []
            for r in requests:
                assert isinstance(r.window, str)
                path = ledger._cached_path(conn, r.pool)
                ledger._lock_query(conn, r.query_id)
                row = conn.execute(sql.SELECT_CHARGE, {"query_id": r.query_id}).fetchone()
                if row is None:
                    got = ledger._charge_new(
                        conn, r.query_id, r.window, r.cost, ledger._parts(path, r.cost),
                        r.analyst, r.description, to_delta_units(r.delta),
                    )  # fmt: skip
                    if not isinstance(got, SQLCharge):
                        raise _Fallback  # refused or queued: judged again one by one
                    handles.append(got)
                elif row[11] is not None:
                    ledger._audit(
                        conn, "cache_hit", analyst=r.analyst, pool=row[1], window=row[2],
                        query_id=r.query_id,
                        detail="answered from the release cache; nothing charged",
                    )  # fmt: skip
                    cached = _rows.release_from_json(row[11])
                    handles.append(
                        SQLCharge(
                            ledger,
                            query_id=r.query_id,
                            cost=r.cost,
                            owner=None,
                            cached=cached,
                            refundable=False,
                        )  # fmt: skip
                    )
                else:
                    raise _Fallback  # in progress, failed or to take over
            return handles
    except retry:
        return None  # rolled back whole: nothing was charged


@contextmanager
def charging_many(
    ledger: SQLLedger, requests: Sequence[ChargeRequest]
) -> Iterator[list[SQLCharge]]:
    """See :meth:`~dpllm.ledger._sql_ledger.SQLLedger.charging_many`."""
    checked = [replace(r, window=_rows.check_request(**_checked(r))) for r in requests]
    for r in checked:  # a bad δ is refused before anything is charged, on either path
        to_delta_units(r.delta)
    if len({r.query_id for r in checked}) != len(checked):
        raise InvalidPrivacyParameter("a batch of charges needs distinct query ids")
    order = sorted(range(len(checked)), key=lambda i: checked[i].query_id)
    # In query-id order, as one-by-one callers charge: no wait cycles between processes.
    handles = _acquire_all(ledger, [checked[i] for i in order]) if checked else []
    with ExitStack() as stack:
        held: dict[int, SQLCharge] = {}
        for position, i in enumerate(order):
            if handles is None:
                held[i] = stack.enter_context(ledger.charging(**checked[i].as_kwargs()))
            else:
                held[i] = stack.enter_context(ledger._held(handles[position]))
        yield [held[i] for i in range(len(checked))]


def store_many(ledger: SQLLedger, pairs: Sequence[tuple[SQLCharge, Release]]) -> list[Release]:
    """See :meth:`~dpllm.ledger._sql_ledger.SQLLedger.store_many`."""
    for charge, release in pairs:
        if charge.cached is not None or charge._stored:
            raise LedgerError(f"a release is already stored for query id {charge.query_id!r}")
        _rows.check_release_cost(release, charge._cost)
        _rows.check_release_delta(release, charge._delta)
        ledger.check_seeded(release)
    stored: list[bool] = []
    with ledger._tx() as conn:
        for charge, release in pairs:
            stored.append(
                ledger._store_in(
                    conn, charge.query_id, _rows.release_to_json(release), release.name
                )
            )
    out = []
    for (charge, release), ok in zip(pairs, stored, strict=True):
        if ok:
            charge._stored = True
            out.append(release)
            continue
        first = ledger.get_release(charge.query_id)
        if first is None:
            raise ChargeInProgress(
                f"another process holds query id {charge.query_id!r}; no release was stored"
            )
        out.append(first)  # another process stored first: this value is dropped unseen
    return out
