"""PICK under a count window (``WITHIN n EVENTS``) releases a match as soon as its group is
complete (docs/semantics.md 9): once the next event's window position is past the first shared
event's position + n - 1 (per partition with PARTITION BY). Release times change when matches
come out, never which or in what order: every plan, any slicing of push / advance / close and a
snapshot / restore at any cut give the oracle's matches in its order."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kleene.api import analyze
from kleene.errors import KleeneError
from kleene.events import EventBatch, Match
from kleene.plans import choose, start
from kleene.plans.registry import plan_kinds
from kleene.testing.oracle import evaluate as oracle

from .helpers import random_stream

QUERIES = [
    "PATTERN SEQ(A a, B b) WITHIN 3 EVENTS PICK FIRST a",
    "PATTERN SEQ(A a, B b) WITHIN 4 EVENTS PICK LAST b",
    "PATTERN SEQ(A a, B b, C c) WITHIN 5 EVENTS PICK FIRST a CONSUME ALL",
    "PATTERN SEQ(A a, B b, C c) WITHIN 6 EVENTS PICK LAST b, FIRST a",
    "PATTERN SEQ(A a, B+ b[], C c) WITHIN 5 EVENTS PICK FIRST b",
    "PATTERN AND(A a, B b) WITHIN 3 EVENTS PICK LAST a",
    "PATTERN SEQ(A a, B b) WITHIN 4 EVENTS PICK FIRST a EMIT RECENT",
    "PATTERN SEQ(A a, B b) WITHIN 3 EVENTS PICK FIRST a CONSUME b",
    "PATTERN SEQ(A a, B b, NOT(C n)) WITHIN 4 EVENTS PICK FIRST a",
    "PATTERN SEQ(A a, B b) PARTITION BY k WITHIN 3 EVENTS PICK FIRST a",
    "PATTERN SEQ(A a, B b) PARTITION BY k WITHIN 3 EVENTS PICK LAST b",
    "PATTERN SEQ(A a, B b, C c) PICK FIRST b",
    "PATTERN SEQ(A a, B b, C c) PARTITION BY k WITHIN 4 EVENTS PICK LAST a CONSUME ALL",
    "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 3 EVENTS PICK LAST a",
]


def _keys(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [m.key() for m in ms]


def _plans(query: str) -> list[str]:
    out = []
    for name in plan_kinds():
        try:
            choose(analyze(query), plan=name)
        except KleeneError:
            continue
        out.append(name)
    return out


def _stream(seed: int, n: int = 40) -> EventBatch:
    return random_stream(seed, n=n, types="ABCX")


@pytest.mark.parametrize("query", QUERIES)
def test_every_plan_and_slicing_gives_the_oracle(query: str) -> None:
    aq = analyze(query)
    plans = _plans(query)
    assert "nfa" in plans or "pda" in plans or "union" in plans
    for seed in range(6):
        batch = _stream(seed)
        want = _keys(oracle(aq, batch))
        rng = random.Random(seed)
        for plan in plans:
            cuts = sorted(rng.sample(range(1, len(batch)), rng.randint(1, 8)))
            snap_at = rng.choice([None, *cuts])
            rt = start(aq, plan=plan)
            got: list[Match] = []
            prev = 0
            for cut in [*cuts, len(batch)]:
                part = batch.slice(prev, cut - prev)
                got += rt.push(part)
                if rng.random() < 0.5:
                    got += rt.advance(int(part.ts[-1]))
                if snap_at == cut:
                    blob = rt.snapshot()
                    rt = start(aq, plan=plan)
                    rt.restore(blob)
                prev = cut
            got += rt.close()
            assert _keys(got) == want, f"plan {plan}, seed {seed}, cuts {cuts}"


@pytest.mark.parametrize("query", QUERIES)
def test_matches_come_out_before_close(query: str) -> None:
    """Pushed one event at a time, most matches are out before ``close``: a match comes out
    no later than the push of the event n positions after its group's first shared event
    (n + its partition's share of the stream with PARTITION BY)."""
    aq = analyze(query)
    # no window: the picked variable comes before a shared one, so a match is out at once
    n_window = int(query.split("WITHIN ")[1].split()[0]) if "WITHIN" in query else 0
    for plan in _plans(query):
        batch = _stream(3, n=60)
        ends: dict[Any, int] = {}  # the match -> the push that released it
        rt = start(aq, plan=plan)
        for i in range(len(batch)):
            for m in rt.push(batch.slice(i, 1)):
                ends[m.key()] = i
        at_close = rt.close()
        total = len(ends) + len(at_close)
        assert total > 0
        if "WITHIN" not in query and not hasattr(rt.plan, "components"):
            assert not ends  # no window, not a linear SEQ plan (pda): held until close
            continue
        assert len(at_close) < total, f"plan {plan}: every match waited for close"
        if "PARTITION" in query or "[k]" in query or "NOT" in query:
            continue
        ids = [str(v) for v in batch.ids]
        for key, i in ends.items():
            last = max(ids.index(v) for v in _ids(key))
            # a match is never out before its last event; the group's first shared event
            # is at or before its last event, so it is out within n - 1 pushes of it
            assert last <= i <= last + n_window, (plan, key, i, last)


def _ids(key: tuple[Any, ...]) -> list[str]:
    out: list[str] = []
    for _var, v in key[1]:
        out += list(v) if isinstance(v, tuple) else [v]
    return out


def test_pick_last_b_is_out_once_the_window_has_passed() -> None:
    """``SEQ(A a, B b) WITHIN 3 EVENTS PICK LAST b``: the group of a1 (shared: a1 at position
    0) can grow until position 0 + 3 - 1 = 2, so a=a1 b=b2 is out after the event at 2."""
    rt = start(analyze("PATTERN SEQ(A a, B b) WITHIN 3 EVENTS PICK LAST b"))
    recs = [{"id": "a1", "type": "A", "ts": 1}, {"id": "b1", "type": "B", "ts": 2},
            {"id": "x1", "type": "X", "ts": 3}, {"id": "b2", "type": "B", "ts": 4}]
    batch = EventBatch.from_records(recs)
    assert rt.push(batch.slice(0, 2)) == []  # a B at position 2 could still join
    out = rt.push(batch.slice(2, 1))
    assert [dict(m.bindings) for m in out] == [{"a": "a1", "b": "b1"}]
    assert rt.push(batch.slice(3, 1)) == [] and rt.close() == []


def test_a_picked_variable_before_a_shared_one_is_complete_at_once() -> None:
    """``SEQ(A a, B b, C c) PICK FIRST a``: every member of a group binds its ``a`` before the
    shared ``b``, so the group is complete when the match is found (no window needed)."""
    rt = start(analyze("PATTERN SEQ(A a, B b, C c) PICK FIRST a"))
    recs = [{"id": "a1", "type": "A", "ts": 1}, {"id": "a2", "type": "A", "ts": 2},
            {"id": "b1", "type": "B", "ts": 3}, {"id": "c1", "type": "C", "ts": 4}]
    out = rt.push(EventBatch.from_records(recs))
    assert [dict(m.bindings) for m in out] == [{"a": "a1", "b": "b1", "c": "c1"}]
    assert rt.close() == []
    # PICK LAST c: a later C could still join (a=a1 b=b1 shares position 0: until 0 + 6 - 1)
    rt = start(analyze("PATTERN SEQ(A a, B b, C c) WITHIN 6 EVENTS PICK LAST c"))
    assert rt.push(EventBatch.from_records(recs)) == []
    assert len(rt.close()) == 2


def test_partitioned_groups_count_their_own_partition() -> None:
    """With PARTITION BY the positions are per partition: events of another partition do not
    complete a group; the partition's own events do."""
    q = "PATTERN SEQ(A a, B b) PARTITION BY k WITHIN 3 EVENTS PICK LAST b"
    rt = start(analyze(q))
    recs = [{"id": "a1", "type": "A", "ts": 1, "k": 1}, {"id": "b1", "type": "B", "ts": 2, "k": 1}]
    assert rt.push(EventBatch.from_records(recs)) == []
    other = [{"id": f"y{i}", "type": "X", "ts": 3 + i, "k": 2} for i in range(5)]
    assert rt.push(EventBatch.from_records(other)) == []
    own = [{"id": "z1", "type": "X", "ts": 9, "k": 1}]
    out = rt.push(EventBatch.from_records(own))  # partition 1's next position is 3 = 0 + 3
    assert [dict(m.bindings) for m in out] == [{"a": "a1", "b": "b1"}]
    assert rt.close() == []
