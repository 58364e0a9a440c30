"""Local-DP ingest at the edge: the report store, ``POST /v1/ldp/reports``, and a client.

* :class:`LDPStore` — an SQLite table of randomised reports with a **unique
  constraint on (metric, window, user)**: one report per user per metric per
  window, enforced by the database, so concurrent or replayed submissions
  cannot double a user's weight (or their privacy loss). Each row keeps the ε
  the user spent; :meth:`LDPStore.user_epsilon` sums a user's local ε in a window.
  Given a ledger (``LDPStore(path, ledger=...)``), each report's ε is recorded
  through :meth:`~dpllm.ledger.sqlite.SQLiteLedger.record_local` first — the
  ledger's own unique row and audit line — and the user's local ε is read from it.
* :class:`LDPIngest` — checks a report against its metric (mechanism, ε,
  domain) and stores it; estimates are post-processing of stored reports.
* :data:`router` — the FastAPI ``APIRouter`` that ``dpllm serve`` includes: it
  serves the :class:`LDPIngest` found at ``app.state.ldp_ingest`` (503 until
  the server sets one); :func:`ldp_router` binds the same endpoints to a given
  ingest (tests, other apps).
* :class:`LDPClient` — randomises on the client (OpenDP's secure samplers) and
  POSTs the report with httpx; the true value never leaves the caller.

Privacy: each stored report is ε-LDP for its user's value (see
:mod:`dpllm.ldp.mechanisms`); a user's reports of different metrics in one window
compose to the sum of their ε, which :meth:`LDPStore.user_epsilon` reports.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dpllm._extras import require
from dpllm.errors import (
    DuplicateReport,
    InvalidReport,
    InvalidWindow,
    LedgerUnavailable,
    WindowNotReady,
)
from dpllm.ldp.mechanisms import LDPAggregate, LDPEstimate, LDPReport, LocalRandomizer
from dpllm.release import MICRO, Cost, to_micro
from dpllm.windows import Window, utc_today

require("fastapi", extra="server", feature="the local-DP ingest service (dpllm.ldp.ingest)")

from fastapi import APIRouter, Request  # noqa: E402 - after the extra check
from fastapi.responses import JSONResponse  # noqa: E402

if TYPE_CHECKING:
    import httpx

__all__ = [
    "LDPClient",
    "LDPIngest",
    "LDPStore",
    "MemoryReports",
    "SentReports",
    "ldp_router",
    "pseudonym",
    "router",
]

REPORTS_PATH = "/v1/ldp/reports"

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ldp_reports (
        metric TEXT NOT NULL,
        window_key TEXT NOT NULL,
        user TEXT NOT NULL,
        mechanism TEXT NOT NULL,
        epsilon_micro INTEGER NOT NULL CHECK (epsilon_micro > 0),
        payload TEXT NOT NULL,
        received_at REAL NOT NULL,
        UNIQUE (metric, window_key, user)
    )""",
    "CREATE INDEX IF NOT EXISTS ldp_reports_user ON ldp_reports (user, window_key)",
)


CLOCK_SKEW = dt.timedelta(days=1)
"""How far ahead of ``today`` a report's week may start: a device whose clock (or
time zone) is ahead by up to a day may report the next week."""


def refuse_future_window(window: Window | str, today: dt.date) -> Window:
    """``window`` parsed, unless it starts after ``today`` + :data:`CLOCK_SKEW`.

    Reports are collected during their week, so the current week is accepted; a
    week that has not begun is refused before its ε is recorded anywhere.

    Raises:
        InvalidWindow: not a canonical ISO week.
        WindowNotReady: the week has not begun (beyond the clock-skew allowance).
    """
    w = Window.parse(window)
    if w.first_day > today + CLOCK_SKEW:
        raise WindowNotReady(
            f"window {w} has not begun (today is {today.isoformat()}); "
            "report in the week the value belongs to"
        )
    return w


