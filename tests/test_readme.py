"""Every ```python block of README.md runs as written (style rule 32).

The README is the two-minute path; its longer examples live in docs/ and run in
tests/test_docs.py. Both use the markers of tests/markdown_blocks.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.markdown_blocks import ROOT, check_toml, run_page

README = ROOT / "README.md"


def test_readme_python_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_page(README, tmp_path, monkeypatch)[0] >= 1


def test_readme_toml_blocks_parse() -> None:
    check_toml(README)


def test_readme_stays_short() -> None:
    """The README is what a newcomer reads in two minutes; the rest is the docs site."""
    lines = README.read_text("utf-8").splitlines()
    assert len(lines) <= 150, len(lines)
