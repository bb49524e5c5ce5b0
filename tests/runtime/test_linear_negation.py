"""Negation inside the linear (NFA^b) matcher and its kernel, checked against the oracle.

A NOT of one event in the middle of a SEQ, with a positive part that cannot be empty on both
sides, is decided inside the automaton (LogCEP 4.3): when a run takes its first event after the
NOT, the negating events since its last event before the NOT are found by bisection in the
partition's history; without predicates any of them forbids the new run, with predicates an
event whose conjuncts are decidable forbids it when they hold, and the others wait on the run's
pending list until the variables they mention are bound (at the latest, the complete match).
Other shapes keep the history check on complete matches. These tests pin which path each shape
takes and compare every match with the brute-force oracle on random streams -- interpreter and
generated kernel, bounded and streamed with snapshot/restore between slices.
"""

from __future__ import annotations

from typing import Any

import pytest

from kleene.api import analyze
from kleene.events import EventBatch
from kleene.plans import evaluate, start
from kleene.runtime.engine import Runtime
from kleene.runtime.linear import LinearMatcher
from kleene.runtime.union import UnionMatcher
from kleene.testing.oracle import evaluate as oracle

from .helpers import match_dicts, random_stream, streamed_with_snapshots, x_events

#: (pattern, NOT indices decided inside the automaton, per branch for a top-level OR)
QUERIES: list[tuple[str, list[set[int]]]] = [
    ("SEQ(A a, NOT(B n), C c)", [{0}]),
    # predicate on a variable bound before the NOT: decided when the interval closes
    ("SEQ(A a, NOT(B n), C c) WHERE n.x > a.x", [{0}]),
    # ... on the variable right after it: decided by that binding
    ("SEQ(A a, NOT(B n), C c) WHERE n.x > c.x", [{0}]),
    # ... on a later variable: pending until it binds
    ("SEQ(A a, NOT(B n), C c, D d) WHERE n.x > d.x", [{0}]),
    ("SEQ(A a, NOT(B n), C c, D d) WHERE n.x > d.x AND n.x < a.x + 5", [{0}]),
    # list variables: pending until the match completes
    ("SEQ(A a, B+ b[], NOT(C n), D d) WHERE n.x > b[1].x", [{0}]),
    ("SEQ(A a, NOT(B n), C+ c[], D d) WHERE n.x > c[1].x", [{0}]),
    ("SEQ(A a, NOT(B n), C+ c[]) WHERE n.x < avg(c.x)", [{0}]),
    # the negated type is also a positive one
    ("SEQ(A a, NOT(A n), A b) WHERE n.x > b.x", [{0}]),
    ("SEQ(A a, NOT(A n), A b)", [{0}]),
    # an OR of negated events, two NOTs
    ("SEQ(A a, NOT(OR(B n, C m)), D d) WHERE n.x > a.x", [{0, 1}]),
    ("SEQ(A a, NOT(B n), C c, NOT(B m), D d) WHERE n.x > d.x AND m.x < a.x", [{0, 1}]),
    # nullable parts next to a non-empty one: the interval is still bounded by bound events
    ("SEQ(A a, A* b[], NOT(B n), C c)", [{0}]),
    ("SEQ(A a, NOT(B n), C* c[], D d) WHERE n.x > d.x", [{0}]),
    ("SEQ(A a, OR(B b, C c), NOT(D n), A e) WHERE n.x > c.x", [{0}]),
    # a top-level OR: one NFA^b per branch
    ("OR(SEQ(A a, NOT(B n), C c), SEQ(C d, NOT(B m), A e)) WHERE n.x > c.x", [{0}, {0}]),
    # kept on the history check: leading, trailing, a sub-pattern, no non-empty left part
    ("SEQ(NOT(B n), A a, C c) WHERE n.x > c.x", [set()]),
    ("SEQ(A a, C c, NOT(B n)) WHERE n.x > c.x", [set()]),
    ("SEQ(A a, NOT(SEQ(B n, D m)), C c)", [set()]),
    ("SEQ(A* a[], NOT(B n), C c)", [set()]),
    # one of each
    ("SEQ(NOT(D m), A a, NOT(B n), C c) WHERE n.x > c.x", [{1}]),
]

