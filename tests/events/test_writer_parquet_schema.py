"""Parquet row groups whose RETURN columns differ (a null column, int then float, a new column,
values with no common type): the file holds every match, in one schema that fits all its row
groups; it reads back as the file of the same matches in a single row group. CSV refuses a
RETURN field its header has no column for (one-line error) instead of leaving it out."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kleene.cli.main import cli
from kleene.events import Match, TimeInfo
from kleene.events.matchtable import MatchColumns, MatchTable
from kleene.events.writers import CsvWriter, ParquetWriter


def _m(i: int, **values: Any) -> Match:
    return Match("q", {"a": i}, i * 1_000_000, i * 1_000_000, values)


def _columns(first: int, n: int) -> MatchColumns:
    """``n`` matches of one variable ``a`` (ids ``first``...), no RETURN values."""
    ids = list(range(first, first + n))
    idx = np.arange(n, dtype=np.int64)
    ts = np.array(ids, np.int64) * 1_000_000
    return MatchColumns("q", ("a",), ids, (idx,), (None,), ts, ts, idx)


CASES: dict[str, list[Any]] = {
    "null-then-int": [[_m(0, x=None), _m(1, x=None)], [_m(2, x=5), _m(3, x=None)]],
    "int-then-float": [[_m(0, x=1), _m(1, x=2)], [_m(2, x=1.5), _m(3, x=-4)]],
    "int-then-text": [[_m(0, x=1), _m(1, x=2)], [_m(2, x="b"), _m(3, x=None)]],
    "text-then-mixed": [[_m(0, x="a"), _m(1, x="b")], [_m(2, x=3), _m(3, x="c")],
                        [_m(4, x="d"), _m(5, x="e")]],
    "list-int-then-float": [[_m(0, x=[1, 2]), _m(1, x=[])], [_m(2, x=[0.5]), _m(3, x=None)]],
    "list-then-int": [[_m(0, x=[1]), _m(1, x=[2])], [_m(2, x=3), _m(3, x=4)]],
    "columns-then-values": [MatchTable([_columns(0, 3), [_m(3, x=7, y="s"), _m(4, x=8, y="t")]])],
    "values-then-columns": [MatchTable([[_m(0, x=7), _m(1, x=8)], _columns(2, 3)])],
    "field-only-in-a-later-segment": [[_m(0)], [_m(1, x=1)], [_m(2)], [_m(3, y=2.5)]],
    "big-int-then-float": [[_m(0, x=2**60), _m(1, x=1)], [_m(2, x=0.5), _m(3, x=None)]],
    "float-then-big-int": [[_m(0, x=0.5), _m(1, x=1.5)], [_m(2, x=2**60 + 1), _m(3, x=1)]],
    "beyond-int64": [[_m(0, x=1), _m(1, x=2)], [_m(2, x=2**70), _m(3, x=3)]],  # (traceback)
    "int-float-null-text": [[_m(0, x=None), _m(1, x=None)], [_m(2, x=1), _m(3, x=2)],
                            [_m(4, x=0.5), _m(5, x=1.0)], [_m(6, x="t"), _m(7, x=None)]],
}


def _write(path: Path, batches: list[Any], row_group_size: int) -> None:
    w = ParquetWriter(str(path), TimeInfo(), row_group_size=row_group_size)
    with w:
        for batch in batches:
            w.write(batch)


def _all(batches: list[Any]) -> list[Match]:
    out: list[Match] = []
    for b in batches:
        out += b.to_list() if isinstance(b, MatchTable) else b
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_row_groups_of_different_types_make_one_file(tmp_path: Path, case: str) -> None:
    batches = CASES[case]
    small, whole = tmp_path / "small.parquet", tmp_path / "whole.parquet"
    _write(small, batches, 2)
    _write(whole, batches, 1 << 20)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.parquet", "whole.parquet"]
    assert pq.ParquetFile(small).num_row_groups > 1
    assert pq.ParquetFile(whole).num_row_groups == 1
    got, want = pq.read_table(small), pq.read_table(whole)
    assert got.schema.equals(want.schema), (got.schema, want.schema)
    if case != "int-float-null-text":
        assert got.to_pylist() == want.to_pylist()
    # (else: the ints were widened to float by the third row group, so the fourth's JSON
    # text says 1.0 where one row group says 1: the same number, checked below)
    # every match is there with its RETURN values (JSON text where the column has no type)
    ms = _all(batches)
    assert set(got.column_names) == {"query", "start", "end", "match"}.union(
        *(m.values for m in ms))
    assert [json.loads(r["match"])["a"] for r in got.to_pylist()] == [m.bindings["a"] for m in ms]
    text = {f.name for f in got.schema if f.type == "string"} - {"query", "match"}
    for row, m in zip(got.to_pylist(), ms, strict=True):
        for k in {f.name for f in got.schema} - {"query", "start", "end", "match"}:
            v = m.values.get(k)
            if k in text and not all(isinstance(x.values.get(k), (str, type(None))) for x in ms):
                assert json.loads(row[k]) == v
            else:
                assert row[k] == v


def test_a_file_without_later_schema_changes_is_not_rewritten(tmp_path: Path) -> None:
    """The common case: every row group has the first one's columns (no copy is made)."""
    ms = [_m(i, x=i) for i in range(6)]
    w = ParquetWriter(str(tmp_path / "o.parquet"), TimeInfo(), row_group_size=2)
    with w:
        w.write(ms)
        assert w._rewrites == 0
    assert pq.read_table(tmp_path / "o.parquet").column("x").to_pylist() == list(range(6))


