"""The request log: one JSON line per event, made cheaply (no caller lookup, no system
call per line for ids or process names), with the same content."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from dpllm.server.logging import JsonFormatter, configure_json_logging, log_event, new_request_id


@pytest.fixture()
def json_logging() -> Iterator[None]:
    """configure_json_logging for one test, every global it sets put back afterwards."""
    root = logging.getLogger("dpllm")
    saved = (
        logging._srcfile,  # type: ignore[attr-defined]
        logging.logThreads,
        logging.logProcesses,
        logging.logMultiprocessing,
        root.handlers[:],
        root.level,
        root.propagate,
    )
    try:
        yield
    finally:
        (
            logging._srcfile,  # type: ignore[attr-defined]
            logging.logThreads,
            logging.logProcesses,
            logging.logMultiprocessing,
            root.handlers[:],
            level,
            root.propagate,
        ) = saved
        root.setLevel(level)


def test_request_ids_are_unique_hex_of_uuid4_length() -> None:
    ids = {new_request_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(len(i) == 32 and int(i, 16) >= 0 and i == i.lower() for i in ids)


def test_the_time_stamp_follows_each_record() -> None:
    formatter = JsonFormatter()
    record = logging.LogRecord("dpllm.server", logging.INFO, "", 0, "event", None, None)
    stamps = []
    for created in (1_700_000_000.1, 1_700_000_000.9, 1_700_000_001.2, 1_700_000_000.5):
        record.created = created
        stamps.append(json.loads(formatter.format(record))["time"])
    assert stamps[0] == stamps[1] == stamps[3] != stamps[2]
    expected = [
        formatter.formatTime(record, "%Y-%m-%dT%H:%M:%S")  # what it was before the cache
        for record.created in (1_700_000_000.1, 1_700_000_001.2)
    ]
    assert [stamps[0], stamps[2]] == expected


def test_an_event_is_one_json_line_with_its_fields(
    json_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_json_logging(logging.INFO)
    log_event("request", request_id="abc", status=200, ms=1.5, analyst="alice")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert line["event"] == "request" and line["request_id"] == "abc"
    assert line["status"] == 200 and line["ms"] == 1.5 and line["analyst"] == "alice"
    assert line["level"] == "info" and line["logger"] == "dpllm.server"
    assert set(line) == {
        "time",
        "level",
        "logger",
        "event",
        "request_id",
        "status",
        "ms",
        "analyst",
    }
