"""Input faults of issue 17 (items 2, 3, 4, 6, 10): each reproducer from the issue, run through
the CLI, now gives a one-line input error (exit 2) or an exact bad-row count."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kleene.errors import InputError
from kleene.events.readers import read_events

QUERY = "PATTERN SEQ(A a, B b)"


def kleene(*args: str, stdin: bytes | None = None, query: str = QUERY) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "kleene", "run", query, *args],
                          input=stdin, capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONWARNINGS": "error"})
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def summary(err: str) -> tuple[int, int]:
    """(events read, bad rows) from the run summary."""
    lines = {ln.split()[0]: ln.split() for ln in err.splitlines() if ln.strip()}
    return (int(lines["events"][2].replace(",", "")), int(lines["bad"][2].replace(",", "")))


def one_line_input_error(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err and "Exception ignored" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kleene: input error: "), err
    return lines[0]


@pytest.mark.parametrize("policy", [[], ["--on-bad-row", "skip"]])
def test_item2_header_with_a_bare_cr(tmp_path: Path, policy: list[str]) -> None:
    p = tmp_path / "cr.csv"
    p.write_bytes(b"ts,t\rype,x\n1,A,1\n")
    line = one_line_input_error(*kleene("--input", str(p), *policy)[::2])
    assert line == (f"kleene: input error: {p}: line 1 (the header) has a carriage return (CR) "
                    "inside it; lines must end in LF or CRLF")


@pytest.mark.parametrize("policy", [[], ["--on-bad-row", "skip"]])
@pytest.mark.parametrize("seed", range(4))
def test_item2_random_binary_files(tmp_path: Path, policy: list[str], seed: int) -> None:
    import random

    p = tmp_path / "bin.csv"
    p.write_bytes(random.Random(seed).randbytes(3000))
    line = one_line_input_error(*kleene("--input", str(p), *policy)[::2])
    assert line.startswith(f"kleene: input error: {p}: ")
    assert line.isprintable()


def test_item3_a_line_that_is_not_utf8_is_a_bad_row(tmp_path: Path) -> None:
    p = tmp_path / "ff.csv"
    p.write_bytes(b"ts,type,x\n1,A,1\n2,B,2\n\xff\xfe\n3,A,3\n")
    code, out, err = kleene("--input", str(p), "--on-bad-row", "skip")
    assert code == 0 and "Exception ignored" not in err and "Traceback" not in err
    assert summary(err) == (3, 1)
    assert f"{p}, row 3: not UTF-8 text (byte 1 is 0xff) (line 4)" in err
    assert [json.loads(m)["match"] for m in out.splitlines()] == [{"a": 0, "b": 1}]
    line = one_line_input_error(*kleene("--input", str(p))[::2])
    assert line.endswith(f"{p}, row 3: not UTF-8 text (byte 1 is 0xff) (line 4)")


def test_item3_bad_utf8_inside_a_value_is_a_bad_row(tmp_path: Path) -> None:
    p = tmp_path / "v.csv"
    p.write_bytes(b"ts,type,x\n1,A,1\n2,B,caf\xe9\n3,B,3\n")
    batch, report = read_events(str(p), on_bad_row="skip")
    assert batch.ids.to_pylist() == [0, 2] and report.skipped == 1


@pytest.mark.parametrize("delimiter", [";;", "", "\n", '"', "é"])
def test_item4_a_bad_delimiter_is_a_clear_error(tmp_path: Path, delimiter: str) -> None:
    p = tmp_path / "small.csv"
    p.write_text("ts,type,x\n1,A,1\n2,B,2\n")
    line = one_line_input_error(*kleene("--input", str(p), "--delimiter", delimiter)[::2])
    assert line == ("kleene: input error: the delimiter must be one ASCII character other "
                    f"than a quote or a line break, not {delimiter!r} (--delimiter)")


@pytest.mark.parametrize("rows", [2, 200_000])
def test_item6_gzip_on_stdin_is_detected_by_content(rows: int) -> None:
    text = "ts,type,x\n" + "".join(f"{i},{'AB'[i % 2]},{i}\n" for i in range(rows))
    code, out, err = kleene("--input", "-", "--input-format", "csv", "--count",
                            stdin=gzip.compress(text.encode()),
                            query="PATTERN SEQ(A a, B b) WHERE b.x = a.x + 1 WITHIN 1 seconds")
    assert code == 0, err
    assert int(out) == rows // 2
    assert summary(err) == (rows, 0)


def test_item6_a_gzip_file_without_gz_in_its_name(tmp_path: Path) -> None:
    p = tmp_path / "e.csv"
    p.write_bytes(gzip.compress(b"ts,type\n1,A\n2,B\n"))
    batch, report = read_events(str(p))
    assert batch.types.tolist() == ["A", "B"] and report.events == 2


def test_item6_gzip_jsonl_on_stdin() -> None:
    data = gzip.compress(b'{"ts": 1, "type": "A"}\n{"ts": 2, "type": "B"}\n')
    code, out, err = kleene("--input", "-", "--input-format", "jsonl", stdin=data)
    assert code == 0, err
    assert [json.loads(m)["match"] for m in out.splitlines()] == [{"a": 0, "b": 1}]


def test_item10_a_stray_quote_is_one_bad_row_at_its_line(tmp_path: Path) -> None:
    p = tmp_path / "q.csv"
    p.write_text('ts,type,x\n1,A,1\n2,B,2\n3,A,"3\n4,B,4\n5,A,5\n6,B,6\n7,A,7\n8,B,8\n')
    code, out, err = kleene("--input", str(p), "--on-bad-row", "skip")
    assert code == 0, err
    assert summary(err) == (7, 1)
    assert (f"{p}, row 3: unterminated quote (a quoted value must end on its line) (line 4)"
            in err)
    line = one_line_input_error(*kleene("--input", str(p))[::2])
    assert line.endswith("row 3: unterminated quote (a quoted value must end on its line) "
                         "(line 4)")


def test_item10_stray_quotes_in_a_big_file_lose_no_line(tmp_path: Path) -> None:
    """Many blocks, 43 stray quotes: every line is an event or a bad row, the bad rows are
    exactly the quoted lines, and the dead letters are one line each."""
    rows = [f"{i},{'AB'[i % 2]},{i}" for i in range(200_000)]
    stray = set(range(1000, 200_000, 4700))
    for i in stray:
        rows[i] = f'{i},A,"{i}'
    p = tmp_path / "t.csv"
    p.write_text("ts,type,x\n" + "\n".join(rows) + "\n")
    dead = tmp_path / "dead.jsonl"
    batch, report = read_events(str(p), on_bad_row=f"dead-letter={dead}", block_bytes=1 << 16)
    assert report.events + report.bad_rows == 200_000 == report.rows_read
    assert report.dead_lettered == len(stray) == 43
    letters = [json.loads(x) for x in dead.read_text().splitlines()]
    assert [d["line"] for d in letters] == [i + 2 for i in sorted(stray)]
    assert all(len(d["text"]) < 20 for d in letters)
    assert set(batch.ids.to_pylist()) == set(range(200_000)) - stray


def test_a_quoted_delimiter_still_reads(tmp_path: Path) -> None:
    p = tmp_path / "e.csv"
    p.write_text('ts,type,name\n1,A,"Doe, John"\n2,B,"say ""hi"""\n')
    batch, report = read_events(str(p))
    assert batch.table.column("name").to_pylist() == ["Doe, John", 'say "hi"']


def test_empty_lines_keep_physical_line_numbers(tmp_path: Path) -> None:
    p = tmp_path / "e.csv"
    # an empty line takes a row number too (so ids are line indices): row N is on line N + 1
    p.write_text("ts,type,x\n1,A,1\n\n\n2,B\n3,A,3\n")
    with pytest.raises(InputError, match=r"row 4: has 2 fields but the header has 3 \(line 5\)"):
        read_events(str(p))