def _run(args: list[str]) -> Any:
    return CliRunner().invoke(cli, ["run", *args, "-q"])


def test_cli_null_return_for_a_whole_row_group_then_ints(tmp_path: Path) -> None:
    """``RETURN a.v AS x`` null for the first 65,536 matches (one row group), ints after: was
    a pyarrow traceback (no cast from int64 to null)."""
    n = 65_536 + 4
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "ts": i, "type": "A",
                                       "v": None if i < 65_536 else i}) + "\n"
                           for i in range(n)))
    common = ["PATTERN A a RETURN a.v AS x", "-i", str(src), "--id-col", "id",
              "--time-unit", "s"]
    res = _run([*common, "-o", str(tmp_path / "o.parquet")])
    assert res.exit_code == 0, res.output
    res_j = _run([*common, "-o", str(tmp_path / "o.jsonl")])
    assert res_j.exit_code == 0, res_j.output
    table = pq.read_table(tmp_path / "o.parquet")
    lines = [json.loads(s) for s in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert str(table.schema.field("x").type) == "int64"
    assert table.column("x").to_pylist() == [r["values"]["x"] for r in lines]
    assert table.column("x").to_pylist()[-4:] == list(range(65_536, n))
    assert pq.ParquetFile(tmp_path / "o.parquet").num_row_groups == 2


SET = ("NAME first PATTERN SEQ(A a, B b) WITHIN 1 minute\n;\n"
       "NAME second PATTERN SEQ(A a, B b) WITHIN 1 minute RETURN b.v AS x\n")
"""A query set whose first query returns nothing and the second a field."""


def _set_run(tmp_path: Path, out: str, *extra: str) -> Any:
    (tmp_path / "set.kleene").write_text(SET)
    src = tmp_path / "in.csv"
    src.write_text("id,ts,type,v\n1,1,A,3\n2,2,B,4\n3,3,A,5\n4,4,B,6\n")
    return _run([str(tmp_path / "set.kleene"), "-i", str(src), "--id-col", "id",
                 "--time-unit", "s", "-o", str(tmp_path / out), *extra])


@pytest.mark.parametrize("extra", [(), ("--stream", "--batch-size", "2")],
                         ids=["whole", "stream"])
def test_cli_query_set_parquet_keeps_the_second_querys_values(tmp_path: Path,
                                                              extra: tuple[str, ...]) -> None:
    """The first match has no RETURN field: the column ``x`` was left out of the file."""
    assert _set_run(tmp_path, "o.jsonl", *extra).exit_code == 0
    res = _set_run(tmp_path, "o.parquet", *extra)
    assert res.exit_code == 0, res.output
    rows = pq.read_table(tmp_path / "o.parquet").to_pylist()
    lines = [json.loads(s) for s in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert [r["query"] for r in rows] == [r["query"] for r in lines]
    assert [r.get("x") for r in rows] == [r["values"].get("x") for r in lines]
    assert {r.get("x") for r in rows if r["query"] == "second"} == {4, 6}


@pytest.mark.parametrize("extra", [(), ("--stream", "--batch-size", "2")],
                         ids=["whole", "stream"])
def test_cli_query_set_csv_header_has_every_querys_fields(tmp_path: Path,
                                                          extra: tuple[str, ...]) -> None:
    """The first match has no RETURN field: CSV's header came from it, so the second query's
    ``x`` was dropped (session 9), then refused (session 10); now the header is every query's
    fields, known before the first match, and each row holds its query's values."""
    assert _set_run(tmp_path, "o.jsonl", *extra).exit_code == 0
    res = _set_run(tmp_path, "o.csv", *extra)
    assert res.exit_code == 0, res.output
    with open(tmp_path / "o.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    lines = [json.loads(s) for s in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert list(rows[0]) == ["query", "start", "end", "match", "x"]
    assert [r["query"] for r in rows] == [r["query"] for r in lines]
    assert [r["x"] for r in rows] == [str(r["values"].get("x", "")) for r in lines]
    assert {r["x"] for r in rows if r["query"] == "second"} == {"4", "6"}


def test_cli_csv_without_matches_has_the_return_columns(tmp_path: Path) -> None:
    """No match: the header still names the RETURN fields (the same columns as a file with
    matches), not only the fixed four."""
    src = tmp_path / "in.csv"
    src.write_text("id,ts,type,v\n1,1,B,3\n2,2,A,4\n")  # B before A: no match
    res = _run(["PATTERN SEQ(A a, B b) RETURN b.v AS x, a.v", "-i", str(src), "--id-col", "id",
                "--time-unit", "s", "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "o.csv").read_text() == "query,start,end,match,x,a.v\n"


def test_csv_writer_refuses_a_return_field_not_in_the_header() -> None:
    import io

    out = io.StringIO()
    w = CsvWriter(out, TimeInfo())
    w.write([_m(0, y=1)])
    w.write([_m(1)])  # a missing field is an empty cell
    with pytest.raises(ValueError, match="'q' returns x"):
        w.write([_m(1, y=2, x=3)] * 3)  # column-wise path
    with pytest.raises(ValueError, match="'q' returns x"):
        w.write([_m(2, x=3), _m(3, y=1)])  # row path (fields differ)
    w.close()
    assert out.getvalue().splitlines()[1:] == ['q,0,0,"{""a"": 0}",1', 'q,1,1,"{""a"": 1}",']


def test_a_copy_that_cannot_be_made_is_one_error_and_leaves_nothing(tmp_path: Path) -> None:
    """The file written so far is gone when the schema must widen: an InputError naming the
    output (the CLI's exit 2), close() adds no second error, no copy is left beside it."""
    from kleene.errors import InputError

    path = tmp_path / "o.parquet"
    w = ParquetWriter(str(path), TimeInfo(), row_group_size=2)
    w.write([_m(0, x=1), _m(1, x=2)])
    path.unlink()
    with pytest.raises(InputError, match="cannot write the output file") as e:
        w.write([_m(2, x=0.5), _m(3, x=1.5)])
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    w.close()
    assert list(tmp_path.iterdir()) == []