def pseudonym(secret: bytes, user_id: str) -> str:
    """A stable pseudonym ``u:<hex>`` = HMAC-SHA256(secret, user id), truncated to 128 bits.

    The client (or the app that knows the user) keeps ``secret``; the server sees
    only the pseudonym, enough to enforce one report per user per window.
    """
    if not secret:
        raise InvalidReport("pseudonym needs a non-empty secret")
    return "u:" + hmac.new(secret, user_id.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


class LocalLedger(Protocol):
    """What :class:`LDPStore` needs of a ledger (both dpllm ledgers provide it)."""

    def record_local(
        self, *, user: str, window: str, metric: str, cost: Cost, analyst: str = ...
    ) -> None: ...

    def local_spent(self, user: str, window: str) -> Cost: ...


class LDPStore:
    """Randomised reports in one SQLite file (its own, or the ledger's file).

    Args:
        path: the database file (created with its directory when missing).
        clock: POSIX-time source for ``received_at`` (tests inject one).
        ledger: record each report's local ε in this ledger (one row per user,
            metric and window; an ``ldp_report`` audit line) before storing it.

    Raises:
        LedgerUnavailable: the file cannot be opened or written.

    .. versionchanged:: unreleased
        ``ledger``.
    """

    def __init__(
        self, path: str | Path, *, clock: Any = time.time, ledger: LocalLedger | None = None
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self.ledger = ledger
        self._local = threading.local()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._tx() as conn:
                for stmt in _SCHEMA:
                    conn.execute(stmt)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerUnavailable(f"cannot open the LDP report store {self.path}: {exc}") from exc

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            self._local.conn = conn
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def add(self, report: LDPReport) -> None:
        """Store ``report`` durably.

        Raises:
            DuplicateReport: this user already reported this metric in this window
                (nothing is stored; the first report stands).
        """
        if self.ledger is not None:
            # The ledger first: a report is never stored without its ε on record.
            self.ledger.record_local(
                user=report.user, window=report.window, metric=report.metric,
                cost=Cost.pure(report.epsilon),
            )  # fmt: skip
        try:
            with self._tx() as conn:
                conn.execute(
                    "INSERT INTO ldp_reports VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        report.metric,
                        report.window,
                        report.user,
                        report.mechanism,
                        to_micro(report.epsilon),
                        json.dumps(list(report.payload)),
                        self._clock(),
                    ),
                )
        except sqlite3.IntegrityError as exc:
            raise DuplicateReport(
                f"user {report.user!r} already reported {report.metric!r} in {report.window}; "
                "only one report per user per metric per window counts"
            ) from exc
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"cannot store the LDP report: {exc}") from exc

    def payloads(self, metric: str, window: str) -> Iterator[tuple[int, ...]]:
        """Every stored payload of ``metric`` in ``window``."""
        rows = self._conn().execute(
            "SELECT payload FROM ldp_reports WHERE metric = ? AND window_key = ?", (metric, window)
        )
        for (payload,) in rows:
            yield tuple(int(b) for b in json.loads(payload))

    def count(self, metric: str, window: str) -> int:
        (n,) = (
            self._conn()
            .execute(
                "SELECT COUNT(*) FROM ldp_reports WHERE metric = ? AND window_key = ?",
                (metric, window),
            )
            .fetchone()
        )
        return int(n)

    def user_epsilon(self, user: str, window: str) -> float:
        """The local ε ``user`` spent in ``window`` (sum over metrics; exact micro-units)."""
        if self.ledger is not None:
            return self.ledger.local_spent(user, window).micro / MICRO
        (micro,) = (
            self._conn()
            .execute(
                "SELECT COALESCE(SUM(epsilon_micro), 0) FROM ldp_reports "
                "WHERE user = ? AND window_key = ?",
                (user, window),
            )
            .fetchone()
        )
        return int(micro) / MICRO

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class LDPIngest:
    """Accept reports for configured metrics and estimate from them.

    Args:
        store: where reports go.
        metrics: metric name → the randomiser clients must use (mechanism, ε, domain).
        today: the current UTC date, read per report (default: the system clock);
            reports for a week that has not begun are refused.

    Privacy: accepts only reports randomised as the metric declares, at most one
    per user per metric per window; estimates are post-processing (free).

    .. versionchanged:: unreleased
        ``today``; future weeks are refused.
    """

    def __init__(
        self,
        store: LDPStore,
        metrics: Mapping[str, LocalRandomizer],
        *,
        today: Callable[[], dt.date] | None = None,
    ) -> None:
        self.store = store
        self.metrics = dict(metrics)
        self.today: Callable[[], dt.date] = today or utc_today

    def _randomizer(self, metric: str) -> LocalRandomizer:
        try:
            return self.metrics[metric]
        except KeyError:
            known = ", ".join(sorted(self.metrics)) or "none"
            raise InvalidReport(f"unknown LDP metric {metric!r}; configured: {known}") from None

    def submit(self, report: LDPReport) -> None:
        """Validate ``report`` against its metric and store it.

        Raises:
            InvalidReport: unknown metric, other mechanism or ε, or a bad payload.
            DuplicateReport: the user already reported this metric in this window.
            WindowNotReady: the report's week has not begun (nothing recorded).
        """
        refuse_future_window(report.window, self.today())
        r = self._randomizer(report.metric)
        if report.mechanism != r.name or to_micro(report.epsilon) != to_micro(r.epsilon):
            raise InvalidReport(
                f"metric {report.metric!r} takes {r.name} reports at ε = {r.epsilon:g}; "
                f"got {report.mechanism} at ε = {report.epsilon:g}"
            )
        r.support(report.payload)  # raises InvalidReport on a malformed payload
        self.store.add(report)

    def estimate(self, metric: str, window: str, *, confidence: float = 0.95) -> LDPEstimate:
        """Frequencies and mean of ``metric`` in ``window`` from the stored reports.

        Raises:
            InvalidWindow: ``window`` is not a canonical ISO week.
            InvalidReport: unknown metric, or too few reports.
        """
        key = Window.parse(window).key  # a malformed week is said so, not "0 reports"
        agg = LDPAggregate.empty(self._randomizer(metric))
        for payload in self.store.payloads(metric, key):
            agg = agg.add(payload)
        return agg.estimate(metric=metric, confidence=confidence)


