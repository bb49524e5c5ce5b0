"""Issue 15 benchmarks: keyed parallelism on the stock workload, 1 vs 2 workers in the same run.

    python -m benchmarks.parallel keyed [--events N] [--repeats R]

Runs ``kleene.compile(STOCK).run`` through :func:`kleene.runtime.parallel.run_parallel` with 1
and 2 workers alternately (engine only: reading and compiling excluded), then the whole
``kleene run --workers 1|2`` process alternately. Prints, per variant, the median wall time,
events/s, the CPU seconds of the calling process and of its children, the critical-path CPU
(the larger of the two: what the wall time would be on idle cores), the peak memory, and checks
that the outputs are identical.

The machine is shared (load average often 8-10 on 2 cores), so the wall times measure the
scheduler as much as kleene: the CPU columns are the comparison that holds.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import datasets, queries

REPO = Path(__file__).resolve().parent.parent


def _ru(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def keyed_engine(n: int, repeats: int) -> dict[str, Any]:
    """Engine only, in this process: 1 vs 2 workers alternately."""
    import kleene
    from kleene.events.readers import read_events
    from kleene.runtime.parallel import run_parallel

    csv = datasets.stock_csv(n)
    events, _ = read_events(str(csv), time_col="ts", event_type="Stock")
    compiled = kleene.compile(queries.STOCK).compiled_plan
    rows: dict[int, dict[str, list[float]]] = {w: {"wall": [], "self": [], "children": []}
                                               for w in (1, 2)}
    outs: dict[int, list[Any]] = {}
    for _ in range(repeats):
        for w in (1, 2):
            s0, c0, t0 = _ru(resource.RUSAGE_SELF), _ru(resource.RUSAGE_CHILDREN), \
                time.perf_counter()
            run = run_parallel(compiled, events, w)
            rows[w]["wall"].append(time.perf_counter() - t0)
            rows[w]["self"].append(_ru(resource.RUSAGE_SELF) - s0)
            rows[w]["children"].append(_ru(resource.RUSAGE_CHILDREN) - c0)
            outs[w] = [m.key() for m in run.matches]
    res: dict[str, Any] = {"events": n, "matches": len(outs[1]),
                           "identical": outs[1] == outs[2]}
    for w in (1, 2):
        med = {k: statistics.median(v) for k, v in rows[w].items()}
        med["critical_cpu"] = max(med["self"], med["children"])
        med["events_per_s"] = n / med["wall"]
        res[f"workers_{w}"] = med
    res["wall_speedup"] = res["workers_1"]["wall"] / res["workers_2"]["wall"]
    res["cpu_speedup"] = res["workers_1"]["critical_cpu"] / res["workers_2"]["critical_cpu"]
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return res


def keyed_cli(n: int, repeats: int) -> dict[str, Any]:
    """The whole ``kleene run --workers 1|2`` process, alternately; outputs compared."""
    csv = datasets.stock_csv(n)
    work = Path(datasets.BENCH_DIR) / ".data" / "run" / "parallel"
    work.mkdir(parents=True, exist_ok=True)
    rows: dict[int, dict[str, list[float]]] = {w: {"wall": [], "cpu": []} for w in (1, 2)}
    for _ in range(repeats):
        for w in (1, 2):
            out = work / f"stock.w{w}.jsonl"
            cmd = [sys.executable, "-m", "kleene", "run", queries.STOCK, "-i", str(csv),
                   "--time-col", "ts", "--event-type", "Stock", "--workers", str(w),
                   "-o", str(out), "-q"]
            c0, t0 = _ru(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run(cmd, check=True, cwd=REPO)
            rows[w]["wall"].append(time.perf_counter() - t0)
            rows[w]["cpu"].append(_ru(resource.RUSAGE_CHILDREN) - c0)
    same = (work / "stock.w1.jsonl").read_bytes() == (work / "stock.w2.jsonl").read_bytes()
    res: dict[str, Any] = {"events": n, "byte_identical": same}
    for w in (1, 2):
        med = {k: statistics.median(v) for k, v in rows[w].items()}
        med["events_per_s"] = n / med["wall"]
        res[f"workers_{w}"] = med
    res["wall_speedup"] = res["workers_1"]["wall"] / res["workers_2"]["wall"]
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.parallel", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["keyed"])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-cli", action="store_true", help="engine only")
    a = ap.parse_args(argv)
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() \
        else []
    out: dict[str, Any] = {"load_before": load, "engine": keyed_engine(a.events, a.repeats)}
    print(json.dumps(out["engine"], indent=1), flush=True)
    if not a.no_cli:
        out["cli"] = keyed_cli(a.events, a.repeats)
        print(json.dumps(out["cli"], indent=1), flush=True)
    out["load_after"] = Path("/proc/loadavg").read_text().split()[:3] if load else []
    print(json.dumps({"load_before": out["load_before"], "load_after": out["load_after"]}))


if __name__ == "__main__":
    main()
