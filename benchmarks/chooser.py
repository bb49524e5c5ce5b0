"""The plan chooser between ``nfa``, ``chain`` and ``tree``: measure, fit, score (issue 13/12).

    PYTHONPATH=src python -m benchmarks.chooser measure --json /tmp/chooser.json [--small]
    PYTHONPATH=src python -m benchmarks.chooser fit /tmp/chooser.json
    PYTHONPATH=src python -m benchmarks.chooser score /tmp/chooser.json
    PYTHONPATH=src python -m benchmarks.chooser fit --input /tmp/chooser.json FAEM_DIR ...
    PYTHONPATH=src python -m benchmarks.chooser faem-rescore FAEM_DIR [--verbose] [--write]
    PYTHONPATH=src python -m benchmarks.chooser refit-seq /tmp/chooser.json
    PYTHONPATH=src python -m benchmarks.chooser refit-fwd [--group G] /tmp/chooser.json ...
    PYTHONPATH=src python -m benchmarks.chooser score --verbose /tmp/chooser.json
    PYTHONPATH=src python -m benchmarks.chooser faem-remeasure FAEM_DIR OUT_DIR [--plans nfa,chain]

``measure`` runs every point -- the LinkedCEP Experiment 1/2 queries on the ABC generator and on
Aarhus (benchmarks/linkedcep.py), the Kleene explosion (enumeration and ``count_only``), a few
ABC queries in ``count_only`` and FAEM's points without Kleene (benchmarks/faem.py, where the
NFA, the chain and the tree all run the same query), SEQs of singles on the stock and Aarhus
streams, and the chain's general join, forward (:data:`GENERAL_SETS`: a condition per Kleene
element against the first event, with and without RETURN, and singles with conditions
between them, on the stock, ABC and Aarhus streams; and the walk's ``*`` closures and two
lists, sharing a type or not, on the stock and ABC streams; and :data:`ENDS_SETS`, the walk's
``*`` first and last states and NOTs; NFA and chain only) -- on each plan that supports it,
plans alternating inside each repetition, and keeps the median CPU seconds
(``time.process_time``, engine only). A plan that stops with CapacityError at the default
caps costs infinity.
``fit`` reads those times with the cost terms of the current sources (expected live runs,
matches, start events, tree join work, from the same statistics the chooser gets) and fits
each plan's coefficients by least squares on the relative error (docs/benchmarks.md).
``score`` asks the chooser of the sources on ``PYTHONPATH`` which plan it takes at every point
and counts the points where that plan's measured time is within 10 % of the best plan's: run
it with main's sources for "before" and with this branch's for "after". ``fit`` also takes
folders of FAEM's figures (``benchmarks.faem --out``): every tree shape, the NFA and the chain
plan at every point are samples (``--input`` adds a term of one per input event to every
plan, to see the runtime's own per-event work). ``faem-rescore`` scores FAEM's figures with
the sources' chooser: within 10 %, Spearman per figure, the chosen plan against the NFA.
``refit-seq`` refits the chain's SEQ-of-singles constants on the NFA's scale (session 10:
the chain's generated per-event loop); ``score --verbose`` prints every point's choice;
``faem-remeasure`` measures some plans of FAEM's stored figures again (the others' times kept).
``refit-fwd`` does what ``refit-seq`` does for the chain's general join, forward
(``CHAIN_FWD_EVENT`` / ``CHAIN_FWD_MATCH``: the points of :data:`GENERAL_SETS`, session 10);
``refit-fwd --group lead|last|both|not`` for the pairs of session 12's walk shapes
(:data:`FWD_GROUPS`, :func:`walk_group`: the points of :data:`ENDS_SETS`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch
from kleene.plans.registry import Stats, choose, start

from . import datasets, faem, linkedcep, queries

PLANS = ("nfa", "chain", "tree")
SEQ2 = "PATTERN SEQ(Stock a, Stock b) WHERE a.price > 50 PARTITION BY symbol WITHIN {window}"
SEQ3 = "PATTERN SEQ(Stock a, Stock b, Stock c) PARTITION BY symbol WITHIN {window}"
"""The stock stream's SEQ of three singles (benchmarks.linkedcep's ``sink3`` shape): up to
~70 matches per event at 60 s, where the LinkedCEP points make at most a few."""
SEQ3X = ("PATTERN SEQ(Stock a, Stock b, Stock c) WHERE b.price > a.price AND c.price < b.price "
         "PARTITION BY symbol WITHIN {window}")
"""Three stock singles with conditions between them: not the generated SEQ join (the storage
does not decide ``b.price > a.price``) but the chain's general join, forward."""
GEN_ABC = "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > a.x AND c.y < a.y WITHIN {window}"
"""The general join on the ABC stream (one unpartitioned stream): a condition per list element
against the first event, and one between the first and the last."""
GEN_ABC_RETURN = GEN_ABC + " RETURN a.x AS ax, count(b) AS nb"
SEQ3X_ABC = "PATTERN SEQ(A a, B b, C c) WHERE b.x > a.x AND c.y < a.y WITHIN {window}"
GEN_TRAFFIC = ("PATTERN SEQ(Traffic a, Traffic+ b[], Traffic c) WHERE b[i].avgSpeed < a.avgSpeed "
               "AND c.avgSpeed > a.avgSpeed PARTITION BY REPORT_ID WITHIN {window}")
"""Aarhus: a slowdown on one road segment (every reading after ``a`` slower than ``a``) ended
by a faster reading; one observation per segment every 5 minutes."""
GEN_ABC_STAR = GEN_ABC.replace("B+ b[]", "B* b[]")
"""A ``*`` closure on the ABC stream: ``c``'s sources are ``a`` and the list."""
GEN_ABC_TWO = ("PATTERN SEQ(A a, B+ b[], C+ c[], A d) WHERE b[i].x > a.x AND c[i].y < a.y "
               "AND d.x > a.x WITHIN {window}")
