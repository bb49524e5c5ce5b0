"""kleene.spark.match on a real local Spark: hand-written timelines and the embedded engine."""

from __future__ import annotations

import zlib
from typing import Any

import pyarrow as pa
import pytest
from kleene_spark_helpers import embedded_lines, random_rows, spark_lines

import kleene
from kleene.errors import EngineError, InputError
from kleene.events import TimeInfo
from kleene.spark import explain, in_output_order, match, plan_query
from kleene.spark.tasks import END_US, LAST_POS, ORD, SEQ, TaskRunner, TaskSpec

pytestmark = pytest.mark.spark

#   ts:  1    2    3    4    5    7    8    20
#   k1:  a0        b2        b4   a5   b6   b7
#   k2:       a1        b3
#   x:   1    5    2    3    0    4    6    9
TIMELINE = [
    {"ts": 1, "type": "A", "k": "k1", "x": 1},
    {"ts": 2, "type": "A", "k": "k2", "x": 5},
    {"ts": 3, "type": "B", "k": "k1", "x": 2},
    {"ts": 4, "type": "B", "k": "k2", "x": 3},
    {"ts": 5, "type": "B", "k": "k1", "x": 0},
    {"ts": 7, "type": "A", "k": "k1", "x": 4},
    {"ts": 8, "type": "B", "k": "k1", "x": 6},
    {"ts": 20, "type": "B", "k": "k1", "x": 9},
]
KEYED = ("PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k WITHIN 5 seconds "
         "RETURN a.x AS ax, b.x - a.x AS d")


def _df(spark: Any, rows: list[dict[str, Any]]) -> Any:
    return spark.createDataFrame([(r["ts"], r["type"], r["k"], r["x"]) for r in rows],
                                 "ts long, type string, k string, x long")


def test_keyed_columns_output_by_hand(spark: Any) -> None:
    out = match(_df(spark, TIMELINE), KEYED, time_col="ts", type_col="type",
                output="columns")
    rows = [r.asDict() for r in in_output_order(out).collect()]
    assert rows == [
        {"query": "query", "a": 0, "b": 2, "start": 1, "end": 3, "ax": 1, "d": 1},
        {"query": "query", "a": 5, "b": 6, "start": 7, "end": 8, "ax": 4, "d": 2},
    ]
    types = {f.name: f.dataType.simpleString() for f in out.schema.fields}
    assert types["a"] == "bigint" and types["ax"] == "bigint" and types["start"] == "bigint"


def test_keyed_map_output_by_hand(spark: Any) -> None:
    out = match(_df(spark, TIMELINE), KEYED, time_col="ts", type_col="type")
    rows = in_output_order(out).collect()
    assert [r["match"] for r in rows] == [{"a": [0], "b": [2]}, {"a": [5], "b": [6]}]


def test_kleene_variable_is_an_array_column(spark: Any) -> None:
    q = ("PATTERN SEQ(A a, B+ b[]) WHERE b[i].x > a.x PARTITION BY k WITHIN 5 seconds "
         "RETURN count(b) AS n")
    out = match(_df(spark, TIMELINE), q, time_col="ts", type_col="type", output="columns")
    rows = [(r["a"], r["b"], r["n"]) for r in in_output_order(out).collect()]
    # k1: a0 with b2 (x 2 > 1); b4 has x 0; a5 with b6
    assert rows == [(0, [2], 1), (5, [6], 1)]


QUERIES = [
    KEYED,
    "PATTERN SEQ(A a, B b, C c) WHERE c.x >= a.x PARTITION BY k WITHIN 6 seconds",
    "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x WITHIN 5 seconds",
    "PATTERN SEQ(A a, !(C n), B b) WHERE n.x > a.x WITHIN 4 seconds",
    "PATTERN SEQ(A a, B b, !(C n)) WITHIN 3 seconds",
    "PATTERN SEQ(!(C n), A a, B b) WITHIN 3 seconds",
    "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 4 seconds",
    "PATTERN SEQ(A a, B b) WITHIN 4 seconds EMIT RECENT",
    "PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 3 seconds CONSUME a",
    "PATTERN SEQ(A a, B b) WHERE b.x = a.x",
]


