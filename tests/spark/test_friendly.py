"""``kleene run --spark`` for a new user (issue 16, items 1 and 6): a misspelt column or an
option Spark cannot take fails before Spark starts, Spark's own log lines stay hidden, a small
input gets a note that the embedded engine is faster, and ``kleene.spark.match`` checks the
query against the DataFrame's columns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kleene.errors import QueryValidationError

SRC = Path(__file__).resolve().parents[2] / "src"
PROBE = """
import sys, time
from kleene.cli.main import main
t = time.perf_counter()
try:
    main(sys.argv[1:])
    rc = 0
except SystemExit as e:
    rc = e.code
took = time.perf_counter() - t
from pyspark import SparkContext
print(rc, SparkContext._gateway is None, round(took, 3))
"""


def _kleene(*args: str, probe: bool = False, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    env.pop("SPARK_REMOTE", None)
    cmd = [sys.executable, "-c", PROBE, *args] if probe else [sys.executable, "-m", "kleene",
                                                              *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def _traffic(path: Path, n: int = 40) -> Path:
    """Tiny traffic readings: two segments, speed dropping below 30 every 5th reading."""
    rows = ["TIMESTAMP,REPORT_ID,avgSpeed"]
    rows += [f"2014-08-01T{8 + i // 12:02d}:{i % 12 * 5:02d}:00,{158 + i % 2},"
             f"{25 if i % 5 == 4 else 70}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


Q = ("PATTERN SEQ(Traffic a, Traffic b) WHERE a.avgSpeed > 60 AND b.avgSpeed < 30 "
     "PARTITION BY REPORT_ID WITHIN 30 minutes USING strict-contiguity")


@pytest.mark.parametrize(("extra", "message"), [
    (["--on-bad-row", "dead-letter=bad.jsonl"], "dead-letter=PATH is not supported with --spark"),
    (["--late-output", "late.jsonl"], "--late-output, --workers and --plot are for the embedded "
                                      "engine, not --spark"),
])
def test_options_spark_cannot_take_fail_before_it_starts(tmp_path: Path, extra: list[str],
                                                          message: str) -> None:
    src = _traffic(tmp_path / "t.csv")
    res = _kleene("run", Q, "--input", str(src), "--event-type", "Traffic", "--spark", *extra,
                  probe=True, timeout=120)
    rc, no_jvm, seconds = res.stdout.split()
    assert (rc, no_jvm) == ("1", "True"), res.stderr
    assert float(seconds) < 1.0
    assert message in res.stderr and res.stderr.count("\n") == 1


@pytest.mark.parametrize(("query", "hint"), [
    (Q.replace("b.avgSpeed", "b.avgspeed"), "has no column 'avgspeed' (did you mean 'avgSpeed'?)"),
    (Q.replace("PARTITION BY REPORT_ID", "PARTITION BY REPORTID"),
     "PARTITION BY REPORTID: {src} has no column 'REPORTID' (did you mean 'REPORT_ID'?)"),
    (Q.replace("Traffic b", "Trafic b"),
     "event type 'Trafic' (variable 'b') does not occur in {src} (did you mean 'Traffic'?)"),
])
def test_schema_errors_under_spark_exit_1_before_spark_starts(tmp_path: Path, query: str,
                                                              hint: str) -> None:
    src = _traffic(tmp_path / "t.csv")
    res = _kleene("run", query, "--input", str(src), "--event-type", "Traffic", "--spark",
                  probe=True, timeout=120)
    rc, no_jvm, seconds = res.stdout.split()
    assert (rc, no_jvm) == ("1", "True"), res.stderr
    assert float(seconds) < 10.0  # 0.3-2 s here (pyarrow's pandas import is most of it)
    assert res.stderr.startswith("kleene: query error: ")
    assert hint.format(src=src) in res.stderr


@pytest.mark.spark
def test_spark_is_quiet_and_notes_a_small_input(tmp_path: Path) -> None:
    """A real local[1] run in a fresh process: the embedded engine's matches, no Spark log
    line on stderr, and the note that the embedded engine is faster for this input."""
    src = _traffic(tmp_path / "t.csv")
    embedded = _kleene("run", Q, "--input", str(src), "--event-type", "Traffic", "--quiet")
    assert embedded.returncode == 0 and embedded.stdout.count("\n") == 8, embedded.stderr
    res = _kleene("run", Q, "--input", str(src), "--event-type", "Traffic", "--spark",
                  "--master", "local[1]")
    assert res.returncode == 0, res.stderr
    assert res.stdout == embedded.stdout
    lines = res.stderr.splitlines()
    assert not [line for line in lines if "WARN" in line or "log4j" in line or "INFO" in line]
    assert lines[0].startswith("── kleene run summary (spark)")
    assert any(line.startswith("kleene: note: 40 events: the embedded engine (without --spark) "
                               "is faster") for line in lines)


@pytest.mark.spark
def test_spark_api_checks_the_dataframe_columns(spark: Any) -> None:
    import kleene.spark as ks

    df = spark.createDataFrame([(1, "s1", 70.0), (2, "s1", 20.0)], "ts long, sensor string, "
                               "avgSpeed double")
    cases = {
        "PATTERN SEQ(T a, T b) WHERE b.avgspeed < a.avgSpeed PARTITION BY sensor":
            "the DataFrame has no column 'avgspeed' (did you mean 'avgSpeed'?)",
        "PATTERN SEQ(T a, T b) WHERE b.avgSpeed < a.avgSpeed PARTITION BY Sensor":
            "PARTITION BY Sensor: the DataFrame has no column 'Sensor' (did you mean 'sensor'?)",
        "PATTERN SEQ(T a, T b) WHERE b.avgSpeed < 'slow'":
            "'slow'",
        "PATTERN SEQ(T a, U b) WHERE b.avgSpeed < a.avgSpeed":
            "event type 'U' (variable 'b') does not occur in the DataFrame",
    }
    for query, message in cases.items():
        with pytest.raises(QueryValidationError) as err:
            ks.match(df, query, time_col="ts", event_type="T")
        assert message in str(err.value), query
    ok = ks.match(df, "PATTERN SEQ(T a, T b) WHERE b.avgSpeed < a.avgSpeed PARTITION BY sensor",
                  time_col="ts", event_type="T")
    assert [r["match"] for r in ok.collect()] == [{"a": [0], "b": [1]}]


@pytest.mark.spark
@pytest.mark.parametrize("reader", ["arrow", "spark"])
def test_null_values_and_empty_lines_as_in_the_embedded_cli(spark: Any, tmp_path: Path,
                                                            reader: str) -> None:
    """--null-values on Spark (kleene's reader in the tasks, and Spark's CSV source): the
    embedded CLI's output, byte for byte; with kleene's reader, empty lines take ids as in the
    embedded reader."""
    import io

    from click.testing import CliRunner

    from kleene.cli.main import cli
    from kleene.spark.cli import run_query

    rows = [f"{i},{'AB'[i % 2]},k{i % 3},{'nil' if i % 4 == 3 else i % 7}" for i in range(60)]
    if reader == "arrow":  # Spark's own CSV source gives empty lines no id
        rows[10:10] = [""]
        rows[31:31] = ["", ""]
    src = tmp_path / "e.csv"
    src.write_text("ts,type,k,x\n" + "\n".join(rows) + "\n", encoding="utf-8")
    q = "PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k WITHIN 6 seconds"
    embedded = CliRunner().invoke(cli, ["run", q, "--input", str(src), "--null-values", "nil",
                                        "--quiet"])
    assert embedded.exit_code == 0, embedded.stderr
    assert embedded.stdout.count("\n") >= 5
    buf = io.StringIO()
    summary = run_query(q, str(src), spark=spark, stdout=buf, reader=reader, null_values="nil")
    assert buf.getvalue() == embedded.stdout
    assert summary["events"] == 60
    # without it, 'nil' is a bad value (kleene's reader: its InputError; Spark's: a cast error)
    from kleene.errors import InputError

    with pytest.raises(InputError if reader == "arrow" else Exception) as err:
        run_query(q, str(src), spark=spark, stdout=io.StringIO(), reader=reader)
    assert "nil" in str(err.value)
