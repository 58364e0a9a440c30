"""Every command, given bad input, prints a clean ``error:`` message and its documented code.

Missing files, a directory instead of a file, non-UTF-8 text, binary files, empty
files, corrupt files, unwritable paths, no permission, a port in use: never a
traceback (the root group turns every error into a message; see
docs/cli-conventions.md for the table).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dpllm.cli import app
from dpllm.cli._common import ExitCode
from dpllm.release import Cost, Release

GBK_TEXT = "本周共收到约160条反馈。"
PHONE_TEXT = "本周共收到约160条反馈。联系电话13812345678。"

RELEASE = Release(
    name="responses",
    values=(160.0,),
    intervals=((150.0, 170.0),),
    mechanism="discrete_laplace",
    noise_scale=4.0,
    cost=Cost.pure(0.5),
    fingerprint="fp",
    unit="responses",
)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A zoo of bad (and one good) inputs."""
    out = {
        "rels": tmp_path / "rels.json",
        "gbk": tmp_path / "gbk.txt",
        "utf8": tmp_path / "utf8.txt",
        "binary": tmp_path / "binary.bin",
        "empty": tmp_path / "empty.txt",
        "corrupt": tmp_path / "corrupt.json",
        "dir": tmp_path / "a-folder",
        "missing": tmp_path / "missing.txt",
        "demo_db": tmp_path / "demo.db",
        "noperm": tmp_path / "noperm.txt",
    }
    out["rels"].write_text(json.dumps([RELEASE.to_dict()]), encoding="utf-8")
    out["gbk"].write_bytes(GBK_TEXT.encode("gbk"))
    out["utf8"].write_text(GBK_TEXT, encoding="utf-8")
    out["binary"].write_bytes(bytes(range(256)) * 4)
    out["empty"].write_bytes(b"")
    out["corrupt"].write_text('{"releases": [{"name": "x", "values": [1', encoding="utf-8")
    out["dir"].mkdir()
    out["demo_db"].write_bytes(b"not a database at all, just text" * 10)
    out["noperm"].write_text("secret", encoding="utf-8")
    out["noperm"].chmod(0)
    return out


def _run(args: list[str], stdin: bytes | str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, args, input=stdin)
    return result.exit_code, result.output


def _clean(code: int, out: str, expected: int, *needles: str) -> None:
    assert "Traceback" not in out, out
    assert code == expected, (code, out)
    text = " ".join(out.split())
    assert "error" in text.lower(), out
    for needle in needles:
        assert needle in text, (needle, out)


# (name, args built from the files, expected code, words the message must hold)
Case = tuple[str, Callable[[dict[str, Path]], list[str]], int, tuple[str, ...]]

