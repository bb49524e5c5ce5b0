"""Query sets on Spark (kleene.spark.match with several queries, ``kleene run --spark`` with
several query files): each query's matches equal the embedded set's, in the set's order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kleene_spark_helpers import QUERY_SET, random_rows

import kleene
from kleene.cli.main import cli
from kleene.errors import InputError
from kleene.events import EventBatch
from kleene.spark import in_output_order, match

pytestmark = pytest.mark.spark

SET = QUERY_SET


def _df(spark: Any, rows: list[dict[str, Any]]) -> Any:
    return spark.createDataFrame([(r["ts"], r["type"], r["k"], r["x"]) for r in rows],
                                 "ts long, type string, k string, x long")


def test_match_with_a_query_set_equals_the_embedded_set(spark: Any) -> None:
    rows = random_rows(21, n=80, keys=3)
    out = match(_df(spark, rows), SET, time_col="ts", type_col="type")
    got = [(r["query"], {k: list(v) for k, v in r["match"].items()}, r["start"], r["end"])
           for r in in_output_order(out).collect()]
    recs = [{"id": i, **r} for i, r in enumerate(rows)]
    want = []
    for m in kleene.compile_many(SET).run(EventBatch.from_records(recs)):
        want.append((m.query, {v: list(b) if isinstance(b, tuple) else [b]
                               for v, b in m.bindings.items()},
                     m.start // 1_000_000, m.end // 1_000_000))
    assert got == want
    assert {q for q, *_ in want} == set(SET)


def test_truncation_is_refused_for_a_set_on_spark(spark: Any) -> None:
    """(Nested sets run: tests/spark/test_queryset_nested_spark.py.)"""
    df = _df(spark, random_rows(3, n=10))
    with pytest.raises(InputError, match="on_cap='truncate' for a query set"):
        match(df, list(SET.values()), time_col="ts", type_col="type", on_cap="truncate")


def test_run_spark_with_several_query_files_writes_the_embedded_file(spark: Any,
                                                                      tmp_path: Path) -> None:
    rows = random_rows(8, n=60, keys=2)
    src = tmp_path / "events.csv"
    src.write_text("ts,type,k,x\n" + "".join(f"{r['ts']},{r['type']},{r['k']},{r['x']}\n"
                                            for r in rows))
    qdir = tmp_path / "q"
    qdir.mkdir()
    for name, text in SET.items():
        (qdir / f"{name}.kleene").write_text(text + "\n")
    runner = CliRunner()
    emb = runner.invoke(cli, ["run", str(qdir), "-i", str(src), "-o", str(tmp_path / "e.jsonl"),
                              "-q"])
    assert emb.exit_code == 0, emb.output
    from kleene.spark.cli import run_query

    summary = run_query([(t, n) for n, t in sorted(SET.items())], str(src), spark=spark,
                        output=str(tmp_path / "s.jsonl"))
    expected = (tmp_path / "e.jsonl").read_bytes()
    assert (tmp_path / "s.jsonl").read_bytes() == expected
    assert summary["matches"] == expected.count(b"\n") > 10
    assert summary["plan"].startswith("query set of 4")
    cli_run = runner.invoke(cli, ["run", str(qdir), "-i", str(src), "--spark", "-o",
                                  str(tmp_path / "c.jsonl"), "-q"])
    assert cli_run.exit_code == 0, cli_run.output
    assert (tmp_path / "c.jsonl").read_bytes() == expected


def test_run_spark_query_set_csv_writes_the_embedded_file(spark: Any, tmp_path: Path) -> None:
    """One query returns ``ax``, the others nothing: both CLIs write one header with every
    query's fields (the others' cells empty) and the same rows (Spark refused CSV for sets)."""
    rows = random_rows(8, n=60, keys=2)
    src = tmp_path / "events.csv"
    src.write_text("ts,type,k,x\n" + "".join(f"{r['ts']},{r['type']},{r['k']},{r['x']}\n"
                                            for r in rows))
    qdir = tmp_path / "q"
    qdir.mkdir()
    for name, text in SET.items():
        (qdir / f"{name}.kleene").write_text(text + "\n")
    runner = CliRunner()
    emb = runner.invoke(cli, ["run", str(qdir), "-i", str(src), "-o", str(tmp_path / "e.csv"),
                              "-q"])
    assert emb.exit_code == 0, emb.output
    expected = (tmp_path / "e.csv").read_bytes()
    assert expected.splitlines()[0] == b"query,start,end,match,ax"
    assert {line.split(b",")[0] for line in expected.splitlines()[1:]} == set(
        n.encode() for n in SET)
    res = runner.invoke(cli, ["run", str(qdir), "-i", str(src), "--spark", "-o",
                              str(tmp_path / "s.csv"), "-q"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "s.csv").read_bytes() == expected
