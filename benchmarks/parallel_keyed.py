"""Issue 15, keyed parallelism: the whole ``kleene run`` CLI with 1 and 2 workers, alternating,
and PyFlink MATCH_RECOGNIZE at parallelism 1 and 2, in one command::

    python -m benchmarks.parallel_keyed [--events 1000000] [--pairs 5] [--flink-repeats 1]
                                        [--flink-modes streaming,batch] [--no-flink]

The stock workload (``queries.STOCK`` on the 1M-event stock CSV, output written to a JSON Lines
file). Per kleene run: the process's wall time, the CPU seconds of the calling process and of
its forked worker (getrusage, written by an ``atexit`` hook), and the phases of kleene's own
summary (compile, read, match, write), from which the serial fraction (Amdahl) is derived:
what ``--workers 2`` leaves in one process (start-up and imports, compile) against what the
workers share (with a CSV file each reads a part of it: read, match, format). With parts, the
calling process and the workers work one after the other: ``cpu_serial_plus_busiest_speedup``
(one worker's CPU against the calling process's plus the busiest worker's) is the estimate on
idle cores; each worker's phases are listed (``cpu worker N read/split/gather/match/format``).
``--plan nfa`` measures the NFA plan. The two outputs must be byte-identical.

PyFlink (``benchmarks/.venv-flink``, created by ``--setup-flink``, ~450 MB) runs the equivalent
MATCH_RECOGNIZE query (:mod:`benchmarks.flink_baseline`) at parallelism 1 and 2, between the
kleene pairs, once per mode; its time is the median job time after a warm-up job in one JVM
(JVM start and warm-up excluded, which favours Flink). The ratio against kleene is the whole
kleene CLI (process wall) against that job time.

About 4-5 minutes on an idle 2-core machine with the defaults, most of it Flink. Prints one JSON
object; ``--out`` also writes it to a file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import datasets, flink_venv, queries
from .measure import loadavg

REPO = Path(__file__).resolve().parent.parent

_WRAP = """\
import atexit, json, os, re, resource, sys
_CPU = {}
def _report():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    w = [v for k, v in _CPU.items() if re.fullmatch(r"worker \\d+", k)]
    with open(os.environ["KLEENE_BENCH_RUSAGE"], "w") as f:
        json.dump({"self": s.ru_utime + s.ru_stime, "workers": c.ru_utime + c.ru_stime,
                   "worker_max": max(w) if w else -1.0, "phases": _CPU}, f)
atexit.register(_report)
try:  # the CPU seconds of each worker (and its phases) of a run fed while read, or in parts
    from kleene.runtime import parallel as _par
    _finish = _par.KeyedFeed.finish
    def _spy(self):
        run = _finish(self)
        if run is not None:
            _CPU.update(run.cpu)
        return run
    _par.KeyedFeed.finish = _spy
    _parts = _par.run_parts
    def _spy_parts(*a, **k):
        import time as _t
        c0 = _t.process_time()
        done = _parts(*a, **k)
        if done.run is not None:
            _CPU.update(done.run.cpu)
            # the calling process's own CPU from the forks to the merged lines
            _CPU["parent run_parts"] = _t.process_time() - c0
        return done
    _par.run_parts = _spy_parts
except (ImportError, AttributeError):  # a baseline without them
    pass
