"""``python -m benchmarks``: run the workloads, print a table, write results/<date>.json + .md.

Examples::

    python -m benchmarks                       # everything, 3 repeats (about 30 min)
    python -m benchmarks --quick               # small sizes, smoke test of the harness
    python -m benchmarks --only stock --no-flink
    python -m benchmarks --only traffic --traffic-events 1000000,all --repeats 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
import traceback

from . import machine, report, workloads
from .datasets import BENCH_DIR


def _sizes(text: str) -> tuple[int | None, ...]:
    return tuple(None if s.strip() == "all" else int(s.replace("_", ""))
                 for s in text.split(","))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks",
                                description="kleene's benchmarks (issue 5)",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="workloads: " + ", ".join(workloads.WORKLOADS))
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="run only these workloads (repeatable or comma-separated)")
    p.add_argument("--repeats", type=int, default=3, help="runs per measurement (median)")
    p.add_argument("--no-flink", action="store_true", help="skip the PyFlink baseline")
    p.add_argument("--no-setup-flink", action="store_true",
                   help="do not create benchmarks/.venv-flink if it is missing")
    p.add_argument("--stock-events", type=int, help="size of the stock stream (default 1M)")
    p.add_argument("--pin", action="store_true",
                   help="stock: also run the hand loop, kleene CLI and Flink p=1 pinned to one "
                        "CPU (taskset -c 0)")
    p.add_argument("--traffic-events", type=_sizes,
                   help="comma-separated Aarhus prefix sizes, 'all' = 7.1M (default 1000000,all)")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    args = p.parse_args(argv)
    if args.list:
        for name, fn in workloads.WORKLOADS.items():
            print(f"{name:10s} {(fn.__doc__ or '').strip()}")
        return 0
    only = [n.strip() for o in args.only for n in o.split(",") if n.strip()]
    unknown = [n for n in only if n not in workloads.WORKLOADS]
    if unknown:
        p.error(f"unknown workload(s) {unknown}; choose from {', '.join(workloads.WORKLOADS)}")
    ctx = workloads.Ctx(quick=args.quick, repeats=args.repeats, flink=not args.no_flink,
                        setup_flink=not args.no_setup_flink, stock_events=args.stock_events, pin=args.pin,
                        traffic_sizes=args.traffic_events)
    names = only or list(workloads.WORKLOADS)
    doc: dict[str, object] = {
        "command": "python -m benchmarks " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine.info(), "repeats": args.repeats, "quick": args.quick,
        "rows": [], "notes": [], "checks": {},
    }
    t0 = time.perf_counter()
    for name in names:
        try:
            outcome = workloads.WORKLOADS[name](ctx)
        except Exception as e:  # one broken workload must not lose the others' numbers
            traceback.print_exc()
            outcome = workloads.Outcome(rows=[workloads.Row(
                name, "", "harness", status=f"error: {type(e).__name__}: {e}"[:400])])
        doc["rows"] += [r.to_json() for r in outcome.rows]  # type: ignore[operator]
        doc["notes"] += outcome.notes  # type: ignore[operator]
        doc["checks"].update(outcome.checks)  # type: ignore[attr-defined]
        for r in outcome.rows:
            eps = r.events_per_s
            print(f"{r.workload:22s} {r.variant[:38]:38s} {r.engine[:38]:38s} "
                  f"{r.events or 0:>10,} ev  "
                  + (f"{r.seconds:8.3f} s {eps:>12,.0f} ev/s  matches={r.matches}  "
                     f"peak={r.peak_rss_mb} MB  load={r.load_1min}"
                     if r.seconds and eps else r.status), flush=True)
        for n in outcome.notes:
            print("  " + n, flush=True)
    doc["elapsed_s"] = round(time.perf_counter() - t0, 1)
    workloads.cleanup(ctx)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    if args.quick:
        stamp += "-quick"
    if only:
        stamp += "-" + "-".join(only)
    j, md = report.write(doc, BENCH_DIR / "results", stamp)
    print(f"\nwrote {j} and {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
