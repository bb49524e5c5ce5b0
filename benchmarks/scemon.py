"""SCEMon's experiments (Lee et al., DEBS 2011, section 7) on kleene's query sets.

    python -m benchmarks.scemon                 # every experiment (several minutes)
    python -m benchmarks.scemon --only queries  # one: queries, sources, classes, steps,
                                                # cnj, dsj, clean, memory, addremove, headline

The paper's data is synthetic and not published; this is the generator it describes: events
``(source_id, class, ts)`` from ``Ns`` sources over ``Npc`` classes (default 1K sources, 50
classes), each source emitting an event every 0-20 minutes (uniform; the paper gives no rate),
and queries ``PATTERN SEQ(C1 a, C2 b, C3 c) PARTITION BY src WITHIN [200-240] minutes`` of
random distinct classes (default 1K queries). CNJ3 is ``AND`` of 3 classes, DSJ3 / DSJ5 ``OR``
of 3 / 5.

Times are CPU seconds of the process (``time.process_time``: the machine is shared, so wall
time depends on other jobs). The cleaning period defaults to 10K events (the paper's 100K is
for its much longer runs; ``clean`` sweeps it). Measured per point, alternately in the same
process: the **shared network** (every query in
one ``QuerySet`` with ``plan="shared"``, SCEMon) and **SP** (separate processing: each query run
alone by kleene's own plan, ``CompiledQuery.run``). SP over thousands of queries would take
hours, so SP runs a random sample of queries (``--sp-sample``, default 8) over the same events
and is extrapolated linearly to all queries (SP's cost is a sum over queries). Unit processing
time = elapsed / events (µs per event), as in the paper. Stored instances: the network's SIQs,
sampled after every cleaning (mean); SP: the candidate events of each sampled query in its own
window (one copy per query), extrapolated.

Results go to ``benchmarks/results/scemon.json`` and PNG plots to ``docs/img/scemon_*.png``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import kleene
from kleene.events import EventBatch
from kleene.events.model import ID, TS, TYPE

MINUTE = 60_000_000
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "scemon.json"
IMG = ROOT / "docs" / "img"


def events(n_events: int, n_sources: int, n_classes: int, seed: int = 1) -> EventBatch:
    """``n_events`` events (src, class, ts): each source emits every U(0, 20) minutes."""
    rng = np.random.default_rng(seed)
    per = max(1, n_events // n_sources)
    gaps = rng.uniform(0, 20 * MINUTE, size=(n_sources, per)).astype(np.int64)
    ts = np.cumsum(gaps, axis=1).ravel()
    src = np.repeat(np.arange(n_sources, dtype=np.int64), per)
    cls = rng.integers(0, n_classes, size=len(ts))
    order = np.argsort(ts, kind="stable")
    ts, src, cls = ts[order], src[order], cls[order]
    names = np.array([f"E{i}" for i in range(n_classes)])
    table = pa.table({ID: pa.array(np.arange(len(ts), dtype=np.int64)), TS: pa.array(ts),
                      TYPE: pa.array(names[cls].tolist(), pa.string()), "src": pa.array(src)})
    return EventBatch(table)


def queries(n: int, n_classes: int, *, kind: str = "SEQ", steps: int = 3,
            seed: int = 2, emit: str = "RECENT") -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        cls = rng.sample(range(n_classes), steps)
        body = ", ".join(f"E{c} v{j}" for j, c in enumerate(cls))
        win = "" if kind == "OR" else f" WITHIN {rng.randint(200, 240)} minutes"
        out.append(f"NAME q{i} PATTERN {kind}({body}) PARTITION BY src{win} EMIT {emit}")
    return out


def run_shared(qs: kleene.QuerySet, ev: EventBatch, chunk: int, clean: int,
               count: bool = False) -> dict[str, Any]:
    """Push the events in chunks; time, matches, stored instances (sampled per chunk)."""
    rt = qs.start(clean_period=clean, count_only=count)
    gc.collect()
    gc.disable()
    stored = []
    n = 0
    t0 = time.process_time()
    for off in range(0, len(ev), chunk):
        n += len(rt.push(ev.slice(off, chunk)))
        stored.append(rt.stored_instances())
    n += len(rt.close())
    dt = time.process_time() - t0
    gc.enable()
    # the paper's measure: stored instances before and after each cleaning, after warm-up
    log = [x for net in rt.networks.values() for x in net.stored_log]
    warm = [(b + a) / 2 for b, a in log[len(log) // 4:]] or stored[len(stored) // 4:] or stored
    return {"seconds": dt, "us_per_event": dt / len(ev) * 1e6, "matches": n,
            "stored": statistics.mean(warm)}


def run_sp(texts: list[str], ev: EventBatch, sample: int, seed: int = 3,
           count: bool = False) -> dict[str, Any]:
    """Each sampled query alone (its own plan); extrapolated to every query."""
    rng = random.Random(seed)
    pick = rng.sample(texts, min(sample, len(texts)))
    total = 0.0
    matches = 0
    stored = 0.0
    types = ev.types
    for text in pick:
        cq = kleene.compile(text, count_only=count)
        t0 = time.process_time()
        matches += len(cq.run(ev))
        total += time.process_time() - t0
        # SP stores the query's candidate events per source within its window: estimate as
        # the mean number of its events in one window
        names = {p.type for p in getattr(cq.analyzed.pattern, "items", ())}
        win = cq.analyzed.within.microseconds if cq.analyzed.within else 0
        span = int(ev.ts[-1] - ev.ts[0]) or 1
        stored += float(np.isin(types, list(names)).sum()) * min(1.0, win / span)
    scale = len(texts) / len(pick)
    return {"seconds": total * scale, "us_per_event": total * scale / len(ev) * 1e6,
            "matches_est": matches * scale, "stored": stored * scale, "sampled": len(pick)}


def point(nq: int, ns: int, npc: int, n_events: int, *, kind: str = "SEQ", steps: int = 3,
          clean: int = 10_000, sp_sample: int = 8, chunk: int = 10_000,
          sp: bool = True, modes: tuple[str, ...] = ("output", "count")) -> dict[str, Any]:
    """One configuration; per mode (``output``: Match objects built; ``count``: the paper's
    metric, output delivery excluded) the network then the SP sample, alternately."""
    ev = events(n_events, ns, npc)
    texts = queries(nq, npc, kind=kind, steps=steps)
    t0 = time.process_time()
    qs = kleene.compile_many(texts, plan="shared")
    compile_s = time.process_time() - t0
    res: dict[str, Any] = {"nq": nq, "ns": ns, "npc": npc, "events": len(ev), "kind": kind,
                           "steps": steps, "clean": clean, "compile_s": compile_s}
    for mode in modes:
        count = mode == "count"
        sfx = "" if mode == "output" else "_count"
        res["shared" + sfx] = run_shared(qs, ev, chunk, clean, count)
        if sp:
            res["sp" + sfx] = run_sp(texts, ev, sp_sample, count=count)
            res["speedup" + sfx] = (res["sp" + sfx]["us_per_event"]
                                    / res["shared" + sfx]["us_per_event"])
    if "shared" not in res:  # count-only points plot their count numbers
        res["shared"] = res["shared_count"]
        if sp:
            res["sp"] = res["sp_count"]
    print(json.dumps(res, default=float), flush=True)
    return res


def memory_child(nq: int, ns: int, n_events: int) -> None:
    ev = events(n_events, ns, 50)
    qs = kleene.compile_many(queries(nq, 50), plan="shared")
    r = run_shared(qs, ev, 10_000, 10_000)
    # VmHWM: this process's peak RSS (ru_maxrss keeps the parent's peak across fork + exec)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            rss = int(line.split()[1]) / 1024
    print(json.dumps({"nq": nq, "ns": ns, "events": len(ev), "peak_rss_mb": rss, **r}))


def addremove(nq: int) -> dict[str, Any]:
    """Add 200 queries one at a time to a running set of ``nq``, then remove them; after each
    add / remove, and between them, a push of 20 events. The cost of an add (remove) is the
    call plus what the next push costs more than a push without one (the network's fast path
    rebuilds its query tables at that push)."""
    texts = queries(nq, 50)
    rt = kleene.compile_many(texts, plan="shared").start()
    allev = events(20_000 + 20 * 3 * 200, 1000, 50)
    rt.push(allev.slice(0, 20_000))
    at = [20_000]

    def push() -> float:
        b = allev.slice(at[0], 20)
        at[0] += 20
        t0 = time.process_time()
        rt.push(b)
        return (time.process_time() - t0) * 1e3

    extra = queries(200, 50, seed=99)
    add_ms, rem_ms, plain, after_add, after_rem = [], [], [], [], []
    for i, t in enumerate(extra):
        plain.append(push())
        t0 = time.process_time()
        rt.add(t.replace(f"NAME q{i} ", f"NAME extra{i} "))
        add_ms.append((time.process_time() - t0) * 1e3)
        after_add.append(push())
    for i in range(len(extra)):
        t0 = time.process_time()
        rt.remove(f"extra{i}")
        rem_ms.append((time.process_time() - t0) * 1e3)
        after_rem.append(push())
    base = statistics.median(plain)
    add_total = [a + p - base for a, p in zip(add_ms, after_add, strict=True)]
    rem_total = [r + p - base for r, p in zip(rem_ms, after_rem, strict=True)]
    res = {"nq": nq, "add_ms_median": statistics.median(add_ms), "add_ms_max": max(add_ms),
           "remove_ms_median": statistics.median(rem_ms), "remove_ms_max": max(rem_ms),
           "push20_ms_median": base,
           "add_total_ms_median": statistics.median(add_total),
           "remove_total_ms_median": statistics.median(rem_total)}
    print(json.dumps(res), flush=True)
    return res


def fit_exponent(xs: list[float], ys: list[float]) -> float:
    lx, ly = np.log(xs), np.log(ys)
    slope = float(np.polyfit(lx, ly, 1)[0])
    return slope


def plot(results: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    IMG.mkdir(parents=True, exist_ok=True)
    sweeps = [("queries", "nq", "number of queries", True),
              ("sources", "ns", "number of sources", True),
              ("classes", "npc", "number of classes", False),
              ("steps", "steps", "sequence length", False),
              ("cnj", "nq", "number of queries (CNJ3)", True),
              ("dsj", "nq", "number of queries (DSJ3 / DSJ5)", True),
              ("clean", "clean", "cleaning period (events)", True)]
    for name, key, label, logx in sweeps:
        pts = results.get(name)
        if not pts:
            continue
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
        groups: dict[str, list[dict[str, Any]]] = {}
        for p in pts:
            groups.setdefault(p["kind"] + str(p["steps"]) if name == "dsj" else "", []).append(p)
        for g, ps in groups.items():
            xs = [p[key] for p in ps]
            a1.plot(xs, [p["shared"]["us_per_event"] for p in ps], "o-",
                    label=f"shared network {g}".strip())
            if all("sp" in p for p in ps):
                a1.plot(xs, [p["sp"]["us_per_event"] for p in ps], "s--",
                        label=f"SP (extrapolated) {g}".strip())
            a2.plot(xs, [p["shared"]["stored"] for p in ps], "o-",
                    label=f"shared network {g}".strip())
            if all("sp" in p for p in ps):
                a2.plot(xs, [p["sp"]["stored"] for p in ps], "s--",
                        label=f"SP (estimated) {g}".strip())
        for a, yl in ((a1, "unit processing time (µs / event)"), (a2, "stored instances")):
            a.set_xlabel(label)
            a.set_ylabel(yl)
            if logx:
                a.set_xscale("log")
            a.set_yscale("log")
            a.grid(True, alpha=0.3)
            a.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(IMG / f"scemon_{name}.png", dpi=90)
        plt.close(fig)


def _f(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 1 else f"{x:.2f}"


def report(results: dict[str, Any]) -> str:
    """The results as the markdown tables of docs/benchmarks.md."""
    out: list[str] = []
    m = results.get("machine", {})
    out.append(f"Machine: {m.get('cpus')} CPUs (shared), Python {m.get('python')}, "
               f"{m.get('date')}, load average at the end {m.get('load')}.\n")
    h = results.get("headline")
    if h:
        out.append("| 5K queries × 1K sources (median of 3) | shared µs/event | SP µs/event "
                   "(extrapolated) | speedup |")
        out.append("|---|---:|---:|---:|")
        out.append(f"| with output (Match objects) | {_f(h['shared_us'])} | {_f(h['sp_us'])} | "
                   f"{h['speedup']:.1f}× |")
        out.append(f"| count only (the paper's metric: output excluded) | "
                   f"{_f(h['shared_us_count'])} | {_f(h['sp_us_count'])} | "
                   f"{h['speedup_count']:.1f}× |\n")
    for name, key, title in (("queries", "nq", "queries"), ("sources", "ns", "sources"),
                             ("classes", "npc", "classes"), ("steps", "steps", "SEQ length"),
                             ("cnj", "nq", "CNJ3 queries"), ("dsj", "nq", "DSJ queries"),
                             ("clean", "clean", "cleaning period")):
        pts = results.get(name)
        if not pts:
            continue
        out.append(f"**{title}** ({pts[0]['events']:,} events unless noted)\n")
        has_sp = "sp" in pts[0]
        cols = ["shared µs/event"] + (["SP µs/event", "speedup"] if has_sp else []) + [
            "shared stored"] + (["SP stored (est.)"] if has_sp else [])
        extra = " | kind" if name == "dsj" else ""
        out.append(f"| {title}{extra} | " + " | ".join(cols) + " |")
        out.append("|---" * (len(cols) + 1 + (1 if extra else 0)) + "|")
        for p in pts:
            sh = p["shared"]
            row = [_f(sh["us_per_event"])]
            if has_sp:
                row += [_f(p["sp"]["us_per_event"]),
                        f"{p['sp']['us_per_event'] / sh['us_per_event']:.1f}×"]
            row += [_f(sh["stored"])]
            if has_sp:
                row += [_f(p["sp"]["stored"])]
            kind = f" | {p['kind']}{p['steps']}" if extra else ""
            ev = "" if p["events"] == pts[0]["events"] else f" ({p['events']:,} ev.)"
            out.append(f"| {p[key]:,}{ev}{kind} | " + " | ".join(row) + " |")
        out.append("")
    e = results.get("queries_exponent")
    if e:
        out.append("Fitted exponent of µs/event against the number of queries (log-log, 100 "
                   "to 5K): " + ", ".join(f"{k} {v:.2f}" for k, v in e.items()) + ".\n")
    for r in results.get("memory", []):
        out.append(f"Memory: {r['nq']:,} queries × {r['ns']:,} sources, {r['events']:,} events: "
                   f"peak RSS {r['peak_rss_mb']:,.0f} MB, {_f(r['us_per_event'])} µs/event, "
                   f"{_f(r['stored'])} stored instances.\n")
    for r in results.get("addremove", []):
        out.append(f"Add / remove with {r['nq']:,} queries registered: add median "
                   f"{r['add_ms_median']:.2f} ms (max {r['add_ms_max']:.1f}), remove median "
                   f"{r['remove_ms_median']:.2f} ms (max {r['remove_ms_max']:.1f}); with the "
                   "table rebuild at the next push (its extra time over a plain 20-event push "
                   f"of {r.get('push20_ms_median', 0):.2f} ms): add "
                   f"{r.get('add_total_ms_median', 0):.2f} ms, remove "
                   f"{r.get('remove_total_ms_median', 0):.2f} ms.\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--sp-sample", type=int, default=8)
    ap.add_argument("--memory-child", nargs=3, type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--report", action="store_true", help="print the markdown tables")
    args = ap.parse_args(argv)
    if args.memory_child:
        memory_child(*args.memory_child)
        return
    path = RESULTS.with_name("scemon-quick.json") if args.quick else RESULTS
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if args.plot_only:
        plot(results)
        return
    if args.report:
        print(report(results))
        return
    ne, sp = (10_000, 2) if args.quick else (args.events, args.sp_sample)
    todo = args.only.split(",") if args.only else [
        "headline", "queries", "sources", "classes", "steps", "cnj", "dsj", "clean", "memory",
        "addremove"]
    for what in todo:
        if what == "headline":  # 5K queries x 1K sources, three alternating repeats
            reps = [point(5000, 1000, 50, ne, sp_sample=sp) for _ in range(3)]
            h: dict[str, Any] = {"repeats": reps}
            for sfx in ("", "_count"):
                sh = statistics.median(r["shared" + sfx]["us_per_event"] for r in reps)
                spu = statistics.median(r["sp" + sfx]["us_per_event"] for r in reps)
                h["shared_us" + sfx], h["sp_us" + sfx] = sh, spu
                h["speedup" + sfx] = statistics.median(r["speedup" + sfx] for r in reps)
            results["headline"] = h
        elif what == "queries":
            results["queries"] = [point(nq, 1000, 50, ne, sp_sample=sp)
                                  for nq in (100, 250, 500, 1000, 2000, 5000)]
            pts = results["queries"]
            nqs = [p["nq"] for p in pts]
            results["queries_exponent"] = {
                f"{w}{sfx}": fit_exponent(nqs, [p[w + sfx]["us_per_event"] for p in pts])
                for w in ("shared", "sp") for sfx in ("", "_count")}
        elif what == "sources":
            results["sources"] = [point(1000, ns, 50, max(ne, 60 * ns), sp_sample=sp,
                                        modes=("count",))
                                  for ns in (100, 500, 1000, 2000, 5000)]
        elif what == "classes":
            results["classes"] = [point(1000, 1000, npc, ne, sp_sample=sp, modes=("count",))
                                  for npc in (10, 25, 50, 100, 200)]
        elif what == "steps":
            results["steps"] = [point(1000, 1000, 50, ne, steps=s, sp_sample=sp,
                                      modes=("count",))
                                for s in (2, 3, 4, 5)]
        elif what == "cnj":
            results["cnj"] = [point(nq, 1000, 50, ne, kind="AND", sp_sample=sp,
                                    modes=("count",))
                              for nq in (100, 1000, 5000)]
        elif what == "dsj":
            results["dsj"] = [point(nq, 1000, 50, ne // 5, kind="OR", steps=k, sp_sample=sp,
                                    modes=("count",))
                              for k in (3, 5) for nq in (100, 1000, 5000)]
        elif what == "clean":
            results["clean"] = [point(1000, 1000, 50, ne, clean=c, sp=False, modes=("count",))
                                for c in (1_000, 10_000, 100_000, 1_000_000)]
        elif what == "memory":
            mem = []
            for nq, ns in ((1000, 1000), (5000, 5000)):
                out = subprocess.run([sys.executable, "-m", "benchmarks.scemon",
                                      "--memory-child", str(nq), str(ns), str(2 * ne)],
                                     capture_output=True, text=True, check=True, cwd=ROOT,
                                     env={**os.environ})
                mem.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(mem[-1], flush=True)
            results["memory"] = mem
        elif what == "addremove":
            results["addremove"] = [addremove(nq) for nq in (1000, 5000)]
        else:
            raise SystemExit(f"unknown experiment {what!r}")
        results["machine"] = {"cpus": os.cpu_count(), "load": os.getloadavg(),
                              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "python": sys.version.split()[0]}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1, default=float))
    if not args.quick:
        plot(results)
    if "headline" in results:
        h = results["headline"]
        for sfx in ("", "_count"):
            print(f"5K queries x 1K sources{sfx}: shared {h['shared_us' + sfx]:.1f} µs/event, "
                  f"SP {h['sp_us' + sfx]:.1f} µs/event (extrapolated), speedup "
                  f"{h['speedup' + sfx]:.1f}x")
    if "queries_exponent" in results:
        print(f"fitted exponent of µs/event vs queries: {results['queries_exponent']}")


if __name__ == "__main__":
    main()
