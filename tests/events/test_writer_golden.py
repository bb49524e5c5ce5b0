"""The column-wise writers write exactly the bytes the per-match writers wrote.

Two references:

* golden files of the demo (``make demo``'s query and data), written by the writers as they
  were before the column-wise path (kleene at a44edb4): JSON Lines, CSV and Parquet;
* a literal reference of the JSON Lines record kept HERE (``ref_line``: the record of
  ``Match.to_record`` through ``json.dumps``, NaN and infinities as the strings "NaN",
  "Infinity", "-Infinity"), and the writers'
  own one-match-at-a-time paths, on 10k random matches of every shape: Kleene lists (empty,
  long, of str ids), ids beyond int64, RETURN values of every type (None, ints, floats with
  NaN / infinities / exponents, strings with quotes, commas, newlines and unicode, bools,
  datetimes, lists, numpy scalars), times of every kind (numbers in s / ms / us, naive and
  zoned datetimes, whole seconds and fractions, before 1970).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kleene.events import Match, TimeInfo
from kleene.events.matchtable import MatchColumns, MatchTable
from kleene.events.writers import CsvWriter, JsonLinesWriter, ParquetWriter, open_writer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "writers"
REPO = Path(__file__).resolve().parents[2]
US = 1_000_000
TIMES = [TimeInfo(), TimeInfo("numeric", "ms"), TimeInfo("numeric", "us"),
         TimeInfo("datetime", "us"), TimeInfo("datetime", "s", "UTC")]


# --- the reference: the JSON Lines record, literally -------------------------------------------

def _default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _null_non_finite(value: Any) -> Any:
    """Non-finite floats as the JSON strings the README gives (issue 17 item 9; null before)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _null_non_finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_null_non_finite(v) for v in value]
    return value


def ref_line(m: Match, time: TimeInfo) -> str:
    """The contract: ``json.dumps`` of the record, non-finite floats written as the strings
    "Infinity", "-Infinity", "NaN"."""
    return json.dumps(_null_non_finite(m.to_record(time)), default=_default, allow_nan=False)


# --- random matches ----------------------------------------------------------------------------

STRINGS = ["", "plain", 'quo"te', "comma,here", "new\nline", "cr\rret", "tab\t", "caf\u00e9",
           "\u65e5\u672c", "emoji \U0001f600", "back\\slash", " lead", "'single'", "a\x00b"]
FLOATS = [0.0, -0.0, 1.5, 0.1, 1e16, 1.234e-7, 123456789.125, -2.5, 1e300, float("nan"),
          float("inf"), float("-inf"), 100.0]


def _value(rng: random.Random, kind: str) -> Any:
    if kind == "int":
        return rng.choice([0, -1, 7, 2**40, -(2**62), rng.randrange(-10**6, 10**6)])
    if kind == "float":
        return rng.choice(FLOATS + [rng.uniform(-1e6, 1e6)])
    if kind == "str":
        return rng.choice(STRINGS) + str(rng.randrange(100))
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "none":
        return None
    if kind == "datetime":
        return dt.datetime(2024, 1, 2, 9, 30) + dt.timedelta(microseconds=rng.randrange(10**9))
    if kind == "list":
        return [rng.randrange(10), rng.choice(FLOATS), rng.choice(STRINGS)]
    if kind == "numpy":
        return rng.choice([np.int64(rng.randrange(100)), np.float64(rng.choice(FLOATS)),
                           np.bool_(True)])
    if kind == "bigint":
        return rng.choice([2**70, -(2**64), 5])
    raise AssertionError(kind)


KINDS = ["int", "float", "str", "bool", "none", "datetime", "list", "numpy", "bigint"]


def _time(rng: random.Random) -> int:
    base = rng.choice([1_704_187_800 * US, 0, -86_400 * US * 400, 1_357_034_400 * US])
    step = rng.choice([US, 1000, 1, 100_000 * 10])
    return base + rng.randrange(-10**6, 10**6) * step