CASES: list[Case] = [
    # guard check: the issue's own example, then the rest of the zoo
    ("guard gbk text", lambda f: ["guard", "check", "-r", str(f["rels"]), str(f["gbk"])],
     2, ("not valid utf-8", "--encoding")),
    ("guard missing text", lambda f: ["guard", "check", "-r", str(f["rels"]), str(f["missing"])],
     2, ("does not exist",)),
    ("guard dir text", lambda f: ["guard", "check", "-r", str(f["rels"]), str(f["dir"])],
     2, ("is a directory",)),
    ("guard binary text", lambda f: ["guard", "check", "-r", str(f["rels"]), str(f["binary"])],
     2, ("binary",)),
    ("guard unknown encoding",
     lambda f: ["guard", "check", "-r", str(f["rels"]), "--encoding", "klingon", str(f["utf8"])],
     2, ("unknown encoding",)),
    ("guard missing releases", lambda f: ["guard", "check", "-r", str(f["missing"]), str(f["utf8"])],
     2, ("does not exist",)),
    ("guard dir releases", lambda f: ["guard", "check", "-r", str(f["dir"]), str(f["utf8"])],
     2, ("is a directory",)),
    ("guard corrupt releases", lambda f: ["guard", "check", "-r", str(f["corrupt"]), str(f["utf8"])],
     2, ("is not JSON",)),
    ("guard empty releases", lambda f: ["guard", "check", "-r", str(f["empty"]), str(f["utf8"])],
     2, ("is not JSON",)),
    ("guard binary releases", lambda f: ["guard", "check", "-r", str(f["binary"]), str(f["utf8"])],
     2, ("binary",)),
    ("guard text as releases", lambda f: ["guard", "check", "-r", str(f["utf8"]), str(f["utf8"])],
     2, ("is not JSON",)),
    ("guard wrong json", lambda f: ["guard", "check", "-r", str(f["rels"]).replace("rels", "x"), "-"],
     2, ("does not exist",)),
    # redact
    ("redact gbk", lambda f: ["redact", str(f["gbk"])], 2, ("not valid utf-8", "--encoding")),
    ("redact missing", lambda f: ["redact", str(f["missing"])], 2, ("does not exist",)),
    ("redact dir", lambda f: ["redact", str(f["dir"])], 2, ("is a directory",)),
    ("redact binary", lambda f: ["redact", str(f["binary"])], 2, ("binary",)),
    ("redact eval missing", lambda f: ["redact", "eval", str(f["missing"])], 2, ("does not exist",)),
    ("redact eval dir", lambda f: ["redact", "eval", str(f["dir"])], 2, ("is a directory",)),
    ("redact eval corrupt", lambda f: ["redact", "eval", str(f["corrupt"])], 2, ("corpus",)),
    # init: the examples
    ("init under a file", lambda f: ["init", str(f["demo_db"] / "x.toml")], 2, ("is a file",)),
    ("init in /proc", lambda f: ["init", "/proc/nope.toml"], 2, ("cannot write",)),
    ("init a folder", lambda f: ["init", str(f["dir"])], 2, ("is a folder",)),
    # weekly: config problems are usage errors, data problems "unavailable"
    ("weekly missing config", lambda f: ["weekly", "-c", str(f["missing"])], 2, ("dpllm init",)),
    ("weekly dir config", lambda f: ["weekly", "-c", str(f["dir"])], 2, ("cannot read config",)),
    ("weekly gbk config", lambda f: ["weekly", "-c", str(f["gbk"])], 2, ("not UTF-8",)),
    ("weekly binary config", lambda f: ["weekly", "-c", str(f["binary"])], 2, ()),
    ("weekly corrupt config", lambda f: ["weekly", "-c", str(f["corrupt"])], 2, ("TOML",)),
    ("weekly bad week", lambda f: ["weekly", "--demo", "--week", "2026-W99", "--out", str(f["dir"])],
     2, ("ISO week",)),
    # stats and budget: data and ledger unavailable
    ("stats missing data",
     lambda f: ["stats", "--week", "2026-W47", "--data", str(f["missing"]).replace(".txt", ".db"),
                "--ledger", str(f["dir"] / "l.db")],
     4, ("does not exist",)),
    ("stats corrupt data",
     lambda f: ["stats", "--week", "2026-W47", "--data", str(f["demo_db"]),
                "--ledger", str(f["dir"] / "l.db")],
     4, ()),
    ("stats corrupt ledger",
     lambda f: ["stats", "--week", "2026-W47", "--data", str(f["demo_db"]),
                "--ledger", str(f["demo_db"])],
     4, ()),
    ("budget corrupt ledger", lambda f: ["budget", "show", "--ledger", str(f["demo_db"])], 4, ()),
    ("budget dir ledger", lambda f: ["budget", "show", "--ledger", str(f["dir"])], 4, ()),
    ("budget missing ledger", lambda f: ["budget", "show", "--ledger", str(f["missing"])],
     4, ("no ledger",)),
    # templates, plan, demo data
    ("templates lint missing", lambda f: ["templates", "lint", str(f["missing"])],
     2, ("does not exist",)),
    ("templates preview missing", lambda f: ["templates", "preview", str(f["missing"]) + ".j2"],
     2, ()),
    ("plan corrupt config", lambda f: ["plan", "--config", str(f["corrupt"])], 2, ("TOML",)),
    ("plan gbk config", lambda f: ["plan", "--config", str(f["gbk"])], 2, ("not UTF-8",)),
    ("plan simulate missing", lambda f: ["plan", "simulate", "--schedule", str(f["missing"])],
     2, ("does not exist",)),
    ("plan simulate corrupt", lambda f: ["plan", "simulate", "--schedule", str(f["corrupt"])],
     2, ()),
    ("demo-data in /proc", lambda f: ["demo-data", "--out", "/proc/nope.db", "--users", "5"],
     4, ()),
    ("demo-data over a file", lambda f: ["demo-data", "--out", str(f["utf8"]), "--users", "5"],
     4, ("exists",)),
    ("audit utility bad eps", lambda f: ["audit", "utility", "--eps", "a:b"], 2, ()),
]  # fmt: skip


