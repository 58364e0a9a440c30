"""Every ```python block of README.md runs as written (style rule 32).

Blocks are grouped by their ``## `` section and run in order in one namespace per
section, in a temporary folder, after the set-up that section's prose describes
(demo data for the statistics sections, a loopback OpenAI-compatible server for
the wrapper). Illustrative fragments use ```py and are not run.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def sections() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current = ""
    for part in re.split(r"^(## .+)$", README.read_text("utf-8"), flags=re.M):
        if part.startswith("## "):
            current = part[3:].strip()
            continue
        blocks = re.findall(r"^```python\n(.*?)^```", part, flags=re.S | re.M)
        if blocks:
            found.setdefault(current, []).extend(blocks)
    return found


def _demo_data(tmp: Path) -> None:
    from dpllm.data.demo import generate_demo, write_demo

    write_demo(generate_demo(users=200, weeks=2, seed=1, end_week="2026-W47"), tmp / "demo.db")


def _weekly_config(tmp: Path) -> None:
    _demo_data(tmp)
    shutil.copy(ROOT / "examples" / "dpllm.toml", tmp / "dpllm.toml")


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from dpllm.testing import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        server.enqueue(text="Hello <PERSON_0000000000>, here is your week.")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield


SETUP: dict[str, Callable[[Path], None]] = {
    "Feedback statistics (`dpllm stats`)": _demo_data,
    "Configuration": _weekly_config,
}
NEEDS_MODEL = {"Wrap any chat-completion call"}
EXPECTED = {
    "The privacy budget",
    "Feedback statistics (`dpllm stats`)",
    "Writing prompt templates",
    "Redaction",
    "What the guard enforces",
    "Wrap any chat-completion call",
    "Local or central DP?",
    "Configuration",
}


def test_the_readme_still_has_its_examples() -> None:
    assert set(sections()) >= EXPECTED


@pytest.mark.parametrize("section", sorted(EXPECTED))
def test_python_blocks_run(
    section: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    blocks = sections().get(section)
    assert blocks, f"README section {section!r} lost its Python example"
    monkeypatch.chdir(tmp_path)
    if section in SETUP:
        SETUP[section](tmp_path)
    if section in NEEDS_MODEL:
        request.getfixturevalue("fake_openai")
    namespace: dict[str, object] = {"__name__": "readme"}
    for block in blocks:
        exec(compile(block, f"README.md: {section}", "exec"), namespace)  # noqa: S102 - our docs