def random_matches(seed: int, n: int, *, uniform: bool) -> list[Match]:
    """``n`` matches; ``uniform``: the same variables and fields (but values of every type in
    a column); otherwise several shapes mixed."""
    rng = random.Random(seed)
    field_kinds = {"i": "int", "f": "float", "s": "str", "b": "bool", "n": "none"}
    mixed_fields = ["x", 'q"uote', "start", "caf\u00e9"]
    out = []
    for k in range(n):
        shape = 0 if uniform else rng.randrange(4)
        ids: dict[str, Any]
        if shape == 3:
            ids = {"c": f"e{k}", "a": (f'x"{k}', "\u00e9")}
        else:
            ids = {"a": rng.randrange(10**9), "b": tuple(rng.randrange(10**9)
                                                          for _ in range(rng.choice([0, 1, 2, 5, 40]))),
                   "c": rng.randrange(10**9)}
            if shape == 1:
                ids["b"] = tuple(f"id{j}" for j in ids["b"])
            if shape == 2:
                del ids["c"]
        values = {name: (_value(rng, kind) if rng.random() < 0.9 else None)
                  for name, kind in field_kinds.items()}
        for name in mixed_fields:
            values[name] = _value(rng, rng.choice(KINDS))
        if not uniform and rng.random() < 0.3:
            values = {}
        start = _time(rng)
        end = start + rng.choice([0, US, 1, 999_999, 10**12])
        out.append(Match(rng.choice(["stock"] if uniform else ["stock", 'q"2']), ids, start,
                         end, values))
    return out


def rare_matches() -> list[Match]:
    """Matches the column-wise path hands back to the per-match path."""
    return [
        Match("q", {"a": 2**70, "b": (1, 2**65)}, 0, 1, {}),        # ids beyond int64
        Match("q", {"a": True, "b": (1, True)}, 0, 1, {}),          # bool ids
        Match("q", {"a": np.int64(3), "b": [1, 2]}, 0, 1, {}),      # numpy id, a list
        Match("q", {"b": (1,), "a": 1}, 0, 1, {}),                  # other key order
        Match("q", {}, 0, 1, {"v": 1}),
        Match("q", {"a": 1}, np.int64(5 * US), 7 * US, {"v": 1.0}),
    ]


def _jsonl(matches: list[Match], time: TimeInfo, *, per_match: bool = False) -> str:
    out = io.StringIO()
    w = JsonLinesWriter(out, time)
    if per_match:
        w.write_rows(matches)
    else:
        w.write(matches)
    w.close()
    return out.getvalue()


@pytest.mark.parametrize("time", TIMES, ids=lambda t: f"{t.kind}-{t.unit}-{t.tz}")
@pytest.mark.parametrize("uniform", [True, False], ids=["one-shape", "mixed-shapes"])
def test_jsonl_10k_random_matches_byte_identical(time: TimeInfo, uniform: bool) -> None:
    matches = random_matches(7, 10_000, uniform=uniform) + rare_matches()
    expected = "".join(ref_line(m, time) + "\n" for m in matches)
    assert _jsonl(matches, time) == expected
    assert _jsonl(matches, time, per_match=True) == expected


def test_jsonl_to_a_file_and_in_pieces(tmp_path: Path) -> None:
    """Through the byte stream of a file, and a write at a time (the streaming run); the
    per-match fallback's text and the column-wise bytes interleave in order."""
    time = TimeInfo("datetime", "us")
    matches = random_matches(11, 3_000, uniform=True)
    matches[1000:1000] = rare_matches()
    p = tmp_path / "out.jsonl"
    with open_writer(str(p), "jsonl", time) as w:
        w.write(matches[:1])
        w.write(iter(matches[1:1000]))
        w.write(matches[1000:1006])  # shapes the column-wise path hands back
        w.write(matches[1006:])
        assert w.count == len(matches)
    assert p.read_bytes() == "".join(ref_line(m, time) + "\n" for m in matches).encode()


