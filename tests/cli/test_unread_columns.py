"""Issue 16, item 3 (in part): a bad value in a column the query does not read never fails a
run; it is counted in one warning. (``--null-values`` is not done: it needs the reader.)"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kleene.cli.main import EXIT_INPUT, cli

GLUCOSE = Path(os.environ.get("KLEENE_SHARED_DATA", "/work/shared/data")) / "cgm_glucose" / \
    "cgm_glucose.csv.gz"

RISE = ("PATTERN SEQ(G a, G b) WHERE b.glucose - a.glucose >= 40 WITHIN 10 minutes "
        "USING strict-contiguity")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.skipif(not GLUCOSE.exists(), reason="the glucose data is not here")
@pytest.mark.parametrize("stream", [(), ("--stream",)])
def test_glucose_nil_in_isig_does_not_fail_a_glucose_query(stream: tuple[str, ...]) -> None:
    """The real CGM file has isig='nil' in 1,061 rows (the first at data row 39,459); a query
    on glucose alone runs over all 52,281 readings and finds what a plain CSV scan finds."""
    code, out, err = invoke("run", RISE, "--input", str(GLUCOSE), "--time-col", "datetime",
                            "--event-type", "G", *stream)
    assert code == 0, err
    assert err.startswith(
        "kleene: warning: 1,061 bad values in columns the query does not read, kept as text so "
        "they do not fail the run: isig: 1,061 not double (e.g. 'nil' at event id 39458)\n")
    assert "events read           52,281" in err and "bad rows                   0" in err
    with gzip.open(GLUCOSE, "rt") as f:
        rows = [line.rstrip("\n").split(",") for line in f][1:]
    expected = []
    for i in range(1, len(rows)):  # consecutive readings (the file is sorted by time)
        (_, t0, g0), (_, t1, g1) = rows[i - 1], rows[i]
        minutes = (_minutes(t1) - _minutes(t0))
        if int(g1) - int(g0) >= 40 and minutes <= 10:
            expected.append({"a": i - 1, "b": i})
    assert [json.loads(line)["match"] for line in out.splitlines()] == expected
    assert rows[39_458][0] == "nil"  # (the example the warning names)


def _minutes(text: str) -> int:
    import datetime as dt

    return int(dt.datetime.fromisoformat(text).timestamp()) // 60


@pytest.mark.skipif(not GLUCOSE.exists(), reason="the glucose data is not here")
def test_a_query_that_reads_the_bad_column_still_fails() -> None:
    code, _, err = invoke("run", "PATTERN SEQ(G a, G b) WHERE b.isig > a.isig + 10 WITHIN 10 "
                          "minutes USING strict-contiguity", "--input", str(GLUCOSE),
                          "--time-col", "datetime", "--event-type", "G")
    assert code == EXIT_INPUT
    assert "row 39459, column 'isig': 'nil' is not a number" in err


def test_unread_columns_in_a_small_file(tmp_path: Path) -> None:
    src = tmp_path / "e.csv"
    src.write_text("ts,type,x,noise,n\n1,A,1,0.5,1\n2,B,5,oops,2\n3,B,6,1.5,many\n"
                   "4,C,0,nil,4\n5,C,0,2.5,5\n6,C,0,3.5,6\n7,C,0,4.5,7\n")
    q = "PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 10 seconds"
    code, out, err = invoke("run", q, "--input", str(src), "--quiet")
    assert code == 0, err
    assert [json.loads(line)["match"] for line in out.splitlines()] == [
        {"a": 0, "b": 1}, {"a": 0, "b": 2}]
    assert err == ("kleene: warning: 3 bad values in columns the query does not read, kept "
                   "as text so they do not fail the run: noise: 2 not double (e.g. 'oops' at "
                   "event id 1); n: 1 not int64 (e.g. 'many' at event id 2)\n")
    # RETURN a reads whole events: every column is read, and the bad value is a bad row
    code, _, err = invoke("run", q + " RETURN b", "--input", str(src), "--quiet")
    assert code == EXIT_INPUT and "row 2, column 'noise': 'oops' is not a number" in err
    # a clean file: no warning, and unread numbers stay numbers in RETURN-free output
    src.write_text("ts,type,x,noise\n1,A,1,0.5\n2,B,5,1.5\n")
    code, out, err = invoke("run", q, "--input", str(src), "--quiet")
    assert (code, err) == (0, "")
