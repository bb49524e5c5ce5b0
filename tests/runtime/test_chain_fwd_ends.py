"""The chain plan's forward walk on an event that ends matches in two states (a ``*`` last state
over the type of the state before it, ``SEQ(S a, S+ b[], S* c[])``): one FwdBlock merging the
states' matches in the output order, with and without a NOT that is not trailing, pruned by
the conjuncts over the end state and the first (``FwdJoin.end_walk``); docs/engine.md
"Streaming output"."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any

import pytest

from kleene.api import analyze
from kleene.events import EventBatch
from kleene.plans import chain
from kleene.plans.chain_fwd import FwdBlock
from kleene.plans.registry import start

from .sinks import Collect
from .test_chain_fwd import _check_cases, _key, _outcome, _records, _seq_query


def _case_ends(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    """A random query whose last one or two states are ``*`` lists of the type of the state
    before them (an event ends matches in two or three states): 2-4 states, a ``+`` list
    inside sometimes, a NOT that is not trailing in half of them, conditions per list
    element against the first or another single, over consecutive elements, between
    singles, aggregates, RETURN."""
    n = rng.choice((2, 3, 3, 4))
    stars = 2 if n >= 3 and rng.random() < 0.2 else 1
    alphabet = "S" if rng.random() < 0.75 else "ST"
    types = ["S" if i >= n - stars - 1 else rng.choice(alphabet) for i in range(n)]
    names = [f"v{i}" for i in range(n)]
    plus = rng.randrange(1, n - stars) if n - stars > 1 and rng.random() < 0.6 else -1
    items = []
    for i, (t, v) in enumerate(zip(types, names, strict=True)):
        if i >= n - stars:
            items.append(f"{t}* {v}[]")
        elif i == plus:
            items.append(f"{t}+ {v}[]")
        else:
            items.append(f"{t} {v}")
    singles = [v for i, v in enumerate(names) if i < n - stars and i != plus]
    lists = [names[i] for i in range(n) if i >= n - stars or i == plus]
    neg = rng.random() < 0.5
    if neg:  # before item ``gap``, not after the state the ``*`` lists follow (trailing)
        gap = rng.randrange(0, n - stars)
        items.insert(gap, f"NOT {rng.choice(alphabet)} n")
    conds: list[str] = []
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        op = rng.choice((">", ">=", "<", "!="))
        lk = rng.choice(lists)
        if r < 0.5:
            other = names[0] if rng.random() < 0.7 else rng.choice(singles)
            conds.append(f"{lk}[i].x {op} {other}.x")
        elif r < 0.6:
            conds.append(f"{lk}[i].x >= {lk}[i-1].x")
        elif r < 0.75:
            conds.append(f"count({lk}) {rng.choice(('<=', '>='))} {rng.randint(0, 2)}")
        elif len(singles) >= 2:
            a, b = rng.sample(singles, 2)
            conds.append(f"{a}.x {op} {b}.x")
    if neg and rng.random() < 0.7:
        conds.append(rng.choice((f"n.x = {rng.randint(0, 3)}",
                                 f"n.x {rng.choice(('>', '<='))} {names[0]}.x")))
    q = _seq_query(rng, items, conds, (2, 6), (3, 7), 0.6)
    if rng.random() < 0.25:
        q += f" RETURN {singles[0]}.x AS x0, count({lists[-1]}) AS nb"
    return q, _records(rng, alphabet, 6, 11)


@pytest.mark.parametrize("block_min", [64, 1])
def test_events_ending_matches_in_two_states_equal_the_oracle_in_order(
        block_min: int, monkeypatch: Any) -> None:
    """Random one-type ``*``-last queries, with and without a NOT, over split pushes, a
    snapshot between two of them and chunks of 1-30: push_to's pieces are the oracle's
    matches in its order, and push's; with ``BLOCK_MIN`` 1 every event ending matches in
    two states writes one merged block (counted), with a NOT too."""
    monkeypatch.setattr(chain, "BLOCK_MIN", block_min)
    merged = {"plain": 0, "not": 0}
    walk = FwdBlock.walk

    def spy(self: FwdBlock) -> Any:
        if self.more:  # a merged block being written
            merged["not" if self.hist is not None else "plain"] += 1
        return walk(self)

    monkeypatch.setattr(FwdBlock, "walk", spy)
    rng = random.Random(7321 + block_min)
    walked = negs = 0

    def look(q: str, rt: Any) -> None:
        nonlocal negs, walked
        assert rt.matcher.fwd is not None and rt.matcher.fwd_ends, q
        walked += 1
        negs += rt.matcher.fwd.neg_ok is not None

    matches, columns, big = _check_cases(_case_ends, rng, 260, look)
    assert walked > 220 and negs > 90 and matches > 2000 and big < 15, (
        walked, negs, matches, big)
    if block_min == 1:
        assert merged["plain"] > 100 and merged["not"] > 50, merged
        assert columns > matches // 4, (columns, matches)


SHAPES = {
    "star_last": ("PATTERN SEQ(S a, S+ b[], S* c[]) WHERE b[i].x > a.x AND c[i].x < a.x"
                  " WITHIN 10 seconds"),
    "star_last_not": ("PATTERN SEQ(S a, NOT S n, S+ b[], S* c[]) WHERE n.x = 9 AND "
                      "b[i].x > a.x AND c[i].x < a.x WITHIN 10 seconds"),
    "two_stars": ("PATTERN SEQ(S a, S b, S* c[], S* d[]) WHERE c[i].x > a.x AND d[i].x < b.x"
                  " WITHIN 8 seconds"),
    "prev": ("PATTERN SEQ(S a, S+ b[], S* c[]) WHERE b[i].x > a.x AND c[i].x >= c[i-1].x"
             " WITHIN 9 seconds"),
}
SHAPES["star_last_return"] = SHAPES["star_last"] + " RETURN a.x AS x0, count(c) AS nc"
"""A ``*`` last state over the type before it (an event ends matches in ``b`` and ``c``), with
a NOT before the lists, two ``*`` lists at the end (three end states), a condition over
consecutive elements (checked on the complete binding), RETURN."""


def _events(n: int, seed: int = 5) -> EventBatch:
    rng = random.Random(seed)
    return EventBatch.from_records(
        [{"id": i, "type": "S", "ts": i, "x": rng.randint(0, 9)} for i in range(n)])


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_call_holds_merged_blocks_and_equals_the_nfa(shape: str, monkeypatch: Any) -> None:
    """Thousands of matches in one call: the runtime holds at most one entry per event,
    merged blocks among them, pieces of at most ``chunk``, the NFA's matches in order."""
    aq = analyze(SHAPES[shape])
    events = _events(90)
    nfa = start(aq, plan="nfa", max_matches_per_call=None)
    want = nfa.push(events) + nfa.close()
    rt = start(aq, plan="chain", max_matches_per_call=None)
    assert rt.matcher.fwd is not None
    held: list[int] = []
    release = rt._release_blocks  # type: ignore[attr-defined]

    def spy(ready: list[Any]) -> Any:
        held.append(len(ready))
        return release(ready)

    rt._release_blocks = spy  # type: ignore[attr-defined]
    merged = [0]
    walk = FwdBlock.walk

    def count(self: FwdBlock) -> Any:
        merged[0] += bool(self.more)
        return walk(self)

    monkeypatch.setattr(FwdBlock, "walk", count)
    sink = Collect()
    n = rt.push_to(events, sink, chunk=400) + rt.close_to(sink, chunk=400)
    assert n == len(want) > 2_000
    assert merged[0] > 5 and sum(held) <= len(events) * chain.BLOCK_MIN
    assert max(map(len, sink.pieces)) <= 400
    assert _key(sink.matches) == _key(want)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("on_cap", ["error", "truncate"])
