"""The Python blocks of the template docs run, in order, as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "examples" / "template_authoring.md"]  # the README runs in tests/test_readme.py


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_python_blocks_run(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__doc__"}
    for block in blocks:
        exec(compile(block, str(doc), "exec"), namespace)  # noqa: S102 - our own docs
