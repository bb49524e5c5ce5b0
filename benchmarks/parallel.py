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

    python -m benchmarks.parallel targets [--events 240] [--repeats 3]   # ~2 min idle
    python -m benchmarks.parallel tasks [--quick] [--events 200] [--sizes-events 60]

``targets``: the task engine's two targets (heavy UDF 1 vs 2 workers; cheap predicate against
``nfa``), alternately. ``tasks``: the thesis's experiment sweep, plots in docs/img/.
``spark-job``: the wall time of a tiny Spark job (the cost of a block-synchronous Spark step).
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import subprocess
import sys
import threading
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
        self.cascade = cv2.data.haarcascades + (
            "haarcascade_frontalface_alt_tree.xml" if size == "80x60" else
            "haarcascade_frontalface_default.xml")
        self._cv2 = cv2
        self._local = threading.local()  # a classifier per thread: OpenCV's is not thread-safe
        self.calls = 0
        self.cpu = 0.0
        """CPU seconds spent detecting (the UDF work U of the cost model)."""
        self._lock = threading.Lock()  # operator instances call it from several threads

    def reset(self) -> None:
        self.calls = 0
        self.cpu = 0.0

    def __call__(self, img: int, other: int) -> bool:
        clf = getattr(self._local, "clf", None)
        if clf is None:
            clf = self._local.clf = self._cv2.CascadeClassifier(self.cascade)
        c0 = time.thread_time()
        found = clf.detectMultiScale(self.images[img % len(self.images)])
        spent = time.thread_time() - c0
        with self._lock:
            self.calls += 1
            self.cpu += spent
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
               block: int, queue: str, structure: str = "hash",
               push: int | None = None) -> dict[str, Any]:
    """A whole run, events pushed block by block (a block arrives at once): wall time, the
    process's CPU seconds, the operator instances' busy and critical-path CPU (per block the
    busiest instance, summed: the wall time on idle cores), each block's latency (push of
    the block until its matches are out) and the matches (their keys, to compare)."""
    import kleene
    from kleene.plans import tasks as T

    cq = kleene.compile(query, udfs=udfs, plan=plan)
    gc.collect()  # the runs compared start from the same heap
    with T.configure(workers=workers, block_size=block, queue=queue, structure=structure):
        rt = cq.start()
        lat = []
        out: list[Any] = []
        c0, t0 = time.process_time(), time.perf_counter()
        step = push or block
        for off in range(0, len(events), step):
            b0 = time.perf_counter()
            out += rt.push(events.slice(off, step))
            lat.append(time.perf_counter() - b0)
        out += rt.close()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        m = rt.matcher
        pool = getattr(m, "pool", None)
        if pool is not None:
            pool.shutdown()
    return {"wall": wall, "cpu": cpu, "latency": lat, "matches": [x.key() for x in out],
            "critical_cpu": getattr(m, "critical_cpu", cpu), "busy_cpu": getattr(m, "busy_cpu", cpu),
            "tasks": getattr(m, "tasks_created", None), "discarded": getattr(m, "discarded", None),
            "operators": getattr(m, "operators", None), "choice": getattr(m, "choice", None),
            "measured": getattr(m, "measured", None)}