@pytest.mark.parametrize("per_event,per_call", [
    (None, None), (60, None), (None, 900), (120, 700), (5000, 50_000)])
def test_caps_mean_what_they_mean_for_push(on_cap: str, per_event: int | None,
                                           per_call: int | None, shape: str) -> None:
    """push_to under the caps, error and truncate: the same matches, errors and counters as
    push (the merged block's count walk counts before the NOT, as the candidates do)."""
    aq = analyze(SHAPES[shape])
    events = _events(40, seed=11)
    opts = {"max_matches_per_event": per_event, "max_matches_per_call": per_call,
            "on_cap": on_cap}
    plain = _outcome(start(aq, plan="chain", **opts), events, stream=False)
    streamed = _outcome(start(aq, plan="chain", **opts), events, stream=True)
    assert streamed == plain
    if per_event is None and per_call is None:
        assert plain[1] > 1_000


def test_traced_memory_with_a_not_is_far_below_its_matches() -> None:
    """A NOT before the two lists, tens of thousands of matches in one push_to call: the
    traced peak is a small fraction of what their Match objects take (about 400 B each;
    the candidates this wrote before took 23.5 MB here, 1,300 B a match) -- the merged blocks
    are walked as they are written."""
    aq = analyze(SHAPES["star_last_not"])
    events = _events(100)
    rt = start(aq, plan="chain", max_matches_per_call=None)
    n = 0

    def count(piece: Any) -> None:
        nonlocal n
        n += len(piece)

    tracemalloc.start()
    try:
        rt.push_to(events, count, chunk=250)
        rt.close_to(count, chunk=250)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n > 15_000
    assert peak < n * 400 / 4, (peak, n)