def _detail(resp: httpx.Response, default: str) -> str:
    """The ``detail`` of an error answer, if it is the JSON object the server sends."""
    try:
        body = resp.json()
    except ValueError:
        return default
    detail = body.get("detail") if isinstance(body, dict) else None
    return detail if isinstance(detail, str) else default


class _NotConfigured(Exception):
    pass


def _from_app_state(request: Request) -> LDPIngest:
    ingest = getattr(request.app.state, "ldp_ingest", None)
    if not isinstance(ingest, LDPIngest):
        raise _NotConfigured
    return ingest


def _build_router(get_ingest: Callable[[Request], LDPIngest]) -> APIRouter:
    router = APIRouter(tags=["ldp"])
    not_configured = JSONResponse(
        {
            "error": "ldp_not_configured",
            "detail": "local-DP ingest is not configured: set app.state.ldp_ingest to an LDPIngest",
        },
        503,
    )

    @router.post(REPORTS_PATH, status_code=201, summary="Submit one randomised (ε-LDP) report")
    async def post_report(request: Request) -> JSONResponse:
        try:
            ingest = get_ingest(request)
            report = LDPReport.from_json(await request.body())
            ingest.submit(report)
        except _NotConfigured:
            return not_configured
        except DuplicateReport as exc:
            return JSONResponse({"error": "duplicate_report", "detail": str(exc)}, 409)
        except InvalidReport as exc:
            return JSONResponse({"error": "invalid_report", "detail": str(exc)}, 422)
        except InvalidWindow as exc:  # a week that has not begun
            return JSONResponse({"error": "window_not_ready", "detail": str(exc)}, 422)
        return JSONResponse({"accepted": True, "epsilon": report.epsilon}, 201)

    @router.get("/v1/ldp/estimates/{metric}/{window}", summary="Estimates from LDP reports")
    def get_estimate(
        request: Request, metric: str, window: str, confidence: float = 0.95
    ) -> JSONResponse:
        try:
            est = get_ingest(request).estimate(metric, window, confidence=confidence)
        except _NotConfigured:
            return not_configured
        except ValueError as exc:  # InvalidReport, or a bad confidence
            return JSONResponse({"error": "invalid_request", "detail": str(exc)}, 422)
        body = {
            "metric": est.metric,
            "window": window,
            "mechanism": est.mechanism,
            "epsilon": est.epsilon,
            "n": est.n,
            "domain": list(est.domain),
            "frequencies": list(est.frequencies),
            "frequency_intervals": [list(i) for i in est.frequency_intervals],
            "mean": est.mean,
            "mean_interval": list(est.mean_interval),
            "confidence": est.confidence,
        }
        return JSONResponse(body)

    return router


def ldp_router(ingest: LDPIngest) -> APIRouter:
    """A router bound to ``ingest``: ``POST /v1/ldp/reports`` (201; 409 for a second
    report of a user/metric/window; 422 invalid, or a week that has not begun) and ``GET /v1/ldp/estimates/{metric}/{window}``.
    """
    return _build_router(lambda _request: ingest)


router = _build_router(_from_app_state)
"""The same endpoints for ``dpllm serve``: they use ``app.state.ldp_ingest`` (503 until set)."""


class SentReports(Protocol):
    """Where a client keeps the one report it randomised per (metric, window, user)."""

    def get(self, key: tuple[str, str, str]) -> tuple[int, LDPReport] | None:
        """The ``(value, report)`` randomised for ``key``, if any."""
        ...

    def put(self, key: tuple[str, str, str], value: int, report: LDPReport) -> None:
        """Keep ``report`` (randomised from ``value``) for ``key``."""
        ...


