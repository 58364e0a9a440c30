"""`Cost` and `Release`: what a privacy charge is, and the only form a statistic leaves in.

A :class:`Cost` is an exact amount of privacy loss in one accounting measure:

* ``Measure.PURE`` — pure ε-differential privacy; amounts add (basic composition).
* ``Measure.ZCDP`` — ρ-zero-concentrated DP (Bun & Steinke, 2016); amounts add.
  ρ-zCDP implies (ε, δ)-DP for every δ ∈ (0, 1) with
  ``ε = ρ + 2·√(ρ·ln(1/δ))`` (Bun & Steinke 2016, Prop. 1.3), and ε-DP implies
  (ε²/2)-zCDP (Prop. 1.4), which is how pure costs enter a zCDP pool.

Amounts are integers in micro-units (10⁻⁶ of ε or ρ). A float given by a caller is
read through its shortest decimal form (``0.1`` is exactly 100 000 µ) and any
remainder is rounded **up**, so that a charge never under-counts and a million
additions drift by nothing.

A :class:`Release` is immutable and JSON-serialisable: the noisy value(s), the
mechanism and its noise scale, a confidence interval per value, the cost, the
privacy unit, the window and the query's fingerprint. It refuses to turn into
text (``str``/``format``), so a template can only show it through a DP filter
that prints its error band.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from fractions import Fraction
from typing import Any

from dpllm.errors import InvalidPrivacyParameter, RawReleaseError

__all__ = [
    "MAX_AMOUNT",
    "MICRO",
    "RELEASES_SCHEMA",
    "RENAMED",
    "Cost",
    "Measure",
    "Release",
    "read_releases_document",
    "releases_document",
    "to_micro",
]

MICRO = 1_000_000
"""Micro-units per unit of ε or ρ."""

MAX_AMOUNT = 10**9
"""The largest ε or ρ an amount may hold (10⁹, far beyond any meaningful privacy
budget): its micro-units, and sums of many of them, stay within the 64-bit
integers the ledgers store."""


class Measure(StrEnum):
    """The accounting measure a cost (or a pool) is expressed in."""

    PURE = "pure"
    """Pure ε-DP; the amount is ε."""
    ZCDP = "zcdp"
    """ρ-zCDP; the amount is ρ."""

    def __str__(self) -> str:
        return self.value


def _check_finite_nonneg(name: str, value: float | int | Fraction | Decimal) -> Fraction:
    if isinstance(value, bool):
        raise InvalidPrivacyParameter(f"{name} must be a number, not a bool")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidPrivacyParameter(f"{name} must be finite, got {value!r}")
    if isinstance(value, Decimal) and not value.is_finite():
        raise InvalidPrivacyParameter(f"{name} must be finite, got {value!r}")
    try:
        exact = Fraction(Decimal(repr(value))) if isinstance(value, float) else Fraction(value)
    except (TypeError, ValueError, InvalidOperation) as exc:
        raise InvalidPrivacyParameter(f"{name} must be a number, got {value!r}") from exc
    if exact < 0:
        raise InvalidPrivacyParameter(f"{name} must be ≥ 0, got {value!r}")
    return exact


def to_micro(value: float | int | Fraction | Decimal, *, name: str = "amount") -> int:
    """Convert an amount of ε or ρ into integer micro-units, rounding up.

    Floats are read through their shortest decimal representation, so
    ``to_micro(0.1) == 100_000`` rather than 100 001.

    Raises:
        InvalidPrivacyParameter: NaN, ±∞, negative values, non-numbers, or an
            amount above :data:`MAX_AMOUNT`.

    .. versionchanged:: unreleased
        Amounts above :data:`MAX_AMOUNT` are refused (they overflowed the ledger).
    """
    exact = _check_finite_nonneg(name, value)
    if exact > MAX_AMOUNT:
        raise InvalidPrivacyParameter(
            f"{name} {value!r} is too large: at most {MAX_AMOUNT:.0e} (ε or ρ) fits the ledger; "
            "a privacy budget is a small number such as 1.0"
        )
    return math.ceil(exact * MICRO)


@dataclass(frozen=True, slots=True)
class Cost:
    """An exact privacy cost in one measure.

    Args:
        measure: :class:`Measure.PURE` (amount is ε) or :class:`Measure.ZCDP` (ρ).
        micro: the amount in integer micro-units (10⁻⁶).

    Use the constructors :meth:`pure` and :meth:`zcdp` rather than ``micro``.
    """

    measure: Measure
    micro: int

    def __post_init__(self) -> None:
        if not isinstance(self.measure, Measure):
            try:
                object.__setattr__(self, "measure", Measure(self.measure))
            except ValueError as exc:
                raise InvalidPrivacyParameter(
                    f"unknown measure {self.measure!r}; use 'pure' or 'zcdp'"
                ) from exc
        if isinstance(self.micro, bool) or not isinstance(self.micro, int):
            raise InvalidPrivacyParameter(f"Cost.micro must be an int, got {self.micro!r}")
        if self.micro < 0:
            raise InvalidPrivacyParameter(f"a cost cannot be negative, got {self.micro} µ")

    # -- constructors -------------------------------------------------------
    @classmethod
    def pure(cls, epsilon: float | int | Fraction | Decimal) -> Cost:
        """An ε-DP cost (ε ≥ 0, rounded up to the next micro-unit)."""
        return cls(Measure.PURE, to_micro(epsilon, name="epsilon"))

    @classmethod
    def zcdp(cls, rho: float | int | Fraction | Decimal) -> Cost:
        """A ρ-zCDP cost (ρ ≥ 0, rounded up to the next micro-unit)."""
        return cls(Measure.ZCDP, to_micro(rho, name="rho"))

    @classmethod
    def zero(cls, measure: Measure | str = Measure.PURE) -> Cost:
        """No privacy loss, e.g. for a query of sensitivity 0."""
        return cls(Measure(measure), 0)

    # -- values -------------------------------------------------------------
    @property
    def amount(self) -> Fraction:
        """The exact amount (ε for pure, ρ for zCDP)."""
        return Fraction(self.micro, MICRO)

    @property
    def epsilon(self) -> float:
        """ε of a pure cost. For zCDP use :meth:`to_epsilon_delta`."""
        if self.measure is not Measure.PURE:
            raise InvalidPrivacyParameter(
                "this cost is in ρ-zCDP; use .rho or .to_epsilon_delta(delta=...)"
            )
        return float(self.amount)

    @property
    def rho(self) -> float:
        """ρ of a zCDP cost. A pure cost converts with :meth:`as_zcdp` first."""
        if self.measure is not Measure.ZCDP:
            raise InvalidPrivacyParameter("this cost is pure ε-DP; use .epsilon or .as_zcdp()")
        return float(self.amount)

    @property
    def is_zero(self) -> bool:
        return self.micro == 0

    # -- composition and conversion ----------------------------------------
    def as_zcdp(self) -> Cost:
        """The same guarantee in ρ-zCDP: ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4).

        Rounded up to the next micro-unit, so the converted amount never
        understates the loss.
        """
        if self.measure is Measure.ZCDP:
            return self
        rho = self.amount * self.amount / 2
        return Cost(Measure.ZCDP, math.ceil(rho * MICRO))

    def to_measure(self, measure: Measure | str) -> Cost:
        """Convert into ``measure``. zCDP → pure is refused (it does not hold)."""
        measure = Measure(measure)
        if measure is self.measure:
            return self
        if measure is Measure.ZCDP:
            return self.as_zcdp()
        raise InvalidPrivacyParameter(
            "a ρ-zCDP cost cannot be charged to a pure ε-DP pool: zCDP does not imply pure DP. "
            "Use a zCDP pool, or a pure mechanism (discrete Laplace)."
        )

    def to_epsilon_delta(self, *, delta: float) -> tuple[float, float]:
        """The (ε, δ)-DP guarantee this cost implies.

        Pure ε: (ε, 0) for any δ. ρ-zCDP: ``ε = ρ + 2·√(ρ·ln(1/δ))``
        (Bun & Steinke 2016, Prop. 1.3).

        Raises:
            InvalidPrivacyParameter: δ outside (0, 1) for a zCDP cost.
        """
        if self.measure is Measure.PURE:
            return float(self.amount), 0.0
        if not (isinstance(delta, (int, float)) and 0.0 < delta < 1.0):
            raise InvalidPrivacyParameter(f"delta must lie in (0, 1), got {delta!r}")
        rho = float(self.amount)
        return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)), float(delta)

    def __add__(self, other: object) -> Cost:
        """Sequential composition. Mixed measures compose in zCDP."""
        if not isinstance(other, Cost):
            return NotImplemented
        if self.measure is other.measure:
            return Cost(self.measure, self.micro + other.micro)
        return Cost(Measure.ZCDP, self.as_zcdp().micro + other.as_zcdp().micro)

    def __radd__(self, other: object) -> Cost:
        # Lets sum(costs) start from 0.
        if other == 0:
            return self
        if isinstance(other, Cost):
            return other.__add__(self)
        return NotImplemented

    def __le__(self, other: Cost) -> bool:
        if self.measure is not other.measure:
            raise InvalidPrivacyParameter("cannot compare costs in different measures")
        return self.micro <= other.micro

    def __lt__(self, other: Cost) -> bool:
        if self.measure is not other.measure:
            raise InvalidPrivacyParameter("cannot compare costs in different measures")
        return self.micro < other.micro

    def describe(self) -> str:
        """Human text: ``ε = 0.5`` or ``ρ = 0.125``."""
        symbol = "ε" if self.measure is Measure.PURE else "ρ"
        return f"{symbol} = {_fmt_amount(self.amount)}"

    def to_dict(self) -> dict[str, Any]:
        return {"measure": self.measure.value, "micro": self.micro, "amount": float(self.amount)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cost:
        return cls(Measure(data["measure"]), int(data["micro"]))


def _fmt_amount(value: Fraction) -> str:
    text = f"{float(value):.6f}".rstrip("0").rstrip(".")
    return text or "0"


Interval = tuple[float, float]


def _check_terms(name: str, terms: Any, arity: int) -> Any:
    """Validate ``terms``/``component_terms``: tuples of ``arity`` non-empty strings."""
    out = []
    for item in terms:
        t = tuple(item) if isinstance(item, (tuple, list)) else ()
        if len(t) != arity or not all(isinstance(x, str) and x.strip() for x in t):
            raise InvalidPrivacyParameter(
                f"release {name!r}: each term must be {arity} non-empty strings "
                f"({'label, ' if arity == 3 else ''}language, phrase), got {item!r}"
            )
        out.append(tuple(x.strip() for x in t))
    return tuple(out)


@dataclass(frozen=True, slots=True, repr=False)
class Release:
    """A differentially private statistic: the only form a statistic leaves the core in.

    Scalars have one value; a vector release (a histogram) has one value per
    label and is released by one mechanism call (one cost for the vector).

    Args:
        name: the query's name (``"mean_rating"``).
        values: the noisy value(s).
        intervals: a confidence interval per value, at level ``confidence``.
        mechanism: the mechanism that produced the noise (``"discrete_laplace"`` …),
            or ``"derived"`` for post-processing of other releases.
        noise_scale: the noise distribution's scale (b for Laplace, σ for Gaussian).
        cost: the privacy cost charged for it.
        fingerprint: the query id (fingerprint of query spec, dataset, window).
        kind: what the value measures: ``count``, ``sum``, ``mean``, ``proportion`` …
        unit: the unit of the value for readers (``records``, ``users``, ``stars``).
        labels: labels of a vector release's components; empty for a scalar.
        confidence: the level of the intervals (0.95 unless configured).
        privacy_unit: what neighbouring datasets differ in (``user``).
        window: the data window (``2026-W47``) or ``None``.
        seeded: made with a seeded (test) generator — **never publish**.
        small_threshold: values whose interval lies wholly below it are "small"
            (templates say "fewer than 5"); ``None`` disables the flag.
        delta: δ of an approximate-DP release (0 for pure ε-DP and zCDP costs).
        terms: how readers speak of it, as ``(language, phrase)`` pairs; the first
            phrase of a language is the reader-facing label, the others synonyms
            (``(("en", "mean rating"), ("en", "average rating"), ("zh", "平均评分"))``).
            The precision guard matches a figure to the release a sentence names.
        component_terms: the same per component of a vector release, as
            ``(component label, language, phrase)`` triples; a component's own
            label always names it too.

    .. versionchanged:: 0.2
       ``terms`` and ``component_terms`` (optional; omitted from :meth:`to_dict`
       when empty, so existing records serialise as before).
        notes: free-text remarks (post-processing, opt-ins).
        complete: ``False`` when the window had not ended when its data was read
            (released only on explicit opt-in, ``allow_incomplete``).
        estimand: what the value estimates, in words: the *bounded* statistic
            ("feedback records, at most 5 per user"), which can be lower than the
            raw figure when users exceed the bounds (bias, not noise).

    .. versionchanged:: unreleased ``complete`` and ``estimand``.

    Privacy: whatever guarantee ``cost`` states, per ``privacy_unit``; everything
    computed from a Release alone is post-processing and free.
    """

    name: str
    values: tuple[float, ...]
    intervals: tuple[Interval, ...]
    mechanism: str
    noise_scale: float
    cost: Cost
    fingerprint: str
    kind: str = "count"
    unit: str = ""
    labels: tuple[str, ...] = ()
    confidence: float = 0.95
    privacy_unit: str = "user"
    window: str | None = None
    seeded: bool = False
    small_threshold: float | None = 5.0
    delta: float = 0.0
    notes: tuple[str, ...] = field(default=())
    terms: tuple[tuple[str, str], ...] = ()
    component_terms: tuple[tuple[str, str, str], ...] = ()
    complete: bool = True
    estimand: str = ""

    def __post_init__(self) -> None:
        values = tuple(float(v) for v in self.values)
        intervals = tuple((float(lo), float(hi)) for lo, hi in self.intervals)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "intervals", intervals)
        object.__setattr__(self, "labels", tuple(str(x) for x in self.labels))
        object.__setattr__(self, "notes", tuple(str(x) for x in self.notes))
        object.__setattr__(self, "terms", _check_terms(self.name, self.terms, 2))
        object.__setattr__(
            self, "component_terms", _check_terms(self.name, self.component_terms, 3)
        )
        if not values:
            raise InvalidPrivacyParameter(f"release {self.name!r} has no values")
        if len(intervals) != len(values):
            raise InvalidPrivacyParameter(
                f"release {self.name!r}: {len(values)} values but {len(intervals)} intervals"
            )
        if self.labels and len(self.labels) != len(values):
            raise InvalidPrivacyParameter(
                f"release {self.name!r}: {len(values)} values but {len(self.labels)} labels"
            )
        if not self.labels and len(values) != 1:
            raise InvalidPrivacyParameter(f"vector release {self.name!r} needs labels")
        for v, (lo, hi) in zip(values, intervals, strict=True):
            if not (math.isfinite(v) and math.isfinite(lo) and math.isfinite(hi)):
                raise InvalidPrivacyParameter(f"release {self.name!r} has a non-finite value")
            if lo > hi:
                raise InvalidPrivacyParameter(f"release {self.name!r}: interval {lo} > {hi}")
            if not math.isfinite(hi - lo):  # [-1e308, 1e308]: its width overflows a float
                raise InvalidPrivacyParameter(
                    f"release {self.name!r}: the interval [{lo:g}, {hi:g}] is too wide to use"
                )
        if not 0.0 < self.confidence < 1.0:
            raise InvalidPrivacyParameter(f"confidence must lie in (0, 1), got {self.confidence}")
        if not (math.isfinite(self.noise_scale) and self.noise_scale >= 0):
            raise InvalidPrivacyParameter(
                f"noise_scale must be finite and ≥ 0, got {self.noise_scale}"
            )

    # -- scalar access -----------------------------------------------------------
    @property
    def is_vector(self) -> bool:
        return bool(self.labels)

    @property
    def value(self) -> float:
        """The noisy value of a scalar release."""
        self._require_scalar("value")
        return self.values[0]

    @property
    def interval(self) -> Interval:
        """The confidence interval of a scalar release."""
        self._require_scalar("interval")
        return self.intervals[0]

    @property
    def half_width(self) -> float:
        """Half the width of a scalar release's interval."""
        lo, hi = self.interval
        return (hi - lo) / 2.0

    @property
    def small(self) -> bool:
        """True when the whole interval lies below ``small_threshold``."""
        if self.small_threshold is None:
            return False
        return self.interval[1] < self.small_threshold

    def _require_scalar(self, what: str) -> None:
        if self.labels:
            raise TypeError(
                f"release {self.name!r} is a vector ({', '.join(self.labels)}); "
                f"index it by label before reading .{what}"
            )

    # -- vector access -------------------------------------------------------
    def __getitem__(self, label: str | int) -> Release:
        """One component of a vector release, as a scalar Release (post-processing)."""
        if not self.labels:
            raise TypeError(f"release {self.name!r} is a scalar and has no components")
        key = str(label)
        try:
            i = self.labels.index(key)
        except ValueError:
            raise KeyError(f"release {self.name!r} has no component {key!r}") from None
        return replace(
            self,
            name=f"{self.name}[{key}]",
            values=(self.values[i],),
            intervals=(self.intervals[i],),
            labels=(),
            terms=tuple((lang, p) for c, lang, p in self.component_terms if c == key),
            component_terms=(),
        )

    def components(self) -> Iterator[tuple[str, Release]]:
        """(label, scalar release) for each component of a vector release."""
        for label in self.labels:
            yield label, self[label]

    def __iter__(self) -> Iterator[Release]:
        if not self.labels:
            raise TypeError(f"release {self.name!r} is a scalar and cannot be iterated")
        return (self[label] for label in self.labels)

    def __len__(self) -> int:
        return len(self.values)

    # -- refuse raw text ---------------------------------------------------------
    def __str__(self) -> str:
        raise RawReleaseError(
            f"release {self.name!r} cannot be printed raw: pass it through a DP filter "
            "(band, approx, interval, pct or count) so its error band is shown"
        )

    def __format__(self, spec: str) -> str:
        raise RawReleaseError(
            f"release {self.name!r} cannot be formatted raw; use a DP filter "
            "(band, approx, interval, pct or count)"
        )

    def __repr__(self) -> str:
        # The repr names the release but not its value, so a debugging or
        # ``pprint`` path cannot leak a number without its band either.
        flag = " SEEDED-NOT-FOR-PUBLICATION" if self.seeded else ""
        return (
            f"<Release {self.name} window={self.window} mechanism={self.mechanism} "
            f"{self.cost.describe()}{flag}>"
        )

    # -- serialisation -------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "values": list(self.values),
            "intervals": [list(i) for i in self.intervals],
            "mechanism": self.mechanism,
            "noise_scale": self.noise_scale,
            "cost": self.cost.to_dict(),
            "fingerprint": self.fingerprint,
            "kind": self.kind,
            "unit": self.unit,
            "labels": list(self.labels),
            "confidence": self.confidence,
            "privacy_unit": self.privacy_unit,
            "window": self.window,
            "seeded": self.seeded,
            "small_threshold": self.small_threshold,
            "delta": self.delta,
            "notes": list(self.notes),
            **({"terms": [list(t) for t in self.terms]} if self.terms else {}),
            **(
                {"component_terms": [list(t) for t in self.component_terms]}
                if self.component_terms
                else {}
            ),
            "complete": self.complete,
            "estimand": self.estimand,
        }

    def terms_in(self, language: str) -> tuple[str, ...]:
        """The phrases naming this release in ``language`` (the label first)."""
        return tuple(p for lang, p in self.terms if lang == language)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Release:
        try:
            return cls(
                name=str(data["name"]),
                values=tuple(data["values"]),
                intervals=tuple((lo, hi) for lo, hi in data["intervals"]),
                mechanism=str(data["mechanism"]),
                noise_scale=float(data["noise_scale"]),
                cost=Cost.from_dict(data["cost"]),
                fingerprint=str(data["fingerprint"]),
                kind=str(data.get("kind", "count")),
                unit=str(data.get("unit", "")),
                labels=tuple(data.get("labels", ())),
                confidence=float(data.get("confidence", 0.95)),
                privacy_unit=str(data.get("privacy_unit", "user")),
                window=data.get("window"),
                seeded=bool(data.get("seeded", False)),
                small_threshold=data.get("small_threshold", 5.0),
                delta=float(data.get("delta", 0.0)),
                notes=tuple(data.get("notes", ())),
                terms=tuple(tuple(t) for t in data.get("terms", ())),
                component_terms=tuple(tuple(t) for t in data.get("component_terms", ())),
                complete=bool(data.get("complete", True)),
                estimand=str(data.get("estimand", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidPrivacyParameter):
                raise
            raise InvalidPrivacyParameter(f"malformed release record: {exc}") from exc

    def with_values(
        self, values: Sequence[float], intervals: Sequence[Interval], **changes: Any
    ) -> Release:
        """A copy with new values/intervals (used by post-processing helpers)."""
        return replace(self, values=tuple(values), intervals=tuple(intervals), **changes)


# ---------------------------------------------------------------- the releases file

RELEASES_SCHEMA = "dpllm.releases/1"
"""The ``schema`` tag of the one JSON format for a set of releases.

``dpllm weekly`` writes it (as part of ``report.json``), ``dpllm stats --json``
prints it and ``dpllm guard check -r`` reads it::

    {"schema": "dpllm.releases/1", "window": "2026-W47",
     "releases": {"<name>": Release.to_dict(), …},   # charged releases
     "derived": {"<name>": Release.to_dict(), …},    # free post-processing of them
     …}                                              # other keys are ignored

Readers also accept, for one release more, the older shapes: a list of
release records, ``{"releases": [record, …]}``, and the old ``stats --json``
object (``{name: record, …, "_budget": …}``); the old share names
``share_high``/``share_low`` are read as ``share_positive``/``share_negative``.
"""

RENAMED: Mapping[str, str] = {"share_high": "share_positive", "share_low": "share_negative"}
"""Old release names → current ones (read for one release more; see CHANGELOG)."""


def releases_document(
    releases: Mapping[str, Release],
    derived: Mapping[str, Release] | None = None,
    *,
    window: str | None,
) -> dict[str, Any]:
    """The releases as a ``dpllm.releases/1`` JSON object (see :data:`RELEASES_SCHEMA`)."""
    return {
        "schema": RELEASES_SCHEMA,
        "window": window,
        "releases": {name: rel.to_dict() for name, rel in releases.items()},
        "derived": {name: rel.to_dict() for name, rel in (derived or {}).items()},
    }


def read_releases_document(data: Any) -> dict[str, Release]:
    """Every release (charged and derived) of a releases document, by name.

    Raises:
        InvalidPrivacyParameter: not a releases document, or a malformed record.
    """

    def records(value: Any, where: str) -> dict[str, Any]:
        if isinstance(value, list):
            return {str(r.get("name", i)) if isinstance(r, dict) else str(i): r
                    for i, r in enumerate(value)}  # fmt: skip
        if isinstance(value, dict):
            return dict(value)
        raise InvalidPrivacyParameter(f"{where} must be an object of release records")

    if isinstance(data, list):
        found = records(data, "the list")
    elif isinstance(data, dict) and "releases" in data:
        found = records(data["releases"], "'releases'")
        found.update(records(data.get("derived") or {}, "'derived'"))
    elif isinstance(data, dict) and all(
        isinstance(v, dict) and "values" in v for k, v in data.items() if not k.startswith("_")
    ):
        found = {k: v for k, v in data.items() if not k.startswith("_")}
    else:
        raise InvalidPrivacyParameter(
            f"not a releases document: expected an object with a 'releases' key "
            f"(schema {RELEASES_SCHEMA}, as written by dpllm weekly and dpllm stats --json)"
        )
    out: dict[str, Release] = {}
    for name, record in found.items():
        if not isinstance(record, dict):
            raise InvalidPrivacyParameter(f"release {name!r} is not an object")
        release = Release.from_dict(record)
        head, dot, tail = release.name.rpartition(".")
        if tail in RENAMED:
            release = replace(release, name=head + dot + RENAMED[tail])
        out[RENAMED.get(name, name)] = release
    return out
