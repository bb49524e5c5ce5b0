"""Readers on good input: every source, every timestamp form, ordering, ids and options."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kleene.events import EventBatch, TimeInfo
from kleene.events.readers import ReadReport, iter_events, read_events

US = 1_000_000
T0 = int(dt.datetime(2013, 1, 1, 10, tzinfo=dt.UTC).timestamp()) * US  # 2013-01-01T10:00Z


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def attrs(batch: EventBatch, *names: str) -> list[tuple[object, ...]]:
    cols = [batch.column(n).to_pylist() for n in names]
    return list(zip(*cols, strict=True))


def test_csv_iso_zoned(tmp_path: Path) -> None:
    """ISO-8601 with Z / offsets -> UTC microseconds; typed attributes; ids are input rows."""
    p = write(tmp_path / "e.csv", "ts,type,x,price,sym\n"
              "2013-01-01T10:00:00Z,A,1,1.5,IBM\n"
              "2013-01-01T11:00:01+01:00,B,2,2.0,SUN\n"
              "2013-01-01T10:00:02.5Z,A,3,NA,\n")
    batch, report = read_events(p)
    assert batch.ts.tolist() == [T0, T0 + 1 * US, T0 + 2_500_000]
    assert batch.types.tolist() == ["A", "B", "A"]
    assert batch.ids.to_pylist() == [0, 1, 2]
    assert attrs(batch, "x", "price", "sym") == [(1, 1.5, "IBM"), (2, 2.0, "SUN"),
                                                 (3, None, None)]
    assert batch.table.schema.field("x").type == pa.int64()
    assert batch.table.schema.field("price").type == pa.float64()
    assert batch.time == TimeInfo("datetime", "s", "UTC")
    assert report == ReadReport(source=p, format="csv", rows_read=3, events=3,
                                time=TimeInfo("datetime", "s", "UTC"))


def test_csv_gz_naive_iso(tmp_path: Path) -> None:
    """A gzipped CSV with naive ISO timestamps (space or T): kept naive, printed without zone."""
    p = tmp_path / "e.csv.gz"
    p.write_bytes(gzip.compress(b"ts,type\n2013-01-01 10:00:00,A\n2013-01-01T10:00:03,B\n"))
    batch, _ = read_events(str(p))
    assert batch.ts.tolist() == [T0, T0 + 3 * US]
    assert batch.time.tz is None
    assert batch.time.to_output(batch.ts[1]) == "2013-01-01T10:00:03"


@pytest.mark.parametrize(("unit", "expected"), [("s", [5 * US, 7 * US]),
                                                ("ms", [5_000, 7_000]), ("us", [5, 7])])
def test_epoch_numbers_with_unit(tmp_path: Path, unit: str, expected: list[int]) -> None:
    """Epoch numbers are read in the given unit and stored as microseconds."""
    p = write(tmp_path / "e.csv", "ts,type\n5,A\n7,A\n")
    batch, _ = read_events(p, time_unit=unit)
    assert batch.ts.tolist() == expected
    assert batch.time == TimeInfo("numeric", unit)  # type: ignore[arg-type]


def test_fractional_epoch_seconds(tmp_path: Path) -> None:
    """Float epoch seconds round to the microsecond."""
    p = write(tmp_path / "e.csv", "ts,type\n1.5,A\n2.0000015,A\n")
    batch, _ = read_events(p)
    assert batch.ts.tolist() == [1_500_000, 2_000_002]


def test_stable_sort_and_out_of_order_count(tmp_path: Path) -> None:
    """Rows are ordered by (ts, input row); ids keep the input row; disorder is counted.

    input rows: r0 t=3, r1 t=1, r2 t=3, r3 t=2, r4 t=5   (r1 and r3 are behind t=3)
    """
    p = write(tmp_path / "e.csv", "ts,type,x\n3,A,0\n1,A,1\n3,A,2\n2,A,3\n5,A,4\n")
    batch, report = read_events(p)
    assert batch.ids.to_pylist() == [1, 3, 0, 2, 4]
    assert batch.column("x").to_pylist() == [1, 3, 0, 2, 4]
    assert report.out_of_order == 2


def test_out_of_order_across_chunks(tmp_path: Path) -> None:
    """Streaming chunks keep input order; read_events sorts across chunks."""
    rows = "".join(f"{t},A\n" for t in [10, 11, 12, 1, 13, 2])
    p = write(tmp_path / "e.csv", "ts,type\n" + rows)
    stream = iter_events(p, block_bytes=16)
    chunks = [b.ts.tolist() for b in stream]
    assert len(chunks) > 1
    assert sum(chunks, []) != sorted(sum(chunks, []))
    assert stream.report.out_of_order == 2
    batch, report = read_events(p, block_bytes=16)
    assert batch.ts.tolist() == [t * US for t in [1, 2, 10, 11, 12, 13]]
    assert batch.ids.to_pylist() == [3, 5, 0, 1, 2, 4]
    assert report.out_of_order == 2 and report.events == 6


def test_event_type_id_col_and_overrides(tmp_path: Path) -> None:
    """--event-type, --id-col and --column-type."""
    p = write(tmp_path / "e.csv", "when,key,code,v\n2,k2,007,1\n1,k1,008,2\n")
    batch, _ = read_events(p, time_col="when", event_type="Tick", id_col="key",
                           column_types={"code": "string", "v": "float"})
    assert batch.types.tolist() == ["Tick", "Tick"]
    assert batch.ids.to_pylist() == ["k1", "k2"]
    assert batch.column("code").to_pylist() == ["008", "007"]
    assert batch.column("v").to_pylist() == [2.0, 1.0]


def test_default_time_column_names_and_bool(tmp_path: Path) -> None:
    """Without --time-col the first of ts/timestamp/time/event_time is used; bools are typed."""
    p = write(tmp_path / "e.tsv", "timestamp\ttype\tok\n1\tA\ttrue\n2\tB\tFalse\n")
    batch, _ = read_events(p)
    assert batch.ts.tolist() == [US, 2 * US]
    assert batch.column("ok").to_pylist() == [True, False]


def test_jsonl_and_gz(tmp_path: Path) -> None:
    """JSON Lines (plain and gzipped); blank lines ignored; missing keys are null."""
    text = ('{"ts": "2013-01-01T10:00:00Z", "type": "A", "x": 1}\n\n'
            '{"ts": "2013-01-01T10:00:01Z", "type": "B", "x": 2, "y": "s"}\n')
    p1 = write(tmp_path / "e.jsonl", text)
    p2 = tmp_path / "e.ndjson.gz"
    p2.write_bytes(gzip.compress(text.encode()))
    for p in (p1, str(p2)):
        batch, report = read_events(p)
        assert batch.ts.tolist() == [T0, T0 + US]
        assert batch.column("x").to_pylist() == [1, 2]
        assert report.format == "jsonl" and report.events == 2


def test_jsonl_many_chunks(tmp_path: Path) -> None:
    """A JSON Lines file larger than a block is read in several chunks with continuous ids."""
    lines = "".join(json.dumps({"ts": i, "type": "A", "x": i * 2}) + "\n" for i in range(50))
    p = write(tmp_path / "e.jsonl", lines)
    chunks = list(iter_events(p, block_bytes=200))
    assert len(chunks) > 3
    batch, _ = read_events(p, block_bytes=200)
    assert batch.ids.to_pylist() == list(range(50))
    assert batch.column("x").to_pylist() == [i * 2 for i in range(50)]


def test_parquet_datetime_columns(tmp_path: Path) -> None:
    """Parquet with a zoned timestamp column; many row batches."""
    ts = pa.array([T0 + i * US for i in range(10)], pa.timestamp("us", "UTC"))
    table = pa.table({"ts": ts, "type": ["A", "B"] * 5, "x": pa.array(range(10), pa.int32())})
    p = tmp_path / "e.parquet"
    pq.write_table(table, p)
    batch, report = read_events(str(p), batch_size=3)
    assert batch.ts.tolist() == [T0 + i * US for i in range(10)]
    assert batch.table.schema.field("x").type == pa.int64()
    assert batch.time == TimeInfo("datetime", "s", "UTC")
    assert report.format == "parquet"


def test_pandas_dataframe_naive_datetime() -> None:
    """A DataFrame with a naive datetime64[ns] column."""
    df = pd.DataFrame({"ts": pd.to_datetime(["2013-01-01 10:00:01", "2013-01-01 10:00:00"]),
                       "type": ["B", "A"], "x": [1.0, 2.0]})
    batch, report = read_events(df)
    assert batch.types.tolist() == ["A", "B"]
    assert batch.ts.tolist() == [T0, T0 + US]
    assert batch.time == TimeInfo("datetime", "s", None)
    assert report.out_of_order == 1


def test_arrow_table_and_batch_iterator() -> None:
    """A pyarrow Table, a RecordBatch iterator and a RecordBatchReader."""
    table = pa.table({"ts": [1, 2, 3], "type": ["A", "A", "B"]})
    for source in (table, iter(table.to_batches(max_chunksize=1)),
                   pa.RecordBatchReader.from_batches(table.schema, table.to_batches())):
        batch, _ = read_events(source)
        assert batch.ts.tolist() == [US, 2 * US, 3 * US]
        assert batch.ids.to_pylist() == [0, 1, 2]


def test_iterable_of_dicts_with_datetimes() -> None:
    """Dicts with Python datetimes (zoned)."""
    t = dt.datetime(2013, 1, 1, 10, tzinfo=dt.UTC)
    recs = [{"ts": t + dt.timedelta(seconds=s), "type": "A", "v": s} for s in (2, 0)]
    batch, _ = read_events(recs)
    assert batch.ts.tolist() == [T0, T0 + 2 * US]
    assert batch.column("v").to_pylist() == [0, 2]
    assert batch.time.tz == "UTC"


def test_large_csv_is_streamed_in_chunks(tmp_path: Path) -> None:
    """A file bigger than a block yields several chunks; ids stay the global input rows."""
    n = 5000
    p = write(tmp_path / "big.csv", "ts,type,x\n" + "".join(f"{i},A,{i}\n" for i in range(n)))
    stream = iter_events(p, block_bytes=4096)
    chunks = list(stream)
    assert len(chunks) > 5
    ids = np.concatenate([c.ids.to_numpy() for c in chunks])
    assert ids.tolist() == list(range(n))
    assert stream.report.rows_read == n and stream.report.out_of_order == 0


def test_batch_size_splits_text_chunks_and_keeps_ids(tmp_path: Path) -> None:
    """batch_size cuts CSV chunks; a ragged (skipped) row keeps its index out of the ids."""
    p = write(tmp_path / "e.csv", "ts,type,x\n1,A,1\n2,A\n3,A,3\n4,A,4\n5,A,5\n")
    stream = iter_events(p, batch_size=2, on_bad_row="skip")
    chunks = [c.ids.to_pylist() for c in stream]
    assert chunks == [[0, 2], [3, 4]]
    assert (stream.report.rows_read, stream.report.skipped) == (5, 1)


def test_integer_column_widens_to_float_in_a_later_chunk(tmp_path: Path) -> None:
    """Integers in the first chunk and fractions later: the column becomes float64 (no bad
    rows), for CSV text and for JSON numbers; the epoch time column too."""
    csv_rows = "".join(f"{i},A,{i}\n" for i in range(400)) + "400.5,A,2.5\n"
    p = write(tmp_path / "e.csv", "ts,type,x\n" + csv_rows)
    batch, report = read_events(p, block_bytes=1024)
    assert report.bad_rows == 0
    assert batch.table.schema.field("x").type == pa.float64()
    assert batch.column("x").to_pylist()[-2:] == [399.0, 2.5]
    assert batch.ts.tolist()[-1] == 400_500_000
    lines = "".join(json.dumps({"ts": i, "type": "A", "x": i}) + "\n" for i in range(60))
    lines += json.dumps({"ts": 60, "type": "A", "x": 0.25}) + "\n"
    pj = write(tmp_path / "e.jsonl", lines)
    batch, report = read_events(pj, block_bytes=256)
    assert report.bad_rows == 0
    assert batch.column("x").to_pylist()[-1] == 0.25


def test_pandas_categorical_and_nullable_ints() -> None:
    """Categorical type columns and pandas nullable integers (with a missing value)."""
    df = pd.DataFrame({"ts": [1, 2, 3], "type": pd.Categorical(["A", "B", "A"]),
                       "n": pd.array([1, None, 3], dtype="Int64")})
    batch, _ = read_events(df)
    assert batch.types.tolist() == ["A", "B", "A"]
    assert batch.column("n").to_pylist() == [1, None, 3]
    assert batch.table.schema.field("type").type == pa.string()


def test_jsonl_keeps_the_time_zone(tmp_path: Path) -> None:
    """JSON ISO strings with a zone print back as UTC; naive ones stay naive."""
    p = write(tmp_path / "z.jsonl", '{"ts": "2013-01-01T10:00:00Z", "type": "A"}\n'
              '{"ts": "2013-01-01T10:00:01+01:00", "type": "A"}\n')
    batch, _ = read_events(p)
    assert batch.time == TimeInfo("datetime", "s", "UTC")
    assert batch.ts.tolist() == [T0 - 3600 * US + US, T0]
    n = write(tmp_path / "n.jsonl", '{"ts": "2013-01-01T10:00:00", "type": "A"}\n')
    batch, _ = read_events(n)
    assert batch.time == TimeInfo("datetime", "s", None)
    assert batch.time.to_output(int(batch.ts[0])) == "2013-01-01T10:00:00"


def test_time_format(tmp_path: Path) -> None:
    """--time-format parses non-ISO text; %z makes zoned times (printed in UTC)."""
    p = write(tmp_path / "e.csv", "ts,type\n01/01/2013 10:00,A\n01/01/2013 10:01,A\n")
    batch, _ = read_events(p, time_format="%m/%d/%Y %H:%M")
    assert batch.ts.tolist() == [T0, T0 + 60 * US]
    assert batch.time == TimeInfo("datetime", "s", None)
    z = write(tmp_path / "z.csv", "ts,type\n2013-01-01 11:00 +0100,A\n")
    batch, _ = read_events(z, time_format="%Y-%m-%d %H:%M %z")
    assert batch.ts.tolist() == [T0]
    assert batch.time.tz == "UTC"


def test_csv_quotes_crlf_and_delimiter(tmp_path: Path) -> None:
    """Quoted fields with commas and doubled quotes, CRLF line ends, a custom delimiter."""
    p = tmp_path / "e.csv"
    p.write_bytes(b'ts,type,name\r\n1,A,"x, y"\r\n2,B,"he said ""hi"""\r\n')
    batch, _ = read_events(str(p))
    assert batch.column("name").to_pylist() == ["x, y", 'he said "hi"']
    assert batch.types.tolist() == ["A", "B"]
    s = write(tmp_path / "s.csv", "ts;type;x\n1;A;1,5\n")
    batch, _ = read_events(s, delimiter=";")
    assert batch.column("x").to_pylist() == ["1,5"]


