"""Negation inside the logical-block (pushdown) matcher, checked against the oracle.

Simple NOTs in a SEQ with positive parts on both sides, or directly in an AND, are decided inside
the automaton (LogCEP 4.3): a negating event taints the runs whose interval is open, or -- when
its predicates mention a variable bound later -- waits on the run's pending list until that
variable binds. These tests pin that path (the matcher must use it) and compare every match with
the brute-force oracle on random streams, bounded and streamed with snapshots in between.
"""

from __future__ import annotations

import warnings

import pytest

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.plans import choose, evaluate, start
from kleene.runtime.engine import Runtime
from kleene.runtime.groups import GroupMatcher
from kleene.testing.oracle import evaluate as oracle

from .helpers import keys, match_dicts, random_stream, streamed_with_snapshots, x_events

#: (query, NOT indices expected on the in-automaton path)
QUERIES: list[tuple[str, set[int]]] = [
    # pending predicate on a variable bound after the NOT (LogCEP's B.price > C.price)
    ("SEQ(AND(A a, D d), NOT(B n), C c) WHERE n.x > c.x", {0}),
    # predicate on a variable bound before: decided on arrival
    ("SEQ(AND(A a, D d), NOT(B n), C c) WHERE n.x > a.x", {0}),
    # no predicate: whole buckets are tainted / dropped
    ("SEQ(AND(A a, D d), NOT(B n), C c)", {0}),
    # inside an AND: the interval is (first, last) event of the block
    ("AND(A a, C c, NOT(B n)) WHERE n.x > c.x", {0}),
    ("AND(A a, C c, D d, NOT(B n)) WHERE n.x >= a.x AND n.x <= d.x", {0}),
    ("AND(A a, B b, C c, NOT(B n))", {0}),
    # the negated type is also a positive one: an event the match binds counts too
    ("SEQ(AND(A a, B b), NOT(A n), C c) WHERE n.x < b.x", {0}),
    ("AND(SEQ(A a, NOT(D n), C c), D d) WHERE n.x > d.x", {0}),
    ("AND(SEQ(A a, NOT(D n), C c), D d)", {0}),
    # a NOT inside one OR branch (its predicate may mention the other branch's variable)
    ("OR(SEQ(A a, NOT(B n), C c), AND(D d, C e)) WHERE n.x > c.x", {0}),
    ("SEQ(OR(A a, D d), NOT(B n), AND(C c, D e)) WHERE n.x > d.x", {0}),
    # an OR of negated events, two NOTs, a Kleene variable on the left
    ("SEQ(AND(A a, D d), NOT(OR(B n, D m)), C c) WHERE n.x > c.x AND m.x < a.x", {0}),
    ("SEQ(AND(A a, D d), NOT(B n), C c, NOT(B m), D f) WHERE n.x > f.x AND m.x < c.x",
     {0, 1}),
    ("SEQ(AND(A a, D d), NOT(B n), C c, NOT(B m), D f) WHERE m.x < c.x", {0, 1}),
    # a bucket tainted whole by one NOT, then armed run by run by another
    ("AND(SEQ(A a, NOT(B n), C c), D d, NOT(A m)) WHERE m.x > d.x", {0, 1}),
    ("SEQ(AND(A a, D d), A+ b[], NOT(B n), C c) WHERE n.x > b[1].x", {0}),
    ("SEQ(AND(A a, D d), NOT(B n), C+ c[]) WHERE n.x > avg(c.x)", {0}),
    # trailing NOT: still checked against the history when the window closes
    ("SEQ(AND(A a, D d), C c, NOT(B n)) WHERE n.x > c.x", set()),
]

TAILS = ["", "WITHIN 4 seconds", "PARTITION BY k WITHIN 6 seconds", "WITHIN 5 EVENTS"]


def _matcher(q: str) -> GroupMatcher:
    m = Runtime(choose(analyze(q))).matcher
    assert isinstance(m, GroupMatcher)
    return m


