"""Metamorphic properties of the oracle itself: each strategy and policy only removes matches,
and removes exactly what docs/semantics.md §8-§9 says (checked on random queries and streams)."""

from __future__ import annotations

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
