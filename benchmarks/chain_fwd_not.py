"""The chain plan's forward walk on a NOT between states that rejects most matches (issue 13):
over the stock stream, ``PARTITION BY symbol WITHIN 60 seconds``, 20k events.

* ``after`` (session 11, branch ``fwdnot``): ``SEQ(Stock a, Stock+ b[], NOT Stock n, Stock c)``,
  ``n`` any event below ``a`` between the list and ``c``, ``c`` 1% below ``a``: only a drop
  from the list straight to ``c`` is kept (17,900 matches of the 600,177 before the NOT: 97%
  rejected). The walk decides it at its first step.
* ``first`` (session 12, branch ``notfirst``): ``SEQ(Stock a, NOT Stock n, Stock+ b[], Stock
  c)``, ``n`` any event below ``a + 1`` between ``a`` and the list, the list's events above
  ``a + 1``, ``c`` below ``a``: only a jump from ``a`` straight above ``a + 1`` is kept
  (105,446 matches of the 597,377 before the NOT: 82% rejected). The NOT's upper end is the
  list's first element, which the backward walk binds last.
* ``lead`` (session 12): ``SEQ(NOT Stock m, Stock a, Stock+ b[], Stock c)`` with the
  ``after`` shape's list and ``c``, ``m`` any event below ``a`` in the lead-in (the window
  before the last event, up to ``a``): ``a`` is the lowest of it (380,223 matches of the
  600,177 before the NOT: 37% rejected). The walk decides it per first node without caps;
  with a cap the count walk makes every match, as the NFA counts its candidates.

``Runtime.push_to`` into a null sink, 250 events a call: median over ``--runs`` of the
seconds, the matches per second and the time to the first match written, without caps and
with the default caps (since session 11 both count what the pruning walk makes, but for a
leading NOT); then the
peak traced memory (tracemalloc) of one more run::

    PYTHONPATH=<old src> python -m benchmarks.chain_fwd_not old [--shapes first,after]
    PYTHONPATH=src python -m benchmarks.chain_fwd_not new

Run the two alternately (``for i in 1 2 3; do ...; done``); each prints one line per shape
and setting.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from typing import Any

from kleene.api import analyze
from kleene.plans.registry import start

from .linkedcep import stock_events

QUERIES = {
    "after": """PATTERN SEQ(Stock a, Stock+ b[], NOT Stock n, Stock c)
WHERE b[i].price > a.price AND n.price < a.price AND c.price < a.price * 0.99
PARTITION BY symbol
WITHIN {window}
USING skip-till-any-match
""",
    "lead": """PATTERN SEQ(NOT Stock m, Stock a, Stock+ b[], Stock c)
WHERE m.price < a.price AND b[i].price > a.price AND c.price < a.price * 0.99
PARTITION BY symbol
WITHIN {window}
USING skip-till-any-match
""",
    "first": """PATTERN SEQ(Stock a, NOT Stock n, Stock+ b[], Stock c)
WHERE n.price < a.price + 1 AND b[i].price > a.price + 1 AND c.price < a.price
PARTITION BY symbol
WITHIN {window}
USING skip-till-any-match
""",
}

SETTINGS: dict[str, dict[str, Any]] = {
    "nocap": {"max_matches_per_event": None, "max_matches_per_call": None},
    "caps": {"max_matches_per_call": None},  # max_matches_per_event: the default 1 000 000
}


def run(query: str, events: Any, opts: dict[str, Any], mem: bool = False
        ) -> tuple[int, float, float, int]:
    """(matches, seconds, seconds to the first match written, peak traced bytes when
    ``mem``) of push_to 250 events at a time into a null sink, then close_to."""
    rt = start(analyze(query), plan="chain", **opts)
    n = [0]
    first = [0.0]
    if mem:
        tracemalloc.start()
    t = time.perf_counter()

    def sink(piece: object) -> None:
        if not n[0]:
            first[0] = time.perf_counter() - t
        n[0] += len(piece)  # type: ignore[arg-type]

    for i in range(0, len(events), 250):
        rt.push_to(events.slice(i, 250), sink, chunk=1000)
    rt.close_to(sink, chunk=1000)
    dt = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] if mem else 0
    if mem:
        tracemalloc.stop()
    return n[0], dt, first[0], peak


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.chain_fwd_not")
    ap.add_argument("label", nargs="?", default="run")
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--window", default="60 seconds")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shapes", default=",".join(QUERIES))
    ap.add_argument("--no-mem", action="store_true", help="no traced run")
    a = ap.parse_args()
    shapes = a.shapes.split(",")
    bad = [s for s in shapes if s not in QUERIES]
    if bad:
        ap.error(f"--shapes: unknown shape {bad[0]!r} (one of {', '.join(QUERIES)})")
    events = stock_events(a.events)
    for shape in shapes:
        q = QUERIES[shape].format(window=a.window)
        for name, opts in SETTINGS.items():
            rs = [run(q, events, opts) for _ in range(a.runs)]
            n = rs[0][0]
            dt = statistics.median(r[1] for r in rs)
            ft = statistics.median(r[2] for r in rs)
            peak = 0 if a.no_mem else run(q, events, opts, mem=True)[3]
            print(f"{a.label} {shape} {name} events {a.events} window {a.window!r} matches {n} "
                  f"median s {dt:.3f} matches/s {n / dt:,.0f} first match s {ft:.4f} "
                  f"peak MB {peak / 1e6:.1f}", flush=True)


if __name__ == "__main__":
    main()
