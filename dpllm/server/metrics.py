"""``/metrics``: the proxy's counters in Prometheus' text format (version 0.0.4).

Only counts and durations, never a value, a prompt, an answer or a key: labels are
route templates, methods, status codes, error classes, entity types, guard rules
and pool names (all from the configuration or the code, none from a request's
text). One set per process: with ``--workers N`` each worker answers its own
(scrape each, or sum them).

==========================================  =========  ==============================
metric                                      type       labels
==========================================  =========  ==============================
``dpllm_http_requests_total``               counter    method, route, status
``dpllm_http_request_duration_seconds``     histogram  route
``dpllm_upstream_errors_total``             counter    error (dpllm's error class)
``dpllm_client_disconnects_total``          counter    (none)
``dpllm_redactions_total``                  counter    entity
``dpllm_guard_violations_total``            counter    rule
``dpllm_budget_charges_total``              counter    pool
``dpllm_budget_refusals_total``             counter    pool, reason (exceeded|pending)
==========================================  =========  ==============================
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dpllm.errors import BudgetExceeded, BudgetPending
from dpllm.server.abandon import check_abandoned

__all__ = [
    "BUCKETS",
    "MeteredGuard",
    "MeteredLedger",
    "MeteredRedactor",
    "Metrics",
    "MetricsMiddleware",
]

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Request-duration histogram bounds (seconds)."""

_HELP = {
    "dpllm_http_requests_total": ("counter", "HTTP requests answered"),
    "dpllm_upstream_errors_total": ("counter", "Upstream model failures, by dpllm error class"),
    "dpllm_client_disconnects_total": ("counter", "Chat requests abandoned by their client"),
    "dpllm_redactions_total": ("counter", "Spans redacted, by entity type"),
    "dpllm_guard_violations_total": ("counter", "Figures the precision guard refused, by rule"),
    "dpllm_budget_charges_total": ("counter", "Privacy-budget charges committed, by pool"),
    "dpllm_budget_refusals_total": ("counter", "Charges refused or queued, by pool"),
}
_DURATION = "dpllm_http_request_duration_seconds"

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels, extra: str = "") -> str:
    parts = [f'{k}="{_escape(v)}"' for k, v in labels]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class Metrics:
    """Thread-safe counters and one histogram; :meth:`render` writes the text format."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, float]] = defaultdict(dict)
        self._hist: dict[Labels, list[int]] = {}
        self._hist_sum: dict[Labels, float] = defaultdict(float)

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        """Add ``amount`` to counter ``name`` with ``labels``."""
        if name not in _HELP:
            raise KeyError(f"unknown metric {name!r}")
        key = tuple(sorted(labels.items()))
        with self._lock:
            series = self._counters[name]
            series[key] = series.get(key, 0.0) + amount

    def observe(self, seconds: float, **labels: str) -> None:
        """Record one request duration."""
        key = tuple(sorted(labels.items()))
        with self._lock:
            counts = self._hist.setdefault(key, [0] * (len(BUCKETS) + 1))
            counts[bisect.bisect_left(BUCKETS, seconds)] += 1
            self._hist_sum[key] += seconds

    def render(self) -> str:
        """Everything, in Prometheus' text exposition format."""
        lines: list[str] = []
        with self._lock:
            for name, (kind, text) in _HELP.items():
                lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
                for key, value in sorted(self._counters.get(name, {}).items()):
                    lines.append(f"{name}{_labels(key)} {value:g}")
            lines += [
                f"# HELP {_DURATION} Time to answer an HTTP request (to the end of its body)",
                f"# TYPE {_DURATION} histogram",
            ]
            for key, counts in sorted(self._hist.items()):
                running = 0
                for bound, count in zip((*BUCKETS, float("inf")), counts, strict=True):
                    running += count
                    le = "+Inf" if bound == float("inf") else f"{bound:g}"
                    bucket = _labels(key, 'le="' + le + '"')
                    lines.append(f"{_DURATION}_bucket{bucket} {running}")
                lines.append(f"{_DURATION}_sum{_labels(key)} {self._hist_sum[key]:.6f}")
                lines.append(f"{_DURATION}_count{_labels(key)} {running}")
        return "\n".join(lines) + "\n"


class MetricsMiddleware:
    """Counts every HTTP request by route template and status, and times it (pure ASGI)."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.inc(
                "dpllm_http_requests_total",
                method=scope["method"],
                route=route,
                status=str(status),
            )
            self.metrics.observe(time.perf_counter() - started, route=route)


class MeteredRedactor:
    """A :class:`~dpllm.chat.protection.TextRedactor` that counts what ``inner`` redacts,
    and stops before each text when its request has been abandoned
    (:func:`~dpllm.server.abandon.check_abandoned`)."""

    def __init__(self, inner: Any, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    def _count(self, result: Any) -> Any:
        counts = getattr(result, "counts", None)
        if isinstance(counts, Mapping):
            for entity, n in counts.items():
                if n:
                    self.metrics.inc("dpllm_redactions_total", n, entity=str(entity))
        return result

    def redact(self, text: str, *, language: str = "auto", allow: Collection[str] = ()) -> Any:
        check_abandoned()
        return self._count(self.inner.redact(text, language=language, allow=allow))

    def redact_units(
        self, units: Sequence[str], *, language: str = "auto", allow: Collection[str] = ()
    ) -> list[Any]:
        """``inner.redact_units`` (one NER pass for all units), each result counted;
        unit by unit through :meth:`redact` when ``inner`` has no batch method."""
        many = getattr(self.inner, "redact_units", None)
        if many is None:
            return [self.redact(u, language=language, allow=allow) for u in units]
        check_abandoned()
        return [self._count(r) for r in many(units, language=language, allow=allow)]

    def pseudonymise(
        self, text: str, *, vault: Any, language: str = "auto", allow: Collection[str] = ()
    ) -> Any:
        check_abandoned()
        return self._count(
            self.inner.pseudonymise(text, vault=vault, language=language, allow=allow)
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class MeteredGuard:
    """A guard that counts the violations ``inner`` reports, by rule."""

    def __init__(self, inner: Any, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    def check(self, text: str, *, language: str = "auto") -> Any:
        report = self.inner.check(text, language=language)
        for violation in getattr(report, "violations", ()):
            self.metrics.inc("dpllm_guard_violations_total", rule=str(violation.rule))
        return report

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class MeteredLedger:
    """The ledger, counting the charges it commits and the ones it refuses, by pool."""

    charging_many = None  # a batch would pass the counters by: callers charge one by one

    def __init__(self, inner: Any, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    @contextmanager
    def charging(self, **kwargs: Any) -> Iterator[Any]:
        pool = str(kwargs.get("pool"))
        try:
            context = self.inner.charging(**kwargs)
            charge = context.__enter__()
        except BudgetExceeded as exc:
            self.metrics.inc(
                "dpllm_budget_refusals_total", pool=exc.pool or pool, reason="exceeded"
            )
            raise
        except BudgetPending:
            self.metrics.inc("dpllm_budget_refusals_total", pool=pool, reason="pending")
            raise
        try:
            yield charge
        except BaseException as exc:
            if not context.__exit__(type(exc), exc, exc.__traceback__):
                raise
        else:
            context.__exit__(None, None, None)
            if charge.cached is None:
                self.metrics.inc("dpllm_budget_charges_total", pool=pool)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
