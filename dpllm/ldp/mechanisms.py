"""Local differential privacy: clients randomise a value on their own device.

In the **local** model no one — not the server, not dpllm's ledger, not an
operator with database access — ever sees a user's true value: the client
randomises it before it leaves the device, and the server only estimates
population frequencies from many randomised reports. The price is accuracy: for
the same ε, local DP needs roughly ``1/ε²``-times more users than central DP for
the same error (see "Local or central DP?" in the docs, docs/concepts/local-dp.md).

Two randomisers, each ε-LDP per report (the unit is one user's one report of
one metric in one window):

* :class:`KRandomizedResponse` (generalised randomised response, k-RR) for small
  domains such as ratings 1–5: report the true value with probability
  ``p = e^ε / (e^ε + k − 1)``, otherwise one of the other ``k − 1`` values
  uniformly, each with ``q = 1 / (e^ε + k − 1)``. Any two inputs give any output
  with probabilities in ratio at most ``p/q = e^ε``.
* :class:`OptimisedUnaryEncoding` (OUE) for larger domains: one-hot encode, keep
  the true bit at 1 with ``p = 1/2`` and set every other bit to 1 with
  ``q = 1/(e^ε + 1)``. Changing the input changes two bits; the worst-case ratio
  is ``(p/q)·((1−q)/(1−p)) = e^ε`` (Wang, Blocki, Li & Jha, "Locally
  Differentially Private Protocols for Frequency Estimation", USENIX Security
  2017, §4.4). OUE's variance does not grow with k, which is why it beats k-RR
  when ``k > 3e^ε + 2``.

**Estimators** (server side, from the sufficient statistics of an
:class:`LDPAggregate`): with ``n`` reports and ``c_v`` of them supporting value
*v* (k-RR: reported *v*; OUE: bit *v* set), ``π̂_v = c_v/n`` has
``E[π̂_v] = q + f_v·(p − q)``, so ``f̂_v = (π̂_v − q)/(p − q)`` is unbiased for
the true frequency ``f_v``, with ``Var[f̂_v] = π_v(1 − π_v) / (n(p − q)²)``
(Wang et al. 2017, Thm. 2). The interval is ``f̂_v ± z·√(π̂_v(1−π̂_v)/n)/(p − q)``
with ``z = Φ⁻¹(1 − α/2)`` (normal approximation; the estimate is a sum of n
independent reports). The mean is ``μ̂ = Σ_v v·f̂_v = (ȳ − q·Σ_v v)/(p − q)``
where ``y`` is a report's value-weighted support (k-RR: the reported value), so
``Var[μ̂] = Var[y]/(n(p − q)²)``, estimated with the sample variance of ``y``.

Randomness: the secure default is OpenDP's ``make_randomized_response`` (k-RR)
and ``make_randomized_response_bool`` (OUE bits); a seeded numpy generator is
used only when passed explicitly (tests, simulations).

This module is pure: the SQLite store and the HTTP ingest live in
:mod:`dpllm.ldp.ingest` (the edge).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from dpllm.errors import InvalidPrivacyParameter, InvalidReport
from dpllm.windows import parse_week

__all__ = [
    "LDPAggregate",
    "LDPEstimate",
    "LDPReport",
    "KRandomizedResponse",
    "LocalRandomizer",
    "OptimisedUnaryEncoding",
    "RATINGS",
    "make_randomizer",
]

RATINGS: tuple[int, ...] = (1, 2, 3, 4, 5)
"""The default domain: star ratings 1–5."""

# Whole-string matches (``\Z``): ``$`` also matches before a trailing newline.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}\Z")
_PSEUDONYM = re.compile(r"[A-Za-z0-9_.:\-]{1,128}\Z")
_MAX_DOMAIN = 4096


def _epsilon(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidPrivacyParameter(f"epsilon must be a finite number, got {value!r}")
    if value <= 0:
        raise InvalidPrivacyParameter(f"epsilon must be > 0, got {value!r}")
    if value > 50:
        raise InvalidPrivacyParameter(
            f"epsilon {value} is too large for local DP (e^ε overflows the estimator); use ≤ 50"
        )
    return float(value)


def _domain(values: Sequence[int], *, minimum: int) -> tuple[int, ...]:
    try:
        dom = tuple(values)
    except TypeError as exc:
        raise InvalidPrivacyParameter(f"domain must be a sequence of ints: {exc}") from exc
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in dom):
        raise InvalidPrivacyParameter(f"domain values must be ints, got {dom!r}")
    if len(set(dom)) != len(dom):
        raise InvalidPrivacyParameter("domain values must be distinct")
    if not minimum <= len(dom) <= _MAX_DOMAIN:
        raise InvalidPrivacyParameter(
            f"domain must have between {minimum} and {_MAX_DOMAIN} values, got {len(dom)}"
        )
    return dom


@runtime_checkable
class LocalRandomizer(Protocol):
    """A client-side ε-LDP randomiser with its estimator parameters."""

    @property
    def name(self) -> str: ...

    @property
    def epsilon(self) -> float: ...

    @property
    def domain(self) -> tuple[int, ...]: ...

    @property
    def p(self) -> float:
        """P(a report supports the true value)."""
        ...

    @property
    def q(self) -> float:
        """P(a report supports a given other value)."""
        ...

    def randomise(self, value: int, *, rng: np.random.Generator | None = None) -> tuple[int, ...]:
        """The report payload for ``value`` (secure randomness unless ``rng`` is given)."""
        ...

    def support(self, payload: Sequence[int]) -> tuple[int, ...]:
        """Indices into ``domain`` that the (validated) payload supports."""
        ...

    def simulate(self, values: npt.NDArray[np.int64], *, rng: np.random.Generator) -> LDPAggregate:
        """Randomise a whole population at once (seeded; simulations and tests only)."""
        ...


def _index(domain: tuple[int, ...], value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidReport(f"the value must be an int of the domain {domain}, got {value!r}")
    try:
        return domain.index(int(value))
    except ValueError:
        raise InvalidReport(
            f"value {value!r} is outside the domain {domain[0]}…{domain[-1]}; "
            "clamp it on the client before randomising"
        ) from None


def _indices(domain: tuple[int, ...], values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    lookup = {v: j for j, v in enumerate(domain)}
    try:
        return np.fromiter((lookup[int(v)] for v in values), dtype=np.int64, count=values.size)
    except KeyError as exc:
        raise InvalidReport(f"simulated value {exc} is outside the domain {domain}") from None


@lru_cache(maxsize=64)
def _opendp_rr(categories: tuple[int, ...], prob: float) -> Any:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp.m.make_randomized_response(list(categories), prob)


@lru_cache(maxsize=64)
def _opendp_bool(prob: float) -> Any:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp.m.make_randomized_response_bool(prob)


@dataclass(frozen=True, kw_only=True)
class KRandomizedResponse:
    """Generalised randomised response over a small integer domain (default 1–5).

    Args:
        epsilon: ε > 0 of one report.
        domain: the possible values (k ≥ 2), e.g. ``(1, 2, 3, 4, 5)``.

    Privacy: ε-LDP per report (user, metric, window): ``p/q = e^ε`` bounds the
    ratio of any output's probability under any two inputs.
    """

    epsilon: float
    domain: tuple[int, ...] = RATINGS
    name: str = field(default="krr", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _epsilon(self.epsilon))
        object.__setattr__(self, "domain", _domain(self.domain, minimum=2))

    @property
    def p(self) -> float:
        k = len(self.domain)
        return 1.0 / (1.0 + (k - 1) * math.exp(-self.epsilon))

    @property
    def q(self) -> float:
        return (1.0 - self.p) / (len(self.domain) - 1)

    def randomise(self, value: int, *, rng: np.random.Generator | None = None) -> tuple[int, ...]:
        i = _index(self.domain, value)
        if rng is None:
            return (int(_opendp_rr(self.domain, self.p)(self.domain[i])),)
        if rng.random() < self.p:
            return (self.domain[i],)
        k = len(self.domain)
        return (self.domain[(i + int(rng.integers(1, k))) % k],)

    def sample(self, value: int, *, size: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """``size`` seeded reports of one value (the audit's sampler): shape ``(size,)``."""
        i = _index(self.domain, value)
        k = len(self.domain)
        keep = rng.random(size) < self.p
        other = (i + rng.integers(1, k, size=size)) % k
        return np.asarray(self.domain, dtype=np.int64)[np.where(keep, i, other)]

    def support(self, payload: Sequence[int]) -> tuple[int, ...]:
        if len(payload) != 1:
            raise InvalidReport("a k-RR payload is exactly one value")
        return (_index(self.domain, payload[0]),)

    def simulate(self, values: npt.NDArray[np.int64], *, rng: np.random.Generator) -> LDPAggregate:
        idx = _indices(self.domain, values)
        k = len(self.domain)
        keep = rng.random(values.size) < self.p
        shifted = (idx + rng.integers(1, k, size=values.size)) % k
        reported = np.where(keep, idx, shifted)
        counts = np.bincount(reported, minlength=k)
        y = np.asarray(self.domain, dtype=np.float64)[reported]
        return LDPAggregate.from_arrays(self, counts, y)


@dataclass(frozen=True, kw_only=True)
class OptimisedUnaryEncoding:
    """Optimised unary encoding (OUE) for larger domains.

    Args:
        epsilon: ε > 0 of one report.
        domain: the possible values (k ≥ 2).

    Privacy: ε-LDP per report: bits are randomised independently with
    ``p = 1/2`` (true bit stays 1) and ``q = 1/(e^ε + 1)`` (other bits become 1);
    two inputs differ in two bits, so the ratio is at most
    ``(p(1−q))/((1−p)q) = e^ε`` (Wang et al. 2017, §4.4).
    """

    epsilon: float
    domain: tuple[int, ...]
    name: str = field(default="oue", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _epsilon(self.epsilon))
        object.__setattr__(self, "domain", _domain(self.domain, minimum=2))

    @property
    def p(self) -> float:
        return 0.5

    @property
    def q(self) -> float:
        return 1.0 / (math.exp(self.epsilon) + 1.0)

    def randomise(self, value: int, *, rng: np.random.Generator | None = None) -> tuple[int, ...]:
        i = _index(self.domain, value)
        k = len(self.domain)
        if rng is None:
            # keep-probabilities of OpenDP's boolean randomised response: a 0 bit
            # stays 0 with 1 − q; the 1 bit stays 1 with 1/2.
            zero, one = _opendp_bool(1.0 - self.q), _opendp_bool(0.5)
            return tuple(int(bool(one(True) if j == i else zero(False))) for j in range(k))
        bits = (rng.random(k) < self.q).astype(int)
        bits[i] = int(rng.random() < self.p)
        return tuple(int(b) for b in bits)

    def sample(self, value: int, *, size: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """``size`` seeded reports of one value (the audit's sampler): shape ``(size, k)``."""
        i = _index(self.domain, value)
        bits = rng.random((size, len(self.domain))) < self.q
        bits[:, i] = rng.random(size) < self.p
        return bits.astype(np.int64)

    def support(self, payload: Sequence[int]) -> tuple[int, ...]:
        if len(payload) != len(self.domain) or any(b not in (0, 1) for b in payload):
            raise InvalidReport(f"an OUE payload is {len(self.domain)} bits (0 or 1)")
        return tuple(j for j, b in enumerate(payload) if b)

    def simulate(self, values: npt.NDArray[np.int64], *, rng: np.random.Generator) -> LDPAggregate:
        idx = _indices(self.domain, values)
        n, k = values.size, len(self.domain)
        counts = np.zeros(k, dtype=np.int64)
        y = np.zeros(n, dtype=np.float64)
        weights = np.asarray(self.domain, dtype=np.float64)
        for start in range(0, n, 20_000):  # bounded memory for large k
            block = idx[start : start + 20_000]
            bits = rng.random((block.size, k)) < self.q
            bits[np.arange(block.size), block] = rng.random(block.size) < self.p
            counts += bits.sum(axis=0)
            y[start : start + block.size] = bits @ weights
        return LDPAggregate.from_arrays(self, counts, y)


def make_randomizer(mechanism: str, *, epsilon: float, domain: Sequence[int]) -> LocalRandomizer:
    """``"krr"`` or ``"oue"`` by name (as written in a report)."""
    if mechanism == "krr":
        return KRandomizedResponse(epsilon=epsilon, domain=tuple(domain))
    if mechanism == "oue":
        return OptimisedUnaryEncoding(epsilon=epsilon, domain=tuple(domain))
    raise InvalidReport(f"unknown LDP mechanism {mechanism!r}; use 'krr' or 'oue'")


@dataclass(frozen=True, kw_only=True)
class LDPReport:
    """One randomised report, as a client sends it.

    Args:
        metric: the metric's name (``course_rating``).
        window: the ISO week it belongs to (``2026-W47``).
        user: a stable pseudonym of the user (never a raw id or e-mail; see
            :func:`dpllm.ldp.ingest.pseudonym`), used only to allow one report per
            user per metric per window.
        mechanism: ``"krr"`` or ``"oue"``.
        epsilon: the ε the client randomised with.
        payload: k-RR: ``(value,)``; OUE: one 0/1 bit per domain value.

    Privacy: ε-LDP for the user's value in this metric and window; reports of
    different metrics by one user compose (their ε add up).
    """

    metric: str
    window: str
    user: str
    mechanism: str
    epsilon: float
    payload: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or not _NAME.match(self.metric):
            raise InvalidReport(f"metric {self.metric!r} must be a plain name")
        try:
            parse_week(self.window)
        except ValueError as exc:
            raise InvalidReport(str(exc)) from exc
        if not isinstance(self.user, str) or not _PSEUDONYM.match(self.user):
            raise InvalidReport(
                "user must be a pseudonym of 1–128 letters, digits or _.:- "
                "(derive it with dpllm.ldp.ingest.pseudonym)"
            )
        if self.mechanism not in ("krr", "oue"):
            raise InvalidReport(f"unknown LDP mechanism {self.mechanism!r}; use 'krr' or 'oue'")
        try:
            object.__setattr__(self, "epsilon", _epsilon(self.epsilon))
        except InvalidPrivacyParameter as exc:
            raise InvalidReport(str(exc)) from exc
        payload = tuple(self.payload)
        if not payload or len(payload) > _MAX_DOMAIN:
            raise InvalidReport("payload must hold between 1 and 4096 ints")
        if not all(isinstance(b, int) and not isinstance(b, bool) for b in payload):
            raise InvalidReport("payload values must be ints")
        object.__setattr__(self, "payload", payload)

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "window": self.window,
            "user": self.user,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "payload": list(self.payload),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LDPReport:
        """Parse and validate a report.

        Raises:
            InvalidReport: a field is missing, of the wrong type or out of range.
        """
        if not isinstance(data, Mapping):
            raise InvalidReport("a report must be a JSON object")
        extra = set(data) - {"metric", "window", "user", "mechanism", "epsilon", "payload"}
        if extra:
            raise InvalidReport(f"unknown report field(s): {', '.join(sorted(extra))}")
        try:
            payload = data["payload"]
            if not isinstance(payload, list | tuple):
                raise InvalidReport("payload must be a list of ints")
            return cls(
                metric=data["metric"],
                window=data["window"],
                user=data["user"],
                mechanism=data["mechanism"],
                epsilon=data["epsilon"],
                payload=tuple(payload),
            )
        except KeyError as exc:
            raise InvalidReport(f"report is missing the field {exc}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> LDPReport:
        try:
            data = json.loads(text)
        except RecursionError:
            raise InvalidReport(
                "a report must be a flat JSON object; this one nests too deeply"
            ) from None
        except ValueError as exc:  # not JSON, not UTF-8, or an int of over 4300 digits
            raise InvalidReport(f"a report must be JSON: {exc}") from None
        return cls.from_dict(data)


@dataclass(frozen=True, slots=True)
class LDPEstimate:
    """Population estimates from n reports: frequencies, counts and mean, with intervals.

    ``frequencies[j]`` estimates the share of users whose true value is
    ``domain[j]``; ``mean`` is clamped (with its interval) into the domain's
    range. Intervals are normal-approximation intervals at ``confidence``.
    """

    metric: str
    mechanism: str
    epsilon: float
    domain: tuple[int, ...]
    n: int
    frequencies: tuple[float, ...]
    frequency_intervals: tuple[tuple[float, float], ...]
    mean: float
    mean_interval: tuple[float, float]
    confidence: float

    @property
    def counts(self) -> tuple[float, ...]:
        """Estimated number of users per value (``n·f̂``)."""
        return tuple(self.n * f for f in self.frequencies)


@dataclass(frozen=True, slots=True)
class LDPAggregate:
    """Sufficient statistics of n reports: support counts, Σy and Σy².

    Args:
        randomizer: the metric's randomiser (all reports used the same one).
        n: number of reports.
        counts: per domain value, how many reports support it.
        sum_y, sum_y2: Σ and Σ² of each report's value-weighted support.
    """

    randomizer: LocalRandomizer
    n: int
    counts: tuple[int, ...]
    sum_y: float
    sum_y2: float

    @classmethod
    def empty(cls, randomizer: LocalRandomizer) -> LDPAggregate:
        return cls(randomizer, 0, (0,) * len(randomizer.domain), 0.0, 0.0)

    @classmethod
    def from_arrays(
        cls, randomizer: LocalRandomizer, counts: npt.NDArray[np.int64], y: npt.NDArray[np.float64]
    ) -> LDPAggregate:
        return cls(
            randomizer,
            int(y.size),
            tuple(int(c) for c in counts),
            float(y.sum()),
            float((y * y).sum()),
        )

    def add(self, payload: Sequence[int]) -> LDPAggregate:
        """This aggregate plus one report's payload (validated against the randomiser)."""
        support = self.randomizer.support(payload)
        counts = list(self.counts)
        for j in support:
            counts[j] += 1
        y = float(sum(self.randomizer.domain[j] for j in support))
        return LDPAggregate(
            self.randomizer, self.n + 1, tuple(counts), self.sum_y + y, self.sum_y2 + y * y
        )

    def estimate(self, *, metric: str = "", confidence: float = 0.95) -> LDPEstimate:
        """Unbiased frequency and mean estimates with their intervals.

        Raises:
            InvalidReport: fewer than two reports (no variance estimate).
            InvalidPrivacyParameter: ``confidence`` outside (0, 1).

        Privacy: post-processing of ε-LDP reports: free.
        """
        if not 0.0 < confidence < 1.0:
            raise InvalidPrivacyParameter(f"confidence must lie in (0, 1), got {confidence!r}")
        if self.n < 2:
            raise InvalidReport(f"need at least 2 reports to estimate, got {self.n}")
        r = self.randomizer
        n, p, q = self.n, r.p, r.q
        z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
        freqs: list[float] = []
        ivs: list[tuple[float, float]] = []
        for c in self.counts:
            pi = c / n
            f = (pi - q) / (p - q)
            half = z * math.sqrt(pi * (1.0 - pi) / n) / (p - q)
            freqs.append(f)
            ivs.append((f - half, f + half))
        ybar = self.sum_y / n
        var_y = max(0.0, (self.sum_y2 - n * ybar * ybar) / (n - 1))
        mean = (ybar - q * sum(r.domain)) / (p - q)
        half = z * math.sqrt(var_y / n) / (p - q)
        lo_d, hi_d = min(r.domain), max(r.domain)

        def clamp(x: float) -> float:
            return min(max(x, lo_d), hi_d)

        return LDPEstimate(
            metric=metric,
            mechanism=r.name,
            epsilon=r.epsilon,
            domain=r.domain,
            n=n,
            frequencies=tuple(freqs),
            frequency_intervals=tuple(ivs),
            mean=clamp(mean),
            mean_interval=(clamp(mean - half), clamp(mean + half)),
            confidence=confidence,
        )
