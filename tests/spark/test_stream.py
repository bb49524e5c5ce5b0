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


def _run(spark: Any, src: Path, out: Path, ck: Path, per_trigger: int) -> None:
    sdf = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", per_trigger)
           .json(str(src)))
    m = match_stream(sdf, QUERY, watermark="2 seconds", time_col="ts", type_col="type",
                     id_col="id", output="json")
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

    # uninterrupted: every file present, two files per micro-batch
    src = tmp_path / "all"
    for j, ch in enumerate(chunks):
        _write(src, f"p{j}.jsonl", ch)
    _write(src, "p1late.jsonl", [late_row])
    _write(src, "p3.jsonl", [SENTINEL])
    _run(spark, src, tmp_path / "out_all", tmp_path / "ck_all", per_trigger=2)
    whole, whole_late = _read(spark, tmp_path / "out_all")

    # interrupted: stop after the first files, add the rest, restart from the checkpoint
    src2 = tmp_path / "parts"
    _write(src2, "p0.jsonl", chunks[0])
    _write(src2, "p1.jsonl", chunks[1])
    _write(src2, "p1late.jsonl", [late_row])
    _run(spark, src2, tmp_path / "out", tmp_path / "ck", per_trigger=1)
    first, _ = _read(spark, tmp_path / "out")
    assert 0 < len(first) < len(expected)  # some matches before the stop, not all
    _write(src2, "p2.jsonl", chunks[2])
    _write(src2, "p3.jsonl", [SENTINEL])
    _run(spark, src2, tmp_path / "out", tmp_path / "ck", per_trigger=1)
    resumed, resumed_late = _read(spark, tmp_path / "out")

    assert whole == expected
    assert resumed == expected  # nothing lost, nothing duplicated across the restart
    assert whole_late == resumed_late == [999]
