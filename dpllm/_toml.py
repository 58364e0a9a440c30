"""Typed reading of a parsed TOML document, with errors that name the field and line.

:class:`TomlReader` is how :mod:`dpllm.config` reads ``dpllm.toml``: every getter
checks the value's type and range and raises :class:`~dpllm.errors.ConfigError`
naming the dotted field and, where it can be found, its line in the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from dpllm.errors import ConfigError

__all__ = ["TomlReader", "flat_settings"]


class TomlReader:
    """Typed access into the parsed TOML that reports field and line on error."""

    def __init__(self, data: Mapping[str, Any], text: str, prefix: str = "") -> None:
        self.data = data
        self.text = text
        self.prefix = prefix

    def _line(self, key: str) -> int | None:
        pattern = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=", re.MULTILINE)
        section = self.prefix.split(".")[0] if self.prefix else ""
        start = 0
        if section:
            m = re.search(rf"^\s*\[+{re.escape(section)}[\].]", self.text, re.MULTILINE)
            start = m.start() if m else 0
        m = pattern.search(self.text, start)
        return self.text.count("\n", 0, m.start()) + 1 if m else None

    def error(self, key: str, message: str) -> ConfigError:
        name = f"{self.prefix}.{key}" if self.prefix else key
        return ConfigError(message, field=name, line=self._line(key))

    def sub(self, key: str) -> TomlReader:
        value = self.data.get(key, {})
        if not isinstance(value, Mapping):
            raise self.error(key, "must be a table")
        return TomlReader(value, self.text, f"{self.prefix}.{key}" if self.prefix else key)

    def get(self, key: str, kind: type | tuple[type, ...], default: Any) -> Any:
        if key not in self.data:
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            raise self.error(key, f"must be {_kind_name(kind)}, got a boolean")
        if not isinstance(value, kinds):
            raise self.error(key, f"must be {_kind_name(kind)}, got {value!r}")
        # TOML allows "\u0000"; no path, name or URL may hold it (the OS refuses it later).
        items = value if isinstance(value, list) else [value]
        if any(isinstance(item, str) and "\x00" in item for item in items):
            raise self.error(key, "must not hold a NUL character (\\u0000)")
        return value

    def number(
        self,
        key: str,
        default: float | None,
        *,
        positive: bool = False,
        maximum: float | None = None,
    ) -> float | None:
        value = self.get(key, (int, float), default)
        if value is None:
            return None
        try:
            value = float(value)
        except OverflowError:  # an integer beyond any float: 1 followed by 400 zeros
            raise self.error(key, "is too large") from None
        if not math.isfinite(value):
            raise self.error(key, f"must be finite, got {value!r}")
        if positive and value <= 0:
            raise self.error(key, f"must be > 0, got {value!r}")
        if value < 0:
            raise self.error(key, f"must be ≥ 0, got {value!r}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"is too large: at most {maximum:g}, got {value!r}")
        return value

    def integer(self, key: str, default: int, *, minimum: int = 0) -> int:
        value = self.get(key, int, default)
        if value < minimum:
            raise self.error(key, f"must be ≥ {minimum}, got {value}")
        return int(value)

    def choice(self, key: str, options: tuple[str, ...], default: str) -> str:
        value = self.get(key, str, default)
        if value not in options:
            raise self.error(key, f"must be one of {', '.join(options)}; got {value!r}")
        return str(value)

    def unknown(self, allowed: set[str]) -> None:
        for key in self.data:
            if key not in allowed:
                raise self.error(
                    key, f"unknown setting; expected one of: {', '.join(sorted(allowed))}"
                )


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "a number", float: "a number", str: "a string", bool: "true or false"}
    return " or ".join(sorted({names.get(k, k.__name__) for k in kinds}))


def flat_settings(r: TomlReader, key: str) -> dict[str, str]:
    """``[data] spark.master = "local[2]"`` (a TOML dotted key: a nested table) and
    ``"spark.sql.shuffle.partitions" = 8`` both as ``{"spark.…": "…"}``."""
    raw = r.get(key, dict, {})
    flat: dict[str, str] = {}

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}", v)
        elif isinstance(value, str | int | float | bool):
            flat[prefix] = str(value).lower() if isinstance(value, bool) else str(value)
        else:
            raise r.error(key, f"{prefix} must be a string, number or boolean")

    walk(key, raw)
    for quoted in r.data:
        if quoted.startswith(f"{key}."):
            walk(quoted, r.data[quoted])
    return flat
