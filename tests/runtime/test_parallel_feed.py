"""Keyed parallelism fed while the input is read (kleene.runtime.parallel.KeyedFeed): chunks
go to the workers as they come, in many small pieces, and the result is the single-process
one, match for match and in order (issue 15)."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from kleene.api import analyze
from kleene.errors import KleeneError
from kleene.events import EventBatch, Match
from kleene.events.textcols import utf8_bytes
from kleene.events.writers import JsonLinesWriter
from kleene.plans import choose
from kleene.runtime import parallel
from kleene.runtime.engine import Runtime, run_batch
from kleene.testing.strategies import describe, queries, streams


def _key(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [(m.query, dict(m.bindings), m.start, m.end, dict(m.values)) for m in ms]


def _chunks(stream: EventBatch, cuts: list[int]) -> list[EventBatch]:
    """``stream`` cut at ``cuts`` (positions), in order: chunks of one, two, ... events."""
    edges = [0, *sorted({c % (len(stream) + 1) for c in cuts}), len(stream)]
    return [EventBatch(stream.table.slice(a, b - a), stream.time)
            for a, b in zip(edges, edges[1:], strict=False) if b > a]


def _feed(compiled: Any, chunks: list[EventBatch], workers: int,
          **kw: Any) -> parallel.ParallelRun:
    feed = parallel.KeyedFeed(compiled, workers, {}, min_events=0, **kw)
    for c in chunks:
        feed.push(c)
    run = feed.finish()
    assert run is not None, "the feed gave up on an ordered input with no cap reached"
    return run


def test_feed_of_many_small_chunks_equals_one_process() -> None:
    @settings(max_examples=40, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(query=queries(feature="mixed"), stream=streams(min_events=4, max_events=14),
           cuts=st.lists(st.integers(0, 14), max_size=10))
    def check(query: str, stream: EventBatch, cuts: list[int]) -> None:
        try:
            aq = analyze(query)
            if not aq.partition_by:
                aq = analyze(dataclasses.replace(aq.query, partition_by=("k",)))
            compiled = choose(aq)
        except KleeneError:
            assume(False)
            return
        chunks = _chunks(stream, cuts)
        note(f"query:  {query} (PARTITION BY k)")
        note(f"stream: {describe(stream)}; chunks {[len(c) for c in chunks]}")
        one = run_batch(Runtime(compiled), stream)
        for workers in (2, 3):
            got = _feed(compiled, chunks, workers)
            assert _key(got.matches) == _key(one), f"{workers} fed workers differ"
        lines = _feed(compiled, chunks, 2,
                      texts=JsonLinesWriter(io.StringIO(), stream.time).texts)
        out = io.StringIO()
        JsonLinesWriter(out, stream.time).write(one)
        if lines.texts is None:  # every key hashed to one worker: the matches came back
            assert lines.workers == 1
            written = _jsonl(lines.matches, stream)
        else:
            written = "".join(bytes(utf8_bytes(t)).decode() for t in lines.texts)
        assert written == out.getvalue(), "worker-formatted lines differ"

    check()


def _jsonl(matches: list[Match], stream: EventBatch) -> str:
    out = io.StringIO()
    JsonLinesWriter(out, stream.time).write(matches)
    return out.getvalue()


def test_feed_counts_and_single_events_chunks_match_one_process() -> None:
    """One event per chunk, 600 events over 12 keys, count mode and matches."""
    rng = np.random.default_rng(5)
    n = 600
    t = pa.table({"__id": pa.array(np.arange(n)), "__ts": pa.array(np.arange(n) * 1000),
                  "__type": pa.array(rng.choice(["A", "B"], n).tolist()),
                  "k": pa.array(rng.integers(0, 12, n)), "x": pa.array(rng.integers(0, 9, n))})
    stream = EventBatch(t)
    compiled = choose(analyze("PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k "
                              "WITHIN 60 ms"))
    one = run_batch(Runtime(compiled), stream)
    assert len(one) > 50
    chunks = _chunks(stream, list(range(n)))
    assert len(chunks) == n
    got = _feed(compiled, chunks, 2)
    assert got.workers == 2 and _key(got.matches) == _key(one)
    counted = parallel.KeyedFeed(compiled, 2, {"count_only": True}, min_events=0)
    for c in chunks:
        counted.push(c)
    run = counted.finish()
    assert run is not None and run.counters.matches == len(one)


def test_feed_gives_up_when_a_cap_is_reached() -> None:
    """The per-call cap counts per push: a chunked run that reaches it is not used (None),
    and run_parallel's one push decides."""
    t = pa.table({"__id": pa.array(np.arange(40)), "__ts": pa.array(np.arange(40)),
                  "__type": pa.array(["A"] * 40), "k": pa.array([i % 4 for i in range(40)])})
    compiled = choose(analyze("PATTERN SEQ(A a, A b) PARTITION BY k"))
    feed = parallel.KeyedFeed(compiled, 2, {"max_matches_per_call": 10}, min_events=0)
    for c in _chunks(EventBatch(t), list(range(0, 40, 3))):
        feed.push(c)
    assert feed.finish() is None
    assert feed.redo is not None and "max_matches_per_call" in feed.redo  # the cap, no other failure
