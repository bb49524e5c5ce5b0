"""Query sets on Structured Streaming (kleene.spark.match_stream with several queries, issue 14):
one streaming query, one stateful operator; each query's matches equal the embedded set's."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from kleene_spark_helpers import QUERY_SET, random_rows

import kleene
from kleene.errors import InputError, QueryValidationError
from kleene.events import EventBatch
from kleene.spark import match_stream

pytestmark = pytest.mark.spark

SET = QUERY_SET
SCHEMA = "id long, ts long, type string, k string, x long"


def _write(folder: Path, name: str, rows: list[dict[str, Any]], stamp: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(tmp, (stamp, stamp))  # the file source reads in modification-time order
    tmp.rename(folder / name)


def test_a_query_set_on_a_stream_equals_the_embedded_set(spark: Any, tmp_path: Path) -> None:
    rows = random_rows(21, n=80, keys=3)
    recs = [{"id": i, **r} for i, r in enumerate(rows)]
    end = {"id": 10**6, "ts": 10**9, "type": "END", "k": "zz", "x": 0}  # the last watermark
    src = tmp_path / "src"
    _write(src, "p0.json", recs[:40], 1_700_000_000)
    _write(src, "p1.json", [*recs[40:], end], 1_700_000_010)
    sdf = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))
    out = match_stream(sdf, SET, watermark="5 seconds", time_col="ts", type_col="type",
                       id_col="id")
    assert {"query", "match", "start", "end", "ax", "kind", "__query"} <= set(out.columns)
    name = "kleene_set_stream_test"
    q = (out.writeStream.format("memory").queryName(name)
         .option("checkpointLocation", str(tmp_path / "ck")).outputMode("append")
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination()
        got_rows = spark.table(name).collect()
    finally:
        q.stop()
        spark.catalog.dropTempView(name)
    assert {r["kind"] for r in got_rows} == {"match"}  # in order: nothing late
    got = sorted((r["query"], sorted((k, sorted(v)) for k, v in r["match"].items()),
                  r["start"], r["end"], r["ax"]) for r in got_rows)
    want = []
    for m in kleene.compile_many(SET).run(EventBatch.from_records(recs)):
        want.append((m.query, sorted((v, sorted(b) if isinstance(b, tuple) else [b])
                                     for v, b in m.bindings.items()),
                     m.start // 1_000_000, m.end // 1_000_000, m.values.get("ax")))
    assert got == sorted(want)
    assert {g[0] for g in got} == set(SET)
    # the queries' places: the set's order
    assert {r["query"]: r["__query"] for r in got_rows} == {n: i for i, n in enumerate(SET)}


def test_query_sets_on_a_stream_refuse_what_they_cannot_run(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    sdf = spark.readStream.schema(SCHEMA).json(str(tmp_path / "src"))
    opts = {"watermark": "2 seconds", "time_col": "ts", "type_col": "type", "id_col": "id"}
    with pytest.raises(InputError, match=r"column 'v' is int64 in query 'q1' but string in "
                                         r"query 'q2'; rename one \(AS\), or use output='json'"):
        match_stream(sdf, {"q1": "PATTERN SEQ(A a, B b) WITHIN 3 seconds RETURN a.x AS v",
                           "q2": "PATTERN SEQ(A a, B b) WITHIN 3 seconds RETURN a.k AS v"},
                     **opts)
    with pytest.raises(InputError, match="CSV records of a query set"):
        match_stream(sdf, list(SET.values()), output="csv", **opts)
    with pytest.raises(QueryValidationError, match="xx"):  # each query is schema-checked
        match_stream(sdf, ["PATTERN SEQ(A a, B b) WHERE a.xx > 1 WITHIN 3 seconds"], **opts)
