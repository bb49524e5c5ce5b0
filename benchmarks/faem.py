"""FAEM's experiments (Behravesh et al., Figs. 7-11) on a generator with Table 1's populations.

    python -m benchmarks.faem [--events N] [--scale S] [--figs 7,8,9,10,11] [--out DIR]

The Yahoo! Music data (KDD Cup 2011) is not available here. The generator keeps Table 1's
populations -- four track ids at 1,661 / 1,350 / 1,325 / 1,268 events per million, the rest
noise -- multiplied by ``--scale`` (default 1: Table 1 exactly).
Every event has ``g``, uniform in 0..99, so ``(a.g + b.g) % 100 < S`` keeps exactly S % of
the pairs (the selectivity of Fig. 9).

For every figure point it measures each plan on the same stream, alternating plans in one
run: the tree shapes (left, right, bushy, inner), the shape the cost model chooses, and the
NFA and the chain plan where they run the same query with the same semantics
(skip-till-any-match, no Kleene group; under maximal-grouping they do not apply). It prints events/s (engine only, CPU time,
median of ``--repeat`` runs) and peak traced memory (``tracemalloc``, one separate run), the
ratio to the NFA, the estimated cost of each plan and, per figure, Spearman's rank
correlation between estimated and measured cost. ``--out`` writes PNG plots and a JSON file.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from kleene.api import analyze
from kleene.events import EventBatch
from kleene.plans import choose
from kleene.plans.registry import Stats
from kleene.plans.tree import compile_tree, shape_costs

TRACKS = ("147073", "56437", "189820", "531386")
TABLE1 = (1661, 1350, 1325, 1268)
"""Events per million of each track in the Yahoo! Music data (Table 1)."""
SHAPES = ("left", "right", "bushy", "inner")
OTHERS = ("nfa", "chain")
"""The plans measured besides the tree shapes where they take the query (the pda and tasks
plans also take the queries without Kleene, but are estimated 10-20x the NFA: not run)."""


def generate(n: int, scale: float = 1.0, seed: int = 7,
             populations: Sequence[float] = TABLE1) -> EventBatch:
    """``n`` events: the four tracks at ``populations * scale`` per million, the rest noise
    (type ``noise``); one event per time unit (second); attribute ``g`` in 0..99."""
    rng = np.random.default_rng(seed)
    p = np.array([x * scale / 1e6 for x in populations])
    if p.sum() >= 1:
        raise ValueError("populations * scale exceed the stream")
    kinds = rng.choice(len(p) + 1, size=n, p=[*p, 1 - p.sum()])
    names = pa.array([*TRACKS, "noise"])
    t = pa.table({
        "id": pa.array(np.arange(n)),
        "type": pa.DictionaryArray.from_arrays(pa.array(kinds.astype(np.int32)),
                                               names).cast(pa.string()),
        "ts": pa.array(np.arange(n, dtype=np.int64)),
        "g": pa.array(rng.integers(0, 100, size=n)),
    })
    return _from_arrow(t)


def _from_arrow(t: pa.Table) -> EventBatch:
    from kleene.events.model import ID, TS, TYPE, TimeInfo

    tb = pa.table({ID: t.column("id").cast(pa.string()), TS: t.column("ts").cast(pa.int64()),
                   TYPE: t.column("type"), "g": t.column("g")})
    # timestamps in microseconds: one event per second
    tb = tb.set_column(1, TS, pa.compute.multiply(tb.column(TS), 1_000_000))
    return EventBatch(tb, TimeInfo(kind="numeric", unit="s", tz=None))


def query(kleene_at: int | None, kind: str = "+", window: int = 5000,
          sel: int | None = None, grouping: bool = True) -> str:
    """``PATTERN 147073; 56437; 189820; 531386`` (canonical), Kleene ``kind`` on item
    ``kleene_at`` (0-based, None: no Kleene), a count window, Fig. 9's selectivity ``sel`` %
    between the first two items."""
    items = []
    for i, t in enumerate(TRACKS):
        v = f"e{t}"
        if i == kleene_at:
            q = {"+": "+", "*": "*", "[3]": "{3}"}[kind]
            items.append(f"{t}{q} {v}[]")
        else:
            items.append(f"{t} {v}")
    where = ""
    if sel is not None:
        where = f" WHERE (e{TRACKS[0]}.g + e{TRACKS[1]}.g) % 100 < {sel}"
    strat = " USING maximal-grouping" if grouping and kleene_at is not None else ""
    return f"PATTERN SEQ({', '.join(items)}){where} WITHIN {window} EVENTS{strat}"


def _run(aq: Any, events: EventBatch, plan: str | None, stats: Stats) -> tuple[float, int]:
    from kleene.plans.registry import evaluate

    cp = choose(aq, plan=plan, stats=stats)
    gc.collect()
    t0 = time.process_time()
    ms = evaluate(cp, events, max_runs_per_partition=None, max_matches_per_call=None)
    return time.process_time() - t0, len(ms)


def _peak(aq: Any, events: EventBatch, plan: str | None, stats: Stats) -> int:
    from kleene.plans.registry import evaluate

    cp = choose(aq, plan=plan, stats=stats)
    gc.collect()
    tracemalloc.start()
    evaluate(cp, events, max_runs_per_partition=None, max_matches_per_call=None)
    _cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def measure_point(q: str, events: EventBatch, stats: Stats, repeat: int,
                  memory: bool, any_nfa: bool = False) -> dict[str, Any]:
    """Every plan on one (query, stream) point, plans alternating within each repetition."""
    aq = analyze(q)
    tree = compile_tree(aq)
    est = {name: c for name, _t, c in shape_costs(tree, stats)}
    cp = choose(aq, stats=stats)
    chosen = cp.choice.chosen
    if chosen == "tree":
        chosen = f"tree:{min(est, key=lambda k: est[k])}"
    plans: dict[str, str | None] = {s: f"tree:{s}" for s in SHAPES}
    for other in OTHERS:  # the other plans that run the same query with the same semantics
        cost = next((r.cost for r in cp.choice.candidates if r.name == other), None)
        if cost is not None:
            plans[other] = other
            est[other] = cost
    plans["chosen"] = chosen
    est["chosen"] = est.get(chosen.partition(":")[2] or chosen, float("nan"))
    times: dict[str, list[float]] = {k: [] for k in plans}
    matches: dict[str, int] = {}
    for _ in range(repeat):
        for name, plan in plans.items():
            dt, nm = _run(aq, events, plan, stats)
            times[name].append(dt)
            matches[name] = nm
    if len(set(matches.values())) != 1:
        raise AssertionError(f"plans disagree on {q}: {matches}")
    out: dict[str, Any] = {"query": q, "chosen": chosen, "matches": next(iter(matches.values())),
                           "plans": {}}
    for name in plans:
        med = statistics.median(times[name])
        row = {"seconds": med, "events_per_s": len(events) / med if med else float("inf"),
               "estimate": est.get(name)}
        if memory:
            row["peak_bytes"] = _peak(aq, events, plans[name], stats)
        out["plans"][name] = row
    if "grouping" in q and any_nfa:
        # the NFA under skip-till-any-match on the same pattern (other semantics), default
        # caps: where the Kleene explodes it stops at max_runs_per_partition
        from kleene.errors import CapacityError
        from kleene.plans.registry import evaluate

        aq_any = analyze(q.replace(" USING maximal-grouping", ""))
        t0 = time.process_time()
        try:
            n_any: Any = len(evaluate(aq_any, events, plan="nfa"))
        except CapacityError:
            n_any = "CapacityError"
        out["nfa_skip_till_any"] = {"seconds": time.process_time() - t0, "matches": n_any}
    if "nfa" in out["plans"]:
        base = out["plans"]["nfa"]["seconds"]
        for row in out["plans"].values():
            row["nfa_ratio"] = base / row["seconds"] if row["seconds"] else float("inf")
    return out


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    def ranks(v: Sequence[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    if len(xs) < 3:
        return float("nan")
    a, b = np.array(ranks(xs)), np.array(ranks(ys))
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def figures(args: argparse.Namespace) -> dict[str, Any]:
    """The figure points: (figure, x label, x value, query)."""
    pts: dict[str, list[tuple[str, str]]] = {}
    if "7" in args.figs:
        pts["7"] = [("kleene last", query(3)), ("kleene first", query(0)),
                    ("no kleene", query(None))]
    if "8" in args.figs:
        # the population of the Kleene class (531386) scaled: the stream is regenerated
        pts["8"] = [(f"x{m}", query(3)) for m in (1, 4, 16)]
    if "9" in args.figs:
        pts["9"] = [(f"{s}%", query(3, sel=s)) for s in (10, 30, 50, 90)]
    if "10" in args.figs:
        pts["10"] = [(f"W={w} kleene", query(3, window=w)) for w in (1000, 2500, 5000)] + [
            (f"W={w} none", query(None, window=w)) for w in (1000, 2500, 5000)]
    if "11" in args.figs:
        pts["11"] = [(f"{k} at {i + 1}", query(i, kind=k, window=10000))
                     for k in ("+", "*", "[3]") for i in range(4)]
    return pts


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--figs", default="7,8,9,10,11")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7, help="the generator's seed")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--report", default=None, metavar="DIR",
                    help="Print markdown tables from the JSON files in DIR and exit.")
    ap.add_argument("--fig11-events", type=int, default=100_000,
                    help="events for Fig. 11 ([3] makes every 3-combination of a group)")
    args = ap.parse_args(argv)
    if args.report:
        print(report(Path(args.report)))
        return
    args.figs = args.figs.split(",")
    base = generate(args.events, args.scale, seed=args.seed)
    results: dict[str, Any] = {"events": args.events, "scale": args.scale, "figures": {}}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for fig, points in figures(args).items():
        rows = []
        for label, q in points:
            ev = base
            if fig == "8":
                m = int(label[1:])
                ev = generate(args.events, args.scale, seed=args.seed,
                              populations=(*TABLE1[:3], TABLE1[3] * m))
            stats = Stats.from_events(ev)
            stats = Stats(stats.type_share, stats.events_per_second,
                          0.5 if "%" not in label else int(label[:-1]) / 100,
                          stats.default_share, stats.source)
            if fig == "11" and len(ev) > args.fig11_events:
                ev = EventBatch(ev.table.slice(0, args.fig11_events), ev.time)
            r = measure_point(q, ev, stats, args.repeat,
                              not args.no_memory, any_nfa=fig == "7")
            r["label"] = label
            r["stats"] = {"type_share": dict(stats.type_share),
                          "events_per_second": stats.events_per_second,
                          "selectivity": stats.selectivity, "source": stats.source}
            rows.append(r)
            cells = "  ".join(
                f"{n}={p['events_per_s'] / 1e3:,.0f}k/s"
                + (f" ({p['nfa_ratio']:.2f}x nfa)" if "nfa_ratio" in p else "")
                + (f" {p['peak_bytes'] / 2**20:.1f}MB" if "peak_bytes" in p else "")
                + f" est {p['estimate']:,.3g}"
                for n, p in r["plans"].items())
            print(f"fig {fig} {label:<14} matches={r['matches']:<6} chosen={r['chosen']:<11} "
                  f"{cells}", flush=True)
            if "nfa_skip_till_any" in r:
                x = r["nfa_skip_till_any"]
                print(f"      nfa, same pattern under skip-till-any-match (default caps): "
                      f"{x['matches']} after {x['seconds']:.2f} s", flush=True)
        est, got = [], []
        for r in rows:
            for n, p in r["plans"].items():
                if n != "chosen" and p["estimate"] is not None:
                    est.append(p["estimate"])
                    got.append(p["seconds"])
        rho = spearman(est, got)
        near = chosen_near(rows)
        print(f"fig {fig}: Spearman(estimated, measured) = {rho:.2f}; chosen within 10% of the "
              f"best plan at {near}/{len(rows)} points", flush=True)
        results["figures"][fig] = {"points": rows, "spearman": rho, "chosen_within_10pct": near,
                                   "load": os.getloadavg()}
        if args.out:  # each figure as soon as it is measured
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            n = min(args.events, args.fig11_events) if fig == "11" else args.events
            (out / f"faem_fig{fig}.json").write_text(json.dumps(
                {"events": n, "scale": args.scale, "repeat": args.repeat, "seed": args.seed,
                 "started": started, **results["figures"][fig]}, indent=1, default=str))
    if args.out:
        plot(results, Path(args.out))


def chosen_seconds(point: dict[str, Any]) -> float:
    """The measured time of the plan the chooser took: the median of that plan's own forced
    runs when it is one of the measured plans (a tree shape, the NFA), so that comparing it
    with the best one does not add the noise of a second measurement of the same plan; else
    the separate ``chosen`` runs (e.g. the chain plan)."""
    ch = point["chosen"]
    name = ch.partition(":")[2] if ch.startswith("tree:") else ch
    row = point["plans"].get(name) or point["plans"]["chosen"]
    return float(row["seconds"])


def chosen_near(points: Sequence[dict[str, Any]], tol: float = 0.10) -> int:
    """Points where the chosen plan is within ``tol`` of the best measured plan."""
    return sum(1 for p in points if chosen_seconds(p) <= (1 + tol) * min(
        r["seconds"] for n, r in p["plans"].items() if n != "chosen"))


def report(out: Path) -> str:
    """Markdown tables from the ``faem_fig*.json`` files in ``out`` (docs/benchmarks.md)."""
    lines = []
    for f in sorted(out.glob("faem_fig*.json"), key=lambda p: int(p.stem[8:])):
        data = json.loads(f.read_text())
        fig = f.stem[8:]
        names = ["left", "right", "bushy", "inner", "chosen", "nfa", "chain"]
        within = [spearman([p["plans"][n]["estimate"] for n in SHAPES],
                           [p["plans"][n]["seconds"] for n in SHAPES]) for p in data["points"]]
        within = [w for w in within if w == w]
        mean_within = sum(within) / len(within) if within else float("nan")
        lines.append(f"Fig. {fig} ({data['events']:,} events; Spearman(estimate, measured) over "
                     f"all plans and points = {data['spearman']:.2f}, among the four shapes at "
                     f"one point = {mean_within:.2f} on average; chosen within 10 % of the best "
                     f"at {chosen_near(data['points'])}/{len(data['points'])} points)")
        lines.append("")
        lines.append("| point | matches | chosen | " + " | ".join(names) + " |")
        lines.append("|---|---:|---|" + "---:|" * len(names))
        for p in data["points"]:
            cells = []
            for n in names:
                r = p["plans"].get(n)
                if r is None:
                    cells.append("n/a")
                    continue
                c = f"{r['events_per_s'] / 1e3:,.0f}k/s"
                if "peak_bytes" in r:
                    c += f", {r['peak_bytes'] / 2**20:.1f} MiB"
                if "nfa_ratio" in r and n != "nfa":
                    c += f", {r['nfa_ratio']:.2f}x NFA"
                cells.append(c)
            lines.append(f"| {p['label']} | {p['matches']:,} | {p['chosen']} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(results: dict[str, Any], out: Path) -> None:
    """One PNG per figure: throughput and peak memory per plan and point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for fig, data in results["figures"].items():
        pts = data["points"]
        labels = [p["label"] for p in pts]
        names = [n for n in ("left", "right", "bushy", "inner", "chosen", "nfa", "chain")
                 if any(n in p["plans"] for p in pts)]
        f, axes = plt.subplots(1, 2, figsize=(12, 4))
        width = 0.8 / len(names)
        x = np.arange(len(labels))
        for k, n in enumerate(names):
            thr = [p["plans"][n]["events_per_s"] / 1e3 if n in p["plans"] else 0 for p in pts]
            mem = [p["plans"][n].get("peak_bytes", 0) / 2**20 if n in p["plans"] else 0
                   for p in pts]
            axes[0].bar(x + k * width, thr, width, label=n)
            axes[1].bar(x + k * width, mem, width, label=n)
        for ax, title in zip(axes, ("throughput (k events/s)", "peak traced memory (MiB)"),
                             strict=True):
            ax.set_xticks(x + 0.4 - width / 2, labels, rotation=30, ha="right", fontsize=8)
            ax.set_title(f"Fig. {fig}: {title}")
        axes[0].legend(fontsize=7)
        f.tight_layout()
        f.savefig(out / f"faem_fig{fig}.png", dpi=90)
        plt.close(f)


if __name__ == "__main__":
    main()
