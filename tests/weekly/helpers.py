"""Shared set-up of the weekly-job tests: small demo data, settings rooted in a tmp folder."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from dpllm.cli.weekly import demo_settings
from dpllm.config import Settings
from dpllm.data.demo import DemoData, generate_demo, write_demo
from dpllm.redact import Redactor

WEEK = "2026-W47"
SMALL = {"users": 500, "weeks": 3, "seed": 7, "end_week": WEEK, "pii_rate": 0.08}


def make_demo(folder: Path) -> tuple[Path, DemoData]:
    """Small seeded demo data (same generator as ``dpllm demo-data``) in ``folder``."""
    data = generate_demo(**SMALL)  # type: ignore[arg-type]
    db, _ = write_demo(data, folder / "demo.db")
    return db, data


def demo_config(
    folder: Path,
    db: Path,
    *,
    ledger: str | None = None,
    redaction: bool = True,
    weekly_cap: str | None = None,
    extra: str = "",
) -> Path:
    """``folder/dpllm.toml``: the example configuration (``dpllm init``) reading ``db``.

    ``ledger`` replaces the ledger URL, ``weekly_cap`` the plan pool's window cap,
    ``redaction=False`` turns redaction off; ``extra`` is appended as is.
    """
    from dpllm.cli.weekly import example_config

    text = example_config().replace('path = "demo.db"', f'path = "{db}"')
    if ledger is not None:
        text = text.replace('url = ".dpllm/ledger.db"', f'url = "{ledger}"')
    if weekly_cap is not None:
        text = text.replace("window_cap = 1.8", f"window_cap = {weekly_cap}")
    if not redaction:
        text = text.replace("[redaction]\nenabled = true", "[redaction]\nenabled = false", 1)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "dpllm.toml"
    path.write_text(text + extra, encoding="utf-8")
    return path


def settings_for(root: Path, db: Path, **changes: object) -> Settings:
    """The demo settings rooted at ``root`` (own ledger and reports), reading ``db``."""
    root.mkdir(parents=True, exist_ok=True)
    s = demo_settings(root)
    s = dataclasses.replace(s, data=dataclasses.replace(s.data, path=str(db)))
    return dataclasses.replace(s, **changes)  # type: ignore[arg-type]


def pii_values(data: DemoData) -> set[str]:
    """Every piece of personal data the generator embedded (names, phones, IDs, e-mails)."""
    return {p.value for p in data.pii}


def scan_outputs(folder: Path, needles: set[str]) -> list[tuple[str, str]]:
    """(file, value) for every embedded PII value found in any output file under ``folder``."""
    from PIL import Image

    found: list[tuple[str, str]] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        blobs = [path.read_bytes()]
        if path.suffix == ".png":
            with Image.open(path) as img:
                blobs.append(repr(img.info).encode("utf-8"))
        for value in needles:
            raw = value.encode("utf-8")
            if any(raw in blob for blob in blobs) or any(
                value in blob.decode("utf-8", "ignore") for blob in blobs
            ):
                found.append((path.name, value))
    return found


@functools.lru_cache(maxsize=1)
def shared_redactor() -> Redactor:
    """One Presidio redactor per test process (loading spaCy and jieba takes seconds)."""
    return Redactor()
