"""The ``runs`` plan (kleene.plans.runs): SEQ(a, b+, c) under strict contiguity with array
operations must give the oracle's matches in the oracle's order, whole or pushed in pieces,
across snapshots, under every cap, and its column hand-over must write the same bytes."""

from __future__ import annotations

import io
import warnings
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import kleene
from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch, Match
from kleene.events.matchtable import MatchTable
from kleene.events.writers import open_writer
from kleene.plans import get_plan_kind, start
from kleene.plans.registry import choose
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.strategies import describe

CONDS = (
    "a.x > 0", "b[1].x > a.x", "b[i].x > b[i-1].x", "b[i].x >= b[i-1].x", "c.x < a.x",
    "c.x != a.x", "b[i].x < 3", "c.s = 'pa'", "b[1].x + 1 > a.x", "b[i].s >= b[i-1].s",
    "c.x = a.x", "b[i].x <= 2.5", "a.s != 'q'", "c.x > 1",
)
"""Conjuncts over a, b[1], b[i] / b[i-1] and c: comparisons of numbers (array form), of
strings and with arithmetic (per pair, by the compiled function)."""


@st.composite
def run_queries(draw: st.DrawFn) -> str:
    ta, tb, tc = (draw(st.sampled_from(("A", "A", "A", "B"))) for _ in range(3))
    rep = draw(st.sampled_from(("+", "+", "{2,}", "{1,2}", "{2,3}")))
    conds = draw(st.lists(st.sampled_from(CONDS), max_size=3, unique=True))
    where = f"WHERE {' AND '.join(conds)}\n" if conds else ""
    part = draw(st.sampled_from(("PARTITION BY k\n", "PARTITION BY k\n", "")))
    within = draw(st.sampled_from(("", "WITHIN 2 seconds\n", "WITHIN 3 seconds\n")))
    return (f"PATTERN SEQ({ta} a, {tb}{rep} b[], {tc} c)\n{where}{part}{within}"
            "USING strict-contiguity\n")


def _key(ms: Any) -> list[tuple[Any, ...]]:
    return [(m.query, dict(m.bindings), m.start, m.end, dict(m.values)) for m in ms]


def _ordered(ev: EventBatch) -> EventBatch:
    t = ev.table
    return EventBatch(t.take(pc.sort_indices(t, [("__ts", "ascending")])), ev.time)


@st.composite
def run_streams(draw: st.DrawFn, max_events: int = 14) -> EventBatch:
    """Streams where runs are common: mostly type A, ``x`` small ints (rarely NULL or a
    float), ``s`` short strings, partition ``k`` (u, v, rarely NULL), timestamps with ties."""
    n = draw(st.integers(2, max_events))
    recs = []
    for i in range(n):
        recs.append({"id": f"e{i}", "type": draw(st.sampled_from(("A", "A", "A", "B", "C"))),
                     "ts": draw(st.integers(1, 8)),
                     "k": draw(st.sampled_from(("u", "v", "u", "v", None))),
                     "s": draw(st.sampled_from(("pa", "pb", "q", None))),
                     "x": draw(st.sampled_from((0, 1, 2, 3, 4, 1, 2, 3, None)))})
    return EventBatch.from_records(recs)


