"""Flink's stock MATCH_RECOGNIZE query, run by kleene's match_recognize dialect (issue 16).

``python -m benchmarks.match_recognize [--events N]`` takes the query text PyFlink runs
(:func:`benchmarks.flink_baseline.match_query`, verbatim, for SKIP TO NEXT ROW and SKIP PAST
LAST ROW), runs it through kleene on the stock stream (1,000,000 events by default) and prints
per skip mode the number of matches, the CPU seconds of kleene's read + compile + match, and
whether the match set (a_id, b_first, b_last, c_id) equals the hand loop's
(benchmarks/handloop.py: every match for TO NEXT ROW; for PAST LAST ROW the walk that takes, per
symbol, the match at the first start row at or after the previous match's last row + 1). Flink's
own counts, from the recorded benchmark run (results/2026-11-21.json), are printed beside them.
Exit status 1 if a set differs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import kleene
from kleene.events.readers import read_events

from . import datasets, flink_baseline, handloop

RESULTS = Path(__file__).resolve().parent / "results" / "2026-11-21.json"
Quad = tuple[int, int, int, int]


def kleene_matches(csv: Path, skip: str) -> tuple[set[Quad], float]:
    """kleene's matches of Flink's query text (``skip``: next-row / past-last) and the CPU
    seconds of reading, compiling and matching."""
    t0 = time.process_time()
    events, _ = read_events(csv, time_col="ts", event_type="Row", id_col="id")
    q = kleene.compile(flink_baseline.match_query(skip), dialect="match_recognize")
    found = q.run(events)
    secs = time.process_time() - t0
    return {(m.values["a_id"], m.values["b_first"], m.values["b_last"], m.values["c_id"])
            for m in found}, secs


def loop_matches(csv: Path, skip: str) -> set[Quad]:
    """The hand loop's matches (row index = id in the generated stream)."""
    t = handloop.read_stock(csv)
    ts = t.column("ts").cast("int64").to_pylist()
    every = handloop.match_stock(t.column("symbol").to_pylist(), ts,
                                 t.column("price").to_pylist())
    syms = t.column("symbol").to_pylist()
    if skip == "next-row":
        return {(a, b[0], b[-1], c) for a, b, c in every}
    out: set[Quad] = set()
    nxt: dict[str, int] = {}
    for a, b, c in sorted(every):
        if a >= nxt.get(syms[a], -1):
            out.add((a, b[0], b[-1], c))
            nxt[syms[a]] = c + 1
    return out


def flink_counts() -> dict[str, int | None]:
    """Flink's recorded match counts per skip mode (None if not recorded)."""
    try:
        checks = json.loads(RESULTS.read_text())["checks"]
    except (OSError, KeyError, ValueError):
        return {s: None for s in flink_baseline.SKIPS}
    return {s: checks.get(f"flink AFTER MATCH {s} matches") for s in flink_baseline.SKIPS}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.match_recognize",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000)
    args = p.parse_args(argv)
    csv = datasets.stock_csv(args.events)
    flink = flink_counts() if args.events == 1_000_000 else {}
    ok = True
    for skip in flink_baseline.SKIPS:
        got, secs = kleene_matches(csv, skip)
        ref = loop_matches(csv, skip)
        same = got == ref
        ok = ok and same
        print(json.dumps({"skip": flink_baseline.SKIPS[skip], "events": args.events,
                          "kleene_matches": len(got), "kleene_cpu_s": round(secs, 2),
                          "hand_loop_matches": len(ref), "same_match_set": same,
                          "flink_matches_recorded": flink.get(skip)}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