"""Two Kleene lists of different types on the ABC stream (no predecessor partitions share a
type); the stock stream's ``linkedcep.GENERAL_TWO`` is the shared-type walk."""
GEN_ABC_TWO_SHARED = ("PATTERN SEQ(A a, B+ b[], B+ c[], C d) WHERE b[i].x > a.x "
                      "AND c[i].y < a.y AND d.x > a.x WITHIN {window}")
"""Two Kleene lists of one type on the ABC stream: the walk over position sequences."""
GEN_STAR_FIRST = ("PATTERN SEQ(Stock* a[], Stock b, Stock c) WHERE a[i].price > b.price "
                  "AND c.price < b.price PARTITION BY symbol WITHIN {window}")
"""A ``*`` first state on the stock stream (one type): a match starts in ``a`` or in ``b``."""
GEN_ABC_STAR_FIRST = ("PATTERN SEQ(A* a[], B b, C c) WHERE a[i].x > b.x AND c.y < b.y "
                      "WITHIN {window}")
"""A ``*`` first state on the ABC stream (three types)."""
GEN_ABC_STAR_LAST = ("PATTERN SEQ(A a, B+ b[], C* c[]) WHERE b[i].x > a.x AND c[i].y < a.y "
                     "WITHIN {window}")
"""A ``*`` last state of another type than the list before it: matches end in ``b`` or ``c``
(the stock stream's one-type shape: ``linkedcep.GENERAL_STAR_LAST``)."""
GEN_TWO_STARS = ("PATTERN SEQ(Stock* a[], Stock* b[], Stock c) WHERE a[i].price > c.price "
                 "AND b[i].price < c.price PARTITION BY symbol WITHIN {window}")
"""Two leading ``*`` states (a match starts in any of the three)."""
GEN_ABC_TWO_STARS = ("PATTERN SEQ(A* a[], B* b[], C c) WHERE a[i].x > c.x AND b[i].y < c.y "
                     "WITHIN {window}")
GEN_STAR_BOTH = ("PATTERN SEQ(Stock* a[], Stock b, Stock* c[]) WHERE a[i].price > b.price "
                 "AND c[i].price < b.price PARTITION BY symbol WITHIN {window}")
"""A ``*`` first state and a ``*`` last state."""
GEN_ABC_STAR_BOTH = ("PATTERN SEQ(A* a[], B b, C* c[]) WHERE a[i].x > b.x AND c[i].y < b.y "
                     "WITHIN {window}")
GEN_NOT_LATE = linkedcep.GENERAL_NOT.replace("n.price < a.price", "n.price < b[1].price")
"""``linkedcep.GENERAL_NOT`` (a NOT between the list and ``c`` that the walk decides at the
step that fixes its interval) with the NOT's predicate reading the list: tested on each
complete match the walk makes."""
GEN_ABC_NOT = ("PATTERN SEQ(A a, B+ b[], NOT A n, C c) WHERE b[i].x > a.x AND n.x > a.x "
               "AND c.y < a.y WITHIN {window}")
"""A NOT the walk decides (one event, bound on both sides, its predicate over ``a``)."""
GEN_ABC_NOT_LATE = GEN_ABC_NOT.replace("n.x > a.x", "n.x > b[1].x")
"""The same NOT reading the list: tested late."""
GENERAL_SETS = ("general stock", "general return stock", "seq3x stock", "general abc",
                "general return abc", "seq3x abc", "general traffic", "star stock",
                "two stock", "star abc", "two abc", "two shared abc")
"""The chain's general join, forward (``chain_fwd``; session 10): measured on the NFA and the
chain only -- the tree's estimate there is 8-500x the NFA's, and it runs 15 s or stops at its
cap where the others take 0.2 s."""
ENDS_SETS = ("star first stock", "star first abc", "star last stock", "star last abc",
             "two stars stock", "two stars abc", "star both stock", "star both abc",
             "not early stock", "not early abc", "not late stock", "not late abc")
"""The walk's shapes of session 11 (session 12): a ``*`` first or last state, two leading
``*`` states, ``*`` first and last, a NOT the walk decides early ("not early") and one it
tests on each complete match ("not late"), on the stock and ABC streams; the NFA and the
chain only, as :data:`GENERAL_SETS` (the tree's estimate is 8x to 10^6x the NFA's there, and
it does not take a NOT)."""


