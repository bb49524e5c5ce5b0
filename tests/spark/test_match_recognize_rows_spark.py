"""ALL ROWS PER MATCH (EMIT ROWS, docs/semantics.md 19) on Spark: one output row per row of
each match, with ``row`` (the row's id) and the running / FINAL measures, the same rows and
values as the embedded engine, in kleene's output order. The conformance cases
(tests/semantics/test_rows.py) also run on the ``spark`` and ``spark-stream`` backends."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import kleene
from kleene.events.readers import read_events
from kleene.events.writers import match_line
from kleene.spark import in_output_order, match

pytestmark = pytest.mark.spark

# S: 10 8 6 7 9 5 (a V, then 5) ; T: 4 3 5 (a V) -- interleaved in time
ROWS = [(1, "S", 10), (2, "T", 4), (3, "S", 8), (4, "T", 3), (5, "S", 6), (6, "T", 5),
        (7, "S", 7), (8, "S", 9), (9, "S", 5)]
QUERY = """SELECT * FROM ticker MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES LAST(DOWN.price) AS bottom, FINAL LAST(UP.price) AS top, SUM(UP.price) AS ups,
           MATCH_NUMBER() AS mno, CLASSIFIER() AS cls
  ALL ROWS PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (STRT DOWN+ UP+)
  DEFINE DOWN AS DOWN.price < PREV(DOWN.price), UP AS UP.price > PREV(UP.price)
)"""


def _embedded() -> kleene.Matches:
    table = pa.table({"ts": [r[0] for r in ROWS], "sym": [r[1] for r in ROWS],
                      "price": [r[2] for r in ROWS]})
    events, _ = read_events(table, time_col="ts", event_type="R", time_unit="s")
    return kleene.compile(QUERY, dialect="match_recognize").run(events)


def test_all_rows_on_spark_equal_the_embedded_rows(spark: Any) -> None:
    want = _embedded()
    # hand check of the embedded rows: T's V (ids 1 3 5) ends first, then S's (0 2 4 6 7)
    assert [(m.values["row"], m.values["cls"], m.values["bottom"], m.values["ups"])
            for m in want] == [
        (1, "STRT", None, None), (3, "DOWN", 3, None), (5, "UP", 3, 5),
        (0, "STRT", None, None), (2, "DOWN", 8, None), (4, "DOWN", 6, None), (6, "UP", 6, 7),
        (7, "UP", 6, 16)]  # SQL's SUM over no row is NULL
    assert [m.values["top"] for m in want] == [5] * 3 + [9] * 5
    df = spark.createDataFrame(ROWS, "ts long, sym string, price long")
    out = match(df, QUERY, time_col="ts", event_type="R", output="columns")
    got = [r.asDict() for r in in_output_order(out).collect()]
    assert [{k: v for k, v in r.items() if k not in ("query", "start", "end",
                                                        "STRT", "DOWN", "UP")}
            for r in got] == [dict(m.values) for m in want]
    assert [(r["STRT"], r["DOWN"], r["UP"]) for r in got] == [
        (m.bindings["STRT"], list(m.bindings["DOWN"]), list(m.bindings["UP"])) for m in want]
    lines = match(df, QUERY, time_col="ts", event_type="R", output="json")
    assert [r["record"] for r in in_output_order(lines).collect()] == [
        match_line(m, want.time) for m in want]
