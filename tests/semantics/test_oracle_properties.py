"""Metamorphic properties of the oracle itself: each strategy and policy only removes matches,
and removes exactly what docs/semantics.md §8-§9 says (checked on random queries and streams)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, note, settings
from hypothesis import strategies as st

from kleene.api import analyze
from kleene.events import EventBatch, Match
from kleene.testing.oracle import evaluate
from kleene.testing.strategies import describe, queries, streams

SETTINGS = settings(max_examples=60, derandomize=True, deadline=None, database=None)


def _run(query: str, stream: EventBatch) -> list[Match]:
    note(f"query:  {query}")
    note(f"stream: {describe(stream)}")
    return evaluate(analyze(query), stream)


def _ids(m: Match) -> tuple[Any, ...]:
    return tuple(sorted((k, v) for k, v in m.bindings.items()))


def _events(m: Match) -> set[Any]:
    return {x for v in m.bindings.values() for x in (v if isinstance(v, tuple) else (v,))}


@SETTINGS
@given(queries(feature="strategies"), streams())
def test_every_strategy_selects_among_skip_till_any_matches(query: str,
                                                            stream: EventBatch) -> None:
    head, _, tail = query.partition(" USING ")
    rest = tail.split(" ", 1)[1] if " " in tail else ""
    any_query = f"{head} {rest}".strip()
    selected = [_ids(m) for m in _run(query, stream)]
    every = [_ids(m) for m in _run(any_query, stream)]
    assert set(selected) <= set(every)
    assert selected == [m for m in every if m in set(selected)]  # same relative order


@SETTINGS
@given(queries(feature="kleene"), streams())
def test_emit_recent_keeps_one_match_per_completing_event(query: str,
                                                          stream: EventBatch) -> None:
    every = _run(query, stream)
    recent = _run(f"{query} EMIT RECENT", stream)
    assert {_ids(m) for m in recent} <= {_ids(m) for m in every}
    assert len({m.end for m in recent}) <= len(recent)
    order = {x: i for i, x in enumerate(stream.ids.to_pylist())}

    def last(m: Match) -> int:
        return max(order[x] for x in _events(m))

    assert sorted({last(m) for m in recent}) == sorted({last(m) for m in every})
    assert len({last(m) for m in recent}) == len(recent)


@SETTINGS
@given(queries(feature="sequence"), streams())
def test_consume_all_emits_disjoint_matches(query: str, stream: EventBatch) -> None:
    every = [_ids(m) for m in _run(query, stream)]
    kept = _run(f"{query} CONSUME ALL", stream)
    seen: set[Any] = set()
    for m in kept:
        assert not (_events(m) & seen)
        seen |= _events(m)
    assert [_ids(m) for m in kept] == [m for m in every if m in {_ids(k) for k in kept}]
    assert bool(kept) == bool(every)


@SETTINGS
@given(queries(feature="kleene"), streams(), st.sampled_from(["FIRST", "LAST"]))
def test_pick_keeps_one_per_group(query: str, stream: EventBatch, mode: str) -> None:
    var = analyze(query).positive_vars()[0]
    every = _run(query, stream)
    picked = _run(f"{query} PICK {mode} {var}", stream)
    assert {_ids(m) for m in picked} <= {_ids(m) for m in every}
    groups = [tuple(sorted((k, v) for k, v in m.bindings.items() if k != var)) for m in picked]
    assert len(groups) == len(set(groups))
    assert len(groups) == len({tuple(sorted((k, v) for k, v in m.bindings.items() if k != var))
                               for m in every})


# --- skip-till-next-match: the declarative rule (§8) equals an operational NFA^b simulation ---

Component = tuple[str, int, "int | None", bool]  # type, min, max, is_list


@st.composite
def _stnm_case(draw: st.DrawFn) -> tuple[str, list[Component], EventBatch]:
    comps: list[Component] = []
    texts = []
    for i in range(draw(st.integers(1, 3))):
        t = draw(st.sampled_from("AB"))
        kind = draw(st.sampled_from(["one", "+", "*", "{1,2}", "{2}"]))
        if kind == "one":
            comps.append((t, 1, 1, False))
            texts.append(f"{t} v{i}")
        else:
            lo, hi = {"+": (1, None), "*": (0, None), "{1,2}": (1, 2), "{2}": (2, 2)}[kind]
            comps.append((t, lo, hi, True))
            texts.append(f"{t}{kind} v{i}[]")
    if all(c[1] == 0 for c in comps):
        comps.append(("C", 1, 1, False))
        texts.append(f"C v{len(texts)}")
    query = f"PATTERN SEQ({', '.join(texts)}) USING skip-till-next-match"
    types = draw(st.lists(st.sampled_from("AABBC"), min_size=1, max_size=7))
    stream = EventBatch.from_records([{"type": t, "ts": i} for i, t in enumerate(types)])
    return query, comps, stream


def _nfa_b(comps: list[Component], types: list[str]) -> set[tuple[Any, ...]]:
    """Runs that must take every event they can (extend the Kleene or start a later component),
    branching when both are possible; a match is emitted whenever a run is complete."""
    m = len(comps)

    def starts(j: int, e: int) -> list[int]:
        """Components k > j that event e can start (through skippable components)."""
        out = []
        for k in range(j + 1, m):
            if comps[k][0] == types[e]:
                out.append(k)
            if comps[k][1] > 0:
                break
        return out

    def complete(j: int, binds: list[list[int]]) -> bool:
        return len(binds[j]) >= comps[j][1] and all(c[1] == 0 for c in comps[j + 1:])

    found: set[tuple[Any, ...]] = set()
    runs: list[tuple[int, list[list[int]]]] = []
    for e in range(len(types)):
        nxt: list[tuple[int, list[list[int]]]] = []
        for j, binds in runs:
            moved: list[tuple[int, list[list[int]]]] = []
            t, lo, hi, _ = comps[j]
            if t == types[e] and (hi is None or len(binds[j]) < hi) and comps[j][3]:
                moved.append((j, [*binds[:j], [*binds[j], e], *binds[j + 1:]]))
            if len(binds[j]) >= lo:
                for k in starts(j, e):
                    moved.append((k, [*binds[:k], [e], *binds[k + 1:]]))
            nxt.extend(moved or [(j, binds)])
        for k in starts(-1, e):
            nxt.append((k, [[] for _ in range(k)] + [[e]] + [[] for _ in range(k + 1, m)]))
        runs = nxt
        for j, binds in runs:
            if binds[j] and binds[j][-1] == e and complete(j, binds):
                found.add(tuple(tuple(b) if c[3] else b[0] for b, c in zip(binds, comps,
                                                                             strict=True)))
    return found


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(_stnm_case())
def test_skip_till_next_match_equals_an_nfa_b_simulation(
        case: tuple[str, list[Component], EventBatch]) -> None:
    query, comps, stream = case
    ids = stream.ids.to_pylist()
    pos = {x: i for i, x in enumerate(ids)}
    got = set()
    for m in _run(query, stream):
        got.add(tuple(tuple(pos[x] for x in v) if isinstance(v, tuple) else pos[v]
                      for v in m.bindings.values()))
    want = _nfa_b(comps, stream.types.tolist())
    assert got == want


# --- SEQ and AND of single events: the oracle equals a naive itertools enumeration ---------


@st.composite
def _plain_case(draw: st.DrawFn) -> tuple[str, str, list[str], int | None, EventBatch]:
    op = draw(st.sampled_from(["SEQ", "AND"]))
    types = draw(st.lists(st.sampled_from("AB"), min_size=1, max_size=3))
    window = draw(st.one_of(st.none(), st.integers(0, 3)))
    items = ", ".join(f"{t} v{i}" for i, t in enumerate(types))
    query = f"PATTERN {op}({items})" + (f" WITHIN {window} EVENTS" if window else "")
    kinds = draw(st.lists(st.sampled_from("AABC"), min_size=1, max_size=7))
    stream = EventBatch.from_records([{"type": t, "ts": draw(st.integers(1, 3))}
                                      for t in kinds])
    return query, op, types, window or None, stream


@settings(max_examples=200, derandomize=True, deadline=None, database=None)
@given(_plain_case())
def test_seq_and_and_equal_a_naive_enumeration(
        case: tuple[str, str, list[str], int | None, EventBatch]) -> None:
    query, op, types, window, stream = case
    kinds = stream.types.tolist()
    ids = stream.ids.to_pylist()
    picks = (itertools.combinations if op == "SEQ" else itertools.permutations)(
        range(len(kinds)), len(types))
    want = []
    for combo in picks:
        if any(kinds[p] != t for p, t in zip(combo, types, strict=True)):
            continue
        if window and max(combo) - min(combo) >= window:
            continue
        want.append(combo)
    want.sort(key=lambda c: (max(c), tuple(sorted(c)), c))
    got = [tuple(ids.index(x) for x in m.bindings.values()) for m in _run(query, stream)]
    assert got == want
