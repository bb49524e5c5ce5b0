"""Issue 16, item 7: the paper cuts a new user meets first, one test each.

Where it is cheap, the input is a slice of the real datasets in /work/shared/data (see each
SOURCE.md); those tests skip when the data is not on the machine.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import kleene
from kleene.cli.main import EXIT_INPUT, EXIT_QUERY, EXIT_USAGE, check, cli, protect_query, run
from kleene.events.decisions import default_time_column

DATA = Path(os.environ.get("KLEENE_SHARED_DATA", "/work/shared/data"))
AARHUS = DATA / "aarhus_traffic" / "aarhus_traffic_2014-08.csv.gz"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def head_of(gz: Path, lines: int, dest: Path) -> Path:
    """The first ``lines`` lines (header included) of a gzipped CSV, as a plain file."""
    with gzip.open(gz, "rt", encoding="utf-8") as f:
        dest.write_text("".join(next(f) for _ in range(lines)), encoding="utf-8")
    return dest


# -- the default time column is found whatever its case ------------------------------------------


def test_default_time_column_ignores_case() -> None:
    assert default_time_column(["REPORT_ID", "TIMESTAMP"]) == "TIMESTAMP"
    assert default_time_column(["Event_Time", "x"]) == "Event_Time"
    assert default_time_column(["TS", "time"]) == "TS"  # candidate order first, then case
    assert default_time_column(["Time", "time"]) == "time"  # an exact match wins
    assert default_time_column(["when", "x"]) is None


@pytest.mark.skipif(not AARHUS.exists(), reason="the Aarhus traffic data is not here")
def test_aarhus_timestamp_column_is_found_without_time_col(tmp_path: Path) -> None:
    """The real traffic file names its time column TIMESTAMP: no --time-col is needed, and
    start/end are that column's values."""
    src = head_of(AARHUS, 3_001, tmp_path / "traffic.csv")
    code, out, err = invoke(
        "run", "PATTERN SEQ(Traffic a, Traffic b) WHERE a.avgSpeed > 60 AND b.avgSpeed < 30 "
        "PARTITION BY REPORT_ID WITHIN 10 minutes USING strict-contiguity",
        "--input", str(src), "--event-type", "Traffic", "--quiet")
    assert code == 0, err
    with src.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    matches = [json.loads(line) for line in out.splitlines()]
    expected = []  # an independent check: consecutive readings of one sensor, 5 minutes apart
    by_sensor: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_sensor.setdefault(r["REPORT_ID"], []).append(i)
    for ids in by_sensor.values():
        for i, j in zip(ids, ids[1:], strict=False):
            a, b = rows[i], rows[j]
            if float(a["avgSpeed"]) > 60 and float(b["avgSpeed"]) < 30 and \
                    _minutes(b["TIMESTAMP"]) - _minutes(a["TIMESTAMP"]) <= 10:
                expected.append((i, j))
    got = [(m["match"]["a"], m["match"]["b"]) for m in matches]
    assert got and sorted(got) == sorted(expected)
    for m in matches:
        assert m["start"] == rows[m["match"]["a"]]["TIMESTAMP"]
        assert m["end"] == rows[m["match"]["b"]]["TIMESTAMP"]


def _minutes(iso: str) -> int:
    day, hh, mm = int(iso[8:10]), int(iso[11:13]), int(iso[14:16])
    return (day * 24 + hh) * 60 + mm


# -- dead letters: row counts from 1 (as messages do), index from 0 like event ids --------------


def test_dead_letter_index_is_the_event_id_the_row_would_have_had(tmp_path: Path) -> None:
    one = tmp_path / "in" / "1.csv"
    two = tmp_path / "in" / "2.csv"
    one.parent.mkdir()
    one.write_text("ts,type,x\n1,A,1\n2,A,2\n")
    two.write_text("ts,type,x\n3,A,3\n4,A,oops\n5,B,9\n")
    dead = tmp_path / "dead.jsonl"
    code, out, err = invoke("run", "PATTERN SEQ(A a, B b) WHERE a.x > 0 WITHIN 10 seconds",
                            "--input", str(tmp_path / "in"), "--quiet",
                            "--on-bad-row", f"dead-letter={dead}")
    assert code == 0, err
    # ids run across files: 1.csv holds ids 0, 1; 2.csv ids 2, 3, 4; id 3 is the bad row
    assert [json.loads(line)["match"] for line in out.splitlines()] == [
        {"a": 0, "b": 4}, {"a": 1, "b": 4}, {"a": 2, "b": 4}]
    (letter,) = [json.loads(line) for line in dead.read_text().splitlines()]
    assert (letter["source"], letter["row"], letter["index"], letter["column"]) == (
        str(two), 2, 3, "x")


