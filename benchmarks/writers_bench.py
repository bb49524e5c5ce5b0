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

    from . import datasets, queries

    sys.meta_path.insert(0, cli_main._NoPandasForArrow())  # as the `kleene` process does
    events, _ = kleene.read_events(str(datasets.stock_csv(n)), time_col="ts",
                                   event_type="Stock", id_col="id")
    runtime = kleene.compile(queries.STOCK, name="stock").start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out: list[Match] = runtime.push(events)
        out += runtime.close()
    return out, events.time


def _run(fmt: str, matches: list[Match], path: str, method: str,
         time_info: TimeInfo) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    with open_writer(path, fmt, time_info) as w:
        getattr(w, method)(matches)
    return time.process_time() - c0, time.perf_counter() - w0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=152_420)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--values", action="store_true", help="three RETURN fields per match")
    p.add_argument("--formats", default="jsonl,csv,parquet")
    p.add_argument("--only", choices=["write", "write_rows"], default=None)
    p.add_argument("--engine-events", type=int, default=None)
    args = p.parse_args(argv)
    time_info = TimeInfo("datetime", "s")
    if args.engine_events:
        matches, time_info = engine_matches(args.engine_events)
        args.n = len(matches)
    else:
        matches = stock_like(args.n, values=args.values)
    methods = [args.only] if args.only else ["write", "write_rows"]
    log: Callable[[str], None] = lambda s: print(s, flush=True)  # noqa: E731
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
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    log(f"peak memory {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