class MemoryReports:
    """:class:`SentReports` in this process's memory (lost when the process ends)."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str, str], tuple[int, LDPReport]] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> tuple[int, LDPReport] | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: tuple[str, str, str], value: int, report: LDPReport) -> None:
        with self._lock:
            self._items.setdefault(key, (value, report))


class LDPClient:
    """Randomise a value locally and send the report.

    **One randomised report per (metric, window, user).** The first call for a
    key randomises the value and keeps the report; every later call for that key
    — a retry after a timeout, a 5xx, a crash of the request — re-sends that
    same report, never a freshly randomised one. (Fresh randomisations of one
    value are independent ε-LDP reports: 60 of them at ε = 1 let a majority vote
    recover the value, while the server records one.) A different value for a
    key already reported is refused locally, nothing sent.

    Args:
        base_url: the dpllm server (``https://stats.example.com``).
        metric: the metric name.
        randomizer: the metric's randomiser (mechanism, ε, domain), as configured
            on the server.
        client: an httpx client to use (tests pass one with a mock transport);
            by default one is created for ``base_url``.
        api_key: sent as ``Authorization: Bearer``.
        sent: where the randomised reports are kept (default: in memory, for
            this client's life). An app that may restart between retries passes
            a durable :class:`SentReports`.
        today: the current UTC date (default: the system clock); a week that
            has not begun is refused locally, nothing randomised or sent.

    Privacy: only the randomised payload leaves the process, once randomised per
    (metric, window, user): ε-LDP per user per metric per window, however often
    it is re-sent. Randomness comes from OpenDP's secure samplers.

    .. versionchanged:: unreleased retries re-send the kept report; ``today``.
    """

    def __init__(
        self,
        base_url: str,
        *,
        metric: str,
        randomizer: LocalRandomizer,
        client: httpx.Client | None = None,
        api_key: str | None = None,
        sent: SentReports | None = None,
        today: Callable[[], dt.date] | None = None,
    ) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.Client(base_url=base_url, timeout=10.0)
        self._headers = headers
        self.metric = metric
        self.randomizer = randomizer
        self._sent: SentReports = sent if sent is not None else MemoryReports()
        self.today: Callable[[], dt.date] = today or utc_today

    def report(self, *, user: str, value: int, window: Window | str) -> LDPReport:
        """Randomise ``value`` (once per metric, window and user) and POST it.

        Returns:
            The report that was sent: on a retry, the one kept from the first call.

        Raises:
            InvalidWindow: ``window`` is not a canonical ISO week.
            WindowNotReady: ``window`` has not begun (nothing randomised or sent).
            InvalidReport: the value is outside the domain, or the server refused.
            DuplicateReport: the server already holds this user's report, or this
                client already randomised another value for the key (nothing sent).
            LedgerUnavailable: the server cannot be reached (retry: the same
                report is sent again).
        """
        import httpx

        key = (self.metric, refuse_future_window(window, self.today()).key, user)
        kept = self._sent.get(key)
        if kept is None:
            report = LDPReport(
                metric=self.metric,
                window=key[1],
                user=user,
                mechanism=self.randomizer.name,
                epsilon=self.randomizer.epsilon,
                payload=self.randomizer.randomise(value),
            )
            self._sent.put(key, value, report)
            kept = self._sent.get(key)
            assert kept is not None
        if kept[0] != value:
            raise DuplicateReport(
                f"this client already randomised a report of {self.metric!r} for this user in "
                f"{key[1]}; only one report per user per metric per window (nothing was sent)"
            )
        report = kept[1]
        try:
            resp = self._client.post(
                REPORTS_PATH,
                content=report.to_json(),
                headers={**self._headers, "Content-Type": "application/json"},
            )
        except httpx.HTTPError as exc:
            raise LedgerUnavailable(f"cannot reach the dpllm server: {exc}") from exc
        if resp.status_code == 409:
            raise DuplicateReport(_detail(resp, "the server already holds this user's report"))
        if resp.status_code == 429 or resp.status_code >= 500:
            # The server's trouble, not the report's: retry (the kept report is re-sent).
            raise LedgerUnavailable(
                f"the dpllm server could not take the report ({resp.status_code}); retry later: "
                "the same report is sent again"
            )
        if resp.status_code != 201:
            raise InvalidReport(f"the server refused the report ({resp.status_code}): {resp.text}")
        return report
