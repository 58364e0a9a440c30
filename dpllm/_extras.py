"""Optional dependencies ("extras") and the one error raised when one is missing.

dpllm's core install is what ``import dpllm``, :func:`dpllm.wrap`, the DP core,
templates, the guard, redaction and the SQLite engine and ledger need. Everything
else is an extra of the package, installed on demand::

    pip install "dpllm[server]"     # dpllm serve: fastapi, uvicorn, httptools, uvloop, aiohttp
    pip install "dpllm[duckdb]"     # DuckDB files, Parquet and CSV as data sources
    pip install "dpllm[postgres]"   # PostgreSQL as data source or shared ledger (psycopg)
    pip install "dpllm[charts]"     # the weekly job's PNG charts, plan/audit plots (matplotlib)
    pip install "dpllm[spark]"      # Spark SQL as data source (pyspark)
    pip install "dpllm[all]"        # all of the above

Every place that imports an optional module calls :func:`require` first, so a
missing extra is a :class:`~dpllm.errors.MissingExtra` that names the command to
run, never a bare ``ModuleNotFoundError`` from deep inside a feature.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from dpllm.errors import MissingExtra

__all__ = ["EXTRAS", "require"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "uvicorn", "aiohttp"),
    "duckdb": ("duckdb",),
    "postgres": ("psycopg",),
    "charts": ("matplotlib",),
    "spark": ("pyspark",),
}
"""Each extra and the top-level modules dpllm imports from it (the rest are speed-ups
that are used when present, such as uvloop and httptools)."""


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module``, or explain which extra installs it.

    Args:
        module: the module to import (``"duckdb"``, ``"matplotlib.figure"``).
        extra: the extra of dpllm that provides it (a key of :data:`EXTRAS`).
        feature: what needs it, in words ("DuckDB data sources"), the start of the message.

    Returns:
        The imported module.

    Raises:
        MissingExtra: the module (or one it imports) is not installed; the message
            names ``pip install "dpllm[<extra>]"``.
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; one of {sorted(EXTRAS)}")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        raise MissingExtra(
            f"{feature}: the optional package {missing!r} is not installed; "
            f'install it with: pip install "dpllm[{extra}]"',
            module=missing,
            extra=extra,
        ) from exc