from kleene.cli.main import main
sys.argv[0] = "kleene"
main()
"""
"""``python -c`` body: ``kleene run`` with the CPU seconds of the process and of its forked
workers written at exit (the workers leave with ``os._exit``: no hook runs there)."""

_PHASES = re.compile(r"time\s+([\d.]+) s\s+\(compile ([\d.]+) s, read ([\d.]+) s, "
                     r"match ([\d.]+) s, write ([\d.]+) s\)")


def _env(src: Path | None) -> dict[str, str]:
    """The environment of a measured process: kleene from ``src`` (a ``src`` directory of
    another checkout, the baseline) or as installed."""
    if src is None:
        return dict(os.environ)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(src), *filter(None, [os.environ.get("PYTHONPATH")])])}


def kleene_run(csv: Path, workers: int, out: Path, work: Path,
               src: Path | None = None, plan: str | None = None) -> dict[str, Any]:
    """One whole ``kleene run --workers N`` process (kleene from ``src`` when given)."""
    rus = work / f"rusage.w{workers}.json"
    cmd = [sys.executable, "-c", _WRAP, "run", queries.STOCK, "-i", str(csv),
           "--time-col", "ts", "--event-type", "Stock", "--workers", str(workers),
           "-o", str(out), *(["--plan", plan] if plan else [])]
    env = {**_env(src), "KLEENE_BENCH_RUSAGE": str(rus)}
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"kleene run --workers {workers} failed: {p.stderr.strip()[-500:]}")
    cpu = json.loads(rus.read_text())
    # the busiest worker: one forked worker (the calling process matches a share too), or
    # the largest of the workers fed while reading (the calling process only reads and merges)
    row: dict[str, Any] = {"wall": wall, "cpu_self": cpu["self"], "cpu_workers": cpu["workers"],
                           "cpu_worker_max": (cpu["worker_max"] if cpu["worker_max"] >= 0
                                              else cpu["workers"])}
    for k, v in cpu.get("phases", {}).items():  # each worker's phases (CPU seconds)
        row[f"cpu {k}"] = float(v)
    m = _PHASES.search(p.stderr)
    if m:
        total, comp, read, match, write = (float(x) for x in m.groups())
        row.update(startup=wall - total, compile=comp, read=read, match=match, write=write)
    row["workers_used"] = 2 if "2 workers" in p.stderr else 1
    return row


_ENGINE = """\
import io, json, resource, sys, time, warnings
from kleene.api import compile as kcompile
from kleene.events.readers import read_events
from kleene.events.writers import JsonLinesWriter
from kleene.runtime.parallel import run_parallel
csv, query, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
plan = sys.argv[4] if len(sys.argv) > 4 else None
events, _r = read_events(csv, time_col="ts", event_type="Stock")
q = kcompile(query, plan=plan)
texts = JsonLinesWriter(io.StringIO(), events.time).texts
def cpu(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime
s0, c0, t0 = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)
    run = run_parallel(q.compiled_plan, events, workers, {}, udfs=q.analyzed.udfs, texts=texts)
wall = time.perf_counter() - t0
print(json.dumps({"wall": wall, "cpu_self": cpu(resource.RUSAGE_SELF) - s0,
                  "cpu_workers": cpu(resource.RUSAGE_CHILDREN) - c0,
                  "matches": run.n_matches(), "workers_used": run.workers}))
