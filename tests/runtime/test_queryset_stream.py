"""QuerySetRuntime.push_to / advance_to / close_to (docs/engine.md, "Streaming output"): the
set's matches written to a sink in pieces, in the set's order (docs/semantics.md §17), equal
to ``push`` and to the oracle, with the chain plan's blocks read only as they are written."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any

import pytest

import kleene
from kleene.errors import EngineError
from kleene.events import EventBatch, Match
from kleene.events.matchtable import MatchColumns
from kleene.queryset import QuerySet
from kleene.testing.oracle import evaluate_set

from .sinks import Collect
from .test_queryset import _consumer, _producer, _query, _stream


def _keys(ms: list[Match]) -> list[Any]:
    return [(m.query, m.bindings, m.start, m.end, m.values) for m in ms]


def _chain_set(texts: list[str], chain: set[int], **options: Any) -> QuerySet:
    """A set whose queries ``chain`` run on the chain plan (the chooser's defaults pick the
    NFA for small inputs), the others on their chosen plan or in the network."""
    compiled = tuple(kleene.compile(t, plan="chain" if i in chain else None, **options)
                     for i, t in enumerate(texts))
    return QuerySet(compiled, "auto", dict(options))


def _kleene(rng: random.Random, name: str) -> str:
    ta, tb, tc = rng.choice(("ABC", "ABA", "BBC", "AAA"))
    where = rng.choice(["", " WHERE c.x > a.x", " WHERE [src]", " WHERE b.x > 0"])
    key = rng.choice(["", " PARTITION BY src"])
    return (f"NAME {name} PATTERN SEQ({ta} a, {tb}+ b[], {tc} c){where}{key} "
            f"WITHIN {rng.randint(2, 8)} seconds")


def _seq(rng: random.Random, name: str) -> str:
    types = rng.sample("ABCD", rng.randint(2, 3))
    body = ", ".join(f"{t} {t.lower()}{i}" for i, t in enumerate(types))
    return (f"NAME {name} PATTERN SEQ({body}){rng.choice(['', ' PARTITION BY src'])} "
            f"WITHIN {rng.randint(2, 6)} seconds")


def _run(rt: Any, recs: list[dict[str, Any]], cuts: list[int], stream: bool,
         chunk: int, advances: bool = False) -> tuple[list[Match], list[Any]]:
    """Push ``recs`` split at ``cuts`` (an advance after some pushes), then close: the
    matches, and the pieces when streamed."""
    sink = Collect()
    got: list[Match] = []
    n = 0
    for k, (i, j) in enumerate(zip([0, *cuts], [*cuts, len(recs)], strict=True)):
        if j <= i:
            continue
        b = EventBatch.from_records(recs[i:j])
        if stream:
            n += rt.push_to(b, sink, chunk=chunk)
        else:
            got += rt.push(b)
        if advances and k % 2:
            w = int(recs[j - 1]["ts"]) * 1_000_000  # the next events are not below it
            if stream:
                n += rt.advance_to(w, sink, chunk=chunk)
            else:
                got += rt.advance(w)
    if stream:
        n += rt.close_to(sink, chunk=chunk)
        assert n == len(sink.matches)
        assert all(0 < len(p) <= chunk for p in sink.pieces)
        return sink.matches, sink.pieces
    return got + rt.close(), []


def _cuts(rng: random.Random, n: int) -> list[int]:
    return sorted(rng.sample(range(1, n), rng.randint(0, min(5, n - 1))))


@pytest.mark.parametrize("seed", range(60))
def test_streamed_set_equals_push_and_the_oracle(seed: int) -> None:
    """Random sets of a chain-plan Kleene or SEQ query, network queries and queries on
    their own plan; split pushes, advances, chunks of 1-30: the pieces concatenated are
    push's matches in push's order, the oracle's, and the per-query counts agree."""
    rng = random.Random(9100 + seed)
    texts = [_kleene(rng, "k"), _seq(rng, "s")]
    texts += [_query(rng, f"q{i}", shareable=rng.random() < 0.6) for i in range(3)]
    rng.shuffle(texts)
    chain = {i for i, t in enumerate(texts) if t.startswith(("NAME k ", "NAME s "))}
    qs = _chain_set(texts, chain)
    recs = _stream(rng, rng.randint(10, 40))
    cuts = _cuts(rng, len(recs))
    chunk = rng.randint(1, 30)
    advances = rng.random() < 0.4
    a, b = qs.start(), qs.start()
    want, _ = _run(a, recs, cuts, False, chunk, advances)
    got, _ = _run(b, recs, cuts, True, chunk, advances)
    assert _keys(got) == _keys(want)
    assert _keys(want) == _keys(evaluate_set([q.analyzed for q in qs.queries],
                                             EventBatch.from_records(recs)))
    assert a.counts == b.counts
    for name, m in a.members.items():
        if m.runtime is not None:
            assert m.runtime.counters == b.members[name].runtime.counters


