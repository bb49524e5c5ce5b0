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


# ---------------------------------------------------------------------------------------------
# The thesis's experiment (chapter 6): SEQ(A;B;C), counter window, first selection, consume all,
# with a face-detection UDF, on the task engine
# ---------------------------------------------------------------------------------------------

TASKS_QUERY = """PATTERN SEQ(A a, B b, C c)
WHERE face(b.img, a.img) AND face(c.img, b.img)
WITHIN 25 EVENTS
PICK FIRST a
CONSUME ALL"""
"""The thesis's query: first selection, all selected events consumed; its counter window of 25
events per step (75 at most for the whole match) is here 25 events for the whole match."""

CHEAP_QUERY = """PATTERN SEQ(A a, B b, C c)
WHERE b.x > a.x AND c.x > b.x
WITHIN 25 EVENTS
PICK FIRST a
CONSUME ALL"""

SIZES = {"80x60": (80, 60), "160x120": (160, 120), "320x240": (320, 240)}


class FaceUdf:
    """``face(img, other)``: detect faces (OpenCV Haar cascade, one thread) in sample image
    ``img`` at the chosen size; TRUE when a face is found or the two images differ in parity
    (so that about half the tasks succeed whatever the images show). ``calls`` counts them."""

    def __init__(self, size: str) -> None:
        import cv2
        from skimage import data

        cv2.setNumThreads(1)  # the parallelism measured is the engine's
        w, h = SIZES[size]
        names = ["astronaut", "camera", "coffee", "chelsea", "rocket", "immunohistochemistry"]
        self.images = []
        for n in names:
            im = getattr(data, n)()
            if im.ndim == 3:
                im = cv2.cvtColor(im, cv2.COLOR_RGB2GRAY)
            self.images.append(cv2.resize(im, (w, h)))
        cascade = "haarcascade_frontalface_alt_tree.xml" if size == "80x60" else \
            "haarcascade_frontalface_default.xml"
        self.clf = cv2.CascadeClassifier(cv2.data.haarcascades + cascade)
        self.calls = 0

    def __call__(self, img: int, other: int) -> bool:
        self.calls += 1
        found = self.clf.detectMultiScale(self.images[img % len(self.images)])
        return len(found) > 0 or (img + other) % 2 == 1


def _abc_events(n: int, seed: int = 5) -> Any:
    import numpy as np

    from kleene.events import EventBatch

    rng = np.random.default_rng(seed)
    types = rng.choice(["A", "B", "C"], n).tolist()
    return EventBatch.from_records([{"type": t, "ts": i, "img": int(rng.integers(0, 6)),
                                     "x": int(rng.integers(0, 100))}
                                    for i, t in enumerate(types)])


def _run_tasks(query: str, events: Any, udfs: dict[str, Any], plan: str, workers: int,
               block: int, queue: str) -> tuple[float, list[float], int]:
    """Wall time of a whole run (events pushed block by block: a block arrives at once) and
    each block's latency (push of the block until its matches are out)."""
    import kleene
    from kleene.plans import tasks as T

    cq = kleene.compile(query, udfs=udfs, plan=plan)
    with T.configure(workers=workers, block_size=block, queue=queue):
        rt = cq.start()
        lat = []
        n_out = 0
        t0 = time.perf_counter()
        for off in range(0, len(events), block):
            b0 = time.perf_counter()
            n_out += len(rt.push(events.slice(off, block) if hasattr(events, "slice")
                                 else events))
            lat.append(time.perf_counter() - b0)
        n_out += len(rt.close())
        wall = time.perf_counter() - t0
        pool = getattr(rt.matcher, "pool", None)
        if pool is not None:
            pool.shutdown()
    return wall, lat, n_out


def tasks_bench(n: int, quick: bool) -> dict[str, Any]:
    """Throughput and latency of ``--plan tasks`` against block size, queue, image size and
    workers (1, 2), the sequential ``nfa`` plan in the same run, and the cheap-predicate
    overhead; a measured cost model projects 4, 8 and 16 cores."""
    import kleene

    events = _abc_events(n)
    out: dict[str, Any] = {"events": n, "rows": []}
    blocks = [4, 16, 64, 256] if not quick else [4, 64]

    def row(**kw: Any) -> None:
        out["rows"].append(kw)
        print(json.dumps(kw), flush=True)

    # 1. block size x queue x workers (the thesis's Fig. 6.1 / 6.3; at 80x60 to stay short)
    face = FaceUdf("80x60")
    udfs = {"face": face}
    want = None
    for block in blocks:
        for queue in ("fifo", "priority"):
            for workers in (1, 2):
                face.calls = 0
                wall, lat, m = _run_tasks(TASKS_QUERY, events, udfs, "tasks", workers, block,
                                          queue)
                want = m if want is None else want
                row(part="block", size="80x60", block=block, queue=queue, workers=workers,
                    wall=wall, events_per_s=n / wall, block_latency_median=statistics.median(
                        lat), udf_calls=face.calls, matches=m, same_matches=m == want)
    # 2. image size, workers 1 and 2, the nfa plan alternately (block 256, priority queue);
    #    320x240 only has its per-call cost measured (a run would take minutes here)
    for size in SIZES:
        face = FaceUdf(size)
        udfs = {"face": face}
        t0 = time.perf_counter()
        for i in range(12):
            face(i, 0)
        row(part="call", size=size, per_call_ms=1000 * (time.perf_counter() - t0) / 12)
        if size == "320x240":
            continue
        for plan, workers in (("nfa", 1), ("tasks", 1), ("tasks", 2)) * (1 if quick else 2):
            face.calls = 0
            wall, lat, m = _run_tasks(TASKS_QUERY, events, udfs, plan, workers, 256,
                                      "priority")
            row(part="size", size=size, plan=plan, workers=workers, wall=wall,
                events_per_s=n / wall, udf_calls=face.calls, matches=m,
                per_call_ms=1000 * wall / max(face.calls, 1))
    # 3. cheap predicate: tasks with 1 worker vs nfa, alternately; and what the chooser picks
    cheap = _abc_events(20_000)
    for _ in range(2):
        for plan in ("nfa", "tasks"):
            wall, _lat, m = _run_tasks(CHEAP_QUERY, cheap, {}, plan, 1, 1024, "priority")
            row(part="cheap", plan=plan, events=len(cheap), wall=wall, matches=m)
    out["chooser_picks"] = kleene.compile(CHEAP_QUERY).plan
    out["chooser_picks_heavy"] = kleene.compile(TASKS_QUERY, udfs={"face": FaceUdf("80x60")}
                                                ).plan
    return out


