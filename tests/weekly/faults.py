"""Fault injection for the resume tests: stop a weekly run at its N-th step.

:class:`Faults` counts *points*: the moment before and after every call the job makes
into the ledger (including entering and leaving each charge, ``data_read`` and
``store``), the data engine, the redactor and the model. At the chosen point it
runs an action: raise ``KeyboardInterrupt`` (what SIGINT does), raise an exception
(a crash), or ``SIGKILL`` the process (``kill -9``; for subprocesses only).

The proxies are thin ``__getattr__`` wrappers, so the job sees the real ledger and
engine behind them; only the timing of the stop is artificial.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Action = Callable[[str], None]


def interrupt(point: str) -> None:
    raise KeyboardInterrupt(point)


def crash(point: str) -> None:
    raise RuntimeError(f"injected crash at {point}")


def kill9(point: str) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Faults:
    """Counts points; at point number ``at`` (1-based) runs ``action``; 0 never fires."""

    def __init__(self, at: int = 0, action: Action = interrupt) -> None:
        self.at = at
        self.action = action
        self.points: list[str] = []

    def tick(self, point: str) -> None:
        self.points.append(point)
        if len(self.points) == self.at:
            self.action(point)

    def wrap(self, target: Any, name: str) -> Any:
        return _Proxy(target, name, self)


class _Proxy:
    def __init__(self, target: Any, name: str, faults: Faults) -> None:
        self._target = target
        self._name = name
        self._faults = faults

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._target, attr)
        if not callable(value) or attr.startswith("_"):
            return value
        label = f"{self._name}.{attr}"
        faults = self._faults
        if attr == "charging":
            return _charging(value, label, faults)
        if attr == "charging_many":  # a batch: its handles are counted like charging()'s
            return _charging_many(value, label, faults)
        if attr == "store_many":
            return _store_many(value, label, faults)

        def call(*args: Any, **kwargs: Any) -> Any:
            faults.tick(f"{label}:before")
            result = value(*args, **kwargs)
            faults.tick(f"{label}:after")
            return result

        return call


def _charging(real: Callable[..., Any], label: str, faults: Faults) -> Callable[..., Any]:
    @contextmanager
    def charging(**kwargs: Any) -> Iterator[Any]:
        faults.tick(f"{label}:before")
        with real(**kwargs) as handle:
            faults.tick(f"{label}:entered")
            yield _Proxy(handle, "charge", faults)
            faults.tick(f"{label}:leaving")
        faults.tick(f"{label}:left")

    return charging


def _charging_many(real: Callable[..., Any], label: str, faults: Faults) -> Callable[..., Any]:
    @contextmanager
    def charging_many(requests: Any) -> Iterator[Any]:
        faults.tick(f"{label}:before")
        with real(requests) as handles:
            faults.tick(f"{label}:entered")
            yield [_Proxy(h, "charge", faults) for h in handles]
            faults.tick(f"{label}:leaving")
        faults.tick(f"{label}:left")

    return charging_many


def _store_many(real: Callable[..., Any], label: str, faults: Faults) -> Callable[..., Any]:
    def store_many(pairs: Any) -> Any:
        faults.tick(f"{label}:before")
        # The ledger marks its own handles stored: hand it them, not the counting proxies.
        unwrapped = [(c._target if isinstance(c, _Proxy) else c, r) for c, r in pairs]
        result = real(unwrapped)
        faults.tick(f"{label}:after")
        return result

    return store_many
