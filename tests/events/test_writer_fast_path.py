"""The fast JSON Lines formatter writes exactly what the record + ``json.dumps`` path writes."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pytest

from kleene.events import Match, TimeInfo
from kleene.events.writers import (
    _flat,
    _flat_generic,
    _LineFormatter,
    _match_line_generic,
    match_line,
    open_writer,
)

US = 1_000_000
NAIVE = TimeInfo("datetime", "us")
ZONED = TimeInfo("datetime", "us", "UTC")
TIMES = [TimeInfo(), TimeInfo("numeric", "ms"), TimeInfo("numeric", "us"), NAIVE, ZONED]

SHAPES: list[dict[str, Any]] = [
    {"a": 0, "b": (1, 2), "c": 3},
    {"a": True, "b": (1, 2), "c": 3},          # bool is not an int id
    {"a": 1, "b": (1, True), "c": 3},
    {"a": 1, "b": (), "c": 3},
    {"a": 1, "b": (1,), "c": np.int64(3)},     # numpy scalar: the generic encoder
    {"b": (1,), "a": 1, "c": 3},               # another key order
    {"a": 1, "b": [1, 2], "c": 3},             # a list, not a tuple
    {"a": "s\u00e9\"", "b": ("x", "y"), "c": 3},
    {"a": -5, "b": (10**20,), "c": 0},
    {"\u00e9": 1},
    {},
]
VALUES: list[dict[str, Any]] = [{}, {"n": 2}, {"x": float("nan"), "y": [1.5, float("inf")], "z": "\u00e9\n"}]
STAMPS = [(0, 0), (US, 3 * US + 500), (-1_500_001, 86_400 * US + 1),
          (-40_000_000 * US * 1000, 5)]  # the last is in year 702: isoformat pads to 4


@pytest.mark.parametrize("time", TIMES)
def test_every_shape_matches_the_reference(time: TimeInfo) -> None:
    matches = [Match("q\"\u00e9", b, s, e, v)
               for b in SHAPES for v in VALUES for s, e in STAMPS]
    out = io.StringIO()
    with open_writer(out, "jsonl", time) as w:
        w.write(matches)
    expected = [_match_line_generic(m, time) for m in matches]
    assert out.getvalue().splitlines() == expected
    assert [match_line(m, time) for m in matches] == expected


def test_hand_written_lines() -> None:
    m = Match("stock", {"a": 41, "b": (50, 55), "c": 58}, 1_704_187_804_100_000,
              1_704_187_806_000_000, {})
    assert match_line(m, NAIVE) == (
        '{"query": "stock", "match": {"a": 41, "b": [50, 55], "c": 58}, '
        '"start": "2024-01-02T09:30:04.100000", "end": "2024-01-02T09:30:06", "values": {}}')
    assert match_line(m, ZONED).endswith(
        '"start": "2024-01-02T09:30:04.100000+00:00", '
        '"end": "2024-01-02T09:30:06+00:00", "values": {}}')
    assert match_line(Match("q", {"a": 1}, 1_500_000, 3_000_000), TimeInfo()) == (
        '{"query": "q", "match": {"a": 1}, "start": 1.5, "end": 3, "values": {}}')


@pytest.mark.parametrize("time", TIMES)
def test_csv_parquet_rows_match_the_reference(time: TimeInfo) -> None:
    fmt = _LineFormatter(time)
    for b in SHAPES:
        for v in [*VALUES, {"start": 1, "match": [1.0, float("nan")], "t": (1, 2)}]:
            m = Match("q", b, US, 2 * US, v)
            assert _flat(m, time, fmt) == _flat_generic(m, time) or (
                # NaN != NaN: compare the JSON of both rows instead
                json.dumps(_flat(m, time, fmt)) == json.dumps(_flat_generic(m, time)))


def test_csv_row_by_hand() -> None:
    out = io.StringIO()
    with open_writer(out, "csv", NAIVE) as w:
        w.write([Match("q", {"a": 1, "b": (2, 3)}, US, 2 * US, {"n": 2})])
    assert out.getvalue().splitlines() == [
        "query,start,end,match,n",
        'q,1970-01-01T00:00:01,1970-01-01T00:00:02,"{""a"": 1, ""b"": [2, 3]}",2',
    ]
