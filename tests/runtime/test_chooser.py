"""The plan chooser on one cost scale (docs/benchmarks.md, "The plan chooser's scale"): the
output mode (enumerate or count) and the keys a window's events spread over change the choice;
``kleene explain`` shows every estimate. Assertions are on the choice, never on the numbers."""

from __future__ import annotations

import random

from click.testing import CliRunner

from kleene.api import analyze
from kleene.api import compile as kcompile
from kleene.cli.main import cli
from kleene.events import EventBatch
from kleene.plans.registry import Stats, choose, start
from kleene.testing.oracle import evaluate as oracle

EXPLODE = """PATTERN SEQ(Stock a, Stock+ b[], Stock c)
WHERE c.price > a.price
PARTITION BY symbol
WITHIN {window}"""


def _stock(n: int, symbols: int = 50, step_ms: int = 100, seed: int = 3) -> EventBatch:
    """Like the benchmarks' stock stream: 10 events per second over ``symbols`` symbols."""
    rng = random.Random(seed)
    return EventBatch.from_records([
        {"id": i, "type": "Stock", "ts": i * step_ms / 1000, "symbol": f"s{rng.randrange(symbols)}",
         "price": rng.randrange(100)} for i in range(n)])


def test_explosion_enumerates_on_the_nfa_and_counts_on_the_chain() -> None:
    """Kleene explosion with statistics of the stream: enumeration on the NFA at 10 s (the
    chain's per-event work dominates) and on the chain from 20 s (its mask join writes
    matches about 2x faster than the NFA, docs/benchmarks.md "The chain's direct-mode
    joins"); counting on the chain (exact counts per start event, no partial match built)."""
    stats = Stats.from_events(_stock(3000))
    assert stats.distinct["symbol"] == 50
    assert choose(analyze(EXPLODE.format(window="10 seconds")),
                  stats=stats).choice.chosen == "nfa"
    q = analyze(EXPLODE.format(window="20 seconds"))
    assert choose(q, stats=stats).choice.chosen == "chain"
    counting = choose(q, stats=Stats(**{**_fields(stats), "count_only": True}))
    assert counting.choice.chosen == "chain"
    # count_only given to start / compile reaches the chooser
    assert start(q, stats=stats, count_only=True).compiled.kind.name == "chain"
    assert kcompile(EXPLODE.format(window="20 seconds"), count_only=True).plan == "chain"
    assert kcompile(EXPLODE.format(window="20 seconds")).plan == "nfa"  # no statistics


def test_counting_plan_counts_what_the_oracle_matches() -> None:
    """The plan chosen for counting gives the oracle's number of matches."""
    events = _stock(100, symbols=5)
    text = EXPLODE.format(window="1 seconds")
    rt = start(analyze(text), count_only=True)
    assert rt.compiled.kind.name == "chain"
    rt.count_placeholders = False
    rt.push(events)
    rt.close()
    want = len(oracle(analyze(text), events))
    assert want > 0 and rt.counters.matches == want


def test_keys_spread_the_window() -> None:
    """Without the key count the window holds 50x the events and the estimate saturates."""
    stats = Stats.from_events(_stock(3000))
    q = analyze(EXPLODE.format(window="20 seconds"))
    keyed = {c.name: c.cost for c in choose(q, stats=stats).choice.candidates}
    blind = Stats(**{**_fields(stats), "distinct": {}})
    unkeyed = {c.name: c.cost for c in choose(q, stats=blind).choice.candidates}
    assert keyed["nfa"] is not None and unkeyed["nfa"] is not None
    assert keyed["nfa"] < unkeyed["nfa"]


def test_explain_shows_estimates_and_the_mode() -> None:
    text = EXPLODE.format(window="20 seconds")
    for flags, chosen, mode in (([], "nfa", "enumerating matches"),
                                (["--count"], "chain", "counting only")):
        result = CliRunner().invoke(cli, ["explain", *flags, text])
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        head = next(ln for ln in lines if ln.startswith("plan: "))
        assert head.startswith(f"plan: {chosen} ") and mode in head
        for name in ("nfa", "chain", "tree"):
            row = next(ln for ln in lines if ln.strip(" *").startswith(name + " "))
            assert "estimated cost" in row
            assert row.lstrip().startswith("*") == (name == chosen)


def _fields(st: Stats) -> dict[str, object]:
    return {f: getattr(st, f) for f in Stats.__dataclass_fields__}
