"""The privacy-budget ledger: protocol and semantics.

The ledger is where dpllm keeps its promise over time. Every backend
(``sqlite``, ``postgres``) implements :class:`Ledger` with these semantics:

**Order of a release.** charge (durable, committed) → read the data → add
noise → store the release under its query id → return it. A noisy value never
leaves before its charge is committed.

**Query id** = fingerprint of (query spec, dataset id, window). If a release is
stored for it, that release is returned and nothing is charged (answering again
is post-processing). If a charge for it is in progress, a concurrent caller
waits for it (up to a timeout) and then gets the stored release, or a
:class:`~dpllm.errors.ChargeInProgress` error — never a second charge.

**Refunds** only when the data was never read: inside
``with ledger.charging(...) as charge:`` an exception before
``charge.data_read()`` refunds; one after it does not (a data-dependent failure
is itself a signal). A charge whose process died before its release was stored
stays charged and is listed as "charged, not released".

**Failures after the read** close the query id: an exception (an
:class:`Exception`) raised inside the block after ``charge.data_read()`` marks
the charge ``failed`` in one durable write, recording only the exception's
class name (its message may carry record contents). The charge stands, and a
later ``charging()`` with that query id raises
:class:`~dpllm.errors.QueryFailed` instead of reading the data again — else a
data-dependent failure could be probed over and over for one charge. A changed
query or window has a new query id and is charged anew. A ``BaseException``
that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``) is treated
like the process dying: the charge stays, unreleased, and a retry takes it over
(the interruption comes from outside, not from the data, and no value left).

**Crashes and leases.** A charge row records its owner (host, process, thread)
and a lease. While the owner lives, a caller with the same query id waits for
the release. When the owner is gone (its process is dead, or its lease ran
out), a retry with the same query id *takes over the existing charge without
charging again*. This is sound because a release is stored before it is
returned: a process that died before storing never let its noisy value out, so
nobody observed it, and the one value that will ever leave — the first one
stored, since the store is conditional on no release being stored yet — is
covered by the one charge. A slow owner that loses its lease and a taker-over
may both compute; the loser of the store finds the winner's release and
returns that instead of its own, so still only one noisy value leaves. A
taken-over charge is never refunded (the dead process may have read the data).

**Pools** have a name, a cap per window, a lifetime cap, a measure (pure ε, or
zCDP with a stated δ for reporting) and an optional parent. A charge must fit
every pool on its path (the pool and its ancestors), atomically.

**δ** is budgeted beside ε: a charge may carry the δ of an approximate-DP
release (``charging(..., delta=...)``; partition selection such as
:class:`~dpllm.data.topics.NewKeywords`). Each pool caps the δ charged per
window (``delta_window_cap``) and over all windows (``delta_lifetime_cap``),
in integer units of 10⁻¹⁵ (:data:`DELTA_UNIT`), rounded up when charged. A
charge must fit every δ cap on its path as it must fit every ε cap; a refusal
is a :class:`~dpllm.errors.BudgetExceeded` and spends nothing. δ is never
queued for approval (approvals move ε, not δ). A zCDP pool's reporting ``delta``
is not charged: its ρ holds at every δ, and reports show the total δ as that
conversion δ plus the δ charged.

**Windows** are keys derived from the data's timestamps (``2026-W47``). The
per-window cap is a guarantee per user per window; the lifetime cap bounds what
one user can lose over all windows.

**Amounts** are exact integer micro-units, rounded up when charged.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Protocol, runtime_checkable

from dpllm.errors import ChargeInProgress, ConfigError, InvalidPrivacyParameter, UnknownPool
from dpllm.release import MAX_AMOUNT, MICRO, Cost, Measure, Release
from dpllm.windows import Window

__all__ = [
    "DEFAULT_DELTA_WINDOW_CAP",
    "DELTA_UNIT",
    "AuditEvent",
    "Balance",
    "Charge",
    "ChargeRecord",
    "ChargeStatus",
    "Ledger",
    "PendingRequest",
    "PoolSpec",
    "RunItem",
    "iter_path",
    "Outcome",
    "delta_text",
    "derived_delta_lifetime_cap",
    "path_delta_remaining",
    "path_remaining",
    "to_delta_units",
    "release_once",
    "release_recorded",
]


DELTA_UNIT = 10**15
"""δ is kept as an integer count of 10⁻¹⁵ (exact sums, one conditional ``UPDATE``)."""

DEFAULT_DELTA_WINDOW_CAP = 1_000_000_000
"""δ = 10⁻⁶ per window, in :data:`DELTA_UNIT`: one release of a default
:class:`~dpllm.data.topics.NewKeywords` per window and pool path."""


def to_delta_units(delta: float | int | Fraction | Decimal, *, cap: bool = False) -> int:
    """δ in integer units of 10⁻¹⁵: rounded up for a charge, down for a cap.

    Floats are read through their shortest decimal form (``1e-6`` is exactly
    10⁹ units), so a charge of δ never exceeds a cap written as the same δ.

    Raises:
        InvalidPrivacyParameter: δ is not a finite number in [0, 1].
    """
    if isinstance(delta, bool) or not isinstance(delta, int | float | Fraction | Decimal):
        raise InvalidPrivacyParameter(f"delta must be a number, got {delta!r}")
    if delta == 0:  # the common case (every pure ε and zCDP charge), without the arithmetic
        return 0
    try:
        exact = Fraction(Decimal(repr(delta))) if isinstance(delta, float) else Fraction(delta)
    except (ValueError, ArithmeticError) as exc:
        raise InvalidPrivacyParameter(f"delta must be finite, got {delta!r}") from exc
    if not 0 <= exact <= 1:
        raise InvalidPrivacyParameter(f"delta must lie in [0, 1], got {delta!r}")
    scaled = exact * DELTA_UNIT
    return math.floor(scaled) if cap else math.ceil(scaled)


def delta_text(units: int | None) -> str:
    """δ units as text (``"1e-06"``; ``"unlimited"`` for ``None``)."""
    return "unlimited" if units is None else f"{units / DELTA_UNIT:.4g}"


def derived_delta_lifetime_cap(
    window_cap: int, lifetime_cap: int | None, delta_window_cap: int
) -> int | None:
    """The default δ lifetime cap of a pool (units of 10⁻¹⁵).

    As many δ window caps as the ε (or ρ) lifetime cap holds full windows:
    ``delta_window_cap · ⌈lifetime_cap / window_cap⌉``. ``None`` (unlimited, like
    ε) when the pool has no lifetime cap; 0 when its window cap is 0.
    """
    if lifetime_cap is None:
        return None
    if window_cap <= 0:
        return 0
    return delta_window_cap * -(-lifetime_cap // window_cap)


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """A budget pool.

    Args:
        name: plain name (letters, digits, ``_``, ``-``, ``.``).
        measure: accounting measure of every charge to it.
        window_cap: cap per window, in micro-units of ε (pure) or ρ (zCDP).
        lifetime_cap: cap over all windows (``None``: unlimited).
        parent: the enclosing pool, or ``None`` for a root pool.
        delta: δ at which a zCDP pool's ρ is reported as (ε, δ).
        on_exceed: ``"refuse"`` (default) or ``"queue"`` for human approval.
        reserve: the pool an approval moves window budget from when the
            approver names none (``dpllm budget approve ID --from POOL`` overrides).
        delta_window_cap: δ charged per window, in units of 10⁻¹⁵
            (:data:`DELTA_UNIT`; default :data:`DEFAULT_DELTA_WINDOW_CAP`, δ = 10⁻⁶).
        delta_lifetime_cap: δ charged over all windows, in the same units
            (``None``: unlimited). ``dpllm.toml`` derives a default from the ε caps.

    .. versionchanged:: unreleased
        ``delta_window_cap`` and ``delta_lifetime_cap``: δ is capped like ε.
    """

    name: str
    measure: Measure
    window_cap: int
    lifetime_cap: int | None = None
    parent: str | None = None
    delta: float = 1e-6
    on_exceed: str = "refuse"
    reserve: str | None = None
    delta_window_cap: int = DEFAULT_DELTA_WINDOW_CAP
    delta_lifetime_cap: int | None = None

    def __post_init__(self) -> None:
        import re

        if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", self.name or ""):
            raise ConfigError(f"pool name {self.name!r} must be a plain name", field="pools")
        object.__setattr__(self, "measure", Measure(self.measure))
        for cap in (self.window_cap, self.lifetime_cap):
            if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int)):
                raise ConfigError(
                    f"pool {self.name!r}: caps are integer micro-units, got {cap!r}; "
                    "use dpllm.release.to_micro(amount)",
                    field="pools",
                )
        if self.window_cap < 0 or (self.lifetime_cap is not None and self.lifetime_cap < 0):
            raise ConfigError(f"pool {self.name!r}: caps must be ≥ 0", field="pools")
        for cap in (self.delta_window_cap, self.delta_lifetime_cap):
            if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
                raise ConfigError(
                    f"pool {self.name!r}: δ caps must be ints ≥ 0 (units of 10⁻¹⁵), got {cap!r}",
                    field="pools",
                )
        if max(self.window_cap, self.lifetime_cap or 0) > MAX_AMOUNT * MICRO:
            raise ConfigError(
                f"pool {self.name!r}: a cap is too large (at most {MAX_AMOUNT:.0e} ε or ρ)",
                field="pools",
            )
        if self.on_exceed not in ("refuse", "queue"):
            raise ConfigError(
                f"pool {self.name!r}: on_exceed must be 'refuse' or 'queue'", field="pools"
            )
        if not 0.0 < self.delta < 1.0:
            raise ConfigError(f"pool {self.name!r}: delta must lie in (0, 1)", field="pools")
        for ref in (self.parent, self.reserve):
            if ref is not None and not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", ref):
                raise ConfigError(f"pool {self.name!r}: {ref!r} is not a pool name", field="pools")
        if self.parent == self.name:
            raise ConfigError(f"pool {self.name!r} cannot be its own parent", field="pools")


class ChargeStatus(enum.StrEnum):
    IN_PROGRESS = "in_progress"
    """Charged and committed; data not yet read."""
    DATA_READ = "data_read"
    """Charged; the data was read; the release is not stored yet (or never will be)."""
    RELEASED = "released"
    """Charged and the release is stored under its query id."""
    REFUNDED = "refunded"
    """Refunded because the data was never read."""
    FAILED = "failed"
    """Charged; the data was read and the run raised. The charge stands; the query id is closed."""


@dataclass(frozen=True, slots=True)
class Balance:
    """A pool's position in one window (amounts in micro-units of the pool's measure).

    ``granted`` is window budget moved in (> 0) or out (< 0) by approvals, so the
    window's effective cap is ``window_cap + granted``.
    """

    pool: str
    measure: Measure
    window: str
    spent: int
    window_cap: int
    lifetime_spent: int
    lifetime_cap: int | None
    granted: int = 0
    delta_spent: int = 0
    delta_window_cap: int = DEFAULT_DELTA_WINDOW_CAP
    delta_lifetime_spent: int = 0
    delta_lifetime_cap: int | None = None
    conversion_delta: float = 0.0
    """A zCDP pool's reporting δ (not charged); 0 for a pure pool."""

    @property
    def effective_cap(self) -> int:
        return self.window_cap + self.granted

    @property
    def remaining(self) -> int:
        left = self.effective_cap - self.spent
        if self.lifetime_cap is not None:
            left = min(left, self.lifetime_cap - self.lifetime_spent)
        return max(0, left)

    @property
    def delta_remaining(self) -> int:
        """δ still chargeable in this window (units of 10⁻¹⁵), counting both δ caps."""
        left = self.delta_window_cap - self.delta_spent
        if self.delta_lifetime_cap is not None:
            left = min(left, self.delta_lifetime_cap - self.delta_lifetime_spent)
        return max(0, left)

    @property
    def total_delta(self) -> float:
        """The δ of this window's guarantee: δ charged plus a zCDP pool's conversion δ."""
        return self.delta_spent / DELTA_UNIT + (self.conversion_delta if self.spent else 0.0)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One line of the audit log (never holds statistic values)."""

    id: int
    time: str
    event: str  # charge | refuse | refund | approve | deny | queue | cache_hit | release | failed
    analyst: str
    pool: str
    window: str
    query_id: str
    micro: int
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PendingRequest:
    ticket: str
    pool: str
    window: str
    query_id: str
    cost: Cost
    analyst: str
    description: str
    status: str  # pending | approved | denied | used


@dataclass(frozen=True, slots=True)
class RunItem:
    """One query of a whole run's approval ticket: its query id, cost and description."""

    query_id: str
    cost: Cost
    description: str


