"""Hostile or careless input to the command line: a clean error, its exit code, nothing spent.

Each case was found by feeding ``dpllm`` what an attacker or a careless user would:
huge numbers in ``dpllm.toml``, NUL characters, codecs that are not text
encodings, a huge ``--limit``, a data file given as the ledger. None may end in
exit 70 (a traceback), and none may leave the ledger (or the data) changed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpllm.cli import app
from dpllm.cli._common import ExitCode


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("adversarial") / "demo.db"
    made = CliRunner().invoke(app, ["demo-data", "--out", str(db), "--users", "40", "--weeks", "2"])
    assert made.exit_code == 0, made.output
    return db


def _run(args: list[str], stdin: bytes | str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, args, input=stdin)
    return result.exit_code, result.output


def _charges(ledger: Path) -> int:
    if not ledger.exists():
        return 0
    con = sqlite3.connect(ledger)
    try:
        return int(con.execute("SELECT count(*) FROM charges").fetchone()[0])
    finally:
        con.close()


POOLS = """
[[pools]]
name = "global"
window_cap = {cap}
lifetime_cap = {life}

[[pools]]
name = "weekly"
parent = "global"
window_cap = 1.8
"""


@pytest.mark.parametrize(
    ("cap", "life", "field"),
    [
        ("1e300", "20.0", "window_cap"),
        ("99999999999999999", "20.0", "window_cap"),
        ("2.0", "1e300", "lifetime_cap"),
    ],
)
def test_a_huge_cap_in_the_config_is_a_config_error(
    tmp_path: Path, demo_db: Path, cap: str, life: str, field: str
) -> None:
    """A cap whose micro-units do not fit the ledger's integers was an OverflowError (70)."""
    config = tmp_path / "dpllm.toml"
    config.write_text(POOLS.format(cap=cap, life=life), encoding="utf-8")
    ledger = tmp_path / "ledger.db"
    code, out = _run(
        ["stats", "-c", str(config), "--data", str(demo_db), "--ledger", str(ledger)]
        + ["--week", "2026-W46"]
    )
    assert code == ExitCode.USAGE, out
    assert "Traceback" not in out and "internal error" not in out, out
    assert field in out and "too large" in out, out
    assert _charges(ledger) == 0


def test_a_huge_plan_epsilon_is_refused_before_anything_is_spent(
    tmp_path: Path, demo_db: Path
) -> None:
    config = tmp_path / "dpllm.toml"
    config.write_text(
        "[plan.queries]\nfeedback_count = 0.2\nactive_users = 0.2\nmean_rating = 1e300\n"
        "rating_histogram = 0.4\ntopic_counts = 0.3\n",
        encoding="utf-8",
    )
    ledger = tmp_path / "ledger.db"
    code, out = _run(
        ["stats", "-c", str(config), "--data", str(demo_db), "--ledger", str(ledger)]
        + ["--week", "2026-W46"]
    )
    assert code == ExitCode.USAGE, out
    assert "plan.queries.mean_rating" in out and "too large" in out, out
    assert _charges(ledger) == 0


@pytest.mark.parametrize(
    "setting",
    [
        '[ledger]\nurl = "led\\u0000ger.db"\n',
        '[data]\npath = "de\\u0000mo.db"\n',
        '[output]\ndir = "rep\\u0000orts"\n',
    ],
)
def test_a_nul_character_in_a_config_string_is_a_config_error(tmp_path: Path, setting: str) -> None:
    """TOML allows ``\\u0000``; no path or name may hold it (it was a ValueError, exit 70)."""
    config = tmp_path / "dpllm.toml"
    config.write_text(setting, encoding="utf-8")
    code, out = _run(["stats", "-c", str(config), "--week", "2026-W46"])
    assert code == ExitCode.USAGE, out
    assert "NUL" in out and "line 2" in out, out


def test_an_empty_dataset_id_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "dpllm.toml"
    config.write_text('[data]\ndataset_id = ""\n', encoding="utf-8")
    code, out = _run(["stats", "-c", str(config), "--week", "2026-W46"])
    assert code == ExitCode.USAGE, out
    assert "data.dataset_id" in out, out


