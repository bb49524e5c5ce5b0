"""kleene on Spark, end to end on the Aarhus traffic data (docs/spark.md, "Measured numbers").

    python -m benchmarks.spark_bench                      # both months, local[2]
    python -m benchmarks.spark_bench --limit 1000000      # the first 1M events only
    python -m benchmarks.spark_bench --stream 200000      # also replay 200k events as a stream

What is timed, per query (the session start is reported separately, not included):

* ``end to end``: ``kleene.spark.cli.run_query`` exactly as ``kleene run --spark`` runs it:
  read the gzip CSV files (one partition per file; the key shuffle spreads them), type the
  columns, number the rows, match, sort and write one JSON Lines file;
* ``plumbing``: the same pipeline with an evaluator that returns no matches (it still gets every
  group as an EventBatch), so ``engine share = 1 - plumbing / end to end``;
* the keyed congestion query (PARTITION BY REPORT_ID) and an unkeyed query (time split);
* ``cpu_s``: CPU seconds of the driver, the JVM and the Python workers during the run (from
  /proc): on the shared 2-core machine this, not the wall time, says where the work is.

``--stream N`` replays the first N events as Parquet files through ``match_stream`` (file
source, one file per micro-batch) and reports events/s and micro-batch durations.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.datasets import AARHUS_DIR, AARHUS_FILES
from benchmarks.queries import TRAFFIC

AARHUS, FILES = AARHUS_DIR, AARHUS_FILES
ROOT = Path(__file__).resolve().parent.parent

KEYED = TRAFFIC  # the embedded benchmark's congestion query (workload 2), run on Spark

UNKEYED = """PATTERN SEQ(Traffic a, Traffic b)
WHERE a.vehicleCount >= 30 AND b.avgSpeed >= 110
WITHIN 10 minutes
"""


def session(master: str, extra_conf: list[str]) -> Any:
    """The benchmarks' Spark session: workers import ``benchmarks`` (the no-match evaluator),
    4 shuffle partitions, quiet logs; ``extra_conf`` is ``KEY=VALUE`` settings (A/B runs)."""
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT),
                                                             os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from kleene.spark import get_session

    conf = {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "4",
            "spark.ui.showConsoleProgress": "false"}
    conf.update(dict(c.split("=", 1) for c in extra_conf))
    spark = get_session(master, conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def no_match(analyzed: Any, events: Any) -> list[Any]:
    """An evaluator that matches nothing: what Spark costs around the engine."""
    del analyzed, events
    return []


def _load() -> float:
    return os.getloadavg()[0]


def _input(limit: int | None, work: Path) -> tuple[str, int | None]:
    """The input path: both gzip files, or the first ``limit`` rows as one plain CSV."""
    if limit is None:
        return str(AARHUS / "aarhus_traffic_2014-0[89].csv.gz"), None
    import gzip

    path = work / f"aarhus_{limit}.csv"
    with gzip.open(AARHUS / FILES[0], "rt") as src, path.open("w") as dst:
        for i, line in enumerate(src):
            if i > limit:
                break
            dst.write(line)
    return str(path), limit


def cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) used so far by this process ("driver"), the JVM and the
    Python workers (descendants of this process, from /proc; Linux only, else empty).

    On a shared machine wall time mostly measures the other work; CPU seconds do not."""
    if not os.path.isdir("/proc/self"):
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                stat = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(stat[1]), []).append(int(p))
    t = os.times()
    out = {"driver": t.user + t.system, "jvm": 0.0, "python_workers": 0.0}
    todo = [os.getpid()]
    while todo:
        for c in children.get(todo.pop(), []):
            try:
                stat = Path(f"/proc/{c}/stat").read_text().rsplit(")", 1)[1].split()
                name = Path(f"/proc/{c}/comm").read_text().strip()
            except OSError:
                continue
            out["jvm" if "java" in name else "python_workers"] += (
                int(stat[11]) + int(stat[12])) / tick
            todo.append(c)
    return out