def _traffic(n: int) -> EventBatch:
    """The first ``n`` Aarhus observations as ``Traffic`` events (workload 3's columns)."""
    import gzip

    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from kleene.events.model import ID, TS, TYPE, TimeInfo

    with gzip.open(datasets.AARHUS_DIR / datasets.AARHUS_FILES[0], "rb") as f:
        head = b"".join(f.readline() for _ in range(n + 1))
    t = pacsv.read_csv(pa.py_buffer(head))
    ts = t.column("TIMESTAMP").cast(pa.timestamp("us")).cast(pa.int64())
    cols: dict[str, Any] = {ID: pa.array(np.arange(t.num_rows)), TS: ts,
                            TYPE: pa.array(["Traffic"] * t.num_rows)}
    for c in ("REPORT_ID", "avgSpeed", "vehicleCount"):
        cols[c] = t.column(c)
    return EventBatch(pa.table(cols), TimeInfo())


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
        inputs["traffic"] = _traffic(n_aar)
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
    for w in (5, 10, 20, 30, 60):  # session 10: a SEQ of singles with many matches per event
        points.append(("seq3 stock", "stock", f"W{w}", SEQ3.format(window=f"{w} seconds"),
                       False))
    for w in (2, 5, 10, 20):  # two singles, a filter on the first
        points.append(("seq2 stock", "stock", f"W{w}", SEQ2.format(window=f"{w} seconds"),
                       False))
    if "traffic" in inputs:  # workload 3: two singles, selective filters, few matches
        for w in (10, 30, 60):
            points.append(("selective", "traffic", f"W{w}",
                           queries.SELECTIVE.replace("30 minutes", f"{w} minutes"), False))
    gen: list[tuple[str, str, str, list[str]]] = [  # session 10: the general join, forward
        ("general stock", "stock", linkedcep.GENERAL, ["5", "10", "20", "30", "40", "50"]),
        ("general return stock", "stock", linkedcep.GENERAL_RETURN, ["10", "20", "30", "40"]),
        ("seq3x stock", "stock", SEQ3X, ["5", "10", "20", "40"]),
        ("general abc", "abc2", GEN_ABC, ["10", "20", "30", "40"]),
        ("general return abc", "abc2", GEN_ABC_RETURN, ["20", "30"]),
        ("seq3x abc", "abc2", SEQ3X_ABC, ["20", "50", "100"]),
        # session 10, later (chooser3): the walk's `*` closures and two lists
        ("star stock", "stock", linkedcep.GENERAL_STAR, ["10", "20", "30", "40"]),
        ("two stock", "stock", linkedcep.GENERAL_TWO, ["10", "20", "30", "40"]),
        ("star abc", "abc2", GEN_ABC_STAR, ["10", "20", "30"]),
        ("two abc", "abc2", GEN_ABC_TWO, ["10", "20", "30"]),  # 40 s: both stop at a cap
        ("two shared abc", "abc2", GEN_ABC_TWO_SHARED, ["10", "20", "30"]),
        # session 12: the walk's `*` ends and NOTs (ENDS_SETS; windows up to where the
        # chain's run takes ~10 s; "cap": the NFA stops at its cap there, as at star last
        # stock 40 s and not late abc 40 s, where the chain takes 20-32 s: 3.5 min of the
        # set's 11)
        ("star first stock", "stock", GEN_STAR_FIRST, ["10", "20", "30"]),
        ("star first abc", "abc2", GEN_ABC_STAR_FIRST, ["5", "10", "15", "20"]),  # 20: cap
        ("star last stock", "stock", linkedcep.GENERAL_STAR_LAST, ["10", "20", "30", "40"]),
        ("star last abc", "abc2", GEN_ABC_STAR_LAST, ["10", "20", "30"]),
        ("two stars stock", "stock", GEN_TWO_STARS, ["5", "10", "15", "20"]),  # 20: cap
        ("two stars abc", "abc2", GEN_ABC_TWO_STARS, ["5", "10", "15"]),
        ("star both stock", "stock", GEN_STAR_BOTH, ["5", "10", "15", "20"]),
        ("star both abc", "abc2", GEN_ABC_STAR_BOTH, ["5", "10", "15", "20"]),  # 20: cap
        ("not early stock", "stock", linkedcep.GENERAL_NOT, ["10", "20", "40"]),
        ("not early abc", "abc2", GEN_ABC_NOT, ["10", "20", "30", "40"]),  # 40: cap
        ("not late stock", "stock", GEN_NOT_LATE, ["10", "20", "40"]),
        ("not late abc", "abc2", GEN_ABC_NOT_LATE, ["10", "20", "30", "40"]),
    ]
    if "traffic" in inputs:
        gen.append(("general traffic", "traffic", GEN_TRAFFIC, ["15", "30", "45", "60"]))
    for set_, ds, tmpl, ws in gen:
        unit_ = "minutes" if ds == "traffic" else "seconds"
        for w in ws:
            points.append((set_, ds, f"W{w}", tmpl.format(window=f"{w} {unit_}"), False))
    if args.only:
        points = [p for p in points if p[0] in args.only.split(",")]
    rows = []
    t_start = time.time()
    for si, (set_, ds, label, q, count) in enumerate(points):
        plans = [p for p in supported(q)
                 if p != "tree" or set_ not in GENERAL_SETS + ENDS_SETS]
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


def score(data: dict[str, Any], tol: float = 0.10,
          verbose: bool = False) -> list[tuple[str, int, int]]:
    """Per set: points where the chosen plan is within ``tol`` of the best measured plan.
    ``verbose``: one line per point -- the chosen plan, the best measured plan, the chosen
    plan's time over the best's, and the estimates (``OFF`` where it chose wrong)."""
    out: dict[str, list[int]] = {}
    for row in data["points"]:
        sec = row["seconds"]
        best_plan = min(sec, key=lambda p: sec[p])
        best = sec[best_plan]
        ch, est = chosen(row, data["stats"])
        ok = ch in sec and sec[ch] <= (1 + tol) * best
        out.setdefault(row["set"], [0, 0])
        out[row["set"]][0] += ok
        out[row["set"]][1] += 1
        if verbose:
            ratio = sec[ch] / best if ch in sec and best > 0 else float("nan")
            print(f"  {row['set']:16} {row['label']:12} chose {ch:5} best {best_plan:5} "
                  f"{ratio:6.2f}x {'ok ' if ok else 'OFF'}  measured "
                  + " ".join(f"{p} {1e3 * v:.1f}ms" for p, v in sec.items())
                  + "  estimates " + " ".join(f"{p} {v:.3g}" for p, v in est.items()))
    return [(k, v[0], v[1]) for k, v in out.items()]


def _is_seq(row: dict[str, Any], stats: dict[str, Any]) -> bool:
    """Does the chain plan run the point with its generated SEQ-of-singles join and loop
    (``chain.seq_shape``, measured statistics, enumerating)?"""
    from kleene.plans.chain import seq_shape

    st = _stats(stats[row["dataset"]], row["count_only"])
    if row["count_only"] or st.source == "defaults":
        return False
    return bool(seq_shape(choose(analyze(row["query"]), plan="chain", stats=st).plan))


