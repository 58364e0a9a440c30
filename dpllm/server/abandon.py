"""Protection work that stops when its request is abandoned.

A redaction step cannot be cancelled from the event loop once a pool thread runs
it: before this module, a client that disconnected (or a request past its
deadline) left its redaction running to the end. One client sending the heaviest
request the limits allow and walking away, again and again, could so hold every
thread of the pool, and every other request waited (``bench/hostile_bench.py``
showed it: a normal request took 11 s beside two abandoned heavy ones).

:class:`AbandonablePool` runs each job with its request's :class:`threading.Event`
(and, before the upstream call, the request's deadline) in a thread-local;
:func:`check_abandoned`, called by the server's redactor before every text it
redacts (:class:`~dpllm.server.metrics.MeteredRedactor`), raises once the request
is abandoned: the thread is free again after the text in hand (one message or
one redaction unit), not after the whole request.

Privacy: nothing half-redacted is passed on — the exception ends the request's
protection step, and with it the request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from dpllm.errors import ModelTimeout

__all__ = ["AbandonablePool", "RequestAbandoned", "check_abandoned"]

_current = threading.local()


class RequestAbandoned(Exception):
    """The request's client has gone: its protection work stops (never answered)."""


class AbandonablePool(Executor):
    """Submits to ``pool``, each job knowing its request's ``abandoned`` event.

    Args:
        pool: the app's protection pool.
        abandoned: set when the request is given up (client gone, request failed).
        deadline: ``time.monotonic()`` after which the work stops with
            :class:`~dpllm.errors.ModelTimeout` (``None``: no deadline here).
    """

    def __init__(
        self, pool: Executor, abandoned: threading.Event, deadline: float | None = None
    ) -> None:
        self._pool = pool
        self._abandoned = abandoned
        self._deadline = deadline

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return self._pool.submit(self._run, fn, args, kwargs)

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        _current.job = (self._abandoned, self._deadline)
        try:
            check_abandoned()  # queued, then given up before a thread took it
            return fn(*args, **kwargs)
        finally:
            _current.job = None


def check_abandoned() -> None:
    """Raise if this thread's current job belongs to an abandoned or overdue request.

    A no-op outside :class:`AbandonablePool` jobs (the wrapper, tests, the event loop).

    Raises:
        RequestAbandoned: the client has gone.
        ModelTimeout: the request's deadline passed before its upstream call (→ 504).
    """
    job = getattr(_current, "job", None)
    if job is None:
        return
    abandoned, deadline = job
    if abandoned.is_set():
        raise RequestAbandoned("the client has gone: protection work stopped")
    if deadline is not None and time.monotonic() > deadline:
        raise ModelTimeout(
            "the request's [model] timeout passed while its messages were being redacted "
            "(one deadline for the whole request)"
        )