@dataclass(frozen=True, slots=True)
class ChargeRecord:
    """A charge whose release is not stored: "charged, not released".

    ``owner`` is the process holding it (``None``: nobody — its process died or
    failed after reading the data, or an approval funded it and it awaits its run).
    ``error_class`` is the class name of the exception that failed it (status
    :attr:`ChargeStatus.FAILED`), never its message.

    .. versionchanged:: unreleased
        ``error_class`` and the ``failed`` status.
    """

    query_id: str
    pool: str
    window: str
    cost: Cost
    analyst: str
    description: str
    status: ChargeStatus
    owner: str | None
    lease_expires: float | None
    ticket: str | None
    error_class: str | None = None
    delta: int = 0
    """δ charged with it, in units of 10⁻¹⁵ (:data:`DELTA_UNIT`)."""


@runtime_checkable
class Charge(Protocol):
    """The handle yielded by :meth:`Ledger.charging`."""

    @property
    def query_id(self) -> str: ...

    @property
    def cached(self) -> Release | None:
        """A release already stored for this query id (then nothing was charged)."""
        ...

    def data_read(self) -> None:
        """Mark that the data is about to be read: from here on, no refund."""
        ...

    def store(self, release: Release) -> None:
        """Store the release under the query id (durably) — the charge is complete."""
        ...