@pytest.mark.parametrize(("name", "args", "expected", "needles"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_a_clean_error(
    files: dict[str, Path],
    name: str,
    args: Callable[[dict[str, Path]], list[str]],
    expected: int,
    needles: tuple[str, ...],
) -> None:
    code, out = _run(args(files))
    _clean(code, out, expected, *needles)


def test_no_permission(files: dict[str, Path]) -> None:
    try:
        files["noperm"].read_bytes()
    except PermissionError:
        pass
    else:
        pytest.skip("running as root: a mode-000 file is still readable")
    code, out = _run(["guard", "check", "-r", str(files["rels"]), str(files["noperm"])])
    _clean(code, out, 2, "no permission")
    code, out = _run(["guard", "check", "-r", str(files["noperm"]), str(files["rels"])])
    _clean(code, out, 2, "no permission")


def test_gbk_file_and_stdin_with_encoding(files: dict[str, Path]) -> None:
    rels = str(files["rels"])
    code, out = _run(["guard", "check", "-r", rels, "--encoding", "gbk", str(files["gbk"])])
    assert code == ExitCode.OK and out.startswith("ok:"), out
    code, out = _run(
        ["guard", "check", "-r", rels, "--encoding", "gbk", "-"], GBK_TEXT.encode("gbk")
    )
    assert code == ExitCode.OK and out.startswith("ok:"), out
    code, out = _run(["guard", "check", "-r", rels, "-"], GBK_TEXT.encode("gbk"))
    _clean(code, out, 2, "standard input is not valid utf-8", "--encoding")


def test_redact_gbk_stdin_with_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.weekly.helpers import shared_redactor

    monkeypatch.setattr("dpllm.cli.redact._redactor", lambda **_: shared_redactor())
    result = CliRunner().invoke(
        app, ["redact", "--encoding", "gbk", "--json", "-"], input=PHONE_TEXT.encode("gbk")
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert "13812345678" not in payload["text"] and "160" in payload["text"]
    assert payload["language"] == "zh"


def test_serve_port_in_use_exits_4(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out = _run(["serve", "--port", str(port), "--config", str(tmp_path / "none.toml")])
    _clean(code, out, ExitCode.UNAVAILABLE, f"127.0.0.1:{port}", "--port")


def test_budget_refused_exits_3_in_stats(tmp_path: Path) -> None:
    from dpllm.ledger.base import PoolSpec
    from dpllm.ledger.sqlite import SQLiteLedger
    from dpllm.release import Measure, to_micro

    runner = CliRunner()
    db, ledger = tmp_path / "demo.db", tmp_path / "ledger.db"
    made = runner.invoke(app, ["demo-data", "--out", str(db), "--users", "50", "--weeks", "1"])
    assert made.exit_code == 0, made.output
    SQLiteLedger(ledger).ensure_pool(PoolSpec("tiny", Measure.PURE, window_cap=to_micro(0.1)))
    # stats charges only configured pools (one pool tree for every command).
    config = tmp_path / "dpllm.toml"
    config.write_text('[[pools]]\nname = "tiny"\nwindow_cap = 0.1\n', encoding="utf-8")
    args = ["stats", "-c", str(config), "--data", str(db), "--ledger", str(ledger)]
    code, out = _run([*args, "--week", "2026-W47", "--pool", "tiny"])
    _clean(code, out, ExitCode.BUDGET, "tiny")
    assert SQLiteLedger(ledger).balance("tiny", "2026-W47").spent == 0


def test_no_permission_message_even_as_root(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root a mode-000 file is readable, so the OS refusal is simulated at read time."""
    real = Path.read_bytes
    target = files["noperm"]

    def read_bytes(self: Path) -> bytes:
        if self == target:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    real_open = Path.open

    def open_(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == target:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    monkeypatch.setattr(Path, "open", open_)  # text inputs are read in chunks
    code, out = _run(["guard", "check", "-r", str(files["rels"]), str(target)])
    _clean(code, out, 2, "no permission to read", str(target))
    code, out = _run(["redact", str(target)])
    _clean(code, out, 2, "no permission to read")
