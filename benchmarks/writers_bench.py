"""Matches written per second: the column-wise writers against the one-match-at-a-time path.

The matches have the stock query's shape (``a`` an id, ``b[]`` a Kleene list of ids with the
run lengths of the stock workload, ``c`` an id; naive datetimes with milliseconds) and, with
``--values``, three RETURN fields (an int, a float, a string). Each format is written to a
temporary file by ``write`` (column-wise) and ``write_rows`` (per match, the path every writer
had before) alternately, ``--repeat`` times; medians of CPU seconds (``time.process_time``, less
sensitive than wall time to a shared machine) and of wall seconds are printed. Run::

    python -m benchmarks.writers_bench [--n 152420] [--repeat 5] [--values] [--formats jsonl,csv]
    python -m benchmarks.writers_bench --engine-events 1000000   # the engine's own matches

``--engine-events N`` writes the matches the engine finds in the N-event stock file instead
(Match objects as the engine allocates them, scattered in memory, which costs the column-wise
path more than the synthetic ones, allocated in order).

``write_rows`` does not exist in kleene before the column-wise writers: run the module under
that version's sources with ``--only write`` for its numbers (then ``write`` is the old path).

``--table`` (with ``--engine-events``) writes the engine's matches as the CLI hands them over
(``Runtime.columnar``: a ``MatchTable`` of column parts, no ``Match`` objects), a fresh table
per run; a writer without a column path builds the ``Match`` objects, in the time measured.
``--ab OLD_SRC`` runs that measurement in child processes under ``OLD_SRC`` and ``--new``
alternately (old, new, old, new, ...: ``--rounds`` pairs), and ``--cli`` times the whole
``kleene run`` of the stock query to ``--formats``' first format the same way, alternately,
checking that both sides write the same bytes::

    python -m benchmarks.writers_bench --engine-events 1000000 --table --formats parquet \
        --ab /tmp/kleene-base-s10/src --rounds 5 --repeat 3
    python -m benchmarks.writers_bench --engine-events 1000000 --formats parquet \
        --ab /tmp/kleene-base-s10/src --cli --rounds 5
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from kleene.events import Match, TimeInfo
from kleene.events.writers import open_writer

BASE_US = 1_704_187_800_000_000  # 2024-01-02T09:30:00


def stock_like(n: int, *, values: bool, seed: int = 1) -> list[Match]:
    """``n`` matches shaped like the stock query's (ids, Kleene runs, 100 ms ticks)."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        a = k * 7
        b = tuple(range(a + 1, a + 1 + min(1 + int(rng.expovariate(0.7)), 12)))
        c = b[-1] + 1
        start = BASE_US + a * 100_000
        vals: dict[str, Any] = {}
        if values:
            vals = {"n": len(b), "gain": round(rng.uniform(-5, 5), 2),
                    "symbol": f"S{rng.randrange(50):02d}"}
        out.append(Match("stock", {"a": a, "b": b, "c": c}, start, start + (c - a) * 100_000,
                         vals))
    return out


def engine_matches(n: int) -> tuple[list[Match], TimeInfo]:
    """The stock query's matches on the ``n``-event stock file, as the engine returns them."""
    import warnings

    import kleene
    from kleene.cli import main as cli_main

    from . import datasets, measure, queries

    measure.as_console(cli_main)  # as the `kleene` process does
    events, _ = kleene.read_events(str(datasets.stock_csv(n)), time_col="ts",
                                   event_type="Stock", id_col="id")
    runtime = kleene.compile(queries.STOCK, name="stock").start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out: list[Match] = runtime.push(events)
        out += runtime.close()
    return out, events.time


