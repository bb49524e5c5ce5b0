"""The chain plan's generated join (``fast_joiner``: a SEQ of single variables in direct mode)
against the oracle, match for match and in order, on random streams with windows, masks,
partitions and equality routing; and the lazy join it falls back to under a cap."""

from __future__ import annotations

import random

import pytest

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch
from kleene.plans.chain import kleene_plan_shape, seq_shape
from kleene.plans.registry import start
from kleene.testing.oracle import evaluate as oracle


def _case(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    n = rng.randint(2, 5)
    names = [f"v{i}" for i in range(n)]
    items = [f"{rng.choice('ABCD')} {v}" for v in names]
    conds = [f"{v}.x > {rng.randint(0, 2)}" for v in names if rng.random() < 0.3]
    if rng.random() < 0.3:
        conds.append("[k]")
    q = f"PATTERN SEQ({', '.join(items)})"
    if conds:
        q += " WHERE " + " AND ".join(conds)
    if rng.random() < 0.3:
        q += " PARTITION BY k"
    w = rng.random()
    if w < 0.4:
        q += f" WITHIN {rng.randint(1, 6)} seconds"
    elif w < 0.6:
        q += f" WITHIN {rng.randint(2, 8)} EVENTS"
    recs: list[dict[str, object]] = []
    ts = 0
    for i in range(rng.randint(4, 40)):
        ts += rng.choice((0, 1, 1, 2))
        # runs of adjacent same-type events (chains), as in the ABC stream
        t = recs[-1]["type"] if recs and rng.random() < 0.5 else rng.choice("ABCD")
        recs.append({"id": f"e{i}", "type": t, "ts": ts, "x": rng.randint(0, 3),
                     "k": rng.choice("uv")})
    return q, recs


def test_generated_join_equals_the_oracle_in_order() -> None:
    rng = random.Random(2024)
    joined = matches = 0
    for _ in range(300):
        q, recs = _case(rng)
        events = EventBatch.from_records(recs)
        aq = analyze(q)
        want = oracle(aq, events)
        rt = start(aq, plan="chain")
        joined += rt.matcher.fast_join is not None  # type: ignore[attr-defined]
        assert seq_shape(rt.matcher.plan)  # type: ignore[attr-defined]  # the chooser's view
        got = rt.push(events) + rt.close()
        assert [(m.bindings, m.start, m.end) for m in got] == \
            [(m.bindings, m.start, m.end) for m in want], f"{q} over {recs}"
        matches += len(want)
    assert joined == 300  # every case ran the generated join
    assert matches > 1500  # ... and wrote many matches


def test_generated_join_split_over_pushes() -> None:
    """Nodes expired and cut between pushes (partition bases > 0): same matches as one push."""
    rng = random.Random(77)
    recs = [{"id": f"e{i}", "type": rng.choice("ABC"), "ts": i, "x": rng.randint(0, 3),
             "k": "u"} for i in range(190)]
    q = "PATTERN SEQ(A a, B b, C c) WHERE b.x > 0 WITHIN 6 seconds"
    aq = analyze(q)
    want = oracle(aq, EventBatch.from_records(recs))
    rt = start(aq, plan="chain")
    got = []
    for i in range(0, 190, 37):
        got += rt.push(EventBatch.from_records(recs[i:i + 37]))
    got += rt.close()
    assert min(p.base for st in rt.states.values()  # type: ignore[attr-defined]
               for p in st.parts) > 0
    assert [m.bindings for m in got] == [m.bindings for m in want]


def test_shapes_outside_the_generated_join() -> None:
    """Kleene, a condition between events, NOT: the lazy join (no generated one)."""
    for q in ("PATTERN SEQ(A a, B+ b[], C c)", "PATTERN SEQ(A a, B b, C c) WHERE c.x > a.x",
              "PATTERN SEQ(A a, NOT B n, C c)"):
        m = start(analyze(q), plan="chain").matcher
        assert m.fast_join is None  # type: ignore[attr-defined]
        assert not seq_shape(m.plan)  # type: ignore[attr-defined]
    for q in ("PATTERN SEQ(A a, B+ b[], C c) WHERE b.x > a.x",
              "PATTERN SEQ(A a, B* b[], C c)", "PATTERN SEQ(A a, B b, C c)"):
        assert not kleene_plan_shape(start(analyze(q), plan="chain").matcher.plan)  # type: ignore[attr-defined]


def test_a_cap_falls_back_to_the_lazy_join() -> None:
    """max_matches_per_event below a node's bound: the lazy join stops at the cap, as before."""
    recs = [{"id": f"a{i}", "type": "A", "ts": i} for i in range(5)]
    recs += [{"id": f"b{i}", "type": "B", "ts": 10 + i} for i in range(5)]
    recs.append({"id": "c", "type": "C", "ts": 20})
    aq = analyze("PATTERN SEQ(A a, B b, C c)")
    events = EventBatch.from_records(recs)
    with pytest.raises(CapacityError):
        rt = start(aq, plan="chain", max_matches_per_event=24)
        rt.push(events)
        rt.close()
    rt = start(aq, plan="chain", max_matches_per_event=25)
    out = rt.push(events) + rt.close()
    assert [m.bindings for m in out] == [m.bindings for m in oracle(aq, events)]
    assert len(out) == 25


def _kleene_case(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    ta, tb, tc = rng.choice(("ABC", "AAA", "ABA", "BBC"))
    q = f"PATTERN SEQ({ta} a, {tb}+ b[], {tc} c)"
    conds = []
    if rng.random() < 0.5:
        conds.append(f"c.x {rng.choice(('>', '>=', '<', '!='))} a.x")
    if rng.random() < 0.3:
        conds.append("b.x > 0")  # a one-variable mask on every element
    if rng.random() < 0.2:
        conds.append("[k]")
    if conds:
        q += " WHERE " + " AND ".join(conds)
    if rng.random() < 0.3:
        q += " PARTITION BY k"
    w = rng.random()
    if w < 0.4:
        q += f" WITHIN {rng.randint(2, 6)} seconds"
    elif w < 0.6:
        q += f" WITHIN {rng.randint(3, 8)} EVENTS"
    recs: list[dict[str, object]] = []
    ts = 0
    for i in range(rng.randint(6, 16)):
        ts += rng.choice((0, 1, 1, 2))
        recs.append({"id": f"e{i}", "type": rng.choice("ABBC"), "ts": ts, "x": rng.randint(0, 3),
                     "k": rng.choice("uv")})
    return q, recs


def test_kleene_join_equals_the_oracle_in_order() -> None:
    rng = random.Random(4242)
    matches = 0
    for _ in range(250):
        q, recs = _kleene_case(rng)
        events = EventBatch.from_records(recs)
        aq = analyze(q)
        want = oracle(aq, events)
        rt = start(aq, plan="chain")
        assert rt.matcher.kleene_join  # type: ignore[attr-defined]
        assert kleene_plan_shape(rt.matcher.plan)  # type: ignore[attr-defined]  # the chooser
        assert not seq_shape(rt.matcher.plan)  # type: ignore[attr-defined]
        got = rt.push(events) + rt.close()
        assert [(m.bindings, m.start, m.end) for m in got] == \
            [(m.bindings, m.start, m.end) for m in want], f"{q} over {recs}"
        matches += len(want)
    assert matches > 1500


def test_kleene_join_more_than_eight_elements_equals_the_nfa() -> None:
    """12 b candidates between a first and a last event (the mask's high bits), a condition
    between them, a window that expires firsts: the same matches, in the same order, as the
    NFA."""
    rng = random.Random(5)
    recs = [{"id": f"e{i}", "type": "S", "ts": i, "x": rng.randint(0, 9)} for i in range(40)]
    q = "PATTERN SEQ(S a, S+ b[], S c) WHERE c.x > a.x WITHIN 13 seconds"
    aq = analyze(q)
    events = EventBatch.from_records(recs)
    rt = start(aq, plan="chain", max_matches_per_call=None)
    assert rt.matcher.kleene_join  # type: ignore[attr-defined]
    got = rt.push(events) + rt.close()
    nfa = start(aq, plan="nfa", max_matches_per_call=None)
    want = nfa.push(events) + nfa.close()
    assert len(want) > 20_000
    assert [m.bindings for m in got] == [m.bindings for m in want]


@pytest.mark.parametrize("q", [
    "PATTERN SEQ(S a, S b, S c) WHERE b.x > 2 PARTITION BY k WITHIN 6 seconds",
    "PATTERN SEQ(S a, S+ b[], S c) WHERE c.x > a.x PARTITION BY k WITHIN 5 seconds",
])
def test_snapshot_restore_between_pushes(q: str) -> None:
    """Both joins after a restore: the same matches as one uninterrupted run (and the NFA)."""
    rng = random.Random(9)
    recs = [{"id": f"e{i}", "type": "S", "ts": i // 2, "x": rng.randint(0, 9),
             "k": rng.choice("uv")} for i in range(60)]
    aq = analyze(q)
    events = EventBatch.from_records(recs)
    nfa = start(aq, plan="nfa")
    want = [m.bindings for m in nfa.push(events) + nfa.close()]
    rt = start(aq, plan="chain")
    got = rt.push(EventBatch.from_records(recs[:25]))
    blob = rt.snapshot()
    rt2 = start(aq, plan="chain")
    rt2.restore(blob)
    got += rt2.push(EventBatch.from_records(recs[25:])) + rt2.close()
    assert [m.bindings for m in got] == want and len(want) > 50
