"""Local DP: k-RR and OUE are ε-LDP, and their estimators are unbiased within their intervals.

Statistical assertions hold with probability ≥ 1 − 10⁻⁶ (intervals at
confidence 1 − 10⁻⁶ / #values, Bonferroni over the values of one test).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpllm.errors import InvalidPrivacyParameter, InvalidReport
from dpllm.ldp.mechanisms import (
    KRandomizedResponse,
    LDPAggregate,
    LDPReport,
    OptimisedUnaryEncoding,
    make_randomizer,
)
from dpllm.privacy.audit import audit_samples
from dpllm.privacy.noise import FloatArray

ALPHA = 1e-6


def _population(rng: np.random.Generator, domain: tuple[int, ...], n: int) -> np.ndarray:
    weights = rng.dirichlet(np.ones(len(domain)))
    return rng.choice(np.asarray(domain), size=n, p=weights)


@pytest.mark.parametrize(
    "randomizer",
    [
        KRandomizedResponse(epsilon=1.0),
        KRandomizedResponse(epsilon=0.3),
        OptimisedUnaryEncoding(epsilon=1.0, domain=tuple(range(1, 41))),
        OptimisedUnaryEncoding(epsilon=2.0, domain=(1, 2, 3, 4, 5)),
    ],
    ids=lambda r: f"{r.name}-eps{r.epsilon}-k{len(r.domain)}",
)
def test_estimators_unbiased_within_intervals(randomizer: KRandomizedResponse) -> None:
    rng = np.random.default_rng(11)
    values = _population(rng, randomizer.domain, 50_000)
    truth = np.array([np.mean(values == v) for v in randomizer.domain])
    agg = randomizer.simulate(values, rng=rng)
    conf = 1.0 - ALPHA / (len(randomizer.domain) + 1)
    est = agg.estimate(metric="m", confidence=conf)
    for f, (lo, hi) in zip(truth, est.frequency_intervals, strict=True):
        assert lo <= f <= hi
    assert est.mean_interval[0] <= float(values.mean()) <= est.mean_interval[1]
    assert est.n == values.size and est.mechanism == randomizer.name


def test_interval_coverage_is_nominal() -> None:
    # 400 independent populations: the 95% mean interval covers the truth at a
    # rate consistent with 0.95 (two-sided binomial bounds at α = 1e-6).
    from scipy.stats import binom

    rng = np.random.default_rng(5)
    krr = KRandomizedResponse(epsilon=1.0)
    values = _population(rng, krr.domain, 5_000)
    hits = 0
    trials = 400
    for _ in range(trials):
        est = krr.simulate(values, rng=rng).estimate(confidence=0.95)
        hits += est.mean_interval[0] <= values.mean() <= est.mean_interval[1]
    lo, hi = binom.ppf(ALPHA, trials, 0.95), binom.isf(ALPHA, trials, 0.95)
    assert lo <= hits <= hi


def test_variance_formula_matches_simulation() -> None:
    # Var[f̂_v] = π_v(1 − π_v)/(n(p − q)²): the empirical variance over 300 runs
    # lies within a chi-square band (α = 1e-6) of the formula.
    from scipy.stats import chi2

    rng = np.random.default_rng(9)
    oue = OptimisedUnaryEncoding(epsilon=1.0, domain=(1, 2, 3, 4, 5, 6, 7, 8))
    values = _population(rng, oue.domain, 2_000)
    f0 = float(np.mean(values == oue.domain[0]))
    pi = oue.q + f0 * (oue.p - oue.q)
    var = pi * (1 - pi) / (values.size * (oue.p - oue.q) ** 2)
    runs = 300
    ests = [oue.simulate(values, rng=rng).estimate().frequencies[0] for _ in range(runs)]
    stat = (runs - 1) * float(np.var(ests, ddof=1)) / var
    assert chi2.ppf(ALPHA, runs - 1) <= stat <= chi2.isf(ALPHA, runs - 1)


def test_krr_probabilities() -> None:
    krr = KRandomizedResponse(epsilon=math.log(3))
    assert krr.p / krr.q == pytest.approx(3.0)
    assert krr.p + 4 * krr.q == pytest.approx(1.0)
    oue = OptimisedUnaryEncoding(epsilon=math.log(3), domain=(1, 2, 3))
    ratio = oue.p * (1 - oue.q) / ((1 - oue.p) * oue.q)
    assert ratio == pytest.approx(3.0)


def test_opendp_agrees_on_krr_epsilon() -> None:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    krr = KRandomizedResponse(epsilon=0.8)
    meas = dp.m.make_randomized_response(list(krr.domain), krr.p)
    assert meas.map(1) == pytest.approx(0.8, rel=1e-9)


def test_krr_is_epsilon_ldp_by_audit() -> None:
    krr = KRandomizedResponse(epsilon=1.0)
    rng = np.random.default_rng(3)

    def sampler(value: int):  # type: ignore[no-untyped-def]
        def draw(n: int) -> FloatArray:
            return np.array([krr.randomise(value, rng=rng)[0] for _ in range(n)], dtype=float)

        return draw

    result = audit_samples(
        sampler(1), sampler(5), claimed_epsilon=1.0, n_select=20_000, n_estimate=100_000
    )
    assert result.passed, result.describe()
    assert result.empirical_epsilon > 0.8


def test_secure_randomisation_returns_valid_payloads() -> None:
    krr = KRandomizedResponse(epsilon=1.0)
    for v in krr.domain:
        (out,) = krr.randomise(v)
        assert out in krr.domain
    oue = OptimisedUnaryEncoding(epsilon=1.0, domain=tuple(range(10)))
    bits = oue.randomise(4)
    assert len(bits) == 10 and set(bits) <= {0, 1}
    assert oue.support(bits) == tuple(j for j, b in enumerate(bits) if b)


def test_aggregate_add_matches_simulate() -> None:
    krr = KRandomizedResponse(epsilon=1.0)
    rng = np.random.default_rng(1)
    agg = LDPAggregate.empty(krr)
    payloads = [krr.randomise(int(v), rng=rng) for v in rng.integers(1, 6, 500)]
    for p in payloads:
        agg = agg.add(p)
    assert agg.n == 500 and sum(agg.counts) == 500
    assert agg.sum_y == pytest.approx(sum(p[0] for p in payloads))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"epsilon": 0.0}, InvalidPrivacyParameter),
        ({"epsilon": float("nan")}, InvalidPrivacyParameter),
        ({"epsilon": 1.0, "domain": (1,)}, InvalidPrivacyParameter),
        ({"epsilon": 1.0, "domain": (1, 1, 2)}, InvalidPrivacyParameter),
        ({"epsilon": True}, InvalidPrivacyParameter),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        KRandomizedResponse(**kwargs)  # type: ignore[arg-type]


def test_out_of_domain_value_is_rejected() -> None:
    with pytest.raises(InvalidReport, match="clamp"):
        KRandomizedResponse(epsilon=1.0).randomise(6)
    with pytest.raises(InvalidReport):
        OptimisedUnaryEncoding(epsilon=1.0, domain=(1, 2)).support((1, 0, 1))
    with pytest.raises(InvalidReport):
        make_randomizer("rappor", epsilon=1.0, domain=(1, 2))


def test_report_json_round_trip_and_validation() -> None:
    rep = LDPReport(
        metric="course_rating",
        window="2026-W47",
        user="u:ab12",
        mechanism="krr",
        epsilon=1.0,
        payload=(4,),
    )
    assert LDPReport.from_json(rep.to_json()) == rep
    bad = rep.to_dict()
    for key, value in [
        ("window", "2026-47"),
        ("user", "alice@example.com"),
        ("epsilon", -1),
        ("mechanism", "laplace"),
        ("payload", "4"),
        ("payload", [True]),
    ]:
        with pytest.raises(InvalidReport):
            LDPReport.from_dict({**bad, key: value})
    with pytest.raises(InvalidReport, match="unknown"):
        LDPReport.from_dict({**bad, "raw": 5})
    with pytest.raises(InvalidReport, match="missing"):
        LDPReport.from_dict({k: v for k, v in bad.items() if k != "payload"})
    with pytest.raises(InvalidReport):
        LDPReport.from_json(b"{not json")


def test_too_few_reports() -> None:
    with pytest.raises(InvalidReport):
        LDPAggregate.empty(KRandomizedResponse(epsilon=1.0)).estimate()
