"""kleene.spark.match_stream: Structured Streaming with event time, restart from checkpoint."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from kleene_spark_helpers import embedded_lines, random_rows

from kleene.spark import match_stream
from kleene.spark.tasks import END_US, LAST_POS, SEQ

pytestmark = pytest.mark.spark

QUERY = "PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k WITHIN 8 seconds"
SCHEMA = "id long, ts long, type string, k string, x long"
SENTINEL = {"id": 10**6, "ts": 10**9, "type": "END", "k": "zz", "x": 0}  # pushes the watermark


def _write(folder: Path, name: str, rows: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the file source takes files in modification-time order: make it the name order
    stamp = 1_700_000_000 + len(list(folder.glob("p*"))) * 10
    os.utime(tmp, (stamp, stamp))
    tmp.rename(folder / name)  # the file source must never see a half-written file


def _run(spark: Any, src: Path, out: Path, ck: Path, per_trigger: int, **options: Any) -> None:
    sdf = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", per_trigger)
           .json(str(src)))
    m = match_stream(sdf, QUERY, watermark="2 seconds", time_col="ts", type_col="type",
                     id_col="id", output="json", **options)
    q = (m.writeStream.format("json").option("checkpointLocation", str(ck))
         .option("path", str(out)).trigger(availableNow=True).start())
    q.awaitTermination()


def _read(spark: Any, out: Path) -> tuple[list[str], list[Any]]:
    df = spark.read.schema(f"kind string, record string, {END_US} long, {LAST_POS} long, "
                           f"{SEQ} long, late_id long").json(str(out))
    matches = [r[0] for r in df.where("kind = 'match'").orderBy(END_US, LAST_POS, SEQ)
               .select("record").collect()]
    late = [r[0] for r in df.where("kind = 'late'").select("late_id").collect()]
    return matches, late


def test_stream_restart_equals_uninterrupted_and_embedded(spark: Any, tmp_path: Path) -> None:
    rows = random_rows(3, n=48, keys=2, types="AB")
    for i, r in enumerate(rows):
        r["id"] = i
    expected = embedded_lines(QUERY, [{k: v for k, v in r.items() if k != "id"} for r in rows],
                              "automaton")
    assert len(expected) >= 8
    chunks = [rows[0:16], rows[16:32], rows[32:48]]
    # behind kleene's watermark (max ts - 2 s) once chunk 1 is in, within Spark's (- 2 s more)
    late_row = {"id": 999, "ts": rows[31]["ts"] - 3, "type": "A", "k": "k0", "x": 0}

    # uninterrupted: every file present, two files per micro-batch, the keys hashed into the
    # default number of state buckets
    src = tmp_path / "all"
    for j, ch in enumerate(chunks):
        _write(src, f"p{j}.jsonl", ch)
    _write(src, "p1late.jsonl", [late_row])
    _write(src, "p3.jsonl", [SENTINEL])
    _run(spark, src, tmp_path / "out_all", tmp_path / "ck_all", per_trigger=2)
    whole, whole_late = _read(spark, tmp_path / "out_all")

    # interrupted: stop after the first files, add the rest, restart from the checkpoint; one
    # state bucket, so both keys share one engine and one stored snapshot
    src2 = tmp_path / "parts"
    _write(src2, "p0.jsonl", chunks[0])
    _write(src2, "p1.jsonl", chunks[1])
    _write(src2, "p1late.jsonl", [late_row])
    _run(spark, src2, tmp_path / "out", tmp_path / "ck", per_trigger=1, buckets=1)
    first, _ = _read(spark, tmp_path / "out")
    assert 0 < len(first) < len(expected)  # some matches before the stop, not all
    _write(src2, "p2.jsonl", chunks[2])
    _write(src2, "p3.jsonl", [SENTINEL])
    _run(spark, src2, tmp_path / "out", tmp_path / "ck", per_trigger=1, buckets=1)
    resumed, resumed_late = _read(spark, tmp_path / "out")

    assert whole == expected
    assert resumed == expected  # nothing lost, nothing duplicated across the restart
    assert whole_late == resumed_late == [999]


def test_restart_with_other_bucket_count_fails_clearly(spark: Any, tmp_path: Path) -> None:
    """The keys' state lives in hash buckets: a restart with another number of buckets would
    lose it silently, so it must fail and say why."""
    from pyspark.errors import StreamingQueryException

    rows = random_rows(5, n=24, keys=3, types="AB")
    for i, r in enumerate(rows):
        r["id"] = i
    src = tmp_path / "src"
    _write(src, "p0.jsonl", rows[:12])
    _run(spark, src, tmp_path / "out", tmp_path / "ck", per_trigger=1, buckets=2)
    _write(src, "p1.jsonl", rows[12:])
    _write(src, "p2.jsonl", [SENTINEL])
    with pytest.raises(StreamingQueryException, match=r"buckets=2.*buckets=3"):
        _run(spark, src, tmp_path / "out", tmp_path / "ck", per_trigger=1, buckets=3)


def test_bucket_count_is_checked(spark: Any, tmp_path: Path) -> None:
    from kleene.errors import InputError

    sdf = spark.readStream.schema(SCHEMA).json(str(tmp_path))
    for bad in (0, -1, 2.5, True, 1 << 20):
        with pytest.raises(InputError, match="buckets="):
            match_stream(sdf, QUERY, watermark="2 seconds", time_col="ts", type_col="type",
                         id_col="id", buckets=bad)


def test_replay_runs_many_pairs_in_one_streaming_query(spark: Any) -> None:
    """evaluate_stream_many (the ``spark-stream`` backend's batch function) runs every pair in
    ONE streaming query with one stateful operator; each pair equals the oracle, whatever its
    id and attribute types, and a pair that fails at run time fails alone."""
    import math

    from pyspark.sql.streaming import StreamingQueryListener

    from kleene.api import analyze
    from kleene.events import EventBatch
    from kleene.spark.backend import evaluate_stream_many
    from kleene.testing.oracle import evaluate as oracle
    from kleene.testing.timeline import events

    picks = events("a1@1 a2@2 b1@3 c1@4")
    ints = EventBatch.from_records([  # integer ids, a text attribute named like others' int x
        {"id": 7, "type": "A", "ts": 0, "k": 1, "x": "p"},
        {"id": 3, "type": "B", "ts": 0, "k": 1, "x": "q"},
        {"id": 5, "type": "A", "ts": 2, "k": 2, "x": "r"},
        {"id": 9, "type": "B", "ts": 3, "k": 2, "x": "a"},
        {"id": 1, "type": "B", "ts": 4, "k": 1, "x": "z"}])
    cases = [
        ("PATTERN SEQ(A a, B b, C c) PICK FIRST a", picks),
        ("PATTERN SEQ(A a, B b, C c) PICK LAST a", picks),
        ("PATTERN SEQ(A+ a[], B b) PICK FIRST a", events("a1@1 a2@2 b1@3")),
        ("PATTERN SEQ(A a, B b) PICK FIRST a WITHIN 2 seconds FROM b",
         events("a1@1 a2@2 a3@3 b1@4")),
        # an event at time 0: Spark's watermark starts at 0 and drops rows at or before it
        ("PATTERN SEQ(A a, B b) WITHIN 1 minutes", events("a1@0 b1@60 b2@61")),
        ("PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k",
         events("a1@1 b1@2 a2@3 b2@4", a1={"k": "u", "x": 1}, b1={"k": "u", "x": 2},
                a2={"k": "v", "x": 5}, b2={"k": "v", "x": 9})),
        ("PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k", ints),
        ("PATTERN SEQ(A a, B b)", EventBatch(picks.table.slice(0, 0), picks.time)),
    ]
    pairs = [(analyze(q), s) for q, s in cases]
    failing = analyze("PATTERN SEQ(A a, B b) WHERE root(a.x) > 0", udfs={"root": math.sqrt})
    pairs.insert(3, (failing, events("a1@1 b1@2", a1={"x": -1})))

    class Starts(StreamingQueryListener):
        def __init__(self) -> None:
            self.started = 0

        def onQueryStarted(self, event: Any) -> None:
            self.started += 1

        def onQueryProgress(self, event: Any) -> None:
            return None

        def onQueryIdle(self, event: Any) -> None:
            return None

        def onQueryTerminated(self, event: Any) -> None:
            return None

    starts = Starts()
    spark.streams.addListener(starts)
    try:
        got = evaluate_stream_many(pairs)
    finally:
        spark.streams.removeListener(starts)
    assert starts.started == 1
    assert isinstance(got[3], Exception) and "math domain error" in str(got[3])
    for k, ((aq, stream), result) in enumerate(zip(pairs, got, strict=True)):
        if k != 3:
            assert not isinstance(result, Exception), (aq.query, result)
            assert result == oracle(aq, stream), aq.query
    assert all(got[k] for k in (0, 1, 2, 4, 5, 6, 7))  # every case above has matches


def test_a_group_whose_oldest_row_is_at_time_0_is_not_lost(spark: Any, tmp_path: Path) -> None:
    """Spark fires no timer at or before 0: a group holding a row at time 0 once kept a negative
    timer, was never called again, and every match of the group was lost (silently)."""
    rows = [{"id": i, "ts": i, "type": "AB"[i % 2], "k": f"k{i % 3}", "x": (i * 7) % 5}
            for i in range(30)]
    expected = embedded_lines(QUERY, [{k: v for k, v in r.items() if k != "id"} for r in rows],
                              "automaton")
    assert len(expected) >= 5
    src = tmp_path / "in"
    _write(src, "p0.jsonl", [*rows, SENTINEL])  # one micro-batch, then the watermark moves
    _run(spark, src, tmp_path / "out", tmp_path / "ck", per_trigger=1, buckets=1)
    matches, late = _read(spark, tmp_path / "out")
    assert matches == expected and late == []


def test_integers_beyond_2_53_next_to_nulls_stay_exact(spark: Any, tmp_path: Path) -> None:
    """pandas turns an integer column with NULLs into floats: 2**53 + 1 became 2**53 (a wrong
    answer to ``b.x > a.x``), and 2**63 - 1 failed the streaming query. Found by the long
    differential run of the ``spark-stream`` backend with wild values."""
    big = 2**53
    xs = [big, big + 1, None, 2**63 - 1, big + 1, None, -(2**63), big]  # A, B, A, B, ...
    query = "PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k WITHIN 8 seconds RETURN b.x"
    expected, got = _stream_and_embedded(spark, tmp_path, query, xs, "x long")
    assert f'"match": {{"a": 0, "b": 1}}, "start": 0, "end": 1, "values": {{"b.x": {big + 1}}}' \
        in expected[0]
    assert got == expected


def test_nan_is_not_null_in_a_stream(spark: Any, tmp_path: Path) -> None:
    """pandas gives NULL and NaN in a float column the same NaN: ``b.x != b.x`` (TRUE for NaN,
    NULL for NULL) lost its matches and ``RETURN b.x`` wrote null for NaN."""
    nan = float("nan")
    xs = [1.0, nan, None, None, 2.0, nan, nan, 3.0]  # A, B, A, B, ...
    query = ("PATTERN SEQ(A a, B b) WHERE b.x != b.x OR b.x IS NULL PARTITION BY k "
             "WITHIN 8 seconds RETURN b.x, b.x IS NULL AS missing")
    expected, got = _stream_and_embedded(spark, tmp_path, query, xs, "x double")
    assert any('"missing": true' in e for e in expected)
    assert any('"missing": false' in e for e in expected)
    assert got == expected


def _stream_and_embedded(spark: Any, tmp_path: Path, query: str, xs: list[Any],
                         x_type: str) -> tuple[list[str], list[str]]:
    """The embedded engine's JSON Lines and match_stream's for events A, B, A, B, ... of one
    key with the values ``xs`` (one micro-batch, then the sentinel moves the watermark)."""
    rows = [{"id": i, "ts": i, "type": "AB"[i % 2], "k": "k0", "x": x}
            for i, x in enumerate(xs)]
    expected = embedded_lines(query, [{k: v for k, v in r.items() if k != "id"} for r in rows],
                              "automaton")
    src = tmp_path / "in"
    src.mkdir()
    schema = SCHEMA.replace("x long", x_type)
    # JSON has no NaN: Parquet carries it
    spark.createDataFrame([tuple(r[c] for c in ("id", "ts", "type", "k", "x"))
                           for r in [*rows, {**SENTINEL, "x": None}]], schema) \
        .coalesce(1).write.parquet(str(src / "p0"))
    sdf = spark.readStream.schema(schema).parquet(str(src / "p0"))
    m = match_stream(sdf, query, watermark="2 seconds", time_col="ts", type_col="type",
                     id_col="id", output="json", buckets=1)
    out = tmp_path / "out"
    q = (m.writeStream.format("json").option("checkpointLocation", str(tmp_path / "ck"))
         .option("path", str(out)).trigger(availableNow=True).start())
    q.awaitTermination()
    matches, late = _read(spark, out)
    assert late == []
    return expected, matches