"""
"""``python -c`` body: the engine alone over the events in memory (read and compiled before
the clock starts): ``run_parallel`` with the JSON Lines formatter (the workers match and
format their lines; the calling process merges them), wall and CPU seconds."""


def engine_run(csv: Path, workers: int, src: Path | None = None,
               plan: str | None = None) -> dict[str, Any]:
    """The engine alone with ``workers`` processes, in a fresh process."""
    p = subprocess.run([sys.executable, "-c", _ENGINE, str(csv), queries.STOCK, str(workers),
                        *([plan] if plan else [])],
                       cwd=REPO, env=_env(src), capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"engine run with {workers} workers failed: {p.stderr.strip()[-500:]}")
    row: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return row


def flink_run(csv_noheader: Path, mode: str, parallelism: int, repeats: int) -> dict[str, Any]:
    """One PyFlink process: warm-up job, then ``repeats`` timed jobs (flink_baseline bench)."""
    cmd = [str(flink_venv.PY), str(REPO / "benchmarks" / "flink_baseline.py"), "bench",
           "--csv", str(csv_noheader), "--mode", mode, "--parallelism", str(parallelism),
           "--repeats", str(repeats)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        return {"error": (p.stderr.strip() or p.stdout.strip())[-500:], "process_s": wall}
    res = json.loads(line[len("RESULT "):])
    return {"job_s": statistics.median(res["runs_s"]), "runs_s": res["runs_s"],
            "warmup_s": res["warmup_s"], "process_s": wall}


def _median_rows(rows: list[dict[str, Any]]) -> dict[str, float]:
    keys = [k for k in rows[0] if isinstance(rows[0][k], float)]
    return {k: round(statistics.median(r[k] for r in rows), 3) for k in keys}


def _critical(one: dict[str, float], two: dict[str, float], cores: int | None) -> float:
    """One worker's CPU against the 2-worker run's critical path: its busiest process, and
    with ``cores``, at least the CPU of all its processes spread over that many cores."""
    path = max(two["cpu_self"], two.get("cpu_worker_max", two["cpu_workers"]))
    if cores:
        path = max(path, (two["cpu_self"] + two["cpu_workers"]) / cores)
    return round(one["cpu_self"] / path, 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.parallel_keyed",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--pairs", type=int, default=5, help="kleene 1-worker/2-worker pairs")
    ap.add_argument("--flink-repeats", type=int, default=1,
                    help="timed Flink jobs after the warm-up, per parallelism and mode")
    ap.add_argument("--flink-modes", default="streaming,batch")
    ap.add_argument("--no-flink", action="store_true")
    ap.add_argument("--setup-flink", action="store_true",
                    help="create benchmarks/.venv-flink if missing (pip, ~450 MB)")
    ap.add_argument("--engine-pairs", type=int, default=3,
                    help="engine-only 1-worker/2-worker pairs (events in memory)")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="the src directory of another checkout (e.g. a worktree of an older "
                         "commit): its kleene run --workers 2 alternates with this one's")
    ap.add_argument("--plan", default=None,
                    help="kleene run --plan NAME (e.g. nfa; default: the chosen plan, runs)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    csv = datasets.stock_csv(a.events)
    flink_jobs: list[tuple[str, int]] = []
    flink_reason = "--no-flink"
    if not a.no_flink:
        flink_reason = flink_venv.ensure(create=a.setup_flink) or ""
        if not flink_reason:
            modes = [m for m in a.flink_modes.split(",") if m]
            flink_jobs = [(m, p) for m in modes for p in (1, 2)]
    csv_nh = datasets.stock_csv(a.events, header=False) if flink_jobs else csv
    load0 = loadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    kl: dict[int, list[dict[str, Any]]] = {1: [], 2: [], -2: []}  # -2: baseline, 2 workers
    fl: dict[str, dict[str, Any]] = {}
    digests: dict[int, set[str]] = {1: set(), 2: set(), -2: set()}
    arms = (1, 2, -2) if a.baseline_src is not None else (1, 2)
    with tempfile.TemporaryDirectory(prefix="kleene_parkeyed_") as tmp:
        work = Path(tmp)
        # kleene pairs with the Flink processes spread between them (alternating in time)
        slots = max(a.pairs, len(flink_jobs))
        for i in range(slots):
            if i < a.pairs:
                for w in (arms if i % 2 == 0 else arms[::-1]):
                    out = work / f"out.w{w}.jsonl"
                    kl[w].append(kleene_run(csv, abs(w), out, work,
                                            a.baseline_src if w < 0 else None, a.plan))
                    digests[w].add(hashlib.sha256(out.read_bytes()).hexdigest())
                    n_matches = sum(1 for _ in out.open("rb"))
                    print(f"kleene --workers {abs(w)}{' (baseline)' if w < 0 else ''}: "
                          f"{kl[w][-1]['wall']:.2f} s", file=sys.stderr)
            if i < len(flink_jobs):
                mode, par = flink_jobs[i]
                fl[f"{mode} p={par}"] = r = flink_run(csv_nh, mode, par, a.flink_repeats)
                print(f"flink {mode} p={par}: {r.get('job_s', r.get('error'))}",
                      file=sys.stderr)
    en: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for i in range(a.engine_pairs):  # the engine alone, alternating
        for w in ((1, 2) if i % 2 == 0 else (2, 1)):
            en[w].append(engine_run(csv, w, plan=a.plan))
            print(f"engine, {w} worker(s): {en[w][-1]['wall']:.2f} s", file=sys.stderr)
    one, two = _median_rows(kl[1]), _median_rows(kl[2])
    res: dict[str, Any] = {
        "started": started, "events": a.events, "matches": n_matches, "plan": a.plan,
        "load_before": load0, "load_after": loadavg(), "cores": os.cpu_count(),
        "byte_identical": len(digests[1] | digests[2] | digests[-2]) == 1,
        "kleene_workers_1": one, "kleene_workers_2": two,
        "wall_1": [round(r["wall"], 3) for r in kl[1]],
        "wall_2": [round(r["wall"], 3) for r in kl[2]],
        "wall_speedup": round(one["wall"] / two["wall"], 3),
        "pair_speedups": sorted(round(x["wall"] / y["wall"], 3)
                                for x, y in zip(kl[1], kl[2], strict=True)),
        # idle-core estimate: the busiest process (the calling one, which reads, splits,
        # merges and writes, or a worker) is the critical path ...
        "cpu_critical_speedup": _critical(one, two, None),
        # ... and on 2 cores, no less than half the CPU of all the processes
        "cpu_bound_2_cores_speedup": _critical(one, two, 2),
        # workers that read the input in parts: the calling process works before the fork
        # (start-up, compile, the first chunk) and after (merge, write), not meanwhile: its
        # CPU and the busiest worker's add up
        "cpu_serial_plus_busiest_speedup": round(
            one["cpu_self"] / (two["cpu_self"] + two.get("cpu_worker_max", 0.0)), 3),
    }
    if kl[-2]:
        base = _median_rows(kl[-2])
        res["baseline_workers_2"] = base
        res["baseline_src"] = str(a.baseline_src)
        res["wall_2_baseline"] = [round(r["wall"], 3) for r in kl[-2]]
        res["wall_speedup_baseline"] = round(one["wall"] / base["wall"], 3)
        res["cpu_critical_speedup_baseline"] = _critical(one, base, None)
        res["cpu_bound_2_cores_speedup_baseline"] = _critical(one, base, 2)
        res["cpu_serial_plus_busiest_speedup_baseline"] = round(
            one["cpu_self"] / (base["cpu_self"] + base.get("cpu_worker_max", 0.0)), 3)
        # this code against the baseline, pair by pair (runs next to each other in time):
        # the calling process's CPU (all of it, and from the forks to the merged lines) and
        # each worker's exchange overhead (split + gather, the mean of the workers)
        def exchange(r: dict[str, Any]) -> float:
            ws = [k[:-len(" split")] for k in r if k.endswith(" split")]
            return sum(r[f"{w} split"] + r[f"{w} gather"] for w in ws) / max(len(ws), 1)

        res["pairs_new_minus_baseline"] = {
            k: sorted(round(f(n) - f(b), 3) for n, b in zip(kl[2], kl[-2], strict=True))
            for k, f in (("cpu_self", lambda r: r["cpu_self"]),
                         ("cpu parent run_parts", lambda r: r.get("cpu parent run_parts", 0)),
                         ("cpu worker split+gather", exchange))}
    if a.engine_pairs:
        e1, e2 = _median_rows(en[1]), _median_rows(en[2])
        res["engine"] = {
            "what": "run_parallel on the events in memory, JSON Lines lines formatted by the "
                    "workers (read and compile excluded)",
            "workers_1": e1, "workers_2": e2,
            "matches_equal": len({r["matches"] for r in en[1] + en[2]}) == 1,
            "workers_used_2": sorted({r["workers_used"] for r in en[2]}),
            "wall_speedup": round(e1["wall"] / e2["wall"], 3),
            "cpu_critical_speedup": _critical(e1, e2, None),
            "cpu_bound_2_cores_speedup": _critical(e1, e2, 2),
        }
    if "match" in one:
        # workers that read in parts share the read, the match and (formatting) the write;
        # start-up (interpreter, imports) and compile stay in the calling process
        par = one["read"] + one["match"] + one["write"]
        serial = one["wall"] - par
        res["amdahl"] = {
            "serial_s (start-up, imports, compile)": round(serial, 3),
            "parallel_s (read, match, write) at 1 worker": round(par, 3),
            "serial_fraction": round(serial / one["wall"], 3),
            "best_possible_2_workers": round(one["wall"] / (serial + par / 2), 3),
        }
    if flink_jobs:
        res["flink"] = fl
        p2 = [r["job_s"] for k, r in fl.items() if k.endswith("p=2") and "job_s" in r]
        if p2:
            res["flink_p2_best_job_s"] = min(p2)
            res["kleene_2_workers_vs_flink_p2"] = round(min(p2) / two["wall"], 2)
            res["kleene_1_worker_vs_flink_p2"] = round(min(p2) / one["wall"], 2)
    else:
        res["flink"] = f"not run: {flink_reason}"
    text = json.dumps(res, indent=1)
    print(text)
    if a.out is not None:
        a.out.write_text(text + "\n")
    return 0 if res["byte_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