def walk_group(row: dict[str, Any], stats: dict[str, Any]) -> tuple[str, bool] | None:
    """How the chain plan runs the point, asked of the compiled matcher itself (not of the
    chooser's plan-level test, ``chain.fwd_group``; tests/runtime/test_chooser.py checks that
    they agree): None unless its general join walks forward through a Kleene state (the
    matcher has a :class:`~kleene.plans.chain_fwd.FwdJoin`; measured statistics,
    enumerating); else the group whose constants ``chain_cost`` uses -- ``"last"`` (a ``*``
    last state: the matcher has walks of the matches that end before it), ``"lead"`` (a
    match may start in the second state: a ``*`` first state), ``"star"`` (one ``*`` closure
    the only Kleene state), ``"fwd"`` (one list, or predecessor partitions sharing a type)
    or ``"rev"`` (two or more lists, no type shared) -- and whether a NOT is tested on each
    complete match (the walk's ``neg_late``) rather than decided during the walk."""
    from kleene.plans.chain import kleene_plan_shape, seq_shape

    st = _stats(stats[row["dataset"]], row["count_only"])
    if row["count_only"] or st.source == "defaults":
        return None
    rt = start(analyze(row["query"]), plan="chain", stats=st)
    plan = rt.compiled.plan
    if seq_shape(plan) or kleene_plan_shape(plan):
        return None
    from kleene.plans.chain_fwd import FwdJoin

    m = rt.matcher
    fwd = getattr(m, "fwd", None)
    kleene = [c for c in plan.components if c.kind.name == "KLEENE"]
    if fwd is None or not kleene:
        return None
    late = getattr(fwd, "neg_late", None) is not None
    if getattr(m, "fwd_ends", None):
        return ("both" if m.starts_at[1] else "last"), late
    if m.starts_at[1]:
        return "lead", late
    if len(kleene) == 1:
        return ("star" if kleene[0].min == 0 else "fwd"), late
    return ("fwd" if FwdJoin._shared(plan, m) else "rev"), late


def _in_group(group: str) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    """``refit-fwd --group``'s points: those priced with the group's pair and no NOT tested
    late; ``"not"``: a NOT tested late on a walk of group ``"fwd"`` (its per-match term is
    ``CHAIN_FWD_MATCH`` + ``CHAIN_FWD_NOT_MATCH``)."""
    def pred(row: dict[str, Any], stats: dict[str, Any]) -> bool:
        return walk_group(row, stats) == (("fwd", True) if group == "not" else (group, False))
    return pred


def _is_fwd(row: dict[str, Any], stats: dict[str, Any]) -> bool:
    """Is the point priced with ``CHAIN_FWD_EVENT`` / ``CHAIN_FWD_MATCH`` (:func:`walk_group`
    ``"fwd"``, no NOT tested late)?"""
    return _in_group("fwd")(row, stats)


FWD_GROUPS: dict[str, tuple[tuple[str, str], tuple[float, float, float, float, float]]] = {
    "fwd": (("CHAIN_FWD_EVENT", "CHAIN_FWD_MATCH"), (0.5, 8.0, 0.05, 3.0, 0.05)),
    "star": (("CHAIN_FWD_STAR_EVENT", "CHAIN_FWD_STAR_MATCH"), (0.25, 4.0, 0.05, 3.0, 0.05)),
    "lead": (("CHAIN_FWD_LEAD_EVENT", "CHAIN_FWD_LEAD_MATCH"), (0.25, 4.0, 0.05, 3.0, 0.05)),
    "last": (("CHAIN_FWD_LAST_EVENT", "CHAIN_FWD_LAST_MATCH"), (0.5, 16.0, 0.05, 3.0, 0.05)),
    "both": (("CHAIN_FWD_BOTH_EVENT", "CHAIN_FWD_BOTH_MATCH"), (0.25, 4.0, 0.05, 4.0, 0.05)),
    "not": (("CHAIN_FWD_EVENT", "CHAIN_FWD_MATCH + CHAIN_FWD_NOT_MATCH"),
            (8.0, 8.0, 0.5, 4.0, 0.01)),
}
"""``refit-fwd --group``: the constants' names and the grid of :func:`seq_region` (per event
from, to; per match from, to; step). ``"not"`` holds the per-event constant at
``CHAIN_FWD_EVENT`` (8.0) and grids the whole per-match term."""


def _fit2(a: Any, ly: Any) -> Any:
    """Non-negative ``c`` minimising the soft-l1 loss of ``log(a @ c) - ly`` for two terms
    (numpy only: scipy is not in the project's environment). A coarse log grid, then three
    finer ones around the best point; a zero coefficient is one grid value."""
    import numpy as np

    def loss(c0: Any, c1: Any) -> Any:
        pred = np.log(np.maximum(np.multiply.outer(c0, a[:, 0])
                                 + np.multiply.outer(c1, a[:, 1]), 1e-300))
        r = pred - ly
        return (2 * (np.sqrt(1 + r * r) - 1)).sum(axis=-1)

    lo, hi = np.full(2, -6.0), np.full(2, 3.0)  # log10 bounds of each coefficient
    best = np.zeros(2)
    for _ in range(4):
        g0 = np.concatenate([[0.0], 10 ** np.linspace(lo[0], hi[0], 121)])
        g1 = np.concatenate([[0.0], 10 ** np.linspace(lo[1], hi[1], 121)])
        ll = loss(g0[:, None], g1[None, :])
        i, j = np.unravel_index(int(np.argmin(ll)), ll.shape)
        best = np.array([g0[i], g1[j]])
        step = (hi - lo) / 120 * 3
        with np.errstate(divide="ignore"):
            centre = np.log10(np.maximum(best, 1e-6))
        lo, hi = centre - step, centre + step
    return best