TAILS = ["WITHIN 4 seconds", "PARTITION BY k WITHIN 6 seconds", "WITHIN 5 EVENTS",
         "WITHIN 5 seconds USING skip-till-next-match", "WITHIN 5 seconds USING strict-contiguity",
         "WITHIN 4 seconds USING skip-till-any-match", ""]


def _text(query: str, tail: str) -> str:
    return f"PATTERN {query}\n{tail}" if tail else f"PATTERN {query}"


def _valid(text: str) -> bool:
    try:
        analyze(text)
    except Exception:  # a leading / trailing NOT needs a window: not a query
        return False
    return True


#: every (query, tail) that is a valid query
CASES = [(q, t) for q, _f in QUERIES for t in TAILS if _valid(_text(q, t))]


def _branches(rt: Runtime) -> list[LinearMatcher]:
    m = rt.matcher
    if isinstance(m, UnionMatcher):
        return list(m.branches)
    assert isinstance(m, LinearMatcher)
    return [m]


@pytest.mark.parametrize(("query", "fast"), QUERIES, ids=[q for q, _ in QUERIES])
def test_in_automaton_path_is_used(query: str, fast: list[set[int]]) -> None:
    # (skip-till-next-match: a NOT of a sub-pattern is a linear plan only there)
    rt = start(analyze(f"PATTERN {query}\nWITHIN 4 seconds USING skip-till-next-match"))
    assert [set(m.fast) for m in _branches(rt)] == fast
    every = all(len(f) == len(m.plan.negations) for f, m in zip(fast, _branches(rt),
                                                                   strict=True))
    # all NOTs decided in the automaton: complete matches skip the history check
    assert rt.no_negation == every
    for m in _branches(rt):
        assert m.kernel is not None or not all(
            c.min > 0 and c.kind.name != "CHOICE" for c in m.plan.components)
        if m.kernel is not None and m.fast:
            assert f"H{min(m.fast)}" in m.kernel.source


def test_complete_matches_are_not_checked_against_history(monkeypatch: Any) -> None:
    """The in-automaton path replaces the check of complete matches (it is never called)."""
    def boom(*_a: Any) -> bool:
        raise AssertionError("negation_ok called")

    monkeypatch.setattr(LinearMatcher, "negation_ok", boom)
    for q in ("SEQ(A a, NOT(B n), C c, D d) WHERE n.x > d.x", "SEQ(A a, NOT(B n), C c)"):
        aq = analyze(f"PATTERN {q}\nWITHIN 4 seconds")
        for kernel in (True, False):
            for seed in range(5):
                batch = random_stream(seed, n=40, types="ABCD")
                got = evaluate(aq, batch, use_kernel=kernel)
                assert match_dicts(got) == match_dicts(oracle(aq, batch))


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "interpreter"])
@pytest.mark.parametrize(("query", "tail"), CASES, ids=[f"{q} {t}" for q, t in CASES])
def test_equals_oracle(query: str, tail: str, kernel: bool) -> None:
    aq = analyze(_text(query, tail))
    for seed in range(10):
        batch = random_stream(seed, n=30, types="ABCD")
        got = evaluate(aq, batch, use_kernel=kernel)
        assert match_dicts(got) == match_dicts(oracle(aq, batch)), (query, tail, seed)


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "interpreter"])
@pytest.mark.parametrize(("query", "fast"), QUERIES[:16], ids=[q for q, _ in QUERIES[:16]])
def test_streamed_with_snapshots_equals_oracle(query: str, fast: list[set[int]],
                                               kernel: bool) -> None:
    del fast
    text = f"PATTERN {query}\nPARTITION BY k WITHIN 6 seconds"
    aq = analyze(text)
    for seed in range(8):
        batch = random_stream(100 + seed, n=45, types="ABCD")
        got = match_dicts(streamed_with_snapshots(text, batch, use_kernel=kernel))
        assert got == match_dicts(oracle(aq, batch)), (text, seed)


