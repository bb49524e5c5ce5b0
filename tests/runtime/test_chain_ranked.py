"""The chain plan's ranked counter (``count_only`` on ``SEQ(a, b+ | b*, c) [WHERE a.x OP c.y]``,
:meth:`kleene.plans.chain.ChainMatcher._count_ranked`): equal to the oracle's number of matches
on random small streams, equal to the per-start counter on long ones (chunks, caps, snapshots)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch
from kleene.plans.chain import Ranked
from kleene.plans.registry import start
from kleene.testing.oracle import evaluate as oracle

OPS = ("<", "<=", ">", ">=", "=", "!=")


def _count(q: str, events: EventBatch, *, ranked: bool = True, scan_below: int | None = None,
           **opts: object) -> tuple[int, Any]:
    """The count of ``q`` over ``events`` on the chain plan; ``ranked=False`` forces the
    per-start counter (the path the ranked counter replaces), ``scan_below=0`` the Fenwick
    tree from the first start on."""
    rt = start(analyze(q), plan="chain", count_only=True, **opts)
    rt.count_placeholders = False
    m = rt.matcher  # type: ignore[attr-defined]
    if scan_below is not None:
        m.scan_below = scan_below
    if not ranked:
        assert m.ranked is not None
        m.ranked = None
        m.window_swag = False
    rt.push(events)
    rt.close()
    return rt.counters.matches, rt  # type: ignore[attr-defined]


def _random_case(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    kl = rng.choice(("+", "*"))
    ta, tb, tc = (rng.choice("AB") for _ in range(3))
    op = rng.choice(OPS)
    xa, yc = rng.choice("xy"), rng.choice("xy")
    cond = f"a.{xa} {op} c.{yc}" if rng.random() < 0.5 else \
        f"c.{yc} {_flip(op)} a.{xa}"
    conds = [cond] if rng.random() < 0.85 else []
    if rng.random() < 0.3:
        conds.append(f"b.x > {rng.randint(0, 2)}")
    if rng.random() < 0.2:
        conds.append(f"a.y < {rng.randint(1, 3)}")
    q = f"PATTERN SEQ({ta} a, {tb}{kl} b[], {tc} c)"
    if conds:
        q += " WHERE " + " AND ".join(conds)
    if rng.random() < 0.4:
        q += " PARTITION BY k"
    w = rng.random()
    if w < 0.4:
        q += f" WITHIN {rng.randint(1, 4)} seconds"
    elif w < 0.7:
        q += f" WITHIN {rng.randint(2, 6)} EVENTS"
    q += " USING skip-till-any-match"
    recs: list[dict[str, object]] = []
    ts = 0
    floats = rng.random() < 0.3
    for i in range(rng.randint(3, 11)):
        ts += rng.choice((0, 1, 1, 2))  # ties in time
        x: object = rng.randint(0, 3)  # ties in value
        if floats and rng.random() < 0.5:
            x = x + rng.choice((0.0, 0.5))  # type: ignore[operator]
        recs.append({"id": f"e{i}", "type": rng.choice("AB"), "ts": ts, "x": x,
                     "y": rng.randint(0, 3), "k": rng.choice("uv")})
    return q, recs


def _flip(op: str) -> str:
    return {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}[op]


def test_ranked_count_equals_the_oracle_on_random_cases() -> None:
    rng = random.Random(2013)
    ranked = ops_seen = 0
    seen: set[str] = set()
    for _ in range(500):
        q, recs = _random_case(rng)
        events = EventBatch.from_records(recs)
        want = len(oracle(analyze(q), events))
        for scan_below in (None, 0):  # scanning the few live starts; the tree
            got, rt = _count(q, events, scan_below=scan_below)
            assert got == want, f"{q} over {recs}: counted {got}, oracle {want} ({scan_below})"
        r = rt.matcher.ranked
        ranked += r is not None
        if r is not None and r.op is not None:
            seen.add(r.op)
            ops_seen += 1
    assert ranked > 400 and ops_seen > 300  # the cases really ran the ranked counter
    assert seen == set(OPS)


def test_the_benchmark_query_takes_the_ranked_counter() -> None:
    """docs/benchmarks.md, "Kleene explosion": ``c.price > a.price`` is read as
    ``a.price < c.price``."""
    from benchmarks.queries import EXPLODE

    rt = start(analyze(EXPLODE.format(window="60 seconds")), plan="chain", count_only=True)
    r = rt.matcher.ranked  # type: ignore[attr-defined]
    assert isinstance(r, Ranked) and (r.op, r.star) == ("<", False)
    assert r.xslot == r.yslot  # both read price
    # without count_only nothing is counted this way
    rt = start(analyze(EXPLODE.format(window="60 seconds")), plan="chain")
    assert rt.matcher.ranked is None  # type: ignore[attr-defined]


def test_other_shapes_keep_the_general_counters() -> None:
    for q in ("PATTERN SEQ(A a, B+ b[], C c) WHERE b.x > a.x",       # condition on the Kleene
              "PATTERN SEQ(A a, B+ b[], C c) WHERE c.x > a.x AND c.y < a.y",  # two conditions
              "PATTERN SEQ(A a, B+ b[], C c) WHERE c.x > a.x + 1",   # not attribute vs attribute
              "PATTERN SEQ(A a, B+ b[], C c, D d) WHERE d.x > a.x",  # four states
              "PATTERN SEQ(A a, B+ b[], C c)"):                       # no window, no condition
        rt = start(analyze(q + " USING skip-till-any-match"), plan="chain", count_only=True)
        assert rt.matcher.count_mode and rt.matcher.ranked is None, q  # type: ignore[attr-defined]


def _stock(n: int, seed: int, *, keys: int = 3, nulls: bool = False,
           text: bool = False) -> EventBatch:
    rng = random.Random(seed)
    recs = []
    ts = 0
    for i in range(n):
        ts += rng.choice((0, 1, 2))
        price: object = rng.randint(0, 40) + rng.choice((0.0, 0.25))
        if nulls and rng.random() < 0.02:
            price = None
        if text:
            price = f"p{rng.randint(0, 40):02d}"
        recs.append({"id": i, "type": "S", "ts": ts, "price": price,
                     "sym": f"s{rng.randrange(keys)}"})
    return EventBatch.from_records(recs)


LONG = ("PATTERN SEQ(S a, S{k} b[], S c) WHERE c.price {op} a.price PARTITION BY sym "
        "WITHIN {w} USING skip-till-any-match")


@pytest.mark.parametrize(("op", "k", "w"), [(">", "+", "20 seconds"), ("<=", "*", "9 EVENTS"),
                                          ("=", "+", "30 seconds"), ("!=", "+", "12 EVENTS")])
def test_long_streams_equal_the_per_start_counter(op: str, k: str, w: str) -> None:
    """Hundreds of events per key: several chunks, starts carried across them."""
    q = LONG.format(op=op, k=k, w=w)
    for events in (_stock(1500, 7), _stock(900, 8, keys=1)):
        want, _ = _count(q, events, ranked=False)
        for scan_below in (None, 0, 2):  # scan, tree, scan then tree within a chunk
            got, rt = _count(q, events, scan_below=scan_below)
            assert got == want > 0, (q, got, want, scan_below)
            assert rt.matcher.ranked is not None


def test_counts_beyond_64_bits() -> None:
    """A window of 300 events: hundreds of live starts, chunks longer than 256 events."""
    q = LONG.format(op="<", k="+", w="300 EVENTS")
    events = _stock(1400, 14, keys=1)
    want, _ = _count(q, events, ranked=False)
    assert want > 2 ** 200
    for scan_below in (None, 0):
        assert _count(q, events, scan_below=scan_below)[0] == want


def test_nulls_and_strings() -> None:
    """A chunk with a NULL price is counted by the per-start counter (the comparison is NULL,
    never TRUE); strings are ordered as the query orders them."""
    q = LONG.format(op=">", k="+", w="20 seconds")
    for events in (_stock(1200, 9, nulls=True), _stock(1200, 10, text=True)):
        got, _rt = _count(q, events)
        want, _ = _count(q, events, ranked=False)
        assert got == want > 0
    prices = [3, None, 1, 2.5, None, 3, 1, 2, None, 2.5, 1.5, 2]
    small = EventBatch.from_records([
        {"id": i, "type": "S", "ts": i, "price": p, "sym": "s"} for i, p in enumerate(prices)])
    for op in ("<", ">=", "=", "!="):
        q = LONG.format(op=op, k="+", w="6 seconds")
        want = len(oracle(analyze(q), small))
        assert _count(q, small)[0] == want > 0, op


def test_split_pushes_and_snapshot_restore() -> None:
    """Counting across pushes and a snapshot taken between them equals one push."""
    q = LONG.format(op=">=", k="+", w="25 seconds")
    events = _stock(1000, 12)
    whole, _ = _count(q, events)
    aq = analyze(q)
    rt = start(aq, plan="chain", count_only=True)
    rt.count_placeholders = False
    t = events.table
    rt.push(EventBatch(t.slice(0, 333), events.time))
    blob = rt.snapshot()
    rt2 = start(aq, plan="chain", count_only=True)
    rt2.count_placeholders = False
    rt2.restore(blob)
    rt2.push(EventBatch(t.slice(333, 400), events.time))
    rt2.push(EventBatch(t.slice(733), events.time))
    rt2.close()
    # the snapshot carries the counters
    assert 0 < rt.counters.matches < rt2.counters.matches == whole  # type: ignore[attr-defined]


def test_caps_as_the_per_start_counter() -> None:
    q = LONG.format(op=">", k="+", w="60 seconds")
    events = _stock(600, 13, keys=1)
    with pytest.warns(RuntimeWarning, match="on_cap='truncate' dropped"):
        got, rt = _count(q, events, max_runs_per_partition=5, on_cap="truncate")
    with pytest.warns(RuntimeWarning, match="on_cap='truncate' dropped"):
        want, w = _count(q, events, ranked=False, max_runs_per_partition=5, on_cap="truncate")
    assert got == want > 0
    assert rt.counters.truncated_runs == w.counters.truncated_runs > 0
    with pytest.raises(CapacityError, match="max_runs_per_partition=5"):
        _count(q, events, max_runs_per_partition=5)


def test_the_chooser_costs_the_ranked_counter() -> None:
    """Counting cost: O(1)-ish per event for the ranked shape, per live start otherwise."""
    from kleene.plans.chain import CHAIN_RANKED_EVENT, chain_cost, compile_chain
    from kleene.plans.registry import Stats

    stats = Stats(type_share={"S": 1.0}, events_per_second=2.0, source="test",
                  count_only=True)
    base = "PATTERN SEQ(S a, S+ b[], S c) WHERE c.x > a.x{more} WITHIN {w} seconds " \
           "USING skip-till-any-match"
    for w in (10, 60):
        ranked = chain_cost(compile_chain(analyze(base.format(more="", w=w))), stats)
        per_start = chain_cost(compile_chain(analyze(base.format(more=" AND c.y < a.y", w=w))),
                               stats)
        assert ranked == pytest.approx(CHAIN_RANKED_EVENT) and per_start > 2 * ranked