def test_out_of_range_times_fail_as_before() -> None:
    """A datetime beyond year 9999 is an error of the per-match path, raised unchanged."""
    m = Match("q", {"a": 1}, 300_000_000_000 * US, 300_000_000_000 * US, {})
    with pytest.raises(OverflowError):
        _jsonl([m], TimeInfo("datetime", "us"), per_match=True)
    with pytest.raises(OverflowError):
        _jsonl([m], TimeInfo("datetime", "us"))


def _csv(matches: list[Match], time: TimeInfo, *, per_match: bool = False) -> str:
    out = io.StringIO()
    w = CsvWriter(out, time)
    for i in range(0, len(matches), 4_000):
        if per_match:
            w.write_rows(matches[i:i + 4_000])
        else:
            w.write(matches[i:i + 4_000])
    w.close()
    return out.getvalue()


@pytest.mark.parametrize("time", TIMES, ids=lambda t: f"{t.kind}-{t.unit}-{t.tz}")
@pytest.mark.parametrize("uniform", [True, False], ids=["one-shape", "mixed-shapes"])
def test_csv_10k_random_matches_byte_identical(time: TimeInfo, uniform: bool) -> None:
    # the rare matches' field ``v`` renamed to a header column: CSV refuses a RETURN field its
    # header (the first match's) lacks (test_writer_parquet_schema.py); it was left out
    rare = [Match(m.query, m.bindings, m.start, m.end,
                  {"i" if k == "v" else k: v for k, v in m.values.items()})
            for m in rare_matches()]
    matches = random_matches(8, 10_000, uniform=uniform) + rare
    expected = _csv(matches, time, per_match=True)
    assert expected.count("\n") > 10_000
    assert _csv(matches, time) == expected


@pytest.mark.parametrize("time", TIMES[::2], ids=lambda t: f"{t.kind}-{t.unit}-{t.tz}")
def test_parquet_random_matches_byte_identical(time: TimeInfo, tmp_path: Path) -> None:
    """Parquet from a column-wise row group is the same file as from rows (same table)."""
    # Parquet columns take one type: values of one kind per field, as an engine gives them
    rng = random.Random(5)
    matches = [Match("stock", {"a": i, "b": tuple(range(i % 4)), "c": i + 9}, _time(rng),
                     _time(rng) + US, {"n": i, "f": rng.choice(FLOATS), "s": rng.choice(STRINGS),
                                       "o": rng.choice([None, True, False]),
                                       "l": [rng.random()]})
               for i in range(10_000)]
    a, b = tmp_path / "cols.parquet", tmp_path / "rows.parquet"
    for path, per_match in ((a, False), (b, True)):
        w = ParquetWriter(str(path), time, row_group_size=4_096)
        for i in range(0, len(matches), 3_000):
            if per_match:
                w.write_rows(matches[i:i + 3_000])
            else:
                w.write(matches[i:i + 3_000])
        w.close()
    assert a.read_bytes() == b.read_bytes()
    assert pq.read_table(a).num_rows == 10_000


# --- the demo, against files written before the column-wise writers ------------------------------

def _demo_matches() -> tuple[list[Match], TimeInfo]:
    import kleene

    events, _ = kleene.read_events(str(REPO / "examples/data/nycflights13_sample.csv.gz"),
                                   time_col="dep_time_utc", event_type="Flight")
    query = kleene.compile((REPO / "examples/flight_delay_propagation.kleene").read_text())
    return query.run(events), events.time


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_demo_text_output_is_the_golden_file(fmt: str, tmp_path: Path) -> None:
    matches, time = _demo_matches()
    assert len(matches) == 28
    p = tmp_path / f"out.{fmt}"
    with open_writer(str(p), fmt, time) as w:
        w.write(matches)
    assert p.read_bytes() == (FIXTURES / f"demo.{fmt}").read_bytes()


def test_demo_parquet_is_the_golden_table(tmp_path: Path) -> None:
    matches, time = _demo_matches()
    p = tmp_path / "out.parquet"
    with open_writer(str(p), "parquet", time) as w:
        w.write(matches)
    new, old = pq.read_table(p), pq.read_table(FIXTURES / "demo.parquet")
    assert new.schema == old.schema
    assert new.to_pylist() == old.to_pylist()


