"""Hostile CSV in, well-formed CSV out: no record can change how another is read.

DuckDB's CSV reader cannot be made safe against one user's text on its own: with
``null_padding`` a quoted line break fails the whole scan (the release then
depends on whether that user is present), and an unterminated quote swallows
the rows after it (every later row when they are unquoted). So a CSV source is
first copied, line by line, into a well-formed file that DuckDB then reads.

**The rule.** Records are parsed one at a time, strictly (RFC 4180: a quote
opens a field only at its start, closes it only before a delimiter or a line
end; ``""`` is a literal quote). A record may span line breaks inside a quoted
field, up to :data:`MAX_LINES_PER_RECORD` physical lines. A record that does not
parse, or does not have exactly the header's number of fields, is **dropped on
its first physical line only**, and parsing resumes on the next physical line:
a malformed record costs that one line (like a NULL), never the rows after it.

What this cannot do: tell a multi-line record that a broken writer produced
from two honest ones; that is why the span is bounded and the malformed case
resumes at the next line. Write CSV with a CSV writer.

Privacy: the copy reads every line once, in order, and its work per line is
bounded by ``MAX_LINES_PER_RECORD`` lines of look-ahead, so one user's records
change neither which other rows are read nor (beyond that bound) the time.
"""

from __future__ import annotations

import csv
import os
from collections import deque
from collections.abc import Iterator
from typing import IO

__all__ = ["MAX_LINES_PER_RECORD", "clean_csv"]

MAX_LINES_PER_RECORD = 32
"""Physical lines one record may span (quoted line breaks in a text)."""


def clean_csv(
    source: str | os.PathLike[str], out: IO[str], *, delimiter: str, width: int, header: bool
) -> tuple[int, int]:
    """Copy the records of ``source`` that parse, with ``width`` fields, into ``out``.

    Args:
        source: the CSV/TSV file (read as UTF-8, undecodable bytes replaced).
        out: where the well-formed records go (written with :mod:`csv`).
        delimiter: ``","`` or ``"\\t"``.
        width: the header's number of fields; other records are dropped.
        header: skip the first line (the column names).

    Returns:
        ``(kept, dropped)`` record counts (dropped counts physical lines).
    """
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    kept = dropped = 0
    with open(source, encoding="utf-8", errors="replace", newline="") as f:
        lines: Iterator[str] = iter(f)
        if header:
            next(lines, None)
        ahead: deque[str] = deque()

        def fill(n: int) -> None:
            while len(ahead) < n:
                line = next(lines, None)
                if line is None:
                    return
                ahead.append(line)

        while True:
            fill(1)
            if not ahead:
                break
            used = 0

            def feed() -> Iterator[str]:
                nonlocal used
                while used < MAX_LINES_PER_RECORD:
                    fill(used + 1)
                    if used >= len(ahead):
                        return
                    used += 1
                    yield ahead[used - 1]

            reader = csv.reader(feed(), delimiter=delimiter, quotechar='"', strict=True)
            try:
                record: list[str] | None = next(reader)
            except (csv.Error, StopIteration):
                record = None
            if record is not None and len(record) == width:
                writer.writerow(record)
                kept += 1
                for _ in range(used):
                    ahead.popleft()
            else:
                ahead.popleft()  # drop the first line only; resume on the next one
                dropped += 1
    return kept, dropped
