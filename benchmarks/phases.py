"""CPU and wall seconds of each step of a ``kleene run`` on the stock workload, in-process.

The steps are the CLI's (read the CSV, match with the automaton engine, write JSON Lines), run
through the same functions the CLI calls (``read_events``, ``CompiledQuery.start().push`` and
``close``, ``open_writer``), as the CLI keeps pyarrow from importing pandas (``measure.as_console``). CPU seconds (``time.process_time``) are given beside wall seconds
because a shared machine's load inflates wall time far more than CPU time. Run::

    python -m benchmarks.phases [--events 1000000] [--format jsonl] [--out PATH]

It prints one line ``PHASES {json}``; run it under two source trees alternately to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from typing import Any

from . import datasets, queries


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--format", default="jsonl", choices=["jsonl", "csv", "parquet"])
    p.add_argument("--out", default=None, help="the output file (default: a temporary one)")
    args = p.parse_args(argv)
    csv = datasets.stock_csv(args.events)

    import kleene
    from kleene.cli import main as cli_main
    from kleene.events.writers import open_writer

    # as the `kleene` process does: pyarrow may not import pandas for kleene's own arrays
    from .measure import as_console

    as_console(cli_main)

    out: dict[str, Any] = {"events": args.events}
    clock = (time.process_time, time.perf_counter)

    def step(name: str, t0: tuple[float, float]) -> tuple[float, float]:
        now = (clock[0](), clock[1]())
        out[f"{name}_cpu_s"] = round(now[0] - t0[0], 3)
        out[f"{name}_wall_s"] = round(now[1] - t0[1], 3)
        return now

    t = (clock[0](), clock[1]())
    query = kleene.compile(queries.STOCK, name="stock")
    t = step("compile", t)
    events, _ = kleene.read_events(str(csv), time_col="ts", event_type="Stock", id_col="id")
    t = step("read", t)
    runtime = query.start()
    # as the CLI does: a plan that finds its matches as arrays hands them over as columns
    runtime.columnar = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        matches = runtime.push(events)
        matches += runtime.close()
    t = step("match", t)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.out or os.path.join(tmp, f"out.{args.format}")
        with open_writer(path, args.format, events.time) as w:
            w.write(matches)
        t = step("write", t)
        out["output_bytes"] = os.path.getsize(path)
    out["matches"] = len(matches)
    print("PHASES " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