def refit_seq(data: dict[str, Any], pred: Callable[[dict[str, Any], dict[str, Any]], bool]
              = _is_seq, names: tuple[str, str] = ("CHAIN_SEQ_EVENT", "CHAIN_SEQ_MATCH")
              ) -> tuple[float, float]:
    """The chain's constants for a SEQ of single variables (``CHAIN_SEQ_EVENT``,
    ``CHAIN_SEQ_MATCH``), refitted on a ``measure`` run, on the NFA's scale as the chooser
    compares them: at each point where both plans ran, the chain's target is the NFA's
    *estimate* times the measured chain/NFA time ratio, and ``events x a + matches x b``
    (the chain's terms) is fitted to it by least squares on the log error (``soft_l1``, a,
    b >= 0; numpy only). So a point where the NFA's estimate is off by some factor still asks
    the chain for the measured ratio -- the only thing the choice reads. Also prints the plain fit
    (the chain's µs per event over the NFA's µs per unit of its estimate, one factor for
    the whole run) for comparison."""
    import numpy as np

    from kleene.plans import chain

    xs: list[list[float]] = []
    ratio_y: list[float] = []
    us_y: list[float] = []
    nfa_unit: list[float] = []
    for row in data["points"]:
        sec = row["seconds"]
        if not {"nfa", "chain"} <= set(sec) or not pred(row, data["stats"]):
            continue
        if not (0 < sec["nfa"] < float("inf") and 0 < sec["chain"] < float("inf")):
            continue
        st = _stats(data["stats"][row["dataset"]], False)
        aq = analyze(row["query"])
        t = chain.chain_terms(choose(aq, plan="chain", stats=st).plan, st)
        est = chosen(row, data["stats"])[1]["nfa"]
        xs.append([t["events"], t["matches"]])
        ratio_y.append(est * sec["chain"] / sec["nfa"])
        us = 1e6 * sec["chain"] / row["events"]
        us_y.append(us)
        nfa_unit.append(1e6 * sec["nfa"] / row["events"] / est)
    a = np.array(xs)
    unit = float(np.exp(np.median(np.log(nfa_unit))))
    out: dict[str, list[float]] = {}
    for name, y in (("ratio", np.array(ratio_y)), ("plain", np.array(us_y) / unit)):
        coef = _fit2(a, np.log(y))
        err = float(np.median(np.abs(a @ coef / y - 1)))
        out[name] = [float(c) for c in coef]
        print(f"chain ({name} fit) n={len(y)}  {names[0]}={coef[0]:.3g}  "
              f"{names[1]}={coef[1]:.3g}  (units); median relative error {err:.2f}")
    print(f"the NFA's unit on this run: {unit:.3g} µs per unit of its estimate (median)")
    return out["ratio"][0], out["ratio"][1]


def seq_region(data: dict[str, Any], tol: float = 0.10,
               pred: Callable[[dict[str, Any], dict[str, Any]], bool] = _is_seq,
               grid: tuple[float, float, float, float, float] = (0.6, 2.4, 0.3, 2.0, 0.05)
               ) -> dict[tuple[float, float], int]:
    """The chooser's score (points within ``tol`` of the best plan, every point of the run)
    for each pair of the chain's SEQ constants on a grid (per event 0.60-2.40, per match
    0.30-2.00, steps of 0.05), the other plans' estimates as the sources make them; prints
    the best score and, per event constant, the range of match constants that reach it."""
    import numpy as np

    from kleene.plans import chain
    from kleene.plans.registry import REGISTRY

    # ties: registry order, as the chooser breaks them ("kleene.plans.nfa:PLAN" -> "nfa")
    order = [r.split(":")[0].rsplit(".", 1)[1] for r in REGISTRY]
    pts: list[tuple[dict[str, float], float, float | None, float | None, Any]] = []
    for row in data["points"]:
        sec = row["seconds"]
        ch, est = chosen(row, data["stats"])
        if pred(row, data["stats"]):
            st = _stats(data["stats"][row["dataset"]], False)
            t = chain.chain_terms(choose(analyze(row["query"]), plan="chain", stats=st).plan,
                                  st)
            pts.append((sec, min(sec.values()), t["events"], t["matches"],
                        {k: v for k, v in est.items() if k != "chain"}))
        else:
            pts.append((sec, min(sec.values()), None, None, ch))
    a0, a1, b0, b1, step = grid
    grid_a = np.round(np.arange(a0, a1 + step / 2, step), 3)
    grid_b = np.round(np.arange(b0, b1 + step / 2, step), 3)
    res: dict[tuple[float, float], int] = {}
    for a in grid_a:
        for b in grid_b:
            ok = 0
            lost = 0.0
            for sec, best, e, m, other in pts:
                pick = _pick(other, e, m, float(a), float(b), order)
                ok += pick in sec and sec[pick] <= (1 + tol) * best
                lost += _loss(sec, pick, best)
            res[(float(a), float(b))] = ok
            LOST[(float(a), float(b))] = LOST.get((float(a), float(b)), 0.0) + lost
    top = max(res.values())
    print(f"score over the grid: best {top}/{len(pts)}; where it is reached (per match range; "
          "CPU ms lost against the best plan, summed over the points, at its ends):")
    for a in grid_a:
        bs = [b for b in grid_b if res[(float(a), float(b))] == top]
        if bs:
            lo, hi = (float(a), float(min(bs))), (float(a), float(max(bs)))
            print(f"  per event {a:.2f}: per match {min(bs):.2f}-{max(bs):.2f} "
                  f"(lost {1e3 * _lost(pts, *lo, order):.1f} / "
                  f"{1e3 * _lost(pts, *hi, order):.1f} ms)")
    return res


LOST: dict[tuple[float, float], float] = {}
"""CPU seconds lost against the best plan per pair of constants, summed over every
``seq_region`` call of the process (several runs: ``refit-seq A.json B.json ...``)."""


def _lost(pts: list[Any], a: float, b: float, order: list[str]) -> float:
    lost = 0.0
    for sec, best, e, m, other in pts:
        lost += _loss(sec, _pick(other, e, m, a, b, order), best)
    return lost


def _pick(other: Any, e: float | None, m: float | None, a: float, b: float,
          order: list[str]) -> Any:
    """The chooser's pick at one point with the chain's constants ``a`` (per event) and ``b``
    (per match): ``other`` (the fixed pick) where the chain's terms do not apply, else the
    cheapest of ``other``'s estimates and the chain's (ties in ``order``)."""
    if e is None or m is None:
        return other
    c = {**other, "chain": a * e + b * m}
    return min(c, key=lambda k: (c[k], order.index(k) if k in order else 99))


def _loss(sec: dict[str, float], pick: str, best: float) -> float:
    """CPU seconds the pick loses against the best plan; a pick that stops at its cap (inf)
    is a miss in the score and adds the best plan's own time here (finite, comparable)."""
    if best == float("inf"):
        return 0.0
    got = sec.get(pick, best)
    return best if got == float("inf") else got - best


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
            out[p] = tree.shape_terms(plan, tree.best_shape(plan, st), st)
    return out


