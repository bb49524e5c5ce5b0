"""What a Parquet schema change costs: N matches with RETURN fields written by
``ParquetWriter`` when every row group has the first one's types, against the same matches
where the last match's ``x`` is a float (the row groups written so far, all but the last, are
copied once into the wider schema) and where ``x`` is NULL for the first row group (one
row group copied). The cases alternate; CPU seconds, medians.

    PYTHONPATH=src python -m benchmarks.parquet_schema_bench --n 1000000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from kleene.events import Match, TimeInfo
from kleene.events.writers import ParquetWriter


def _matches(n: int, case: str) -> list[Match]:
    out = []
    for i in range(n):
        x: object = i
        if case == "float-at-the-end" and i == n - 1:
            x = 0.5
        elif case == "null-first-group" and i < 65_536:
            x = None
        out.append(Match("q", {"a": i, "b": (i, i + 1)}, i * 1000, i * 1000 + 5,
                         {"x": x, "s": "s", "f": i / 7}))
    return out


def _write(path: str, ms: list[Match]) -> tuple[float, int]:
    t0 = time.process_time()
    w = ParquetWriter(path, TimeInfo(), row_group_size=65_536)
    for i in range(0, len(ms), 10_000):
        w.write(ms[i:i + 10_000])
    w.close()
    return time.process_time() - t0, w._rewrites


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    cases = ("same-types", "float-at-the-end", "null-first-group")
    data = {c: _matches(args.n, c) for c in cases}
    times: dict[str, list[float]] = {c: [] for c in cases}
    copies: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "o.parquet")
        for _ in range(args.rounds):
            for c in cases:
                s, copies[c] = _write(path, data[c])
                times[c].append(s)
    base = statistics.median(times["same-types"])
    print(f"{args.n:,} matches, 3 RETURN fields, row groups of 65,536; CPU s, median of "
          f"{args.rounds} (alternating)")
    for c in cases:
        med = statistics.median(times[c])
        print(f"{c:18} {med:7.3f} s  x{med / base:5.2f}  copies {copies[c]}  "
              f"({', '.join(f'{t:.3f}' for t in times[c])})")


if __name__ == "__main__":
    main()