#: a1, then b1 (x=5) before c1, then d1 (x=4, which n.x > d.x forbids) and d2 (x=6)
PENDING = "a1@1 b1@2 c1@3 d1@4 d2@5"
PENDING_X = {"a1": 0, "b1": 5, "c1": 0, "d1": 4, "d2": 6}


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "interpreter"])
def test_pending_entry_waits_for_later_variable(kernel: bool) -> None:
    """b1 lies between a1 and c1 with a predicate on d (bound after c): it waits on the run's
    pending list across a snapshot, then kills d1 (smaller x), not d2."""
    batch = x_events(PENDING, **PENDING_X)
    text = "PATTERN SEQ(A a, NOT(B n), C c, D d) WHERE n.x > d.x"
    aq = analyze(text)
    rt = start(aq, use_kernel=kernel)
    rt.push(batch.slice(0, 3))
    blob = rt.snapshot()
    rt = start(aq, use_kernel=kernel)
    rt.restore(blob)
    (st,) = rt.states.values()
    pending = [r[-1] for r in st.runs if r[0] == 1]
    assert pending and pending[0][0][1][2] == "b1"  # (guard, negating record) on the run
    got = rt.push(batch.slice(3, 2)) + rt.close()
    assert [m.bindings["d"] for m in got] == ["d2"]
    assert match_dicts(got) == match_dicts(oracle(aq, batch))


def test_history_is_pruned_by_the_window() -> None:
    """The history a NOT decided in the automaton keeps is bounded by the window, not by the
    stream: a run that started long ago (still live: no positive event has expired it) does not
    keep the negating events behind the window."""
    recs = [{"id": "a0", "type": "A", "ts": 0, "x": 0}] + [
        {"id": f"b{i}", "type": "B", "ts": i, "x": 0} for i in range(1, 5000)]
    rt = start(analyze("PATTERN SEQ(A a, NOT(B n), C c) WITHIN 10 seconds"))
    for i in range(0, 5000, 500):
        rt.push(EventBatch.from_records(recs[i:i + 500]))
    (st,) = rt.states.values()
    assert st.runs  # the run of a0
    (hist,) = st.neg_hist
    assert len(hist) <= 64
    assert all(int(r[1]) >= 4989_000_000 for r in hist)


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "interpreter"])
def test_pending_entry_is_decided_when_its_variable_binds(kernel: bool) -> None:
    """The entry is decided by the binding of d, not left for the complete match: d1 (which
    the predicate forbids) starts no run, d2 starts one with an empty pending list."""
    batch = x_events(PENDING + " a2@6", **PENDING_X, a2=0)
    aq = analyze("PATTERN SEQ(A a, NOT(B n), C c, D d, A e) WHERE n.x > d.x")
    rt = start(aq, use_kernel=kernel)
    rt.push(batch.slice(0, 5))
    (st,) = rt.states.values()
    slot = rt.matcher.slot["d"]
    after_d = [r for r in st.runs if r[0] == 2]  # components a, c, d, e
    assert [r[2][slot][2] for r in after_d] == ["d2"]
    assert after_d[0][-1] == ()
    got = rt.push(batch.slice(5, 1)) + rt.close()
    assert match_dicts(got) == match_dicts(oracle(aq, batch))
    assert [m.bindings["d"] for m in got] == ["d2"]


def test_union_sort_key_equals_the_generic_key() -> None:
    """The union's direct output key (branches binding one event per variable) is the
    documented key of docs/semantics.md 10, candidate for candidate."""
    from kleene.runtime.linear import output_sort_key

    aq = analyze("PATTERN OR(SEQ(A a, NOT(D n), B b), SEQ(A c, B d), SEQ(B e, NOT(C m), A f))"
                 "\nWITHIN 5 seconds")
    m = start(aq).matcher
    assert isinstance(m, UnionMatcher) and m.simple_branches is not None
    seen = 0
    for seed in range(5):
        batch = random_stream(seed, n=50, types="ABCD")
        st = m.new_state()
        recs = [(i, int(t), f"r{i}", i, i, x) for i, (t, x) in
                enumerate(zip(batch.ts, batch.table.column("x").to_pylist(), strict=True))]
        types = batch.table.column("__type").to_pylist()
        specs = m.mask_specs()
        bits = [sum(1 << j for j, (typ, _mask) in enumerate(specs) if typ == ty)
                for ty in types]
        out: list[Any] = []
        m.process(st, recs, bits, out, None)
        for c in out:
            assert m.sort_key(c) == output_sort_key(c, m.plan.order, m.slot)
        seen += len(out)
    assert seen > 20
