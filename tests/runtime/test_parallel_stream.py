"""Keyed parallelism while streaming (kleene.runtime.parallel.ParallelStream): push / advance /
close over worker processes return what one Runtime returns, call for call and in order, also
out of order within the allowed lateness and across snapshot / restore (issue 15)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import kleene
from kleene.api import analyze
from kleene.errors import EngineError, KleeneError
from kleene.events import EventBatch, Match
from kleene.events.model import ID, TS
from kleene.plans import choose
from kleene.runtime.engine import Runtime
from kleene.runtime.parallel import ParallelStream
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.strategies import describe, queries, streams


def _keys(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [m.key() for m in ms]


def _script(data: st.DataObject, stream: EventBatch) -> list[tuple[str, Any]]:
    """Cut ``stream`` into pushes, with an ``advance`` to a drawn watermark between some."""
    n = len(stream)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=3))))
    ts = stream.table.column(TS).to_numpy()
    calls: list[tuple[str, Any]] = []
    for a, b in zip([0, *cuts], [*cuts, n], strict=True):
        if a < b:
            calls.append(("push", EventBatch(stream.table.slice(a, b - a), stream.time)))
            if data.draw(st.booleans()):
                calls.append(("advance", int(ts[a:b].max()) + data.draw(st.integers(-1, 1))))
    return [*calls, ("close", None)]


def _do(rt: Any, call: tuple[str, Any]) -> list[Match]:
    op, arg = call
    return list(rt.push(arg) if op == "push" else rt.advance(arg) if op == "advance"
                else rt.close())


@pytest.mark.parametrize("feature", ["partitions", "policies", "kleene", "negation", "mixed"])
def test_stream_over_workers_returns_what_one_runtime_returns(feature: str) -> None:
    @settings(max_examples=30, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(query=queries(feature=feature), stream=streams(min_events=4, max_events=12),
           data=st.data())
    def check(query: str, stream: EventBatch, data: st.DataObject) -> None:
        try:
            aq = analyze(query)
            if not aq.partition_by:
                aq = analyze(dataclasses.replace(aq.query, partition_by=("k",)))
            compiled = choose(aq)
        except KleeneError:
            assume(False)
            return
        lateness = data.draw(st.sampled_from([0, 0, 2]))
        workers = data.draw(st.sampled_from([2, 3]))
        calls = _script(data, stream)
        snap_at = data.draw(st.integers(0, len(calls)))
        note(f"query: {query} (PARTITION BY k); lateness {lateness}; {workers} workers")
        note(f"stream: {describe(stream)}; calls {[c[0] for c in calls]}; snapshot at {snap_at}")
        one = Runtime(compiled, allowed_lateness_us=lateness)
        par = ParallelStream(compiled, workers, allowed_lateness_us=lateness)
        try:
            for i, call in enumerate(calls):
                if i == snap_at and par.reason is None:  # continue in a restored stream
                    blob = par.snapshot()
                    par.shutdown()
                    par = ParallelStream(compiled, workers, allowed_lateness_us=lateness)
                    par.restore(blob)
                want = _do(one, call)
                got = _do(par, call)
                assert _keys(got) == _keys(want), f"call {i} ({call[0]}) differs"
            assert par.counters.matches == one.counters.matches
            assert par.counters.late_events == one.counters.late_events
        finally:
            par.shutdown()

    check()


STOCK = """PATTERN SEQ(Stock a, Stock+ b[], Stock c)
WHERE b[1].price > a.price AND b[i].price > b[i-1].price AND c.price < a.price
PARTITION BY symbol WITHIN 10 minutes USING strict-contiguity"""


def _stock(n: int, symbols: int, seed: int = 7) -> EventBatch:
    rng = np.random.default_rng(seed)
    return EventBatch.from_records([
        {"id": i, "type": "Stock", "ts": i, "symbol": f"S{int(s)}", "price": float(p)}
        for i, (s, p) in enumerate(zip(rng.integers(0, symbols, n),
                                       rng.normal(100, 5, n).round(1), strict=True))])


PAIRS = """PATTERN SEQ(Stock a, Stock b) WHERE b.price > a.price + 3
PARTITION BY symbol WITHIN 8 seconds"""


def test_stream_over_workers_equals_the_oracle_and_really_forks() -> None:
    events = _stock(60, symbols=4)
    aq = analyze(PAIRS)
    compiled = kleene.compile(PAIRS).compiled_plan
    par = ParallelStream(compiled, 2)
    try:
        out: list[Match] = []
        for a in range(0, 60, 7):
            out += par.push(EventBatch(events.table.slice(a, 7), events.time))
        out += par.close()
        assert par.workers == 2 and par.reason is None
        assert len(out) > 3
        assert _keys(out) == _keys(oracle(aq, events))
    finally:
        par.shutdown()


def test_a_snapshot_restores_only_with_as_many_workers() -> None:
    events = _stock(40, symbols=4)
    compiled = kleene.compile(STOCK).compiled_plan
    par = ParallelStream(compiled, 2)
    other = ParallelStream(compiled, 3)
    try:
        par.push(events)
        blob = par.snapshot()
        with pytest.raises(EngineError, match="taken with 2 worker"):
            other.restore(blob)
        with pytest.raises(EngineError, match="taken with 1 worker"):  # one Runtime's
            par.restore(Runtime(compiled).snapshot())
    finally:
        par.shutdown()
        other.shutdown()


def test_a_query_without_partitions_streams_in_one_runtime_and_says_why() -> None:
    compiled = kleene.compile("PATTERN SEQ(Stock a, Stock b) WHERE b.price > a.price"
                              ).compiled_plan
    par = ParallelStream(compiled, 2)
    assert par.workers == 1 and par.reason is not None and "PARTITION BY" in par.reason
    events = _stock(30, symbols=3)
    got = par.push(events) + par.close()
    rt = Runtime(compiled)
    assert _keys(got) == _keys(rt.push(events) + rt.close()) and len(got) > 0


def test_late_events_are_kept_like_one_runtime() -> None:
    events = _stock(30, symbols=3)
    compiled = kleene.compile(STOCK).compiled_plan
    par = ParallelStream(compiled, 2)
    one = Runtime(compiled)
    try:
        for rt in (par, one):
            rt.push(EventBatch(events.table.slice(10), events.time))
            rt.push(EventBatch(events.table.slice(0, 10), events.time))  # behind the frontier
        late, want = par.late, one.late
        assert late is not None and want is not None
        assert late.table.column(ID).to_pylist() == want.table.column(ID).to_pylist()
        assert len(late) == 10 and par.counters.late_events == 10
    finally:
        par.shutdown()


def test_a_match_waits_for_an_earlier_one_pending_in_another_worker() -> None:
    """Partition u's match (its b earlier) waits on a trailing NOT until ts 6; partition v's
    (its b later) is settled at ts 5. One runtime holds v's until u's is out: so does the
    coordinator, although v's worker released it (u, v and NULL go to three workers).

        ts   0    1    2    3    5.5  7
        u         a    b                 window of u's match ends at 6
        v    a              b            window of v's match ends at 5
        -                        d    d  (the frontier moves)
    """
    q = "PATTERN SEQ(A a, B b, NOT C c) PARTITION BY k WITHIN 5 seconds"
    compiled = choose(analyze(q))
    recs = [("a1", "A", 0.0, "v"), ("a2", "A", 1.0, "u"), ("b1", "B", 2.0, "u"),
            ("b2", "B", 3.0, "v"), ("d1", "D", 5.5, None), ("d2", "D", 7.0, None)]
    events = EventBatch.from_records([{"id": i, "type": t, "ts": ts, "k": k}
                                      for i, t, ts, k in recs])
    par = ParallelStream(compiled, 3)
    one = Runtime(compiled)
    try:
        per_call = []
        for i in range(len(recs)):
            batch = EventBatch(events.table.slice(i, 1), events.time)
            want, got = one.push(batch), par.push(batch)
            assert _keys(got) == _keys(want), f"push {i}"
            per_call.append(len(got))
        want, got = one.close(), par.close()
        assert _keys(got) == _keys(want)
        assert par.workers == 3 and per_call == [0, 0, 0, 0, 0, 2]  # both at ts 7, u first
    finally:
        par.shutdown()


def test_compile_with_workers_starts_a_stream_over_workers() -> None:
    events = _stock(60, symbols=4)
    par = kleene.compile(PAIRS, workers=2).start()
    one = kleene.compile(PAIRS).start()
    try:
        assert isinstance(par, ParallelStream) and par.workers == 2
        got = par.push(events) + par.close()
        assert _keys(got) == _keys(one.push(events) + one.close()) and len(got) > 3
    finally:
        par.shutdown()


def _flat(pieces: list[Any]) -> list[tuple[Any, ...]]:
    """The matches of sink pieces (column parts or lists), in order, by key."""
    return [m.key() for p in pieces for m in (p if isinstance(p, list) else p.matches())]


def test_push_to_writes_in_pieces_what_push_and_one_runtime_return() -> None:
    """push_to / advance_to / close_to over workers: each call's pieces (at most ``chunk``
    matches each, none empty) concatenate to what ``push`` over workers and one Runtime
    return for it, also across a snapshot restored into a new stream."""
    events = _stock(240, symbols=5)
    compiled = kleene.compile(STOCK).compiled_plan
    t = events.table
    calls: list[tuple[str, Any]] = []
    for a in range(0, 240, 37):
        calls.append(("push", EventBatch(t.slice(a, 37), events.time)))
        if a == 74:
            calls.append(("advance", int(t.column(TS)[min(a + 36, 239)].as_py()) + 1))
    calls.append(("close", None))
    sinking = ParallelStream(compiled, 2)
    plain = ParallelStream(compiled, 2)
    one = Runtime(compiled)
    written = []
    try:
        for i, (op, arg) in enumerate(calls):
            if i == 3:  # continue in a restored stream
                blob = sinking.snapshot()
                sinking.shutdown()
                sinking = ParallelStream(compiled, 2)
                sinking.restore(blob)
            pieces: list[Any] = []
            if op == "push":
                n = sinking.push_to(arg, pieces.append, chunk=3)
            elif op == "advance":
                n = sinking.advance_to(arg, pieces.append, chunk=3)
            else:
                n = sinking.close_to(pieces.append, chunk=3)
            want = _do(one, (op, arg))
            assert _flat(pieces) == _keys(_do(plain, (op, arg))) == _keys(want), f"call {i}"
            assert n == len(want) and all(0 < len(p) <= 3 for p in pieces)
            written.append(n)
        assert sinking.workers == 2 and sum(written) == one.counters.matches
        assert max(written) > 3  # some call wrote several pieces
        assert sinking.counters.matches == one.counters.matches
    finally:
        sinking.shutdown()
        plain.shutdown()


def test_push_to_in_one_runtime_writes_what_runtime_push_to_writes() -> None:
    compiled = kleene.compile("PATTERN SEQ(Stock a, Stock b) WHERE b.price > a.price"
                              ).compiled_plan
    par = ParallelStream(compiled, 2)
    assert par.workers == 1
    one = Runtime(compiled)
    events = _stock(30, symbols=3)
    got: list[Any] = []
    want: list[Any] = []
    assert par.push_to(events, got.append, chunk=4) == one.push_to(events, want.append,
                                                                   chunk=4)
    assert par.close_to(got.append) == one.close_to(want.append)
    assert _flat(got) == _flat(want) and len(got) > 1


@pytest.mark.parametrize("chunk", [0, -1, True, 2.5])
def test_push_to_refuses_a_bad_chunk_before_pushing(chunk: Any) -> None:
    compiled = kleene.compile(PAIRS).compiled_plan
    par = ParallelStream(compiled, 2)
    try:
        with pytest.raises(EngineError, match="chunk must be a positive number"):
            par.push_to(_stock(20, symbols=2), lambda p: None, chunk=chunk)
        assert par.counters.events_in == 0  # nothing was pushed
    finally:
        par.shutdown()
