"""LinkedCEP's Experiment 3 (../shared/seeds/linkedcep-chain-coverage.txt, section 4.2):
throughput against the number of queries (50, 100, 150, 200, 250; WITHIN 50 s), on the ABC
stream and on the Aarhus traffic data, for the NFA (the SASE-style baseline), the chain plan
enumerating every match (LinkedCEP: CoverMatch + CombineMatch) and the chain plan with
``EMIT COVERAGE`` (CoverMatch alone), plus the plan kleene's chooser takes.

    PYTHONPATH=src python -m benchmarks.linkedcep_multi [--events N] [--aarhus-events N]
        [--queries 50,100,150,200,250] [--plots docs/img] [--json PATH]

How "N queries at once" is measured: the paper runs N independent queries over one stream
(no sharing between them), so the work is the sum of the queries' work. kleene runs such a set
(``compile_many(..., plan="separate")``, or any query the shared network does not take) the
same way: every query on its own plan over the same batch. The harness therefore evaluates
the largest set once, query by query, the plans alternating per query (NFA, chain, coverage,
chosen), in this one process, and reports for each prefix of N queries ``events / sum of CPU
seconds``: the events of the stream the whole set processes per second. The sets are nested (the first 50 of the 250 are the set of 50). The
NFA and the chain plan must return the same number of matches for every query, and the
coverage never more (the harness checks both).

The queries are those of Experiment 1 (``benchmarks.linkedcep.query_groups``'s generator: a
random sequence of the three types, one condition per variable whose selectivity is drawn
from the five groups), drawn with another seed, N of them.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from kleene.api import analyze
from kleene.events import EventBatch
from kleene.plans.registry import start

from .linkedcep import aarhus_stream, abc_stream

PLANS = ("nfa", "chain", "coverage", "chosen")
SCALES = (50, 100, 150, 200, 250)


def queries(dataset: str, n: int, seed: int = 23) -> list[str]:
    """``n`` sequence-3 queries with Experiment 1's shape, WITHIN 50 s (50 min on Aarhus)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        g = rng.randint(1, 5)
        keep = 0.15 + 0.15 * g
        ts = rng.sample("ABC", 3)
        if dataset == "abc":
            conds = [f"{v}.{rng.choice('xy')} < {round(100 * keep)}" for v in "abc"]
            tail, window = "", "50 SECONDS"
        else:
            thr = [0, 1, 3, 6, 10, 16][g]
            conds = [f"{v}.x >= {rng.choice((0, thr))}" for v in "abc"]
            tail, window = "\nPARTITION BY REPORT_ID", "50 MINUTES"
        out.append(f"PATTERN SEQ({ts[0]} a, {ts[1]} b, {ts[2]} c)\nWHERE "
                   + " AND ".join(conds) + tail + f"\nWITHIN {window}")
    return out


def run_once(text: str, events: EventBatch, plan: str) -> tuple[float, int]:
    """CPU seconds and match count of one query over the batch on ``plan``."""
    if plan == "coverage":
        text, plan_name = text + "\nEMIT COVERAGE", "chain"
    else:
        plan_name = plan
    rt = start(analyze(text), plan=None if plan_name == "chosen" else plan_name,
               max_matches_per_call=None)
    rt.count_placeholders = False
    t0 = time.process_time()
    out = rt.push(events)
    out += rt.close()
    return time.process_time() - t0, max(len(out), rt.counters.matches)


def experiment(name: str, events: EventBatch, texts: list[str], scales: tuple[int, ...],
               log: Any) -> list[dict[str, Any]]:
    """Per scale: events/s of each plan for the first N queries, and the matches."""
    times: dict[str, list[float]] = {p: [] for p in PLANS}
    matches: dict[str, list[int]] = {p: [] for p in PLANS}
    for i, text in enumerate(texts):
        got = {}
        for p in PLANS:  # alternately, query by query
            dt, m = run_once(text, events, p)
            times[p].append(dt)
            matches[p].append(m)
            got[p] = m
        if not got["nfa"] == got["chain"] == got["chosen"] or got["coverage"] > got["chain"]:
            raise AssertionError(f"plans disagree on query {i}: {got}\n{text}")
    rows = []
    n_ev = len(events)
    for n in scales:
        row: dict[str, Any] = {"dataset": name, "queries": n, "events": n_ev,
                               "matches": sum(matches["chain"][:n]),
                               "coverage_matches": sum(matches["coverage"][:n])}
        for p in PLANS:
            total = sum(times[p][:n])
            row[f"{p}_s"] = total
            row[f"{p}_eps"] = n_ev / total if total else float("inf")
        row["chain_vs_nfa"] = row["nfa_s"] / row["chain_s"]
        row["coverage_vs_nfa"] = row["nfa_s"] / row["coverage_s"]
        log(f"  {name:6} {n:>4} queries: nfa {row['nfa_eps']:9,.0f}  chain "
            f"{row['chain_eps']:9,.0f}  coverage {row['coverage_eps']:9,.0f}  chosen "
            f"{row['chosen_eps']:9,.0f} events/s; chain/nfa {row['chain_vs_nfa']:.2f}, "
            f"coverage/nfa {row['coverage_vs_nfa']:.2f} ({row['matches']:,} matches, "
            f"{row['coverage_matches']:,} coverages)")
        rows.append(row)
    return rows


def plot(rows: list[dict[str, Any]], out_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = sorted({r["dataset"] for r in rows})
    fig, axes = plt.subplots(1, len(sets), figsize=(5.5 * len(sets), 4), squeeze=False)
    for ax, name in zip(axes[0], sets, strict=True):
        rs = [r for r in rows if r["dataset"] == name]
        xs = [r["queries"] for r in rs]
        for p, label in (("nfa", "NFA (SASE-style)"), ("chain", "chain (LinkedCEP)"),
                         ("coverage", "chain, EMIT COVERAGE (CoverMatch)"),
                         ("chosen", "chosen")):
            ax.plot(xs, [r[f"{p}_eps"] for r in rs], marker="o", label=label)
        ax.set_title(f"Experiment 3, {name} ({rs[0]['events']:,} events, WITHIN 50)")
        ax.set_xlabel("queries")
        ax.set_ylabel("events/s (whole query set, CPU time)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "linkedcep_exp3.png"
    fig.savefig(path, dpi=110)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000, help="ABC events")
    ap.add_argument("--aarhus-events", type=int, default=20_000)
    ap.add_argument("--queries", default=",".join(map(str, SCALES)))
    ap.add_argument("--only", default="abc,aarhus")
    ap.add_argument("--plots", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    scales = tuple(int(x) for x in args.queries.split(","))

    def log(msg: str) -> None:
        print(msg, flush=True)

    rows: list[dict[str, Any]] = []
    only = set(args.only.split(","))
    if "abc" in only:
        log(f"ABC stream, {args.events:,} events")
        rows += experiment("abc", abc_stream(args.events), queries("abc", max(scales)),
                           scales, log)
    if "aarhus" in only:
        log(f"Aarhus traffic, {args.aarhus_events:,} events")
        rows += experiment("aarhus", aarhus_stream(args.aarhus_events),
                           queries("aarhus", max(scales)), scales, log)
    if args.json:
        args.json.write_text(json.dumps({"exp3": rows, "date": time.strftime("%Y-%m-%d %H:%M")},
                                        indent=1))
    if args.plots:
        log(f"plot: {plot(rows, args.plots)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