def _median(rows: list[dict[str, Any]], key: str, **match: Any) -> float:
    vals = [r[key] for r in rows if all(r.get(k) == v for k, v in match.items())]
    return statistics.median(vals) if vals else float("nan")


def project(res: dict[str, Any]) -> dict[str, Any]:
    """The cost model: a run of the task engine is serial work (task creation, the structure,
    the merger: measured with the cheap predicate, per event) plus UDF work divisible over the
    operator instances (measured: wall of 1 worker minus the serial part). T(p) = S + U / p."""
    rows = res["rows"]
    n = res["events"]
    cheap_tasks = _median(rows, "wall", part="cheap", plan="tasks")
    cheap_n = next(r["events"] for r in rows if r.get("part") == "cheap")
    serial_per_event = cheap_tasks / cheap_n
    proj: dict[str, Any] = {}
    calls_160 = _median(rows, "udf_calls", part="size", size="160x120", plan="tasks",
                        workers=1)
    for size in SIZES:
        t1 = _median(rows, "wall", part="size", size=size, plan="tasks", workers=1)
        t2 = _median(rows, "wall", part="size", size=size, plan="tasks", workers=2)
        s = serial_per_event * n
        if t1 != t1:  # not run (320x240): the same calls at the measured cost per call
            u = calls_160 * _median(rows, "per_call_ms", part="call", size=size) / 1000
            t1 = s + u
        u = max(t1 - s, 0.0)
        proj[size] = {"measured_1": n / t1, "measured_2": n / t2 if t2 == t2 else None,
                      "speedup_2_measured": t1 / t2 if t2 == t2 else None,
                      **{f"projected_{p}": n / (s + u / p) for p in (1, 2, 4, 8, 16)}}
    return proj


def plots(res: dict[str, Any], proj: dict[str, Any], out_dir: Path) -> list[Path]:
    """Throughput vs block size (Fig. 6.1) and vs cores, measured and projected (Fig. 6.8)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [r for r in res["rows"] if r.get("part") == "block"]
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for queue in ("fifo", "priority"):
        for workers in (1, 2):
            rs = [r for r in rows if r["queue"] == queue and r["workers"] == workers]
            ax[0].plot([r["block"] for r in rs], [r["events_per_s"] for r in rs], marker="o",
                       label=f"{queue}, {workers} worker(s)")
            ax[1].plot([r["block"] for r in rs], [r["block_latency_median"] for r in rs],
                       marker="o", label=f"{queue}, {workers} worker(s)")
    for a, yl in zip(ax, ("events/s", "median block latency (s)"), strict=True):
        a.set_xscale("log", base=2)
        a.set_xlabel("raw-event block size")
        a.set_ylabel(yl)
        a.legend(fontsize=7)
    fig.suptitle("task engine, face detection 80x60 (shared 2-core VM)")
    p1 = out_dir / "tasks_block_size.png"
    fig.tight_layout()
    fig.savefig(p1, dpi=80)
    plt.close(fig)
    fig, a = plt.subplots(figsize=(5, 4))
    cores = [1, 2, 4, 8, 16]
    for size, pr in proj.items():
        a.plot(cores, [pr[f"projected_{c}"] for c in cores], marker="o", label=f"{size} model")
        if pr["measured_2"] is not None:
            a.scatter([1, 2], [pr["measured_1"], pr["measured_2"]], marker="x")
    a.set_xlabel("operator instances (cores)")
    a.set_ylabel("events/s")
    a.set_xscale("log", base=2)
    a.legend(fontsize=7)
    a.set_title("measured (x) and projected (cost model)")
    p2 = out_dir / "tasks_cores.png"
    fig.tight_layout()
    fig.savefig(p2, dpi=80)
    plt.close(fig)
    return [p1, p2]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.parallel", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["keyed", "tasks"])
    ap.add_argument("--quick", action="store_true", help="tasks: fewer block sizes")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-cli", action="store_true", help="engine only")
    a = ap.parse_args(argv)
    if a.what == "tasks":
        n = a.events if a.events != 1_000_000 else 45
        res = tasks_bench(n, a.quick)
        proj = project(res)
        res["projection"] = proj
        res["plots"] = [str(p) for p in plots(res, proj, REPO / "docs" / "img")]
        res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({k: v for k, v in res.items() if k != "rows"}, indent=1))
        return
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
