"""The package's layers: no import runs from a lower folder to a higher one.

Each top-level module or folder of ``dpllm`` has a rank; a module may import its own
folder and anything of a strictly lower rank. Siblings of one rank stay independent
(the redactor knows nothing of the guard, the ledger nothing of the data engines).
``from dpllm import __version__`` is the one import of the package root allowed below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dpllm

ROOT = Path(dpllm.__file__).parent

RANKS: dict[str, int] = {
    # the shared vocabulary
    "errors": 0,
    "release": 1,
    "windows": 1,
    "rounding": 1,
    "_jieba": 1,
    "_extras": 1,  # optional dependencies: imports only errors
    "_toml": 1,  # typed TOML reading for config: imports only errors
    # the cores, each on its own
    "privacy": 2,
    "ldp": 2,
    "ledger": 2,
    "redact": 2,
    "guard": 2,
    "templates": 2,
    "testing": 2,
    # statistics over data, configuration
    "data": 3,
    "config": 3,
    # around chat completions
    "chat": 4,
    # the weekly job and the assessment tools
    "weekly": 5,
    "assess": 5,
    # the edges
    "server": 6,
    "cli": 7,
    "__main__": 8,
    "__init__": 8,
    # old module paths kept for one release (dpllm/_moved.py); they import nothing statically
    "_moved": 0,
    "models": 8,
    "generate": 8,
    "report": 8,
    "wiring": 8,
    "ldp_api": 8,
    "wrapper": 8,
}


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[str, int, tuple[str, ...]]]:
    found: list[tuple[str, int, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "dpllm" or node.module.startswith("dpllm."):
                found.append((node.module, node.lineno, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dpllm."):
                    found.append((alias.name, node.lineno, ()))
    return found


def _module_unit(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def test_every_folder_has_a_rank() -> None:
    units = {_module_unit(p) for p in ROOT.rglob("*.py")}
    assert units <= set(RANKS), f"give these a rank in RANKS: {sorted(units - set(RANKS))}"


def _violations() -> list[str]:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        src = _module_unit(path)
        for module, line, names in _imports(path):
            tgt = _unit(module)
            if tgt == src or (module == "dpllm" and names == ("__version__",)):
                continue
            if RANKS[tgt] >= RANKS[src]:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {src} → {module}")
    return bad


def test_no_import_runs_upward_or_sideways() -> None:
    assert _violations() == []


def test_the_check_sees_an_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The check itself can fail: a core module importing the weekly job is reported.
    fake = tmp_path / "dpllm"
    (fake / "privacy").mkdir(parents=True)
    (fake / "privacy" / "x.py").write_text("from dpllm.weekly.job import run_weekly\n")
    monkeypatch.setattr(f"{__name__}.ROOT", fake)
    assert _violations() == ["dpllm/privacy/x.py:1: privacy → dpllm.weekly.job"]
