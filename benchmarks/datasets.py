"""Deterministic benchmark inputs, generated (or extracted) once and cached under ``.data/``.

* ``stock``: ``id,symbol,ts,price,volume``; one event every 100 ms, the symbol drawn uniformly
  from ``S00``..``S49``, a Gaussian random walk of the price per symbol (2 decimals), volume
  uniform in 1..10000 (so ``volume > 9900`` keeps about 1 % of the events).
* ``market``: the same stream with an event ``type`` column (Buy/Sell/Quote/Cancel/Trade), for
  the AND / negation workload.
* ``aarhus``: a plain (uncompressed) CSV of the Aarhus traffic data in /work/shared/data, either
  the first N events or all 7.1M (both months, one header).

The same seed always gives byte-identical files; file names carry the size and seed.
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / ".data"
AARHUS_DIR = Path(os.environ.get("KLEENE_AARHUS_DIR", "/work/shared/data/aarhus_traffic"))
AARHUS_FILES = ("aarhus_traffic_2014-08.csv.gz", "aarhus_traffic_2014-09.csv.gz")
AARHUS_TOTAL = 7_135_969

#: the first timestamp of the generated streams (a Tuesday morning; naive, no zone)
BASE_TS = np.datetime64("2024-01-02T09:30:00.000", "ms")
MARKET_TYPES = ("Buy", "Sell", "Quote", "Cancel", "Trade")
MARKET_PROBS = (0.30, 0.30, 0.25, 0.05, 0.10)


def _atomic_write_csv(table: pa.Table, path: Path, *, header: bool = True) -> None:
    tmp = path.with_suffix(path.suffix + ".part")
    opts = pacsv.WriteOptions(include_header=False, quoting_style="none")
    with tmp.open("wb") as f:
        if header:  # pyarrow quotes header names; write a plain one
            f.write((",".join(table.column_names) + "\n").encode())
        pacsv.write_csv(table, f, write_options=opts)
    tmp.replace(path)


def _stock_table(n: int, seed: int, *, symbols: int, step_ms: int, market: bool) -> pa.Table:
    rng = np.random.default_rng(seed)
    sym = rng.integers(0, symbols, n)
    steps = np.round(rng.normal(0.0, 0.5, n), 2)
    # Random walk per symbol: cumulative sum of the steps within each symbol, in stream order.
    order = np.argsort(sym, kind="stable")
    walk = np.empty(n)
    s_sorted = sym[order]
    cs = np.cumsum(steps[order])
    first = np.r_[0, np.flatnonzero(np.diff(s_sorted)) + 1]
    offsets = np.repeat(cs[first] - steps[order][first], np.diff(np.r_[first, n]))
    start = 100.0 + rng.integers(0, 100, symbols)
    walk[order] = np.round(start[s_sorted] + cs - offsets, 2)
    cols: dict[str, pa.Array] = {"id": pa.array(np.arange(n, dtype=np.int64))}
    if market:
        types = rng.choice(len(MARKET_TYPES), size=n, p=MARKET_PROBS)
        cols["type"] = pa.DictionaryArray.from_arrays(
            pa.array(types.astype(np.int32)), pa.array(MARKET_TYPES)).cast(pa.string())
    names = np.array([f"S{i:02d}" for i in range(symbols)])
    cols["symbol"] = pa.array(names[sym])
    ts = BASE_TS + np.arange(n, dtype=np.int64) * np.timedelta64(step_ms, "ms")
    cols["ts"] = pa.array(ts, pa.timestamp("ms"))
    cols["price"] = pa.array(walk)
    cols["volume"] = pa.array(rng.integers(1, 10_001, n))
    return pa.table(cols)


def stock_csv(n: int, seed: int = 42, *, symbols: int = 50, step_ms: int = 100,
              header: bool = True, data_dir: Path | None = None) -> Path:
    """The stock stream of ``n`` events (cached in ``data_dir``, default ``.data/``).
    ``header=False`` gives Flink's copy (its CSV format cannot skip a header)."""
    data_dir = data_dir or DATA_DIR
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"stock_{n}_s{seed}_k{symbols}_{step_ms}ms{'' if header else '.noheader'}.csv"
    if not path.exists():
        _atomic_write_csv(_stock_table(n, seed, symbols=symbols, step_ms=step_ms, market=False),
                          path, header=header)
    return path


def market_csv(n: int, seed: int = 7, *, symbols: int = 20, step_ms: int = 10) -> Path:
    """A stock-like stream with event types Buy/Sell/Quote/Cancel/Trade (cached)."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    path = DATA_DIR / f"market_{n}_s{seed}_k{symbols}_{step_ms}ms.csv"
    if not path.exists():
        _atomic_write_csv(_stock_table(n, seed, symbols=symbols, step_ms=step_ms, market=True),
                          path)
    return path


def aarhus_available() -> str | None:
    """None when the Aarhus files are there, else the reason they are not."""
    missing = [f for f in AARHUS_FILES if not (AARHUS_DIR / f).exists()]
    return f"missing {', '.join(missing)} in {AARHUS_DIR}" if missing else None


def aarhus_csv(n: int | None = None) -> Path:
    """The Aarhus observations as one plain CSV: the first ``n`` events, or all when None."""
    reason = aarhus_available()
    if reason:
        raise FileNotFoundError(reason)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    path = DATA_DIR / (f"aarhus_{n}.csv" if n else "aarhus_all.csv")
    if path.exists():
        return path
    tmp = path.with_suffix(".csv.part")
    left = n if n is not None else -1
    with tmp.open("wb") as out:
        for k, name in enumerate(AARHUS_FILES):
            with gzip.open(AARHUS_DIR / name, "rb") as f:
                head = f.readline()
                if k == 0:
                    out.write(head)
                if left < 0:
                    shutil.copyfileobj(f, out, 1 << 20)
                    continue
                for line in f:
                    if left == 0:
                        break
                    out.write(line)
                    left -= 1
            if left == 0:
                break
    tmp.replace(path)
    return path


def count_rows(path: Path) -> int:
    """Data rows in a CSV with a header (fast: counts newlines)."""
    n = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            n += chunk.count(b"\n")
    return n - 1
