"""CoverMatch on the chains (``kleene.plans.chain_cover``): EMIT COVERAGE without enumerating
every match, against the oracle coverage for coverage and in order -- random queries (SEQ,
Kleene ``+`` / ``*``, one type in several states, masks, equality, PARTITION BY, time and
count windows, CONSUME) over random streams with runs of adjacent same-type events; split
pushes, snapshot/restore between pushes, release before the end of the stream, and caps."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch
from kleene.plans.chain_cover import CoverMatcher
from kleene.plans.registry import start
from kleene.testing.oracle import evaluate as oracle

Recs = list[dict[str, object]]


def _query(rng: random.Random) -> tuple[str, bool]:
    """A random EMIT COVERAGE query; True when it has a Kleene closure."""
    n = rng.randint(2, 4)
    items = []
    kleene = False
    for i in range(n):
        t = rng.choice("ABC")
        if 0 < i < n - 1 and not kleene and rng.random() < 0.35:
            items.append(f"{t}{rng.choice('+*')} v{i}[]")
            kleene = True
        elif i == n - 1 and not kleene and rng.random() < 0.15:
            items.append(f"{t}+ v{i}[]")
            kleene = True
        else:
            items.append(f"{t} v{i}")
    conds = [f"v{i}.x > {rng.randint(0, 2)}" for i in range(n) if rng.random() < 0.2]
    if rng.random() < 0.25:
        conds.append("[k]")
    q = f"PATTERN SEQ({', '.join(items)})"
    if conds:
        q += " WHERE " + " AND ".join(conds)
    if rng.random() < 0.3:
        q += " PARTITION BY k"
    w = rng.random()
    if w < 0.45:
        q += f" WITHIN {rng.randint(1, 15)} seconds"
    elif w < 0.65:
        q += f" WITHIN {rng.randint(2, 20)} EVENTS"
    if rng.random() < 0.15:
        q += " CONSUME ALL"
    q += " EMIT COVERAGE"
    return q, kleene


def _stream(rng: random.Random, n: int) -> Recs:
    recs: Recs = []
    ts = 0
    for i in range(n):
        ts += rng.choice((0, 1, 1, 2))
        # runs of adjacent same-type events (chains), as in the ABC stream
        t = recs[-1]["type"] if recs and rng.random() < 0.5 else rng.choice("ABCD")
        recs.append({"id": f"e{i}", "type": t, "ts": ts, "x": rng.randint(0, 3),
                     "k": rng.choice("uv")})
    return recs


def _out(ms: list[Any]) -> list[tuple[Any, ...]]:
    return [(dict(m.bindings), m.start, m.end) for m in ms]


def _check(q: str, recs: Recs, cuts: list[int], snap: bool) -> tuple[int, int]:
    """Runs ``q`` over ``recs`` pushed in pieces (snapshot/restore at each cut when ``snap``);
    asserts the oracle's output; returns how many coverages came out before close."""
    aq = analyze(q)
    want = oracle(aq, EventBatch.from_records(recs))
    rt = start(aq, plan="chain")
    assert isinstance(rt.matcher, CoverMatcher), q  # type: ignore[attr-defined]
    got: list[Any] = []
    bounds = [0, *cuts, len(recs)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        if a < b:
            got += rt.push(EventBatch.from_records(recs[a:b]))
        if snap:
            blob = rt.snapshot()
            rt = start(aq, plan="chain")
            rt.restore(blob)
    early = len(got)
    got += rt.close()
    assert _out(got) == _out(want), f"{q}\nover {recs}"
    return early, len(got)


def test_cover_match_equals_the_oracle_in_order() -> None:
    rng = random.Random(1313)
    covers = early = 0
    for _ in range(1000):
        q, kleene = _query(rng)
        recs = _stream(rng, rng.randint(8, 14 if kleene else 50))
        e, c = _check(q, recs, [], snap=False)
        early += e
        covers += c
    assert covers > 800
    assert early > covers // 4  # coverages do leave before the end of the stream


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(st.integers(0, 40), max_size=4),
       st.booleans())
def test_split_pushes_and_snapshots(seed: int, cuts: list[int], snap: bool) -> None:
    """Pieces and snapshot/restore between them: the same coverages as the oracle."""
    rng = random.Random(seed)
    q, kleene = _query(rng)
    recs = _stream(rng, rng.randint(3, 12 if kleene else 40))
    _check(q, recs, sorted(c for c in cuts if c < len(recs)), snap)