@pytest.mark.parametrize(("query", "fast"), QUERIES, ids=[q for q, _ in QUERIES])
def test_in_automaton_path_is_used(query: str, fast: set[int]) -> None:
    m = _matcher(f"PATTERN {query}\nWITHIN 4 seconds")
    assert set(m.fast) == fast


@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize(("query", "fast"), QUERIES, ids=[q for q, _ in QUERIES])
def test_equals_oracle(query: str, fast: set[int], tail: str) -> None:
    del fast
    text = f"PATTERN {query}\n{tail}" if tail else f"PATTERN {query}"
    if "C c, NOT(B n))" in query and not tail:
        text += "\nWITHIN 4 seconds"  # a trailing NOT needs a window
    aq = analyze(text)
    for seed in range(20):
        batch = random_stream(seed, n=30, types="ABCD")
        assert match_dicts(evaluate(aq, batch)) == match_dicts(oracle(aq, batch)), (text, seed)


@pytest.mark.parametrize(("query", "fast"), QUERIES[:9], ids=[q for q, _ in QUERIES[:9]])
def test_streamed_with_snapshots_equals_oracle(query: str, fast: set[int]) -> None:
    del fast
    text = f"PATTERN {query}\nWITHIN 6 seconds"
    aq = analyze(text)
    for seed in range(10):
        batch = random_stream(100 + seed, n=40, types="ABCD")
        got = sorted(match_dicts(streamed_with_snapshots(text, batch)), key=repr)
        assert got == sorted(match_dicts(oracle(aq, batch)), key=repr), (text, seed)


def test_fast_not_keeps_no_history() -> None:
    """A NOT decided inside the automaton needs no history of negating events."""
    text = "PATTERN SEQ(AND(A a, D d), NOT(B n), C c) WHERE n.x > c.x\nWITHIN 4 seconds"
    rt = start(analyze(text))
    batch = random_stream(7, n=60, types="ABCD")
    rt.push(batch)
    assert rt.states
    assert all(not st.hist for st in rt.states.values())
    assert not rt.matcher.has_trailing


def test_pending_entry_waits_for_later_variable() -> None:
    """b1 arrives between a1/d1 and c1 with a predicate on c: parked, then decided when c
    binds (kills c1, whose x is smaller, not c2)."""
    batch = x_events("a1@1 d1@2 b1@3 c1@4 c2@5", a1=0, d1=0, b1=5, c1=4, c2=6)
    text = "PATTERN SEQ(AND(A a, D d), NOT(B n), C c) WHERE n.x > c.x"
    aq = analyze(text)
    rt = start(aq)
    rt.push(batch.slice(0, 3))
    pend = [r for st in rt.states.values() for lst in st.buckets.values() for r in lst
            if r[6]]
    assert pend and pend[0][6][0][2][2] == "b1"  # the parked negating event
    got = rt.push(batch.slice(3, 2)) + rt.close()
    assert [m.bindings["c"] for m in got] == ["c2"]
    assert match_dicts(got) == match_dicts(oracle(aq, batch))


@pytest.mark.parametrize("query", ["AND(A a, B b)", "SEQ(AND(A a, B b), NOT(C n), A c)",
                                   "AND(A a, B b) USING strict-contiguity"])
def test_matches_per_call_budget(query: str) -> None:
    """The group matcher checks the per-call budget after each event (the error names the
    event), and with on_cap='truncate' keeps the first matches and counts the rest."""
    aq = analyze(f"PATTERN {query}")
    batch = random_stream(3, n=40, types="ABC")
    want = keys(oracle(aq, batch))
    assert len(want) > 3
    with pytest.raises(CapacityError, match="max_matches_per_call=3.*reached at event"):
        start(aq, max_matches_per_call=3).push(batch)
    rt = start(aq, max_matches_per_call=3, on_cap="truncate")
    with pytest.warns(RuntimeWarning):
        got = rt.push(batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got += rt.close()
    assert len(got) == 3
    assert rt.counters.truncated_matches == len(want) - 3
    kept = keys(got)  # matches of the oracle, in its order
    assert kept == [k for k in want if k in set(kept)]
