"""Profile one workload's kleene run with cProfile (for "what the profile shows" in the docs).

Usage::

    python -m benchmarks.profiling stock [--events N] [--top 25] [--cli | --step] [--cpu]

``--cli`` profiles the whole CLI path in-process (``kleene.cli.main:cli`` with the same
arguments the benchmark uses), otherwise ``CompiledQuery.run(batch)`` alone. Prints the top
functions by own time and by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path

from . import child, datasets, queries

Spec = tuple[str, Callable[[int | None], Path], str, str, str | None, str | None]
_SPECS: dict[str, Spec] = {
    # name: (query, csv factory, time col, event type, type col, id col)
    "stock": (queries.STOCK, lambda n: datasets.stock_csv(n or 1_000_000), "ts", "Stock",
              None, "id"),
    "traffic": (queries.TRAFFIC, lambda n: datasets.aarhus_csv(n or 1_000_000), "TIMESTAMP",
                "Traffic", None, None),
    "selective": (queries.SELECTIVE, lambda n: datasets.aarhus_csv(n), "TIMESTAMP", "Traffic",
                  None, None),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workload", choices=sorted(_SPECS))
    p.add_argument("--events", type=int, default=None)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--cli", action="store_true")
    p.add_argument("--cpu", action="store_true",
                   help="time with process_time (CPU seconds: a loaded machine's share of the "
                        "profile stays right; per-call overhead is larger)")
    p.add_argument("--step", action="store_true",
                   help="profile the CLI's match step: start(), columnar hand-over, push + close")
    args = p.parse_args(argv)
    text, make_csv, time_col, etype, type_col, id_col = _SPECS[args.workload]
    csv = make_csv(args.events)
    import kleene

    prof = cProfile.Profile(time.process_time) if args.cpu else cProfile.Profile()
    if args.step:
        batch = child.load_batch(csv, time_col=time_col, event_type=etype, type_col=type_col,
                                 id_col=id_col)
        rt = kleene.compile(text, name=args.workload).start()
        rt.columnar = True  # as the CLI does
        prof.enable()
        rt.push(batch)
        rt.close()
        prof.disable()
    elif args.cli:
        from kleene.cli.main import cli

        qfile = datasets.DATA_DIR / "run" / f"{args.workload}.kleene"
        qfile.parent.mkdir(parents=True, exist_ok=True)
        qfile.write_text(text)
        cli_args = [str(qfile), "--input", str(csv), "--time-col", time_col, "--event-type",
                    etype, "--output", str(Path(qfile).with_suffix(".profile.jsonl"))]
        if id_col:
            cli_args += ["--id-col", id_col]
        prof.enable()
        try:
            cli.main(args=["run", *cli_args], prog_name="kleene", standalone_mode=False)
        finally:
            prof.disable()
    else:
        batch = child.load_batch(csv, time_col=time_col, event_type=etype, type_col=type_col,
                                 id_col=id_col)
        q = kleene.compile(text, name=args.workload)
        prof.enable()
        q.run(batch)
        prof.disable()
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(args.top)
        sys.stdout.write(f"==== sorted by {key} ====\n" + buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