def test_the_draw_streams_chain_blocks_among_other_queries() -> None:
    """The random test above is not vacuous: its sets write column pieces (the chain
    plan's) interleaved with lists (the network's and the NFA's)."""
    cols = lists = 0
    for seed in range(60):
        rng = random.Random(9100 + seed)
        texts = [_kleene(rng, "k"), _seq(rng, "s")]
        texts += [_query(rng, f"q{i}", shareable=rng.random() < 0.6) for i in range(3)]
        rng.shuffle(texts)
        chain = {i for i, t in enumerate(texts) if t.startswith(("NAME k ", "NAME s "))}
        recs = _stream(rng, rng.randint(10, 40))
        _cuts(rng, len(recs))
        _, pieces = _run(_chain_set(texts, chain).start(), recs, [], True, 1000)
        cols += sum(isinstance(p, MatchColumns) for p in pieces)
        lists += sum(isinstance(p, list) for p in pieces)
    assert cols > 20 and lists > 20


def _explosion(n: int) -> tuple[QuerySet, EventBatch]:
    """A chain-plan Kleene query with ~2^n matches per last event beside a small query."""
    rng = random.Random(5)
    recs = [{"id": i, "type": "S", "ts": i, "x": rng.randint(0, 9)} for i in range(n)]
    qs = _chain_set(["NAME big PATTERN SEQ(S a, S+ b[], S c) WHERE c.x > a.x WITHIN 13 seconds",
                     "NAME small PATTERN SEQ(S a, S c) WHERE c.x > a.x WITHIN 2 seconds"],
                    {0}, max_matches_per_call=None)
    return qs, EventBatch.from_records(recs)


def test_memory_is_flat_in_the_chain_querys_output() -> None:
    """~60k matches of the chain query in one call: push builds every Match; push_to holds
    the chain's blocks and one piece at a time (peak memory a small part of push's), and
    the pieces are the same matches in the same order."""
    qs, events = _explosion(40)
    rt = qs.start()
    tracemalloc.start()
    want = rt.push(events) + rt.close()
    _, peak_push = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rt = qs.start()
    written: list[int] = []
    keys: list[Any] = []

    def sink(piece: Any) -> None:
        written.append(len(piece))
        if len(keys) < 3000:
            keys.extend(_keys(piece.matches() if isinstance(piece, MatchColumns) else piece))

    tracemalloc.start()
    n = rt.push_to(events, sink, chunk=1000) + rt.close_to(sink, chunk=1000)
    _, peak_to = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == len(want) > 50_000 and sum(written) == n and max(written) <= 1000
    assert keys == _keys(want[:len(keys)])
    assert rt.counts == {"big": sum(m.query == "big" for m in want),
                         "small": sum(m.query == "small" for m in want)}
    assert peak_to * 8 < peak_push