def run_one(spark: Any, query: str, path: str, engine: str, out: Path,
            reader: str = "auto") -> dict[str, Any]:
    from kleene.spark.cli import run_query

    load = _load()
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    summary = run_query(query, path, spark=spark, output=str(out), time_col="TIMESTAMP",
                        event_type="Traffic", engine=engine, reader=reader)
    seconds = time.perf_counter() - t0
    cpu = {k: round(v - cpu0.get(k, 0.0), 1) for k, v in cpu_seconds().items()}
    return {"reader": reader, "seconds": round(seconds, 3), "events": summary["events"],
            "matches": summary["matches"], "plan": summary["plan"],
            "events_per_s": round(summary["events"] / seconds), "load": round(load, 1),
            "load_after": round(_load(), 1), "cpu_s": cpu}


def stream_bench(spark: Any, n: int, work: Path, files: int = 10) -> dict[str, Any]:
    """Replay the first ``n`` events (time order, ``files`` Parquet files, one per
    micro-batch) through match_stream; benchmarks/spark_stream_bench.py has the options."""
    from benchmarks.spark_stream_bench import run_stream, stage

    res = run_stream(spark, stage(spark, n, files, work), work / "stream_run", per_trigger=1)
    del res["records"], res["progress"]
    return res


@contextmanager
def scratch(spark: Any, prefix: str) -> Iterator[Path]:
    """A temporary work folder for a benchmark's runs; on the way out, even after an error,
    the folder is removed and the session stopped."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


def save(results: dict[str, Any], path: str | None) -> None:
    """Write ``results`` as indented JSON to ``path`` (``--json``), if given."""
    if path:
        Path(path).write_text(json.dumps(results, indent=2) + "\n")


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--limit", type=int, default=None, help="first N events only")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--only", default="keyed,unkeyed", help="keyed, unkeyed (comma list)")
    ap.add_argument("--no-plumbing", action="store_true", help="skip the no-match runs")
    ap.add_argument("--stream", type=int, default=0, help="replay N events as a stream")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra Spark setting for the session (repeatable), for A/B runs")
    ap.add_argument("--reader", default="auto",
                    help="CSV reader: auto, arrow (kleene's, in Spark tasks) or spark (Spark's "
                         "CSV source); a comma list alternates them within each repeat (A/B)")
    ap.add_argument("--warmup", action="store_true",
                    help="run the keyed no-match pipeline once first (JVM JIT warm-up, untimed)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    spark = session(args.master, args.conf)
    results: dict[str, Any] = {"master": args.master, "session_start_s":
                               round(time.perf_counter() - t0, 2), "runs": []}
    with scratch(spark, "kleene-spark-bench-") as work:
        path, _ = _input(args.limit, work)
        queries = {"keyed": KEYED, "unkeyed": UNKEYED}
        if args.warmup:
            run_one(spark, KEYED, path, "benchmarks.spark_bench:no_match", work / "warm.jsonl")
        for name in args.only.split(","):
            for engine in ["automaton"] + ([] if args.no_plumbing else
                                           ["benchmarks.spark_bench:no_match"]):
                for r in range(args.repeats):
                    for reader in args.reader.split(","):
                        res = run_one(spark, queries[name], path, engine,
                                      work / f"{name}.jsonl", reader)
                        res.update(query=name, engine=engine.split(":")[-1], repeat=r)
                        print(json.dumps(res), flush=True)
                        results["runs"].append(res)
        for name in args.only.split(","):
            for reader in args.reader.split(","):
                runs = [r for r in results["runs"] if r["query"] == name and r["reader"] == reader]
                full = _median([r["seconds"] for r in runs if r["engine"] == "automaton"])
                plumb = _median([r["seconds"] for r in runs if r["engine"] == "no_match"])
                rates = [r["events_per_s"] for r in runs if r["engine"] == "automaton"]
                summary: dict[str, Any] = {"query": name, "reader": reader,
                                           "median_events_per_s": _median(rates)}
                if full and plumb:
                    summary.update(plumbing_share=round(plumb / full, 2),
                                   engine_share=round(1 - plumb / full, 2))
                print(json.dumps(summary))
                results.setdefault("summary", []).append(summary)
        if args.stream:
            res = stream_bench(spark, args.stream, work)
            print(json.dumps({"stream": res}))
            results["stream"] = res
    save(results, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
