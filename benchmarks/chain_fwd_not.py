"""The chain plan's forward walk on a NOT between states that rejects most matches (issue 13,
session 11, branch ``fwdnot``): ``SEQ(Stock a, Stock+ b[], NOT Stock n, Stock c)`` over the
stock stream, ``n`` any event below ``a`` between the list and ``c``, ``c`` 1% below ``a``: only
a drop from the list straight to ``c`` is kept (at 20k events and 60 s, 17,900 matches of the
600,177 before the NOT: 97% rejected).
``Runtime.push_to`` into a null sink, 250 events a call: median over ``--runs`` of the seconds,
the matches per second and the time to the first match written, without caps (the walk
prunes) and with the default caps (the count walk counts before the NOT)::

    PYTHONPATH=<old src> python -m benchmarks.chain_fwd_not old
    PYTHONPATH=src python -m benchmarks.chain_fwd_not new

Run the two alternately (``for i in 1 2 3; do ...; done``); each prints one line per setting.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from kleene.api import analyze
from kleene.plans.registry import start

from .linkedcep import stock_events

QUERY = """PATTERN SEQ(Stock a, Stock+ b[], NOT Stock n, Stock c)
WHERE b[i].price > a.price AND n.price < a.price AND c.price < a.price * 0.99
PARTITION BY symbol
WITHIN {window}
USING skip-till-any-match
"""

SETTINGS: dict[str, dict[str, Any]] = {
    "nocap": {"max_matches_per_event": None, "max_matches_per_call": None},
    "caps": {"max_matches_per_call": None},  # max_matches_per_event: the default 1 000 000
}


def run(query: str, events: Any, opts: dict[str, Any]) -> tuple[int, float, float]:
    """(matches, seconds, seconds to the first match written) of push_to 250 events at a
    time into a null sink, then close_to."""
    rt = start(analyze(query), plan="chain", **opts)
    n = [0]
    first = [0.0]
    t = time.perf_counter()

    def sink(piece: object) -> None:
        if not n[0]:
            first[0] = time.perf_counter() - t
        n[0] += len(piece)  # type: ignore[arg-type]

    for i in range(0, len(events), 250):
        rt.push_to(events.slice(i, 250), sink, chunk=1000)
    rt.close_to(sink, chunk=1000)
    return n[0], time.perf_counter() - t, first[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("label", nargs="?", default="run")
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--window", default="60 seconds")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    events = stock_events(a.events)
    q = QUERY.format(window=a.window)
    for name, opts in SETTINGS.items():
        rs = [run(q, events, opts) for _ in range(a.runs)]
        n = rs[0][0]
        dt = statistics.median(r[1] for r in rs)
        ft = statistics.median(r[2] for r in rs)
        print(f"{a.label} {name} events {a.events} window {a.window!r} matches {n} "
              f"median s {dt:.3f} matches/s {n / dt:,.0f} first match s {ft:.4f}",
              flush=True)


if __name__ == "__main__":
    main()