# -- a query that starts with a `--` comment is the query, not an option -------------------------


def test_query_starting_with_a_comment_is_not_an_option(tmp_path: Path) -> None:
    q = "-- two A events in a row\nPATTERN SEQ(A a, A b) WITHIN 10 seconds"
    code, out, err = invoke("check", q)
    assert (code, err) == (0, "")
    assert out == "PATTERN SEQ(A a, A b)\nWITHIN 10 seconds\n"
    src = tmp_path / "e.csv"
    src.write_text("ts,type\n1,A\n2,A\n")
    code, out, err = invoke("run", "--quiet", q, "--input", str(src))
    assert code == 0, err
    assert [json.loads(line)["match"] for line in out.splitlines()] == [{"a": 0, "b": 1}]


def test_protect_query_leaves_option_values_alone() -> None:
    fmt = "--time-format=%m %d"  # an option with an inline value holding a space
    assert protect_query(check, ["--dialect", "-- x y", "Q"]) == ["--dialect", "-- x y", "Q"]
    assert protect_query(run, [fmt, "Q"]) == [fmt, "Q"]
    assert protect_query(run, ["--time-format", "%m %d", "-o", "-- x", "Q"]) == [
        "--time-format", "%m %d", "-o", "-- x", "Q"]
    assert protect_query(check, ["--", "-- a\nb"]) == ["--", "-- a\nb"]
    assert protect_query(check, ["-- a\nb", "--dialect", "sase"]) == [
        "--dialect", "sase", "--", "-- a\nb"]


# -- exit codes: usage errors are not input errors ---------------------------------------------


@pytest.mark.parametrize("args", [
    ("check", "PATTERN A a", "--no-such-option"),
    ("run", "PATTERN A a"),                                    # --input is missing
    ("run", "PATTERN A a", "--input", "x.csv", "--time-unit", "hours"),
    ("run", "PATTERN A a", "--input", "x.csv", "--allowed-lateness", "5"),
    ("run", "PATTERN A a", "--input", "x.csv", "--column-type", "x"),
    ("run", "PATTERN A a", "--input", "x.csv", "--on-bad-row", "ignore"),
    ("explain", "PATTERN A a", "--dot", "--spark"),
    ("check",),
])
def test_usage_errors_exit_1(args: tuple[str, ...]) -> None:
    code, out, err = invoke(*args)
    assert code == EXIT_USAGE == EXIT_QUERY == 1, err
    assert out == "" and "Traceback" not in err


def test_input_errors_still_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("ts,type,x\n1,A,1\n2,A,oops\n")
    code, _, err = invoke("run", "PATTERN A a", "--input", str(bad), "--column-type", "x=int")
    assert code == EXIT_INPUT == 2 and "row 2, column 'x'" in err
    code, _, err = invoke("run", "PATTERN A a", "--input", str(tmp_path / "missing.csv"))
    assert code == EXIT_INPUT and "no such file" in err


# -- a query file with a UTF-8 byte-order mark ------------------------------------------------


def test_query_file_with_a_bom(tmp_path: Path) -> None:
    q = tmp_path / "pairs.kleene"
    q.write_bytes(b"\xef\xbb\xbfPATTERN SEQ(A a, B b)\r\nWITHIN 5 seconds\r\n")
    code, out, err = invoke("check", str(q))
    assert (code, err) == (0, "")
    assert out == "PATTERN SEQ(A a, B b)\nWITHIN 5 seconds\n"
    code, out, err = invoke("check", "\ufeffPATTERN A a")
    assert (code, out, err) == (0, "PATTERN A a\n", "")


# -- long AND chains are not "nested too deep" ------------------------------------------------