@pytest.mark.parametrize("time", TIMES, ids=lambda t: f"{t.kind}-{t.unit}-{t.tz}")
def test_one_shape_takes_the_column_wise_path(time: TimeInfo) -> None:
    """The matches above are not all handed back to the per-match path: one shape of them
    is formatted column-wise (no Unformattable), to the reference's text."""
    from kleene.events.textcols import jsonl_lines

    matches = random_matches(9, 2_000, uniform=True)
    lines = jsonl_lines(matches, time).to_pylist()
    assert lines == [ref_line(m, time) + "\n" for m in matches]


# --- Parquet from column parts (MatchTable): the table of the Match objects -------------------

def _parquet(matches: Any, time: TimeInfo, path: Path, *, row_group_size: int = 4_096,
             pieces: int = 1) -> bytes:
    """The file ParquetWriter writes for ``matches`` (a MatchTable or a Match list), handed
    over in ``pieces`` writes (a streaming run: one MatchTable per push)."""
    w = ParquetWriter(str(path), time, row_group_size=row_group_size)
    if isinstance(matches, MatchTable) and pieces > 1:
        k = max(1, len(matches.parts) // pieces)
        for i in range(0, len(matches.parts), k):
            w.write(MatchTable(matches.parts[i:i + k]))
    else:
        w.write(matches)
    w.close()
    return path.read_bytes()


def _old_path(table: MatchTable) -> list[Match]:
    """What ParquetWriter read before column parts were written from their columns: every
    match as a Match (``list(table)``)."""
    return list(table)


def random_columns(rng: random.Random, n: int, ids_kind: str, *,
                   items: bool = False, query: str = "stock") -> MatchColumns:
    """A column part of ``n`` matches binding ``a`` (one row), ``b`` (a Kleene range or, with
    ``items``, a list of rows: the chain plan's layout; empty, short or long) and ``c``;
    ``ids_kind``: int64 array, str list, Python ints (some beyond int64), or mixed types."""
    rows = 3 * n + 60
    ids: Any
    if ids_kind == "int64":
        ids = np.array([rng.randrange(-2**62, 2**62) for _ in range(rows)], np.int64)
    elif ids_kind == "str":
        ids = [rng.choice(STRINGS) + str(i) for i in range(rows)]
    elif ids_kind == "bigint":
        ids = [rng.choice([2**70, 5, -(2**64), i]) for i in range(rows)]
    else:
        ids = [rng.choice([i, f"e{i}", (i, 1), 1.5, True]) for i in range(rows)]
    a = np.array([rng.randrange(rows) for _ in range(n)], np.int64)
    c = np.array([rng.randrange(rows) for _ in range(n)], np.int64)
    lens = np.array([rng.choice([0, 1, 1, 2, 5, 40]) for _ in range(n)], np.int64)
    order: Any = None
    if items:
        order = np.array([rng.randrange(rows) for _ in range(int(lens.sum()) + 5)], np.int64)
        lo = np.array(np.cumsum(lens) - lens, np.int64)
    else:
        lo = np.array([rng.randrange(rows - 40) for _ in range(n)], np.int64)
    start = np.array([_time(rng) for _ in range(n)], np.int64)
    end = start + np.array([rng.choice([0, US, 1, 999_999, 10**12]) for _ in range(n)],
                           np.int64)
    return MatchColumns(query, ("a", "b", "c"), ids, (a, lo, c), (None, lo + lens, None),
                        start, end, np.arange(n, dtype=np.int64),
                        (None, order, None) if items else None)


def random_table(seed: int, n: int, *, values: bool) -> MatchTable:
    """Column parts of every ids kind and both list layouts, in parts of random sizes; with
    ``values``, Match lists (RETURN values: NaN and infinities, lists, names colliding with
    query / start / end / match) between them."""
    rng = random.Random(seed)
    parts: list[Any] = []
    left = n
    while left > 0:
        k = min(left, rng.choice([1, 7, 500, 3_000, 9_000]))
        kind = rng.choices(["int64", "str", "bigint", "mixed"], [8, 4, 1, 1])[0]
        parts.append(random_columns(rng, k, kind, items=rng.random() < 0.4))
        left -= k
        if values and rng.random() < 0.3:
            ms = [Match("stock", {"a": i, "b": (i, i + 1), "c": i + 2}, _time(rng),
                        _time(rng) + US, {"n": i, "f": rng.choice(FLOATS), "start": i % 3,
                                          "match": rng.choice(STRINGS), "l": [rng.random()],
                                          "query": rng.choice([None, True])})
                  for i in range(rng.choice([1, 50, 2_000]))]
            parts.append(ms)
            left -= len(ms)
    return MatchTable(parts)


@pytest.mark.parametrize("time", TIMES, ids=lambda t: f"{t.kind}-{t.unit}-{t.tz}")
def test_parquet_columns_10k_random_matches_same_file(time: TimeInfo, tmp_path: Path) -> None:
    """10k matches of column parts (int64, str, big-int and mixed ids; ranges and item lists;
    times before 1970 and fractions) write the file of their Match objects, byte for byte:
    same schema, same values, same row groups, whole or in pieces."""
    table = random_table(3, 10_000, values=False)
    assert len(table) >= 10_000
    assert {type(p) for p in table.parts} == {MatchColumns}
    old = _parquet(_old_path(table), time, tmp_path / "old.parquet")
    assert _parquet(table, time, tmp_path / "new.parquet") == old
    assert _parquet(table, time, tmp_path / "pieces.parquet", pieces=5) == old
    f = pq.ParquetFile(tmp_path / "new.parquet")
    assert f.metadata.num_rows == len(table)
    assert f.metadata.num_row_groups == -(-len(table) // 4_096)
    got = pq.read_table(tmp_path / "new.parquet")
    assert got.column_names == ["query", "start", "end", "match"]
    sample = _old_path(table)[::997]
    rows = got.to_pylist()[::997]
    for m, row in zip(sample, rows, strict=True):
        assert json.loads(row["match"]) == json.loads(ref_line(m, time))["match"]


@pytest.mark.parametrize("time", TIMES[::2], ids=lambda t: f"{t.kind}-{t.unit}-{t.tz}")
@pytest.mark.parametrize("row_group_size", [1_000, 65_536])
def test_parquet_columns_between_match_lists_same_file(time: TimeInfo, row_group_size: int,
                                                       tmp_path: Path) -> None:
    """Column parts between Match lists with RETURN values (NaN / inf, lists, fields named
    query, start, match): the file of all the Match objects, or the same error."""
    table = random_table(4, 10_000, values=True)
    assert {type(p) for p in table.parts} == {MatchColumns, list}
    outcomes = []
    for name, matches in (("old", _old_path(table)), ("new", table)):
        try:
            outcomes.append(_parquet(matches, time, tmp_path / f"{name}.parquet",
                                     row_group_size=row_group_size))
        except (ValueError, pa.ArrowException) as e:  # a schema change between row groups
            outcomes.append(f"{type(e).__name__}: {e}")
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("time", TIMES[::2], ids=lambda t: f"{t.kind}-{t.unit}-{t.tz}")
def test_parquet_schema_change_between_row_groups(time: TimeInfo, tmp_path: Path) -> None:
    """A row group of column parts, then Match lists whose RETURN column changes type (int,
    then None; float, then int: cast to the first group's schema) or appears (an error, as
    before): column path and Match path agree on the file or on the error."""
    rng = random.Random(6)
    cols = random_columns(rng, 600, "int64")
    cases = {
        "int-then-null": [[Match("q", {"a": 1}, US, US, {"v": 3})] * 300,
                          [Match("q", {"a": 2}, US, US, {"v": None})] * 300],
        "float-then-int": [[Match("q", {"a": 1}, US, US, {"v": 1.5})] * 300,
                           [Match("q", {"a": 2}, US, US, {"v": 2})] * 300],
        "columns-then-values": [cols, [Match("q", {"a": 1}, US, US, {"v": 1})] * 300],
        "columns-after-values": [[Match("q", {"a": 1}, US, US, {"v": float("nan")})] * 512,
                                 cols],
        "columns-only-groups": [cols, cols.slice(0, 100), cols.slice(5, 600)],
    }
    files = 0
    for case, parts in cases.items():
        table = MatchTable(parts)
        outcomes = []
        for name, matches in (("old", _old_path(table)), ("new", table)):
            try:
                outcomes.append(_parquet(matches, time, tmp_path / f"{case}-{name}.parquet",
                                         row_group_size=512))
            except (ValueError, pa.ArrowException) as e:
                outcomes.append(f"{type(e).__name__}: {e}")
        assert outcomes[0] == outcomes[1], case
        files += isinstance(outcomes[0], bytes)
    assert files >= 3  # the casts and the column-only groups write files


def test_parquet_empty_output(tmp_path: Path) -> None:
    """No matches (an empty MatchTable, an empty column part): the file of no matches, the
    four fixed columns and their types."""
    time = TimeInfo("datetime", "us")
    empty = random_columns(random.Random(1), 5, "int64").slice(0, 0)
    ref = _parquet([], time, tmp_path / "ref.parquet")
    assert _parquet(MatchTable(), time, tmp_path / "a.parquet") == ref
    assert _parquet(MatchTable([empty, []]), time, tmp_path / "b.parquet") == ref
    w = ParquetWriter(str(tmp_path / "c.parquet"), time)
    w.write(MatchTable())
    w.write(MatchTable([empty]))
    w.close()
    assert (tmp_path / "c.parquet").read_bytes() == ref
    got = pq.read_table(tmp_path / "c.parquet")
    assert got.num_rows == 0 and got.column_names == ["query", "start", "end", "match"]
    assert str(got.schema.field("start").type) == "timestamp[us]"


def _demo_events() -> Any:
    import kleene

    events, _ = kleene.read_events(str(REPO / "examples/data/nycflights13_sample.csv.gz"),
                                   time_col="dep_time_utc", event_type="Flight")
    return events


def test_demo_columns_parquet_is_the_golden_table(tmp_path: Path) -> None:
    """The demo query without RETURN runs on the runs plan, whose matches come as column
    parts: its Parquet file is the golden table's query, start, end and match columns."""
    import kleene

    events = _demo_events()
    text = (REPO / "examples/flight_delay_propagation.kleene").read_text()
    query = kleene.compile(text.split("\nRETURN")[0] + "\n", plan="runs")
    rt = query.start()
    rt.columnar = True
    table = rt.push(events)
    table += rt.close()
    assert isinstance(table, MatchTable) and len(table) == 28
    assert all(isinstance(p, MatchColumns) for p in table.parts)
    p = tmp_path / "out.parquet"
    assert _parquet(table, events.time, p, row_group_size=65_536) == \
        _parquet(_old_path(table), events.time, tmp_path / "old.parquet", row_group_size=65_536)
    golden = pq.read_table(FIXTURES / "demo.parquet").select(["query", "start", "end", "match"])
    new = pq.read_table(p)
    assert new.schema == golden.schema
    assert new.to_pylist() == golden.to_pylist()


def test_parquet_columns_build_no_match_objects(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Column parts of int64 or str ids (ranges and item lists) are written from their
    columns: no Match object is built, and the file is the Match objects' one."""
    rng = random.Random(12)
    table = MatchTable([random_columns(rng, 3_000, kind, items=items)
                        for kind in ("int64", "str") for items in (False, True)])
    time = TimeInfo("datetime", "us")
    old = _parquet(_old_path(table), time, tmp_path / "old.parquet")

    def no_matches(self: MatchColumns) -> list[Match]:
        raise AssertionError("a column part was read as Match objects")

    monkeypatch.setattr(MatchColumns, "matches", no_matches)
    assert _parquet(MatchTable(table.parts), time, tmp_path / "new.parquet") == old
