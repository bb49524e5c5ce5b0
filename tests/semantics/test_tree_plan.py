"""The tree plan (kleene.plans.tree): every shape equals the oracle, under skip-till-any-match
and maximal-grouping; it streams (push / advance / snapshot / restore) and obeys the caps;
shapes are chosen by cost or forced (``tree:SHAPE``, bracket strings)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kleene.api import analyze
from kleene.errors import CapacityError, QueryValidationError
from kleene.events import EventBatch, Match
from kleene.plans import choose, evaluate, start
from kleene.plans.explain import explain
from kleene.plans.registry import Stats
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.strategies import describe, queries, streams
from kleene.testing.timeline import events

SHAPES = ("left", "right", "bushy", "inner")


def _key(ms: list[Match]) -> list[tuple[object, ...]]:
    return [(dict(m.bindings), m.start, m.end, dict(m.values)) for m in ms]


def _supported(q: str) -> bool:
    from kleene.plans import get_plan_kind

    return get_plan_kind("tree").supports(analyze(q)) is None


@st.composite
def grouping_queries(draw: st.DrawFn) -> str:
    """maximal-grouping queries the tree accepts: a SEQ / AND of 2-4 items, one Kleene."""
    n = draw(st.integers(2, 4))
    types = [draw(st.sampled_from("ABCD")) for _ in range(n)]
    k = draw(st.integers(0, n - 1))
    quant = draw(st.sampled_from(["+", "*", "{2}", "{1,2}", "{2,}"]))
    items = []
    for i, t in enumerate(types):
        items.append(f"{t}{quant} v{i}[]" if i == k else f"{t} v{i}")
    op = draw(st.sampled_from(["SEQ", "SEQ", "AND"]))
    if op == "AND" and n > 2:
        pat = f"SEQ({items[0]}, AND({', '.join(items[1:])}))" if k > 0 else \
            f"AND({items[0]}, SEQ({', '.join(items[1:])}))"
    else:
        pat = f"{op}({', '.join(items)})"
    others = [i for i in range(n) if i != k]
    conds = []
    if draw(st.booleans()):
        j = draw(st.sampled_from(others))
        conds.append(f"v{k}.x {draw(st.sampled_from(['>', '<', '>=']))} v{j}.x")
    if draw(st.booleans()):
        conds.append(f"v{k}.x != 0")
    if draw(st.booleans()) and len(others) > 1:
        conds.append(f"v{others[0]}.x <= v{others[1]}.x")
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    window = draw(st.sampled_from(["", " WITHIN 3 seconds", " WITHIN 4 EVENTS"]))
    part = draw(st.sampled_from(["", " PARTITION BY k"]))
    return f"PATTERN {pat}{where}{part}{window} USING maximal-grouping"


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_equals_oracle_skip_till_any(shape: str) -> None:
    @settings(max_examples=60, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(query=queries(feature="mixed").filter(_supported), stream=streams())
    def check(query: str, stream: EventBatch) -> None:
        note(f"query:  {query}")
        note(f"stream: {describe(stream)}")
        aq = analyze(query)
        assert _key(evaluate(aq, stream, plan=f"tree:{shape}")) == _key(oracle(aq, stream))

    check()


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_equals_oracle_maximal_grouping(shape: str) -> None:
    @settings(max_examples=80, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(query=grouping_queries(), stream=streams())
    def check(query: str, stream: EventBatch) -> None:
        note(f"query:  {query}")
        note(f"stream: {describe(stream)}")
        aq = analyze(query)
        assert _supported(query)
        assert _key(evaluate(aq, stream, plan=f"tree:{shape}")) == _key(oracle(aq, stream))

    check()


@given(query=grouping_queries(), stream=streams(), cut=st.integers(1, 8),
       snap=st.booleans())
@settings(max_examples=60, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_streaming_with_snapshot_equals_oracle(query: str, stream: EventBatch, cut: int,
                                               snap: bool) -> None:
    """Pushing in two parts (with a snapshot / restore between them) gives the oracle's
    matches: open groups wait across calls and survive the snapshot."""
    aq = analyze(query)
    t = stream.table.sort_by([("__ts", "ascending")])
    ordered = EventBatch(t, stream.time)
    cut = min(cut, len(ordered))
    rt = start(aq, plan="tree")
    out = rt.push(EventBatch(t.slice(0, cut), stream.time))
    if snap:
        blob = rt.snapshot()
        rt = start(aq, plan="tree")
        rt.restore(blob)
    if cut < len(ordered):
        out += rt.push(EventBatch(t.slice(cut), stream.time))
    out += rt.close()
    assert _key(out) == _key(oracle(aq, ordered))


def test_bracket_shape_and_errors() -> None:
    q = ("PATTERN SEQ(G G, M+ M[], D D, I I) WHERE I.value > M.value WITHIN 20 EVENTS "
         "USING maximal-grouping")
    aq = analyze(q)
    s = events("g1@1 m1@2 m2@3 d1@4 i1@5", m1={"value": 1}, m2={"value": 9},
               i1={"value": 5})
    want = ["{'G': 'g1', 'M': ('m1',), 'D': 'd1', 'I': 'i1'}"]
    for shape in ("((G;M);(D;I))", "(G;((M;D);I))", "(((G;M);D);I)", "(G;(M;(D;I)))",
                  "((G;(M;D));I)"):
        got = [str(dict(m.bindings)) for m in evaluate(aq, s, plan=f"tree:{shape}")]
        assert got == want, shape
    cp = choose(aq, plan="tree:((G;M);(D;I))")
    assert cp.plan.shape == "((G;M);(D;I))"
    with pytest.raises(QueryValidationError, match="not an item"):
        choose(aq, plan="tree:((G;X);(D;I))")
    with pytest.raises(QueryValidationError, match="every item"):
        choose(aq, plan="tree:((G;M);D)")
    with pytest.raises(QueryValidationError, match="joins items of a SEQ"):
        choose(aq, plan="tree:((G&M);(D;I))")
    with pytest.raises(QueryValidationError, match="takes no option"):
        choose(analyze("PATTERN SEQ(A a, B b)"), plan="nfa:left")


def test_explain_shows_every_shape_estimate_and_the_nfa() -> None:
    aq = analyze("PATTERN SEQ(A a, B b, C c, D d) WITHIN 10 EVENTS")
    stats = Stats(type_share={"A": 0.4, "B": 0.3, "C": 0.2, "D": 0.1})
    text = explain(aq, stats=stats)
    assert "nfa      estimated cost" in text and "tree     estimated cost" in text
    shapes = explain(aq, stats=stats, plan="tree")
    for name in ("tree:left", "tree:right", "tree:bushy", "tree:inner"):
        assert f"{name} " in shapes
    assert shapes.count("estimated cost") >= 4 + 2


def test_cost_model_prefers_starting_from_rare_classes() -> None:
    """The rare pair first: with D very rare and A frequent, the right-deep tree (which joins
    C;D first) is estimated cheaper than the left-deep one (A;B first)."""
    from kleene.plans.tree import compile_tree, shape_costs

    aq = analyze("PATTERN SEQ(A a, B b, C c, D d) WITHIN 100 EVENTS")
    plan = compile_tree(aq)
    costs = {n: c for n, _t, c in shape_costs(plan, Stats(
        type_share={"A": 0.6, "B": 0.3, "C": 0.05, "D": 0.05}))}
    assert costs["right"] < costs["left"]


def test_run_cap_raises_and_truncates() -> None:
    aq = analyze("PATTERN SEQ(A a, B+ b[], C c)")
    s = events(" ".join(f"b{i}@{i}" for i in range(1, 16)) + " a1@16")
    with pytest.raises(CapacityError, match="max_runs_per_partition"):
        evaluate(aq, s, plan="tree", max_runs_per_partition=100)
    with pytest.warns(RuntimeWarning):
        evaluate(aq, s, plan="tree", max_runs_per_partition=100, on_cap="truncate")


def test_kleene_first_grouping_is_flat_where_skip_till_any_explodes() -> None:
    """FAEM's Kleene-first query: the tree keeps one composite per anchor (maximal groups)."""
    n = 2000
    names = " ".join(f"a{i}@{i}" if i % 4 else f"b{i}@{i}" for i in range(1, n))
    s = events(names + f" c1@{n} d1@{n + 1}")
    aq = analyze("PATTERN SEQ(A+ a[], B b, C c, D d) WITHIN 100000 EVENTS "
                 "USING maximal-grouping")
    got = evaluate(aq, s, plan="tree")
    assert len(got) == (n - 1) // 4  # one match per B: every A before it
    assert [len(m.bindings["a"]) for m in got[:2]] == [3, 6]
    assert len(got[-1].bindings["a"]) == (n - 5) - (n - 5) // 4
    skip_any = analyze("PATTERN SEQ(A+ a[], B b, C c, D d) WITHIN 100000 EVENTS")
    with pytest.raises(CapacityError):
        evaluate(skip_any, s, plan="nfa")


def test_spark_split_reads_ahead_for_open_groups() -> None:
    """A maximal group may take events after the match's last event so far: Spark's split
    tasks read ahead by the window, as for a trailing NOT (no Spark needed: planning only)."""
    from kleene.spark.plan import plan_query

    sp = plan_query(analyze("PATTERN SEQ(G g, M+ m[]) WITHIN 2 seconds "
                            "USING maximal-grouping"))
    assert sp.mode == "split" and sp.lookahead_us == 2_000_000
    plain = plan_query(analyze("PATTERN SEQ(G g, M+ m[]) WITHIN 2 seconds"))
    assert plain.lookahead_us == 0
