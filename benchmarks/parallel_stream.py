"""Issue 13 / 15: a keyed parallel stream's ``push_to`` into a null sink against one runtime's,
the old code's against this tree's, alternately, in one command::

    PYTHONPATH=src python -m benchmarks.parallel_stream --base-src /tmp/old/src \
        [--events 4000] [--window 40] [--batch 250] [--workers 2] [--pairs 3]

The explosion query (``queries.EXPLODE``: ``SEQ(Stock a, Stock+ b[], Stock c) WHERE c.price >
a.price PARTITION BY symbol WITHIN W``) on the chain plan (no caps), over the first
``--events`` stock events pushed ``--batch`` at a time, every call's matches written to a sink
that drops them (``push_to`` / ``close_to``, pieces of 16,384). Each run is a fresh process:
``par-new`` (``ParallelStream`` with ``--workers`` on this tree), ``par-old`` (the same on
``--base-src``), ``one`` (one ``Runtime``, this tree), in that order ``--pairs`` times. Per run:
matches, wall seconds and matches/s, CPU seconds of the calling process and of its workers,
the calling process's peak RSS (and before the run) and the largest worker's (getrusage
``RUSAGE_CHILDREN``: the workers are its only children). Prints the rows, medians and the
pair-by-pair ratios, the load average before and after; ``--out`` writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

MODES = ("par-new", "par-old", "one")


def run_one(events: int, window: int, batch: int, workers: int) -> dict[str, Any]:
    """One run in this process (``workers`` 0: one Runtime), as a row."""
    from benchmarks import queries
    from benchmarks.linkedcep import stock_events
    from kleene.api import analyze
    from kleene.plans.registry import choose
    from kleene.runtime.engine import Runtime

    ev = stock_events(events)
    compiled = choose(analyze(queries.EXPLODE.format(window=f"{window} seconds")),
                      plan="chain")
    caps: dict[str, Any] = {"max_matches_per_call": None, "max_matches_per_event": None}
    rt: Any
    if workers:
        from kleene.runtime.parallel import ParallelStream

        rt = ParallelStream(compiled, workers, **caps)
        assert rt.workers == workers, rt.reason
    else:
        rt = Runtime(compiled, **caps)
    before = resource.getrusage(resource.RUSAGE_SELF)

    def null(_piece: Any) -> None:
        return None

    t0 = time.perf_counter()
    m = 0
    for i in range(0, len(ev), batch):
        m += rt.push_to(ev.slice(i, batch), null)
    m += rt.close_to(null)  # (the workers end here)
    wall = time.perf_counter() - t0
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"matches": m, "wall_s": wall, "matches_per_s": m / wall,
            "cpu_self_s": me.ru_utime + me.ru_stime - before.ru_utime - before.ru_stime,
            "cpu_workers_s": kids.ru_utime + kids.ru_stime,
            "rss_before_mb": before.ru_maxrss / 1024, "rss_peak_mb": me.ru_maxrss / 1024,
            "worker_rss_peak_mb": kids.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-src", help="the old tree's src (par-old runs on it)")
    ap.add_argument("--events", type=int, default=4000)
    ap.add_argument("--window", type=int, default=40)
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # a child run: workers (0: one Runtime)
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(run_one(a.events, a.window, a.batch, int(a.one))))
        return
    modes = [m for m in MODES if a.base_src or m != "par-old"]
    load0 = open("/proc/loadavg").read().split()[:3]
    rows: list[dict[str, Any]] = []
    for p in range(a.pairs):
        for mode in modes:
            env = dict(os.environ)
            if mode == "par-old":
                env["PYTHONPATH"] = os.pathsep.join([a.base_src, os.getcwd()])
            else:
                env["PYTHONPATH"] = os.pathsep.join(["src", os.getcwd()])
            res = subprocess.run([sys.executable, "-m", "benchmarks.parallel_stream",
                                  "--events", str(a.events), "--window", str(a.window),
                                  "--batch", str(a.batch),
                                  "--one", "0" if mode == "one" else str(a.workers)],
                                 check=True, capture_output=True, text=True, env=env)
            row = {"pair": p, "mode": mode, **json.loads(res.stdout.strip().splitlines()[-1])}
            rows.append(row)
            print(f"{p} {mode:8} {row['matches']:>11,} matches {row['wall_s']:7.2f} s "
                  f"{row['matches_per_s'] / 1e6:6.2f} M/s  CPU {row['cpu_self_s']:6.2f} + "
                  f"workers {row['cpu_workers_s']:6.2f} s  RSS {row['rss_peak_mb']:5.0f} MB "
                  f"(before {row['rss_before_mb']:.0f}), worker {row['worker_rss_peak_mb']:.0f}"
                  " MB", flush=True)
    if len({r["matches"] for r in rows}) != 1:
        raise AssertionError(f"the runs disagree: {sorted({r['matches'] for r in rows})}")
    load1 = open("/proc/loadavg").read().split()[:3]
    summary: dict[str, Any] = {}
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode]
        summary[mode] = {k: statistics.median(r[k] for r in mine)
                         for k in ("matches_per_s", "wall_s", "cpu_self_s", "cpu_workers_s",
                                   "rss_peak_mb", "worker_rss_peak_mb")}
    ratios: dict[str, list[float]] = {}
    for other in [m for m in modes if m != "par-new"]:
        ratios[f"par-new/{other} matches/s"] = [
            x["matches_per_s"] / y["matches_per_s"] for x, y in zip(
                [r for r in rows if r["mode"] == "par-new"],
                [r for r in rows if r["mode"] == other], strict=True)]
    print("medians:", json.dumps(summary, indent=1))
    print("pair ratios:", {k: [round(x, 2) for x in v] for k, v in ratios.items()})
    print(f"load before {' '.join(load0)}, after {' '.join(load1)}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "load": [load0, load1], "rows": rows,
                       "medians": summary, "ratios": ratios}, f, indent=1)


if __name__ == "__main__":
    main()