@runtime_checkable
class Ledger(Protocol):
    """A persistent, atomic privacy-budget account with a release cache."""

    def ensure_pool(self, spec: PoolSpec) -> None:
        """Create the pool, or update its caps if it exists."""
        ...

    def charging(
        self,
        *,
        query_id: str,
        pool: str,
        window: Window | str,
        cost: Cost,
        analyst: str = "default",
        description: str = "",
        delta: float = 0.0,
    ) -> AbstractContextManager[Charge]:
        """Charge ``cost`` (and ``delta``) to ``pool`` and its ancestors for ``window``, durably.

        Yields a :class:`Charge`. If a release is already stored for
        ``query_id``, nothing is charged and ``charge.cached`` holds it.
        ``delta`` is the δ of an approximate-DP release, capped per pool like ε.

        Raises:
            BudgetExceeded: a pool on the path cannot take the charge, its ε (or ρ) or its δ
                (nothing spent).
            BudgetPending: the pool queues; the request awaits approval (nothing spent).
            ChargeInProgress: the same query id is being charged and did not finish in time.
            QueryFailed: this query id failed after its data was read (its charge stands).
        """
        ...

    def get_release(self, query_id: str) -> Release | None: ...

    def releases(
        self, *, name: str | None = None, window: Window | str | None = None
    ) -> Sequence[Release]:
        """Stored releases (for charts and trends: reading them spends nothing)."""
        ...

    def balance(self, pool: str, window: Window | str) -> Balance: ...

    def history(self, *, limit: int | None = None) -> Sequence[AuditEvent]: ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """A release and what the ledger recorded for this call.

    ``cached``: served from the release cache (nothing charged, nothing read).
    ``charged``: this call wrote the charge. Both false: another caller's
    charge covered it (this call waited for it, or took over a dead caller's
    charge without charging again).
    """

    release: Release
    cached: bool
    charged: bool


