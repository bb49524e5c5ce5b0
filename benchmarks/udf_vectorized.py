"""A vectorized UDF against the same function row by row (issue 15 item 4).

    PYTHONPATH=src python -m benchmarks.udf_vectorized [--events N] [--repeats R]

The query keeps one-variable conditions that call a user function: ``score(b.x, b.y) > 0.8``
(a small numeric model: ``sin(x) * cos(y) + x / (1 + y)``, numpy over arrays or ``math`` per
row) and a cheap ``b.k < 25`` before it. Both variants give the same matches (checked); the
table gives CPU seconds of the engine call (median, the two alternating in one process),
events/s and the peak memory of the process. Generated events (``type`` A/B, ``x``, ``y``
uniform, ``k`` in 0..49), because the point is the call pattern, not the data.
"""

from __future__ import annotations

import argparse
import math
import resource
import statistics
import time
from typing import Any

import numpy as np
import pyarrow as pa

import kleene
from kleene.events import EventBatch
from kleene.events.readers import read_events

QUERY = ("PATTERN SEQ(A a, B b) WHERE b.k < 25 AND score(b.x, b.y) > 0.8 AND a.k = b.k "
         "WITHIN 2 seconds")


def _row(x: float, y: float) -> float:
    return math.sin(x) * math.cos(y) + x / (1.0 + y)


def _vec(x: pa.Array, y: pa.Array) -> Any:
    xs = x.to_numpy(zero_copy_only=False)
    ys = y.to_numpy(zero_copy_only=False)
    return np.sin(xs) * np.cos(ys) + xs / (1.0 + ys)


def _events(n: int) -> EventBatch:
    rng = np.random.default_rng(7)
    batch, _report = read_events(pa.table({
        "ts": pa.array(np.arange(n, dtype=np.int64) * 10),  # 10 ms apart
        "type": pa.array(np.where(rng.random(n) < 0.5, "A", "B")),
        "x": pa.array(rng.random(n) * 3), "y": pa.array(rng.random(n) * 3),
        "k": pa.array(rng.integers(0, 50, n)),
    }), time_unit="ms")
    return batch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.udf_vectorized")
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    events = _events(args.events)
    variants = {"row by row": _row, "vectorized": kleene.udf(_vec, vectorized=True)}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    found: dict[str, int] = {}
    keys: dict[str, Any] = {}
    for _ in range(args.repeats):
        for name, fn in variants.items():
            q = kleene.compile(QUERY, udfs={"score": fn})
            c0 = time.process_time()
            ms = q.run(events)
            cpu[name].append(time.process_time() - c0)
            found[name] = len(ms)
            keys[name] = [m.key() for m in ms]
    assert keys["row by row"] == keys["vectorized"], "the two variants differ"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.events:,} events, {found['vectorized']:,} matches (the same for both), "
          f"median of {args.repeats}, CPU seconds of the engine call")
    print(f"{'variant':<12} {'CPU s':>8} {'events/s':>12}")
    for name, ts in cpu.items():
        med = statistics.median(ts)
        print(f"{name:<12} {med:>8.3f} {args.events / med:>12,.0f}")
    ratio = statistics.median(r / v for r, v in zip(cpu["row by row"], cpu["vectorized"],
                                                     strict=True))
    print(f"vectorized is {ratio:.2f}x the row-by-row speed (median of pairs); "
          f"peak memory {peak:,.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
