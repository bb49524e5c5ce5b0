"""Nested query sets on Spark (docs/semantics.md §17; docs/spark.md, "Query sets"): a consumer
reads a producer's matches as derived events; ``kleene.spark.match`` and ``kleene run --spark``
give exactly the embedded set's matches (ids, labels ``P#k``, order and tie-breaks)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kleene_spark_helpers import random_rows

import kleene
from kleene.cli.main import cli
from kleene.errors import QueryValidationError
from kleene.events import EventBatch
from kleene.events.writers import match_line
from kleene.spark import in_output_order, match, match_stream
from kleene.spark.batch import group_key, order_columns_of

pytestmark = pytest.mark.spark

SCHEMA = "ts long, type string, k string, x long"


def _df(spark: Any, rows: list[dict[str, Any]]) -> Any:
    return spark.createDataFrame([(r["ts"], r["type"], r["k"], r["x"]) for r in rows], SCHEMA)


def _embedded(queries: Any, rows: list[dict[str, Any]]) -> tuple[list[kleene.Match], Any]:
    batch = EventBatch.from_records([{"id": i, **r} for i, r in enumerate(rows)])
    return kleene.compile_many(queries).run(batch), batch.time


def _json(spark: Any, queries: Any, rows: list[dict[str, Any]]) -> list[str]:
    out = match(_df(spark, rows), queries, time_col="ts", type_col="type", output="json")
    return [r["record"] for r in in_output_order(out).collect()]


def _producer(rng: random.Random, shared: bool) -> str:
    kind = rng.choice(["SEQ", "AND", "OR"])
    types = rng.sample("ABC", rng.randint(1, 2))
    body = ", ".join(f"{t} {t.lower()}" for t in types)
    cond = rng.choice(["", f"{types[0].lower()}.x > 2"])
    key = rng.choice(["[k]", "PARTITION BY k"] + ([] if shared else [""]))
    if key == "[k]":
        where = f"WHERE {cond + ' AND ' if cond else ''}[k]"
    else:
        where = (f"WHERE {cond} " if cond else "") + key
    emit = rng.choice(["", " EMIT RECENT"])
    return f"PATTERN {kind}({body}) {where} WITHIN {rng.randint(1, 4)} seconds{emit}"


def _consumer(rng: random.Random, producers: list[str], shared: bool) -> str:
    first = rng.choice(producers)
    second = rng.choice([*producers, "D", "A"])
    if second == first:
        items = f"{first} x, {first} y" if rng.random() < 0.5 else f"{first}+ x[]"
    else:
        items = f"{first} x, {second} y"
    pattern = rng.choice(["SEQ", "AND"]) if "[]" not in items else "SEQ"
    if "[]" in items:
        items += ", D d"
    key = rng.choice(["PARTITION BY k"] + ([] if shared else [""]))  # the producers' or none
    ret = " RETURN x.k AS xk" if "[]" not in items and rng.random() < 0.5 else ""
    return f"PATTERN {pattern}({items}) {key} WITHIN {rng.randint(2, 6)} seconds{ret}"


def _random_set(seed: int, shared: bool) -> dict[str, str]:
    """Two producers, two consumers and one query outside the nesting, in a random order (a
    consumer may come before its producer and around the other query); ``shared``: every
    query of the nested group is keyed by k (the group runs per key on Spark)."""
    rng = random.Random(seed)
    texts = {"p0": _producer(rng, shared), "p1": _producer(rng, shared),
             "c0": _consumer(rng, ["p0", "p1"], shared), "c1": _consumer(rng, ["p0"], shared),
             "o": "PATTERN SEQ(C c, A a) WHERE a.x < 3 PARTITION BY k WITHIN 3 seconds"}
    names = list(texts)
    rng.shuffle(names)
    return {n: texts[n] for n in names}


def test_random_nested_sets_equal_the_embedded_set(spark: Any) -> None:
    """Random nested sets (producers keyed by [k], PARTITION BY k or nothing; consumers keyed
    by the same k or not at all; a RETURN column on a derived event's key): the JSON lines in
    kleene's order equal the embedded set's, byte for byte."""
    consumer_matches = []
    keyed = []
    for seed in range(6):
        queries = _random_set(100 + seed, shared=seed % 2 == 0)
        rows = random_rows(200 + seed, n=70, keys=2, types="ABCD")
        want, time = _embedded(queries, rows)
        got = _json(spark, queries, rows)
        assert got == [match_line(m, time) for m in want], queries
        consumer_matches.append(sum(m.query.startswith("c") for m in want))
        qs = kleene.compile_many(queries)
        keyed.append(bool(group_key([q.analyzed for q in qs.queries if q.name != "o"])))
    assert sum(n > 0 for n in consumer_matches) >= 2, consumer_matches
    assert True in keyed and False in keyed  # the draws run groups per key and in one task


def test_map_output_has_the_embedded_bindings_as_text(spark: Any) -> None:
    """output='map': every query of a nested set, its ids as text (an input event's id, or a
    derived event's label) and the consumer's RETURN column, in the embedded set's order."""
    queries = {"other": "PATTERN SEQ(C c, A a) WHERE a.x < 3 WITHIN 3 seconds",
               "twice": "PATTERN SEQ(ab x, ab y) PARTITION BY k WITHIN 6 seconds "
                        "RETURN x.k AS xk",
               "ab": "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 4 seconds"}
    rows = random_rows(31, n=60, keys=2)
    want, _time = _embedded(queries, rows)
    qs = kleene.compile_many(queries)
    assert group_key([qs.queries[1].analyzed, qs.queries[2].analyzed]) == ("k",)  # per key
    out = in_output_order(match(_df(spark, rows), queries, time_col="ts", type_col="type",
                                partitions=3))
    got = [(r["query"], {v: list(ids) for v, ids in r["match"].items()}, r["start"], r["end"],
            r["xk"]) for r in out.collect()]
    assert got == [(m.query, {v: [str(i) for i in (b if isinstance(b, tuple) else (b,))]
                              for v, b in m.bindings.items()},
                    m.start // 1_000_000, m.end // 1_000_000, m.values.get("xk"))
                   for m in want]
    assert {q for q, *_ in got} == set(queries)
    assert any(x for *_, x in got)


def test_columns_output_with_text_ids_and_null_keys(spark: Any) -> None:
    """output='columns', ids from an id column, events without a key: each variable column
    holds the embedded binding (a variable name two queries share is text in both)."""
    queries = {"ab": "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 4 seconds",
               "twice": "PATTERN SEQ(ab x, ab y) PARTITION BY k WITHIN 6 seconds",
               "other": "PATTERN SEQ(C c, A x) WITHIN 3 seconds"}
    rows = random_rows(8, n=60, keys=2)
    for i in (3, 10, 11, 20):
        rows[i]["k"] = None
    df = spark.createDataFrame([(f"e{i}", r["ts"], r["type"], r["k"], r["x"])
                                for i, r in enumerate(rows)],
                               "name string, ts long, type string, k string, x long")
    out = in_output_order(match(df, queries, time_col="ts", type_col="type", id_col="name",
                                output="columns"))
    batch = EventBatch.from_records([{"id": f"e{i}", **r} for i, r in enumerate(rows)])
    want = kleene.compile_many(queries).run(batch)
    got = [(r["query"], {v: r[v] for v in ("a", "b", "c", "x", "y") if r[v] is not None})
           for r in out.collect()]
    assert got == [(m.query, dict(m.bindings)) for m in want]
    assert {q for q, _ in got} == set(queries)


def test_semantics_example_by_hand_on_spark(spark: Any) -> None:
    """docs/semantics.md §17's example: ab's matches are derived events ab#1..ab#3, each right
    after its completing event; twice's matches come after the ab matches of that event."""
    queries = ["NAME ab PATTERN SEQ(A a, B b) WHERE [src] WITHIN 10 seconds",
               "NAME twice PATTERN SEQ(ab x, ab y) PARTITION BY src WITHIN 10 seconds"]
    df = spark.createDataFrame([(n, n[0].upper(), i + 1, 1) for i, n in
                                enumerate(["a1", "b2", "a3", "b4"])],
                               "name string, type string, ts long, src long")
    out = in_output_order(match(df, queries, time_col="ts", type_col="type", id_col="name"))
    got = [(r["query"], {v: ids[0] for v, ids in r["match"].items()}) for r in out.collect()]
    assert got == [("ab", {"a": "a1", "b": "b2"}), ("ab", {"a": "a1", "b": "b4"}),
                   ("ab", {"a": "a3", "b": "b4"}), ("twice", {"x": "ab#1", "y": "ab#2"}),
                   ("twice", {"x": "ab#1", "y": "ab#3"}), ("twice", {"x": "ab#2", "y": "ab#3"})]


def test_a_consumer_completed_by_a_derived_event_sorts_after_the_input_events_matches(
        spark: Any) -> None:
    """The consumer is first in the set and the producer last: at the completing input event,
    every query's own matches come first (by place), then the consumer's (docs/semantics.md
    §17, output order): one event, three queries, the order by hand."""
    queries = ["NAME c PATTERN SEQ(p x, p y) WITHIN 5 seconds",
               "NAME o PATTERN B b",
               "NAME p PATTERN SEQ(A a, B b) WITHIN 5 seconds"]
    rows = [{"ts": 1, "type": "A", "k": "k", "x": 0}, {"ts": 2, "type": "A", "k": "k", "x": 0},
            {"ts": 3, "type": "B", "k": "k", "x": 0}]
    want, time = _embedded(queries, rows)
    assert [m.query for m in want] == ["o", "p", "p", "c"]
    assert _json(spark, queries, rows) == [match_line(m, time) for m in want]


def test_what_stays_refused_is_one_line(spark: Any) -> None:
    df = _df(spark, random_rows(3, n=10))
    two_levels = ["NAME p PATTERN SEQ(A a, B b) WITHIN 3 seconds",
                  "NAME q PATTERN SEQ(p x, B b) WITHIN 3 seconds",
                  "NAME r PATTERN SEQ(q x, C c) WITHIN 3 seconds"]
    with pytest.raises(QueryValidationError, match="one level of nesting") as e:
        match(df, two_levels, time_col="ts", type_col="type")
    assert "\n" not in str(e.value)
    # a producer the shared network does not evaluate (a RETURN, a Kleene): as embedded
    for producer in ("NAME p PATTERN SEQ(A a, B b) WITHIN 3 seconds RETURN a.x AS ax",
                     "NAME p PATTERN SEQ(A a, B+ b[]) WITHIN 3 seconds"):
        texts = [producer, "NAME q PATTERN SEQ(p x, C c) WITHIN 3 seconds"]
        with pytest.raises(QueryValidationError) as embedded:
            kleene.compile_many(texts).start()
        with pytest.raises(QueryValidationError) as on_spark:
            match(df, texts, time_col="ts", type_col="type")
        assert str(on_spark.value) == str(embedded.value)
        assert "shared network does not evaluate" in str(on_spark.value)
    nested = ["NAME p PATTERN SEQ(A a, B b) WITHIN 3 seconds",
              "NAME q PATTERN SEQ(p x, C c) WITHIN 3 seconds"]
    with pytest.raises(QueryValidationError, match="run on the automaton engine"):
        match(df, nested, time_col="ts", type_col="type", engine="oracle")


def test_run_spark_with_a_nested_set_writes_the_embedded_file(spark: Any,
                                                             tmp_path: Path) -> None:
    queries = {"ab": "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 4 seconds",
               "twice": "PATTERN SEQ(ab x, ab y) PARTITION BY k WITHIN 6 seconds "
                        "RETURN x.k AS xk",
               "abc": "PATTERN SEQ(ab x, C c) WITHIN 3 seconds",
               "other": "PATTERN SEQ(C c, A a) WHERE a.x < 3 PARTITION BY k WITHIN 3 seconds"}
    rows = random_rows(9, n=60, keys=2)
    src = tmp_path / "events.csv"
    src.write_text("ts,type,k,x\n" + "".join(f"{r['ts']},{r['type']},{r['k']},{r['x']}\n"
                                            for r in rows))
    qdir = tmp_path / "q"
    qdir.mkdir()
    for name, text in queries.items():
        (qdir / f"{name}.kleene").write_text(text + "\n")
    runner = CliRunner()
    emb = runner.invoke(cli, ["run", str(qdir), "-i", str(src), "-o", str(tmp_path / "e.jsonl"),
                              "-q"])
    assert emb.exit_code == 0, emb.output
    expected = (tmp_path / "e.jsonl").read_bytes()
    assert b'"twice"' in expected and b"ab#" in expected
    from kleene.spark.cli import run_query

    summary = run_query([(t, n) for n, t in sorted(queries.items())], str(src), spark=spark,
                        output=str(tmp_path / "s.jsonl"))
    assert (tmp_path / "s.jsonl").read_bytes() == expected
    assert summary["matches"] == expected.count(b"\n")
    assert summary["plan"] == "query set of 4 (nested, nested, keyed, nested)"
    cli_run = runner.invoke(cli, ["run", str(qdir), "-i", str(src), "--spark", "-o",
                                  str(tmp_path / "c.jsonl"), "-q"])
    assert cli_run.exit_code == 0, cli_run.output
    assert (tmp_path / "c.jsonl").read_bytes() == expected


def _write(folder: Path, name: str, rows: list[dict[str, Any]], stamp: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(tmp, (stamp, stamp))  # the file source reads in modification-time order
    tmp.rename(folder / name)


@pytest.mark.parametrize("output", ["json", "map"])
def test_a_nested_set_on_a_stream_equals_the_embedded_set(spark: Any, tmp_path: Path,
                                                          output: str) -> None:
    """match_stream with a nested set (one state group for the nested group, the other query
    in its own buckets), fed in two micro-batches: the rows sorted by the order columns are
    the embedded set's matches in its order (JSON lines; or ids as text with output='map')."""
    queries = {"abc": "PATTERN SEQ(ab x, C c) WITHIN 3 seconds",
               "other": "PATTERN SEQ(C c, A a) WHERE a.x < 3 PARTITION BY k WITHIN 3 seconds",
               "ab": "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 4 seconds",
               # held until 2 seconds have passed: released in a later micro-batch
               "quiet": "PATTERN SEQ(ab x, NOT(D d)) PARTITION BY k WITHIN 2 seconds",
               "twice": "PATTERN SEQ(ab x, ab y) PARTITION BY k WITHIN 6 seconds "
                        "RETURN x.k AS xk"}
    rows = random_rows(0, n=100, keys=2, types="ABCD")
    recs = [{"id": i, **r} for i, r in enumerate(rows)]
    end = {"id": 10**6, "ts": 10**9, "type": "END", "k": "zz", "x": 0}  # the last watermark
    src = tmp_path / "src"
    _write(src, "p0.json", recs[:35], 1_700_000_000)
    _write(src, "p1.json", recs[35:70], 1_700_000_010)
    _write(src, "p2.json", [*recs[70:], end], 1_700_000_020)
    sdf = spark.readStream.schema("id long, " + SCHEMA).option("maxFilesPerTrigger", 1) \
        .json(str(src))
    out = match_stream(sdf, queries, watermark="5 seconds", time_col="ts", type_col="type",
                       id_col="id", output=output)
    name = f"kleene_nested_stream_{output}"
    q = (out.writeStream.format("memory").queryName(name)
         .option("checkpointLocation", str(tmp_path / "ck")).outputMode("append")
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination()
        table = spark.table(name)
        got_rows = table.orderBy(*order_columns_of(table)).collect()
    finally:
        q.stop()
        spark.catalog.dropTempView(name)
    assert {r["kind"] for r in got_rows} == {"match"}  # in order: nothing late
    want, time = _embedded(queries, rows)
    assert {m.query for m in want} == set(queries)
    if output == "json":
        assert [r["record"] for r in got_rows] == [match_line(m, time) for m in want]
    else:
        got = [(r["query"], {v: list(ids) for v, ids in r["match"].items()}, r["start"],
                r["end"], r["xk"]) for r in got_rows]
        assert got == [(m.query, {v: [str(i) for i in (b if isinstance(b, tuple) else (b,))]
                                  for v, b in m.bindings.items()},
                        m.start // 1_000_000, m.end // 1_000_000, m.values.get("xk"))
                       for m in want]
