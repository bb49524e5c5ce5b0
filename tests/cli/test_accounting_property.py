"""Issue 17 item 12: the late-row, dead-letter and skip accounting agree across batch sizes,
``--stream`` and ``--spark``.

Hypothesis draws CSV files of good rows (timestamps going back at random: out of order, late
under ``--stream``) and corrupted ones (an unparsable timestamp, text in the integer column the
query reads, a ragged row, a stray quote, a line that is not UTF-8). What each summary must say
is known from the construction, not from another run: bad rows = corrupted lines, out of order
= good rows behind the newest earlier good row; events + bad rows = data lines; every bad row
is one dead letter, every late row one late record. The embedded runs are broad (several batch
sizes, batch and stream); Spark (local mode) gets a few examples only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kleene.cli.main import cli

QUERY = "PATTERN SEQ(A a, B b) WHERE b.x >= a.x WITHIN 20 seconds"
CORRUPT = [b"zz,A,1", b"7,B,oops", b"8,A,1,9", b'9,"A,1', b"\xff\xfe,B,2"]
"""Bad timestamp, text in x (which the query reads), ragged, stray quote, not UTF-8."""


@dataclass
class Drawn:
    data: bytes
    lines: int
    bad: int
    out_of_order: int


@st.composite
def files(draw: st.DrawFn) -> Drawn:
    rows: list[bytes] = [b"0,A,0", b"0,B,1"]  # both types occur (else a query error)
    bad = late = 0
    newest = 0
    n = draw(st.integers(0, 25))
    for _ in range(n):
        if draw(st.integers(0, 3)) == 0:
            rows.append(draw(st.sampled_from(CORRUPT)))
            bad += 1
            continue
        ts = draw(st.integers(0, 40))
        if ts < newest:
            late += 1
        newest = max(newest, ts)
        rows.append(b"%d,%s,%d" % (ts, draw(st.sampled_from([b"A", b"B"])),
                                   draw(st.integers(0, 5))))
    return Drawn(b"ts,type,x\n" + b"".join(r + b"\n" for r in rows), len(rows), bad, late)


PINNED = ("--column-type", "x=int", "--column-type", "ts=float")
"""The types, given: inferred, they come from the first batch by majority, so with as many
bad values as good ones in it they depend on --batch-size (the open bug the xfail test below
records); the accounting is what this test checks."""


def _num(label: str, text: str) -> int:
    m = re.search(rf"^{label}\s+([\d,]+)", text, re.MULTILINE)
    assert m is not None, f"no {label!r} line in:\n{text}"
    return int(m.group(1).replace(",", ""))


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _run(tmp: Path, *args: str) -> str:
    res = CliRunner().invoke(cli, ["run", QUERY, "--input", str(tmp / "in.csv"),
                                   "-o", str(tmp / "out.jsonl"), *args, *PINNED])
    assert res.exit_code == 0, res.stderr
    return res.stderr


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(f=files())
def test_accounting_agrees_across_batch_sizes_and_stream(tmp_path: Path, f: Drawn) -> None:
    (tmp_path / "in.csv").write_bytes(f.data)
    for size in ("1", "3", "64"):
        dead = tmp_path / f"dead{size}.jsonl"
        err = _run(tmp_path, "--batch-size", size, f"--on-bad-row=dead-letter={dead}")
        assert _num("bad rows", err) == f.bad == _lines(dead), size
        assert _num("events read", err) + f.bad == f.lines
        assert _num("out of order", err) == f.out_of_order
        skipped = _run(tmp_path, "--batch-size", size, "--on-bad-row", "skip")
        assert (_num("events read", skipped), _num("bad rows", skipped)) == (
            f.lines - f.bad, f.bad)
    for size in ("1", "5"):
        dead, late = tmp_path / f"sdead{size}.jsonl", tmp_path / f"late{size}.jsonl"
        err = _run(tmp_path, "--stream", "--batch-size", size,
                   f"--on-bad-row=dead-letter={dead}", "--late-output", str(late))
        assert _num("bad rows", err) == f.bad == _lines(dead), size
        assert _num("events read", err) + f.bad == f.lines
        # with 0 s allowed lateness, the late rows are exactly the out-of-order ones
        assert _num("late", err) == f.out_of_order == _lines(late)


@pytest.mark.spark
@settings(max_examples=2, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(f=files())
def test_spark_counts_the_same_rows(tmp_path: Path, f: Drawn) -> None:
    (tmp_path / "in.csv").write_bytes(f.data)
    err = _run(tmp_path, "--spark", "--on-bad-row", "skip")
    assert _num("bad rows", err) == f.bad
    assert _num("events read", err) + f.bad == f.lines


@pytest.mark.xfail(strict=True, reason="open (issue 17 item 12, found by the property test "
                   "above): the time column's kind (epoch numbers or ISO text) is inferred "
                   "from the first batch only, by majority; with as many text timestamps as "
                   "numbers in it, --batch-size 64 reads every number as a bad ISO timestamp "
                   "while --batch-size 3 reads them as epoch times")
def test_text_timestamps_decide_the_time_column_by_the_first_batch(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_bytes(b"ts,type,x\n0,A,0\n0,B,1\nzz,A,1\nzz,A,1\n")
    counts = set()
    for size in ("3", "64"):
        res = CliRunner().invoke(cli, ["run", QUERY, "--input", str(tmp_path / "in.csv"),
                                       "--batch-size", size, "--on-bad-row", "skip"])
        err = res.stderr
        counts.add((_num("events read", err), _num("bad rows", err)))
    assert counts == {(2, 2)}