def release_once(
    ledger: Ledger,
    *,
    query_id: str,
    pool: str,
    window: Window | str,
    cost: Cost,
    compute: Callable[[], Release],
    analyst: str = "default",
    description: str = "",
    delta: float = 0.0,
) -> Release:
    """Run one release in the order charge → read → noise → store → return.

    ``compute`` reads the data and adds noise; it is called only after the charge
    is committed. Only one release is ever stored per query id: if another
    process stored one first (this one's lease had expired), that stored release
    is returned and this process's noisy value is dropped unseen.

    Raises:
        BudgetExceeded, BudgetPending, ChargeInProgress, QueryFailed: see
            :meth:`Ledger.charging`.

    Privacy: exactly one charge of ``cost`` per query id; the noisy value leaves
    only after its charge is committed and the release is stored.
    """
    return release_recorded(
        ledger,
        query_id=query_id,
        pool=pool,
        window=window,
        cost=cost,
        compute=compute,
        analyst=analyst,
        description=description,
        delta=delta,
    ).release


def release_recorded(
    ledger: Ledger,
    *,
    query_id: str,
    pool: str,
    window: Window | str,
    cost: Cost,
    compute: Callable[[], Release],
    analyst: str = "default",
    description: str = "",
    delta: float = 0.0,
) -> Outcome:
    """:func:`release_once`, returning what the ledger recorded for this call.

    ``compute`` reads the data and adds noise; it is called only after the charge
    is committed. Only one release is ever stored per query id: if another
    process stored one first (this one's lease had expired), that stored release
    is returned and this process's noisy value is dropped unseen.

    Raises:
        BudgetExceeded, BudgetPending, ChargeInProgress, QueryFailed: see
            :meth:`Ledger.charging`.

    Privacy: exactly one charge of ``cost`` (and ``delta``) per query id; the
    noisy value leaves only after its charge is committed and the release is stored.
    """
    with ledger.charging(
        query_id=query_id,
        pool=pool,
        window=window,
        cost=cost,
        analyst=analyst,
        description=description,
        delta=delta,
    ) as charge:
        if charge.cached is not None:
            return Outcome(charge.cached, cached=True, charged=False)
        charged = bool(getattr(charge, "charged", False))
        charge.data_read()
        release = compute()
        try:
            charge.store(release)
        except ChargeInProgress:
            stored = ledger.get_release(query_id)
            if stored is None:
                raise
            return Outcome(stored, cached=False, charged=charged)
        return Outcome(release, cached=False, charged=charged)


