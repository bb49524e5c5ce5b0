"""EMIT TIMEOUTS on Spark (docs/semantics.md 20): a timed-out partial match is a row with its
``expired`` time, in kleene's output order. The conformance cases (tests/semantics/
test_timeouts.py) also run on the ``spark`` and ``spark-stream`` backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kleene.api import analyze
from kleene.cli.main import cli
from kleene.errors import QueryValidationError
from kleene.spark import in_output_order, match, plan_query
from kleene.spark.cli import run_query

pytestmark = pytest.mark.spark

#   ts:  1    2    3    4    5    7    8    20
#   k1:  a0        b2        b4   a5   b6   b7
#   k2:       a1        b3
ROWS = [(1, "A", "k1", 1), (2, "A", "k2", 5), (3, "B", "k1", 2), (4, "B", "k2", 3),
        (5, "B", "k1", 0), (7, "A", "k1", 4), (8, "B", "k1", 6), (20, "B", "k1", 9)]
QUERY = ("PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k WITHIN 5 seconds "
         "EMIT TIMEOUTS RETURN b.x - a.x AS d")


def test_timeouts_are_rows_with_their_expiry(spark: Any) -> None:
    df = spark.createDataFrame(ROWS, "ts long, type string, k string, x long")
    out = match(df, QUERY, time_col="ts", type_col="type", output="columns")
    rows = [r.asDict() for r in in_output_order(out).collect()]
    assert rows == [
        {"query": "query", "a": 0, "b": 2, "start": 1, "end": 3, "expired": None, "d": 1},
        # a1 (k2) found no B with a larger x: its window ends at 2 + 5 = 7, before a5 b6 ends
        {"query": "query", "a": 1, "b": None, "start": 2, "end": 2, "expired": 7, "d": None},
        {"query": "query", "a": 5, "b": 6, "start": 7, "end": 8, "expired": None, "d": 2},
    ]
    with pytest.raises(QueryValidationError, match="no CSV form"):
        match(df, QUERY, time_col="ts", type_col="type", output="csv")


def test_split_mode_reads_one_window_past_its_range() -> None:
    plan = plan_query(analyze("PATTERN SEQ(A a, B b) WITHIN 5 seconds EMIT TIMEOUTS"))
    assert plan.mode == "split" and plan.lookahead_us == 5_000_000
    assert any("EMIT TIMEOUTS" in r for r in plan.reasons)


def test_spark_cli_file_equals_the_embedded_one(spark: Any, tmp_path: Path) -> None:
    """``kleene run --spark`` with EMIT TIMEOUTS writes the embedded JSON Lines file (matches
    and timed-out partial matches in one order) and counts the two apart."""
    src = tmp_path / "in.csv"
    src.write_text("ts,type,k,x\n" + "".join(f"{t},{ty},{k},{x}\n" for t, ty, k, x in ROWS))
    query = QUERY.replace("PARTITION BY k ", "")  # unkeyed: the split mode
    res = CliRunner().invoke(cli, ["run", query, "--input", str(src), "--output",
                                   str(tmp_path / "embedded.jsonl"), "--quiet"])
    assert res.exit_code == 0, res.output
    expected = (tmp_path / "embedded.jsonl").read_text()
    assert '"expired"' in expected
    summary = run_query(query, str(src), spark=spark, output=str(tmp_path / "spark.jsonl"))
    assert (tmp_path / "spark.jsonl").read_text() == expected
    n_out = expected.count('"expired"')
    assert summary["timeouts"] == n_out
    assert summary["matches"] == expected.count("\n") - n_out
    assert summary["plan"] == "split"
