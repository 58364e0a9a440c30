"""Run the code blocks of a Markdown page (the README, every page under docs/).

A page's ```python blocks run in order, in one namespace, in a temporary folder
(style rule 32). ```py blocks are illustrative fragments and are not run.
Markers, as HTML comments (invisible on the site and on GitHub):

- ``<!-- test: setup NAME -->`` anywhere on a page: run the set-up ``NAME`` (see
  :data:`SETUPS`) before the page's blocks; several may be given.
- ``<!-- test: skip REASON -->`` on the line before a block: do not run that block
  (a reason is required: "needs a running dpllm serve").

```toml blocks must parse, after ``--8<-- "path"`` snippet lines are replaced by
the file they include (as the site's build does).
"""

from __future__ import annotations

import re
import shutil
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_FENCE = re.compile(r"^(`{3,})(\w*)[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)
_SKIP = re.compile(r"<!--\s*test:\s*skip\b(.*?)-->\s*\n\s*$", re.S)
_SETUP = re.compile(r"<!--\s*test:\s*setup\s+([\w,\s-]+?)\s*-->")
_SNIPPET = re.compile(r'^--8<--\s+"([^"]+)"\s*$', re.M)


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, source, first line and skip reason."""

    lang: str
    source: str
    line: int
    skip: str | None


def blocks(text: str) -> list[Block]:
    """Every fenced block of ``text`` (top-level and indented), in order."""
    found: list[Block] = []
    # Indented fences (inside list items) are dedented first so they match too.
    for match in _FENCE.finditer(_dedent_fences(text)):
        before = text[: match.start()] if len(text) >= match.start() else text
        skip = _SKIP.search(before[-300:])
        reason = skip.group(1).strip() if skip else None
        line = text.count("\n", 0, match.start()) + 2
        found.append(Block(match.group(2), match.group(3), line, reason))
    return found


def _dedent_fences(text: str) -> str:
    # Keeps offsets identical: only leading spaces before ``` and inside its block go.
    out: list[str] = []
    indent: str | None = None
    for raw in text.split("\n"):
        stripped = raw.lstrip(" ")
        if indent is None and stripped.startswith("```") and raw != stripped:
            indent = raw[: len(raw) - len(stripped)]
            out.append(stripped + " " * len(indent))
            continue
        if indent is not None:
            body = raw[len(indent) :] if raw.startswith(indent) else raw.lstrip(" ")
            out.append(body + " " * (len(raw) - len(body)))
            if body.startswith("```"):
                indent = None
            continue
        out.append(raw)
    return "\n".join(out)


def setups(text: str) -> list[str]:
    """The set-up names a page asks for."""
    names: list[str] = []
    for match in _SETUP.finditer(text):
        names.extend(n.strip() for n in match.group(1).split(",") if n.strip())
    return names


def with_snippets(source: str) -> str:
    """``source`` with each ``--8<-- "path"`` line replaced by that file (repo-relative)."""
    return _SNIPPET.sub(lambda m: (ROOT / m.group(1)).read_text("utf-8"), source)


def _demo_data(tmp: Path) -> None:
    from dpllm.data.demo import generate_demo, write_demo

    write_demo(generate_demo(users=200, weeks=2, seed=1, end_week="2026-W47"), tmp / "demo.db")


def _weekly_config(tmp: Path) -> None:
    _demo_data(tmp)
    shutil.copy(ROOT / "examples" / "dpllm.toml", tmp / "dpllm.toml")


SETUPS: dict[str, Callable[[Path], None]] = {
    "demo-data": _demo_data,
    "weekly-config": _weekly_config,
}
"""Set-ups that write files into the page's temporary folder."""


@contextmanager
def _fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from dpllm.testing import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        for _ in range(8):
            server.enqueue(text="Hello <PERSON_0000000000>, here is your week.")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield


def run_page(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, text: str | None = None
) -> tuple[int, dict[str, object]]:
    """Run every ```python block of the page at ``path``.

    Returns:
        How many blocks ran, and the namespace they ran in (for further checks).
    """
    text = path.read_text("utf-8") if text is None else text
    monkeypatch.chdir(tmp_path)
    wanted = setups(text)
    unknown = set(wanted) - set(SETUPS) - {"fake-openai"}
    assert not unknown, f"{path.name}: unknown set-up {sorted(unknown)}"
    for name in wanted:
        if name in SETUPS:
            SETUPS[name](tmp_path)
    namespace: dict[str, object] = {"__name__": "docs"}
    ran = 0
    with _fake_openai(monkeypatch) if "fake-openai" in wanted else _nothing():
        for block in blocks(text):
            if block.lang != "python" or block.skip is not None:
                continue
            # Pad so a traceback's line number is the page's.
            code = "\n" * (block.line - 1) + block.source
            exec(compile(code, str(path), "exec"), namespace)  # noqa: S102 - our own docs
            ran += 1
    return ran, namespace


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def check_toml(path: Path, text: str | None = None) -> int:
    """Parse every ```toml block of the page; return how many were checked."""
    text = path.read_text("utf-8") if text is None else text
    checked = 0
    for block in blocks(text):
        if block.lang == "toml" and block.skip is None:
            try:
                tomllib.loads(with_snippets(block.source))
            except tomllib.TOMLDecodeError as exc:
                raise AssertionError(f"{path}:{block.line}: {exc}") from exc
            checked += 1
    return checked
