"""``kleene run --spark`` (kleene.spark.cli.run_query) writes exactly the embedded CLI's file."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kleene_spark_helpers import random_rows

from kleene.cli.main import cli
from kleene.spark.cli import list_inputs, run_query

pytestmark = pytest.mark.spark

QUERY = ("PATTERN SEQ(A a, B+ b[]) WHERE b[i].x >= a.x PARTITION BY k WITHIN 5 seconds "
         "RETURN a.x AS ax, count(b) AS n")


def _csv(path: Path, rows: list[dict[str, Any]]) -> None:
    lines = ["ts,type,k,x"] + [
        f"2024-03-01T10:{r['ts'] // 60:02d}:{r['ts'] % 60:02d},{r['type']},{r['k']},{r['x']}"
        for r in rows]
    path.write_text("\n".join(lines) + "\n")


def _embedded(query: str, src: Path, out: Path, fmt: str = "jsonl") -> bytes:
    res = CliRunner().invoke(cli, ["run", query, "--input", str(src), "--output", str(out),
                                   "--format", fmt, "--quiet"])
    assert res.exit_code == 0, res.output
    return out.read_bytes()


def test_spark_file_equals_embedded_cli_file(spark: Any, tmp_path: Path) -> None:
    rows = random_rows(7, n=120, keys=2)
    src = tmp_path / "events.csv"
    _csv(src, rows)
    expected = _embedded(QUERY, src, tmp_path / "embedded.jsonl")
    assert expected.count(b"\n") >= 5
    summary = run_query(QUERY, str(src), spark=spark, output=str(tmp_path / "spark.jsonl"))
    assert (tmp_path / "spark.jsonl").read_bytes() == expected
    assert summary["events"] == 120 and summary["matches"] == expected.count(b"\n")
    assert summary["plan"] == "keyed"
    # stdout, the default destination
    buf = io.StringIO()
    run_query(QUERY, str(src), spark=spark, stdout=buf)
    assert buf.getvalue().encode() == expected


def test_directory_and_glob_continue_row_ids_across_files(spark: Any, tmp_path: Path) -> None:
    rows = random_rows(7, n=120, keys=2)
    whole = tmp_path / "whole.csv"
    _csv(whole, rows)
    expected = _embedded(QUERY, whole, tmp_path / "embedded.jsonl")
    parts = tmp_path / "parts"
    parts.mkdir()
    _csv(parts / "a.csv", rows[:45])  # different sizes: Spark orders its splits by size
    _csv(parts / "b.csv", rows[45:])
    assert list_inputs(str(parts)) == [str(parts / "a.csv"), str(parts / "b.csv")]
    out = tmp_path / "dir.jsonl"
    run_query(QUERY, str(parts), spark=spark, output=str(out))
    assert out.read_bytes() == expected
    out2 = tmp_path / "glob.jsonl"
    run_query(QUERY, str(parts / "*.csv"), spark=spark, output=str(out2))
    assert out2.read_bytes() == expected


def test_parquet_output_has_typed_columns(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "events.csv"
    _csv(src, random_rows(7, n=120, keys=2))
    out = tmp_path / "m.parquet"
    summary = run_query(QUERY, str(src), spark=spark, output=str(out), fmt="parquet")
    df = spark.read.parquet(str(out))
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types["match"] == "map<string,array<bigint>>"
    assert types["start"] == "timestamp_ntz" and types["n"] == "bigint"
    assert df.count() == summary["matches"]


@pytest.mark.parametrize("query", [
    QUERY,
    # a float RETURN, a list of ids, a bool, a NULL and a text value with a comma and quotes
    "PATTERN SEQ(A a, B+ b[]) WHERE b[i].x >= a.x PARTITION BY k WITHIN 5 seconds "
    "RETURN a.x / 4 AS q, a.x > 3 AS big, NULL AS nothing, 'x, \"y\"' AS s, b[1].x AS bx",
    "PATTERN SEQ(A a, C c) WHERE c.x > 100 PARTITION BY k WITHIN 5 seconds",  # no match
])
def test_spark_csv_equals_embedded_cli_csv(spark: Any, tmp_path: Path, query: str) -> None:
    src = tmp_path / "events.csv"
    _csv(src, random_rows(11, n=120, keys=2))
    expected = _embedded(query, src, tmp_path / "embedded.csv", fmt="csv")
    summary = run_query(query, str(src), spark=spark, output=str(tmp_path / "spark.csv"),
                        fmt="csv")
    assert (tmp_path / "spark.csv").read_bytes() == expected
    assert summary["matches"] == expected.count(b"\n") - 1
    buf = io.StringIO()
    run_query(query, str(src), spark=spark, stdout=buf, fmt="csv")
    assert buf.getvalue().encode() == expected
