"""LinkedCEP's experiments (../shared/seeds/linkedcep-chain-coverage.txt, section 4), the chain
plan against kleene's NFA (the SASE-style baseline), alternately in the same run.

    PYTHONPATH=src python -m benchmarks.linkedcep [--events N] [--only exp1,exp2,explosion]
                                                  [--plots docs/img]

* ``abc_stream``: the paper's synthetic stream (event types A, B, C, ...; attributes ``x`` and
  ``y`` uniform in 0..99; about one event per second), generated in *runs* of adjacent events of
  the same type (run length geometric with mean ``mean_run``), which is where coverage pays.
  The paper's generator and its 100,000-event file are not published: this is the generator the
  paper describes.
* Experiment 1: five groups of 10 random sequence-3 queries ``SEQ(T1 a, T2 b, T3 c)`` with one
  condition per variable (group g keeps about 15 % + 15 % * g of the candidates), WITHIN 50 s, on
  the ABC stream and on the Aarhus traffic data (../shared/data/aarhus_traffic: the event type is
  the speed band, A >= 60 km/h, B 30-60, C < 30; PARTITION BY REPORT_ID; the data is sampled
  every 5 minutes, so a paper second is read as a minute there: WITHIN 50 s -> WITHIN 50 min).
* Experiment 2: the same groups with windows 50, 100, 150, 200, 300 s (minutes on Aarhus).
* Explosion: ``SEQ(Stock a, Stock+ b[], Stock c) WHERE c.price > a.price`` skip-till-any-match
  (benchmarks/queries.py EXPLODE) at windows 5-60 s: counting (``count_only``) and enumerating
  into a null sink (``to_null_sink``: pushed 250 events at a time, each call's matches
  dropped).
* Streaming enumeration (``--only sink``): the explosion query, with and without its WHERE, at
  windows 5-60 s, enumerated into a null sink through ``Runtime.push_to`` (the matches written
  in pieces of at most 65,536, each dropped), each window in a fresh process so that its peak
  RSS is its own: matches/s of CPU and peak RSS against the RSS before the run started; the
  list path (``push``, each call's list dropped: ``to_null_sink``) beside it up to 40 s.

      PYTHONPATH=src python -m benchmarks.linkedcep --only sink [--sink-events 2000]

* The same for a SEQ of three single variables (``--only sink3``: :data:`SEQ3`, windows
  2-20 s, the list path up to 10 s), whose join writes ``SeqBlock`` s through ``push_to``.
* The general join (``--only sinkg``: :data:`GENERAL`, a condition per list element, and
  :data:`GENERAL_RETURN`, the same with RETURN, :data:`GENERAL_LEAF`, a condition on the whole
  list; ``--sinkg-shapes`` adds :data:`GENERAL_STAR`, a ``*`` closure, :data:`GENERAL_TWO`,
  two lists of one type, :data:`GENERAL_NOT`, a NOT inside, and :data:`GENERAL_STAR_LAST`,
  a ``*`` last state), ``push_to`` and ``push`` into a null sink at windows
  ``--sinkg-windows``; with ``--base-src /tmp/kleene-base-s10/src`` each row runs on the old
  code too, alternately (old: every call's matches built and sorted, then written).

Times are CPU seconds of this process (``time.process_time``: the machine is shared), engine
only (``evaluate`` on an in-memory batch). Each query runs on both plans, NFA first then chain,
and their match counts must agree.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch
from kleene.events.model import ID, TS, TYPE, TimeInfo
from kleene.plans.registry import Stats, choose, start

from . import datasets, queries

PLANS = ("nfa", "chain")
WINDOWS = (50, 100, 150, 200, 300)


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------


def abc_stream(n: int, *, types: str = "ABC", mean_run: float = 3.0, seed: int = 7,
               step_s: float = 1.0) -> EventBatch:
    """``n`` events in runs of adjacent same-type events; ~``1/step_s`` events per second."""
    rng = np.random.default_rng(seed)
    out_types = np.empty(n, dtype=object)
    i = 0
    prev = -1
    while i < n:
        t = int(rng.integers(0, len(types)))
        if t == prev and len(types) > 1:
            continue
        prev = t
        run = int(rng.geometric(1.0 / mean_run))
        out_types[i:i + run] = types[t]
        i += run
    ts = np.cumsum(rng.integers(0, 3, n)) * int(step_s * 1_000_000)
    table = pa.table({ID: pa.array(np.arange(n, dtype=np.int64)), TS: pa.array(ts, pa.int64()),
                      TYPE: pa.array(list(out_types), pa.string()),
                      "x": pa.array(rng.integers(0, 100, n)),
                      "y": pa.array(rng.integers(0, 100, n))})
    return EventBatch(table, TimeInfo())


def aarhus_stream(n: int) -> EventBatch:
    """The first ``n`` Aarhus observations; type = speed band (A fast, B medium, C slow)."""
    src = datasets.AARHUS_DIR / datasets.AARHUS_FILES[0]
    with gzip.open(src, "rb") as f:
        head = b"".join(f.readline() for _ in range(n + 1))
    t = pacsv.read_csv(pa.py_buffer(head))
    ts = t.column("TIMESTAMP").cast(pa.timestamp("us")).cast(pa.int64())
    speed = t.column("avgSpeed").to_numpy()
    band = np.where(speed >= 60, "A", np.where(speed >= 30, "B", "C"))
    table = pa.table({ID: pa.array(np.arange(t.num_rows, dtype=np.int64)), TS: ts,
                      TYPE: pa.array(band.tolist(), pa.string()),
                      "REPORT_ID": t.column("REPORT_ID"),
                      "x": t.column("vehicleCount"), "y": t.column("avgMeasuredTime")})
    return EventBatch(table, TimeInfo())


# --------------------------------------------------------------------------------------------
# queries
# --------------------------------------------------------------------------------------------


def query_groups(dataset: str, seed: int = 11) -> list[list[str]]:
    """Five groups of 10 sequence-3 query templates (``{window}`` left open)."""
    rng = random.Random(seed)
    groups = []
    for g in range(1, 6):
        keep = 0.15 + 0.15 * g
        group = []
        for _ in range(10):
            ts = rng.sample("ABC", 3)
            if dataset == "abc":
                conds = [f"{v}.{rng.choice('xy')} < {round(100 * keep)}" for v in "abc"]
                tail = ""
            else:  # vehicleCount: 46 % zeros; thresholds from its quantiles (0..~30)
                thr = [0, 1, 3, 6, 10, 16][g]
                conds = [f"{v}.x >= {rng.choice((0, thr))}" for v in "abc"]
                tail = "\nPARTITION BY REPORT_ID"
            group.append(f"PATTERN SEQ({ts[0]} a, {ts[1]} b, {ts[2]} c)\nWHERE "
                         + " AND ".join(conds) + tail + "\nWITHIN {window}")
        groups.append(group)
    return groups


def run_once(q: str, events: EventBatch, plan: str, **opts: Any) -> tuple[float, int]:
    """CPU seconds and match count of one evaluation (count via ``counters.matches``)."""
    aq = analyze(q)
    rt = start(aq, plan=plan, max_matches_per_call=None, **opts)
    rt.count_placeholders = False
    t0 = time.process_time()
    out = rt.push(events)
    out += rt.close()
    dt = time.process_time() - t0
    return dt, max(len(out), rt.counters.matches)


def to_null_sink(q: str, events: EventBatch, plan: str, chunk: int = 250) -> tuple[float, int]:
    """CPU seconds and match count of enumerating into a null sink: the events are pushed
    ``chunk`` at a time and each call's matches are dropped once counted (memory bounded by
    one call's output, not by the whole run's)."""
    rt = start(analyze(q), plan=plan, max_matches_per_call=None)
    t0 = time.process_time()
    m = 0
    for i in range(0, len(events), chunk):
        m += len(rt.push(events.slice(i, chunk)))
    m += len(rt.close())
    return time.process_time() - t0, m


def stock_events(n: int) -> EventBatch:
    """The first ``n`` rows of the stock stream (benchmarks/datasets.py)."""
    from kleene.events.readers import ReadOptions, read_events

    events, _ = read_events(str(datasets.stock_csv(n)), ReadOptions(
        time_col="ts", event_type="Stock", id_col="id"))
    return events


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


SEQ3 = """PATTERN SEQ(Stock a, Stock b, Stock c)
WITHIN {window}
USING skip-till-any-match
"""
"""A SEQ of three single variables over every stock event (no PARTITION BY): about
``(10 W)^2 / 2`` matches per event at a window of ``W`` seconds (``--only sink3``)."""


GENERAL = """PATTERN SEQ(Stock a, Stock+ b[], Stock c)
WHERE b[i].price > a.price AND c.price < a.price
PARTITION BY symbol
WITHIN {window}
USING skip-till-any-match
"""
"""The chain plan's general join (a condition on each list element against the first event:
the storage does not decide it; ``--only sinkg``): the forward walk through ``push_to``."""

GENERAL_RETURN = GENERAL + "RETURN a.price AS p0, count(b) AS nb\n"
"""The same with RETURN (``--only sinkg``, shape ``general_return``)."""

GENERAL_LEAF = GENERAL.replace("b[i].price > a.price", "max(b.price) > a.price")
"""A condition only the complete list decides (``--only sinkg``, shape ``general_leaf``):
the walk cannot prune, so this is its overhead against the old join."""


GENERAL_STAR = GENERAL.replace("Stock+ b[]", "Stock* b[]")
"""A ``*`` closure (``--only sinkg --sinkg-shapes general_star``): the last state's sources
are the first state and the list, so the walk merges two ranges per node (walked since
2026-12-01, before built and sorted)."""

GENERAL_TWO = """PATTERN SEQ(Stock a, Stock+ b[], Stock+ c[], Stock d)
WHERE b[i].price > a.price AND c[i].price < a.price AND d.price > a.price
PARTITION BY symbol
WITHIN {window}
USING skip-till-any-match
"""
"""Two Kleene states of one type (``--sinkg-shapes general_two``): one event in both
partitions, the walk over position sequences (walked since 2026-12-01)."""

GENERAL_NOT = """PATTERN SEQ(Stock a, Stock+ b[], NOT Stock n, Stock c)
WHERE b[i].price > a.price AND n.price < a.price * 0.995 AND c.price < a.price
PARTITION BY symbol
WITHIN {window}
USING skip-till-any-match
"""
"""A NOT that is not trailing (``--sinkg-shapes general_not``): no drop below ``a`` between
the run and ``c``, tested against the history on each match the walk makes (walked since
2026-12-01 ``chain-fwd3``, before built and sorted)."""

GENERAL_STAR_LAST = """PATTERN SEQ(Stock a, Stock+ b[], Stock* c[])
WHERE b[i].price > a.price AND c[i].price < a.price
PARTITION BY symbol
WITHIN {window}
USING skip-till-any-match
"""
"""A ``*`` last state (``--sinkg-shapes general_star_last``): matches end in ``b`` or ``c``;
one type, so every event ends matches in both and writes candidates, not blocks (walked
since 2026-12-01 ``chain-fwd3``, before built by the reverse join)."""

SINKG_QUERIES = {"general": GENERAL, "general_return": GENERAL_RETURN,
                 "general_leaf": GENERAL_LEAF, "general_star": GENERAL_STAR,
                 "general_two": GENERAL_TWO, "general_not": GENERAL_NOT,
                 "general_star_last": GENERAL_STAR_LAST}


def sink_one(n: int, window: int, where: bool, mode: str, chunk: int = 250,
             shape: str = "kleene") -> dict[str, Any]:
    """One enumeration of the explosion query (``shape`` ``seq3``: :data:`SEQ3`) into a null
    sink (in this process): ``mode`` ``sink`` (``push_to``) or ``list`` (``push``, each
    call's list dropped). Returns the CPU seconds, the matches, and the peak RSS before and
    after (MB)."""
    q = queries.EXPLODE if where else queries.EXPLODE.replace("WHERE c.price > a.price\n", "")
    if shape == "seq3":
        q = SEQ3
    elif shape in SINKG_QUERIES:
        q = SINKG_QUERIES[shape]
    events = stock_events(n)
    rt = start(analyze(q.format(window=f"{window} seconds")), plan="chain",
               max_matches_per_call=None, max_matches_per_event=None)
    before = _rss_mb()

    def null(_piece: Any) -> None:
        return None

    t0 = time.process_time()
    m = 0
    if mode == "sink":
        for i in range(0, len(events), chunk):
            m += rt.push_to(events.slice(i, chunk), null)
        m += rt.close_to(null)
    else:
        for i in range(0, len(events), chunk):
            m += len(rt.push(events.slice(i, chunk)))
        m += len(rt.close())
    dt = time.process_time() - t0
    return {"window_s": window, "where": where, "mode": mode, "shape": shape, "matches": m,
            "cpu_s": dt,
            "matches_per_s": m / dt if dt else float("nan"), "rss_before_mb": before,
            "rss_peak_mb": _rss_mb()}


def sink_table(n: int, windows: tuple[int, ...], log: Any, list_upto: int = 40,
               shape: str = "kleene", base_src: str | None = None) -> list[dict[str, Any]]:
    """:func:`sink_one` for every window, with and without the WHERE (``seq3``, ``general``:
    no choice), each in a fresh process (``python -m benchmarks.linkedcep --sink-one
    W,WHERE,MODE,SHAPE``); with ``base_src`` (another tree's ``src``) each row also runs on
    that code, alternately with this one (``code`` ``old`` / ``new`` in the rows)."""
    import os
    import subprocess

    rows = []
    codes = [("new", None)] + ([("old", base_src)] if base_src else [])
    for where in (True, False) if shape == "kleene" else (shape != "seq3",):
        for w in windows:
            lists = w <= list_upto and (where or shape != "kleene")
            for mode, (code, src) in [(m, c) for m in (("sink", "list") if lists
                                                       else ("sink",)) for c in codes]:
                env = dict(os.environ)
                if src is not None:
                    env["PYTHONPATH"] = src
                res = subprocess.run(
                    [sys.executable, "-m", "benchmarks.linkedcep", "--sink-events", str(n),
                     "--sink-one", f"{w},{int(where)},{mode},{shape}"],
                    check=True, capture_output=True, text=True, env=env)
                row = json.loads(res.stdout.strip().splitlines()[-1])
                row["code"] = code
                log(f"  W={w:>2}s {shape:14} {code} {mode:4}: "
                    f"{row['matches']:>12,} matches  {row['cpu_s']:7.2f} CPU s  "
                    f"{row['matches_per_s']:>12,.0f} matches/s  peak RSS "
                    f"{row['rss_peak_mb']:.0f} MB (before the run {row['rss_before_mb']:.0f})")
                rows.append(row)
    return rows


def experiment(events: EventBatch, groups: list[list[str]], window: str,
               log: Any, names: list[int] | None = None) -> list[dict[str, Any]]:
    """Per group: mean CPU ms per query for each plan and the ratio nfa / chain
    (``names``: the groups' numbers, 1.. by default)."""
    rows = []
    for gi, group in zip(names or range(1, len(groups) + 1), groups, strict=True):
        times: dict[str, list[float]] = {p: [] for p in PLANS}
        matches = 0
        for q in group:
            text = q.format(window=window)
            counts = {}
            for p in PLANS:  # alternately, same run
                dt, m = run_once(text, events, p)
                times[p].append(dt)
                counts[p] = m
            if counts["nfa"] != counts["chain"]:
                raise AssertionError(f"plans disagree on {text!r}: {counts}")
            matches += counts["nfa"]
        row = {"group": f"Q{gi}", "window": window, "matches": matches,
               **{f"{p}_ms": 1000 * statistics.mean(times[p]) for p in PLANS}}
        row["speedup"] = row["nfa_ms"] / row["chain_ms"] if row["chain_ms"] else float("nan")
        log(f"  {row['group']} {window:>12}: nfa {row['nfa_ms']:8.1f} ms  chain "
            f"{row['chain_ms']:8.1f} ms  nfa/chain {row['speedup']:.2f}  ({matches:,} matches)")
        rows.append(row)
    return rows


def explosion(n: int, windows: tuple[int, ...], log: Any) -> list[dict[str, Any]]:
    """Counting and enumeration on the Kleene explosion query."""
    csv = datasets.stock_csv(n)
    from kleene.events.readers import ReadOptions, read_events

    events, _ = read_events(str(csv), ReadOptions(time_col="ts", event_type="Stock",
                                                  id_col="id"))
    rows = []
    core = queries.EXPLODE.replace("WHERE c.price > a.price\n", "")
    for w in windows:
        q = queries.EXPLODE.format(window=f"{w} seconds")
        # CORE's fragment (no condition between events): the chain counts with a
        # sliding-window aggregate, flat in the window
        dt, m = run_once(core.format(window=f"{w} seconds"), events, "chain", count_only=True)
        rows.append({"window_s": w, "plan": "chain (no c.price > a.price)", "count_s": dt,
                     "matches": m, "count_events_per_s": n / dt})
        log(f"  explosion W={w:>2}s chain, no WHERE: count_s {dt:.2f}, matches {m}, "
            f"count_events_per_s {n / dt:,.0f}")
        for p in PLANS:
            row: dict[str, Any] = {"window_s": w, "plan": p}
            try:
                dt, m = run_once(q, events, p, count_only=True)
                row.update(count_s=dt, matches=m, count_events_per_s=n / dt)
            except CapacityError:
                row.update(count_s=None, matches=None, count_events_per_s=None,
                           note="CapacityError")
            if w <= 20:
                try:
                    dt, m = to_null_sink(q, events, p)
                    row.update(enum_s=dt, enum_matches_per_s=m / dt)
                except CapacityError:
                    row.update(enum_s=None, note="CapacityError")
            log(f"  explosion W={w:>2}s {p:5}: " + ", ".join(
                f"{k} {v:,.2f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in row.items() if k not in ("window_s", "plan")))
            rows.append(row)
    return rows


def chooser_check(events: EventBatch, groups: list[list[str]], window: str,
                  rows: list[dict[str, Any]]) -> list[str]:
    """Which plan the chooser picks per group (statistics from the stream) vs the faster one."""
    stats = Stats.from_events(events)
    out = []
    for g, group, row in zip(range(1, 6), groups, rows, strict=True):
        picks = [choose(analyze(q.format(window=window)), stats=stats).choice.chosen
                 for q in group]
        faster = "chain" if row["chain_ms"] < row["nfa_ms"] else "nfa"
        out.append(f"Q{g} {window}: chooser picked {dict((p, picks.count(p)) for p in set(picks))}"
                   f", faster: {faster} ({row['speedup']:.2f})")
    return out


# --------------------------------------------------------------------------------------------
# plots
# --------------------------------------------------------------------------------------------


def plots(results: dict[str, Any], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for ds in ("abc", "aarhus"):
        rows = results.get(f"exp1_{ds}")
        if rows:
            fig, ax = plt.subplots(figsize=(5, 3))
            xs = np.arange(len(rows))
            for i, p in enumerate(PLANS):
                ax.bar(xs + 0.4 * i, [r[f"{p}_ms"] for r in rows], 0.4, label=p)
            ax.set_xticks(xs + 0.2, [r["group"] for r in rows])
            ax.set_ylabel("CPU ms per query")
            ax.set_title(f"Experiment 1 ({ds}, window 50)")
            ax.legend()
            fig.tight_layout()
            path = out_dir / f"linkedcep_exp1_{ds}.png"
            fig.savefig(path, dpi=100)
            plt.close(fig)
            made.append(path)
        rows = results.get(f"exp2_{ds}")
        if rows:
            fig, ax = plt.subplots(figsize=(5, 3))
            for p in PLANS:
                ws = sorted({r["window"] for r in rows}, key=lambda w: int(w.split()[0]))
                ys = [statistics.mean(r[f"{p}_ms"] for r in rows if r["window"] == w)
                      for w in ws]
                ax.plot([int(w.split()[0]) for w in ws], ys, marker="o", label=p)
            ax.set_xlabel("window (s; min on aarhus)")
            ax.set_ylabel("CPU ms per query (mean of groups)")
            ax.set_title(f"Experiment 2 ({ds})")
            ax.legend()
            fig.tight_layout()
            path = out_dir / f"linkedcep_exp2_{ds}.png"
            fig.savefig(path, dpi=100)
            plt.close(fig)
            made.append(path)
    rows = results.get("sink")
    if rows:
        series = [(label, [r for r in rows if r["where"] is where and r["mode"] == mode])
                  for where, mode, label in ((True, "sink", "push_to (WHERE)"),
                                             (False, "sink", "push_to (no WHERE)"),
                                             (True, "list", "push, lists dropped (WHERE)"))]
        made.append(_sink_plot(plt, series, "Enumeration into a null sink",
                               out_dir / "linkedcep_sink.png", target=True))
    rows = results.get("sink3")
    if rows:
        series = [(label, [r for r in rows if r["mode"] == mode])
                  for mode, label in (("sink", "push_to (SeqBlock)"),
                                      ("list", "push, lists dropped"))]
        made.append(_sink_plot(plt, series, "SEQ(a, b, c) into a null sink",
                               out_dir / "linkedcep_sink_seq3.png", target=False))
    rows = results.get("explosion")
    if rows:
        fig, ax = plt.subplots(figsize=(5, 3))
        for p in (*PLANS, "chain (no c.price > a.price)"):
            pts = [(r["window_s"], r["count_events_per_s"]) for r in rows
                   if r["plan"] == p and r.get("count_events_per_s")]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=f"{p} count_only")
        ax.set_xlabel("window (s)")
        ax.set_ylabel("events/s (CPU)")
        ax.set_yscale("log")
        ax.set_title("Kleene explosion: counting")
        ax.legend()
        fig.tight_layout()
        path = out_dir / "linkedcep_explosion.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        made.append(path)
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=3000, help="ABC / Aarhus events")
    ap.add_argument("--aarhus-events", type=int, default=18_000,
                    help="Aarhus events (449 sensors report every 5 minutes)")
    ap.add_argument("--explosion-events", type=int, default=5000)
    ap.add_argument("--only", default="exp1,exp2,explosion")
    ap.add_argument("--exp2-groups", default="1,3", help="groups run in Experiment 2")
    ap.add_argument("--exp2-events", type=int, default=600,
                    help="ABC events in Experiment 2 (the output grows with the window)")
    ap.add_argument("--sink-events", type=int, default=2000,
                    help="stock events of the streaming-enumeration table (--only sink)")
    ap.add_argument("--sink-one", default=None, metavar="W,WHERE,MODE",
                    help="internal: one streaming-enumeration run, its JSON on stdout")
    ap.add_argument("--base-src", default=None, metavar="DIR",
                    help="--only sinkg: also run each row on this tree's src (old code), "
                         "alternately")
    ap.add_argument("--sinkg-windows", default="10,20,30,40",
                    help="--only sinkg: the windows in seconds")
    ap.add_argument("--sinkg-shapes", default="general,general_return,general_leaf",
                    help="--only sinkg: the queries (" + ", ".join(SINKG_QUERIES) + ")")
    ap.add_argument("--merge", default=None, metavar="PATHS",
                    help="comma-separated JSON results of earlier runs to plot with this one")
    ap.add_argument("--plots", default=None, metavar="DIR", help="write PNG plots here")
    ap.add_argument("--json", default=None, metavar="PATH", help="write the results here")
    args = ap.parse_args(argv)
    if args.sink_one:
        w, where, mode, *shape = args.sink_one.split(",")
        print(json.dumps(sink_one(args.sink_events, int(w), where == "1", mode,
                                  shape=shape[0] if shape else "kleene")))
        return 0
    only = set(args.only.split(","))

    def log(s: str) -> None:
        print(s, flush=True)

    results: dict[str, Any] = {"events": args.events, "date": time.strftime("%Y-%m-%d %H:%M")}
    inputs = {"abc": abc_stream(args.events)} if only & {"exp1", "exp2"} else {}
    if not inputs:
        pass
    elif datasets.aarhus_available() is None:
        inputs["aarhus"] = aarhus_stream(args.aarhus_events)
    else:
        log(f"aarhus: skipped ({datasets.aarhus_available()})")
    unit = {"abc": "seconds", "aarhus": "minutes"}
    for ds, events in inputs.items():
        groups = query_groups(ds)
        if "exp1" in only:
            log(f"Experiment 1 on {ds} ({len(events):,} events), window 50 {unit[ds]}")
            rows = experiment(events, groups, f"50 {unit[ds]}", log)
            results[f"exp1_{ds}"] = rows
            results[f"chooser_{ds}"] = chooser_check(events, groups, f"50 {unit[ds]}", rows)
            for line in results[f"chooser_{ds}"]:
                log("  " + line)
        if "exp2" in only:
            keep = [int(g) for g in args.exp2_groups.split(",")]
            sub = [groups[g - 1] for g in keep]
            ev2 = abc_stream(args.exp2_events) if ds == "abc" else events
            log(f"Experiment 2 on {ds} ({len(ev2):,} events): groups {keep}, windows "
                f"{WINDOWS} {unit[ds]}")
            rows2 = []
            for w in WINDOWS:
                rows2 += experiment(ev2, sub, f"{w} {unit[ds]}", log, keep)
            results[f"exp2_{ds}"] = rows2
    if "sink" in only:
        log(f"Streaming enumeration into a null sink ({args.sink_events:,} stock events)")
        results["sink"] = sink_table(args.sink_events, (5, 10, 20, 40, 60), log)
    if "sink3" in only:
        log(f"SEQ of three singles into a null sink ({args.sink_events:,} stock events)")
        results["sink3"] = sink_table(args.sink_events, (2, 5, 10, 20), log, list_upto=10,
                                      shape="seq3")
    if "sinkg" in only:
        for shape in args.sinkg_shapes.split(","):
            log(f"The general join ({shape}) into a null sink ({args.sink_events:,} stock "
                f"events{', old = ' + args.base_src if args.base_src else ''})")
            results[f"sinkg_{shape}"] = sink_table(
                args.sink_events, tuple(int(w) for w in args.sinkg_windows.split(",")), log,
                list_upto=1000, shape=shape, base_src=args.base_src)
    if "explosion" in only:
        log(f"Kleene explosion ({args.explosion_events:,} stock events)")
        results["explosion"] = explosion(args.explosion_events, (5, 10, 20, 40, 60), log)
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    log(f"peak RSS {results['peak_rss_mb']:.0f} MB")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    if args.merge:
        for path in args.merge.split(","):
            for k, v in json.loads(Path(path).read_text()).items():
                results.setdefault(k, v)
    if args.plots:
        for p in plots(results, Path(args.plots)):
            log(f"plot: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def _sink_plot(plt: Any, series: list[tuple[str, list[dict[str, Any]]]], title: str,
               path: Path, *, target: bool) -> Path:
    """A null-sink figure: matches/s against the window, and memory against the output."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(9, 3.2))
    for label, pts in series:
        if pts:
            ax.plot([r["window_s"] for r in pts], [r["matches_per_s"] for r in pts],
                    marker="o", label=label)
            ax2.plot([r["matches"] for r in pts],
                     [r["rss_peak_mb"] - r["rss_before_mb"] for r in pts], marker="o",
                     label=label)
    if target:
        ax.axhline(2e6, color="grey", ls=":", label="target 2M/s")
    ax.set_xlabel("window (s)")
    ax.set_ylabel("matches/s (CPU)")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax2.set_xscale("log")
    ax2.set_xlabel("matches of the run")
    ax2.set_ylabel("peak RSS - RSS before (MB)")
    ax2.set_title("Memory against the output")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