@pytest.mark.parametrize("codec", ["rot13", "base64", "hex", "zlib"])
@pytest.mark.parametrize("command", [["redact", "text"], ["guard", "check", "-r", "REL"]])
def test_a_codec_that_is_not_a_text_encoding_is_a_usage_error(
    tmp_path: Path, codec: str, command: list[str]
) -> None:
    """``--encoding rot13`` passed codecs.lookup and then failed in decode (exit 70)."""
    text = tmp_path / "in.txt"
    text.write_text("hello", encoding="utf-8")
    releases = tmp_path / "rel.json"
    releases.write_text('{"schema": "dpllm.releases/1", "releases": {}}', encoding="utf-8")
    args = [str(releases) if a == "REL" else a for a in command]
    code, out = _run([*args, "--encoding", codec, str(text)])
    assert code == ExitCode.USAGE, out
    assert "not a text encoding" in out, out


def test_a_huge_history_limit_is_not_an_internal_error(tmp_path: Path) -> None:
    from dpllm.ledger.base import PoolSpec
    from dpllm.ledger.sqlite import SQLiteLedger
    from dpllm.release import Measure

    ledger = tmp_path / "ledger.db"
    SQLiteLedger(ledger).ensure_pool(PoolSpec("p", Measure.PURE, window_cap=1_000_000))
    code, out = _run(["budget", "history", "--ledger", str(ledger), "--limit", "9" * 30, "--json"])
    assert code in (ExitCode.OK, ExitCode.USAGE), out
    assert "internal error" not in out, out


def test_budget_show_never_writes_a_ledger_into_a_data_database(
    tmp_path: Path, demo_db: Path
) -> None:
    """``budget show --ledger demo.db`` (a read-only command) created ten ledger
    tables in the feedback database; it must refuse and leave the file alone."""
    data = tmp_path / "data.db"
    data.write_bytes(demo_db.read_bytes())
    before = data.read_bytes()
    code, out = _run(["budget", "show", "--ledger", str(data)])
    assert code == ExitCode.UNAVAILABLE, out
    assert "not a dpllm ledger" in out, out
    assert data.read_bytes() == before
    assert not Path(f"{data}-wal").exists()


def test_budget_show_does_not_turn_an_empty_file_into_a_ledger(tmp_path: Path) -> None:
    empty = tmp_path / "notes.txt"
    empty.write_bytes(b"")
    code, out = _run(["budget", "show", "--ledger", str(empty)])
    assert code == ExitCode.UNAVAILABLE, out
    assert empty.read_bytes() == b""


def test_stats_refuses_a_data_database_as_its_ledger(tmp_path: Path, demo_db: Path) -> None:
    """Pointing [ledger] url at the feedback database wrote the ledger's tables into it."""
    data = tmp_path / "data.db"
    data.write_bytes(demo_db.read_bytes())
    before = data.read_bytes()
    code, out = _run(["stats", "--data", str(data), "--ledger", str(data), "--week", "2026-W46"])
    assert code == ExitCode.UNAVAILABLE, out
    assert "not a dpllm ledger" in out, out
    assert data.read_bytes() == before


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('[data]\ntable = "feedback\\n"\n', "data.table"),
        ('[data.columns]\nuser = "user_id\\n"\n', "data.columns.user"),
        ('[ldp.metrics."rating\\n"]\nepsilon = 1.0\n', "ldp.metrics"),
    ],
)
def test_a_name_with_a_trailing_newline_is_refused_where_it_is_configured(
    text: str, field: str
) -> None:
    """``^…$`` let ``"feedback\\n"`` through the config check (rule 37: match whole strings)."""
    from dpllm.config import Settings
    from dpllm.errors import ConfigError

    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        Settings.parse(text)