@pytest.mark.parametrize("query", QUERIES)
def test_spark_equals_embedded_engine_and_oracle(spark: Any, query: str) -> None:
    rows = random_rows(zlib.crc32(query.encode()) % 1000, n=36)
    # ranges=4 forces the time split to cut this short stream (a no-op for keyed / single);
    # the oracle also runs on Spark where the split decides which task finds which match
    engines = ("automaton", "oracle") if plan_query(kleene.analyze(query)).mode == "split" \
        else ("automaton",)
    for engine in engines:
        assert spark_lines(spark, query, rows, ranges=4, engine=engine) == \
            embedded_lines(query, rows, engine), engine


def test_split_with_many_ranges_finds_each_match_once(spark: Any) -> None:
    q = "PATTERN SEQ(A a, B b) WITHIN 6 seconds"
    rows = random_rows(7, n=60, types="AB")
    expected = embedded_lines(q, rows, "automaton")
    assert len(expected) > 30
    assert spark_lines(spark, q, rows, ranges=12) == expected
    assert spark_lines(spark, q, rows, ranges=12, engine="kleene.testing.oracle:evaluate") \
        == expected


@pytest.mark.parametrize("query", [
    "PATTERN SEQ(B b, A* a[]) PARTITION BY k PICK FIRST b",
    "PATTERN SEQ(B b, A* a[]) WHERE [k] PICK FIRST b",
    "PATTERN OR(A a, B b) PARTITION BY k PICK LAST b",
])
def test_a_pick_across_keys_is_not_keyed(spark: Any, query: str) -> None:
    """PICK applies over all partitions to the matches equal in every other binding: when
    every other variable may be empty, matches of two keys compete, so the query cannot be
    keyed (it was: each key kept its own first ``b``). Found by the batched long run."""
    plan = plan_query(kleene.analyze(query))
    assert plan.mode == "single" and "compares matches of different keys" in plan.reasons[0]
    rows = [{"ts": 1, "type": "B", "k": None, "x": 1}, {"ts": 1, "type": "B", "k": "u", "x": 1},
            {"ts": 2, "type": "A", "k": None, "x": 1}, {"ts": 3, "type": "B", "k": "v", "x": 2},
            *random_rows(5, n=20)]
    for r in rows[4:]:
        r["ts"] += 3
    expected = embedded_lines(query, rows, "oracle")
    assert expected == embedded_lines(query, rows, "automaton")
    assert spark_lines(spark, query, rows) == expected


def test_a_pick_whose_group_is_within_one_key_stays_keyed() -> None:
    for q in ("PATTERN SEQ(A a, B b) PARTITION BY k PICK FIRST a",
              "PATTERN SEQ(B b, A+ a[]) PARTITION BY k PICK FIRST b",
              "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 5 seconds PICK LAST b"):
        assert plan_query(kleene.analyze(q)).mode == "keyed", q


def test_explain_shows_the_three_shapes() -> None:
    keyed = explain(KEYED)
    assert "keyed" in keyed.splitlines()[0] and "repartition(k)" in keyed
    split = explain("PATTERN SEQ(A a, B b, !(C n)) WITHIN 3 seconds")
    assert split.splitlines()[0].endswith(": split")
    assert "preceding 3 seconds and the following 3 seconds" in split
    single = explain("PATTERN SEQ(A a, B b) WITHIN 3 seconds CONSUME a")
    assert single.splitlines()[0].endswith(": single") and "CONSUME" in single
    assert "count window" in explain("PATTERN SEQ(A a, B b) WITHIN 5 EVENTS")
    eq_strict = explain("PATTERN SEQ(A a, B b) WHERE [k] WITHIN 4 seconds "
                        "USING STRICT-CONTIGUITY")
    assert "cannot key" in eq_strict


def test_timestamp_input_gives_timestamp_columns_and_iso_records(spark: Any) -> None:
    import datetime as dt

    rows = [(dt.datetime(2024, 1, 1, 0, 0, s, tzinfo=dt.UTC), t, "k", s)
            for s, t in [(1, "A"), (2, "B"), (3, "B")]]
    df = spark.createDataFrame(rows, "ts timestamp, type string, k string, x long")
    q = "PATTERN SEQ(A a, B b) WITHIN 5 seconds"
    out = in_output_order(match(df, q, time_col="ts", type_col="type")).collect()
    assert [r["end"] for r in out] == [dt.datetime(2024, 1, 1, 0, 0, 2),
                                       dt.datetime(2024, 1, 1, 0, 0, 3)]
    recs = match(df, q, time_col="ts", type_col="type", output="json")
    lines = sorted(r[0] for r in recs.select("record").collect())
    assert lines[0] == ('{"query": "query", "match": {"a": 0, "b": 1}, '
                        '"start": "2024-01-01T00:00:01+00:00", '
                        '"end": "2024-01-01T00:00:02+00:00", "values": {}}')


