"""The chain plan's forward walk (``kleene.plans.chain_fwd``; docs/engine.md, "Streaming
output") where a match may start in several states or start and end in several: two or more
leading ``*`` states (``SEQ(A* a[], B* b[], C c)``: a match starts in ``a``, or, ``a``
empty, in ``b``, or, both empty, in ``c``; ``FwdJoin.from_second`` of a join whose second
state is a ``*`` has its own ``alt``), and a ``*`` first state with a ``*`` last state
(``SEQ(A* a[], B b, C* c[])``: ``FwdJoin.ending_at`` cuts the ``alt`` too). ``push_to``'s
pieces, concatenated, are ``push``'s matches and the oracle's, in order, over split pushes and
snapshots; caps and counters as for ``push``; the call holds blocks, not matches."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kleene.api import analyze
from kleene.events import EventBatch
from kleene.plans import chain
from kleene.plans.chain_fwd import FwdBlock
from kleene.plans.registry import start
from kleene.testing.oracle import evaluate as oracle

from .sinks import Collect
from .test_chain_fwd import _check_cases, _key, _outcome, _records, _seq_query


def _case(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    """A random query with one to three leading ``*`` states, then one or two states (a
    single or a ``+`` list), then up to two trailing ``*`` states (at least one after a
    single leading ``*``); one type or several; a NOT between the two middle states
    sometimes; conditions between singles, per list element, over a list's previous element,
    aggregates; RETURN sometimes."""
    lead = rng.choice((1, 2, 2, 3))
    core = rng.choice((1, 1, 2))
    trail = rng.choice((1, 1, 2)) if lead == 1 else rng.choice((0, 0, 1))
    n = lead + core + trail
    alphabet = rng.choice(("ABCD", "ABCD", "ABA", "AB", "S"))
    types = [rng.choice(alphabet) for _ in range(n)]
    names = [f"v{i}" for i in range(n)]
    kinds = (["*"] * lead + [rng.choice(("", "", "+")) for _ in range(core)]
             + ["*"] * trail)
    if core == 2 and trail == 0 and kinds[-1] == "+" and rng.random() < 0.5:
        kinds[-2] = ""
    items = [f"{t}{k} {v}[]" if k else f"{t} {v}"
             for t, k, v in zip(types, kinds, names, strict=True)]
    if core == 2 and rng.random() < 0.3:
        items.insert(lead + 1, f"NOT {rng.choice(alphabet)} nn")
    singles = [v for v, k in zip(names, kinds, strict=True) if not k]
    lists = [v for v, k in zip(names, kinds, strict=True) if k]
    conds: list[str] = []
    for _ in range(rng.randint(0, 3)):
        r = rng.random()
        op = rng.choice((">", ">=", "<", "!="))
        lk = rng.choice(lists)
        if r < 0.5 and singles:
            conds.append(f"{lk}[i].x {op} {rng.choice(singles)}.x")
        elif r < 0.6:
            conds.append(f"{lk}[i].x >= {lk}[i-1].x")
        elif r < 0.75:
            conds.append(f"count({lk}) {rng.choice(('<=', '>='))} {rng.randint(0, 2)}")
        elif len(singles) >= 2:
            a, b = rng.sample(singles, 2)
            conds.append(f"{a}.x {op} {b}.x")
    if any("nn" in it for it in items) and rng.random() < 0.7:
        conds.append(f"nn.x = {rng.randint(0, 3)}")
    q = _seq_query(rng, items, conds, (2, 5), (3, 6), 0.5)
    if rng.random() < 0.25:
        first = f"{singles[0]}.x" if singles else f"count({lists[-1]})"
        q += f" RETURN {first} AS x0, count({lists[0]}) AS na"
    return q, _records(rng, alphabet, 6, 9 if alphabet == "S" else 14)


@pytest.mark.parametrize("block_min", [64, 1])
def test_several_start_states_equal_the_oracle_and_push_in_order(block_min: int,
                                                                 monkeypatch: Any) -> None:
    """Leading ``*`` states, with or without trailing ones: push_to's pieces over split
    pushes, a snapshot and chunks of 1-30 are the oracle's matches in its order, and push's;
    with ``BLOCK_MIN`` 1 every last event's matches go through a block. Every query is
    walked (a NOT only inside)."""
    monkeypatch.setattr(chain, "BLOCK_MIN", block_min)
    rng = random.Random(3313 + block_min)
    walked = deep = both = nots = 0

    def look(q: str, rt: Any) -> None:
        nonlocal both, deep, nots, walked
        fwd = rt.matcher.fwd
        assert fwd is not None and fwd.alt is not None, q
        walked += 1
        deep += fwd.nstart >= 3
        both += bool(rt.matcher.fwd_ends)
        nots += fwd.neg_ok is not None

    matches, columns, big = _check_cases(_case, rng, 260, look)
    assert walked > 230 and deep > 80 and both > 80 and nots > 20 and big < 15, (
        walked, deep, both, nots, big)
    assert matches > 3000, matches
    if block_min == 1:
        assert columns > matches // 4, (columns, matches)


def test_a_kleene_state_after_a_leading_star_walks_its_lists() -> None:
    """``SEQ(A* a[], B+ b[])``: the matches with ``a`` empty start and end in ``b`` (the walk
    of one Kleene state alone: ``b`` of one event or back through the ones between), and with
    ``c*`` after it they may end there too."""
    recs = [{"id": f"e{i}", "type": t, "ts": i, "x": i % 3} for i, t in enumerate("ABABBAB")]
    for q in ("PATTERN SEQ(A* a[], B+ b[])", "PATTERN SEQ(A* a[], B* b[], B+ c[])",
              "PATTERN SEQ(A* a[], B+ b[], A* c[]) WHERE count(c) <= 1"):
        aq = analyze(q)
        want = oracle(aq, EventBatch.from_records(recs))
        for block_min in (64, 1):
            chain.BLOCK_MIN, keep = block_min, chain.BLOCK_MIN
            try:
                rt = start(aq, plan="chain")
                assert rt.matcher.fwd is not None, q
                sink = Collect()
                rt.push_to(EventBatch.from_records(recs), sink, chunk=7)
                rt.close_to(sink, chunk=7)
            finally:
                chain.BLOCK_MIN = keep
            assert _key(sink.matches) == _key(want), q
        assert len(want) > 20, q


SHAPES = {
    "two_stars": ("PATTERN SEQ(S* a[], S* b[], S c) WHERE a[i].x > c.x AND b[i].x < c.x"
                  " WITHIN 10 seconds"),
    "star_both": ("PATTERN SEQ(S* a[], S b, S* c[]) WHERE a[i].x > b.x AND c[i].x < b.x"
                  " WITHIN 9 seconds"),
}
SHAPES["star_both_return"] = SHAPES["star_both"] + " RETURN b.x AS x0, count(a) AS na"
"""The explosion through the two shapes (one type: an event in every state): two leading
``*`` states (a match starts in ``a``, ``b`` or ``c``), a ``*`` first and a ``*`` last state
(it starts in ``a`` or ``b`` and ends in ``b`` or ``c``; an event ending matches in both: one
merged block); RETURN: blocks that build their Matches as they are written."""


def _explosion(n: int, shape: str, seed: int = 5) -> tuple[str, EventBatch]:
    rng = random.Random(seed)
    recs = [{"id": i, "type": "S", "ts": i, "x": rng.randint(0, 9)} for i in range(n)]
    return SHAPES[shape], EventBatch.from_records(recs)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_call_holds_blocks_and_pieces_are_bounded(shape: str) -> None:
    """20-40k matches in one call: the runtime holds at most one entry per event before it
    writes, many of them blocks, every piece holds at most ``chunk`` matches (almost all as
    columns without RETURN), and they are the NFA's in order."""
    q, events = _explosion(120, shape)
    aq = analyze(q)
    nfa = start(aq, plan="nfa", max_matches_per_call=None)
    want = nfa.push(events) + nfa.close()
    rt = start(aq, plan="chain", max_matches_per_call=None)
    assert rt.matcher.fwd is not None and rt.matcher.fwd.alt is not None
    held: list[int] = []
    release = rt._release_blocks  # type: ignore[attr-defined]

    def spy(ready: list[Any]) -> Any:
        held.append(len(ready))
        assert sum(isinstance(h[1], FwdBlock) for h in ready) > 10
        return release(ready)

    rt._release_blocks = spy  # type: ignore[attr-defined]
    sink = Collect()
    n = rt.push_to(events, sink, chunk=500) + rt.close_to(sink, chunk=500)
    assert n == len(want) > 15_000
    assert held and sum(held) <= len(events) * chain.BLOCK_MIN
    assert max(map(len, sink.pieces)) <= 500
    if "return" in shape:
        assert all(isinstance(p, list) for p in sink.pieces)
    else:
        assert sink.column_matches > 0.9 * n
    assert _key(sink.matches) == _key(want)


