"""A hand-written, single-purpose Python loop for the stock query: the "at least half the speed"
reference of issue 5.

The query, in kleene's language::

    PATTERN SEQ(Stock a, Stock+ b[], Stock c)
    WHERE b[1].price > a.price AND b[i].price > b[i-1].price AND c.price < a.price
    PARTITION BY symbol WITHIN 10 minutes USING strict-contiguity

Under strict contiguity (per symbol) ``b`` is a strictly increasing run right after ``a`` and
``c`` the event right after ``b``. ``c.price < a.price < b[last].price``, so ``c`` cannot extend
the run: a match ends exactly where a maximal increasing run ends. The loop therefore keeps, per
symbol, only the current strictly increasing run; when an event does not extend it, every run
element ``a`` (except the last) with ``a.price > c.price`` and ``ts(c) - ts(a) <= 10 min`` gives
one match ``(a, rest of the run after a, c)``. That is every skip-till-any match of the query
(kleene's default selection), in kleene's output order (by ``c``, then by ``a``).

It reads the CSV with pyarrow, loops in plain Python over lists and writes JSON Lines in
kleene's match-record format. Usage::

    python -m benchmarks.handloop stock.csv out.jsonl [--query-name stock]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

WINDOW_US = 10 * 60 * 1_000_000
_EPOCH = dt.datetime(1970, 1, 1)

#: one match as row indices: (a, [b...], c)
IndexMatch = tuple[int, list[int], int]


def match_stock(symbols: Sequence[str], ts_us: Sequence[int], prices: Sequence[float],
                window_us: int = WINDOW_US) -> list[IndexMatch]:
    """All matches of the stock query over rows already in time order, as row indices."""
    runs: dict[str, list[int]] = {}
    out: list[IndexMatch] = []
    append = out.append
    for i, (s, p) in enumerate(zip(symbols, prices, strict=True)):
        run = runs.get(s)
        if run is None:
            runs[s] = [i]
            continue
        if p > prices[run[-1]]:
            run.append(i)
            continue
        if len(run) > 1:
            t_c = ts_us[i]
            for j in range(len(run) - 1):
                a = run[j]
                if prices[a] > p and t_c - ts_us[a] <= window_us:
                    append((a, run[j + 1:], i))
        runs[s] = [i]
    return out


def read_stock(path: Path | str) -> pa.Table:
    """Read the stock CSV (columns id, symbol, ts, price, volume; ts as microseconds)."""
    opts = pacsv.ConvertOptions(column_types={"ts": pa.timestamp("us")},
                                include_columns=["id", "symbol", "ts", "price"])
    return pacsv.read_csv(path, convert_options=opts)


class _IsoFormatter:
    """``datetime.isoformat()`` of naive microsecond timestamps (kleene's output form), with
    the date-and-seconds part cached per second."""

    def __init__(self) -> None:
        self._seconds: dict[int, str] = {}

    def __call__(self, ts_us: int) -> str:
        sec, us = divmod(ts_us, 1_000_000)
        base = self._seconds.get(sec)
        if base is None:
            base = self._seconds[sec] = (_EPOCH + dt.timedelta(seconds=sec)).isoformat()
        return base if us == 0 else f"{base}.{us:06d}"


def run(path: Path | str, out_path: Path | str, query_name: str = "stock") -> int:
    """Read, match, write JSON Lines; returns the number of matches."""
    table = read_stock(path)
    ids = table.column("id").to_pylist()
    ts = table.column("ts").cast(pa.int64()).to_pylist()
    matches = match_stock(table.column("symbol").to_pylist(), ts,
                          table.column("price").to_pylist())
    iso = _IsoFormatter()
    q = json.dumps(query_name)
    with open(out_path, "w") as out:
        write = out.write
        # The record written field by field; ids are ints, so this is exactly json.dumps's text.
        for a, b, c in matches:
            bs = ", ".join([str(ids[k]) for k in b])
            write(f'{{"query": {q}, "match": {{"a": {ids[a]}, "b": [{bs}], "c": {ids[c]}}}, '
                  f'"start": "{iso(ts[a])}", "end": "{iso(ts[c])}", "values": {{}}}}\n')
    return len(matches)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="hand-written loop for the stock benchmark query")
    p.add_argument("csv")
    p.add_argument("out")
    p.add_argument("--query-name", default="stock")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    n = run(args.csv, args.out, args.query_name)
    secs = time.perf_counter() - t0
    sys.stdout.write("RESULT " + json.dumps({"matches": n, "seconds": secs}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