SETTINGS = settings(max_examples=150, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(query=run_queries(), stream=run_streams(12))
def test_runs_equals_oracle(query: str, stream: EventBatch) -> None:
    note(f"query:  {query}")
    note(f"stream: {describe(stream)}")
    aq = analyze(query)
    assert get_plan_kind("runs").supports(aq) is None
    want = _key(oracle(aq, stream))
    got = _key(kleene.plans.evaluate(aq, stream, plan="runs"))
    assert got == want


@SETTINGS
@given(query=run_queries(), stream=run_streams(14), cuts=st.lists(
    st.integers(0, 14), max_size=4), snap=st.integers(0, 4))
def test_runs_streamed_in_pieces_and_restored(query: str, stream: EventBatch,
                                              cuts: list[int], snap: int) -> None:
    """Pushed in pieces (runs spanning pieces), with a snapshot restored into a fresh
    runtime after piece ``snap``: the same matches as one evaluation."""
    note(f"query:  {query}")
    aq = analyze(query)
    ev = _ordered(stream)
    want = _key(oracle(aq, ev))
    bounds = sorted({0, len(ev), *(min(c, len(ev)) for c in cuts)})
    rt = start(aq, plan="runs")
    got: list[Match] = []
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        got += rt.push(ev.slice(lo, hi - lo))
        if i == snap:
            blob = rt.snapshot()
            rt = start(aq, plan="runs")
            rt.restore(blob)
    got += rt.close()
    assert _key(got) == want


@SETTINGS
@given(query=run_queries(), stream=run_streams(14),
       cap=st.sampled_from(("max_runs_per_partition", "max_matches_per_event",
                            "max_matches_per_call")),
       limit=st.integers(1, 3), on_cap=st.sampled_from(("error", "truncate")))
def test_runs_caps_equal_nfa(query: str, stream: EventBatch, cap: str, limit: int,
                             on_cap: str) -> None:
    """Every cap: the same error (message included), or the same kept matches and counts of
    what was dropped, as the NFA plan."""
    note(f"query:  {query}")
    aq = analyze(query)
    ev = _ordered(stream)
    out = {}
    for plan in ("nfa", "runs"):
        rt = start(aq, plan=plan, on_cap=on_cap, **{cap: limit})
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                ms = rt.push(ev)
                ms += rt.close()
            c = rt.counters
            out[plan] = (_key(ms), c.truncated_runs, c.truncated_matches, c.events_skipped)
        except CapacityError as exc:
            out[plan] = (str(exc).replace("'runs'", "Q").replace("'nfa'", "Q"), exc.cap)
    assert out["runs"] == out["nfa"]


@SETTINGS
@given(query=run_queries(), stream=run_streams(14), ints=st.booleans())
def test_runs_columns_write_the_same_bytes(query: str, stream: EventBatch,
                                          ints: bool) -> None:
    """The column hand-over (MatchTable) and the Match objects write the same JSON Lines,
    CSV and Parquet (string ids, and integer ids)."""
    aq = analyze(query)
    ev = _ordered(stream)
    if ints:
        t = ev.table
        t = t.set_column(t.column_names.index("__id"), "__id",
                         pa.array(range(100, 100 + len(ev)), pa.int64()))
        ev = EventBatch(t, ev.time)
    rt = start(aq, plan="runs")
    rt.columnar = True
    table = rt.push(ev)
    table += rt.close()
    assert isinstance(table, MatchTable)
    plain = kleene.plans.evaluate(aq, ev, plan="runs")
    assert _key(table) == _key(plain)
    for fmt in ("jsonl", "csv"):
        a, b = io.StringIO(), io.StringIO()
        with open_writer(a, fmt, ev.time) as w:
            w.write(table)
        with open_writer(b, fmt, ev.time) as w:
            w.write(plain)
        assert a.getvalue() == b.getvalue()


def test_stock_query_chooses_runs_and_matches_the_nfa() -> None:
    """The benchmark's stock query: the chooser takes the runs plan; on a tiny stream with a
    carried run, a window expiry and two symbols it finds the NFA's matches."""
    q = ("PATTERN SEQ(Stock a, Stock+ b[], Stock c)\n"
         "WHERE b[1].price > a.price AND b[i].price > b[i-1].price AND c.price < a.price\n"
         "PARTITION BY symbol WITHIN 10 seconds USING strict-contiguity")
    aq = analyze(q)
    assert choose(aq).choice.chosen == "runs"
    rows = [("s1", 0, 5.0), ("s2", 1, 1.0), ("s1", 2, 6.0), ("s1", 3, 7.0), ("s2", 4, 2.0),
            ("s1", 4, 4.0), ("s2", 5, 0.5), ("s1", 6, 1.0), ("s1", 7, 2.0), ("s1", 8, 3.0),
            ("s1", 30, 0.0)]
    ev = EventBatch.from_records([{"id": f"e{i}", "type": "Stock", "ts": t, "symbol": s,
                                   "price": p} for i, (s, t, p) in enumerate(rows)])
    got = [(dict(m.bindings)) for m in kleene.plans.evaluate(aq, ev, plan="runs")]
    assert got == [dict(m.bindings) for m in kleene.plans.evaluate(aq, ev, plan="nfa")]
    assert got == [{"a": "e0", "b": ("e2", "e3"), "c": "e5"},
                   {"a": "e2", "b": ("e3",), "c": "e5"},
                   {"a": "e1", "b": ("e4",), "c": "e6"}]


@pytest.mark.parametrize("query, why", [
    ("PATTERN SEQ(A a, B+ b[], C c) USING skip-till-any-match", "strict-contiguity only"),
    ("PATTERN SEQ(A a, B+ b[]) USING strict-contiguity", "SEQ(a, b+, c) only"),
    ("PATTERN SEQ(A a, B+ b[], C c) WHERE c.x > b[last].x USING strict-contiguity",
     "conjuncts over a, b[1]"),
    ("PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > a.x USING strict-contiguity",
     "conjuncts over a, b[1]"),
])
def test_runs_refuses_with_its_reason(query: str, why: str) -> None:
    reason = get_plan_kind("runs").supports(analyze(query))
    assert reason is not None and why in reason


@SETTINGS
@given(query=run_queries(), stream=run_streams(14), cuts=st.lists(st.integers(0, 14),
                                                                   max_size=3),
       lateness=st.sampled_from((0, 1_000_000, 3_000_000)), wm=st.booleans())
def test_runs_out_of_order_with_lateness_equals_nfa(query: str, stream: EventBatch,
                                                    cuts: list[int], lateness: int,
                                                    wm: bool) -> None:
    """Events pushed in arrival order (not sorted) with an allowed lateness, a watermark
    after each piece: the same matches per call and the same late events as the NFA."""
    note(f"query:  {query}")
    aq = analyze(query)
    bounds = sorted({0, len(stream), *(min(c, len(stream)) for c in cuts)})
    out = {}
    for plan in ("nfa", "runs"):
        rt = start(aq, plan=plan, allowed_lateness_us=lateness)
        calls = []
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            piece = stream.slice(lo, hi - lo)
            calls.append(_key(rt.push(piece)))
            if wm:
                calls.append(_key(rt.advance(int(piece.ts.max()) - lateness)))
        calls.append(_key(rt.close()))
        late = rt.late
        out[plan] = (calls, None if late is None else late.table.column("__id").to_pylist())
    assert out["runs"] == out["nfa"]


def test_long_run_expanded_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """One increasing run of 40 events then a drop: every start matches; the candidate pairs
    expanded a few at a time (``PAIRS``) give the NFA's matches."""
    import kleene.runtime.runs as runs_mod

    monkeypatch.setattr(runs_mod, "PAIRS", 7)
    aq = analyze("PATTERN SEQ(A a, A+ b[], A c) WHERE b[i].x > b[i-1].x AND c.x < a.x "
                 "PARTITION BY k USING strict-contiguity")
    xs = [*range(40), -1]
    ev = EventBatch.from_records([{"id": i, "type": "A", "ts": i, "k": "u", "x": x}
                                  for i, x in enumerate(xs)])
    got = kleene.plans.evaluate(aq, ev, plan="runs")
    assert _key(got) == _key(kleene.plans.evaluate(aq, ev, plan="nfa"))
    assert [(m.bindings["a"], m.bindings["c"]) for m in got] == [(i, 40) for i in range(39)]
