"""LinkedCEP's experiments, old against new in one run: ``benchmarks.linkedcep`` alternately on
two source trees (a fresh process per side and round, ``PYTHONPATH`` set to the tree, the
same harness and inputs), then the median per row of every side's numbers.

    git worktree add /tmp/kleene-base <old commit>
    PYTHONPATH=src python -m benchmarks.linkedcep_ab --old /tmp/kleene-base/src --new src \\
        --rounds 3 --only exp2 [--json-dir DIR] [-- extra benchmarks.linkedcep flags]

Per Experiment 1 / 2 row: the NFA's and the chain's CPU ms per query and nfa/chain, each the
median over the rounds, for both sides; per explosion row the counting and enumeration rates.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _run(src: str, only: str, out: Path, extra: list[str]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=src)
    subprocess.run([sys.executable, "-m", "benchmarks.linkedcep", "--only", only, "--json",
                    str(out), *extra], cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _med(runs: list[dict[str, Any]], key: str, i: int, field: str) -> float | None:
    vals = [r[key][i].get(field) for r in runs]
    if not all(isinstance(v, (int, float)) for v in vals):
        return None
    return float(statistics.median(vals))


def table(sides: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Median rows, old against new."""
    lines = []
    first = sides["old"][0]
    for key in sorted(k for k in first if k.startswith(("exp1_", "exp2_"))):
        lines.append(f"{key}: group window matches | nfa ms old new | chain ms old new | "
                     "nfa/chain old new | chain old/new")
        for i, row in enumerate(first[key]):
            v = {(s, f): _med(sides[s], key, i, f) for s in sides
                 for f in ("nfa_ms", "chain_ms", "speedup")}
            lines.append(
                f"  {row['group']} {row['window']} {row['matches']:,} | "
                f"{v['old', 'nfa_ms']:.1f} {v['new', 'nfa_ms']:.1f} | "
                f"{v['old', 'chain_ms']:.1f} {v['new', 'chain_ms']:.1f} | "
                f"{v['old', 'speedup']:.2f} {v['new', 'speedup']:.2f} | "
                f"{(v['old', 'chain_ms'] or 0) / (v['new', 'chain_ms'] or 1):.2f}")
    if "explosion" in first:
        lines.append("explosion: window plan matches | count events/s old new | "
                     "enum matches/s old new")
        for i, row in enumerate(first["explosion"]):
            def f(x: float | None) -> str:
                return "-" if x is None else f"{x:,.0f}"
            c = [_med(sides[s], "explosion", i, "count_events_per_s") for s in ("old", "new")]
            e = [_med(sides[s], "explosion", i, "enum_matches_per_s") for s in ("old", "new")]
            lines.append(f"  {row['window_s']} {row['plan']} {row.get('matches')} | "
                         f"{f(c[0])} {f(c[1])} | {f(e[0])} {f(e[1])}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="the old tree's src directory")
    ap.add_argument("--new", default=str(REPO / "src"), help="the new tree's src directory")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="exp2")
    ap.add_argument("--json-dir", type=Path, default=None,
                    help="keep every run's JSON here (default: a temporary directory)")
    ap.add_argument("extra", nargs="*", help="more benchmarks.linkedcep flags (after --)")
    args = ap.parse_args(argv)
    keep = args.json_dir or Path(tempfile.mkdtemp(prefix="linkedcep_ab_"))
    keep.mkdir(parents=True, exist_ok=True)
    sides: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for r in range(1, args.rounds + 1):
        for side in ("old", "new"):  # alternately: a slow phase hits both sides
            src = args.old if side == "old" else args.new
            sides[side].append(_run(src, args.only, keep / f"{side}_{r}.json", args.extra))
            print(f"round {r} {side}: done", flush=True)
    for line in table(sides):
        print(line)
    print(f"runs: {keep}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
