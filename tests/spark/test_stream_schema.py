"""Issue 16: ``kleene.spark.match_stream`` checks the query against the stream's schema before
the stream starts, with :func:`kleene.spark.match`'s errors (the same check, the same text)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kleene
import kleene.spark as ks
from kleene.errors import QueryValidationError

pytestmark = pytest.mark.spark

SCHEMA = "id long, ts long, type string, sensor string, avgSpeed double"
ROWS = [  # sensor s1: 70 then 20 (a drop); s2: 30 then 40; an END row moves the watermark
    {"id": 0, "ts": 1, "type": "T", "sensor": "s1", "avgSpeed": 70.0},
    {"id": 1, "ts": 2, "type": "T", "sensor": "s2", "avgSpeed": 30.0},
    {"id": 2, "ts": 3, "type": "T", "sensor": "s1", "avgSpeed": 20.0},
    {"id": 3, "ts": 4, "type": "T", "sensor": "s2", "avgSpeed": 40.0},
    {"id": 4, "ts": 1000, "type": "END", "sensor": "s9", "avgSpeed": 0.0},
]
GOOD = "PATTERN SEQ(T a, T b) WHERE b.avgSpeed < a.avgSpeed PARTITION BY sensor WITHIN 10 seconds"
BAD = {
    # a misspelt attribute, a misspelt PARTITION BY column, string against number (both ways)
    GOOD.replace("b.avgSpeed", "b.avgspeed"):
        "the DataFrame has no column 'avgspeed' (did you mean 'avgSpeed'?)",
    GOOD.replace("BY sensor", "BY Sensor"):
        "PARTITION BY Sensor: the DataFrame has no column 'Sensor' (did you mean 'sensor'?)",
    GOOD.replace("a.avgSpeed", "'slow'"): "'slow'",
    GOOD.replace("b.avgSpeed < a.avgSpeed", "a.sensor > 3"): "a.sensor",
}


def _stream(spark: Any, tmp_path: Path) -> Any:
    src = tmp_path / "in"
    src.mkdir()
    (src / "p0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return spark.readStream.schema(SCHEMA).json(str(src))


def test_stream_query_errors_are_the_batch_errors(spark: Any, tmp_path: Path) -> None:
    sdf = _stream(spark, tmp_path)
    assert sdf.isStreaming
    df = spark.createDataFrame([tuple(r.values()) for r in ROWS[:4]], SCHEMA)
    for query, message in BAD.items():
        with pytest.raises(QueryValidationError) as batch_err:
            ks.match(df, query, time_col="ts", type_col="type", id_col="id")
        with pytest.raises(QueryValidationError) as stream_err:
            ks.match_stream(sdf, query, watermark="1 seconds", time_col="ts", type_col="type",
                            id_col="id")
        assert message in str(stream_err.value), query
        assert str(stream_err.value) == str(batch_err.value)
    # event types: known from event_type (every row's type), not from a type column's values
    # (the rows have not arrived when the query is built): a misspelt type is not found
    typo = GOOD.replace("T b", "U b")
    with pytest.raises(QueryValidationError, match="event type 'U' \\(variable 'b'\\) does not "
                                                   "occur in the DataFrame"):
        ks.match_stream(sdf, typo, watermark="1 seconds", time_col="ts", event_type="T",
                        id_col="id")
    assert ks.match_stream(sdf, typo, watermark="1 seconds", time_col="ts", type_col="type",
                           id_col="id").isStreaming
    # check=False: a missing column is NULL, as the semantics define it (the conformance backend)
    assert ks.match_stream(sdf, next(iter(BAD)), watermark="1 seconds", time_col="ts",
                           type_col="type", id_col="id", check=False).isStreaming


def test_a_correct_stream_query_still_runs(spark: Any, tmp_path: Path) -> None:
    sdf = _stream(spark, tmp_path)
    m = ks.match_stream(sdf, GOOD, watermark="1 seconds", time_col="ts", type_col="type",
                        id_col="id")
    out, ck = tmp_path / "out", tmp_path / "ck"
    q = (m.writeStream.format("json").option("checkpointLocation", str(ck))
         .option("path", str(out)).trigger(availableNow=True).start())
    q.awaitTermination()
    got = spark.read.schema("kind string, match map<string, array<bigint>>").json(str(out))
    found = sorted((r["match"]["a"][0], r["match"]["b"][0])
                   for r in got.where("kind = 'match'").collect())
    rows = [{k: v for k, v in r.items() if k != "id"} for r in ROWS]
    expected = sorted((m.bindings["a"], m.bindings["b"])
                      for m in kleene.compile(GOOD).run(kleene.EventBatch.from_records(rows)))
    assert found == expected == [(0, 2)]