def test_weekly_checks_its_output_folder_before_charging(tmp_path: Path, demo_db: Path) -> None:
    """``--out`` naming a file failed with "[Errno 20] Not a directory" after the
    plan was charged; it is now refused first, and the ledger stays empty."""
    config = tmp_path / "dpllm.toml"
    config.write_text(f'[data]\npath = "{demo_db}"\n', encoding="utf-8")
    ledger = tmp_path / "ledger.db"
    blocker = tmp_path / "reports"
    blocker.write_text("a file where the reports folder should be", encoding="utf-8")
    code, out = _run(
        ["weekly", "-c", str(config), "--ledger", str(ledger), "--out", str(blocker)]
        + ["--week", "2026-W46"]
    )
    assert code == ExitCode.UNAVAILABLE, out
    assert "not a folder" in out and "nothing was charged" in out, out
    assert _charges(ledger) == 0


@pytest.mark.parametrize(
    "args",
    [
        ["quickstart", "--users", "99999999999"],
        ["demo-data", "--out", "OUT", "--users", "99999999999"],
    ],
)
def test_a_typo_sized_user_count_is_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    """``--users 99999999999`` (an extra digit or five) ran until memory ran out."""
    code, out = _run([str(tmp_path / "demo.db") if a == "OUT" else a for a in args])
    assert code == ExitCode.USAGE, out
    assert "1000000" in out.replace(",", "").replace("_", ""), out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--port", "99999"], "--port"),
        (["--port", "-1"], "--port"),
        (["--log-level", "bogus"], "--log-level"),
    ],
)
def test_serve_options_out_of_range_are_usage_errors(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    """An out-of-range port was an OverflowError from bind() and an unknown log level a
    KeyError in uvicorn: both exit 70."""
    config = tmp_path / "dpllm.toml"
    config.write_text("", encoding="utf-8")
    code, out = _run(["serve", "-c", str(config), *args])
    assert code == ExitCode.USAGE, out
    assert needle in out and "internal error" not in out, out


def test_a_release_whose_interval_width_overflows_is_refused_when_read(tmp_path: Path) -> None:
    """``guard check -r`` with an interval of [-1e308, 1e308] ended in a ValueError
    from the rounding (its half-width is inf), exit 70."""
    import json

    from dpllm.errors import InvalidPrivacyParameter
    from dpllm.release import Cost, Release

    fields = {
        "name": "mean_rating",
        "values": (3.7,),
        "mechanism": "laplace",
        "noise_scale": 0.1,
        "cost": Cost.pure(0.5),
        "fingerprint": "fp",
    }
    with pytest.raises(InvalidPrivacyParameter, match="too wide"):
        Release(intervals=((-1e308, 1e308),), **fields)  # type: ignore[arg-type]
    record = Release(intervals=((3.5, 3.9),), **fields).to_dict()  # type: ignore[arg-type]
    record["intervals"] = [[-1e308, 1e308]]
    releases = tmp_path / "rel.json"
    releases.write_text(
        json.dumps({"schema": "dpllm.releases/1", "releases": {"mean_rating": record}}),
        encoding="utf-8",
    )
    code, out = _run(["guard", "check", "-r", str(releases), "-"], stdin="The mean was 3.7.")
    assert code == ExitCode.USAGE, out
    assert "too wide" in out, out


@pytest.mark.parametrize("command", [["redact", "text"], ["guard", "check", "-r", "REL"]])
def test_an_endless_binary_input_is_refused_at_once(tmp_path: Path, command: list[str]) -> None:
    """``guard check -r rel.json /dev/zero`` read until memory ran out (5 GB in 15 s):
    the whole input was read before the NUL check."""
    releases = tmp_path / "rel.json"
    releases.write_text('{"schema": "dpllm.releases/1", "releases": {}}', encoding="utf-8")
    args = [str(releases) if a == "REL" else a for a in command]
    code, out = _run([*args, "/dev/zero"])
    assert code == ExitCode.USAGE, out
    assert "binary" in out, out


def test_a_text_input_past_the_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dpllm.cli._common as common

    monkeypatch.setattr(common, "MAX_INPUT_BYTES", 1000)
    big = tmp_path / "big.txt"
    big.write_text("word " * 100_000, encoding="utf-8")
    code, out = _run(["guard", "check", "-r", str(big), str(big)])
    assert code == ExitCode.USAGE, out
    assert "larger than" in out, out
