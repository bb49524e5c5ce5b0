"""Streaming output of the chain plan's general join (the forward walk, ``kleene.plans
.chain_fwd``; docs/engine.md, "Streaming output"): conditions between events the storage does
not decide, lists anywhere, SEQs with such conditions; ``*`` closures, two or more lists,
predecessor partitions sharing a type (the walk over position sequences); a NOT that is not
trailing, a ``*`` last state, a ``*`` first state. ``push_to``'s pieces, concatenated,
are ``push``'s matches and the oracle's, in order, over split pushes and snapshots; caps and
counters as for ``push``; blocks hold no match before it is written."""

from __future__ import annotations

import random
import warnings
from typing import Any

import pytest

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch, Match
from kleene.plans import chain, chain_fwd
from kleene.plans.chain_fwd import FwdBlock, FwdJoin
from kleene.plans.registry import start
from kleene.testing.oracle import OracleLimitError
from kleene.testing.oracle import evaluate as oracle

from .sinks import Collect


def _key(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [(m.query, m.bindings, m.start, m.end, m.values) for m in ms]


def _case(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    """A random query of the general join's fragment: 2-4 variables, at most one Kleene list
    anywhere, conditions between events (singles, list elements, aggregates, pairs)."""
    n = rng.choice((2, 3, 3, 4))
    kk = rng.randrange(n) if rng.random() < 0.7 else -1
    alphabet = rng.choice(("AB", "ABC", "S", "ABS"))
    types = [rng.choice(alphabet) for _ in range(n)]
    names = [f"v{i}" for i in range(n)]
    items = [f"{t}+ {v}[]" if i == kk else f"{t} {v}"
             for i, (t, v) in enumerate(zip(types, names, strict=True))]
    conds: list[str] = []
    singles = [v for i, v in enumerate(names) if i != kk]
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        op = rng.choice((">", ">=", "<", "!=", "="))
        if kk >= 0 and r < 0.35:
            other = rng.choice(singles) if singles else None
            if other is not None:
                conds.append(f"{names[kk]}[i].x {op} {other}.x")
        elif kk >= 0 and r < 0.45:
            conds.append(f"{names[kk]}[i].x >= {names[kk]}[i-1].x")
        elif kk >= 0 and r < 0.55:
            conds.append(f"count({names[kk]}) {rng.choice(('<=', '>='))} {rng.randint(1, 3)}")
        elif len(singles) >= 2:
            a, b = rng.sample(singles, 2)
            conds.append(f"{a}.x {op} {b}.x")
    if rng.random() < 0.2:
        conds.append("[k]")
    q = _seq_query(rng, items, conds, (2, 8), (3, 9), 0.5, 0.7)
    if rng.random() < 0.3:
        rets = [f"{names[0]}.x AS x0" if kk != 0 else f"count({names[0]}) AS x0"]
        if kk >= 0:
            rets.append(f"sum({names[kk]}.x) AS s")
        q += " RETURN " + ", ".join(rets)
    return q, _records(rng, alphabet, 5, 12 if kk >= 0 else 22)


def _seq_query(rng: random.Random, items: list[str], conds: list[str], secs: tuple[int, int],
               events: tuple[int, int], p_secs: float, p_events: float = 1.0) -> str:
    """The random cases' query: ``SEQ(items)``, the conditions, PARTITION BY k (30 %), and
    a window of ``secs`` seconds (``p_secs``) or ``events`` events (up to ``p_events``;
    else none)."""
    q = "PATTERN SEQ(" + ", ".join(items) + ")"
    if conds:
        q += " WHERE " + " AND ".join(conds)
    if rng.random() < 0.3:
        q += " PARTITION BY k"
    w = rng.random()
    if w < p_secs:
        q += f" WITHIN {rng.randint(*secs)} seconds"
    elif w < p_events:
        q += f" WITHIN {rng.randint(*events)} EVENTS"
    return q


def _records(rng: random.Random, types: Any, lo: int, hi: int) -> list[dict[str, object]]:
    """``lo`` to ``hi`` random events of the random cases: types from ``types``, times 0-2
    apart (ties too), ``x`` in 0-3, key ``u`` or ``v``, ids text or numbers."""
    ids: list[Any] = [f"e{i}" for i in range(40)] if rng.random() < 0.5 else list(range(40))
    recs: list[dict[str, object]] = []
    ts = 0
    for i in range(rng.randint(lo, hi)):
        ts += rng.choice((0, 1, 1, 2))
        recs.append({"id": ids[i], "type": rng.choice(types), "ts": ts,
                     "x": rng.randint(0, 3), "k": rng.choice("uv")})
    return recs


def _split(rt: Any, recs: list[dict[str, object]], cuts: list[int], sink: Collect | None,
           chunk: int, snap_at: int | None = None) -> tuple[Any, list[Match]]:
    """Push ``recs`` in pieces (to ``sink`` with ``push_to`` when given), restoring from a
    snapshot into a new runtime after piece ``snap_at``; returns the last runtime and
    ``push``'s matches."""
    got: list[Match] = []
    bounds = list(zip([0, *cuts], [*cuts, len(recs)], strict=True))
    for n, (i, j) in enumerate(bounds):
        if j > i:
            batch = EventBatch.from_records(recs[i:j])
            if sink is not None:
                rt.push_to(batch, sink, chunk=chunk)
            else:
                got += rt.push(batch)
        if n == snap_at:
            blob = rt.snapshot()
            rt = start(rt.compiled, plan="chain")
            rt.restore(blob)
    if sink is not None:
        rt.close_to(sink, chunk=chunk)
    else:
        got += rt.close()
    return rt, got


def _check_cases(make: Any, rng: random.Random, n: int,
                 look: Any = None) -> tuple[int, int, int]:
    """The random cases of the walk tests: ``n`` queries of ``make(rng)`` (query text,
    records), each checked alike -- push_to's pieces over random split pushes, a snapshot
    between two of them and a random chunk size of 1-30 are the oracle's matches in its
    order, and push's. ``look(q, rt)`` sees each runtime first (to count shapes, or spy).
    Returns the matches, those written as columns, and the cases the brute-force oracle
    gave up on (skipped)."""
    matches = columns = big = 0
    for _ in range(n):
        q, recs = make(rng)
        aq = analyze(q)
        try:
            want = oracle(aq, EventBatch.from_records(recs))
        except OracleLimitError:  # a brute-force reference: too many partial matches
            big += 1
            continue
        cuts = sorted(rng.sample(range(1, len(recs)), rng.randint(0, 3)))
        snap_at = rng.randrange(len(cuts) + 1) if rng.random() < 0.5 else None
        chunk = rng.randint(1, 30)
        rt = start(aq, plan="chain")
        if look is not None:
            look(q, rt)
        sink = Collect()
        last, _ = _split(rt, recs, cuts, sink, chunk, snap_at)
        assert _key(sink.matches) == _key(want), f"{q} over {recs}, cuts {cuts}"
        assert last.counters.matches == len(want) or snap_at is not None
        assert all(len(p) <= chunk for p in sink.pieces)
        _, got = _split(start(aq, plan="chain"), recs, cuts, None, chunk, snap_at)
        assert _key(got) == _key(want), q
        matches += len(want)
        columns += sink.column_matches
    return matches, columns, big


@pytest.mark.parametrize("block_min", [64, 1])
def test_forward_walk_equals_the_oracle_and_push_in_order(block_min: int,
                                                          monkeypatch: Any) -> None:
    """Random general-join queries, split pushes, a snapshot between two of them, chunks of
    1-30: push_to's pieces are the oracle's matches in its order, and push's; with
    ``BLOCK_MIN`` 1 every last event's matches go through a block."""
    monkeypatch.setattr(chain, "BLOCK_MIN", block_min)
    rng = random.Random(2613 + block_min)
    walked = 0

    def look(q: str, rt: Any) -> None:
        nonlocal walked
        walked += rt.matcher.fwd is not None

    matches, columns, big = _check_cases(_case, rng, 220, look)
    assert walked > 150 and matches > 2000 and big == 0
    assert columns > (matches // 3 if block_min == 1 else 200)  # (RETURN: Match lists)


SHAPES = {
    "plus": "PATTERN SEQ(S a, S+ b[], S c) WHERE b[i].x > a.x AND c.x < a.x WITHIN 16 seconds",
    "star": "PATTERN SEQ(S a, S* b[], S c) WHERE b[i].x > a.x AND c.x < a.x WITHIN 16 seconds",
    "two_lists": ("PATTERN SEQ(S a, S+ b[], S+ c[], S d) WHERE b[i].x > a.x AND c[i].x <= a.x"
                  " AND d.x < a.x WITHIN 12 seconds"),
}
SHAPES["plus_return"] = SHAPES["plus"] + " RETURN a.x AS x0, count(b) AS nb"
SHAPES["not"] = ("PATTERN SEQ(S a, S+ b[], NOT S n, S c) WHERE n.x = 9 AND b[i].x > a.x AND "
                 "c.x < a.x WITHIN 16 seconds")
SHAPES["star_last"] = ("PATTERN SEQ(S a, S+ b[], S* c[]) WHERE b[i].x > a.x AND c[i].x < a.x"
                       " WITHIN 10 seconds")
SHAPES["star_first"] = ("PATTERN SEQ(S* a[], S b, S c) WHERE a[i].x > b.x AND c.x <= b.x"
                        " WITHIN 14 seconds")
"""The explosion, and the walk's wider shapes over it (a ``*`` closure; two lists of one
type: one event in both partitions; a NOT inside, tested on each match the walk makes; a
``*`` last state: matches end in ``b`` or ``c``, an event in both: one merged block; a
``*`` first state: matches start in ``a`` or, the list empty, in ``b``);
RETURN: candidates, not direct entries."""


def _explosion(n: int, seed: int = 5, shape: str = "plus") -> tuple[str, EventBatch]:
    rng = random.Random(seed)
    recs = [{"id": i, "type": "S", "ts": i, "x": rng.randint(0, 9)} for i in range(n)]
    return SHAPES[shape], EventBatch.from_records(recs)


@pytest.mark.parametrize("shape", ["plus", "star", "two_lists", "not", "star_first",
                                   "star_last"])
def test_a_call_holds_blocks_and_pieces_are_bounded(shape: str) -> None:
    """17-45k matches in one call: the runtime holds at most one entry per event before it
    writes, every piece holds at most ``chunk`` matches, almost all of them as columns, and
    they are the NFA's in order (a ``*`` closure and two lists: candidates, not direct
    entries, and still column blocks)."""
    q, events = _explosion(120, shape=shape)
    aq = analyze(q)
    nfa = start(aq, plan="nfa", max_matches_per_call=None)
    want = nfa.push(events) + nfa.close()
    rt = start(aq, plan="chain", max_matches_per_call=None)
    assert rt.matcher.fwd is not None
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
    assert max(map(len, sink.pieces)) <= 500 and sink.column_matches > 0.9 * n
    assert _key(sink.matches) == _key(want)


def _outcome(rt: Any, events: EventBatch, stream: bool) -> tuple[Any, ...]:
    sink = Collect()
    got: list[Match] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for i in range(0, len(events), 11):
                part = events.slice(i, 11)
                if stream:
                    rt.push_to(part, sink, chunk=64)
                else:
                    got += rt.push(part)
            if stream:
                rt.close_to(sink, chunk=64)
            else:
                got += rt.close()
    except CapacityError as exc:
        return ("error", str(exc), exc.cap)
    ms = sink.matches if stream else got
    c = rt.counters
    return (_key(ms), c.matches, c.truncated_matches, c.truncated_runs, c.truncated_exact)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("on_cap", ["error", "truncate"])
@pytest.mark.parametrize("per_event,per_call", [
    (None, None), (150, None), (None, 2000), (300, 1500), (5000, 50_000)])
def test_caps_mean_what_they_mean_for_push(on_cap: str, per_event: int | None,
                                           per_call: int | None, shape: str) -> None:
    """push_to under max_matches_per_event / max_matches_per_call, error and truncate: the
    same matches, errors and counters as push (the walk counts a node's matches exactly
    before any is written; past the room the lazy join stops at the cap as for push)."""
    q, events = _explosion(50, seed=11, shape=shape)
    assert start(analyze(q), plan="chain").matcher.fwd is not None
    aq = analyze(q)
    opts = {"max_matches_per_event": per_event, "max_matches_per_call": per_call,
            "on_cap": on_cap}
    plain = _outcome(start(aq, plan="chain", **opts), events, stream=False)
    streamed = _outcome(start(aq, plan="chain", **opts), events, stream=True)
    assert streamed == plain
    if per_event is None and per_call is None:
        assert plain[1] > 5_000


def test_shapes_outside_the_walk_keep_their_path() -> None:
    """A trailing NOT, PICK / EMIT RECENT: no forward walk (their output is built as for
    push and written in pieces). A NOT that is not trailing, a ``*`` last state, a ``*``
    first state (with a ``*`` second or a ``*`` last too: tests/runtime/
    test_chain_fwd_starts.py), two Kleene states, ``*`` closures, a Kleene last state,
    predecessor partitions sharing a type: walked."""
    for q in ("PATTERN SEQ(A a, B+ b[], C c, NOT D n) WHERE b[i].x > a.x WITHIN 5 seconds",
              "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > a.x EMIT RECENT"):
        assert start(analyze(q), plan="chain").matcher.fwd is None, q
    for q, shared in (("PATTERN SEQ(A a, NOT C n, B+ b[], C c) WHERE b[i].x > a.x", False),
                      ("PATTERN SEQ(NOT D n, A a, B b, C c) WITHIN 4 seconds", False),
                      ("PATTERN SEQ(A a, B+ b[], C* c[]) WHERE b[i].x > a.x", False),
                      ("PATTERN SEQ(A a, B b, C+ c[], D d) WHERE c[i].x > a.x", False),
                      ("PATTERN SEQ(A a, B+ b[], C+ c[]) WHERE b[i].x > a.x", False),
                      ("PATTERN SEQ(A a, B* b[], C c)", False),
                      ("PATTERN SEQ(A a, B* b[], B c) WHERE b[i].x > a.x", False),
                      ("PATTERN SEQ(A a, B+ b[], C* c[], D d)", False),
                      ("PATTERN SEQ(A a, B b, B+ c[], C d) WHERE c[i].x > a.x", True),
                      ("PATTERN SEQ(A a, B* b[], B* c[], D d) WHERE b[i].x > a.x", True),
                      ("PATTERN SEQ(A* a[], B b) WHERE a[i].x > b.x", False),
                      ("PATTERN SEQ(S* a[], S b) WHERE a[i].x > b.x", False),
                      ("PATTERN SEQ(A* a[], B b, C c) WHERE b.x > c.x", False),
                      ("PATTERN SEQ(S* a[], S+ b[], S c) WHERE a[i].x > c.x", True),
                      ("PATTERN SEQ(A* a[], B b, C* c[]) WHERE a[i].x > b.x", False),
                      ("PATTERN SEQ(A* a[], B* b[], C c) WHERE a[i].x > c.x", False),
                      ("PATTERN SEQ(S* a[], S* b[], S c) WHERE a[i].x > c.x", True),
                      ("PATTERN SEQ(S* a[], S b, S* c[]) WHERE a[i].x > b.x", True)):
        fwd = start(analyze(q), plan="chain").matcher.fwd
        assert fwd is not None and fwd.shared == shared, q


def test_return_values_are_computed_as_each_match_is_written() -> None:
    """RETURN over a call with ~12k matches through push_to: lists of ``Match`` (the values
    do not fit columns) of at most ``chunk``, the blocks built lazily, equal to push's and
    the NFA's values in order."""
    q, events = _explosion(50, seed=11)
    q += " RETURN a.x AS x0, count(b) AS nb, max(b.x) AS top"
    aq = analyze(q)
    nfa = start(aq, plan="nfa", max_matches_per_call=None)
    want = nfa.push(events) + nfa.close()
    rt = start(aq, plan="chain", max_matches_per_call=None)
    assert rt.matcher.fwd is not None
    held: list[int] = []
    release = rt._release_blocks  # type: ignore[attr-defined]

    def spy(ready: list[Any]) -> Any:
        held.append(sum(isinstance(h[1], FwdBlock) for h in ready))
        return release(ready)

    rt._release_blocks = spy  # type: ignore[attr-defined]
    sink = Collect()
    n = rt.push_to(events, sink, chunk=300) + rt.close_to(sink, chunk=300)
    assert n == len(want) > 10_000 and sum(held) > 10
    assert all(isinstance(p, list) and len(p) <= 300 for p in sink.pieces)
    assert _key(sink.matches) == _key(want)
    plain = start(aq, plan="chain", max_matches_per_call=None)
    assert _key(plain.push(events) + plain.close()) == _key(want)


def test_traced_memory_of_a_streamed_call_is_far_below_its_matches() -> None:
    """~44k matches in one push_to call: the traced peak is a small fraction of what their
    Match objects take (about 400 B each, docs/engine.md "Bounded memory") -- the call holds
    blocks and one piece, not the matches."""
    import tracemalloc

    q, events = _explosion(120)
    aq = analyze(q)
    rt = start(aq, plan="chain", max_matches_per_call=None)
    n = 0

    def count(piece: Any) -> None:
        nonlocal n
        n += len(piece)

    tracemalloc.start()
    try:
        rt.push_to(events, count, chunk=500)
        rt.close_to(count, chunk=500)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n > 40_000
    assert peak < n * 400 / 10, (peak, n)


def _case_lists(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    """A random query of the walk's wider shapes: 3-5 variables, one or two Kleene lists
    inside (``+`` or ``*``, so a state may have several sources), conditions between events
    and list elements, aggregates."""
    n = rng.choice((3, 4, 4, 5))
    ks = sorted(rng.sample(range(1, n - 1), min(n - 2, rng.choice((1, 2, 2)))))
    if len(ks) == 1 and rng.random() < 0.3 and n >= 4:
        ks.append(ks[0] + 1 if ks[0] + 1 < n - 1 else ks[0] - 1)
        ks.sort()
    ends = [k for k in (0, n - 1) if rng.random() < 0.15]  # a Kleene first / last state
    types = list(rng.choice(("ABCDE", "ABCDE", "ABCAB", "ABACA")))[:n]
    if rng.random() < 0.35:  # a list of the type before it: one event in both partitions
        k = rng.choice(ks)
        if k >= 2 or (k == 1 and k + 1 < n and k + 1 not in ks):
            types[k] = types[k - 1] if k >= 2 else types[k + 1]
    names = [f"v{i}" for i in range(n)]
    items = []
    for i, (t, v) in enumerate(zip(types, names, strict=True)):
        if i in ends and len(ends) < 2:
            items.append(f"{t}+ {v}[]")
        elif i in ks:
            items.append(f"{t}{rng.choice('+**') if len(ks) > 1 else rng.choice('*+')} {v}[]")
        else:
            items.append(f"{t} {v}")
    ks += ends if len(ends) < 2 else []
    singles = [v for i, v in enumerate(names) if i not in ks]
    conds: list[str] = []
    for _ in range(rng.randint(0, 3)):
        r = rng.random()
        op = rng.choice((">", ">=", "<", "!=", "="))
        lk = names[rng.choice(ks)]
        if r < 0.4:
            conds.append(f"{lk}[i].x {op} {rng.choice(singles)}.x")
        elif r < 0.5:
            conds.append(f"{lk}[i].x >= {lk}[i-1].x")
        elif r < 0.6:
            conds.append(f"count({lk}) {rng.choice(('<=', '>='))} {rng.randint(0, 2)}")
        elif len(singles) >= 2:
            a, b = rng.sample(singles, 2)
            conds.append(f"{a}.x {op} {b}.x")
    q = _seq_query(rng, items, conds, (2, 8), (3, 9), 0.5, 0.7)
    if rng.random() < 0.25:
        q += f" RETURN {singles[0]}.x AS x0, count({names[ks[0]]}) AS nb"
    return q, _records(rng, types, 6, 17)


@pytest.mark.parametrize("block_min", [64, 1])
def test_star_closures_and_two_lists_equal_the_oracle_in_order(block_min: int,
                                                               monkeypatch: Any) -> None:
    """``*`` closures (a state with several sources) and two Kleene states: push_to's pieces
    over split pushes, a snapshot and chunks of 1-30 are the oracle's matches in its order,
    and push's; with ``BLOCK_MIN`` 1 every last event's matches go through a block."""
    monkeypatch.setattr(chain, "BLOCK_MIN", block_min)
    rng = random.Random(7717 + block_min)
    walked = stars = twos = shared = 0

    def look(q: str, rt: Any) -> None:
        nonlocal shared, stars, twos, walked
        fwd = rt.matcher.fwd
        if fwd is not None and not fwd.chain:
            walked += 1
            stars += "*" in q
            twos += len(fwd.lists) == 2
            shared += fwd.shared

    matches, columns, big = _check_cases(_case_lists, rng, 260, look)
    assert walked > 200 and stars > 60 and twos > 60 and shared > 40 and matches > 1000, (
        walked, stars, twos, shared, matches)
    assert big < 10
    assert columns > (matches // 3 if block_min == 1 else 50)


def _case_not(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    """A random query with a NOT that is not trailing: 2-4 variables (at most one Kleene
    list, ``+`` or ``*`` inside), the NOT before any but the end (leading: with a window),
    conditions on the negated event and between events, PARTITION BY and windows."""
    n = rng.choice((2, 3, 3, 4))
    kk = rng.randrange(1, n - 1) if n > 2 and rng.random() < 0.6 else -1
    alphabet = rng.choice(("ABC", "ABCD", "AB"))
    types = [rng.choice(alphabet) for _ in range(n)]
    names = [f"v{i}" for i in range(n)]
    items = [f"{t}{rng.choice('+*')} {v}[]" if i == kk else f"{t} {v}"
             for i, (t, v) in enumerate(zip(types, names, strict=True))]
    gap = rng.randrange(n)  # the NOT goes before item ``gap`` (0: leading)
    items.insert(gap, f"NOT {rng.choice(alphabet)} n")
    singles = [v for i, v in enumerate(names) if i != kk]
    conds: list[str] = []
    r = rng.random()
    if r < 0.4:
        conds.append(f"n.x {rng.choice(('>', '=', '<='))} {rng.choice(singles)}.x")
    elif r < 0.6:
        conds.append(f"n.x = {rng.randint(0, 3)}")
    if kk >= 0 and rng.random() < 0.5:
        conds.append(f"{names[kk]}[i].x {rng.choice(('>', '>=', '<'))} {singles[0]}.x")
    if len(singles) >= 2 and rng.random() < 0.4:
        a, b = rng.sample(singles, 2)
        conds.append(f"{a}.x {rng.choice(('>', '<=', '!='))} {b}.x")
    # (a leading NOT: always a time window, its lead-in)
    q = _seq_query(rng, items, conds, (2, 8), (3, 9), 1.0 if gap == 0 else 0.5, 0.75)
    if rng.random() < 0.25:
        q += f" RETURN {singles[0]}.x AS x0"
    return q, _records(rng, alphabet, 8, 14 if kk >= 0 else 24)


@pytest.mark.parametrize("block_min", [64, 1])
def test_a_not_inside_equals_the_oracle_in_order(block_min: int, monkeypatch: Any) -> None:
    """A NOT that is not trailing (checked against the history on each match the walk
    makes): push_to's pieces over split pushes, a snapshot and chunks of 1-30 are the
    oracle's matches in its order, and push's; with ``BLOCK_MIN`` 1 every last event's
    matches go through a block (which tests its copy of the history when written)."""
    monkeypatch.setattr(chain, "BLOCK_MIN", block_min)
    rng = random.Random(4409 + block_min)
    walked = 0
    rejected = [0]

    def spying(test: Any) -> Any:
        def spy(*a: Any) -> bool:
            ok = bool(test(*a))
            rejected[0] += not ok
            return ok
        return spy

    # (the subtrees the walk prunes by a NOT it decides early, test_chain_fwd_not.py: at
    # a step, or a NOT right after the first node by its first negating event)
    monkeypatch.setattr(FwdJoin, "_neg_pass", spying(FwdJoin._neg_pass))
    monkeypatch.setattr(chain_fwd._FirstNeg, "ok", spying(chain_fwd._FirstNeg.ok))

    def look(q: str, rt: Any) -> None:
        nonlocal walked
        fwd = rt.matcher.fwd
        if fwd is not None:
            walked += 1
            test = fwd.neg_ok

            def spy(st: Any, c: Any, test: Any = test) -> bool:
                ok = bool(test(st, c))
                rejected[0] += not ok
                return ok

            fwd.neg_ok = spy  # counts the matches the walk's NOT test rejects

    matches, columns, big = _check_cases(_case_not, rng, 240, look)
    assert walked > 200 and matches > 600 and rejected[0] > 300, (walked, matches, rejected)
    if block_min == 1:  # (the blocks of 64 or more: test_a_call_holds_blocks..., "not")
        assert columns > matches // 3, (columns, matches)


def _case_star_end(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    """A random query whose last one or two states are ``*`` lists (a match may end in the
    state before them): 2-4 variables, a ``+`` list inside sometimes, conditions between
    events, per list element, aggregates of the trailing lists."""
    n = rng.choice((2, 3, 3, 4))
    stars = 2 if n >= 3 and rng.random() < 0.25 else 1
    alphabet = rng.choice(("ABCD", "ABCD", "ABA", "S"))
    types = [rng.choice(alphabet) for _ in range(n)]
    names = [f"v{i}" for i in range(n)]
    plus = rng.randrange(1, n - stars) if n - stars > 1 and rng.random() < 0.4 else -1
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
    conds: list[str] = []
    for _ in range(rng.randint(0, 3)):
        r = rng.random()
        op = rng.choice((">", ">=", "<", "!="))
        lk = rng.choice(lists)
        if r < 0.45:
            conds.append(f"{lk}[i].x {op} {rng.choice(singles)}.x")
        elif r < 0.6:
            conds.append(f"count({lk}) {rng.choice(('<=', '>='))} {rng.randint(0, 2)}")
        elif len(singles) >= 2:
            a, b = rng.sample(singles, 2)
            conds.append(f"{a}.x {op} {b}.x")
    q = "PATTERN SEQ(" + ", ".join(items) + ")"
    if conds:
        q += " WHERE " + " AND ".join(conds)
    if rng.random() < 0.3:
        q += " PARTITION BY k"
    w = rng.random()
    if w < 0.5:
        q += f" WITHIN {rng.randint(2, 6)} seconds"
    else:
        q += f" WITHIN {rng.randint(3, 7)} EVENTS"
    if rng.random() < 0.25:
        q += f" RETURN {singles[0]}.x AS x0, count({lists[-1]}) AS nb"
    return q, _records(rng, alphabet, 6, 10 if alphabet == "S" else 16)


@pytest.mark.parametrize("block_min", [64, 1])
def test_a_star_last_state_equals_the_oracle_in_order(block_min: int,
                                                      monkeypatch: Any) -> None:
    """A ``*`` last state (matches end in it or, its list empty, in the state before): push_to's
    pieces over split pushes, a snapshot and chunks of 1-30 are the oracle's matches in its
    order, and push's; with ``BLOCK_MIN`` 1 every last event's matches go through a block
    (an event that ends matches in two states: one block merging them)."""
    monkeypatch.setattr(chain, "BLOCK_MIN", block_min)
    rng = random.Random(9151 + block_min)
    walked = early = 0

    def look(q: str, rt: Any) -> None:
        nonlocal early, walked
        if rt.matcher.fwd is not None:
            walked += 1
            early += bool(rt.matcher.fwd_ends)

    matches, columns, big = _check_cases(_case_star_end, rng, 240, look)
    assert walked > 200 and early == walked and matches > 1000 and big < 10, (
        walked, early, matches, big)
    if block_min == 1:
        assert columns > matches // 4, (columns, matches)  # (one type: merged blocks)


def _case_star_first(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    """A random query whose first state is a ``*`` list (a match starts in it or, the list
    empty, in the second state): 2-4 variables, a ``+`` list after the second sometimes or
    the second itself, a NOT inside sometimes, conditions between events, per list element,
    aggregates of the first list."""
    n = rng.choice((2, 3, 3, 4))
    alphabet = rng.choice(("ABCD", "ABCD", "ABA", "S"))
    types = [rng.choice(alphabet) for _ in range(n)]
    names = [f"v{i}" for i in range(n)]
    plus = rng.randrange(1, n - 1) if n > 2 and rng.random() < 0.4 else -1
    items = []
    for i, (t, v) in enumerate(zip(types, names, strict=True)):
        if i == 0:
            items.append(f"{t}* {v}[]")
        elif i == plus:
            items.append(f"{t}+ {v}[]")
        else:
            items.append(f"{t} {v}")
    if n >= 3 and rng.random() < 0.2:
        items.insert(2, f"NOT {rng.choice(alphabet)} nn")
    singles = [v for i, v in enumerate(names) if i and i != plus]
    lists = [names[i] for i in range(n) if i in (0, plus)]
    conds: list[str] = []
    for _ in range(rng.randint(0, 3)):
        r = rng.random()
        op = rng.choice((">", ">=", "<", "!="))
        lk = rng.choice(lists)
        if r < 0.45:
            conds.append(f"{lk}[i].x {op} {rng.choice(singles)}.x")
        elif r < 0.6:
            conds.append(f"count({names[0]}) {rng.choice(('<=', '>='))} {rng.randint(0, 2)}")
        elif len(singles) >= 2:
            a, b = rng.sample(singles, 2)
            conds.append(f"{a}.x {op} {b}.x")
    q = _seq_query(rng, items, conds, (2, 6), (3, 7), 0.5)
    if rng.random() < 0.25:
        q += f" RETURN {singles[-1]}.x AS x0, count({names[0]}) AS na"
    return q, _records(rng, alphabet, 6, 10 if alphabet == "S" else 16)


@pytest.mark.parametrize("block_min", [64, 1])
def test_a_star_first_state_equals_the_oracle_in_order(block_min: int,
                                                       monkeypatch: Any) -> None:
    """A ``*`` first state (matches start in it or, its list empty, in the second state; two
    streams of first nodes merged in the output order): push_to's pieces over split pushes,
    a snapshot and chunks of 1-30 are the oracle's matches in its order, and push's; with
    ``BLOCK_MIN`` 1 every last event's matches go through a block."""
    monkeypatch.setattr(chain, "BLOCK_MIN", block_min)
    rng = random.Random(4417 + block_min)
    walked = 0

    def look(q: str, rt: Any) -> None:
        nonlocal walked
        if rt.matcher.fwd is not None:
            walked += 1
            assert rt.matcher.fwd.alt is not None, q

    matches, columns, big = _check_cases(_case_star_first, rng, 240, look)
    assert walked > 200 and matches > 1000 and big < 10, (walked, matches, big)
    if block_min == 1:
        assert columns > matches // 4, (columns, matches)
