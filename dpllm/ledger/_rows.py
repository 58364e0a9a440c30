"""Row ↔ value conversions and small checks shared by the ledger backends."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from dpllm.errors import BudgetExceeded, InvalidPrivacyParameter, LedgerError
from dpllm.ledger.base import (
    DEFAULT_DELTA_WINDOW_CAP,
    DELTA_UNIT,
    AuditEvent,
    ChargeRecord,
    ChargeStatus,
    PendingRequest,
    PoolSpec,
    delta_text,
)
from dpllm.release import Cost, Measure, Release
from dpllm.windows import Window

Row = Sequence[Any]


def iso_time(seconds: float) -> str:
    """UTC ISO-8601 text of a POSIX time, to the millisecond."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="milliseconds")


def owner_id(token: str) -> str:
    """``host:pid:thread:token`` — who holds an in-progress charge."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{token}"


def owner_gone(owner: str | None, lease_expires: float | None, now: float) -> bool:
    """True when the owner of an in-progress charge can no longer store its release.

    Gone means: no owner, an expired lease, or a process on this host that no
    longer exists. A live process whose pid was reused merely looks alive, and
    the caller then waits for the lease: the safe side.
    """
    if owner is None or lease_expires is None or lease_expires <= now:
        return True
    host, _, rest = owner.partition(":")
    pid_text = rest.split(":", 1)[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def check_request(
    *, query_id: object, window: object, cost: object, analyst: object, description: object = ""
) -> str:
    """Validate a charge request before anything touches the database.

    Returns:
        The window's canonical key: a :class:`~dpllm.windows.Window`, or a string
        that is already exactly canonical (any other spelling is refused, so one
        data week is one ledger window).
    """
    if not isinstance(query_id, str) or not query_id or len(query_id) > 512:
        raise InvalidPrivacyParameter(
            f"query_id must be a non-empty string of ≤ 512 characters, got {query_id!r}"
        )
    key = Window.parse(window).key  # raises InvalidWindow on anything else
    if not isinstance(cost, Cost):
        raise InvalidPrivacyParameter(
            f"cost must be a dpllm Cost (Cost.pure(...) or Cost.zcdp(...)), got {cost!r}"
        )
    if not isinstance(analyst, str) or not analyst:
        raise InvalidPrivacyParameter(f"analyst must be a non-empty string, got {analyst!r}")
    if not isinstance(description, str):
        raise InvalidPrivacyParameter(f"description must be a string, got {description!r}")
    for name, text in (("query_id", query_id), ("analyst", analyst), ("description", description)):
        if not _storable(text):
            raise InvalidPrivacyParameter(
                f"{name} holds a NUL character or an unpaired surrogate, which no ledger "
                f"database can store: {text!r}"
            )
    return key


def _storable(text: str) -> bool:
    """Text both SQLite and PostgreSQL store as given (valid UTF-8, no NUL)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def pool_from_row(row: Row) -> PoolSpec:
    return PoolSpec(
        name=row[0],
        measure=Measure(row[1]),
        window_cap=int(row[2]),
        lifetime_cap=None if row[3] is None else int(row[3]),
        parent=row[4],
        delta=float(row[5]),
        on_exceed=row[6],
        reserve=row[7],
        delta_window_cap=int(row[9]) if len(row) > 9 else DEFAULT_DELTA_WINDOW_CAP,
        delta_lifetime_cap=None if len(row) <= 10 or row[10] is None else int(row[10]),
    )


def charge_from_row(row: Row) -> ChargeRecord:
    return ChargeRecord(
        query_id=row[0],
        pool=row[1],
        window=row[2],
        cost=Cost(Measure(row[3]), int(row[4])),
        analyst=row[5],
        description=row[6],
        status=ChargeStatus(row[7]),
        owner=row[8],
        lease_expires=row[9],
        ticket=row[10],
        error_class=row[12] if len(row) > 12 else None,
        delta=int(row[13]) if len(row) > 13 and row[13] is not None else 0,
    )


