"""Peak memory and time of ``Redactor.redact`` on a large text (issue #20: ≤ 200 MB extra for 10 MB).

Run: ``python bench/redact_memory.py --mb 10 [--lang en|zh]``. The text repeats the shipped
corpus; the redactor is built and warmed first, then the growth of the process's peak resident
set size during one ``redact`` call (peak ``ru_maxrss`` after, minus the resident size just
before) is printed with the wall and CPU time.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from dpllm.redact import Redactor

CORPUS = Path(__file__).parents[1] / "tests" / "data" / "redact_corpus.jsonl"


def build(lang: str, size: int) -> str:
    lines = [json.loads(x) for x in CORPUS.read_text(encoding="utf-8").splitlines()]
    parts = [r["text"] for r in lines if r["lang"] == lang]
    block = ("" if lang == "zh" else " ").join(parts) + "\n"
    return (block * (size // len(block) + 1))[:size]


def _resident_kb() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--lang", choices=("en", "zh"), default="en")
    args = parser.parse_args()
    redactor = Redactor()
    redactor.redact(build(args.lang, 50_000))  # warm every code path
    text = build(args.lang, int(args.mb * 1_000_000))
    before = _resident_kb()
    wall, cpu = time.perf_counter(), time.process_time()
    result = redactor.redact(text)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"{args.lang} {len(text):,} chars: peak RSS +{(after - before) / 1024:.0f} MB "
        f"(text itself {len(text.encode('utf-8')) / 1e6:.1f} MB UTF-8), "
        f"{sum(result.counts.values()):,} spans, wall {wall:.1f} s, cpu {cpu:.1f} s"
    )


if __name__ == "__main__":
    main()
