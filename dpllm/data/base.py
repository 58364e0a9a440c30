"""What every query shares: the ``Query`` protocol, its scope, exact aggregates, bounds.

A query is a frozen dataclass. Its fields are its whole specification (bounds,
privacy parameters, public categories), so ``fingerprint()`` is a stable hash
of them and keys the release cache. A query

1. names the columns it needs (checked against the source *before* charging),
2. states its mechanisms (:meth:`Query.mechanisms`) and its cost — exactly what
   those mechanisms charge,
3. ``measure``\\ s the data through an :class:`~dpllm.data.engines.Engine`,
   bounding each user's contribution, returning an :class:`Exact` that never
   leaves the core, and
4. ``publish``\\ es that :class:`Exact` through its mechanisms as one
   :class:`~dpllm.release.Release`.

Where a bound is applied differs by query and is stated in each docstring:
record and rating bounds in the engine's SQL (:mod:`dpllm.data.queries`), the
per-course, per-topic and per-keyword bounds in Python over per-user rows that
the SQL returns (:mod:`dpllm.data.groups`, :mod:`dpllm.data.topics`). Both read
the canonical user key (:func:`dpllm.data.sql.user_key`).

**Privacy unit: the user.** Neighbouring datasets differ in *all* records of one
user in the window. Privacy parameters are keyword-only: give ``epsilon`` (pure
ε-DP, discrete Laplace) or ``rho`` (ρ-zCDP, discrete Gaussian), not both.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dpllm.data.engines import Engine
from dpllm.data.sql import ColumnMap, Statement
from dpllm.errors import InvalidPrivacyParameter
from dpllm.privacy.mechanisms import DiscreteGaussian, DiscreteLaplace, Mechanism, make_release
from dpllm.privacy.noise import NoiseSource
from dpllm.release import Cost, Release

__all__ = ["Exact", "Query", "Scope", "choice_key", "keyed_choice", "release_delta"]


@dataclass(frozen=True, slots=True, repr=False)
class Exact:
    """Exact aggregates of one query: internal to the core, never returned to callers.

    Its ``repr`` hides the numbers, so a log line or traceback cannot leak them.
    """

    values: tuple[float, ...]
    labels: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"<Exact: {len(self.values)} hidden value(s)>"


@dataclass(frozen=True, slots=True)
class Scope:
    """Where and when a query reads: engine, column mapping, window and secret salt.

    ``salt`` keys the pseudo-random choices (which topics or courses of a user
    are kept when a bound bites); it is secret, so no analyst can steer them.
    """

    engine: Engine
    columns: ColumnMap
    window: str
    start: dt.datetime
    end: dt.datetime
    salt: bytes = field(repr=False)

    @property
    def source(self) -> Statement:
        return self.engine.relation(self.columns)


def choice_key(salt: bytes, user: str, item: str) -> str:
    """The secret sort key of one of a user's items: hex SHA-256 of ``salt.hex():user:item``.

    The same string is computed inside the engines' SQL
    (:meth:`dpllm.data.sql.Dialect.sha256_hex`), so a choice made there equals one
    made here. A hash with a secret 32-byte prefix is a keyed pseudo-random
    function for this use: no key is ever shown, so the length extension of
    SHA-256 gives nothing, and without the salt nobody can predict or steer
    which items are kept.
    """
    return hashlib.sha256(f"{salt.hex()}:{user}:{item}".encode()).hexdigest()


def keyed_choice(salt: bytes, user: str, items: set[str], limit: int) -> list[str]:
    """At most ``limit`` of a user's ``items``, chosen by a keyed pseudo-random order.

    ``user`` is the canonical user key (:func:`dpllm.data.sql.user_key`). The
    order is :func:`choice_key` (salt, user, item): deterministic for one salt
    (so every engine gives the same answer, and the engines' SQL makes the same
    choice) and unpredictable without it.

    .. versionchanged:: unreleased the key is SHA-256 of ``salt.hex():user:item``
       (was HMAC-SHA256), which every engine computes in SQL.
    """
    if len(items) <= limit:
        return sorted(items)
    return sorted(items, key=lambda item: choice_key(salt, user, item))[:limit]


@runtime_checkable
class Query(Protocol):
    """What the statistics runner needs from a query.

    A query whose release is approximate DP (δ > 0) also has a ``delta``
    attribute (see :func:`release_delta`).
    """

    @property
    def name(self) -> str: ...

    @property
    def cost(self) -> Cost: ...

    def fingerprint(self) -> str: ...

    def columns_needed(self) -> tuple[str, ...]: ...

    def mechanisms(self) -> tuple[Mechanism, ...]:
        """The mechanisms that noise the exact aggregate.

        One mechanism noises every component of :class:`Exact`; several are one
        per component, in order (the mean: count, then sum). Empty when the
        release is a selection, not a noisy value (:class:`~dpllm.data.topics.TopTopics`).
        """
        ...

    def measure(self, scope: Scope) -> Exact: ...

    def publish(
        self,
        exact: Exact,
        *,
        fingerprint: str,
        window: str,
        confidence: float,
        noise: NoiseSource | None,
    ) -> Release: ...


def release_delta(query: Query) -> float:
    """The δ of ``query``'s release: 0 for pure ε-DP and zCDP queries."""
    delta = getattr(query, "delta", 0.0)
    return float(delta) if isinstance(delta, int | float) else 0.0


