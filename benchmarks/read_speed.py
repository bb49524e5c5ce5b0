"""Reading and start-up, old against new in one run (issue 18, items 1 and 4).

Reading: ``read_events`` of the stock CSV (``id,symbol,ts,price,volume``, ISO timestamps in
milliseconds) as ``kleene run`` reads it, in a fresh process pinned to one CPU (``taskset -c
0``: Arrow's threads share that core), imports done before the clock starts and the CLI's
pandas kept out as the CLI does. Each process reads the file twice: the first read is what a
``kleene run`` pays (fresh memory), the second what a long-lived process pays. CPU seconds are
the process's (all threads); rows/s = rows / CPU seconds. The floor in the same run: Arrow's
own ``pyarrow.csv.read_csv`` of the file to typed columns (single-threaded).

Start-up: ``python -m kleene run`` of the stock query on a 10-row file, whole process, against
the floor ``python -c "import numpy, pyarrow, pyarrow.compute, pyarrow.csv"``.

Sides alternate (old, new, floor, ...) so that a slow phase of the shared machine hits all::

    python -m benchmarks.read_speed --old /tmp/base/src --new src [--events 1000000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import datasets, queries

REPO = Path(__file__).resolve().parent.parent
PIN = ["taskset", "-c", "0"]

_READ = """
import json, sys, time
import kleene, pyarrow.csv, pyarrow.compute
from kleene.cli import main as cli_main
probe = getattr(cli_main, "_skip_pandas_probe", None)  # as the kleene process does
if probe is not None:
    probe()
else:  # (a tree before session 11)
    sys.meta_path.insert(0, cli_main._NoPandasForArrow())
out = {}
for k in (1, 2):
    c, w = time.process_time(), time.perf_counter()
    b, r = kleene.read_events(sys.argv[1], time_col="ts", event_type="Stock", id_col="id")
    out[f"cpu{k}"], out[f"wall{k}"] = time.process_time() - c, time.perf_counter() - w
    out["rows"] = len(b)
    del b, r
print(json.dumps(out))
"""

_FLOOR = """
import json, sys, time
import pyarrow as pa, pyarrow.csv as pcsv
types = {"id": pa.int64(), "symbol": pa.string(), "ts": pa.timestamp("us"),
         "price": pa.float64(), "volume": pa.int64()}
out = {}
for k in (1, 2):
    c, w = time.process_time(), time.perf_counter()
    t = pcsv.read_csv(sys.argv[1], read_options=pcsv.ReadOptions(use_threads=False),
                      convert_options=pcsv.ConvertOptions(column_types=types))
    out[f"cpu{k}"], out[f"wall{k}"] = time.process_time() - c, time.perf_counter() - w
    out["rows"] = t.num_rows
    del t
print(json.dumps(out))
"""


def _read(tree: str | None, csv: Path) -> dict[str, float]:
    code = _FLOOR if tree is None else _READ
    env = {**os.environ, "PYTHONPATH": tree or ""}
    res = subprocess.run([*PIN, sys.executable, "-c", code, str(csv)], env=env, check=True,
                         capture_output=True, text=True, cwd=REPO)
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def _process(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """CPU (user + sys) and wall seconds of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=REPO)
    wall = time.perf_counter() - w
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "wall": wall}


def _med(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.read_speed",
                                description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True, help="the old tree's src directory")
    p.add_argument("--new", default=str(REPO / "src"), help="the new tree's src directory")
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--skip-startup", action="store_true")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args(argv)
    csv = datasets.stock_csv(args.events)
    sides: dict[str, str | None] = {"old": os.path.abspath(args.old),
                                    "new": os.path.abspath(args.new), "arrow floor": None}
    reads: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
    for i in range(args.repeats):
        order = list(sides.items())
        for name, tree in (order if i % 2 == 0 else order[::-1]):
            reads[name].append(_read(tree, csv))
    result: dict[str, Any] = {"events": args.events, "load_before": os.getloadavg(),
                              "read": {}, "startup": {}}
    print(f"read {csv.name}: {args.repeats} alternating runs each, medians, pinned to CPU 0")
    for name, runs in reads.items():
        rows = runs[0]["rows"]
        m = {k: _med(runs, k) for k in ("cpu1", "wall1", "cpu2", "wall2")}
        result["read"][name] = {**m, "rows": rows}
        print(f"  {name:12s} first read cpu {m['cpu1']:.3f} s wall {m['wall1']:.3f} s "
              f"({rows / m['cpu1'] / 1e6:.2f} M rows/s);  second read cpu {m['cpu2']:.3f} s "
              f"wall {m['wall2']:.3f} s ({rows / m['cpu2'] / 1e6:.2f} M rows/s)")
    for k in ("cpu1", "cpu2"):
        pairs = [n[k] / o[k] for o, n in zip(reads["old"], reads["new"], strict=False)]
        result["read"][f"new/old {k}"] = statistics.median(pairs)
        print(f"  new/old {k}: median of pairs {statistics.median(pairs):.3f}")
    if not args.skip_startup:
        with tempfile.TemporaryDirectory() as tmp:
            small = Path(tmp) / "s10.csv"
            with open(csv, encoding="utf-8") as f:
                small.write_text("".join(next(f) for _ in range(11)), encoding="utf-8")
            qf = Path(tmp) / "stock.kleene"
            qf.write_text(queries.STOCK, encoding="utf-8")
            cmds: dict[str, tuple[list[str], dict[str, str]]] = {}
            for name in ("old", "new"):
                tree = sides[name]
                assert tree is not None
                cmds[name] = ([sys.executable, "-m", "kleene", "run", str(qf), "-i", str(small),
                               "--event-type", "Stock", "--id-col", "id", "-o",
                               str(Path(tmp) / f"{name}.jsonl")],
                              {**os.environ, "PYTHONPATH": tree})
            cmds["import floor"] = ([sys.executable, "-c",
                                     "import numpy, pyarrow, pyarrow.compute, pyarrow.csv"],
                                    dict(os.environ))
            runs: dict[str, list[dict[str, float]]] = {k: [] for k in cmds}
            for cmd, env in cmds.values():  # one warm-up each
                _process(cmd, env)
            for i in range(args.repeats * 2):
                order = list(cmds.items())
                for name, (cmd, env) in (order if i % 2 == 0 else order[::-1]):
                    runs[name].append(_process(cmd, env))
        print(f"start-up: `kleene run` on 10 rows, {args.repeats * 2} alternating runs, medians")
        for name, rs in runs.items():
            m = {"cpu": _med(rs, "cpu"), "wall": _med(rs, "wall")}
            result["startup"][name] = m
            print(f"  {name:12s} cpu {m['cpu']:.3f} s  wall {m['wall']:.3f} s")
        for k in ("cpu", "wall"):
            pairs = [n[k] / o[k] for o, n in zip(runs["old"], runs["new"], strict=False)]
            result["startup"][f"new/old {k}"] = statistics.median(pairs)
            print(f"  new/old {k}: median of pairs {statistics.median(pairs):.3f}")
    result["load_after"] = os.getloadavg()
    print(f"load average before {result['load_before'][0]:.2f}, after "
          f"{result['load_after'][0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
