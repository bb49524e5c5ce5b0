"""Issue 16, item 4: results as data. ``run`` returns :class:`kleene.Matches` (a list of Match)
with ``to_arrow()``, ``to_pandas()``, ``to_polars()``; ``kleene.match(data, query)`` returns a
DataFrame. Each table is checked row by row against the JSON Lines record of the same match
(``Match.to_record``, the writer's path), so a wrong column would show."""

from __future__ import annotations

import datetime as dt
import gzip
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import kleene
from kleene.events.results import Matches

ROOT = Path(__file__).resolve().parents[2]
FLIGHTS = ROOT / "examples" / "data" / "nycflights13_sample.csv.gz"
GLUCOSE = Path(os.environ.get("KLEENE_SHARED_DATA", "/work/shared/data")) / "cgm_glucose" / \
    "cgm_glucose.csv.gz"

DELAYS = """PATTERN SEQ(Flight a, Flight+ b[], Flight c)
    WHERE a.dep_delay > 60 AND b[i].dep_delay > 30 AND c.dep_delay <= 0
    PARTITION BY tailnum WITHIN 24 hours USING skip-till-next-match
    RETURN a.tailnum AS tailnum, count(b) AS delayed, a.dep_delay AS first_delay"""


@pytest.fixture(scope="module")
def flights() -> tuple[Any, Matches]:
    events, _ = kleene.read_events(str(FLIGHTS), time_col="dep_time_utc", event_type="Flight")
    return events, kleene.compile(DELAYS).run(events)


def _iso(v: Any) -> str:
    return v.isoformat() if isinstance(v, dt.datetime) else str(v)


def test_to_arrow_agrees_with_the_json_records(flights: tuple[Any, Matches]) -> None:
    events, matches = flights
    assert isinstance(matches, list) and len(matches) > 5
    table = matches.to_arrow()
    assert table.column_names == ["query", "start", "end", "a", "b", "c", "tailnum", "delayed",
                                  "first_delay"]
    assert table.schema.field("start").type == pa.timestamp("us", "UTC")
    assert table.schema.field("b").type == pa.list_(pa.int64())
    assert table.schema.field("a").type == pa.int64()
    assert table.num_rows == len(matches)
    for row, m in zip(table.to_pylist(), matches, strict=True):
        rec = m.to_record(events.time)
        assert (row["query"], _iso(row["start"]), _iso(row["end"])) == (
            rec["query"], rec["start"], rec["end"])
        assert {v: row[v] for v in ("a", "b", "c")} == rec["match"]
        assert {k: row[k] for k in ("tailnum", "delayed", "first_delay")} == rec["values"]
        assert row["delayed"] == len(row["b"])


def test_to_pandas(flights: tuple[Any, Matches]) -> None:
    pd = pytest.importorskip("pandas")
    events, matches = flights
    df = matches.to_pandas()
    assert list(df.columns) == matches.to_arrow().column_names
    assert str(df["start"].dtype).startswith("datetime64") and str(df["start"].dt.tz) == "UTC"
    first = matches[0].to_record(events.time)
    assert df["start"].iloc[0] == pd.Timestamp(first["start"])
    assert df["b"].iloc[0] == first["match"]["b"] and type(df["b"].iloc[0]) is list
    assert all(type(i) is int for i in df["b"].iloc[0])
    assert df["a"].tolist() == [m.bindings["a"] for m in matches]


def test_to_polars(flights: tuple[Any, Matches]) -> None:
    pl = pytest.importorskip("polars")
    _, matches = flights
    df = matches.to_polars()
    assert isinstance(df, pl.DataFrame) and df.height == len(matches)
    assert df["b"].to_list() == [list(m.bindings["b"]) for m in matches]
    assert df.schema["start"] == pl.Datetime("us", "UTC")


def test_optional_branches_empty_kleene_and_name_clashes() -> None:
    events = kleene.EventBatch.from_records([
        {"type": "A", "ts": 1, "x": 1}, {"type": "C", "ts": 2, "x": 2},
        {"type": "B", "ts": 3, "x": 3}])
    q = kleene.compile("PATTERN SEQ(A a, C* c[], OR(B b, D d)) WITHIN 10 seconds "
                       "RETURN a.x AS start, a.x + 1")
    matches = q.run(events)
    rows = matches.to_arrow().to_pylist()
    oracle = kleene.compile(q.analyzed.query, engine="oracle").run(events)
    assert [r["c"] for r in rows] == [list(m.bindings["c"]) for m in oracle]  # output order
    assert sorted(rows, key=lambda r: len(r["c"])) == [
        {"query": "query", "start": 1, "end": 3, "a": 0, "c": [], "b": 2, "d": None,
         "values.start": 1, "a.x + 1": 2},
        {"query": "query", "start": 1, "end": 3, "a": 0, "c": [1], "b": 2, "d": None,
         "values.start": 1, "a.x + 1": 2},
    ]
    assert [r["c"] for r in rows] == [list(m.bindings["c"]) for m in matches]


