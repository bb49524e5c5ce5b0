"""The command line: check, explain, run; exit codes and messages (no tracebacks)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kleene.backends import BACKENDS
from kleene.cli.main import cli

QUERY = "PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 10 seconds"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_check_prints_canonical_form() -> None:
    code, out, err = invoke("check", "pattern seq(A a, B b)  where b.x>a.x within 10 seconds")
    assert (code, err) == (0, "")
    assert out == "PATTERN SEQ(A a, B b)\nWHERE b.x > a.x\nWITHIN 10 seconds\n"


def test_explain(tmp_path: Path) -> None:
    """explain prints the plan (kleene.plan.explain when built, else query and variables)."""
    q = write(tmp_path / "my_query.kleene", QUERY)
    code, out, err = invoke("explain", q)
    assert code == 0, err
    if importlib.util.find_spec("kleene.plan.explain") is None:
        assert out.splitlines()[0] == "query my_query"
        assert out.splitlines()[-2:] == ["   0  a            single   type A",
                                         "   1  b            single   type B"]
    else:
        assert "my_query" in out.splitlines()[0]
        code, dot, _ = invoke("explain", q, "--dot")
        assert code == 0 and dot.startswith("digraph")


def test_check_syntax_error_exits_1_with_caret() -> None:
    code, out, err = invoke("check", "PATTERN SEQ(A a, B b WHERE a.x > 1")
    assert code == 1 and out == ""
    assert err.startswith("kleene: query error: Line 1, column 22: ")
    assert "PATTERN SEQ(A a, B b WHERE a.x > 1" in err and "^" in err
    assert "Traceback" not in err


def test_query_file_not_found_exits_1(tmp_path: Path) -> None:
    code, _, err = invoke("check", str(tmp_path / "missing.kleene"))
    assert code == 1
    assert err == (f"kleene: query error: query file {tmp_path / 'missing.kleene'} not found "
                   "(QUERY is a file path or the query text)\n")


def test_run_missing_input_exits_2(tmp_path: Path) -> None:
    code, out, err = invoke("run", QUERY, "--input", str(tmp_path / "none.csv"))
    assert (code, out) == (2, "")
    assert err == f"kleene: input error: {tmp_path / 'none.csv'}: no such file\n"


def test_run_bad_row_exits_2_naming_file_row_column(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type,x\n1,A,1\n2,B,2\n3,B,oops\n")
    code, _, err = invoke("run", QUERY, "--input", p)
    assert code == 2
    assert err == (f"kleene: input error: {p}, row 3, column 'x': 'oops' is not an integer (the "
                   "column was read as int64 from its first rows; pass --column-type x=string "
                   "to keep it as text, or --null-values to read such values as NULL)\n")


def test_run_option_errors(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type,x\n1,A,1\n")
    code, _, err = invoke("run", QUERY, "--input", p, "--column-type", "x")
    assert (code, err) == (1, "kleene: usage error: --column-type 'x': expected COLUMN=TYPE, "
                              "e.g. x=float\n")
    code, _, err = invoke("run", QUERY, "--input", p, "--on-bad-row", "ignore")
    assert (code, err) == (1, "kleene: usage error: --on-bad-row: unknown bad-row policy 'ignore'; use fail, "
                              "skip or dead-letter=PATH\n")
    code, _, err = invoke("run", QUERY, "--input", p, "--engine", "quantum")
    assert (code, err) == (1, "kleene: query error: unknown engine 'quantum'; available: "
                              "automaton, oracle (and --spark for the Spark pipeline)\n")
    code, _, err = invoke("run", QUERY, "--input", p, "--udf", "nomodule")
    assert (code, err) == (1, "kleene: query error: --udf 'nomodule': expected module:function "
                              "or name=module:function\n")
    code, _, err = invoke("run", QUERY, "--input", p, "--udf", "no_such_mod_xyz:f")
    assert code == 1
    assert err.startswith("kleene: query error: --udf 'no_such_mod_xyz:f': cannot import "
                          "module 'no_such_mod_xyz'")


def test_python_dash_m_kleene() -> None:
    """``python -m kleene`` is the same command (a real subprocess)."""
    proc = subprocess.run([sys.executable, "-m", "kleene", "check", "PATTERN A a"],
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "PATTERN A a\n", "")
    proc = subprocess.run([sys.executable, "-m", "kleene", "check", "PATTERN"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


def test_run_flag_combinations_are_checked_before_reading(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type,x\n1,A,1\n")
    code, _, err = invoke("run", QUERY, "--input", p, "--master", "local[2]")
    assert (code, err) == (1, "kleene: usage error: --master, --partitions and --spark-reader "
                              "need --spark\n")
    code, _, err = invoke("run", QUERY, "--input", p, "--spark-reader", "arrow")
    assert code == 1 and "need --spark" in err
    code, _, err = invoke("run", QUERY, "--input", p, "--spark", "--stream")
    assert (code, err) == (1, "kleene: usage error: --stream and --allowed-lateness are for the "
                              "embedded engine, not --spark\n")
    code, _, err = invoke("run", QUERY, "--input", p, "--format", "parquet")
    assert (code, err) == (1, "kleene: usage error: Parquet output needs a file: pass --output "
                              "PATH\n")


def test_run_reads_standard_input() -> None:
    """--input - with --input-format; errors name <stdin>."""
    runner = CliRunner()
    result = runner.invoke(cli, ["run", "PATTERN SEQ(A a, B b)", "--input", "-", "--input-format",
                                 "csv", "-q", "--engine", "oracle"],
                           input="ts,type\n1,A\n2,B\n")
    assert (result.exit_code, result.stdout) == (
        0, '{"query": "query", "match": {"a": 0, "b": 1}, "start": 1, "end": 2, "values": {}}\n')
    result = runner.invoke(cli, ["run", "PATTERN A a", "--input", "-", "--input-format", "jsonl",
                                 "-q"], input='{"ts": 1, "type": "A"}\nnope\n')
    assert (result.exit_code, result.stderr) == (
        2, "kleene: input error: <stdin>, row 2: not valid JSON: Expecting value at character 1 "
           "(line 2)\n")
    result = runner.invoke(cli, ["run", "PATTERN A a", "--input", "-"], input="ts,type\n1,A\n")
    assert (result.exit_code, result.stderr) == (
        2, "kleene: input error: <stdin>: reading standard input (--input -) needs "
           "--input-format csv|jsonl|parquet\n")
    result = runner.invoke(cli, ["run", "PATTERN A a", "--input", "-", "--input-format", "csv"],
                           input="ts,type\n1,A,9\n")
    assert (result.exit_code, result.stderr) == (
        2, "kleene: input error: <stdin>, row 1: has 3 fields but the header has 2 (line 2)\n")


def test_udf_module_that_fails_to_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(sys.path))
    (tmp_path / "kleene_broken_udfs.py").write_text("def f(:\n")
    p = write(tmp_path / "e.csv", "ts,type\n1,A\n")
    code, _, err = invoke("run", "PATTERN A a", "--input", p, "--udf", "kleene_broken_udfs:f")
    assert code == 1
    assert err.startswith("kleene: query error: --udf 'kleene_broken_udfs:f': importing module "
                          "'kleene_broken_udfs' failed: SyntaxError: ")


def test_spark_options_match_run_query() -> None:
    """``run --spark`` passes exactly what kleene.spark.cli.run_query accepts."""
    import inspect

    from kleene.cli.main import spark_options

    spark_cli = pytest.importorskip("kleene.spark.cli")
    opts = spark_options(output=None, fmt="jsonl", input_format=None, time_col=None,
                         type_col=None, event_type=None, id_col=None, time_unit="s",
                         column_types={}, delimiter=None, dialect=None, udfs={},
                         engine="automaton", count_only=False, master=None, partitions=None)
    inspect.signature(spark_cli.run_query).bind("PATTERN A a", "e.csv", **opts)


def test_check_registers_udfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`kleene check --udf` resolves a user function; without it the query is rejected."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [str(tmp_path), *sys.path])
    (tmp_path / "kleene_check_udfs.py").write_text("def sim(a, b):\n    return 1.0\n")
    q = "PATTERN SEQ(A a, B b) WHERE sim(a.x, b.x) > 0.5"
    code, out, err = invoke("check", q, "--udf", "kleene_check_udfs:sim")
    assert (code, err) == (0, "")
    assert out == "PATTERN SEQ(A a, B b)\nWHERE sim(a.x, b.x) > 0.5\n"
    code, _, err = invoke("check", q)
    assert code == 1
    assert "unknown function 'sim'" in err and "--udf module:function" in err


def test_explain_spark_names_the_execution_strategy() -> None:
    """`kleene explain --spark` says keyed / split / single task without starting Spark."""
    code, out, err = invoke("explain", "--spark",
                            "PATTERN SEQ(A a, B b) PARTITION BY sym WITHIN 10 seconds")
    assert (code, err) == (0, "")
    assert out.startswith("Spark execution of query 'query': keyed\n")
    code, out, _ = invoke("explain", "--spark", "PATTERN SEQ(A a, B b) WITHIN 10 seconds")
    assert code == 0 and out.startswith("Spark execution of query 'query': split\n")
    code, out, _ = invoke("explain", "--spark", "PATTERN SEQ(A a, B b) WITHIN 3 EVENTS")
    assert code == 0 and out.startswith("Spark execution of query 'query': single")
    code, _, err = invoke("explain", "--spark", "--dot", "PATTERN SEQ(A a, B b)")
    assert code == 1 and "--dot and --spark cannot be combined" in err


def test_spark_backends_are_not_cli_engines(tmp_path: Path) -> None:
    """The Spark backends are registered for the conformance suite; on the command line the
    Spark pipeline is --spark, and --engine spark says so instead of nesting Spark in Spark."""
    p = write(tmp_path / "e.csv", "ts,type,x\n1,A,1\n")
    spark_names = sorted(n for n, b in BACKENDS.items() if b.needs_spark)
    assert spark_names  # (an empty loop would check nothing)
    for name in spark_names:
        code, _, err = invoke("run", QUERY, "--input", p, "--engine", name)
        assert (code, err) == (1, f"kleene: usage error: --engine {name} is the Spark pipeline "
                                  "itself: use --spark (with the default engine) instead\n")