@pytest.mark.parametrize("shape", ["two_stars", "star_both"])
def test_traced_memory_of_a_streamed_call_is_far_below_push(shape: str) -> None:
    """9-17k matches in one call: the traced peak of push_to into a counting sink is a
    small fraction of push's (which holds every match of the call) -- the call holds blocks
    and one piece, not the matches."""
    import tracemalloc

    q, events = _explosion(60, shape)
    aq = analyze(q)
    peaks = []
    for stream in (True, False):
        rt = start(aq, plan="chain", max_matches_per_call=None)
        n = 0

        def count(piece: Any) -> None:
            nonlocal n
            n += len(piece)

        tracemalloc.start()
        try:
            if stream:
                rt.push_to(events, count, chunk=500)
                rt.close_to(count, chunk=500)
            else:
                got = rt.push(events) + rt.close()
                n = len(got)
                del got
            _cur, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert n > 8_000
        peaks.append(peak)
    assert peaks[0] < peaks[1] / 10, peaks


@pytest.mark.parametrize("shape", ["two_stars", "star_both"])
@pytest.mark.parametrize("on_cap", ["error", "truncate"])
@pytest.mark.parametrize("per_event,per_call", [
    (None, None), (100, None), (None, 1500), (200, 1000), (5000, 50_000)])
def test_caps_mean_what_they_mean_for_push(on_cap: str, per_event: int | None,
                                           per_call: int | None, shape: str) -> None:
    """push_to under max_matches_per_event / max_matches_per_call, error and truncate: the
    same matches, errors and counters as push (the walk counts an event's matches exactly,
    over all its start states and end states, before any is written)."""
    q, events = _explosion(40, shape, seed=11)
    aq = analyze(q)
    assert start(aq, plan="chain").matcher.fwd is not None
    opts = {"max_matches_per_event": per_event, "max_matches_per_call": per_call,
            "on_cap": on_cap}
    plain = _outcome(start(aq, plan="chain", **opts), events, stream=False)
    streamed = _outcome(start(aq, plan="chain", **opts), events, stream=True)
    assert streamed == plain
    if per_event is None and per_call is None:
        assert plain[1] > 3_000
        nfa = start(aq, plan="nfa", max_matches_per_call=None)
        assert plain[0] == _key(nfa.push(events) + nfa.close())
    elif on_cap == "truncate" and per_call != 50_000:
        assert plain[2] > 0  # (the cap did cut something)