def iter_path(pools: dict[str, PoolSpec], name: str) -> Iterator[PoolSpec]:
    """The pool and its ancestors, innermost first (cycle-safe)."""
    seen: set[str] = set()
    current: str | None = name
    while current is not None:
        if current in seen:
            raise ConfigError(f"pool {name!r}: parent chain has a cycle at {current!r}")
        seen.add(current)
        try:
            spec = pools[current]
        except KeyError:
            raise UnknownPool(
                f"unknown pool {current!r}; create it first (Ledger.ensure_pool or dpllm.toml)"
            ) from None
        yield spec
        current = spec.parent


def path_remaining(pools: dict[str, PoolSpec], balance: Callable[[str], Balance], name: str) -> int:
    """What a charge to ``name`` can still take: the minimum over the pool's path.

    A charge must fit every pool on the path (the pool and its ancestors), so an
    exhausted parent leaves its children nothing, whatever their own caps say.

    Args:
        pools: every pool, by name.
        balance: the balance of a pool (by name) in the window of interest.
        name: the pool charged.

    Returns:
        Micro-units of ``name``'s measure. A zCDP ancestor's remaining ρ bounds a
        pure pool's ε by ``ε ≤ √(2ρ)`` (ε-DP is (ε²/2)-zCDP, Bun & Steinke 2016,
        Prop. 1.4), rounded down.
    """
    from math import isqrt

    spec = pools[name]
    left: int | None = None
    for node in iter_path(pools, name):
        rem = balance(node.name).remaining
        if node.measure is not spec.measure and spec.measure is Measure.PURE:
            # ε²/2 ≤ ρ  ⇔  ε ≤ √(2ρ); in micro-units: ε_µ ≤ √(2·ρ_µ·10⁶).
            rem = isqrt(2 * rem * 1_000_000)
        left = rem if left is None else min(left, rem)
    return 0 if left is None else max(0, left)


def path_delta_remaining(balance: Callable[[str], Balance], path: Sequence[str]) -> int:
    """δ a charge to ``path[0]`` can still take (units of 10⁻¹⁵): the minimum over its path.

    δ composes additively whatever a pool's measure, so no conversion is needed.
    """
    left = [balance(name).delta_remaining for name in path]
    return min(left) if left else 0
