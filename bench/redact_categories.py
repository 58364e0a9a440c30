"""Per-category figures of the Redactor on the challenge corpus (:mod:`dpllm.redact.challenge`).

Run: ``python bench/redact_categories.py [--misses N] [--set base|added]``. Prints, per
category, the share of gold spans fully redacted (or of decoys left intact) on the first
corpus (``base``), on the cases added in the second round of issue #20 (``added``) and on
both; with ``--misses``, up to N misses of each category.
"""

from __future__ import annotations

import argparse
import time

from dpllm.redact import Redactor
from dpllm.redact.challenge import CATEGORIES, generate, score


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--misses", type=int, default=0)
    parser.add_argument("--set", choices=("base", "added"), default=None)
    args = parser.parse_args()
    records = generate()
    redactor = Redactor()
    t = time.process_time()
    parts = {s: score(redactor, [r for r in records if r["set"] == s]) for s in ("base", "added")}
    took = time.process_time() - t
    print("| category | base | added | all |")
    print("|---|---|---|---|")
    for c in CATEGORIES:
        cells = []
        for good, total in (parts["base"][c], parts["added"][c]):
            cells.append(f"{good}/{total} = {good / total:.1%}" if total else "–")
        good = parts["base"][c][0] + parts["added"][c][0]
        total = parts["base"][c][1] + parts["added"][c][1]
        print(f"| {c} | {cells[0]} | {cells[1]} | {good}/{total} = **{good / total:.1%}** |")
    print(f"\n{len(records)} records, {took:.1f} s CPU")
    if args.misses:
        for c in CATEGORIES:
            shown = 0
            for rec in records:
                if rec["category"] != c or shown >= args.misses:
                    continue
                if args.set and rec["set"] != args.set:
                    continue
                one = score(redactor, [rec])[c]
                if one[0] < one[1]:
                    print(c, rec["set"], "|", rec["text"], "|", redactor.redact(rec["text"]).text)
                    shown += 1


if __name__ == "__main__":
    main()
