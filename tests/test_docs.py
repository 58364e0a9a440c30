"""Every page of the documentation site: its Python runs, its TOML parses.

The mechanism (set-up and skip markers) is in ``tests/markdown_blocks.py``; the
site itself is built with ``mkdocs build --strict`` by ``make check``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.markdown_blocks import ROOT, blocks, check_toml, run_page

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
WITH_PYTHON = [p for p in PAGES if any(b.lang == "python" for b in blocks(p.read_text("utf-8")))]


def _id(path: Path) -> str:
    return str(path.relative_to(DOCS))


def test_the_site_has_its_pages() -> None:
    names = {_id(p) for p in PAGES}
    assert {"index.md", "getting-started.md", "reference/cli.md", "reference/api.md"} <= names
    assert len(WITH_PYTHON) >= 8, [_id(p) for p in WITH_PYTHON]


@pytest.mark.parametrize("page", WITH_PYTHON, ids=_id)
def test_python_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_page(page, tmp_path, monkeypatch)[0] > 0


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_toml_blocks_parse(page: Path) -> None:
    check_toml(page)


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_skip_says_why(page: Path) -> None:
    for block in blocks(page.read_text("utf-8")):
        assert block.skip is None or block.skip, f"{page}:{block.line}: a skip needs a reason"


def test_skip_and_setup_markers_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.md"
    text = (
        "<!-- test: setup demo-data -->\n\n"
        "```python\nimport pathlib\nassert pathlib.Path('demo.db').exists()\nx = 1\n```\n\n"
        "<!-- test: skip needs a server -->\n```python\nraise SystemExit('must not run')\n```\n\n"
        "- a list item:\n\n  ```python\n  assert x == 1\n  ```\n"
    )
    assert run_page(page, tmp_path, monkeypatch, text=text)[0] == 2
    with pytest.raises(AssertionError, match="page.md"):
        check_toml(page, text="```toml\nkey = \n```\n")


def test_the_cli_reference_covers_every_command() -> None:
    import importlib.util

    import typer.main

    from dpllm.cli import app

    spec = importlib.util.spec_from_file_location(
        "cli_ref", ROOT / "scripts" / "docs_cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.reference()
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="dpllm")
    for name in root.list_commands(ctx):
        assert f"## `dpllm {name}`" in text, name
    assert (DOCS / "reference" / "cli.md").read_text("utf-8").count(module.MARKER) == 1
