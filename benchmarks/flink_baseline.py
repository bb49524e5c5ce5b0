"""PyFlink MATCH_RECOGNIZE baseline for the stock workload (runs in benchmarks/.venv-flink).

PyFlink cannot share a virtualenv with pyspark (Beam pins pyarrow<17, pyspark needs >=18), so
the harness runs this file with the Flink venv's interpreter; it imports only the standard
library and pyflink, never kleene. It prints one JSON object on stdout.

The query is the ``(A B+ C)`` equivalent of the kleene stock query::

    PARTITION BY symbol ORDER BY ts
    PATTERN (A B+ C) WITHIN INTERVAL '10' MINUTE
    DEFINE B AS (LAST(B.price, 1) IS NULL AND B.price > A.price) OR B.price > LAST(B.price, 1),
           C AS C.price < A.price

(Flink 2.3 rejects ``PREV(B.price)``: "Flink does not support physical offsets within
partition"; the ``LAST(B.price, 1)`` form is equivalent on contiguous rows.)

Commands:
  bench  time the query into a blackhole sink: one warm-up job, then ``--repeats`` jobs, plus a
         scan-only job (CSV -> blackhole) to show the per-job overhead
  dump   write every match as ``a_id,b_first,b_last,c_id`` (B+ is contiguous, so these four ids
         identify the match) to a CSV, to compare the match set with kleene's
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time

SKIPS = {"next-row": "SKIP TO NEXT ROW", "past-last": "SKIP PAST LAST ROW"}


def _env(mode: str, parallelism: int):  # type: ignore[no-untyped-def]
    from pyflink.table import EnvironmentSettings, TableEnvironment

    settings = (EnvironmentSettings.in_batch_mode() if mode == "batch"
                else EnvironmentSettings.in_streaming_mode())
    t_env = TableEnvironment.create(settings)
    conf = t_env.get_config()
    conf.set("parallelism.default", str(parallelism))
    conf.set("table.exec.resource.default-parallelism", str(parallelism))
    return t_env


def _source_ddl(path: str, mode: str) -> str:
    wm = ",\n  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND" if mode == "streaming" else ""
    return f"""CREATE TEMPORARY TABLE stock (
  id BIGINT, symbol STRING, ts TIMESTAMP(3), price DOUBLE, volume BIGINT{wm}
) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')"""


def match_query(skip: str) -> str:
    """The MATCH_RECOGNIZE select (``skip`` is a key of SKIPS)."""
    return f"""SELECT a_id, b_first, b_last, c_id FROM stock MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES A.id AS a_id, FIRST(B.id) AS b_first, LAST(B.id) AS b_last, C.id AS c_id
  ONE ROW PER MATCH
  AFTER MATCH {SKIPS[skip]}
  PATTERN (A B+ C) WITHIN INTERVAL '10' MINUTE
  DEFINE
    B AS (LAST(B.price, 1) IS NULL AND B.price > A.price) OR B.price > LAST(B.price, 1),
    C AS C.price < A.price
)"""


def _timed(t_env, sql: str) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    t_env.execute_sql(sql).wait()
    return time.perf_counter() - t0


def bench(args: argparse.Namespace) -> dict[str, object]:
    """Time the MATCH_RECOGNIZE job and a scan job in one TableEnvironment."""
    t_start = time.perf_counter()
    t_env = _env(args.mode, args.parallelism)
    env_s = time.perf_counter() - t_start
    t_env.execute_sql(_source_ddl(os.path.abspath(args.csv), args.mode))
    t_env.execute_sql("CREATE TEMPORARY TABLE sink_m (a_id BIGINT, b_first BIGINT, b_last BIGINT,"
                      " c_id BIGINT) WITH ('connector' = 'blackhole')")
    t_env.execute_sql("CREATE TEMPORARY TABLE sink_s (id BIGINT, symbol STRING, ts TIMESTAMP(3),"
                      " price DOUBLE, volume BIGINT) WITH ('connector' = 'blackhole')")
    q = f"INSERT INTO sink_m {match_query(args.skip)}"
    runs = [_timed(t_env, q) for _ in range(args.repeats + 1)]  # runs[0] = warm-up
    scans = [_timed(t_env, "INSERT INTO sink_s SELECT * FROM stock") for _ in range(2)]
    out: dict[str, object] = {
        "mode": args.mode, "parallelism": args.parallelism, "skip": args.skip,
        "env_create_s": env_s, "warmup_s": runs[0], "runs_s": runs[1:],
        "scan_s": scans[-1], "process_s": time.perf_counter() - t_start,
    }
    if args.count:
        out["matches"] = count(args)
    return out


def count(args: argparse.Namespace) -> int:
    """Count the matches in batch mode (streaming collect of a COUNT is very slow)."""
    t_env = _env("batch", args.parallelism)
    t_env.execute_sql(_source_ddl(os.path.abspath(args.csv), "batch"))
    with t_env.execute_sql(f"SELECT COUNT(*) FROM ({match_query(args.skip)})").collect() as rows:
        return int(next(iter(rows))[0])


def dump(args: argparse.Namespace) -> dict[str, object]:
    """Write all matches to ``args.out`` as CSV lines ``a_id,b_first,b_last,c_id``."""
    t_env = _env("batch", 1)
    t_env.execute_sql(_source_ddl(os.path.abspath(args.csv), "batch"))
    tmpdir = tempfile.mkdtemp(prefix="flink_dump_")
    try:
        t_env.execute_sql(f"""CREATE TEMPORARY TABLE sink_f (a_id BIGINT, b_first BIGINT,
            b_last BIGINT, c_id BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmpdir}',
            'format' = 'csv')""")
        t0 = time.perf_counter()
        t_env.execute_sql(f"INSERT INTO sink_f {match_query(args.skip)}").wait()
        secs = time.perf_counter() - t0
        n = 0
        with open(args.out, "w") as out:
            for part in sorted(glob.glob(os.path.join(tmpdir, "**", "*"), recursive=True)):
                if os.path.isfile(part) and not os.path.basename(part).startswith("."):
                    with open(part) as f:
                        for line in f:
                            out.write(line)
                            n += 1
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return {"skip": args.skip, "matches": n, "seconds": secs, "out": args.out}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--csv", required=True, help="header-less stock CSV")
    b.add_argument("--mode", choices=("streaming", "batch"), default="streaming")
    b.add_argument("--parallelism", type=int, default=1)
    b.add_argument("--skip", choices=sorted(SKIPS), default="next-row")
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--count", action="store_true", help="also count the matches (batch job)")
    d = sub.add_parser("dump")
    d.add_argument("--csv", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--skip", choices=sorted(SKIPS), default="next-row")
    args = p.parse_args(argv)
    result = bench(args) if args.cmd == "bench" else dump(args)
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