def test_no_matches_still_has_the_columns() -> None:
    events = kleene.EventBatch.from_records([{"type": "A", "ts": 1, "x": 1}])
    table = kleene.compile("PATTERN SEQ(A a, B+ b[]) RETURN a.x AS x").run(events).to_arrow()
    assert (table.num_rows, table.column_names) == (0, ["query", "start", "end", "a", "b", "x"])
    assert table.schema.field("b").type == pa.list_(pa.int64())


def test_string_ids() -> None:
    events = kleene.EventBatch.from_records([
        {"id": "a1", "type": "A", "ts": 1}, {"id": "b1", "type": "B", "ts": 2},
        {"id": "b2", "type": "B", "ts": 3}])
    rows = kleene.compile("PATTERN SEQ(A a, B+ b[]) USING skip-till-next-match") \
        .run(events).to_arrow().to_pylist()
    assert [(r["a"], r["b"]) for r in rows] == [("a1", ["b1"]), ("a1", ["b1", "b2"])]


# -- kleene.match ---------------------------------------------------------------------------


RISE = ("PATTERN SEQ(G a, G b) WHERE b.glucose - a.glucose >= 15 WITHIN 10 minutes "
        "USING strict-contiguity RETURN b.glucose - a.glucose AS rise")


@pytest.mark.skipif(not GLUCOSE.exists(), reason="the glucose data is not here")
def test_match_on_a_pandas_frame_agrees_with_pandas() -> None:
    """Real CGM readings (first 5,000): every consecutive pair 10 minutes apart or less that
    rises by 15 mg/dL or more, found by kleene and by pandas independently."""
    pd = pytest.importorskip("pandas")
    with gzip.open(GLUCOSE, "rt") as f:
        df = pd.read_csv(f, nrows=5_000, parse_dates=["datetime"])
    out = kleene.match(df, RISE, time_col="datetime", event_type="G")
    assert isinstance(out, pd.DataFrame)
    gap = df["datetime"].diff()
    rise = df["glucose"].diff()
    hit = df.index[(rise >= 15) & (gap <= pd.Timedelta(minutes=10))]
    assert len(hit) > 10
    assert out["b"].tolist() == hit.tolist()
    assert out["a"].tolist() == (hit - 1).tolist()
    assert out["rise"].tolist() == rise[hit].astype(int).tolist()
    assert out["end"].dt.tz_localize(None).tolist() == df["datetime"][hit].tolist()


def test_match_inputs_and_outputs() -> None:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"ts": [1, 2, 3, 4], "type": ["A", "B", "A", "B"], "x": [1, 5, 2, 1]})
    q = "PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 2 seconds"
    expected = [[0, 1]]
    assert kleene.match(df, q)[["a", "b"]].values.tolist() == expected
    table = pa.Table.from_pandas(df, preserve_index=False)
    assert kleene.match(table, q)[["a", "b"]].values.tolist() == expected
    arrow = kleene.match(table, q, output="arrow")
    assert isinstance(arrow, pa.Table) and arrow.select(["a", "b"]).to_pylist() == [
        {"a": 0, "b": 1}]
    found = kleene.match(table, q, output="matches")
    assert isinstance(found, Matches) and [m.bindings for m in found] == [{"a": 0, "b": 1}]
    with pytest.raises(kleene.QueryValidationError, match=r"no column 'X' \(did you mean 'x'"):
        kleene.match(df, q.replace("b.x", "b.X"))
    with pytest.raises(ValueError, match="output must be"):
        kleene.match(df, q, output="excel")
    pl = pytest.importorskip("polars")
    out = kleene.match(pl.from_pandas(df), q)
    assert isinstance(out, pl.DataFrame) and out.select(["a", "b"]).rows() == [(0, 1)]


def test_readme_dataframe_example_prints_what_it_says() -> None:
    """The README's "DataFrames in, DataFrames out" block, run as written by a new Python
    process in the repo root; its comment lines are the output."""
    pytest.importorskip("pandas")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## DataFrames in, DataFrames out", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    expected = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == expected
