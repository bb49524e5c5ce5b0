"""The chain plan's forward walk on a ``*`` first state and on a ``*`` last state over one
event type (issue 13; sessions 10 and 11): ``Runtime.push_to`` into a null sink, seconds and
the peak traced memory of a separate run.

One side (the tree on ``PYTHONPATH``): median of 3 runs, then one traced run::

    PYTHONPATH=src python -m benchmarks.chain_star_ends new [--shapes star_last,...]

Old against new, alternately in one run (each round runs every tree once per shape in a
child process, in turn; medians over the rounds, the peak from round 1)::

    PYTHONPATH=src python -m benchmarks.chain_star_ends ab --tree old=/tmp/old/src \\
        --tree new=src [--rounds 5] [--shapes star_last,star_last_not]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Any

QUERIES = {
    "star_first": "PATTERN SEQ(S* a[], S b, S c) WHERE a[i].x > b.x AND c.x <= b.x "
                  "WITHIN 14 seconds",
    "star_last": "PATTERN SEQ(S a, S+ b[], S* c[]) WHERE b[i].x > a.x AND c[i].x < a.x "
                 "WITHIN 10 seconds",
    "star_last_not": "PATTERN SEQ(S a, NOT S n, S+ b[], S* c[]) WHERE n.x = 9 AND "
                     "b[i].x > a.x AND c[i].x < a.x WITHIN 10 seconds",
}
"""``star_last_not``: the ``*`` last state with a NOT before the lists (session 11: merged
blocks; before, candidates)."""


def _events(n: int = 160, seed: int = 5) -> Any:
    from kleene.events import EventBatch

    rng = random.Random(seed)
    return EventBatch.from_records(
        [{"id": i, "type": "S", "ts": i, "x": rng.randint(0, 9)} for i in range(n)])


def run(query: str, events: Any, mem: bool) -> tuple[int, float, int]:
    """(matches, seconds, peak traced bytes) of one push_to + close_to into a null sink."""
    from kleene.api import analyze
    from kleene.plans.registry import start

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


def _side(label: str, shapes: list[str], times: int, mem: bool) -> None:
    events = _events()
    for name in shapes:
        q = QUERIES[name]
        ts = [run(q, events, False)[1] for _ in range(times)]
        n, _, peak = run(q, events, True) if mem else (run(q, events, False)[0], 0.0, 0)
        print(f"{label} {name} matches {n} median s {statistics.median(ts):.3f} "
              f"peak MB {peak / 1e6:.1f}", flush=True)


def _ab(trees: list[tuple[str, str]], shapes: list[str], rounds: int) -> None:
    secs: dict[tuple[str, str], list[float]] = {}
    info: dict[tuple[str, str], tuple[int, float]] = {}
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for r in range(rounds):
        for label, src in trees:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.abspath(src), here]))
            args = [sys.executable, "-m", "benchmarks.chain_star_ends", label, "--times", "1",
                    "--shapes", ",".join(shapes)] + (["--no-mem"] if r else [])
            out = subprocess.run(args, env=env, capture_output=True, text=True, check=True,
                                 cwd=here).stdout
            for line in out.splitlines():
                w = line.split()
                key = (w[0], w[1])
                secs.setdefault(key, []).append(float(w[6]))
                if not r:
                    info[key] = (int(w[3]), float(w[9]))
                print(line, flush=True)
    base = trees[0][0]
    for name in shapes:
        b = statistics.median(secs[(base, name)])
        for label, _src in trees:
            m = statistics.median(secs[(label, name)])
            n, peak = info[(label, name)]
            print(f"{name} {label}: matches {n} median s {m:.3f} ({m / b:.2f}x {base}) "
                  f"peak MB {peak:.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.chain_star_ends")
    ap.add_argument("label", nargs="?", default="run",
                    help="the side's name, or 'ab': alternate the --tree's")
    ap.add_argument("--shapes", default=",".join(QUERIES))
    ap.add_argument("--tree", action="append", default=[],
                    help="ab: NAME=SRC (a kleene source tree), in the order to run them")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--times", type=int, default=3)
    ap.add_argument("--no-mem", action="store_true")
    a = ap.parse_args()
    shapes = a.shapes.split(",")
    bad = [s for s in shapes if s not in QUERIES]
    if bad:
        ap.error(f"--shapes: unknown shape {bad[0]!r} (one of {', '.join(QUERIES)})")
    if a.label == "ab":
        trees = [tuple(t.split("=", 1)) for t in a.tree]
        if len(trees) < 2 or any(len(t) != 2 for t in trees):
            ap.error("ab needs two or more --tree NAME=SRC")
        _ab([(t[0], t[1]) for t in trees], shapes, a.rounds)
    else:
        _side(a.label, shapes, a.times, not a.no_mem)


if __name__ == "__main__":
    main()