def test_paper_q4_releases_as_runs_close() -> None:
    """Q4 (docs/semantics.md 16): no coverage is final before c2's run of C closes; an
    irrelevant D does not close it, a following A does."""
    aq = analyze("PATTERN SEQ(A a, B b, C c) EMIT COVERAGE")
    rt = start(aq, plan="chain")
    recs = [{"id": i, "type": i[0].upper(), "ts": t}
            for t, i in enumerate(["a1", "a2", "b1", "b2", "a3", "b3", "c1", "c2"], 1)]
    assert rt.push(EventBatch.from_records(recs)) == []
    # the paper's counts on S_t (section 3.2.1): 13 temporary matches, 10 copies (NFA: 24, 21)
    assert rt.temporary_matches() == {"created": 13, "copied": 10, "live": 8}
    assert rt.push(EventBatch.from_records([{"id": "d1", "type": "D", "ts": 9}])) == []
    out = rt.push(EventBatch.from_records([{"id": "a4", "type": "A", "ts": 10}]))
    assert [m.bindings for m in out] == [{"a": "a2", "b": "b2", "c": "c2"},
                                         {"a": "a2", "b": "b3", "c": "c2"},
                                         {"a": "a3", "b": "b3", "c": "c2"}]
    assert rt.close() == []


def test_window_makes_a_coverage_final() -> None:
    """A coverage whose last run is still open is final once the watermark is past the
    window of its first event's (closed) run."""
    aq = analyze("PATTERN SEQ(S a, T b) WITHIN 2 seconds EMIT COVERAGE")
    rt = start(aq, plan="chain")
    recs = [{"id": "s1", "type": "S", "ts": 1}, {"id": "t1", "type": "T", "ts": 2}]
    assert rt.push(EventBatch.from_records(recs)) == []
    assert rt.advance(3_000_000) == []  # t2 at 3 s could still cover a=s1 b=t1
    assert [m.bindings for m in rt.advance(3_000_001)] == [{"a": "s1", "b": "t1"}]
    assert rt.close() == []


def test_caps() -> None:
    aq = analyze("PATTERN SEQ(A a, B b, C c) EMIT COVERAGE")
    recs: Recs = []
    for i in range(6):  # a b a b ...: every (a, b) pair is its own group
        recs += [{"id": f"a{i}", "type": "A", "ts": 2 * i}, {"id": f"b{i}", "type": "B",
                                                              "ts": 2 * i + 1}]
    recs.append({"id": "c", "type": "C", "ts": 20})
    events = EventBatch.from_records(recs)
    want = oracle(aq, events)
    assert len(want) == 21
    with pytest.raises(CapacityError):
        rt = start(aq, plan="chain", max_matches_per_event=20)
        rt.push(events)
    with pytest.raises(CapacityError):
        rt = start(aq, plan="chain", max_runs_per_partition=10)
        rt.push(events)
    rt = start(aq, plan="chain", max_matches_per_event=21, max_runs_per_partition=100)
    assert _out(rt.push(events) + rt.close()) == _out(want)
    rt = start(aq, plan="chain", max_matches_per_event=20, on_cap="truncate")
    with pytest.warns(RuntimeWarning, match="on_cap='truncate'"):
        got = rt.push(events) + rt.close()
    assert len(got) == 20 and rt.counters.truncated_matches == 1


def test_conditions_between_events_keep_the_enumeration_path() -> None:
    for q in ("PATTERN SEQ(A a, B b) WHERE b.x > a.x EMIT COVERAGE",
              "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].val < b[i-1].val EMIT COVERAGE"):
        assert not isinstance(start(analyze(q), plan="chain").matcher, CoverMatcher)  # type: ignore[attr-defined]


@pytest.mark.parametrize("q", [
    "PATTERN SEQ(A* a[], B b) EMIT COVERAGE",
    "PATTERN SEQ(A a, B* b[]) EMIT COVERAGE",
    "PATTERN SEQ(A a, B* b[]) WITHIN 3 seconds EMIT COVERAGE",
    "PATTERN SEQ(A+ a[], B+ b[]) WITHIN 4 EVENTS EMIT COVERAGE",
    "PATTERN SEQ(A a, B* b[], C* c[], A d) EMIT COVERAGE",
    "PATTERN SEQ(A a, A b, A c) WITHIN 3 seconds EMIT COVERAGE",
    "PATTERN SEQ(A a, B b) WHERE a.x > 0 EMIT COVERAGE RETURN a.x AS ax",
])
def test_leading_trailing_and_repeated_closures(q: str) -> None:
    """A match that starts or ends in a ``*``, two closures, one type in every state,
    RETURN values: the oracle's coverages, values included."""
    rng = random.Random(q)
    aq = analyze(q)
    for _ in range(100):
        recs: Recs = []
        ts = 0
        for i in range(rng.randint(3, 11)):
            ts += rng.choice((0, 1, 2))
            t = recs[-1]["type"] if recs and rng.random() < 0.5 else rng.choice("ABC")
            recs.append({"id": f"e{i}", "type": t, "ts": ts, "x": rng.randint(0, 2)})
        events = EventBatch.from_records(recs)
        rt = start(aq, plan="chain")
        assert isinstance(rt.matcher, CoverMatcher)  # type: ignore[attr-defined]
        got = rt.push(events) + rt.close()
        want = oracle(aq, events)
        assert [(m.bindings, m.values) for m in got] == \
            [(m.bindings, m.values) for m in want], f"{q} over {recs}"