def engine_table(n: int, query: str = "stock") -> tuple[Any, TimeInfo]:
    """The stock query's matches on the ``n``-event stock file as the CLI's runtime hands
    them to the writer (``Runtime.columnar``: a ``MatchTable`` of column parts, from the runs
    plan); ``query="explosion"``: the Kleene explosion WITHIN 20 seconds on the chain plan (a
    ``MatchTable`` of blocks, expanded by the writer), no caps."""
    import warnings

    import kleene
    from kleene.cli import main as cli_main

    from . import datasets, measure, queries

    measure.as_console(cli_main)
    events, _ = kleene.read_events(str(datasets.stock_csv(n)), time_col="ts",
                                   event_type="Stock", id_col="id")
    if query == "explosion":
        runtime = kleene.compile(queries.EXPLODE.format(window="20 seconds"), name="explosion",
                                 plan="chain").start(max_matches_per_call=None,
                                                     max_matches_per_event=None)
    else:
        runtime = kleene.compile(queries.STOCK, name="stock").start()
    runtime.columnar = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = runtime.push(events)
        out += runtime.close()
    return out, events.time


def _fresh(matches: Any) -> Any:
    """A MatchTable with no Match objects built yet (it keeps them once read); a list as is."""
    from kleene.events.matchtable import MatchTable

    return MatchTable(list(matches.parts)) if isinstance(matches, MatchTable) else matches


def _run(fmt: str, matches: Any, path: str, method: str,
         time_info: TimeInfo) -> tuple[float, float]:
    matches = _fresh(matches)
    w0, c0 = time.perf_counter(), time.process_time()
    with open_writer(path, fmt, time_info) as w:
        getattr(w, method)(matches)
    return time.process_time() - c0, time.perf_counter() - w0