def test_snapshot_between_streaming_calls() -> None:
    """A snapshot taken between push_to calls, restored into a fresh runtime, goes on with
    the same pieces' matches as the original (and as push)."""
    rng = random.Random(77)
    recs = _stream(rng, 40)
    texts = ["NAME k PATTERN SEQ(A a, B+ b[], C c) PARTITION BY src WITHIN 6 seconds",
             "NAME ab PATTERN SEQ(A a, B b) PARTITION BY src WITHIN 4 seconds",
             "NAME bc PATTERN SEQ(B b, C c) PARTITION BY src WITHIN 4 seconds",
             "NAME s PATTERN SEQ(A a, C c, D d) WITHIN 5 seconds"]
    qs = _chain_set(texts, {0, 3})
    assert qs.uses_network()
    plain = qs.start()
    want = plain.push(EventBatch.from_records(recs)) + plain.close()
    rt = qs.start()
    sink = Collect()
    rt.push_to(EventBatch.from_records(recs[:17]), sink, chunk=4)
    blob = rt.snapshot()
    again = qs.start()
    again.restore(blob)
    tail = Collect()
    for r in (rt, again):
        s = sink if r is rt else tail
        r.push_to(EventBatch.from_records(recs[17:29]), s, chunk=4)
        r.push_to(EventBatch.from_records(recs[29:]), s, chunk=4)
        r.close_to(s, chunk=4)
    assert _keys(sink.matches) == _keys(want)
    n_first = len(want) - len(tail.matches)
    assert _keys(tail.matches) == _keys(want[n_first:])
    assert any(isinstance(p, MatchColumns) for p in sink.pieces)


@pytest.mark.parametrize("seed", range(20))
def test_nested_sets_stream_like_push_and_the_oracle(seed: int) -> None:
    """Producers in the network, consumers on their own plan (read eagerly), a chain-plan
    query beside them: the streamed set equals push and the oracle."""
    rng = random.Random(4400 + seed)
    texts = [_producer(rng, f"p{i}") for i in range(2)]
    texts += [_consumer(rng, f"c{i}", ["p0", "p1"]) for i in range(2)]
    texts.append(_kleene(rng, "k"))
    qs = _chain_set(texts, {4})
    recs = [dict(r, type=rng.choice("ABCD")) for r in _stream(rng, 30)]
    cuts = _cuts(rng, len(recs))
    want, _ = _run(qs.start(), recs, cuts, False, 5)
    got, _ = _run(qs.start(), recs, cuts, True, 5)
    assert _keys(got) == _keys(want)
    assert _keys(want) == _keys(evaluate_set([q.analyzed for q in qs.queries],
                                             EventBatch.from_records(recs)))


@pytest.mark.parametrize("options", [{"count_only": True}, {"allowed_lateness_us": 2_000_000}])
def test_counting_and_lateness_write_push_lists(options: dict[str, Any]) -> None:
    """With count_only or allowed lateness, push_to writes what push returns, in pieces."""
    rng = random.Random(3)
    recs = _stream(rng, 30)
    texts = ["NAME k PATTERN SEQ(A a, B+ b[], C c) WITHIN 6 seconds",
             "NAME ab PATTERN SEQ(A a, B b) WITHIN 4 seconds"]
    qs = _chain_set(texts, {0})
    want, _ = _run(qs.start(**options), recs, [9, 20], False, 3)
    got, pieces = _run(qs.start(**options), recs, [9, 20], True, 3)
    assert _keys(got) == _keys(want) and want
    assert all(isinstance(p, list) for p in pieces)


def test_a_bad_chunk_is_one_clear_error() -> None:
    rt = kleene.compile_many(["NAME ab PATTERN SEQ(A a, B b)"]).start()
    with pytest.raises(EngineError, match="chunk must be a positive number"):
        rt.push_to(EventBatch.from_records([{"type": "A", "ts": 0}]), print, chunk=0)