def ticket_from_row(row: Row) -> PendingRequest:
    return PendingRequest(
        ticket=row[0],
        query_id=row[1],
        pool=row[2],
        window=row[3],
        cost=Cost(Measure(row[4]), int(row[5])),
        analyst=row[6],
        description=row[7],
        status=row[8],
    )


def audit_from_row(row: Row) -> AuditEvent:
    return AuditEvent(
        id=int(row[0]),
        time=row[1],
        event=row[2],
        analyst=row[3],
        pool=row[4],
        window=row[5],
        query_id=row[6],
        micro=int(row[7]),
        detail=row[8],
    )


def release_to_json(release: Release) -> str:
    return json.dumps(release.to_dict(), sort_keys=True, allow_nan=False, ensure_ascii=False)


def release_from_json(text: str) -> Release:
    try:
        data: Mapping[str, Any] = json.loads(text)
    except ValueError as exc:
        raise LedgerError(
            f"a stored release is not valid JSON ({exc}); the ledger is damaged"
        ) from exc
    return Release.from_dict(data)


def check_release_cost(release: Release, charged: Cost) -> None:
    """A stored release may not claim more privacy loss than was charged for it."""
    if not isinstance(release, Release):
        raise InvalidPrivacyParameter(f"store() takes a Release, got {type(release).__name__}")
    try:
        as_charged = release.cost.to_measure(charged.measure)
    except InvalidPrivacyParameter as exc:
        raise InvalidPrivacyParameter(
            f"release {release.name!r} is {release.cost.measure} but was charged as "
            f"{charged.measure}: {exc}"
        ) from exc
    if as_charged.micro > charged.micro:
        raise InvalidPrivacyParameter(
            f"release {release.name!r} costs {release.cost.describe()} but only "
            f"{charged.describe()} was charged; charge the release's full cost"
        )


def check_release_delta(release: Release, charged: int) -> None:
    """A stored release may not claim a larger δ than was charged for it (units of 10⁻¹⁵)."""
    from dpllm.ledger.base import to_delta_units

    claimed = to_delta_units(float(getattr(release, "delta", 0.0) or 0.0))
    if claimed > charged:
        raise InvalidPrivacyParameter(
            f"release {release.name!r} has δ = {release.delta:g} but δ = "
            f"{delta_text(charged)} was charged; pass delta= to the charge (the ledger caps δ)"
        )


def exceeded(
    spec: PoolSpec,
    *,
    kind: str,
    window: str,
    requested: int,
    remaining: int,
    advice: str | None = None,
) -> BudgetExceeded:
    """The refusal of a charge ``kind``: ``window``/``lifetime`` (ε or ρ, micro-units) or
    ``delta_window``/``delta_lifetime`` (δ, units of 10⁻¹⁵). ``advice`` replaces the
    default "what to do" of an ε/ρ refusal."""
    if kind.startswith("delta"):
        what = "δ window cap" if kind == "delta_window" else "δ lifetime cap"
        return BudgetExceeded(
            f"pool {spec.name!r} cannot take δ = {delta_text(requested)} in window {window}: "
            f"its {what} leaves δ = {delta_text(remaining)}. Nothing was spent; wait for the "
            "next window, raise the pool's δ caps, or use a query with a smaller δ",
            pool=spec.name,
            requested=requested / DELTA_UNIT,
            remaining=remaining / DELTA_UNIT,
            window=window,
        )
    unit = "ε" if spec.measure is Measure.PURE else "ρ"
    what = "window cap" if kind == "window" else "lifetime cap"
    return BudgetExceeded(
        f"pool {spec.name!r} cannot take {unit} = {requested / 1e6:g} in window {window}: "
        f"its {what} leaves {unit} = {remaining / 1e6:g}. Nothing was spent; "
        + (advice or "wait for the next window, ask for approval, or use a cheaper query"),
        pool=spec.name,
        requested=requested / 1e6,
        remaining=remaining / 1e6,
        window=window,
    )
