"""The plan chooser between ``nfa``, ``chain`` and ``tree``: measure, fit, score (issue 13/12).

    PYTHONPATH=src python -m benchmarks.chooser measure --json /tmp/chooser.json [--small]
    PYTHONPATH=src python -m benchmarks.chooser fit /tmp/chooser.json
    PYTHONPATH=src python -m benchmarks.chooser score /tmp/chooser.json

``measure`` runs every point -- the LinkedCEP Experiment 1/2 queries on the ABC generator and on
Aarhus (benchmarks/linkedcep.py), the Kleene explosion (enumeration and ``count_only``), a few
ABC queries in ``count_only`` and FAEM's points without Kleene (benchmarks/faem.py, where the
NFA, the chain and the tree all run the same query) -- on each plan that supports it, plans
alternating inside each repetition, and keeps the median CPU seconds (``time.process_time``,
engine only). A plan that stops with CapacityError at the default caps costs infinity.
``fit`` reads those times with the cost terms of the current sources (expected live runs,
matches, start events, tree join work, from the same statistics the chooser gets) and fits
each plan's coefficients by least squares on the relative error (docs/benchmarks.md).
``score`` asks the chooser of the sources on ``PYTHONPATH`` which plan it takes at every point
and counts the points where that plan's measured time is within 10 % of the best plan's: run
it with main's sources for "before" and with this branch's for "after".
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch
from kleene.plans.registry import Stats, choose, start

from . import datasets, faem, linkedcep, queries

PLANS = ("nfa", "chain", "tree")


def _stats(d: dict[str, Any], count_only: bool) -> Stats:
    """The chooser's statistics of a point; ``count_only`` only where Stats has the field
    (main's sources before this branch do not)."""
    fields = Stats.__dataclass_fields__
    extra: dict[str, Any] = {}
    if "distinct" in fields:
        extra["distinct"] = d.get("distinct", {})
    if count_only and "count_only" in fields:
        extra["count_only"] = True
    return Stats(type_share=d["type_share"], events_per_second=d["events_per_second"],
                 selectivity=d["selectivity"], source=d["source"], **extra)


def _stats_dict(st: Stats) -> dict[str, Any]:
    return {"type_share": dict(st.type_share), "events_per_second": st.events_per_second,
            "selectivity": st.selectivity, "source": st.source,
            "distinct": dict(getattr(st, "distinct", {}))}


def run_once(q: str, events: EventBatch, plan: str, count_only: bool) -> float:
    """CPU seconds of one evaluation (inf on CapacityError)."""
    rt = start(analyze(q), plan=plan, max_matches_per_call=None, count_only=count_only)
    rt.count_placeholders = False
    t0 = time.process_time()
    try:
        rt.push(events)
        rt.close()
    except CapacityError:
        return float("inf")
    return time.process_time() - t0


def supported(q: str) -> list[str]:
    aq = analyze(q)
    out = []
    for p in PLANS:
        try:
            choose(aq, plan=p)
        except Exception:  # the plan does not take the query
            continue
        out.append(p)
    return out


def measure(args: argparse.Namespace) -> dict[str, Any]:
    small = args.small
    n_abc, n_abc2, n_aar = (800, 300, 6000) if small else (1500, 600, 18000)
    per_group2 = 3 if small else 10
    inputs: dict[str, EventBatch] = {"abc": linkedcep.abc_stream(n_abc),
                                     "abc2": linkedcep.abc_stream(n_abc2)}
    if datasets.aarhus_available() is None:
        inputs["aarhus"] = linkedcep.aarhus_stream(n_aar)
    csv = datasets.stock_csv(args.explosion_events)
    from kleene.events.readers import ReadOptions, read_events

    inputs["stock"], _ = read_events(str(csv), ReadOptions(time_col="ts", event_type="Stock",
                                                           id_col="id"))
    inputs["faem"] = faem.generate(args.faem_events)
    stats = {k: _stats_dict(Stats.from_events(v)) for k, v in inputs.items()}
    points: list[tuple[str, str, str, str, bool]] = []  # set, dataset, label, query, count
    unit = {"abc": "seconds", "aarhus": "minutes"}
    for ds in ("abc", "aarhus"):
        if ds not in inputs:
            continue
        groups = linkedcep.query_groups(ds)
        for g, group in enumerate(groups, 1):
            for i, q in enumerate(group):
                points.append((f"exp1 {ds}", ds, f"Q{g}.{i}", q.format(window=f"50 {unit[ds]}"),
                               False))
        for w in linkedcep.WINDOWS:
            for g in (1, 3):
                for i, q in enumerate(groups[g - 1][:per_group2]):
                    points.append((f"exp2 {ds}", "abc2" if ds == "abc" else ds,
                                   f"Q{g}.{i} W{w}", q.format(window=f"{w} {unit[ds]}"), False))
    for g in (1, 3, 5):
        for i, q in enumerate(linkedcep.query_groups("abc")[g - 1][:3]):
            points.append(("count abc", "abc", f"Q{g}.{i}", q.format(window="50 seconds"), True))
    for w in (5, 10, 20, 40, 60):
        q = queries.EXPLODE.format(window=f"{w} seconds")
        if w <= 20:
            points.append(("explosion enum", "stock", f"W{w}", q, False))
        points.append(("explosion count", "stock", f"W{w}", q, True))
    for w in (1000, 2500, 5000):
        points.append(("faem", "faem", f"W={w} none", faem.query(None, window=w), False))
    rows = []
    t_start = time.time()
    for si, (set_, ds, label, q, count) in enumerate(points):
        plans = supported(q)
        times: dict[str, list[float]] = {p: [] for p in plans}
        for _ in range(args.repeat):
            for p in plans:
                if times[p] and times[p][-1] == float("inf"):
                    continue  # stopped at its cap: once is enough
                times[p].append(run_once(q, inputs[ds], p, count))
        med = {p: statistics.median(v) for p, v in times.items()}
        rows.append({"set": set_, "dataset": ds, "label": label, "query": q,
                     "count_only": count, "events": len(inputs[ds]), "seconds": med})
        print(f"[{si + 1}/{len(points)} {time.time() - t_start:5.0f}s] {set_:16} {label:12} "
              + "  ".join(f"{p} {v:.4f}" for p, v in med.items()), flush=True)
    return {"date": time.strftime("%Y-%m-%d %H:%M"), "repeat": args.repeat, "small": small,
            "stats": stats, "points": rows}


# --------------------------------------------------------------------------------------------
# scoring and fitting
# --------------------------------------------------------------------------------------------


def chosen(row: dict[str, Any], stats: dict[str, Any]) -> tuple[str, dict[str, float]]:
    """The plan the chooser takes at a point, and its candidates' estimates."""
    cp = choose(analyze(row["query"]), stats=_stats(stats[row["dataset"]], row["count_only"]))
    return cp.choice.chosen, {c.name: c.cost for c in cp.choice.candidates
                              if c.cost is not None}


def score(data: dict[str, Any], tol: float = 0.10) -> list[tuple[str, int, int]]:
    """Per set: points where the chosen plan is within ``tol`` of the best measured plan."""
    out: dict[str, list[int]] = {}
    for row in data["points"]:
        sec = row["seconds"]
        best = min(sec.values())
        ch, _est = chosen(row, data["stats"])
        ok = ch in sec and sec[ch] <= (1 + tol) * best
        out.setdefault(row["set"], [0, 0])
        out[row["set"]][0] += ok
        out[row["set"]][1] += 1
    return [(k, v[0], v[1]) for k, v in out.items()]


def terms(row: dict[str, Any], stats: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The raw cost terms of each plan at a point (this branch's cost functions)."""
    from kleene.plans import chain, nfa, tree

    aq = analyze(row["query"])
    st = _stats(stats[row["dataset"]], row["count_only"])
    out: dict[str, dict[str, float]] = {}
    for p in row["seconds"]:
        plan = choose(aq, plan=p, stats=st).plan
        if p == "nfa":
            out[p] = nfa.linear_terms(plan, st)
        elif p == "chain":
            out[p] = chain.chain_terms(plan, st)
        else:
            shape = tree.best_shape(plan, st)
            out[p] = {"work": tree.shape_work(plan, shape, st),
                      "events": min(sum(st.share(t) for t in tree._leaf_types(shape.root)),
                                    1.0)}
    return out


def fit(data: dict[str, Any]) -> None:
    """Each plan's coefficients (µs per unit of each cost term, per output mode), fitted by
    least squares on the log of the measured µs per event (the relative error, symmetric),
    coefficients >= 0; prints them and the unit conversion (the NFA's per-event term is the
    chooser's unit)."""
    import numpy as np
    from scipy.optimize import least_squares

    models: dict[tuple[str, bool], tuple[list[str], Callable[[dict[str, float]], list[float]]]]
    models = {
        ("nfa", False): (["events", "runs", "matches"],
                         lambda t: [t["events"], t["runs"], t["matches"]]),
        ("nfa", True): (["events", "runs", "matches"],
                        lambda t: [t["events"], t["runs"], t["matches"]]),
        ("chain", False): (["events", "matches"], lambda t: [t["events"], t["matches"]]),
        ("chain", True): (["events", "count_work"], lambda t: [t["events"], t["count_work"]]),
        ("tree", False): (["events", "work"], lambda t: [t["events"], t["work"]]),
    }
    xs: dict[tuple[str, bool], list[list[float]]] = {k: [] for k in models}
    ys: dict[tuple[str, bool], list[float]] = {k: [] for k in models}
    for row in data["points"]:
        tt = terms(row, data["stats"])
        for p, sec in row["seconds"].items():
            key = (p, row["count_only"] and p != "tree")
            if key not in models or sec == float("inf") or sec <= 0:
                continue
            xs[key].append(models[key][1](tt[p]))
            ys[key].append(1e6 * sec / row["events"])
    unit = None
    for key, (names, _f) in models.items():
        if not ys[key]:
            continue
        a = np.array(xs[key])
        y = np.log(np.array(ys[key]))

        def resid(c: Any, a: Any = a, y: Any = y) -> Any:
            return np.log(np.maximum(a @ c, 1e-12)) - y

        c0 = np.full(a.shape[1], 1e-3)
        c0[0] = float(np.exp(np.median(y)))
        coef = least_squares(resid, c0, bounds=(0, np.inf)).x
        err = float(np.median(np.abs(np.exp(resid(coef)) - 1)))
        if key == ("nfa", False):
            unit = coef[0]
        print(f"{key[0]:5} {'count' if key[1] else 'enum '} n={len(y):3}  "
              + "  ".join(f"{n}={c:.4g}" for n, c in zip(names, coef, strict=True))
              + f"  µs; median relative error {err:.2f}"
              + ("; in the unit: " + "  ".join(f"{n}={c / unit:.4g}" for n, c in
                                                 zip(names, coef, strict=True))
                 if unit else ""))


def faem_rescore(folder: Path) -> None:
    """FAEM's figures (the ``faem_fig*.json`` of ``benchmarks.faem --out``) scored again with
    the chooser of the sources on ``PYTHONPATH``: the statistics are regenerated as
    benchmarks/faem.py makes them, the stored times are reused (the chooser's plan's own
    column; the stored ``chosen`` runs only where it picks the plan recorded there)."""
    from kleene.plans.tree import best_shape

    total = [0, 0, 0]
    for f in sorted(folder.glob("faem_fig*.json"), key=lambda p: int(p.stem[8:])):
        data = json.loads(f.read_text())
        fig = f.stem[8:]
        n = data["events"]
        ok = unknown = 0
        for pt in data["points"]:
            label = pt["label"]
            pops = faem.TABLE1
            if fig == "8":
                pops = (*faem.TABLE1[:3], faem.TABLE1[3] * int(label[1:]))
            # the statistics come from the whole stream (faem.py samples 100,000 events)
            st = Stats.from_events(faem.generate(max(n, 100_000) if fig != "11" else 300_000,
                                                 data["scale"], populations=pops))
            st = Stats(st.type_share, st.events_per_second,
                       0.5 if "%" not in label else int(label[:-1]) / 100, st.default_share,
                       st.source)
            cp = choose(analyze(pt["query"]), stats=st)
            name = cp.choice.chosen
            if name == "tree":
                name = best_shape(cp.plan, st).name
            best = min(r["seconds"] for k, r in pt["plans"].items() if k != "chosen")
            if name in pt["plans"] and name != "chosen":
                sec = pt["plans"][name]["seconds"]
            elif name == pt["chosen"]:
                sec = pt["plans"]["chosen"]["seconds"]
            else:
                unknown += 1
                print(f"  fig {fig} {label}: chooses {name}, not measured there")
                continue
            ok += sec <= 1.1 * best
        print(f"fig {fig}: chosen within 10% of the best at {ok}/{len(data['points'])} "
              f"points ({unknown} not measured)")
        total[0] += ok
        total[1] += len(data["points"])
        total[2] += unknown
    print(f"all: {total[0]}/{total[1]} ({total[2]} not measured)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("measure", "fit", "score", "faem-rescore"))
    ap.add_argument("path", nargs="?", default=None, help="the JSON of a measure run")
    ap.add_argument("--json", default=None, help="measure: write the results here")
    ap.add_argument("--small", action="store_true", help="small sizes (a loaded machine)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-keys", action="store_true",
                    help="score: without the key counts (Stats.distinct), an ablation")
    ap.add_argument("--explosion-events", type=int, default=3000)
    ap.add_argument("--faem-events", type=int, default=60_000)
    args = ap.parse_args(argv)
    if args.mode == "measure":
        data = measure(args)
        if args.json:
            Path(args.json).write_text(json.dumps(data, indent=1))
        return 0
    if args.path is None:
        ap.error(f"{args.mode} needs the JSON of a measure run (faem-rescore: a folder)")
    if args.mode == "faem-rescore":
        faem_rescore(Path(args.path))
        return 0
    data = json.loads(Path(args.path).read_text())
    if args.no_keys:
        for d in data["stats"].values():
            d["distinct"] = {}
    if args.mode == "fit":
        fit(data)
    else:
        total = [0, 0]
        for set_, ok, n in score(data):
            print(f"{set_:16} chosen within 10% of the best: {ok}/{n}")
            total[0] += ok
            total[1] += n
        print(f"{'all':16} chosen within 10% of the best: {total[0]}/{total[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