TREE_TERMS = ["events", "join", "out", "group", "held"]
NFA_TERMS = ["events", "offered", "matches"]
CHAIN_TERMS = ["events", "matches"]
LOSS = "soft_l1"
"""The fit's loss (scipy's least_squares; ``--loss soft_l1``: robust to outliers)."""


def _models() -> dict[tuple[str, bool], tuple[list[str],
                                               Callable[[dict[str, float]], list[float]]]]:
    """Each plan's and output mode's cost terms, in the order of its constants."""
    def pick(names: Sequence[str]) -> Callable[[dict[str, float]], list[float]]:
        # "input": one per input event (the runtime's own work, common to every plan)
        return lambda t: [t.get(n, 1.0) if n == "input" else t[n] for n in names]
    return {
        ("nfa", False): (list(NFA_TERMS), pick(NFA_TERMS)),
        ("nfa", True): (list(NFA_TERMS), pick(NFA_TERMS)),  # NFA_COUNT_*
        ("chain", False): (list(CHAIN_TERMS), pick(CHAIN_TERMS)),
        ("chain", True): (["events", "count_work"], pick(["events", "count_work"])),
        ("tree", False): (list(TREE_TERMS), pick(TREE_TERMS)),
    }


Sample = tuple[tuple[str, bool], list[float], float]
"""((plan, count_only), the plan's cost terms, measured µs per input event)."""


def samples(data: dict[str, Any]) -> list[Sample]:
    """The samples of a ``measure`` run: every plan at every point (the tree: the shape the
    cost model takes)."""
    models = _models()
    out: list[Sample] = []
    for row in data["points"]:
        tt = terms(row, data["stats"])
        for p, sec in row["seconds"].items():
            key = (p, row["count_only"] and p != "tree")
            if key not in models or sec == float("inf") or sec <= 0:
                continue
            out.append((key, models[key][1](tt[p]), 1e6 * sec / row["events"]))
    return out


def faem_points(folder: Path) -> list[dict[str, Any]]:
    """The points of FAEM's figures (``faem_fig*.json`` of ``benchmarks.faem --out``) with the
    chooser's statistics: stored with the point, else regenerated as benchmarks/faem.py makes
    them."""
    out = []
    for f in sorted(folder.glob("faem_fig*.json"), key=lambda p: int(p.stem[8:])):
        data = json.loads(f.read_text())
        fig = f.stem[8:]
        for pt in data["points"]:
            if "stats" in pt:
                st = _stats(pt["stats"], False)
            else:
                label = pt["label"]
                pops = faem.TABLE1
                if fig == "8":
                    pops = (*faem.TABLE1[:3], faem.TABLE1[3] * int(label[1:]))
                n = data["events"]
                st = Stats.from_events(faem.generate(max(n, 100_000) if fig != "11" else 300_000,
                                                     data["scale"], populations=pops))
                st = Stats(st.type_share, st.events_per_second,
                           0.5 if "%" not in label else int(label[:-1]) / 100,
                           st.default_share, st.source)
            out.append({**pt, "fig": fig, "events": data["events"], "stats_obj": st})
    return out


def faem_samples(folder: Path) -> list[Sample]:
    """The samples of FAEM's figures: every tree shape, the NFA and the chain plan where
    they were measured."""
    from kleene.plans import chain, nfa, tree

    models = _models()
    out: list[Sample] = []
    for pt in faem_points(folder):
        st = pt["stats_obj"]
        aq = analyze(pt["query"])
        for name, r in pt["plans"].items():
            if name == "chosen" or not r["seconds"]:
                continue
            y = 1e6 * r["seconds"] / pt["events"]
            if name in faem.SHAPES:
                plan = choose(aq, plan=f"tree:{name}", stats=st).plan
                t = tree.shape_terms(plan, plan.get_shape(name), st)
                out.append((("tree", False), models[("tree", False)][1](t), y))
            elif name == "nfa":
                t = nfa.linear_terms(choose(aq, plan="nfa", stats=st).plan, st)
                out.append((("nfa", False), models[("nfa", False)][1](t), y))
            elif name == "chain":
                t = chain.chain_terms(choose(aq, plan="chain", stats=st).plan, st)
                out.append((("chain", False), models[("chain", False)][1](t), y))
    return out


def fit(data: list[Sample], fixed: dict[str, float] | None = None) -> dict[tuple[str, bool],
                                                                     list[float]]:
    """Each plan's coefficients (µs per unit of each cost term, per output mode), fitted by
    least squares on the log of the measured µs per event (the relative error, symmetric),
    coefficients >= 0; prints them and the unit conversion (the NFA's per-event term is the
    chooser's unit). ``fixed``: tree terms held at 0 (an ablation: ``--drop join,held``)."""
    import numpy as np
    from scipy.optimize import least_squares

    models = _models()
    xs: dict[tuple[str, bool], list[list[float]]] = {k: [] for k in models}
    ys: dict[tuple[str, bool], list[float]] = {k: [] for k in models}
    for key, x, y in data:
        xs[key].append(x)
        ys[key].append(y)
    unit = None
    coefs: dict[tuple[str, bool], list[float]] = {}
    for key, (names, _f) in models.items():
        if not ys[key]:
            continue
        a = np.array(xs[key])
        if key[0] == "tree" and fixed:
            for n in fixed:
                a[:, names.index(n)] = 0.0
        y = np.log(np.array(ys[key]))

        def resid(c: Any, a: Any = a, y: Any = y) -> Any:
            return np.log(np.maximum(a @ c, 1e-12)) - y

        c0 = np.full(a.shape[1], 1e-3)
        c0[names.index("events")] = float(np.exp(np.median(y)))
        coef = least_squares(resid, c0, bounds=(0, np.inf), loss=LOSS).x
        err = float(np.median(np.abs(np.exp(resid(coef)) - 1)))
        if key == ("nfa", False):
            unit = coef[names.index("events")]
        coefs[key] = [float(c) for c in coef]
        print(f"{key[0]:5} {'count' if key[1] else 'enum '} n={len(y):3}  "
              + "  ".join(f"{n}={c:.4g}" for n, c in zip(names, coef, strict=True))
              + f"  µs; median relative error {err:.2f}"
              + ("; in the unit: " + "  ".join(f"{n}={c / unit:.4g}" for n, c in
                                                 zip(names, coef, strict=True))
                 if unit else ""))
    return coefs


