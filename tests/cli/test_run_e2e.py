"""``kleene run`` end to end: a real file, a real engine, the written matches and the summary.

Runs on every registered engine that can be loaded (the default ``automaton`` and the
``oracle``); the expected matches are written by hand from the timeline below.

    pos/id  0    1    2    3
    type    A    B    A    B
    ts      1    2    3    4
    x       1    5    9    7

``SEQ(A a, B b) WHERE b.x > a.x WITHIN 10 seconds`` -> (a=0, b=1), (a=0, b=3); (a=2, b=3) fails
7 > 9. Output order: by the position of the last event.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kleene.backends import BACKENDS
from kleene.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
EVENTS = "ts,type,x\n1,A,1\n2,B,5\n3,A,9\n4,B,7\n"
EXPECTED = [
    {"query": "q", "match": {"a": 0, "b": 1}, "start": 1, "end": 2, "values": {}},
    {"query": "q", "match": {"a": 0, "b": 3}, "start": 1, "end": 4, "values": {}},
]


def _loadable(name: str) -> bool:
    try:
        BACKENDS[name].load()
    except (ImportError, AttributeError):
        return False
    return True


ENGINES = [pytest.param(n, marks=pytest.mark.skipif(not _loadable(n),
                                                    reason=f"engine {n} not built yet"))
           for n in ("automaton", "oracle")]


@pytest.fixture()
def files(tmp_path: Path) -> tuple[str, str]:
    q = tmp_path / "q.kleene"
    q.write_text("PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 10 seconds\n")
    e = tmp_path / "e.csv"
    e.write_text(EVENTS)
    return str(q), str(e)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("engine", ENGINES)
def test_run_jsonl_to_stdout(files: tuple[str, str], engine: str) -> None:
    q, e = files
    code, out, err = invoke("run", q, "--input", e, "--engine", engine)
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == EXPECTED
    summary = err.splitlines()
    assert summary[1].split()[:3] == ["events", "read", "4"]
    assert summary[4].split()[:2] == ["matches", "2"]
    assert any(s.startswith("peak memory") for s in summary)


@pytest.mark.parametrize("engine", ENGINES)
def test_run_count_csv_and_parquet(files: tuple[str, str], engine: str,
                                   tmp_path: Path) -> None:
    q, e = files
    code, out, _ = invoke("run", q, "--input", e, "--engine", engine, "--count", "-q")
    assert (code, out) == (0, "2\n")
    out_csv = tmp_path / "m.csv"
    code, out, err = invoke("run", q, "--input", e, "--engine", engine, "-o", str(out_csv), "-q")
    assert (code, out, err) == (0, "", "")
    assert out_csv.read_text().splitlines() == [
        "query,start,end,match", 'q,1,2,"{""a"": 0, ""b"": 1}"', 'q,1,4,"{""a"": 0, ""b"": 3}"']
    out_pq = tmp_path / "m.parquet"
    code, _, _ = invoke("run", q, "--input", e, "--engine", engine, "-o", str(out_pq), "-q")
    assert code == 0
    assert pq.read_table(out_pq).column("match").to_pylist() == ['{"a": 0, "b": 1}',
                                                                 '{"a": 0, "b": 3}']


@pytest.mark.parametrize("engine", ENGINES)
def test_run_with_skipped_rows_reports_them(files: tuple[str, str], engine: str,
                                            tmp_path: Path) -> None:
    q, _ = files
    e = tmp_path / "bad.csv"
    e.write_text(EVENTS + "5,B\n")
    code, out, err = invoke("run", q, "--input", str(e), "--engine", engine,
                            "--on-bad-row", "skip")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == EXPECTED
    assert "bad rows                   1   (1 skipped, 0 dead-lettered)" in err
    assert f"e.g. {e}, row 5: has 2 fields but the header has 3 (line 6)" in err


@pytest.mark.skipif(not _loadable("automaton"), reason="the automaton engine is not built yet")
def test_demo_query_on_the_shipped_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's demo: delay propagation per aircraft on NYC flights 2013 (28 matches,
    counted independently with pandas when the sample was made)."""
    monkeypatch.chdir(ROOT)
    code, out, err = invoke("run", "examples/flight_delay_propagation.kleene",
                            "--input", "examples/data/nycflights13_sample.csv.gz",
                            "--time-col", "dep_time_utc", "--event-type", "Flight")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 28
    assert json.loads(lines[0]) == {
        "query": "delay_propagation", "match": {"a": 448, "b": [451], "c": 457},
        "start": "2013-02-20T21:09:00+00:00", "end": "2013-02-21T16:58:00+00:00",
        "values": {"tailnum": "N258JB", "origin": "JFK", "first_delay": 100,
                   "delayed_after": 1, "worst_follow_on": 65, "recovered_delay": 4}}


UDFS = "def double(x):\n    return x * 2\n\n\ndef boom(x):\n    raise ValueError('boom')\n"


