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


GENERAL = """PATTERN SEQ(Stock a, Stock+ b[], Stock c)
WHERE b[i].price > a.price AND c.price < a.price
PARTITION BY symbol
WITHIN {window}"""

FWD_OR_NOT = [  # (query, the matcher walks forward, the chooser costs it so)
    (GENERAL, True, True),
    (GENERAL + "\nRETURN a.price AS p, count(b) AS nb", True, True),
    ("PATTERN SEQ(Stock a, Stock+ b, Stock c) WHERE b.price > a.price "
     "PARTITION BY symbol WITHIN {window}", True, True),
    # singles only: the walk, but costed as the reverse join (2-5x slower than the NFA)
    ("PATTERN SEQ(Stock a, Stock b, Stock c) WHERE b.price > a.price AND c.price < b.price "
     "PARTITION BY symbol WITHIN {window}", True, False),
    ("PATTERN SEQ(Stock a, Stock b) WHERE b.price > a.price PARTITION BY symbol "
     "WITHIN {window} RETURN a.price AS p", True, False),
    (EXPLODE, False, False),  # the mask join (kleene_plan_shape)
    ("PATTERN SEQ(Stock a, Stock b, Stock c) PARTITION BY symbol WITHIN {window}",
     False, False),  # the generated SEQ join
    ("PATTERN SEQ(Stock a, NOT Stock n, Stock+ b[], Stock c) WHERE b[i].price > a.price "
     "PARTITION BY symbol WITHIN {window}", True, False),  # NOT: walked (chain-fwd3), costed
    # as the reverse join (``fwd_shape`` excludes NOT: the walk's cost with one not measured)
]


def test_the_forward_join_is_costed_with_its_own_constants() -> None:
    """With measured statistics the chain's estimate uses ``CHAIN_FWD_EVENT`` /
    ``CHAIN_FWD_MATCH`` exactly where the compiled matcher enumerates with the forward walk
    (``FwdJoin``) through a Kleene state (the chooser's plan-level test agrees with the
    matcher's), and ``CHAIN_EVENT`` / ``CHAIN_MATCH`` with default statistics."""
    from kleene.plans import chain

    assert (chain.CHAIN_FWD_EVENT, chain.CHAIN_FWD_MATCH) != (chain.CHAIN_EVENT,
                                                              chain.CHAIN_MATCH)
    measured = Stats.from_events(_stock(3000))
    for text, walks, fwd in FWD_OR_NOT:
        q = analyze(text.format(window="5 seconds"))
        rt = start(q, plan="chain", stats=measured)
        assert (rt.matcher.fwd is not None) == walks, text
        for st, (a, b) in ((measured, (chain.CHAIN_FWD_EVENT, chain.CHAIN_FWD_MATCH)),
                           (Stats(), (chain.CHAIN_EVENT, chain.CHAIN_MATCH))):
            cp = choose(q, plan="chain", stats=st)
            t = chain.chain_terms(cp.plan, st)
            est = next(c.cost for c in cp.choice.candidates if c.name == "chain")
            assert est is not None
            if est >= 1e18:
                continue  # defaults: a Kleene estimate saturates
            uses = abs(est - (a * t["events"] + b * t["matches"])) <= 1e-9 * est
            assert uses == (fwd or st is not measured), (text, st.source)


def test_general_join_on_the_nfa_at_small_windows_and_the_chain_at_large() -> None:
    """A condition on each list element (``b[i].price > a.price``), measured statistics: the
    NFA at 5 s (the walk measured 3.5-4x slower there, docs/benchmarks.md "The chooser and
    the general join, forward") and the chain at 60 s (from 50 s the NFA stops at its cap of
    live runs per partition); the choice, not the speed, is asserted."""
    stats = Stats.from_events(_stock(3000))
    assert choose(analyze(GENERAL.format(window="5 seconds")), stats=stats).choice.chosen == "nfa"
    assert choose(analyze(GENERAL.format(window="60 seconds")),
                  stats=stats).choice.chosen == "chain"


def _fields(st: Stats) -> dict[str, object]:
    return {f: getattr(st, f) for f in Stats.__dataclass_fields__}