def test_several_files_as_one_input(tmp_path: Path) -> None:
    """A directory or a glob: files in sorted order, ids continue, one time order."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "b.csv").write_text("ts,type,x\n2,B,20\n4,B,40\n")
    (d / "a.csv.gz").write_bytes(gzip.compress(b"ts,type,x\n3,A,30\n1,A,10\n"))
    (d / "_SUCCESS").write_text("")
    (d / ".hidden.csv").write_text("ts,type,x\n0,Z,0\n")
    for source in (str(d), str(d / "*.csv*")):
        batch, report = read_events(source)
        assert batch.column("x").to_pylist() == [10, 20, 30, 40]
        assert batch.ids.to_pylist() == [1, 2, 0, 3]  # a.csv.gz rows 0-1, then b.csv rows 2-3
        assert (report.source, report.rows_read, report.out_of_order) == (source, 4, 2)


def test_a_date_alone_has_no_time_zone(tmp_path: Path) -> None:
    """``2020-01-01``'s ``-01`` is the day, not a zone: dates alone are naive timestamps (the
    zone check once read it as ``-01:00`` and rejected every row), while a zone after a time
    of day still makes the column zoned."""
    from kleene.events.convert import has_zone

    texts = ["2020-01-01", "2020-01-01T10:00:00", "2020-01-01T10:00:00Z",
             "2020-01-01 10:00:00-0500", "2020-01-01T10:00:00.5+01:00", "5"]
    assert has_zone(pa.array(texts)).to_pylist() == [False, False, True, True, True, False]
    path = tmp_path / "d.csv"
    path.write_text("ts,type\n2020-01-01,A\n2020-01-03,B\n")
    batch, report = read_events(path)
    assert (len(batch), report.bad_rows) == (2, 0)
    assert batch.time.tz is None
    assert [r["__ts"] for r in batch.rows()] == [1_577_836_800_000_000, 1_578_009_600_000_000]
