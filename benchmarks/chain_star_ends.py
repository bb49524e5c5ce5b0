"""The chain plan's forward walk on a ``*`` first state and on a ``*`` last state over one
event type (issue 13, session 10, branch ``chain-fwd4``): ``Runtime.push_to`` into a null
sink, median seconds of 3 runs and the peak traced memory of a fourth::

    PYTHONPATH=<old src> python -m benchmarks.chain_star_ends old
    PYTHONPATH=src python -m benchmarks.chain_star_ends new

Run the two alternately (``for i in 1 2 3; do ...; done``); each prints one line per shape.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
import tracemalloc

from kleene.api import analyze
from kleene.events import EventBatch
from kleene.plans.registry import start

QUERIES = {
    "star_first": "PATTERN SEQ(S* a[], S b, S c) WHERE a[i].x > b.x AND c.x <= b.x "
                  "WITHIN 14 seconds",
    "star_last": "PATTERN SEQ(S a, S+ b[], S* c[]) WHERE b[i].x > a.x AND c[i].x < a.x "
                 "WITHIN 10 seconds",
}


def _events(n: int = 160, seed: int = 5) -> EventBatch:
    rng = random.Random(seed)
    return EventBatch.from_records(
        [{"id": i, "type": "S", "ts": i, "x": rng.randint(0, 9)} for i in range(n)])


def run(query: str, events: EventBatch, mem: bool) -> tuple[int, float, int]:
    """(matches, seconds, peak traced bytes) of one push_to + close_to into a null sink."""
    rt = start(analyze(query), plan="chain", max_matches_per_call=None,
               max_runs_per_partition=None)
    n = [0]

    def sink(piece: object) -> None:
        n[0] += len(piece)  # type: ignore[arg-type]

    if mem:
        tracemalloc.start()
    t = time.perf_counter()
    rt.push_to(events, sink, chunk=1000)
    rt.close_to(sink, chunk=1000)
    dt = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] if mem else 0
    if mem:
        tracemalloc.stop()
    return n[0], dt, peak


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "run"
    events = _events()
    for name, q in QUERIES.items():
        ts = [run(q, events, False)[1] for _ in range(3)]
        n, _, peak = run(q, events, True)
        print(f"{label} {name} matches {n} median s {statistics.median(ts):.3f} "
              f"peak MB {peak / 1e6:.1f}", flush=True)


if __name__ == "__main__":
    main()
