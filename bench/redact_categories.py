"""Per-category figures of the Redactor on the challenge corpus (:mod:`dpllm.redact.challenge`).

Run: ``python bench/redact_categories.py [--misses N]``. Prints, per category, the share of
gold spans fully redacted (or of decoys left intact), and a few misses of each category.
"""

from __future__ import annotations

import argparse
import time

from dpllm.redact import Redactor
from dpllm.redact.challenge import CATEGORIES, generate, score


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--misses", type=int, default=0)
    args = parser.parse_args()
    records = generate()
    redactor = Redactor()
    t = time.perf_counter()
    figures = score(redactor, records)
    took = time.perf_counter() - t
    print("| category | good / total | share |")
    print("|---|---|---|")
    for c in CATEGORIES:
        good, total = figures[c]
        print(f"| {c} | {good} / {total} | {good / total:.1%} |")
    print(f"\n{len(records)} records in {took:.1f} s")
    if args.misses:
        for c in CATEGORIES:
            shown = 0
            for rec in records:
                if rec["category"] != c or shown >= args.misses:
                    continue
                one = score(redactor, [rec])[c]
                if one[0] < one[1]:
                    print(c, "|", rec["text"], "|", redactor.redact(rec["text"]).text)
                    shown += 1


if __name__ == "__main__":
    main()