@pytest.mark.parametrize("n", [65, 251, 1_000])
def test_long_and_chain(n: int) -> None:
    where = " AND ".join(f"a.x != {i}" for i in range(n))
    text = f"PATTERN SEQ(A a, B b) WHERE {where} AND b.x > a.x WITHIN 10 seconds"
    q = kleene.compile(text)
    values = [c.right.value for c in q.analyzed.conjuncts[:n]]  # type: ignore[attr-defined]
    assert values == list(range(n))
    events = kleene.EventBatch.from_records(
        [{"type": "A", "ts": 1, "x": n // 2}, {"type": "A", "ts": 2, "x": n + 5},
         {"type": "B", "ts": 3, "x": n + 9}])
    assert [m.bindings for m in q.run(events)] == [{"a": 1, "b": 2}]
    parsed = kleene.parse(text)
    assert kleene.parse(kleene.to_text(parsed)) == parsed  # the printed chain re-parses to it
    code, out, err = invoke("check", text)
    assert code == 0, err


def test_long_or_chain_keeps_its_meaning() -> None:
    where = " OR ".join(f"a.x = {i}" for i in range(300))
    q = kleene.compile(f"PATTERN A a WHERE {where}")
    events = kleene.EventBatch.from_records(
        [{"type": "A", "ts": t, "x": x} for t, x in enumerate([5, 300, 299, -1, 0])])
    assert [m.bindings for m in q.run(events)] == [{"a": 0}, {"a": 2}, {"a": 4}]


# -- --output --------------------------------------------------------------------------------


def _events(tmp_path: Path) -> Path:
    src = tmp_path / "e.csv"
    src.write_text("ts,type,x\n1,A,1\n2,B,2\n")
    return src


def test_output_with_an_unknown_suffix_is_refused(tmp_path: Path) -> None:
    src = _events(tmp_path)
    out = tmp_path / "out.xlsx"
    code, _, err = invoke("run", "PATTERN SEQ(A a, B b)", "--input", str(src), "-o", str(out))
    assert code == EXIT_USAGE
    assert "cannot write .xlsx files" in err and "--format" in err
    assert not out.exists()
    # with --format the name is the user's choice; a name with no suffix is JSON Lines
    for name, fmt in (("out.xlsx", ("--format", "csv")), ("matches", ())):
        code, _, err = invoke("run", "PATTERN SEQ(A a, B b)", "--input", str(src), "--quiet",
                              "-o", str(tmp_path / name), *fmt)
        assert code == 0, err
    assert (tmp_path / "out.xlsx").read_text().splitlines()[0].startswith("query,")
    assert json.loads((tmp_path / "matches").read_text())["match"] == {"a": 0, "b": 1}


def test_output_naming_the_input_is_refused(tmp_path: Path) -> None:
    src = _events(tmp_path)
    before = src.read_bytes()
    for target in (str(src), str(tmp_path / "." / "e.csv")):
        code, _, err = invoke("run", "PATTERN SEQ(A a, B b)", "--input", str(src), "-o", target,
                              "--format", "csv")
        assert code == EXIT_USAGE and "is an input file" in err
    code, _, err = invoke("run", "PATTERN SEQ(A a, B b)", "--input", str(tmp_path / "*.csv"),
                          "--on-bad-row", f"dead-letter={src}")
    assert code == EXIT_USAGE and "--on-bad-row dead-letter=" in err
    assert src.read_bytes() == before


# -- epoch times read with --time-unit print as times -----------------------------------------


@pytest.mark.parametrize("stream", [(), ("--stream",)])
def test_time_unit_ms_prints_times(tmp_path: Path, stream: tuple[str, ...]) -> None:
    src = tmp_path / "e.csv"
    src.write_text("ts,type\n1385000000000,A\n1385000000250,B\n")
    q = "PATTERN SEQ(A a, B b) WITHIN 1 second"
    code, out, err = invoke("run", q, "--input", str(src), "--time-unit", "ms", "--quiet",
                            *stream)
    assert code == 0, err
    m = json.loads(out)
    assert (m["start"], m["end"]) == ("2013-11-21T02:13:20+00:00",
                                      "2013-11-21T02:13:20.250000+00:00")
    code, out, err = invoke("run", q, "--input", str(src), "--time-unit", "ms", "--quiet",
                            "--format", "csv", *stream)
    assert code == 0, err
    assert "2013-11-21T02:13:20+00:00" in out.splitlines()[1]
    # no --time-unit: the numbers may be sequence numbers, and print as read
    src.write_text("ts,type\n1,A\n2,B\n")
    code, out, err = invoke("run", q.replace("1 second", "5 seconds"), "--input", str(src),
                            "--quiet", *stream)
    assert code == 0, err
    assert (json.loads(out)["start"], json.loads(out)["end"]) == (1, 2)
