"""Bad input: every case names file, row, column and what is wrong; policies skip/dead-letter.

Rows in messages are 1-based data rows (row N of a CSV with a header is on line N + 1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from kleene.errors import InputError
from kleene.events.readers import BadRowPolicy, read_events


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def error_of(source: object, **kw: object) -> str:
    with pytest.raises(InputError) as info:
        read_events(source, **kw)
    return str(info.value)


def test_missing_time_column(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "when,type\n1,A\n")
    assert error_of(p, time_col="ts") == (
        f"{p}: time column 'ts' not found; the columns are: when, type")


def test_no_default_time_column(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "when,type\n1,A\n")
    assert error_of(p) == (
        f"{p}: no time column: pass --time-col (time_col=); the columns are: when, type")


def test_missing_type_column(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,kind\n1,A\n")
    assert error_of(p) == (f"{p}: no event type column 'type'; pass --type-col COLUMN or "
                           "--event-type NAME; the columns are: ts, kind")
    assert error_of(p, type_col="typ") == (
        f"{p}: type column 'typ' not found; pass --type-col COLUMN or --event-type NAME; "
        "the columns are: ts, kind")


def test_unparsable_timestamp(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type\n2013-01-01T10:00:00Z,A\n2013-13-01T10:00:00Z,A\n")
    assert error_of(p) == (
        f"{p}, row 2, column 'ts': cannot parse '2013-13-01T10:00:00Z' as an ISO-8601 "
        "timestamp (like 2013-01-01T10:00:00Z or 2013-01-01 10:00:00)")


def test_timestamp_zone_mixed(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type\n2013-01-01T10:00:00Z,A\n2013-01-01T11:00:00,A\n")
    assert error_of(p) == (
        f"{p}, row 2, column 'ts': timestamp '2013-01-01T11:00:00' has no time zone, but the "
        "column's first timestamps do; write it with Z or an offset like +01:00")


def test_missing_timestamp_and_type(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type\n1,A\n,A\n3,\n")
    assert error_of(p) == f"{p}, row 2, column 'ts': missing timestamp"
    batch, report = read_events(p, on_bad_row="skip")
    assert batch.ids.to_pylist() == [0]
    assert report.skipped == 2
    assert report.bad_examples == (f"{p}, row 2, column 'ts': missing timestamp",
                                   f"{p}, row 3, column 'type': missing event type")


def test_non_numeric_value_in_numeric_column(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type,x\n1,A,1\n2,A,2\n3,A,abc\n4,A,4\n")
    assert error_of(p) == (
        f"{p}, row 3, column 'x': 'abc' is not an integer (the column was read as int64 from "
        "its first rows; pass --column-type x=string to keep it as text, or --null-values to read such values as NULL)")
    assert error_of(p, column_types={"x": "float"}) == (
        f"{p}, row 3, column 'x': 'abc' is not a number")


def test_non_numeric_epoch_time(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type\n1,A\n2,A\nsoon,A\n")
    assert error_of(p) == (
        f"{p}, row 3, column 'ts': 'soon' is not an epoch time (the time column holds numbers "
        "in s; ISO-8601 text must be the whole column)")


def test_empty_file(tmp_path: Path) -> None:
    for name in ("e.csv", "e.jsonl"):
        p = write(tmp_path / name, "")
        kind = "a header line and rows" if name.endswith("csv") else "one JSON object per line"
        assert error_of(p) == f"{p}: the file is empty (expected {kind})"


def test_header_only(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type\n")
    assert error_of(p) == f"{p}: no events: the input has no data rows"


def test_ragged_csv_rows(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type,x\n1,A,1\n2,A\n3,A,3,extra\n4,A,4\n")
    assert error_of(p) == f"{p}, row 2: has 2 fields but the header has 3 (line 3)"
    batch, report = read_events(p, on_bad_row="skip")
    assert batch.ids.to_pylist() == [0, 3]  # ids stay the input rows
    assert report.skipped == 2 and report.rows_read == 4


def test_unknown_file_format(tmp_path: Path) -> None:
    p = write(tmp_path / "e.xlsx", "x")
    assert error_of(p) == (
        f"{p}: unknown file format .xlsx; kleene reads .csv, .tsv, .jsonl, .ndjson, .json, "
        ".parquet (optionally .gz); pass --input-format csv|jsonl|parquet")


def test_missing_file_and_bad_parquet(tmp_path: Path) -> None:
    assert error_of(str(tmp_path / "nope.csv")) == f"{tmp_path / 'nope.csv'}: no such file"
    p = write(tmp_path / "e.parquet", "not parquet at all")
    assert error_of(p).startswith(f"{p}: not a readable Parquet file (")


def test_invalid_json_lines(tmp_path: Path) -> None:
    p = write(tmp_path / "e.jsonl", '{"ts": 1, "type": "A"}\n{"ts": 2, "type": \n[1, 2]\n')
    assert error_of(p) == (
        f"{p}, row 2: not valid JSON: Expecting value at character 18 (line 2)")
    batch, report = read_events(p, on_bad_row="skip")
    assert batch.ids.to_pylist() == [0]
    assert report.bad_examples[1] == (
        f"{p}, row 3: not a JSON object (JSON Lines needs one {{...}} per line) (line 3)")


def test_json_mixed_types_in_a_column(tmp_path: Path) -> None:
    p = write(tmp_path / "e.jsonl", '{"ts": 1, "type": "A", "x": 1}\n'
              '{"ts": 2, "type": "A", "x": 2}\n{"ts": 3, "type": "A", "x": "many"}\n')
    assert error_of(p) == (
        f"{p}, row 3, column 'x': 'many' is not an integer (the column was read as int64 from "
        "its first rows; pass --column-type x=string to keep it as text, or --null-values to read such values as NULL)")


def test_reserved_column_and_bad_options(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type,__id\n1,A,1\n")
    assert error_of(p) == f"{p}: column name '__id' is reserved by kleene; rename it"
    p2 = write(tmp_path / "f.csv", "ts,type\n1,A\n")
    assert error_of(p2, column_types={"ts": "decimal"}) == (
        "unknown type 'decimal' for column 'ts'; use one of: int, float, string, bool, timestamp")
    assert error_of(p2, column_types={"nope": "int"}) == (
        f"{p2}: --column-type names column 'nope', which is not in the input; the columns "
        "are: ts, type")
    with pytest.raises(InputError, match="unknown bad-row policy 'drop'; use fail, skip or "
                                         "dead-letter=PATH"):
        BadRowPolicy.parse("drop")


def test_time_column_of_wrong_type() -> None:
    df = pd.DataFrame({"ts": [True, False], "type": ["A", "A"]})
    assert error_of(df) == ("<DataFrame>, column 'ts': time column has type bool; expected "
                            "timestamps, ISO-8601 strings or epoch numbers (see --time-unit)")


def test_records_that_are_not_mappings() -> None:
    assert error_of([{"ts": 1, "type": "A"}, 5]) == "<records>, row 2: not a mapping: int"


def test_dead_letter_file(tmp_path: Path) -> None:
    """Dead-lettered rows are written with their reason and original values; none is lost."""
    p = write(tmp_path / "e.csv", "ts,type,x\n1,A,1\n2,A\nx,A,3\n4,A,4\n5,A,5\n")
    dead = tmp_path / "dead.jsonl"
    batch, report = read_events(p, on_bad_row=f"dead-letter={dead}")
    assert batch.ids.to_pylist() == [0, 3, 4]
    assert (report.dead_lettered, report.skipped, report.events) == (2, 0, 3)
    lines = [json.loads(x) for x in dead.read_text().splitlines()]
    assert lines == [
        {"source": p, "row": 2, "index": 1, "line": 3, "reason": "has 2 fields but the header has 3",
         "text": "2,A"},
        {"source": p, "row": 3, "index": 2, "column": "ts",
         "reason": "'x' is not an epoch time (the time column holds numbers in s; "
                   "ISO-8601 text must be the whole column)",
         "record": {"ts": "x", "type": "A", "x": "3"}},
    ]


def test_ragged_row_far_into_a_large_file(tmp_path: Path) -> None:
    """A ragged row after many blocks: rows before it are read once, its line is exact."""
    rows = [f"{i},A,{i}" for i in range(3000)]
    rows[2500] = "2500,A"
    p = write(tmp_path / "e.csv", "ts,type,x\n" + "\n".join(rows) + "\n")
    assert error_of(p, block_bytes=4096) == (
        f"{p}, row 2501: has 2 fields but the header has 3 (line 2502)")
    batch, report = read_events(p, block_bytes=4096, on_bad_row="skip")
    assert len(batch) == 2999 and report.rows_read == 3000
    assert batch.ids.to_pylist() == [i for i in range(3000) if i != 2500]


def test_corrupt_compressed_files(tmp_path: Path) -> None:
    """A truncated or garbled .gz is an input error with the file's name, not a crash."""
    import gzip

    data = gzip.compress(("ts,type\n" + "".join(f"{i},A\n" for i in range(5000))).encode())
    p = tmp_path / "e.csv.gz"
    p.write_bytes(data[: len(data) // 2])
    assert error_of(str(p)) == f"{p}: cannot read: Truncated compressed stream"
    q = tmp_path / "g.csv.gz"
    q.write_bytes(b"garbage")
    assert error_of(str(q)) == f"{q}: cannot read: zlib inflate failed: incorrect header check"


def test_repeated_id(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type,key\n1,A,k1\n2,A,k2\n3,A,k1\n")
    assert error_of(p, id_col="key") == (
        f"{p}, column 'key': the id column repeats the value 'k1'; ids must be unique (omit "
        "--id-col to use row numbers)")


def test_time_format_mismatch(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type\n01/01/2013 10:00,A\n2013-01-01 10:01,A\n")
    assert error_of(p, time_format="%m/%d/%Y %H:%M") == (
        f"{p}, row 2, column 'ts': timestamp '2013-01-01 10:01' does not match --time-format "
        "'%m/%d/%Y %H:%M'")
    df = pd.DataFrame({"ts": [1], "type": ["A"]})
    assert error_of(df, time_format="%H:%M") == (
        "<DataFrame>, column 'ts': --time-format applies to text timestamps, but the time "
        "column has type int64")


def test_dead_letter_file_exists_even_when_nothing_is_bad(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type\n1,A\n")
    dead = tmp_path / "dead.jsonl"
    read_events(p, on_bad_row=f"dead-letter={dead}")
    assert dead.read_text() == ""
    with pytest.raises(InputError) as info:
        read_events(p, on_bad_row=f"dead-letter={tmp_path / 'no' / 'dead.jsonl'}")
    assert str(info.value) == (f"{tmp_path / 'no' / 'dead.jsonl'}: cannot write the dead-letter "
                               "file: No such file or directory")


def test_several_files_errors_name_the_file(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    write(d / "a.csv", "ts,type,x\n1,A,1\n2,A,2\n")
    write(d / "b.csv", "ts,type,x\n3,A,3\n4,A,oops\n")
    assert error_of(str(d)) == (
        f"{d / 'b.csv'}, row 2, column 'x': 'oops' is not an integer (the column was read as "
        "int64 from its first rows; pass --column-type x=string to keep it as text, or --null-values to read such values as NULL)")
    batch, report = read_events(str(d), on_bad_row="skip")
    assert batch.ids.to_pylist() == [0, 1, 2]
    write(d / "c.jsonl", '{"ts": 5, "type": "A", "x": 5}\n')
    assert error_of(str(d)) == (f"{d}: the input mixes formats: {d / 'a.csv'} is csv, "
                                f"{d / 'c.jsonl'} is jsonl; pass one format")
    assert error_of(str(tmp_path / "*.parquet")) == (
        f"{tmp_path / '*.parquet'}: no input files found")
