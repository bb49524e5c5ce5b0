"""Keyed parallelism while streaming (kleene.runtime.parallel.ParallelStream): push / advance /
close over worker processes return what one Runtime returns, call for call and in order, also
out of order within the allowed lateness and across snapshot / restore (issue 15)."""

from __future__ import annotations

import dataclasses
import hashlib
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
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
from kleene.runtime.parallel import ParallelStream, key_workers
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.strategies import describe, queries, streams


def _keys(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [m.key() for m in ms]


def _flat(pieces: list[Any]) -> list[tuple[Any, ...]]:
    """The matches of sink pieces (column parts or lists), in order, by key."""
    return [m.key() for p in pieces for m in (p if isinstance(p, list) else p.matches())]


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


def _do_to(rt: Any, call: tuple[str, Any], chunk: int) -> list[Any]:
    """The call through ``push_to`` / ``advance_to`` / ``close_to``: its pieces (each checked
    non-empty and at most ``chunk``, their total the returned count)."""
    op, arg = call
    pieces: list[Any] = []
    n = (rt.push_to(arg, pieces.append, chunk=chunk) if op == "push"
         else rt.advance_to(arg, pieces.append, chunk=chunk) if op == "advance"
         else rt.close_to(pieces.append, chunk=chunk))
    assert all(0 < len(p) <= chunk for p in pieces) and n == sum(map(len, pieces))
    return pieces


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
        # per call: the list (0), or push_to / advance_to / close_to in pieces of 1-3
        chunks = [data.draw(st.sampled_from([0, 1, 2, 3])) for _ in calls]
        note(f"query: {query} (PARTITION BY k); lateness {lateness}; {workers} workers")
        note(f"stream: {describe(stream)}; calls {[c[0] for c in calls]}; snapshot at {snap_at}"
             f"; chunks {chunks}")
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
                got = _flat(_do_to(par, call, chunks[i])) if chunks[i] else _keys(_do(par, call))
                assert got == _keys(want), f"call {i} ({call[0]}, chunk {chunks[i]}) differs"
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


@pytest.mark.parametrize("chunk", [0, 1])
def test_a_match_waits_for_an_earlier_one_pending_in_another_worker(chunk: int) -> None:
    """Partition u's match (its b earlier) waits on a trailing NOT until ts 6; partition v's
    (its b later) is settled at ts 5. One runtime holds v's until u's is out: so does the
    coordinator, although v's worker released it (u, v and NULL go to three workers); also
    through ``push_to`` / ``close_to`` (``chunk`` 1).

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
            want = one.push(batch)
            got = _flat(_do_to(par, ("push", batch), chunk)) if chunk \
                else _keys(par.push(batch))
            assert got == _keys(want), f"push {i}"
            per_call.append(len(got))
        want = one.close()
        got = _flat(_do_to(par, ("close", None), chunk)) if chunk else _keys(par.close())
        assert got == _keys(want)
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


EXPLODE = """PATTERN SEQ(Stock a, Stock+ b[], Stock c) PARTITION BY symbol WITHIN 1 minute
USING skip-till-any-match"""
"""Every non-empty subset of the events between two events of a symbol: 130,918 matches
from 17 events of one symbol (the chain plan's Kleene join: blocks, expanded when
written)."""


def _two_workers_stream(per_symbol: int) -> EventBatch:
    """``per_symbol`` events of each of two symbols that go to different workers (of 2),
    interleaved."""
    names = [f"S{i}" for i in range(10)]
    dest = key_workers(pa.table({"symbol": names}), ["symbol"], 2)
    pick = [names[int(np.flatnonzero(dest == w)[0])] for w in (0, 1)]
    return EventBatch.from_records([{"id": i, "type": "Stock", "ts": i, "symbol": pick[i % 2]}
                                    for i in range(2 * per_symbol)])


def _digest(h: Any) -> Callable[[Any], None]:
    """A sink adding every match's key to ``h`` (whatever the pieces' sizes)."""
    def sink(piece: Any) -> None:
        for m in piece if isinstance(piece, list) else piece.matches():
            h.update(repr(m.key()).encode())
    return sink


def test_push_to_over_workers_holds_no_list_of_the_calls_matches() -> None:
    """One push of 262k matches (two partitions, one per worker) through ``push_to``: the
    coordinator's traced peak stays a few pieces' (the old path held every match: ~160 MB);
    pieces of at most ``chunk``; the matches are one runtime's, in order (a digest of their
    keys, in a second stream: building them under tracing would take long)."""
    events = _two_workers_stream(17)
    compiled = kleene.compile(EXPLODE, plan="chain").compiled_plan
    caps: dict[str, Any] = {"max_matches_per_call": None, "max_matches_per_event": None}
    sizes: list[int] = []
    par = ParallelStream(compiled, 2, **caps)
    try:
        par.advance(-1)  # the workers are forked before tracing (they do not trace then)
        tracemalloc.start()
        try:
            n = par.push_to(events, lambda p: sizes.append(len(p)), chunk=4096)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        # a pair of events d apart encloses 2**(d-1) - 1 lists; 17 - d pairs per symbol
        assert par.workers == 2 and n == sum(sizes) == 2 * sum(
            (17 - d) * (2 ** (d - 1) - 1) for d in range(2, 17))
        assert max(sizes) <= 4096 and peak < 16 * 2 ** 20, f"peak {peak / 2 ** 20:.1f} MB"
    finally:
        par.shutdown()
    got, want = hashlib.sha256(), hashlib.sha256()
    par = ParallelStream(compiled, 2, **caps)
    one = Runtime(compiled, **caps)
    try:
        assert par.push_to(events, _digest(got), chunk=4096) == n
        assert one.push_to(events, _digest(want), chunk=4096) == n
        assert got.digest() == want.digest()
        assert par.counters.matches == one.counters.matches == n
    finally:
        par.shutdown()


def test_a_failing_sink_leaves_the_stream_as_one_runtime_leaves_it() -> None:
    """A sink that raises stops the call's writing (the error reaches the caller), as in one
    runtime, which keeps what it holds: here v's match, settled in the failing call but held
    behind u's pending one. The next call returns what one runtime returns (u's, then v's).

        ts   0  1  1.5  2  3  3.5  6.8  9
        x    a  b                         window ends 5: written (and the sink fails)
        v          a          b           window ends 6.5: settled at 6.8, held behind u's
        u               a  b              window ends 7
        -                          d   d
    """
    q = "PATTERN SEQ(A a, B b, NOT C c) PARTITION BY k WITHIN 5 seconds"
    compiled = choose(analyze(q))
    recs = [("a1", "A", 0.0, "x"), ("b1", "B", 1.0, "x"), ("a2", "A", 1.5, "v"),
            ("a3", "A", 2.0, "u"), ("b3", "B", 3.0, "u"), ("b2", "B", 3.5, "v"),
            ("d1", "D", 6.8, None), ("d2", "D", 9.0, None)]
    t = EventBatch.from_records([{"id": i, "type": ty, "ts": ts, "k": k}
                                 for i, ty, ts, k in recs])
    par = ParallelStream(compiled, 3)
    one = Runtime(compiled)
    seen: list[Any] = []

    def fail(piece: Any) -> None:
        seen.append(piece)
        raise ValueError("sink full")

    try:
        for rt in (par, one):
            assert rt.push(EventBatch(t.table.slice(0, 6), t.time)) == []
            with pytest.raises(ValueError, match="sink full"):
                rt.push_to(EventBatch(t.table.slice(6, 1), t.time), fail, chunk=1)
        assert _flat(seen[:1]) == _flat(seen[1:]) and len(seen) == 2  # x's, once each
        for call in [("push", EventBatch(t.table.slice(7), t.time)), ("close", None)]:
            assert _flat(_do_to(par, call, 1)) == _keys(_do(one, call))
        assert par.counters.matches == one.counters.matches == 3 and par.workers == 3
    finally:
        par.shutdown()
