"""Writers: the JSON Lines contract, CSV and Parquet, on hand-written matches."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.errors import InputError
from kleene.events import Match, TimeInfo
from kleene.events.writers import open_writer, write_matches

US = 1_000_000
T0 = 1_357_034_400 * US  # 2013-01-01T10:00:00Z

MATCHES = [
    Match("delays", {"a": 3, "b": (4, 5), "c": 7}, T0, T0 + 90 * US,
          {"tail": "N1", "n": 2, "avg": 1.5}),
    Match("delays", {"a": 8, "b": (), "c": 9}, T0 + 60 * US, T0 + 120 * US,
          {"tail": "N2", "n": 0, "avg": float("nan")}),
]
ZONED = TimeInfo("datetime", "s", "UTC")


def test_jsonl_contract_with_datetimes() -> None:
    out = io.StringIO()
    assert write_matches(MATCHES, out, "jsonl", ZONED) == 2
    assert out.getvalue().splitlines() == [
        '{"query": "delays", "match": {"a": 3, "b": [4, 5], "c": 7}, '
        '"start": "2013-01-01T10:00:00+00:00", "end": "2013-01-01T10:01:30+00:00", '
        '"values": {"tail": "N1", "n": 2, "avg": 1.5}}',
        '{"query": "delays", "match": {"a": 8, "b": [], "c": 9}, '
        '"start": "2013-01-01T10:01:00+00:00", "end": "2013-01-01T10:02:00+00:00", '
        '"values": {"tail": "N2", "n": 0, "avg": "NaN"}}',
    ]


def test_jsonl_numeric_times_and_string_ids(tmp_path: Path) -> None:
    """Numeric input prints numbers in the input unit; ids may be strings."""
    m = Match("q", {"a": "e1", "b": ("e2",)}, 1_500_000, 2 * US, {})
    p = tmp_path / "out.jsonl"
    write_matches([m], str(p), "jsonl", TimeInfo("numeric", "s"))
    assert json.loads(p.read_text()) == {"query": "q", "match": {"a": "e1", "b": ["e2"]},
                                         "start": 1.5, "end": 2, "values": {}}


def test_csv(tmp_path: Path) -> None:
    p = tmp_path / "out.csv"
    write_matches(MATCHES, str(p), "csv", ZONED)
    assert p.read_text().splitlines() == [
        "query,start,end,match,tail,n,avg",
        'delays,2013-01-01T10:00:00+00:00,2013-01-01T10:01:30+00:00,'
        '"{""a"": 3, ""b"": [4, 5], ""c"": 7}",N1,2,1.5',
        'delays,2013-01-01T10:01:00+00:00,2013-01-01T10:02:00+00:00,'
        '"{""a"": 8, ""b"": [], ""c"": 9}",N2,0,nan',
    ]


def test_csv_without_matches_has_a_header(tmp_path: Path) -> None:
    p = tmp_path / "out.csv"
    assert write_matches([], str(p), "csv", ZONED) == 0
    assert p.read_text() == "query,start,end,match\n"


def test_parquet(tmp_path: Path) -> None:
    p = tmp_path / "out.parquet"
    write_matches(MATCHES, str(p), "parquet", ZONED)
    t = pq.read_table(p)
    assert t.schema.field("start").type == pa.timestamp("us", "UTC")
    assert t.column("start").cast(pa.int64()).to_pylist() == [T0, T0 + 60 * US]
    assert t.column("match").to_pylist() == ['{"a": 3, "b": [4, 5], "c": 7}',
                                             '{"a": 8, "b": [], "c": 9}']
    assert t.column("tail").to_pylist() == ["N1", "N2"]
    avg = t.column("avg").to_pylist()
    assert avg[0] == 1.5 and math.isnan(avg[1])  # Parquet keeps the float NaN


def test_parquet_in_row_groups(tmp_path: Path) -> None:
    p = tmp_path / "out.parquet"
    with open_writer(str(p), "parquet", TimeInfo("numeric", "s")) as w:
        w.row_group_size = 2  # type: ignore[attr-defined]
        w.write([Match("q", {"a": i}, i * US, i * US, {"x": i}) for i in range(5)])
    t = pq.read_table(p)
    assert t.column("x").to_pylist() == [0, 1, 2, 3, 4]
    assert t.column("start").to_pylist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert pq.ParquetFile(p).num_row_groups == 3


def test_bad_output_requests(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        open_writer(None, "parquet", ZONED)
    assert str(info.value) == "Parquet output needs a file: pass --output PATH"
    with pytest.raises(InputError) as info:
        open_writer(None, "xml", ZONED)
    assert str(info.value) == "unknown output format 'xml'; use one of: jsonl, csv, parquet"
    with pytest.raises(InputError) as info:
        open_writer(str(tmp_path / "no" / "dir.jsonl"), "jsonl", ZONED)
    assert str(info.value) == (f"{tmp_path / 'no' / 'dir.jsonl'}: cannot write the output "
                               "file: No such file or directory")


ids = st.one_of(st.integers(0, 10**12), st.text(min_size=1, max_size=5))
values = st.one_of(st.none(), st.booleans(), st.integers(-10**15, 10**15),
                   st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))


@settings(max_examples=50, deadline=None)
@given(bindings=st.dictionaries(st.sampled_from(["a", "b", "c"]),
                                st.one_of(ids, st.lists(ids, max_size=3).map(tuple)),
                                min_size=1),
       vals=st.dictionaries(st.text(min_size=1, max_size=4), values, max_size=3),
       start=st.integers(0, 2 * 10**15), length=st.integers(0, 10**12),
       datetime_input=st.booleans())
def test_jsonl_line_is_the_record(bindings: dict[str, object], vals: dict[str, object],
                                  start: int, length: int, datetime_input: bool) -> None:
    """Every line parses back to exactly Match.to_record (the contract), one line per match."""
    time = ZONED if datetime_input else TimeInfo("numeric", "us")
    m = Match("q", bindings, start, start + length, vals)  # type: ignore[arg-type]
    out = io.StringIO()
    write_matches([m, m], out, "jsonl", time)
    lines = out.getvalue().split("\n")
    assert lines[2] == "" and len(lines) == 3
    assert json.loads(lines[0]) == m.to_record(time) == json.loads(lines[1])


INF_MATCHES = [Match("q", {"a": 1}, 0, 0, {"x": math.inf, "y": -math.inf, "z": math.nan,
                                        "l": [1.0, math.inf], "ok": 2.5})]


def test_non_finite_return_values_in_json_lines(tmp_path: Path) -> None:
    """Issue 17 item 9: JSON has no number for them: the strings "Infinity", "-Infinity",
    "NaN" (README, --format), on the column-wise path and the per-match one alike."""
    from kleene.events.writers import JsonLinesWriter

    texts = []
    for per_match in (False, True):
        p = tmp_path / f"inf{per_match}.jsonl"
        with JsonLinesWriter(str(p), TimeInfo()) as w:
            (w.write_rows if per_match else w.write)(INF_MATCHES)
        texts.append(p.read_text())
    assert texts[0] == texts[1]
    rec = json.loads(texts[0])  # strict JSON: no bare Infinity / NaN token
    assert rec["values"] == {"x": "Infinity", "y": "-Infinity", "z": "NaN",
                             "l": [1.0, "Infinity"], "ok": 2.5}
    assert "null" not in texts[0]


def test_non_finite_return_values_in_csv(tmp_path: Path) -> None:
    """CSV writes inf, -inf and nan (what Python's float() and Arrow's CSV reader read)."""
    from kleene.events.writers import CsvWriter

    texts = []
    for per_match in (False, True):
        p = tmp_path / f"inf{per_match}.csv"
        with CsvWriter(str(p), TimeInfo()) as w:
            (w.write_rows if per_match else w.write)(INF_MATCHES)
        texts.append(p.read_text())
    assert texts[0] == texts[1]
    header, row = texts[0].splitlines()
    assert header == "query,start,end,match,x,y,z,l,ok"
    assert row.endswith(',inf,-inf,nan,"[1.0, ""Infinity""]",2.5')
