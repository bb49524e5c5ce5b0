"""Old against new in one run: every engine workload of ``python -m benchmarks``, alternately
on two source trees, with the median ratio per workload.

A change that could slow something down is measured this way (docs/benchmarks.md)::

    git worktree add /tmp/kleene-base <old commit>
    python -m benchmarks.ab --old /tmp/kleene-base/src --new src --repeats 5

Each measurement is a fresh ``python -m benchmarks.child`` process (engine time of
``CompiledQuery.run(batch)``; reading and compiling excluded) with ``PYTHONPATH`` set to one
tree, so both sides read the same data with the same harness. The pairs alternate
(old, new, old, new, ...) so that a slow phase of the shared machine hits both sides. The
whole-CLI stock run (read CSV, match, write JSON Lines) is measured the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from . import datasets, measure, queries

REPO = Path(__file__).resolve().parent.parent
CPU = False
"""Compare CPU seconds of the engine call instead of wall seconds (``--cpu``): less
sensitive to other processes on a shared machine."""


def _workloads(quick: bool) -> list[tuple[str, str, Path, list[str]]]:
    """(name, query text, csv, child flags) per engine workload."""
    scale = 10 if quick else 1
    stock = datasets.stock_csv(1_000_000 // scale)
    market = datasets.market_csv(1_000_000 // scale)
    out = [
        ("stock 1M", queries.STOCK, stock, ["--time-col", "ts", "--event-type", "Stock",
                                            "--id-col", "id"]),
        ("and3 1M", queries.AND3, market, ["--time-col", "ts", "--type-col", "type",
                                           "--id-col", "id"]),
        ("or6 1M", queries.OR6, market, ["--time-col", "ts", "--type-col", "type",
                                         "--id-col", "id"]),
        ("explosion 20k WITHIN 20 s", queries.EXPLODE.format(window="20 seconds"),
         datasets.stock_csv(20_000), ["--time-col", "ts", "--event-type", "Stock",
                                      "--id-col", "id", "--runtime"]),
        ("explosion 20k count_only", queries.EXPLODE.format(window="20 seconds"),
         datasets.stock_csv(20_000), ["--time-col", "ts", "--event-type", "Stock",
                                      "--id-col", "id", "--runtime",
                                      "--option", "count_only=true"]),
    ]
    if datasets.aarhus_available() is None:
        aarhus = datasets.aarhus_csv(1_000_000 // scale)
        out += [("traffic 1M", queries.TRAFFIC, aarhus,
                 ["--time-col", "TIMESTAMP", "--event-type", "Traffic"]),
                ("selective 1M", queries.SELECTIVE, aarhus,
                 ["--time-col", "TIMESTAMP", "--event-type", "Traffic"])]
    return out


def _measure(tree: str, cmd: list[str]) -> tuple[float | None, Any]:
    m = measure.run(cmd, cwd=REPO, env={"PYTHONPATH": tree}, timeout=900)
    r = m.result
    if "run_cpu_s" in r and CPU:
        return float(r["run_cpu_s"]), r.get("matches")
    if "run_s" in r:
        return float(r["run_s"]), r.get("matches")
    if "cli_s" in r:
        return float(r["cli_s"]), r.get("matches")
    print(f"    failed ({tree}): {r.get('error') or m.stderr_tail[-300:]}", file=sys.stderr)
    return None, None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--old", required=True, help="the old tree's src directory")
    p.add_argument("--new", default=str(REPO / "src"), help="the new tree's src directory")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    p.add_argument("--only", default="", help="comma-separated name prefixes")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--cpu", action="store_true",
                   help="compare the engine call's CPU seconds instead of wall seconds")
    args = p.parse_args(argv)
    global CPU
    CPU = args.cpu
    old, new = os.path.abspath(args.old), os.path.abspath(args.new)
    qdir = datasets.DATA_DIR / "ab_queries"
    qdir.mkdir(parents=True, exist_ok=True)
    rows = []
    only = [o.strip() for o in args.only.split(",") if o.strip()]
    for name, text, csv, flags in _workloads(args.quick):
        if only and not any(name.startswith(o) for o in only):
            continue
        qf = qdir / (name.replace(" ", "_") + ".kleene")
        qf.write_text(text, encoding="utf-8")
        cmd = [sys.executable, "-m", "benchmarks.child", "--query-file", str(qf),
               "--csv", str(csv), *flags]
        times: dict[str, list[float]] = {"old": [], "new": []}
        counts: dict[str, Any] = {}
        for _ in range(args.repeats):
            for side, tree in (("old", old), ("new", new)):
                s, matches = _measure(tree, cmd)
                if s is not None:
                    times[side].append(s)
                    counts[side] = matches
        if not times["old"] or not times["new"]:
            rows.append({"workload": name, "error": "a side failed"})
            print(f"{name:34s} failed", flush=True)
            continue
        mo, mn = statistics.median(times["old"]), statistics.median(times["new"])
        pair = [n / o for o, n in zip(times["old"], times["new"], strict=False)]
        row = {"workload": name, "old_s": mo, "new_s": mn, "ratio": mn / mo,
               "pair_ratios": pair, "matches_old": counts.get("old"),
               "matches_new": counts.get("new"), "old_runs": times["old"],
               "new_runs": times["new"]}
        rows.append(row)
        print(f"{name:34s} old {mo:7.3f} s  new {mn:7.3f} s  new/old {mn / mo:5.2f} "
              f"(pairs {', '.join(f'{x:.2f}' for x in pair)})  matches {counts.get('old')} / "
              f"{counts.get('new')}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": _machine(), "rows": rows}, indent=1),
                                   encoding="utf-8")
    return 0


def _machine() -> dict[str, Any]:
    from . import machine

    return machine.info()


if __name__ == "__main__":
    sys.exit(main())
