"""``tree:adaptive`` (kleene.plans.adaptive): a run that switches its tree shape while it runs
emits exactly the oracle's matches, in order -- with a switch forced at every period (the
migration exercised as often as possible), across push boundaries and snapshots, and when the
cost model switches on a stream whose event mix drifts."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kleene.api import analyze
from kleene.events import EventBatch, Match
from kleene.plans import choose, evaluate, get_plan_kind, start
from kleene.plans.adaptive import AdaptiveSpec, AdaptiveTreeMatcher
from kleene.plans.explain import explain
from kleene.plans.registry import CompiledPlan
from kleene.runtime.engine import run_batch
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.strategies import describe, queries, streams

SETTINGS = settings(max_examples=80, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def _key(ms: list[Match]) -> list[tuple[object, ...]]:
    return [(dict(m.bindings), m.start, m.end, dict(m.values)) for m in ms]


def _supported(q: str) -> bool:
    return get_plan_kind("tree").supports(analyze(q)) is None


def _rotating(q: str, period: int) -> CompiledPlan:
    """``tree:adaptive`` switching to the next shape at every period, whatever the costs."""
    cp = choose(analyze(q), plan="tree:adaptive")
    spec = AdaptiveSpec(period=period, rotate=True)
    return dataclasses.replace(cp, plan=dataclasses.replace(cp.plan, adaptive=spec))


@st.composite
def grouping_queries(draw: st.DrawFn, grouping: bool = True) -> str:
    """SEQ / AND patterns of 3-4 items with one Kleene item (several tree shapes), under
    maximal-grouping or (``grouping=False``) skip-till-any-match."""
    n = draw(st.integers(3, 4))
    types = [draw(st.sampled_from("ABCD")) for _ in range(n)]
    k = draw(st.integers(0, n - 1))
    quant = draw(st.sampled_from(["+", "*", "{2}", "{1,2}"]))
    items = [f"{t}{quant} v{i}[]" if i == k else f"{t} v{i}" for i, t in enumerate(types)]
    if draw(st.booleans()):
        pat = f"SEQ({items[0]}, AND({', '.join(items[1:])}))" if k > 0 else \
            f"AND({items[0]}, SEQ({', '.join(items[1:])}))"
    else:
        pat = f"SEQ({', '.join(items)})"
    j = draw(st.sampled_from([i for i in range(n) if i != k]))
    conds = [f"v{k}.x {draw(st.sampled_from(['>', '<']))} v{j}.x"] if draw(st.booleans()) \
        else []
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    window = draw(st.sampled_from([" WITHIN 3 seconds", " WITHIN 4 EVENTS", ""]))
    part = draw(st.sampled_from(["", " PARTITION BY k"]))
    using = " USING maximal-grouping" if grouping else ""
    return f"PATTERN {pat}{where}{part}{window}{using}"


def _migrations(rt: object) -> int:
    m = rt.matcher  # type: ignore[attr-defined]
    if not isinstance(m, AdaptiveTreeMatcher):  # a pattern of one item has one shape
        return 0
    return sum(len(s["migrations"]) for s in m.switches)


def test_switching_every_period_equals_oracle_skip_till_any() -> None:
    moved = [0]

    @given(query=st.one_of(queries(feature="mixed").filter(_supported),
                           grouping_queries(grouping=False)),
           stream=streams(max_events=12), period=st.integers(1, 3))
    @SETTINGS
    def check(query: str, stream: EventBatch, period: int) -> None:
        note(f"query:  {query}")
        note(f"stream: {describe(stream)}")
        rt = start(_rotating(query, period))
        got = run_batch(rt, stream)
        moved[0] += _migrations(rt)
        assert _key(got) == _key(oracle(analyze(query), stream))

    check()
    assert moved[0] > 50  # the states were migrated, many times


def test_switching_every_period_equals_oracle_maximal_grouping() -> None:
    moved = [0]

    @given(query=grouping_queries(), stream=streams(max_events=12), period=st.integers(1, 3))
    @SETTINGS
    def check(query: str, stream: EventBatch, period: int) -> None:
        note(f"query:  {query}")
        note(f"stream: {describe(stream)}")
        assert _supported(query)
        rt = start(_rotating(query, period))
        got = run_batch(rt, stream)
        moved[0] += _migrations(rt)
        assert _key(got) == _key(oracle(analyze(query), stream))

    check()
    assert moved[0] > 50


@given(query=grouping_queries(), stream=streams(max_events=12), cut=st.integers(1, 10),
       snap=st.booleans())
@SETTINGS
def test_switching_across_pushes_and_snapshots_equals_oracle(query: str, stream: EventBatch,
                                                             cut: int, snap: bool) -> None:
    """A switch between two pushes, and a snapshot taken in one shape restored (and carried
    on) by a matcher that starts in another."""
    aq = analyze(query)
    t = stream.table.sort_by([("__ts", "ascending")])
    ordered = EventBatch(t, stream.time)
    cut = min(cut, len(ordered))
    rt = start(_rotating(query, 1))
    out = rt.push(EventBatch(t.slice(0, cut), stream.time))
    if snap:
        blob = rt.snapshot()
        rt = start(_rotating(query, 1))
        rt.restore(blob)
    if cut < len(ordered):
        out += rt.push(EventBatch(t.slice(cut), stream.time))
    out += rt.close()
    assert _key(out) == _key(oracle(aq, ordered))


def _drifting(n: int) -> EventBatch:
    """First half: A and B frequent, C and D rare; second half the other way round (every
    third event is noise N)."""
    recs = []
    for i in range(n):
        dense, sparse = (("A", "B"), ("C", "D")) if i < n // 2 else (("C", "D"), ("A", "B"))
        t = "N" if i % 3 == 0 else sparse[(i // 4) % 2] if i % 4 == 1 else dense[i % 2]
        recs.append({"id": f"e{i}", "type": t, "ts": i, "x": (i * 7) % 5})
    return EventBatch.from_records(recs)


@pytest.mark.parametrize("grouping", [False, True])
def test_cost_model_switches_on_a_drifting_stream_and_equals_oracle(grouping: bool) -> None:
    """Dense A / B then dense C / D: the model runs right-deep (the rare classes at the
    bottom) before the drift, moves to a shape that joins A and B first after the drift, and the matches equal
    the oracle's and those of a fixed shape."""
    where = "WHERE a.x <= d.x"
    if grouping:
        q = f"PATTERN SEQ(A a, B+ b[], C c, D d) {where} WITHIN 12 EVENTS USING maximal-grouping"
    else:
        q = f"PATTERN SEQ(A a, B b, C c, D d) {where} WITHIN 12 EVENTS"
    aq = analyze(q)
    s = _drifting(180)
    cp = choose(aq, plan="tree:adaptive")
    spec = AdaptiveSpec(period=20)
    cp = dataclasses.replace(cp, plan=dataclasses.replace(cp.plan, adaptive=spec))
    rt = start(cp)
    got = run_batch(rt, s)
    m = rt.matcher
    assert isinstance(m, AdaptiveTreeMatcher)
    assert m.switches, "no switch on a drifting stream"
    last = m.switches[-1]
    # before the drift the shape in use starts from C and D (right-deep side: the starting
    # shape, or the one switched to), after it from A and B (the left-deep side)
    before = [x for x in m.switches if x["after_gpos"] < 90]
    assert (before[-1]["to"] if before else m.switches[0]["from"]) in ("right", "inner")
    assert last["to"] in ("left", "bushy")
    assert last["after_gpos"] >= 90
    assert all(x["migrations"] for x in m.switches)
    want = oracle(aq, s)
    assert len(want) > 10
    assert _key(got) == _key(want)
    assert _key(got) == _key(evaluate(aq, s, plan="tree:left"))


def test_adaptive_is_a_tree_shape_option_and_explains_itself() -> None:
    q = "PATTERN SEQ(A a, B b, C c) WITHIN 10 EVENTS"
    cp = choose(analyze(q), plan="tree:adaptive")
    assert cp.plan.adaptive == AdaptiveSpec()
    text = explain(cp)
    assert "adaptive: the starting shape, re-estimated every 5 events" in text
    # one item: one shape, nothing to switch
    one = choose(analyze("PATTERN SEQ(A a) WITHIN 10 EVENTS"), plan="tree:adaptive")
    assert "adaptive, but the pattern has one shape" in explain(one)
    assert not isinstance(start(one).matcher, AdaptiveTreeMatcher)
