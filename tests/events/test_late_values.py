"""A column with no value in the rows that decide the types (a sensor that reports only
later) gets the type of its first values, not text: inference reads the first values that are
there (``decisions.decide``), and past the deciding chunk the reader reads on
(``EventStream._look_ahead``) and puts what it read back. Events, ids, bad rows and counts are
those of a file whose values start at the top."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from kleene.cli.main import cli
from kleene.events.options import ReadOptions
from kleene.events.readers import iter_events, read_events


def _file(path: Path, empty: int, values: list[str], tail: str = "") -> Path:
    """``empty`` rows with no x, then one row per value, then three B rows (x: the first
    value, or empty)."""
    lines = ["ts,type,k,x"]
    lines += [f"{i},A,k{i % 3}," for i in range(empty)]
    lines += [f"{empty + i},A,k{i % 3},{v}" for i, v in enumerate(values)]
    bx = values[0] if values else ""
    lines += [f"{empty + len(values) + i},B,k{i % 3},{bx}" for i in range(3)]
    path.write_text("\n".join(lines) + "\n" + tail)
    return path


SMALL = {"block_bytes": 1 << 12, "batch_size": 64}
"""Small blocks: the empty rows fill many chunks before the first value."""


@pytest.mark.parametrize("opts", [{}, SMALL], ids=["one-block", "small-blocks"])
@pytest.mark.parametrize(("values", "kind"), [
    (["3", "17", "4"], pa.int64()), (["3.5", "1"], pa.float64()),
    (["true", "false"], pa.bool_()), (["red", "7"], pa.string()),
])
def test_a_column_empty_at_first_gets_its_values_type(tmp_path: Path, opts: dict[str, int],
                                                      values: list[str],
                                                      kind: pa.DataType) -> None:
    path = _file(tmp_path / "e.csv", 70_000 if not opts else 3_000, values)
    ev, _ = read_events(str(path), ReadOptions(time_unit="s", **opts))  # type: ignore[arg-type]
    assert ev.table.schema.field("x").type == kind
    top, _ = read_events(str(_file(tmp_path / "top.csv", 0, values)), ReadOptions(time_unit="s"))
    n = len(values) + 3
    assert ev.table.column("x").to_pylist()[-n:] == top.table.column("x").to_pylist()
    assert ev.table.column("x").null_count == len(ev) - n


def test_the_chunks_read_ahead_are_all_there_in_order(tmp_path: Path) -> None:
    """Every row once, in order, with its id, and the report counts them: reading ahead
    loses and repeats nothing, also with a bad row in the part read ahead."""
    path = _file(tmp_path / "e.csv", 3_000, ["5", "oops", "6"])
    with iter_events(str(path), ReadOptions(time_unit="s", on_bad_row="skip",
                                            **SMALL)) as s:  # type: ignore[arg-type]
        batches = list(s)
        report = s.report
    ids = [i for b in batches for i in b.table.column("__id").to_pylist()]
    assert ids == [i for i in range(3_006) if i != 3_001]
    assert report.rows_read == 3_006 and report.events == 3_005 and report.skipped == 1
    assert batches[0].table.schema.field("x").type == pa.int64()


def test_null_values_do_not_decide_either(tmp_path: Path) -> None:
    path = tmp_path / "e.csv"
    lines = ["ts,type,x"] + [f"{i},A,nil" for i in range(2_000)] + ["2000,A,4", "2001,A,5"]
    path.write_text("\n".join(lines) + "\n")
    with iter_events(str(path), ReadOptions(time_unit="s", null_values=("nil",),
                                            **SMALL)) as s:  # type: ignore[arg-type]
        ev = [b for b in s]
        assert s.report.nulled == 2_000
    assert ev[0].table.schema.field("x").type == pa.int64()
    assert [v for b in ev for v in b.table.column("x").to_pylist()][-2:] == [4, 5]


def test_a_column_empty_throughout_stays_text(tmp_path: Path) -> None:
    lines = ["ts,type,x"] + [f"{i},A," for i in range(500)]
    (tmp_path / "n.csv").write_text("\n".join(lines) + "\n")
    ev, _ = read_events(str(tmp_path / "n.csv"), ReadOptions(time_unit="s", **SMALL))  # type: ignore[arg-type]
    assert ev.table.schema.field("x").type == pa.string()


QUERY = "PATTERN SEQ(A a, B b) WHERE a.x > 15 PARTITION BY k WITHIN 1000000 seconds"


@pytest.mark.parametrize("extra", [(), ("--stream",), ("--workers", "2"), ("--plan", "chain")],
                         ids=["whole", "stream", "workers", "chain"])
def test_cli_compares_a_late_column_with_numbers(tmp_path: Path, extra: tuple[str, ...]
                                                  ) -> None:
    """The query compares x with a number: before, 'compares a string with a number' (x read
    as text because its first 65,536 rows are empty)."""
    late = _file(tmp_path / "late.csv", 70_000, ["3", "17", "20", "16", "2", "30"])
    res = CliRunner().invoke(cli, ["run", QUERY, "-i", str(late), "--time-unit", "s",
                                    "-o", str(tmp_path / "late.jsonl"), "-q", *extra])
    assert res.exit_code == 0, res.output
    got = (tmp_path / "late.jsonl").read_text().splitlines()
    # the same matches as the NFA on one process, counted by hand: a.x in 17, 20, 16, 30
    # (keys k1, k2, k0, k2), each with the B of its key
    assert len(got) == 4
    ref = CliRunner().invoke(cli, ["run", QUERY, "-i", str(late), "--time-unit", "s",
                                    "-o", str(tmp_path / "ref.jsonl"), "-q", "--plan", "nfa",
                                    "--workers", "1"])
    assert ref.exit_code == 0, ref.output
    assert got == (tmp_path / "ref.jsonl").read_text().splitlines()