def _child(tree: str, cmd: list[str]) -> tuple[float, float, str]:
    """Run ``cmd`` with ``PYTHONPATH=tree``: (CPU s of the child, wall s, its stdout)."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": tree}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False,
                          timeout=1800)
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{tree}: {' '.join(cmd[:4])} failed: {done.stderr[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, done.stdout


def _ab(args: argparse.Namespace, log: Callable[[str], None]) -> int:
    """Old against new in child processes, alternately (see the module docstring)."""
    import hashlib
    import json

    from . import datasets, queries

    trees = {"old": os.path.abspath(args.ab), "new": os.path.abspath(args.new)}
    fmt = args.formats.split(",")[0]
    n = args.engine_events or 1_000_000
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    wall: dict[str, list[float]] = {"old": [], "new": []}
    digests: dict[str, set[str]] = {"old": set(), "new": set()}
    matches: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        qf = os.path.join(tmp, "stock.kleene")
        with open(qf, "w", encoding="utf-8") as f:
            f.write(queries.STOCK)
        csv_path = str(datasets.stock_csv(n))
        for _ in range(args.rounds):
            for side, tree in trees.items():
                if args.cli:
                    out = os.path.join(tmp, f"{side}.{fmt}")
                    c, w, _out = _child(tree, [
                        sys.executable, "-m", "kleene", "run", qf, "-i", csv_path,
                        "--time-col", "ts", "--event-type", "Stock", "--id-col", "id",
                        "--output", out, "--format", fmt, "-q"])
                    with open(out, "rb") as fh:
                        digests[side].add(hashlib.sha256(fh.read()).hexdigest())
                else:
                    _, _, text = _child(tree, [
                        sys.executable, "-m", "benchmarks.writers_bench", "--engine-events",
                        str(n), "--formats", fmt, "--repeat", str(args.repeat), "--only",
                        "write", "--json-line", "--query", args.query,
                        *(["--table"] if args.table else [])])
                    res = json.loads(text.strip().splitlines()[-1])
                    c, w = res["cpu"], res["wall"]
                    matches[side] = res["n"]
                cpu[side].append(c)
                wall[side].append(w)
                log(f"  {side}: cpu {c:7.3f} s  wall {w:7.3f} s")
    what = (f"kleene run stock {n:,} events --output x.{fmt}" if args.cli else
            f"{fmt} write of {matches.get('new', 0):,} engine matches ({args.query})"
            f"{' (MatchTable)' if args.table else ''}, median of {args.repeat} per child")
    log(what + f"; {args.rounds} rounds, old/new alternately")
    for side in ("old", "new"):
        c, w = statistics.median(cpu[side]), statistics.median(wall[side])
        rate = "" if args.cli else (f"   {matches[side] / c:>11,.0f} matches/s cpu"
                                    f"   {matches[side] / w:>11,.0f} matches/s wall")
        log(f"{side}  cpu {c:7.3f} s  wall {w:7.3f} s{rate}")
    pairs = [n_ / o for o, n_ in zip(cpu["old"], cpu["new"], strict=True)]
    log(f"new/old cpu {statistics.median(cpu['new']) / statistics.median(cpu['old']):.2f} "
        f"(pairs {', '.join(f'{x:.2f}' for x in pairs)}); wall "
        f"{statistics.median(wall['new']) / statistics.median(wall['old']):.2f}")
    if args.cli:
        same = len(digests["old"] | digests["new"]) == 1
        log(f"identical output files (every run, both sides): {same}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=152_420)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--values", action="store_true", help="three RETURN fields per match")
    p.add_argument("--formats", default="jsonl,csv,parquet")
    p.add_argument("--only", choices=["write", "write_rows"], default=None)
    p.add_argument("--engine-events", type=int, default=None)
    p.add_argument("--table", action="store_true",
                   help="with --engine-events: the MatchTable the CLI hands the writer")
    p.add_argument("--ab", default=None, metavar="OLD_SRC",
                   help="old against new in child processes, alternately")
    p.add_argument("--new", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "src"), help="the new tree's src (with --ab)")
    p.add_argument("--rounds", type=int, default=5, help="old/new pairs (with --ab)")
    p.add_argument("--cli", action="store_true", help="with --ab: the whole kleene run")
    p.add_argument("--query", choices=["stock", "explosion"], default="stock",
                   help="with --table: the stock query (runs plan: column parts) or the "
                        "Kleene explosion (chain plan: blocks)")
    p.add_argument("--json-line", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    log: Callable[[str], None] = lambda s: print(s, flush=True)  # noqa: E731
    if args.ab:
        return _ab(args, log)
    time_info = TimeInfo("datetime", "s")
    matches: Any
    if args.engine_events and args.table:
        matches, time_info = engine_table(args.engine_events, args.query)
        args.n = len(matches)
    elif args.engine_events:
        matches, time_info = engine_matches(args.engine_events)
        args.n = len(matches)
    else:
        matches = stock_like(args.n, values=args.values)
    methods = [args.only] if args.only else ["write", "write_rows"]
    if args.json_line:
        log = lambda s: None  # noqa: E731
    log(f"{args.n:,} matches, RETURN values: {'3 fields' if args.values else 'none'}; "
        f"medians of {args.repeat} runs, alternating")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in args.formats.split(","):
            cpu: dict[str, list[float]] = {m: [] for m in methods}
            wall: dict[str, list[float]] = {m: [] for m in methods}
            sizes = {}
            for _ in range(args.repeat):
                for method in methods:
                    path = os.path.join(tmp, f"{method}.{fmt}")
                    c, w = _run(fmt, matches, path, method, time_info)
                    cpu[method].append(c)
                    wall[method].append(w)
                    sizes[method] = os.path.getsize(path)
            for method in methods:
                c, w = statistics.median(cpu[method]), statistics.median(wall[method])
                log(f"{fmt:8s} {method:10s} cpu {c:6.3f} s  {args.n / c:>11,.0f} matches/s   "
                    f"wall {w:6.3f} s  {args.n / w:>11,.0f} matches/s   {sizes[method]:,} bytes")
            if len(methods) == 2 and fmt != "parquet":
                a, b = (open(os.path.join(tmp, f"{m}.{fmt}"), "rb").read() for m in methods)
                log(f"{fmt:8s} identical bytes: {a == b}   cpu ratio write_rows/write "
                    f"{statistics.median(cpu['write_rows']) / statistics.median(cpu['write']):.2f}")
            if args.json_line:  # for --ab: the first format's medians, one JSON line
                import json

                print(json.dumps({"n": args.n, "cpu": statistics.median(cpu[methods[0]]),
                                  "wall": statistics.median(wall[methods[0]])}), flush=True)
                return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    log(f"peak memory {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
