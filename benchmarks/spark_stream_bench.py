"""``kleene.spark.match_stream`` on the Aarhus traffic data: throughput and micro-batch latency.

    python -m benchmarks.spark_stream_bench                         # 100k events, 1 file/batch
    python -m benchmarks.spark_stream_bench --events 200000 --files 20 --per-trigger 2
    python -m benchmarks.spark_stream_bench --repeats 3 --json out.json

The first N events of August (time order) are staged once as ``--files`` Parquet files plus a
far-future sentinel (kept in ``--stage`` for later runs), then replayed through ``match_stream``
with the keyed congestion query (``benchmarks.spark_bench.KEYED``, watermark 10 minutes) and the
file source (``maxFilesPerTrigger = --per-trigger``, ``trigger(availableNow=True)``), JSON sink.

Reported per run: wall time from ``start()`` to termination, events/s, the number of
micro-batches with data and their ``triggerExecution`` durations (median / max), the number of
matches, and whether the matches equal ``kleene.spark.match`` (batch) on the same events
(``same_as_batch``: every JSON record, in output order). The 1-minute load average is recorded
before each run: the machine is shared, read every number with its load.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.spark_bench import AARHUS, FILES, KEYED, save, scratch, session


def stage(spark: Any, n: int, files: int, where: Path) -> Path:
    """The first ``n`` events as ``files`` Parquet files plus a sentinel, in ``where``."""
    from pyspark.sql import functions as F

    from kleene.spark.cli import _parse_time_strings, read_input

    src = where / f"src_{n}_{files}"
    if (src / "zzzz_sentinel.parquet").exists():
        return src
    shutil.rmtree(src, ignore_errors=True)
    df, _, cached = read_input(spark, [str(AARHUS / FILES[0])], "csv")
    df = _parse_time_strings(df, "TIMESTAMP")
    df = df.withColumnRenamed("__kleene_row", "id").where(F.col("id") < n)
    chunk = max(1, n // files)
    df = df.withColumn("chunk", (F.col("id") / chunk).cast("int"))
    staged = where / f"staged_{n}_{files}"
    shutil.rmtree(staged, ignore_errors=True)
    df.repartition("chunk").write.partitionBy("chunk").parquet(str(staged))
    if cached is not None:
        cached.unpersist()
    src.mkdir(parents=True)
    parts = sorted(staged.glob("chunk=*"), key=lambda p: int(p.name.split("=")[1]))
    for j, p in enumerate(parts):
        for k, f in enumerate(sorted(p.glob("*.parquet"))):
            dst = src / f"part{j:04d}_{k}.parquet"
            shutil.copy(f, dst)
            os.utime(dst, (1_700_000_000 + j * 10, 1_700_000_000 + j * 10))
    schema = spark.read.parquet(str(src)).schema
    sentinel = spark.createDataFrame(
        [tuple({"id": 10**12, "REPORT_ID": -1}.get(f.name) for f in schema.fields)], schema)
    sentinel = sentinel.withColumn("TIMESTAMP",
                                   F.to_timestamp_ntz(F.lit("2200-01-01 00:00:00")))
    sentinel.coalesce(1).write.parquet(str(where / "sentinel"), mode="overwrite")
    for f in (where / "sentinel").glob("*.parquet"):
        dst = src / "zzzz_sentinel.parquet"
        shutil.copy(f, dst)
        stamp = 1_700_000_000 + (len(parts) + 1) * 10
        os.utime(dst, (stamp, stamp))
    shutil.rmtree(staged, ignore_errors=True)
    return src


def batch_records(spark: Any, src: Path) -> list[str]:
    """``kleene.spark.match`` over the same events (without the sentinel), in output order."""
    from kleene.spark import match
    from kleene.spark.tasks import END_US, LAST_POS, SEQ

    df = spark.read.parquet(*[str(p) for p in sorted(src.glob("part*.parquet"))])
    m = match(df, KEYED, time_col="TIMESTAMP", event_type="Traffic", id_col="id",
              output="json")
    return [r[0] for r in m.orderBy(END_US, LAST_POS, SEQ).select("record").collect()]


def run_stream(spark: Any, src: Path, work: Path, per_trigger: int,
               impl: str = "kleene.spark.stream", buckets: int | None = None) -> dict[str, Any]:
    import importlib

    from kleene.spark.stream import CHANGELOG as changelog
    from kleene.spark.tasks import END_US, LAST_POS, SEQ

    match_stream = importlib.import_module(impl).match_stream

    schema = spark.read.parquet(str(src)).schema
    sdf = (spark.readStream.schema(schema).option("maxFilesPerTrigger", per_trigger)
           .parquet(str(src)))
    extra = {} if buckets is None else {"buckets": buckets}
    m = match_stream(sdf, KEYED, watermark="10 minutes", time_col="TIMESTAMP",
                     event_type="Traffic", id_col="id", output="json", **extra)
    shutil.rmtree(work, ignore_errors=True)
    before = spark.conf.get(changelog, None)  # match_stream may set it: runs stay independent
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    q = (m.writeStream.format("json").option("checkpointLocation", str(work / "ck"))
         .option("path", str(work / "out")).trigger(availableNow=True).start())
    q.awaitTermination()
    seconds = time.perf_counter() - t0
    if before is None:
        spark.conf.unset(changelog)
    progress = q.recentProgress
    durations = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress
                 if p.get("numInputRows", 0) > 0]
    n = sum(p.get("numInputRows", 0) for p in progress)
    out = spark.read.schema(f"kind string, record string, {END_US} long, {LAST_POS} long, "
                            f"{SEQ} long").json(str(work / "out"))
    records = [r[0] for r in out.where("kind = 'match'").orderBy(END_US, LAST_POS, SEQ)
               .select("record").collect()]
    return {"events": n, "seconds": round(seconds, 3), "events_per_s": round(n / seconds),
            "micro_batches": len(durations), "batches_total": len(progress),
            "batch_s_median": round(statistics.median(durations), 3) if durations else None,
            "batch_s_max": round(max(durations), 3) if durations else None,
            "batch_s": [round(d, 2) for d in durations],
            "matches": len(records), "records": records, "load": round(load, 2),
            "progress": [{"rows": p.get("numInputRows", 0), **p["durationMs"],
                          "state": [{k: v for k, v in o.items() if k.endswith("Ms")
                                     or k.startswith("num")}
                                    for o in p.get("stateOperators", [])]}
                         for p in progress]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--per-trigger", default="1", help="maxFilesPerTrigger (comma list)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--stage", default=None, help="folder for the staged files (kept)")
    ap.add_argument("--impl", default="kleene.spark.stream",
                    help="module(s) with match_stream to compare (comma list; importable "
                         "by the workers; MODULE:N passes buckets=N)")
    ap.add_argument("--conf", action="append", default=[], help="KEY=VALUE Spark conf")
    ap.add_argument("--progress", action="store_true", help="print each micro-batch's "
                    "durations and state operator metrics")
    ap.add_argument("--ab-conf", action="append", default=[],
                    help="KEY=VALUE: also run every variant with this session conf set")
    ap.add_argument("--warmup", action="store_true", help="run one untimed stream first")
    ap.add_argument("--no-check", action="store_true", help="skip the batch comparison")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)

    spark = session(args.master, args.conf)
    stage_dir = Path(args.stage or tempfile.gettempdir()) / "kleene-stream-bench"
    results: dict[str, Any] = {"master": args.master, "conf": args.conf, "runs": []}
    with scratch(spark, "kleene-stream-run-") as work:
        src = stage(spark, args.events, args.files, stage_dir)
        expected = None if args.no_check else batch_records(spark, src)
        if args.warmup:  # JVM JIT, Python workers, RocksDB: the first stream pays for them
            impl, _, b = args.impl.split(",")[0].partition(":")
            run_stream(spark, src, work / "warmup", 1, impl, int(b) if b else None)
        for r in range(args.repeats):
            for per in [int(x) for x in args.per_trigger.split(",")]:
                for variant, ab in [(v, ab) for v in args.impl.split(",")
                                    for ab in ([None] + args.ab_conf)]:
                    impl, _, b = variant.partition(":")
                    if ab is not None:
                        spark.conf.set(*ab.split("=", 1))
                    res = run_stream(spark, src, work / f"run_{per}_{r}", per, impl,
                                     int(b) if b else None)
                    if ab is not None:
                        spark.conf.unset(ab.split("=", 1)[0])
                        res["ab_conf"] = ab
                    records = res.pop("records")
                    progress = res.pop("progress")
                    if args.progress:
                        for p in progress:
                            print("  ", json.dumps(p), flush=True)
                    res.update(impl=variant, per_trigger=per, repeat=r,
                               digest=hashlib.sha256("\n".join(records).encode())
                               .hexdigest()[:16])
                    if expected is not None:
                        res["same_as_batch"] = records == expected
                    print(json.dumps(res), flush=True)
                    results["runs"].append(res)
    save(results, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
