"""The chain plan's forward walk where a match starts in several states (issue 13, session 11,
branch ``star2``): two leading ``*`` states, and a ``*`` first state with a ``*`` last state,
over one event type (the Kleene explosion). ``Runtime.push_to`` of one call into a null sink;
each measurement in a fresh process (its peak RSS is the run's), old and new alternating::

    PYTHONPATH=src python -m benchmarks.chain_fwd_starts --old-src /tmp/kleene-s11/src

prints one line per run and then, per shape, the medians: matches, seconds, matches/s and
the peak RSS above the process's before the call (``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time

QUERIES = {
    "two_stars": "PATTERN SEQ(S* a[], S* b[], S c) WHERE a[i].x > c.x AND b[i].x < c.x "
                 "WITHIN 10 seconds",
    "star_both": "PATTERN SEQ(S* a[], S b, S* c[]) WHERE a[i].x > b.x AND c[i].x < b.x "
                 "WITHIN 9 seconds",
}


def child(shape: str, n: int) -> None:
    """One measurement in this process: prints matches, seconds, RSS before and peak (KB)."""
    from kleene.api import analyze
    from kleene.events import EventBatch
    from kleene.plans.registry import start

    rng = random.Random(5)
    events = EventBatch.from_records(
        [{"id": i, "type": "S", "ts": i, "x": rng.randint(0, 9)} for i in range(n)])
    rt = start(analyze(QUERIES[shape]), plan="chain", max_matches_per_call=None,
               max_runs_per_partition=None)
    got = [0]

    def sink(piece: object) -> None:
        got[0] += len(piece)  # type: ignore[arg-type]

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    rt.push_to(events, sink, chunk=1000)
    rt.close_to(sink, chunk=1000)
    dt = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"matches": got[0], "s": dt, "rss0_kb": before, "rss_kb": peak}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--old-src", help="the old tree's src (omit: new only)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--events", type=int, default=400)
    ap.add_argument("--shapes", default=",".join(QUERIES))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.events)
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"new": os.path.join(here, "src")}
    if a.old_src:
        trees["old"] = a.old_src
    res: dict[tuple[str, str], list[dict[str, float]]] = {}
    for r in range(a.rounds):
        for shape in a.shapes.split(","):
            order = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for label in order:
                env = dict(os.environ, PYTHONPATH=trees[label])
                out = subprocess.run(
                    [sys.executable, "-m", "benchmarks.chain_fwd_starts", "--child", shape,
                     "--events", str(a.events)], env=env, cwd=here, check=True,
                    capture_output=True, text=True).stdout
                row = json.loads(out.strip().splitlines()[-1])
                res.setdefault((shape, label), []).append(row)
                print(f"round {r} {shape} {label} matches {row['matches']} s {row['s']:.3f} "
                      f"RSS+ MB {(row['rss_kb'] - row['rss0_kb']) / 1024:.1f}", flush=True)
    for (shape, label), rows in sorted(res.items()):
        s = statistics.median(x["s"] for x in rows)
        rss = statistics.median((x["rss_kb"] - x["rss0_kb"]) / 1024 for x in rows)
        m = rows[0]["matches"]
        print(f"{shape} {label}: matches {m} median s {s:.3f} matches/s {m / s:,.0f} "
              f"peak RSS + {rss:.1f} MB")


if __name__ == "__main__":
    main()
