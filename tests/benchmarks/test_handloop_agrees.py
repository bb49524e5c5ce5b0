"""The benchmark's hand-written loop and kleene's default engine find the same stock matches.

The hand loop (benchmarks/handloop.py) is the speed reference of issue 5; a speed ratio means
something only if both compute the same thing. The first tests pin the hand loop on a drawn
timeline; the last one runs both on a generated 3,000-event stream and compares the match lists
(bindings and order).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import kleene
from benchmarks import datasets, handloop
from kleene.events import EventBatch, TimeInfo

QUERY = ("PATTERN SEQ(Stock a, Stock+ b[], Stock c) "
         "WHERE b[1].price > a.price AND b[i].price > b[i-1].price AND c.price < a.price "
         "PARTITION BY symbol WITHIN 10 minutes USING strict-contiguity")
S = 1_000_000  # microseconds per second


def test_handloop_on_a_drawn_timeline() -> None:
    #   pos    0    1    2    3    4    5    6    7    8
    #   sym    X    X    Y    X    X    Y    Y    X    X
    #   price 10   11   50   12    9   51   49   13    8
    # X: run 10<11<12 ends at 9 -> (a=0,b=[1,3],c=4) and (a=1,b=[3],c=4); 12 (pos 3) has no b.
    #    then 9<13 ends at 8 -> (a=4,b=[7],c=8).
    # Y: 50<51 ends at 49 -> (a=2,b=[5],c=6).
    syms = ["X", "X", "Y", "X", "X", "Y", "Y", "X", "X"]
    prices = [10.0, 11.0, 50.0, 12.0, 9.0, 51.0, 49.0, 13.0, 8.0]
    ts = [k * S for k in range(9)]
    assert handloop.match_stock(syms, ts, prices) == [
        (0, [1, 3], 4), (1, [3], 4), (2, [5], 6), (4, [7], 8)]


def test_handloop_window_is_inclusive_and_ties_break_runs() -> None:
    # 10, 11, 11, 9: the tie ends the run at pos 1, and 11 (pos 2) is not < 10, so no match there;
    # 11 (pos 2) then starts a run that 9 ends with no b. Then 5 < 6 < 4 spans exactly 10 min
    # (inclusive: a match) and 5 < 6 < 4 spanning 10 min + 1 us is not.
    syms = ["X"] * 4 + ["Y"] * 3 + ["Z"] * 3
    prices = [10.0, 11.0, 11.0, 9.0, 5.0, 6.0, 4.0, 5.0, 6.0, 4.0]
    w = handloop.WINDOW_US
    ts = [0, 1, 2, 3, 10, 20, 10 + w, 100, 110, 100 + w + 1]
    assert handloop.match_stock(syms, ts, prices) == [(4, [5], 6)]


def _batch(table: pa.Table) -> EventBatch:
    n = table.num_rows
    return EventBatch(pa.table({
        "__id": table.column("id"),
        "__ts": table.column("ts").cast(pa.int64()),
        "__type": pa.array(["Stock"] * n, pa.string()),
        "symbol": table.column("symbol"),
        "price": table.column("price"),
    }), TimeInfo(kind="datetime"))


def test_handloop_equals_kleene_default_engine(tmp_path: Path) -> None:
    path = datasets.stock_csv(3_000, seed=5, symbols=10, data_dir=tmp_path)
    table = handloop.read_stock(path)
    ids = table.column("id").to_pylist()
    expected = [(ids[a], tuple(ids[k] for k in b), ids[c]) for a, b, c in handloop.match_stock(
        table.column("symbol").to_pylist(), table.column("ts").cast(pa.int64()).to_pylist(),
        table.column("price").to_pylist())]
    # The stream must exercise the interesting cases, or equality proves little:
    assert len(expected) > 100
    assert any(len(b) >= 3 for _, b, _ in expected)          # long increasing runs
    assert len({c for *_, c in expected}) < len(expected)    # overlapping matches share c

    matches = kleene.compile(QUERY, name="stock").run(_batch(table))

    got = [(m.bindings["a"], tuple(m.bindings["b"]), m.bindings["c"]) for m in matches]
    assert got == expected