def test_id_col_and_event_type(spark: Any) -> None:
    df = spark.createDataFrame([("e1", 1, 1), ("e2", 2, 5), ("e3", 3, 2)],
                               "eid string, ts long, x long")
    q = "PATTERN SEQ(T a, T b) WHERE b.x > a.x WITHIN 5 seconds"
    out = in_output_order(match(df, q, time_col="ts", event_type="T", id_col="eid"))
    assert [r["match"] for r in out.collect()] == [{"a": ["e1"], "b": ["e2"]},
                                                   {"a": ["e1"], "b": ["e3"]}]


def test_bad_arguments_are_named(spark: Any) -> None:
    df = _df(spark, TIMELINE)
    with pytest.raises(InputError, match="'tss' is not a column"):
        match(df, KEYED, time_col="tss", type_col="type")
    with pytest.raises(InputError, match="type_col"):
        match(df, KEYED, time_col="ts")


def test_task_refuses_rows_out_of_order() -> None:
    """Spark documents no order after sortWithinPartitions: the task checks it itself."""
    q = kleene.analyze(KEYED)
    spec = TaskSpec(analyzed=q, engine="automaton", time=TimeInfo(), group_cols=("k",),
                    attr_cols=("k", "x"), id_type=pa.int64(), output="map",
                    time_out="long", returns=())
    batch = pa.record_batch({"__id": [0, 1], "__ts": [2_000_000, 1_000_000],
                             "__type": ["A", "B"], "k": ["k1", "k1"], "x": [1, 2],
                             ORD: [0, 1]})
    with pytest.raises(EngineError, match="out of \\(ts, position\\) order"):
        list(TaskRunner(spec)(iter([batch])))
    split = pa.record_batch({"__id": [0, 1, 2], "__ts": [1, 2, 3], "__type": ["A", "B", "A"],
                             "k": ["k1", "k2", "k1"], "x": [1, 2, 3], ORD: [0, 1, 2]})
    with pytest.raises(EngineError, match="two separate runs"):
        list(TaskRunner(spec)(iter([split])))