@pytest.mark.parametrize("engine", ENGINES)
def test_run_with_udf(tmp_path: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """--udf module:function registers a Python function; its failure is a runtime error (3)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    (tmp_path / "kleene_test_udfs.py").write_text(UDFS)
    (tmp_path / "e.csv").write_text("ts,type,x\n1,A,1\n2,A,3\n")
    code, out, err = invoke("run", "PATTERN A a WHERE double(a.x) > 4", "--input", "e.csv",
                            "--udf", "kleene_test_udfs:double", "--engine", engine, "-q")
    assert (code, out) == (0, '{"query": "query", "match": {"a": 1}, "start": 2, "end": 2, '
                              '"values": {}}\n'), err
    code, out, err = invoke("run", "PATTERN A a WHERE boom(a.x) > 4", "--input", "e.csv",
                            "--udf", "kleene_test_udfs:boom", "--engine", engine, "-q")
    assert (code, out) == (3, "")
    assert "boom" in err.splitlines()[-1]
    assert err.splitlines()[-1].startswith("kleene: runtime error: ")


@pytest.mark.parametrize("engine", ENGINES)
def test_run_dead_letter(files: tuple[str, str], engine: str, tmp_path: Path) -> None:
    q, _ = files
    e = tmp_path / "bad.csv"
    e.write_text(EVENTS + "x,B,1\n")
    dead = tmp_path / "dead.jsonl"
    code, out, err = invoke("run", q, "--input", str(e), "--engine", engine,
                            "--on-bad-row", f"dead-letter={dead}")
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == EXPECTED
    assert json.loads(dead.read_text()) == {
        "source": str(e), "row": 5, "index": 4, "column": "ts",
        "reason": "'x' is not an epoch time (the time column holds numbers in s; ISO-8601 "
                  "text must be the whole column)",
        "record": {"ts": "x", "type": "B", "x": "1"}}
    assert "bad rows                   1   (0 skipped, 1 dead-lettered)" in err


STREAM_EVENTS = "ts,type,x\n1,A,1\n2,B,5\n3,A,9\n1,B,7\n4,B,7\n"


@pytest.mark.skipif(not _loadable("automaton"), reason="the automaton engine is not built yet")
def test_run_stream_counts_late_rows(tmp_path: Path) -> None:
    """--stream pushes chunks of 2 rows; row 3 (t=1) arrives after t=3: late unless allowed.

    chunks:  [a0@1 b1@2] [a2@3 b3@1] [b4@4]
    """
    e = tmp_path / "s.csv"
    e.write_text(STREAM_EVENTS)
    q = "PATTERN SEQ(A a, B b) WHERE b.x > a.x"
    code, out, err = invoke("run", q, "--input", str(e), "--stream", "--batch-size", "2")
    assert code == 0, err
    assert [json.loads(x)["match"] for x in out.splitlines()] == [{"a": 0, "b": 1},
                                                                  {"a": 0, "b": 4}]
    assert "late                       1   (behind the watermark" in err
    code, out, err = invoke("run", q, "--input", str(e), "--stream", "--batch-size", "2",
                            "--allowed-lateness", "5", "-q")
    assert code == 0, err
    assert [json.loads(x)["match"] for x in out.splitlines()] == [
        {"a": 0, "b": 3}, {"a": 0, "b": 1}, {"a": 0, "b": 4}]
    code, _, err = invoke("run", q, "--input", str(e), "--allowed-lateness", "5")
    assert (code, err) == (1, "kleene: usage error: --allowed-lateness needs --stream (a "
                              "bounded run sorts its input)\n")


@pytest.mark.parametrize("engine", ENGINES)
def test_query_file_without_name_is_named_after_the_file(tmp_path: Path, engine: str) -> None:
    q = tmp_path / "gaps.kleene"
    q.write_text("PATTERN SEQ(A a, B b)")
    e = tmp_path / "e.csv"
    e.write_text("ts,type\n1,A\n2,B\n")
    code, out, _ = invoke("run", str(q), "--input", str(e), "--engine", engine, "-q")
    assert (code, out) == (0, '{"query": "gaps", "match": {"a": 0, "b": 1}, "start": 1, '
                              '"end": 2, "values": {}}\n')


@pytest.mark.skipif(not _loadable("automaton"), reason="the automaton engine is not built yet")
def test_progress_only_on_a_terminal(files: tuple[str, str]) -> None:
    """A progress line goes to stderr when it is a TTY (a real pseudo-terminal here), and
    never into a redirected stderr."""
    import pty
    import subprocess
    import sys

    q, e = files
    cmd = [sys.executable, "-m", "kleene", "run", q, "--input", e]
    master, slave = pty.openpty()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=slave, timeout=120)
    os.close(slave)
    tty_err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        tty_err += chunk
        if b"peak memory" in tty_err:
            break
    os.close(master)
    assert proc.returncode == 0
    assert b"reading " in tty_err and b"\x1b[2K" in tty_err
    piped = subprocess.run(cmd, capture_output=True, timeout=120)
    assert b"reading " not in piped.stderr and b"\x1b" not in piped.stderr
    assert b"kleene run summary" in piped.stderr
