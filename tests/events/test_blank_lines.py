"""Blank CSV lines: no events, but each takes an id, so ids are data-line indices; the run
summary counts them (issue 16, item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kleene.cli.main import cli
from kleene.events.readers import iter_events, read_events


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").replace("\r\n", "\n").split("\n")[1:]


@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_ids_are_data_line_indices(tmp_path: Path, end: str) -> None:
    rows = ["1,A,a1", "", "2,B,b1", "", "", "3,A,a2", "4,B,b2", ""]
    p = tmp_path / "e.csv"
    p.write_bytes(end.join(["ts,type,name", *rows]).encode() + end.encode())
    batch, report = read_events(str(p))
    data = lines_of(p)
    # every event sits at the data line of its id (the 0-based line after the header)
    assert [data[i].split(",")[2] for i in batch.ids.to_pylist()] == \
        batch.column("name").to_pylist() == ["a1", "b1", "a2", "b2"]
    assert report.blank_lines == rows.count("") and report.rows_read == 4


def test_ids_across_blocks_batches_and_the_slow_path(tmp_path: Path) -> None:
    """Blank lines in every block, a ragged row (the line-by-line path) and small batches."""
    body = []
    for i in range(3000):
        body.append(f"{i},A,{i}" if i % 7 else "")
    body[1500] = "1500,A,1500,extra"  # a bad row
    p = tmp_path / "e.csv"
    p.write_text("ts,type,x\n" + "\n".join(body) + "\n", encoding="utf-8")
    stream = iter_events(str(p), on_bad_row="skip", block_bytes=4096, batch_size=100)
    ids, xs = [], []
    for b in stream:
        ids += b.ids.to_pylist()
        xs += b.column("x").to_pylist()
    assert ids == xs == [i for i in range(3000) if i % 7 and i != 1500]
    assert stream.report.blank_lines == len(range(0, 3000, 7))
    assert stream.report.skipped == 1


def test_ids_continue_across_files_after_blank_lines(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.csv").write_text("ts,type\n1,A\n\n2,A\n\n", encoding="utf-8")
    (d / "b.csv").write_text("ts,type\n3,A\n", encoding="utf-8")
    batch, report = read_events(str(d))
    assert batch.ids.to_pylist() == [0, 2, 4] and report.blank_lines == 2


def test_summary_counts_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "e.csv"
    p.write_text("ts,type,x\n1,A,1\n\n2,A,2\n\n\n3,A,3\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["run", "PATTERN SEQ(A a, A b) WHERE b.x = a.x + 1 "
                                   "USING strict-contiguity", "--input", str(p)])
    assert res.exit_code == 0, res.stderr
    # ids are data-line indices: x=1 on line 0, x=2 on line 2, x=3 on line 5
    assert [line.split('"match": ')[1].split("}")[0] for line in res.stdout.splitlines()] == \
        ['{"a": 0, "b": 2', '{"a": 2, "b": 5']
    assert "blank lines                3" in res.stderr
    assert "events read                3" in res.stderr
