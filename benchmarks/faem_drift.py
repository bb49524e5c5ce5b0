"""Adaptive switching of the tree plan (issue 12, item 4) on a stream whose event mix drifts.

    python -m benchmarks.faem_drift [--events N] [--window W] [--repeat R] [--out DIR]

The stream is FAEM's generator (``benchmarks.faem.generate``: Table 1's four track ids, the
rest noise) with a drift at the midpoint: in the first half the first two classes of the
pattern (147073, 56437) are ``--dense`` times Table 1's population and the last two
(189820, 531386) keep Table 1's; in the second half it is the other way round.
The query is FAEM's ``PATTERN 147073; 56437; 189820; 531386 WITHIN W EVENTS`` (no Kleene:
skip-till-any-match, so the NFA runs the same query with the same semantics), or with
``--kleene`` the Kleene on the last item under maximal-grouping (the NFA does not apply).

Measured in one process, plans alternating inside each repetition, CPU seconds
(``process_time``) of ``evaluate`` on the in-memory batch, median of ``--repeat``: the four
fixed shapes, ``tree:adaptive`` (starting from the shape chosen with the chooser's default
statistics), the plan the chooser takes with statistics from a sample of the stream (its first
100,000 events), and the NFA. Every plan must return the same matches (checked). For the
adaptive run it reports each switch: where (and how far after the drift), the shapes, the
migration's CPU time and the events it replayed.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.faem import SHAPES, TABLE1, TRACKS, generate
from kleene.api import analyze
from kleene.events import EventBatch
from kleene.plans import choose
from kleene.plans.registry import Stats, start
from kleene.runtime.engine import run_batch


def drifting(n: int, dense: float, seed: int = 7) -> EventBatch:
    """``n`` events; the last two classes of the pattern ``dense`` x Table 1 in the first
    half, the first two in the second half (positions and times continue across the drift).
    This direction keeps the window that spans the drift ordinary: its dense classes (the
    last two before, the first two after) are in the wrong order to match each other."""
    h = n // 2
    a = generate(h, 1.0, seed, populations=(*TABLE1[:2], TABLE1[2] * dense, TABLE1[3] * dense))
    b = generate(n - h, 1.0, seed + 1,
                 populations=(TABLE1[0] * dense, TABLE1[1] * dense, *TABLE1[2:]))
    tb = b.table
    from kleene.events.model import ID, TS

    shift = pa.compute.add(tb.column(TS), h * 1_000_000)
    ids = pa.array([str(i) for i in range(h, n)])
    tb = tb.set_column(tb.column_names.index(TS), TS, shift)
    tb = tb.set_column(tb.column_names.index(ID), ID, ids)
    return EventBatch(pa.concat_tables([a.table, tb]), a.time)


def drift_query(window: int, kleene: bool, sel: int | None) -> str:
    """FAEM's pattern; ``sel`` %: a condition between the first and the last class
    (``(a.g + d.g) % 100 < sel``), placed at the root in every shape: it thins the matches
    without changing any intermediate result."""
    items = [f"{t} e{t}" for t in TRACKS]
    if kleene:
        items[-1] = f"{TRACKS[-1]}+ e{TRACKS[-1]}[]"
    strat = " USING maximal-grouping" if kleene else ""
    a, d = f"e{TRACKS[0]}", f"e{TRACKS[-1]}"
    where = ""
    if sel is not None:
        where = (f" WHERE ({a}.g + {d}.g) % 100 < {sel}" if not kleene
                 else f" WHERE {a}.g < {sel}")
    return f"PATTERN SEQ({', '.join(items)}){where} WITHIN {window} EVENTS{strat}"


def _once(aq: Any, events: EventBatch, plan: str | None,
          stats: Stats | None) -> tuple[float, list[Any], Any]:
    cp = choose(aq, plan=plan, stats=stats)
    gc.collect()
    t0 = time.process_time()
    rt = start(cp, max_runs_per_partition=None, max_matches_per_call=None)
    ms = run_batch(rt, events)
    return time.process_time() - t0, ms, rt


def measure(events: EventBatch, q: str, repeat: int) -> dict[str, Any]:
    aq = analyze(q)
    sample = Stats.from_events(events)  # the first 100,000 events: before the drift
    plans: dict[str, tuple[str | None, Stats | None]] = {
        s: (f"tree:{s}", None) for s in SHAPES}
    plans["adaptive"] = ("tree:adaptive", None)
    chosen = choose(aq, stats=sample)
    label = chosen.choice.chosen
    if label == "tree":
        from kleene.plans.tree import shape_label

        label = f"tree:{shape_label(chosen.plan, sample)}"
    plans["chosen"] = (label, sample)
    nfa_ok = next(r.cost for r in chosen.choice.candidates if r.name == "nfa") is not None
    if nfa_ok:
        plans["nfa"] = ("nfa", None)
    times: dict[str, list[float]] = {k: [] for k in plans}
    ref: list[Any] | None = None
    switches: list[dict[str, Any]] = []
    for _ in range(repeat):
        for name, (plan, stats) in plans.items():
            dt, ms, rt = _once(aq, events, plan, stats)
            times[name].append(dt)
            key = [(m.bindings, m.start, m.end) for m in ms]
            if ref is None:
                ref = key
            elif key != ref:
                raise AssertionError(f"{name} disagrees: {len(key)} matches against "
                                     f"{len(ref)}")
            if name == "adaptive":
                switches = rt.matcher.switches
    med = {k: statistics.median(v) for k, v in times.items()}
    fixed = {k: v for k, v in med.items() if k in SHAPES}
    best_shape = min(fixed, key=lambda k: fixed[k])
    best_fixed = min((k for k in med if k != "adaptive"), key=lambda k: med[k])
    return {"query": q, "matches": len(ref or []), "chosen": label,
            "seconds": med, "all_seconds": times, "best_shape": best_shape,
            "best_fixed": best_fixed,
            "switches": [{k: v for k, v in s.items() if k != "estimates"}
                         | {"estimates": {a: round(b, 1) for a, b in s["estimates"].items()}}
                         for s in switches]}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--window", type=int, default=2000)
    ap.add_argument("--dense", type=float, default=16.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kleene", action="store_true")
    ap.add_argument("--sel", type=int, default=2,
                    help="selectivity %% of the condition between the first and the last class "
                         "(0: no condition)")
    ap.add_argument("--out", default=None, metavar="DIR")
    args = ap.parse_args(argv)
    events = drifting(args.events, args.dense)
    q = drift_query(args.window, args.kleene, args.sel or None)
    r = measure(events, q, args.repeat)
    r.update(events=args.events, window=args.window, dense=args.dense, drift_at=args.events // 2)
    print(f"{q}\n{args.events:,} events, drift at {args.events // 2:,}; {r['matches']:,} "
          f"matches; chosen with a sample of the stream: {r['chosen']}")
    base = r["seconds"].get("nfa")
    best = r["seconds"][r["best_fixed"]]
    print(f"  (CPU seconds, median of {args.repeat}; speed-up against the best plan that does "
          f"not switch: {r['best_fixed']}, and against the NFA)")
    for name, sec in r["seconds"].items():
        extra = f"  {base / sec:.2f}x NFA" if base else ""
        print(f"  {name:<9} {sec:7.3f} s  {args.events / sec / 1e3:8,.0f}k events/s  "
              f"{best / sec:.2f}x best fixed{extra}")
    for s in r["switches"]:
        mig = s["migrations"]
        print(f"  switch {s['from']} -> {s['to']} after position {s['after_gpos']:,} "
              f"({s['after_gpos'] - r['drift_at']:+,} from the drift); migration "
              f"{sum(m['seconds'] for m in mig) * 1e3:.1f} ms, {sum(m['replayed'] for m in mig)}"
              f" events replayed")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        name = "faem_drift_kleene" if args.kleene else "faem_drift"
        (out / f"{name}.json").write_text(json.dumps(r, indent=1, default=str))
        plot(r, out / f"{name}.png")


def plot(r: dict[str, Any], path: Path) -> None:
    """CPU seconds per plan (median, with every repetition as a dot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(r["seconds"])
    f, ax = plt.subplots(figsize=(7, 3.5))
    colors = ["tab:green" if n == "adaptive" else "tab:gray" if n == "nfa" else "tab:blue"
              for n in names]
    ax.bar(names, [r["seconds"][n] for n in names], color=colors)
    for i, n in enumerate(names):
        ax.plot([i] * len(r["all_seconds"][n]), r["all_seconds"][n], "k.", ms=3)
    ax.set_ylabel("CPU seconds (median)")
    ax.set_title(f"drifting stream, {r['events']:,} events (drift at {r['drift_at']:,}), "
                 f"window {r['window']:,}", fontsize=9)
    f.tight_layout()
    f.savefig(path, dpi=90)
    plt.close(f)


if __name__ == "__main__":
    main()