def test_the_pruned_walks_make_the_same_matches_and_walk_fewer() -> None:
    """``end_walk``: each end state's walk (the ``ending_at`` one before the last, the whole
    join for the last) with the conjuncts over that state and the first checked per first
    node and per step: the same paths in the same order as the plain walks, and fewer
    complete bindings checked (the conjuncts left to them)."""
    aq = analyze(SHAPES["star_last"])
    rt = start(aq, plan="chain", max_matches_per_call=None)
    m = rt.matcher
    fwd = m.fwd
    plain = {1: m.fwd_ends[1], 2: fwd}
    pruned = {k: fwd.end_walk(k) for k in (1, 2)}
    assert not any(pr.iter_var in ("b", "c") for pr, _sl in pruned[1].leaf)
    assert not any(pr.iter_var == "c" for pr, _sl in pruned[2].leaf)
    checks = {"plain": 0, "pruned": 0}

    def counting(j: Any, label: str) -> Any:
        ok = j._leaf_ok

        def leaf_ok(*a: Any) -> bool:
            checks[label] += 1
            return bool(ok(*a))

        j._leaf_ok = leaf_ok
        return j

    for k in (1, 2):
        counting(plain[k], "plain")
        counting(pruned[k], "pruned")
    got: dict[str, list[Any]] = {"plain": [], "pruned": []}
    wrap = m._join_fwd_ends

    def each(st: Any, e: Any, bound_t: Any, bound_w: Any, *rest: Any) -> Any:
        parts = st.parts
        P = [(p.recs, p.snaps, p.base) for p in parts]
        lo0 = m._lo(parts[0], bound_t, bound_w)
        for label, js in (("plain", plain), ("pruned", pruned)):
            for k in (1, 2):
                lg = parts[k].size - 1
                his = js[k].reach(P, lg)
                got[label] += [(k, list(p)) for p in js[k].paths(P, lo0, his[0], e, lg)]
        return wrap(st, e, bound_t, bound_w, *rest)

    m._join_fwd_ends = each
    sink = Collect()
    rt.push_to(_events(60), sink, chunk=1000)
    assert got["plain"] == got["pruned"] and len(got["plain"]) > 1000
    assert checks["pruned"] < checks["plain"] / 3, checks