def _check_bound(name: str, value: int, *, upper: int = 1_000_000) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= upper:
        raise InvalidPrivacyParameter(f"{name} must be an int in [1, {upper}], got {value!r}")


def _check_budget(epsilon: float | None, rho: float | None) -> None:
    if (epsilon is None) == (rho is None):
        raise InvalidPrivacyParameter("give exactly one of epsilon= (pure ε-DP) or rho= (zCDP)")
    value = epsilon if epsilon is not None else rho
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidPrivacyParameter(f"privacy parameter must be a finite number, got {value!r}")
    if value <= 0:
        raise InvalidPrivacyParameter(f"privacy parameter must be > 0, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class _Priced:
    """Shared fields and helpers: the privacy parameter, the cost, the fingerprint."""

    epsilon: float | None = None
    rho: float | None = None
    if TYPE_CHECKING:  # each concrete query declares its own ``name`` field
        name: str

    def __post_init__(self) -> None:
        _check_budget(self.epsilon, self.rho)

    def _mechanism(self, *, l1: int, l2: float, share: float = 1.0) -> Mechanism:
        """Discrete Laplace (L1 sensitivity) or discrete Gaussian (L2 sensitivity)."""
        if self.epsilon is not None:
            return DiscreteLaplace(epsilon=self.epsilon * share, sensitivity=l1)
        assert self.rho is not None
        return DiscreteGaussian(rho=self.rho * share, sensitivity=l2)

    def mechanisms(self) -> tuple[Mechanism, ...]:
        raise NotImplementedError  # pragma: no cover - every query defines its own

    def _count_release(
        self,
        exact: Exact,
        *,
        unit: str,
        labels: tuple[str, ...] = (),
        fingerprint: str,
        window: str,
        confidence: float,
        noise: NoiseSource | None,
    ) -> Release:
        """The release of a count (or a vector of counts) noised by the query's one mechanism.

        Privacy: the mechanism's guarantee for the sensitivity its query proves; the
        clamp at 0 uses only the public fact that counts are never negative, so it is
        post-processing and free.
        """
        (mech,) = self.mechanisms()
        return make_release(
            mech,
            exact.values,
            name=self.name,
            fingerprint=fingerprint,
            kind="count",
            unit=unit,
            labels=labels,
            window=window,
            confidence=confidence,
            noise=noise,
            clamp=(0.0, math.inf),
        )

    @property
    def cost(self) -> Cost:
        """What the query's mechanisms charge together (they compose)."""
        mechs = self.mechanisms()
        total = mechs[0].cost
        for m in mechs[1:]:
            total = total + m.cost
        return total

    def fingerprint(self) -> str:
        """SHA-256 of the query's type and fields (canonical JSON)."""
        spec: dict[str, Any] = {"type": type(self).__name__, **asdict(self)}
        text = json.dumps(spec, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()