def targets(heavy_events: int, cheap_events: int, repeats: int) -> dict[str, Any]:
    """Issue 15's two targets, each pair alternated in the same run (medians):

    * heavy: the thesis's query with face detection at 160x120, ``--plan tasks`` with 1 and 2
      workers (operators chosen automatically: the UDF is undeclared, so the engine measures
      it; OpenCV releases the GIL, so threads are expected): wall speed-up (target >= 1.8), the
      critical-path CPU speed-up (what idle cores would give; robust on a loaded machine) and
      the choice each run made;
    * cheap: ``b.x > a.x`` predicates, ``tasks`` with 1 worker against the sequential ``nfa``
      plan, CPU seconds (target <= 1.5), and the plan the chooser picks (must not be tasks).
    """
    import kleene

    res: dict[str, Any] = {"load_before": _load()}
    cheap_ev = _abc_events(cheap_events)
    crow: dict[str, list[dict[str, Any]]] = {"nfa": [], "tasks": []}
    for _ in range(repeats + 2):
        for plan in ("nfa", "tasks"):
            # one batch (kleene.compile(...).run): the tasks engine cuts it into blocks of 1,024
            r = _run_tasks(CHEAP_QUERY, cheap_ev, {}, plan, 1, 1024, "priority",
                           push=len(cheap_ev))
            crow[plan].append(r)
            print(json.dumps({"part": "cheap", "plan": plan, "wall": r["wall"],
                              "cpu": r["cpu"]}), flush=True)
    cheap: dict[str, Any] = {"events": cheap_events, "matches": len(crow["nfa"][0]["matches"]),
                             "identical": all(r["matches"] == crow["nfa"][0]["matches"]
                                              for p in crow for r in crow[p])}
    for p in crow:
        cheap[p] = {k: statistics.median(r[k] for r in crow[p]) for k in ("wall", "cpu")}
    cheap["cpu_ratio"] = cheap["tasks"]["cpu"] / cheap["nfa"]["cpu"]
    cheap["wall_ratio"] = cheap["tasks"]["wall"] / cheap["nfa"]["wall"]
    cheap["chooser_picks"] = kleene.compile(CHEAP_QUERY).plan
    cheap["target_ratio_1_5"] = cheap["cpu_ratio"] <= 1.5 and cheap["chooser_picks"] != "tasks"
    res["cheap"] = cheap
    face = FaceUdf("160x120")
    udfs = {"face": face}
    events = _abc_events(heavy_events)
    rows: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for _ in range(repeats):
        for w in (1, 2):
            face.reset()
            r = _run_tasks(TASKS_QUERY, events, udfs, "tasks", w, 64, "priority")
            r["udf_calls"] = face.calls
            rows[w].append(r)
            print(json.dumps({"part": "heavy", "workers": w, "wall": r["wall"],
                              "critical_cpu": r["critical_cpu"], "udf_calls": face.calls,
                              "operators": r["operators"], "choice": r["choice"]}),
                  flush=True)
    heavy: dict[str, Any] = {"events": heavy_events, "size": "160x120", "block": 64,
                             "matches": len(rows[1][0]["matches"]),
                             "identical": all(r["matches"] == rows[1][0]["matches"]
                                              for w in (1, 2) for r in rows[w])}
    for w in (1, 2):
        heavy[f"workers_{w}"] = {k: statistics.median(r[k] for r in rows[w])
                                 for k in ("wall", "cpu", "critical_cpu", "udf_calls")}
    heavy["wall_speedup"] = heavy["workers_1"]["wall"] / heavy["workers_2"]["wall"]
    heavy["critical_cpu_speedup"] = (heavy["workers_1"]["critical_cpu"]
                                     / heavy["workers_2"]["critical_cpu"])
    heavy["target_wall_speedup_1_8"] = heavy["wall_speedup"] >= 1.8
    heavy["choices_2_workers"] = [r["choice"] for r in rows[2]]
    res["heavy"] = heavy
    res["gil"] = gil_bench(heavy_events // 2, repeats)
    res["choices"] = auto_choices(repeats * 3)
    res["load_after"] = _load()
    return res


def spark_job_overhead(jobs: int = 10) -> dict[str, Any]:
    """What one block-synchronous Spark step would cost beyond its work: the wall time of a
    tiny job (2 partitions, each evaluating a chunk of trivial tasks) on the test suites'
    ``local[2]`` session; the median after 2 warm-up jobs."""
    from kleene.spark.backend import local_session

    sc = local_session().sparkContext
    walls = []
    for _ in range(jobs):
        t0 = time.perf_counter()
        out = sc.parallelize([list(range(128)), list(range(128, 256))], 2).map(
            _spark_chunk).collect()
        walls.append(time.perf_counter() - t0)
        if len(out) != 2 or out[0][0] is not True:
            raise AssertionError("the Spark job returned a wrong result")
    return {"master": sc.master, "job_wall_s": walls,
            "median_after_warmup": statistics.median(walls[2:])}


def _spark_chunk(chunk: list[int]) -> list[bool]:
    return [x % 3 == 0 for x in chunk]


SPIN_QUERY = TASKS_QUERY.replace("face(", "spin(")


def spin(img: int, other: int) -> bool:
    """A UDF that holds the GIL (pure Python, ~2 ms): the case for operator processes."""
    acc = 0
    for i in range(40_000):
        acc += (i * img + other) & 7
    return (img + other + acc) % 2 == 1


def gil_bench(n: int, repeats: int) -> dict[str, Any]:
    """A GIL-holding UDF: 1 worker, 2 threads, 2 forked processes, alternately: wall seconds
    (the comparison; a process pool's fork is in the run) and, for processes, the critical-path
    CPU (per block the parent's serial part plus the busiest process). A thread's CPU does not
    count its waits for the GIL, so the threads' critical-path CPU is meaningless here."""
    events = _abc_events(n)
    rows: dict[str, list[dict[str, Any]]] = {"1": [], "2 threads": [], "2 processes": [],
                                             "2 auto": []}
    for _ in range(repeats):
        for name in rows:
            from kleene.plans import tasks as T

            w = 1 if name == "1" else 2
            with T.configure(operators=name.split()[-1] if w == 2 else "auto"):
                r = _run_tasks(SPIN_QUERY, events, {"spin": spin}, "tasks", w, 256, "priority")
            rows[name].append(r)
            print(json.dumps({"part": "gil", "operators": name, "wall": r["wall"],
                              "critical_cpu": r["critical_cpu"], "choice": r["choice"]}),
                  flush=True)
    out: dict[str, Any] = {"events": n, "identical": all(
        r["matches"] == rows["1"][0]["matches"] for rs in rows.values() for r in rs)}
    for name, rs in rows.items():
        out[name] = {k: statistics.median(r[k] for r in rs) for k in ("wall", "critical_cpu")}
    out["choices_2_auto"] = [r["choice"] for r in rows["2 auto"]]
    for name in ("2 threads", "2 processes", "2 auto"):
        out[f"wall_speedup {name}"] = out["1"]["wall"] / out[name]["wall"]
        out[f"critical_cpu_speedup {name}"] = out["1"]["critical_cpu"] / out[name]["critical_cpu"]
    return out


def sleepy(img: int, other: int) -> bool:
    """Waits 2 ms (I/O-like): releases the GIL."""
    time.sleep(0.002)
    return (img + other) % 2 == 1


_ARR: Any = None


def numpy_heavy(img: int, other: int) -> bool:
    """A reduction over 2M floats (~2-4 ms); numpy releases the GIL in the loop."""
    global _ARR
    import numpy as np

    if _ARR is None:
        _ARR = np.random.default_rng(1).random(2_000_000)
    return bool(((_ARR * (img + 1)) ** 2).sum() > 0 and (img + other) % 2 == 1)


def auto_choices(runs: int, n: int = 120) -> dict[str, Any]:
    """What ``operators="auto"`` picks with 2 workers for four undeclared UDFs (the face
    detector at 160x120, numpy, a sleep, pure Python), ``runs`` times each on ``n`` events,
    alternating: the choice and the measured speed-up of 2 threads over 1 per run."""
    face = FaceUdf("160x120")
    udfs = {"face": face, "numpy": numpy_heavy, "sleep": sleepy, "spin": spin}
    events = _abc_events(n)
    out: dict[str, Any] = {name: [] for name in udfs}
    for _ in range(runs):
        for name, f in udfs.items():
            q = TASKS_QUERY.replace("face(", "f(")
            r = _run_tasks(q, events, {"f": f}, "tasks", 2, 64, "priority")
            m = r["measured"] or {}
            out[name].append((r["operators"], round(m.get("speedup", 0.0), 2),
                              round(m.get("per_task", 0.0) * 1e3, 3)))
            print(json.dumps({"part": "choice", "udf": name, "operators": r["operators"],
                              "measured": m}), flush=True)
    return {name: {"runs": rs, "picked": {k: sum(1 for x in rs if x[0] == k)
                                          for k in {x[0] for x in rs}}}
            for name, rs in out.items()}


def _load() -> list[str]:
    p = Path("/proc/loadavg")
    return p.read_text().split()[:3] if p.exists() else []


BLOCKS = [4, 16, 64, 256, 1024, 4096, 16384, 65536, 131072]
"""The thesis's raw-event block sizes (Fig. 6.1-6.3)."""


def per_call_ms(face: FaceUdf, n: int = 24) -> float:
    """The UDF's measured cost per call (CPU ms, one thread)."""
    c0 = time.process_time()
    for i in range(n):
        face(i, 0)
    return 1000 * (time.process_time() - c0) / n


def tasks_bench(n: int, n_sizes: int, quick: bool) -> dict[str, Any]:
    """The thesis's experiments on ``--plan tasks`` (face detection UDF):

    1. block size x queue x partial-match structure x workers (1, 2) at 80x60 (Fig. 6.1-6.3);
    2. image size (80x60, 160x120, 320x240) x workers, with the sequential ``nfa`` plan
       alternately (block 256, priority queue);
    3. the cheap predicate: ``tasks`` (1 worker) against ``nfa``, and what the chooser picks.
    Every row has wall and CPU seconds and the critical-path CPU of the operator instances."""
    import kleene

    out: dict[str, Any] = {"events": n, "events_sizes": n_sizes, "rows": []}
    blocks = [4, 64, 1024, 131072] if quick else BLOCKS

    def row(r: dict[str, Any], **kw: Any) -> None:
        kw.update(wall=r["wall"], cpu=r["cpu"], critical_cpu=r["critical_cpu"],
                  tasks=r["tasks"], discarded=r["discarded"], matches=len(r["matches"]))
        if r["latency"]:
            kw["block_latency_median"] = statistics.median(r["latency"])
        kw["events_per_s"] = kw["events"] / r["wall"]
        kw["events_per_cpu_s"] = kw["events"] / max(r["critical_cpu"], 1e-9)
        out["rows"].append(kw)
        print(json.dumps(kw), flush=True)

    events = _abc_events(n)
    face = FaceUdf("80x60")
    udfs = {"face": face}
    want = None
    for block in blocks:
        for queue in ("fifo", "priority"):
            for structure in ("hash", "tree"):
                for workers in (1, 2):
                    face.reset()
                    r = _run_tasks(TASKS_QUERY, events, udfs, "tasks", workers, block, queue,
                                   structure)
                    want = r["matches"] if want is None else want
                    row(r, part="block", size="80x60", events=n, block=block, queue=queue,
                        structure=structure, workers=workers, udf_calls=face.calls,
                        same_matches=r["matches"] == want)
    sevents = _abc_events(n_sizes)
    for size in SIZES:
        face = FaceUdf(size)
        udfs = {"face": face}
        out.setdefault("per_call_ms", {})[size] = per_call_ms(face)
        want = None
        for plan, workers in (("nfa", 1), ("tasks", 1), ("tasks", 2)) * (1 if quick else 2):
            face.reset()
            r = _run_tasks(TASKS_QUERY, sevents, udfs, plan, workers, 256, "priority")
            want = r["matches"] if want is None else want
            row(r, part="size", size=size, events=n_sizes, plan=plan, workers=workers,
                udf_calls=face.calls, udf_cpu=face.cpu, same_matches=r["matches"] == want)
    cheap = _abc_events(20_000)
    for _ in range(2):
        for plan in ("nfa", "tasks"):
            r = _run_tasks(CHEAP_QUERY, cheap, {}, plan, 1, 1024, "priority")
            row(r, part="cheap", plan=plan, events=len(cheap))
    out["chooser_picks"] = kleene.compile(CHEAP_QUERY).plan
    out["chooser_picks_heavy"] = kleene.compile(TASKS_QUERY, udfs={"face": FaceUdf("80x60")}
                                                ).plan
    return out


def _median(rows: list[dict[str, Any]], key: str, **match: Any) -> float:
    vals = [r[key] for r in rows if all(r.get(k) == v for k, v in match.items())]
    return statistics.median(vals) if vals else float("nan")


def project(res: dict[str, Any]) -> dict[str, Any]:
    """The cost model T(p) = S + U / p, from the 1-worker runs of part 2: U = the CPU seconds
    the UDF itself spent (timed inside each call; divisible over p operator instances: OpenCV
    releases the GIL), S = the operator instances' CPU minus U (task creation, the structure,
    the Python side of every task, the merger: serial, as the GIL serializes it). The
    measured 2-worker critical-path CPU checks the model; 4, 8 and 16 cores are projected. Not
    modelled: a block with fewer ready tasks than cores, memory bandwidth, the scheduler (the
    model is an upper bound)."""
    rows = res["rows"]
    proj: dict[str, Any] = {}
    for size in SIZES:
        n = res["events_sizes"]
        cpu1 = _median(rows, "critical_cpu", part="size", size=size, plan="tasks", workers=1)
        crit2 = _median(rows, "critical_cpu", part="size", size=size, plan="tasks", workers=2)
        u = _median(rows, "udf_cpu", part="size", size=size, plan="tasks", workers=1)
        s = max(cpu1 - u, 0.0)
        proj[size] = {"serial_s": s, "udf_s": u, "measured_1": n / cpu1,
                      "measured_2": n / crit2, "speedup_2_measured": cpu1 / crit2,
                      **{f"projected_{p}": n / (s + u / p) for p in (1, 2, 4, 8, 16)},
                      "speedup_16_projected": (s + u) / (s + u / 16)}
    return proj


def plots(res: dict[str, Any], proj: dict[str, Any], out_dir: Path) -> list[Path]:
    """Throughput and latency vs block size (Fig. 6.1, 6.3) and vs cores, measured and
    projected (Fig. 6.8)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [r for r in res["rows"] if r.get("part") == "block"]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for queue in ("fifo", "priority"):
        for structure in ("hash", "tree"):
            for workers in (1, 2):
                rs = [r for r in rows if r["queue"] == queue and r["workers"] == workers
                      and r["structure"] == structure]
                lab = f"{queue}, {structure}, {workers} worker(s)"
                ax[0].plot([r["block"] for r in rs], [r["events_per_cpu_s"] for r in rs],
                           marker="o", label=lab)
                ax[1].plot([r["block"] for r in rs],
                           [1000 * r["block_latency_median"] for r in rs], marker="o",
                           label=lab)
    for a, yl in zip(ax, ("events per critical-path CPU second",
                          "median block latency (wall ms)"), strict=True):
        a.set_xscale("log", base=2)
        a.set_xlabel("raw-event block size")
        a.set_ylabel(yl)
        a.legend(fontsize=6)
    ax[1].set_yscale("log")
    fig.suptitle(f"task engine, face detection 80x60, {res['events']} events (shared 2-core VM)")
    p1 = out_dir / "tasks_block_size.png"
    fig.tight_layout()
    fig.savefig(p1, dpi=80)
    plt.close(fig)
    fig, a = plt.subplots(figsize=(5.5, 4))
    cores = [1, 2, 4, 8, 16]
    for size, pr in proj.items():
        a.plot(cores, [pr[f"projected_{c}"] for c in cores], marker="o", label=f"{size} model")
        a.scatter([1, 2], [pr["measured_1"], pr["measured_2"]], marker="x")
    a.set_xlabel("operator instances (cores)")
    a.set_ylabel("events/s (critical-path CPU)")
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.legend(fontsize=7)
    a.set_title("measured (x, 1-2 cores) and cost model")
    p2 = out_dir / "tasks_cores.png"
    fig.tight_layout()
    fig.savefig(p2, dpi=80)
    plt.close(fig)
    return [p1, p2]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.parallel", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["keyed", "tasks", "targets", "spark-job", "choices"])
    ap.add_argument("--quick", action="store_true", help="tasks: fewer block sizes")
    ap.add_argument("--sizes-events", type=int, default=60,
                    help="tasks: events per run of the image-size part")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-cli", action="store_true", help="engine only")
    a = ap.parse_args(argv)
    if a.what == "choices":
        print(json.dumps(auto_choices(a.repeats), indent=1))
        return
    if a.what == "spark-job":
        print(json.dumps(spark_job_overhead()))
        return
    if a.what == "targets":
        n = a.events if a.events != 1_000_000 else 240
        print(json.dumps(targets(n, 20_000, a.repeats), indent=1))
        return
    if a.what == "tasks":
        n = a.events if a.events != 1_000_000 else 200
        res = tasks_bench(n, a.sizes_events, a.quick)
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