def test_missing_pyspark_names_the_extra() -> None:
    """Without PySpark, kleene.spark imports but says what to install when used."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['pyspark'] = None\n"
            "import kleene.spark as ks\n"
            "print(ks.explain('PATTERN SEQ(A a, B b) WITHIN 3 seconds').splitlines()[0])\n"
            "try:\n    ks.get_session()\n"
            "except ImportError as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "split" in out
    assert 'MissingExtraError the Spark integration needs PySpark: pip install "kleene[spark]"' \
        in out


def test_spark_backend_returns_match_objects(spark: Any) -> None:
    from kleene.events import EventBatch
    from kleene.spark.backend import evaluate

    text = "PATTERN SEQ(A a, B+ b[]) WHERE b[i].x > a.x PARTITION BY k WITHIN 5 seconds"
    q = kleene.analyze(text)
    batch = EventBatch.from_records([dict(r, id=f"e{i}") for i, r in enumerate(TIMELINE)])
    got = evaluate(q, batch)
    assert [(m.bindings, m.start, m.end) for m in got] == [
        ({"a": "e0", "b": ("e2",)}, 1_000_000, 3_000_000),
        ({"a": "e5", "b": ("e6",)}, 7_000_000, 8_000_000),
    ]
    assert [m.key() for m in got] == [m.key() for m in kleene.compile(text).run(batch)]


def test_referenced_attributes_are_what_the_task_receives() -> None:
    from kleene.spark.batch import referenced_attributes

    q = kleene.analyze("PATTERN SEQ(A a, B+ b[], !(C n)) WHERE b[i].x > a.y AND n.z = 1 "
                       "AND [w] PARTITION BY k WITHIN 5 seconds RETURN sum(b.v) AS s")
    assert referenced_attributes(q) == {"x", "y", "z", "w", "k", "v"}


def test_task_adds_a_constant_type_and_orders_ties_by_id() -> None:
    """Without a type column and with row-number ids, the task gets neither ``__type`` nor
    ``__ord``: it adds the type and checks the tie order on ``__id``."""
    q = kleene.analyze("PATTERN SEQ(T a, T b) WHERE b.x > a.x PARTITION BY k WITHIN 5 seconds")
    spec = TaskSpec(analyzed=q, engine="automaton", time=TimeInfo(), group_cols=("k",),
                    attr_cols=("k", "x"), id_type=pa.int64(), output="json",
                    time_out="long", returns=(), event_type="T", order_col="__id")
    batch = pa.record_batch({"__id": [0, 1, 2], "__ts": [1_000_000, 1_000_000, 2_000_000],
                             "k": ["k1", "k1", "k1"], "x": [1, 2, 3]})
    out = pa.Table.from_batches(list(TaskRunner(spec)(iter([batch]))))
    assert out.column("record").to_pylist() == embedded_lines(
        "PATTERN SEQ(T a, T b) WHERE b.x > a.x PARTITION BY k WITHIN 5 seconds",
        [{"ts": 1, "type": "T", "k": "k1", "x": 1}, {"ts": 1, "type": "T", "k": "k1", "x": 2},
         {"ts": 2, "type": "T", "k": "k1", "x": 3}], "automaton")
    swapped = pa.record_batch({"__id": [1, 0], "__ts": [1_000_000, 1_000_000],
                               "k": ["k1", "k1"], "x": [1, 2]})
    with pytest.raises(EngineError, match="out of \\(ts, position\\) order"):
        list(TaskRunner(spec)(iter([swapped])))


def test_unused_columns_do_not_change_the_matches(spark: Any) -> None:
    """Only the attributes the query reads reach the task; the matches stay the embedded
    engine's (here with an extra text column and a constant event type)."""
    q = "PATTERN SEQ(T a, T b) WHERE b.x > a.x PARTITION BY k WITHIN 4 seconds"
    rows = [dict(r, type="T", note=f"n{i}") for i, r in enumerate(random_rows(5, n=40))]
    df = spark.createDataFrame([(r["ts"], r["k"], r["x"], r["note"]) for r in rows],
                               "ts long, k string, x long, note string")
    got = match(df, q, time_col="ts", event_type="T", output="json")
    lines = [r[0] for r in in_output_order(got).collect()]
    assert lines == embedded_lines(q, rows, "automaton") and len(lines) > 5


def _tasks_of_last_stages(spark: Any, run: Any) -> list[int]:
    """The task counts of the stages of the jobs that ``run()`` started."""
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup(None))
    run()
    jobs = [j for j in tracker.getJobIdsForGroup(None) if j not in before]
    stages = [s for j in jobs if (info := tracker.getJobInfo(j)) for s in info.stageIds]
    return [info.numTasks for s in stages if (info := tracker.getStageInfo(s))]


def test_default_partitions_let_adaptive_execution_merge_small_ones(spark: Any) -> None:
    # a cluster's spark.sql.shuffle.partitions (200 by default) must not mean one task per
    # partition for a few events: without partitions=, the key shuffle's number is not fixed
    rows = random_rows(3, n=60, keys=3)
    q = "PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k WITHIN 5 seconds"
    expected = embedded_lines(q, rows, "automaton")
    df = _df(spark, rows)
    got: list[list[str]] = []

    def run(**options: Any) -> None:  # collected as is: a sort would add its own shuffle
        out = match(df, q, time_col="ts", type_col="type", output="json", **options).collect()
        got.append([r["record"] for r in sorted(out, key=lambda r: (r[END_US], r[LAST_POS],
                                                                    r[SEQ]))])

    # the test session turns adaptive execution off (many tiny jobs); Spark's default is on
    settings = {"spark.sql.shuffle.partitions": "64", "spark.sql.adaptive.enabled": "true"}
    old = {k: spark.conf.get(k) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        default = _tasks_of_last_stages(spark, run)
        fixed = _tasks_of_last_stages(spark, lambda: run(partitions=64))
    finally:
        for k, v in old.items():
            spark.conf.set(k, v)
    assert got == [expected, expected]
    assert 64 in fixed                      # an explicit number is kept
    assert max(default) < 64                # merged by adaptive execution
