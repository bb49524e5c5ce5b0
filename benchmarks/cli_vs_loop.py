"""Issue 18, items 2, 3 and 5 in one run: old and new source trees alternately, on the stock file.

Per repeat and tree (each a fresh process with ``PYTHONPATH`` set to the tree):

* ``phases``: ``python -m benchmarks.phases`` (read, match, write JSON Lines in-process, CPU
  seconds each): the match step's events/s and the write step's matches/s;
* ``cli``: the whole ``kleene run`` process (``--workers 1``, one core), CPU seconds of the
  child (``RUSAGE_CHILDREN``) and wall seconds;
* ``inproc``: in one process, the CLI's entry point (``kleene.cli.main:cli``) on the file, then
  ``benchmarks.handloop.run`` on it: CPU seconds of each, after the imports (the comparison
  without interpreter start-up).

And the hand-written loop itself as its own process (``python -m benchmarks.handloop``), once
per repeat (it does not depend on the tree). With ``--pin`` every process runs under
``taskset -c 0``. Prints one ``CLI_VS_LOOP {json}`` line with the medians and ratios::

    python -m benchmarks.cli_vs_loop --old /tmp/kleene-main/src --new src [--events 1000000]
        [--repeats 3] [--pin]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import datasets, queries

REPO = Path(__file__).resolve().parent.parent
PIN: list[str] = []
"""``taskset -c 0`` with ``--pin`` (every process on one CPU; on a shared machine that CPU's
other load then lengthens the wall times, not the CPU seconds)."""

_INPROC = """
import json, sys, time, warnings
from benchmarks import handloop
from kleene.cli import main as cli_main
csv, query, out1, out2 = sys.argv[1:5]
args = ["run", query, "--input", csv, "--time-col", "ts", "--event-type", "Stock",
        "--id-col", "id", "--output", out1, "--workers", "1", "--quiet"]
t0 = time.process_time()
try:
    cli_main.cli(args, standalone_mode=False)
except SystemExit:
    pass
t1 = time.process_time()
n = handloop.run(csv, out2)
t2 = time.process_time()
print("INPROC " + json.dumps({"cli_cpu_s": t1 - t0, "loop_cpu_s": t2 - t1, "matches": n}))
"""


def _run(cmd: list[str], src: str | None) -> tuple[float, float, str]:
    """(child CPU seconds, wall seconds, stdout) of one process."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in (src, str(REPO)) if p])
    # as an installed kleene runs: byte code cached (the first repeat of each tree writes it)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([*PIN, *cmd], env=env, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"cli_vs_loop: {' '.join(cmd[:4])} failed: {r.stderr.strip()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, r.stdout


def _tagged(out: str, tag: str) -> dict[str, Any]:
    for line in out.splitlines():
        if line.startswith(tag + " "):
            d: dict[str, Any] = json.loads(line[len(tag) + 1:])
            return d
    raise SystemExit(f"cli_vs_loop: no {tag} line in {out[-300:]!r}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True, help="the old tree's src folder")
    p.add_argument("--new", required=True, help="the new tree's src folder")
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--pin", action="store_true", help="run every process under taskset -c 0")
    args = p.parse_args(argv)
    if args.pin and shutil.which("taskset"):
        PIN[:] = ["taskset", "-c", "0"]
    csv = str(datasets.stock_csv(args.events))
    py = sys.executable
    trees = {"old": str(Path(args.old).resolve()), "new": str(Path(args.new).resolve())}
    res: dict[str, dict[str, list[float]]] = {k: {} for k in (*trees, "loop")}

    def add(side: str, name: str, v: float) -> None:
        res[side].setdefault(name, []).append(v)

    with tempfile.TemporaryDirectory() as tmp:
        q = Path(tmp) / "stock.kleene"
        q.write_text(queries.STOCK)
        out1, out2 = str(Path(tmp) / "cli.jsonl"), str(Path(tmp) / "loop.jsonl")
        for rep in range(args.repeats):
            cpu, wall, out = _run([py, "-m", "benchmarks.handloop", csv, out2], None)
            add("loop", "process_cpu_s", cpu)
            add("loop", "process_wall_s", wall)
            for side in (("old", "new") if rep % 2 == 0 else ("new", "old")):
                src = trees[side]
                _c, _w, out = _run([py, "-m", "benchmarks.phases", "--events",
                                    str(args.events)], src)
                ph = _tagged(out, "PHASES")
                for k in ("read_cpu_s", "match_cpu_s", "write_cpu_s"):
                    add(side, k, ph[k])
                add(side, "matches", ph["matches"])
                cpu, wall, _o = _run([py, "-m", "kleene", "run", str(q), "--input", csv,
                                      "--time-col", "ts", "--event-type", "Stock", "--id-col",
                                      "id", "--output", out1, "--workers", "1", "--quiet"], src)
                add(side, "cli_process_cpu_s", cpu)
                add(side, "cli_process_wall_s", wall)
                same = Path(out1).read_bytes() == Path(out2).read_bytes()
                add(side, "cli_output_equals_loop", float(same))
                _c, _w, out = _run([py, "-c", _INPROC, csv, str(q), out1, out2], src)
                ip = _tagged(out, "INPROC")
                add(side, "inproc_cli_cpu_s", ip["cli_cpu_s"])
                add(side, "inproc_loop_cpu_s", ip["loop_cpu_s"])
            print(f"cli_vs_loop: repeat {rep + 1}/{args.repeats} done", file=sys.stderr,
                  flush=True)
    med = {side: {k: statistics.median(v) for k, v in d.items()} for side, d in res.items()}
    n = args.events
    summary: dict[str, Any] = {"events": n, "repeats": args.repeats, "pinned": bool(PIN),
                               "medians": med}
    for side in trees:
        m = med[side]
        summary[side] = {
            "match_events_per_s": n / m["match_cpu_s"],
            "jsonl_matches_per_s": m["matches"] / m["write_cpu_s"],
            "cli_vs_loop_process_cpu": med["loop"]["process_cpu_s"] / m["cli_process_cpu_s"],
            "cli_vs_loop_process_wall": med["loop"]["process_wall_s"] / m["cli_process_wall_s"],
            "cli_vs_loop_inproc_cpu": m["inproc_loop_cpu_s"] / m["inproc_cli_cpu_s"],
        }
    print("CLI_VS_LOOP " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
