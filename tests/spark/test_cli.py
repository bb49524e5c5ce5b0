"""``kleene run --spark`` (kleene.spark.cli.run_query) writes exactly the embedded CLI's file."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kleene_spark_helpers import random_rows

from kleene.cli.main import cli
from kleene.errors import InputError, QueryValidationError
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


READERS = pytest.mark.parametrize("reader", ["arrow", "spark"])
"""kleene's reader in Spark tasks (the default for local CSV) and Spark's CSV source."""


@READERS
def test_spark_file_equals_embedded_cli_file(spark: Any, tmp_path: Path, reader: str) -> None:
    rows = random_rows(7, n=120, keys=2)
    src = tmp_path / "events.csv"
    _csv(src, rows)
    expected = _embedded(QUERY, src, tmp_path / "embedded.jsonl")
    assert expected.count(b"\n") >= 5
    summary = run_query(QUERY, str(src), spark=spark, output=str(tmp_path / "spark.jsonl"),
                        reader=reader)
    assert (tmp_path / "spark.jsonl").read_bytes() == expected
    assert summary["events"] == 120 and summary["matches"] == expected.count(b"\n")
    assert summary["plan"] == "keyed"
    # stdout, the default destination
    buf = io.StringIO()
    run_query(QUERY, str(src), spark=spark, stdout=buf, reader=reader)
    assert buf.getvalue().encode() == expected


@READERS
def test_directory_and_glob_continue_row_ids_across_files(spark: Any, tmp_path: Path,
                                                          reader: str) -> None:
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
    run_query(QUERY, str(parts), spark=spark, output=str(out), reader=reader)
    assert out.read_bytes() == expected
    out2 = tmp_path / "glob.jsonl"
    run_query(QUERY, str(parts / "*.csv"), spark=spark, output=str(out2), reader=reader)
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
    # no match, and RETURN names the header must quote (a comma, a quote)
    "PATTERN SEQ(A a, C c) WHERE c.x > 100 PARTITION BY k WITHIN 5 seconds "
    "RETURN greatest(a.x, c.x), c.x AS \"c \"\"x\"\"\"",
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


# -- kleene's reader in Spark tasks (kleene.spark.scan) ----------------------------------------

def _raw_csv(path: Path, header: str, lines: list[str]) -> Path:
    path.write_text(header + "\n" + "\n".join(lines) + "\n")
    return path


def test_a_bad_value_in_a_task_is_kleenes_input_error(spark: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # past the 65,536 rows the types are inferred from: the task finds it, the driver reports
    # it as the embedded reader's error (file as given, row, column), not a Spark traceback
    lines = [f"{i},A,k{i % 3},{i % 7}" for i in range(70_000)] + ["70000,B,k1,oops"]
    _raw_csv(tmp_path / "bad.csv", "ts,type,k,x", lines)
    monkeypatch.chdir(tmp_path)  # a relative path: the task opens it absolute, names it as given
    with pytest.raises(InputError) as err:
        run_query(QUERY, "bad.csv", spark=spark, stdout=io.StringIO(), reader="arrow")
    assert str(err.value).startswith("bad.csv, row 70001, column 'x': 'oops' is not an integer")


def test_types_are_decided_once_for_all_files(spark: Any, tmp_path: Path) -> None:
    parts = tmp_path / "parts"
    parts.mkdir()
    _raw_csv(parts / "a.csv", "ts,type,k,x", ["1,A,k0,1", "2,B,k0,2"])
    _raw_csv(parts / "b.csv", "ts,type,k,x", ["3,A,k0,2.5", "4,B,k0,3.5"])
    with pytest.raises(InputError) as err:
        run_query(QUERY, str(parts), spark=spark, stdout=io.StringIO(), reader="arrow")
    msg = str(err.value)
    assert msg.startswith(f"{parts / 'b.csv'}, column 'x': holds int64 values in the first rows")
    assert "pass --column-type x=TYPE" in msg
    # with the type given, the result is the embedded CLI's over the same rows in one file
    whole = _raw_csv(tmp_path / "whole.csv", "ts,type,k,x",
                     ["1,A,k0,1", "2,B,k0,2", "3,A,k0,2.5", "4,B,k0,3.5"])
    res = CliRunner().invoke(cli, ["run", QUERY, "--input", str(whole), "--column-type",
                                   "x=float", "--quiet"])
    assert res.exit_code == 0, res.output
    # skip-till-any-match: a0 with b{1}, b{3}, b{1,3}; a2 with b{3}
    found = {(m["match"]["a"], tuple(m["match"]["b"]))
             for m in map(json.loads, res.output.splitlines())}
    assert found == {(0, (1,)), (0, (3,)), (0, (1, 3)), (2, (3,))}
    buf = io.StringIO()
    run_query(QUERY, str(parts), spark=spark, stdout=buf, reader="arrow",
              column_types={"x": "float"})
    assert buf.getvalue() == res.output


def test_time_format_and_epoch_times_read_like_the_embedded_cli(spark: Any,
                                                               tmp_path: Path) -> None:
    q = "PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k WITHIN 1 hours"
    fmt_src = _raw_csv(tmp_path / "fmt.csv", "ts,type,k,x",
                       ["03/01/2024 10:00,A,k0,1", "03/01/2024 10:05,B,k0,2",
                        "03/01/2024 10:07,A,k1,5", "03/01/2024 12:00,B,k1,9"])
    epoch_src = _raw_csv(tmp_path / "epoch.csv", "ts,type,k,x",
                         ["1709287200000,A,k0,1", "1709287500000,B,k0,2",
                          "1709287620000,A,k1,5", "1709294400000,B,k1,9"])
    for src, extra, kwargs in [
            (fmt_src, ["--time-format", "%m/%d/%Y %H:%M"], {"time_format": "%m/%d/%Y %H:%M"}),
            (epoch_src, ["--time-unit", "ms"], {"time_unit": "ms", "epoch_times": True})]:
        res = CliRunner().invoke(cli, ["run", q, "--input", str(src), "--quiet", *extra])
        assert res.exit_code == 0, res.output
        assert res.output.count("\n") == 1 and '"a":0' in res.output.replace(" ", "")
        buf = io.StringIO()
        run_query(q, str(src), spark=spark, stdout=buf, **kwargs)
        assert buf.getvalue() == res.output
    # the CLI passes --time-format through to kleene's reader, and refuses it for Spark's
    args = ["run", q, "--input", str(fmt_src), "--time-format", "%m/%d/%Y %H:%M", "--spark"]
    res_spark = CliRunner().invoke(cli, [*args, "--quiet"])
    assert res_spark.exit_code == 0, res_spark.output
    assert res_spark.output == CliRunner().invoke(cli, [*args[:-1], "--quiet"]).output
    refused = CliRunner().invoke(cli, [*args, "--spark-reader", "spark"])
    assert refused.exit_code == 2 and "--time-format needs kleene's CSV reader" in refused.output


def test_reader_choice_errors(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "e.jsonl"
    src.write_text('{"ts": 1, "type": "A", "k": "k0", "x": 1}\n')
    with pytest.raises(InputError, match="the arrow reader reads CSV files"):
        run_query(QUERY, str(src), spark=spark, stdout=io.StringIO(), reader="arrow")
    with pytest.raises(InputError, match="--time-format needs kleene's CSV reader"):
        run_query(QUERY, str(src), spark=spark, stdout=io.StringIO(), time_format="%H")
    with pytest.raises(InputError, match="unknown reader 'jvm'; use auto, arrow or spark"):
        run_query(QUERY, str(src), spark=spark, stdout=io.StringIO(), reader="jvm")


@pytest.mark.parametrize("query", [
    "PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 4 seconds",          # split (time ranges)
    "PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 3 EVENTS",           # single task
])
def test_unkeyed_queries_with_kleenes_reader(spark: Any, tmp_path: Path, query: str) -> None:
    src = tmp_path / "events.csv"
    _csv(src, random_rows(5, n=150, keys=2))
    expected = _embedded(query, src, tmp_path / "embedded.jsonl")
    assert expected.count(b"\n") >= 5
    buf = io.StringIO()
    summary = run_query(query, str(src), spark=spark, stdout=buf, reader="arrow")
    assert buf.getvalue().encode() == expected
    assert summary["plan"] == ("split" if "seconds" in query else "single")


def test_id_and_type_columns_and_a_header_only_file(spark: Any, tmp_path: Path) -> None:
    # text ids from --id-col, types from a column, and a file with no rows between two others
    q = ("PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k WITHIN 10 seconds "
         "RETURN a.kind AS kind")
    header = "ev,ts,kind,type,k,x"
    rows = [f"e{i},{i},{'big' if i % 3 else 'small'},{'AB'[i % 2]},k{i // 2 % 2},{i % 5}"
            for i in range(40)]
    whole = _raw_csv(tmp_path / "whole.csv", header, rows)
    parts = tmp_path / "parts"
    parts.mkdir()
    _raw_csv(parts / "1.csv", header, rows[:15])
    (parts / "2.csv").write_text(header + "\n")
    _raw_csv(parts / "3.csv", header, rows[15:])
    res = CliRunner().invoke(cli, ["run", q, "--input", str(whole), "--id-col", "ev", "--quiet"])
    assert res.exit_code == 0, res.output
    first = json.loads(res.output.splitlines()[0])
    assert isinstance(first["match"]["a"], str) and first["match"]["a"].startswith("e")
    assert res.output.count("\n") >= 5
    for reader in ("arrow", "spark"):
        buf = io.StringIO()
        summary = run_query(q, str(parts), spark=spark, stdout=buf, id_col="ev", reader=reader)
        assert buf.getvalue() == res.output, reader
        assert summary["events"] == 40


def test_a_later_file_with_a_column_the_first_lacks(spark: Any, tmp_path: Path) -> None:
    # the first file decides the columns; a later file's extra column that the query reads
    # would be lost (NULL), so it is an error naming the file; one the query ignores is fine
    parts = tmp_path / "parts"
    parts.mkdir()
    _raw_csv(parts / "1.csv", "ts,type,k,x", ["1,A,k0,1", "2,B,k0,2"])
    _raw_csv(parts / "2.csv", "ts,type,k,x,y", ["3,A,k0,2,7", "4,B,k0,3,8"])
    q = "PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k WITHIN 10 seconds"
    buf = io.StringIO()
    run_query(q, str(parts), spark=spark, stdout=buf, reader="arrow")
    found = {(m["match"]["a"], m["match"]["b"]) for m in map(json.loads, buf.getvalue().splitlines())}
    assert found == {(0, 1), (0, 3), (2, 3)}
    # the query is checked against the first file's columns before Spark reads anything
    with pytest.raises(QueryValidationError) as err:
        run_query(q + " RETURN b.y AS y", str(parts), spark=spark, stdout=io.StringIO(),
                  reader="arrow")
    assert f"{parts / '1.csv'} (first file) has no column 'y'" in str(err.value)


def test_on_bad_row_skip_counts_what_it_skips(spark: Any, tmp_path: Path) -> None:
    parts = tmp_path / "parts"
    parts.mkdir()
    good = [f"{i},{'AB'[i % 2]},k{i // 2 % 2},{i % 5}" for i in range(30)]
    _raw_csv(parts / "1.csv", "ts,type,k,x", good[:10] + ["10,A,k0,oops"] + good[10:15])
    _raw_csv(parts / "2.csv", "ts,type,k,x", good[15:] + ["40,B,k1,7,extra", "41,A,k0,x1"])
    whole = _raw_csv(tmp_path / "whole.csv", "ts,type,k,x",
                     good[:10] + ["10,A,k0,oops"] + good[10:] + ["40,B,k1,7,extra", "41,A,k0,x1"])
    q = "PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k WITHIN 10 seconds"
    res = CliRunner().invoke(cli, ["run", q, "--input", str(whole), "--on-bad-row", "skip",
                                   "--quiet"])
    assert res.exit_code == 0, res.output
    assert res.output.count("\n") >= 5
    buf = io.StringIO()
    summary = run_query(q, str(parts), spark=spark, stdout=buf, on_bad_row="skip",
                        reader="arrow")
    assert buf.getvalue() == res.output  # ids: input rows, gaps where rows were skipped
    assert (summary["skipped"], summary["events"], summary["rows_read"]) == (3, 30, 33)
    assert summary["bad_examples"][0].startswith(f"{parts / '1.csv'}, row 11, column 'x': "
                                                 "'oops' is not an integer")
    assert any(e.startswith(f"{parts / '2.csv'}") for e in summary["bad_examples"])
    for policy, reader, message in [
            (f"dead-letter={tmp_path / 'dead.jsonl'}", "arrow", "is not supported with --spark"),
            ("skip", "spark", "--on-bad-row skip needs kleene's CSV reader")]:
        with pytest.raises(InputError, match=message):
            run_query(q, str(parts), spark=spark, stdout=io.StringIO(), on_bad_row=policy,
                      reader=reader)


def test_auto_reader_leaves_big_uncompressed_files_to_spark_on_a_cluster(
        spark: Any, tmp_path: Path) -> None:
    from kleene.spark.cli import _on_a_cluster, _splittable_and_big

    plain = _raw_csv(tmp_path / "e.csv", "ts,type,k,x", [f"{i},A,k0,{i}" for i in range(50)])
    packed = tmp_path / "e.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    old = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "100")
    try:
        # Spark would split the plain file (> 100 bytes) over tasks; a gzip file never
        assert _splittable_and_big(str(plain), spark)
        assert not _splittable_and_big(str(packed), spark)
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)
    assert not _splittable_and_big(str(plain), spark)   # 128 MB by default
    assert not _on_a_cluster(spark)                     # local[2]: kleene's reader regardless



@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_spark_output_is_written_atomically(spark: Any, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    """Issue 17: like the embedded CLI, ``--spark`` writes ``PATH.partial`` and renames it at
    the end: a finished run leaves only the output; a run that fails while it writes the
    output leaves the old file as it was and no ``.partial``.

    The failure is a real one, half-way through the output: the file-size limit of this
    process (``RLIMIT_FSIZE``, as a full disk) stops the driver's writer after half the bytes
    with EFBIG. Spark's JVM and its Python workers are other processes, started before:
    the matching and Spark's own part files are not limited. (A task's failure, a bad row or a
    raising UDF, comes before the first byte: the matches are computed, cached and counted
    before the file is opened.) Parquet is written by Spark itself: only the finished run."""
    import resource

    monkeypatch.chdir(tmp_path)
    _raw_csv(tmp_path / "in.csv", "ts,type,k,x",
             [f"{i},{'AB'[i % 2]},k{i % 3},{i % 7}" for i in range(600)])
    out = tmp_path / f"m.{fmt}"
    args = ["run", QUERY, "--input", "in.csv", "-o", out.name, "--format", fmt, "--spark",
            "--quiet"]
    ok = CliRunner().invoke(cli, args)
    assert ok.exit_code == 0, ok.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("m.")) == [out.name]
    if fmt == "parquet":
        assert spark.read.parquet(str(out)).count() > 100
        return
    first = out.read_bytes()
    assert first.count(b"\n") > 100 and len(first) > 5_000
    # the same run again over the old file (a new RETURN field: other bytes), stopped by the
    # OS after half the file's size: a failure after the output has started to be written
    again = ["run", QUERY + ", a.x + 1 AS ax1", *args[2:]]
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(first) // 2, hard))
    try:
        failed = CliRunner().invoke(cli, again)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert out.read_bytes() == first  # unchanged: the new bytes went to m.FMT.partial
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("m.")) == [out.name]
    assert failed.exit_code == 2, failed.output
    assert failed.stderr.splitlines()[-1] == (
        f"kleene: input error: cannot write matches to {out.name}: File too large")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".kleene-spark-")]
    # the same run without the limit replaces the file
    redone = CliRunner().invoke(cli, again)
    assert redone.exit_code == 0, redone.stderr
    assert out.read_bytes() != first and out.read_bytes().count(b"\n") == first.count(b"\n")


@READERS
def test_a_column_empty_in_the_first_rows_is_typed_by_its_values(spark: Any, tmp_path: Path,
                                                                 reader: str) -> None:
    """x has no value in the first 65,536 rows: both readers type it by its first values
    (int64), as the embedded reader does, so ``a.x > 15`` is no string/number error and the
    file is the embedded CLI's."""
    lines = ["ts,type,k,x"] + [f"{i},A,k{i % 2}," for i in range(66_000)]
    lines += [f"{66_000 + i},A,k{i % 2},{v}" for i, v in enumerate((3, 17, 20, 16))]
    lines += [f"{66_010 + i},B,k{i % 2},1" for i in range(2)]
    src = tmp_path / "late.csv"
    src.write_text("\n".join(lines) + "\n")
    q = "PATTERN SEQ(A a, B b) WHERE a.x > 15 PARTITION BY k WITHIN 1000000 seconds"
    expected = _embedded(q, src, tmp_path / "embedded.jsonl")
    assert expected.count(b"\n") == 3
    out = tmp_path / "spark.jsonl"
    run_query(q, str(src), spark=spark, output=str(out), reader=reader)
    assert out.read_bytes() == expected