def faem_rescore(folder: Path, verbose: bool = False, write: bool = False) -> tuple[int, int]:
    """FAEM's figures (the ``faem_fig*.json`` of ``benchmarks.faem --out``) scored again with
    the chooser of the sources on ``PYTHONPATH``, on the stored times (the chosen plan's own
    column: a tree shape, the NFA or the chain plan; the stored ``chosen`` runs only where it
    picks the plan recorded there). Per figure: the points where the chosen plan is within
    10 % of the best measured plan, Spearman's rank correlation between the estimates and
    the measured times (all plans and points of the figure; and among the four shapes at one
    point, averaged), and the chosen plan's time against the NFA's where the NFA ran.
    ``write``: store the new choice in the files (``chosen``, its column copied to the
    ``chosen`` row, every plan's estimate, the figure's Spearman and score), so that
    ``benchmarks.faem --report`` shows it."""
    from kleene.plans.tree import best_shape, shape_cost

    ok_all = n_all = 0
    by_fig: dict[str, list[dict[str, Any]]] = {}
    for pt in faem_points(folder):
        by_fig.setdefault(pt["fig"], []).append(pt)
    for fig, pts in by_fig.items():
        ok = unknown = 0
        est_all: list[float] = []
        got_all: list[float] = []
        within: list[float] = []
        ratios: list[str] = []
        for pt in pts:
            st = pt["stats_obj"]
            aq = analyze(pt["query"])
            cp = choose(aq, stats=st)
            name = cp.choice.chosen
            costs = {c.name: c.cost for c in cp.choice.candidates if c.cost is not None}
            tp = cp.plan if name == "tree" else choose(aq, plan="tree", stats=st).plan
            if name == "tree":
                name = best_shape(cp.plan, st).name
            shape_est = {s.name: shape_cost(tp, s, st) for s in tp.shapes}
            for n, r in pt["plans"].items():
                e = shape_est.get(n, costs.get(n))
                if n != "chosen" and e is not None:
                    est_all.append(e)
                    got_all.append(r["seconds"])
            w = faem.spearman([shape_est[n] for n in faem.SHAPES],
                              [pt["plans"][n]["seconds"] for n in faem.SHAPES])
            if w == w:
                within.append(w)
            best = min(r["seconds"] for k, r in pt["plans"].items() if k != "chosen")
            if name in pt["plans"] and name != "chosen":
                sec = pt["plans"][name]["seconds"]
            elif pt["chosen"] in (name, f"tree:{name}"):
                sec = pt["plans"]["chosen"]["seconds"]
            else:
                unknown += 1
                print(f"  fig {fig} {pt['label']}: chooses {name}, not measured there")
                continue
            good = sec <= 1.1 * best
            ok += good
            if write:
                pt["chosen"] = f"tree:{name}" if name in faem.SHAPES else name
                for n, r in pt["plans"].items():
                    r["estimate"] = shape_est.get(n, costs.get(n))
                pt["plans"]["chosen"] = {**pt["plans"][name], "copied_from": name}
                pt["plans"]["chosen"]["estimate"] = pt["plans"][name]["estimate"]
            if "nfa" in pt["plans"]:
                ratios.append(f"{pt['label']}: {pt['plans']['nfa']['seconds'] / sec:.2f}")
            if verbose:
                print(f"  fig {fig} {pt['label']:<14} chooses {name:<6} "
                      f"{'ok ' if good else 'OFF'} {sec / best:5.2f}x the best ("
                      + ", ".join(f"{k} {r['seconds'] / best:.2f}"
                                  for k, r in pt["plans"].items() if k != "chosen") + ")")
        rho = faem.spearman(est_all, got_all)
        mean_w = sum(within) / len(within) if within else float("nan")
        print(f"fig {fig}: chosen within 10% of the best at {ok}/{len(pts)} points "
              f"({unknown} not measured); Spearman(estimate, measured) {rho:.2f} over all "
              f"plans and points, {mean_w:.2f} among the shapes at one point (mean)"
              + (f"; chosen/NFA speed: {', '.join(ratios)}" if ratios else ""))
        ok_all += ok
        n_all += len(pts)
        if write:
            f = folder / f"faem_fig{fig}.json"
            data = json.loads(f.read_text())
            for pt in pts:
                pt.pop("stats_obj")
                pt.pop("fig")
                pt.pop("events")
            data.update(points=pts, spearman=rho, chosen_within_10pct=ok,
                        rechosen=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
            f.write_text(json.dumps(data, indent=1, default=str))
    print(f"all: {ok_all}/{n_all}")
    return ok_all, n_all


def faem_remeasure(folder: Path, out: Path, plans: Sequence[str], repeat: int) -> None:
    """FAEM's stored figures with ``plans`` (e.g. the NFA and the chain, whose code changed
    since the figures were measured) measured again at every point where they were stored,
    on the same streams (the figure's event count, scale, seed and populations), alternating
    within each repetition, medians; the other plans' stored times are kept. Writes the
    updated ``faem_fig*.json`` to ``out`` (for ``faem-rescore out``)."""
    out.mkdir(parents=True, exist_ok=True)
    for f in sorted(folder.glob("faem_fig*.json"), key=lambda p: int(p.stem[8:])):
        data = json.loads(f.read_text())
        fig = f.stem[8:]
        n = data["events"]
        cache: dict[Any, EventBatch] = {}
        for pt in data["points"]:
            todo = [p for p in plans if p in pt["plans"]]
            if not todo:
                continue
            pops = faem.TABLE1
            if fig == "8":
                pops = (*faem.TABLE1[:3], faem.TABLE1[3] * int(pt["label"][1:]))
            key = tuple(pops)
            if key not in cache:
                ev = faem.generate(n if fig != "11" else max(n, 300_000), data["scale"],
                                   seed=data["seed"], populations=pops)
                cache[key] = EventBatch(ev.table.slice(0, n), ev.time)
            ev = cache[key]
            st = _stats(pt["stats"], False)
            aq = analyze(pt["query"])
            times: dict[str, list[float]] = {p: [] for p in todo}
            for _ in range(repeat):
                for p in todo:
                    times[p].append(faem._run(aq, ev, p, st)[0])
            for p in todo:
                old = pt["plans"][p]["seconds"]
                pt["plans"][p] = {**pt["plans"][p], "seconds": statistics.median(times[p]),
                                  "stored_seconds": old}
            print(f"fig {fig} {pt['label']:<14} " + "  ".join(
                f"{p} {pt['plans'][p]['stored_seconds']:.4f} -> {pt['plans'][p]['seconds']:.4f}"
                for p in todo), flush=True)
        data["remeasured"] = {"plans": list(plans), "repeat": repeat,
                              "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        (out / f.name).write_text(json.dumps(data, indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("measure", "fit", "score", "faem-rescore",
                                     "refit-seq", "refit-fwd", "faem-remeasure"))
    ap.add_argument("path", nargs="*", default=[],
                    help="the JSON of a measure run; faem-rescore: a folder of faem_fig*.json; "
                         "fit: any number of either")
    ap.add_argument("--json", default=None, help="measure: write the results here")
    ap.add_argument("--small", action="store_true", help="small sizes (a loaded machine)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-keys", action="store_true",
                    help="score: without the key counts (Stats.distinct), an ablation")
    ap.add_argument("--drop", default="",
                    help="fit: tree terms held at 0, comma-separated (an ablation)")
    ap.add_argument("--input", action="store_true",
                    help="fit: one more term per plan, one per input event (an ablation)")
    ap.add_argument("--loss", default="soft_l1", help="fit: scipy least_squares' loss")
    ap.add_argument("--verbose", action="store_true",
                    help="faem-rescore, score: every point")
    ap.add_argument("--write", action="store_true",
                    help="faem-rescore: store the new choices in the files (for --report)")
    ap.add_argument("--only", default="",
                    help="measure: only these sets, comma-separated (e.g. 'seq3 stock')")
    ap.add_argument("--group", default="fwd", choices=tuple(FWD_GROUPS),
                    help="refit-fwd: the walk's constants to refit (chain.fwd_group; 'not': "
                         "a NOT tested on each match)")
    ap.add_argument("--plans", default="nfa,chain",
                    help="faem-remeasure: the plans to measure again")
    ap.add_argument("--explosion-events", type=int, default=3000)
    ap.add_argument("--faem-events", type=int, default=60_000)
    args = ap.parse_intermixed_args(argv)
    if args.mode == "measure":
        data = measure(args)
        if args.json:
            Path(args.json).write_text(json.dumps(data, indent=1))
        return 0
    if not args.path:
        ap.error(f"{args.mode} needs the JSON of a measure run (faem-rescore: a folder)")
    if args.mode == "faem-rescore":
        for p in args.path:
            faem_rescore(Path(p), args.verbose, args.write)
        return 0
    if args.mode == "faem-remeasure":
        if len(args.path) != 2:
            ap.error("faem-remeasure needs FAEM_DIR OUT_DIR")
        faem_remeasure(Path(args.path[0]), Path(args.path[1]), args.plans.split(","),
                       args.repeat)
        return 0
    if args.mode in ("refit-seq", "refit-fwd"):
        if args.mode == "refit-fwd":
            pred = _in_group(args.group)
            names, grid = FWD_GROUPS[args.group]
        else:
            pred = _is_seq
            names, grid = ("CHAIN_SEQ_EVENT", "CHAIN_SEQ_MATCH"), (0.6, 2.4, 0.3, 2.0, 0.05)
        scores: dict[tuple[float, float], int] = {}
        for p in args.path:
            refit_seq(_load(Path(p), args.no_keys), pred, names)
            for k, v in seq_region(_load(Path(p), args.no_keys), pred=pred,
                                   grid=grid).items():
                scores[k] = scores.get(k, 0) + v
        if len(args.path) > 1:  # the runs together: the best total, then the least time lost
            top = max(scores.values())
            pick = min((k for k, v in scores.items() if v == top), key=lambda k: LOST[k])
            print(f"all runs: best total score {top}; of those, the least CPU lost: per event "
                  f"{pick[0]:.2f}, per match {pick[1]:.2f} ({1e3 * LOST[pick]:.1f} ms)")
        return 0
    if args.mode == "fit":
        global LOSS
        LOSS = args.loss
        if args.input:
            for terms_ in (TREE_TERMS, NFA_TERMS, CHAIN_TERMS):
                terms_.insert(0, "input")
        got: list[Sample] = []
        for p in args.path:
            path = Path(p)
            if path.is_dir():
                got += faem_samples(path)
            else:
                got += samples(_load(path, args.no_keys))
        fit(got, {n: 0.0 for n in args.drop.split(",") if n})
        return 0
    for p in args.path:
        total = [0, 0]
        for set_, ok, n in score(_load(Path(p), args.no_keys), verbose=args.verbose):
            print(f"{set_:16} chosen within 10% of the best: {ok}/{n}")
            total[0] += ok
            total[1] += n
        print(f"{'all':16} chosen within 10% of the best: {total[0]}/{total[1]}")
    return 0


def _load(path: Path, no_keys: bool) -> dict[str, Any]:
    """A ``measure`` run's JSON; anything else (a missing file, other JSON, a FAEM figure
    directory where a run is wanted) stops with one line naming the file."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SystemExit(f"chooser: {path}: not a readable JSON file ({e})") from None
    if not isinstance(data, dict) or not {"points", "stats"} <= data.keys():
        raise SystemExit(f"chooser: {path}: not a `measure` run (its JSON has no 'points' "
                         "and 'stats'); write one with `python -m benchmarks.chooser measure "
                         "--json FILE`")
    if no_keys:
        for d in data["stats"].values():
            d["distinct"] = {}
    return data


if __name__ == "__main__":
    sys.exit(main())
