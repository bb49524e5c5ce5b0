"""Streaming output (``Runtime.push_to`` / ``advance_to`` / ``close_to``; docs/engine.md,
"Streaming output"): the chain plan's ``SEQ(a, b+, c)`` join describes its matches as blocks
that become bounded column pieces only when written. Same matches, same order as the oracle
and as ``push``, over split pushes, under every cap, across a snapshot; the writers' bytes
are those of the ``Match`` path."""

from __future__ import annotations

import io
import random
import warnings
from typing import Any

import pytest

from kleene.api import analyze
from kleene.errors import CapacityError, EngineError
from kleene.events import EventBatch, Match
from kleene.events.matchtable import MatchBlocks, MatchColumns, MatchTable
from kleene.events.model import TimeInfo
from kleene.events.writers import CsvWriter, JsonLinesWriter
from kleene.plans.chain_stream import KleeneBlock
from kleene.plans.registry import start
from kleene.testing.oracle import evaluate as oracle

from .sinks import Collect


def _key(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [(m.query, m.bindings, m.start, m.end, m.values) for m in ms]


def _kleene_case(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    ta, tb, tc = rng.choice(("ABC", "AAA", "ABA", "BBC", "SSS"))
    q = f"PATTERN SEQ({ta} a, {tb}+ b[], {tc} c)"
    conds = []
    if rng.random() < 0.5:
        conds.append(f"c.x {rng.choice(('>', '>=', '<', '!='))} a.x")
    if rng.random() < 0.3:
        conds.append("b.x > 0")
    if rng.random() < 0.2:
        conds.append("[k]")
    if conds:
        q += " WHERE " + " AND ".join(conds)
    if rng.random() < 0.4:
        q += " PARTITION BY k"
    w = rng.random()
    if w < 0.4:
        q += f" WITHIN {rng.randint(2, 8)} seconds"
    elif w < 0.6:
        q += f" WITHIN {rng.randint(3, 10)} EVENTS"
    recs: list[dict[str, object]] = []
    ts = 0
    ids: list[Any] = [f"e{i}" for i in range(40)] if rng.random() < 0.5 else list(range(40))
    for i in range(rng.randint(6, 22)):
        ts += rng.choice((0, 1, 1, 2))
        recs.append({"id": ids[i], "type": rng.choice("ABBCS"), "ts": ts,
                     "x": rng.randint(0, 3), "k": rng.choice("uv")})
    return q, recs


def _pushes(rt: Any, recs: list[dict[str, object]], cuts: list[int], sink: Collect,
            chunk: int) -> int:
    n = 0
    for i, j in zip([0, *cuts], [*cuts, len(recs)], strict=True):
        if j > i:
            n += rt.push_to(EventBatch.from_records(recs[i:j]), sink, chunk=chunk)
    return n + int(rt.close_to(sink, chunk=chunk))


def test_stream_equals_the_oracle_and_push_in_order() -> None:
    """Random SEQ(a, b+, c) (conditions between a and c, masks, PARTITION BY, windows in time
    and in events, int and str ids), split pushes, chunks of 1-40 matches: the oracle's
    matches in its order, and those of push."""
    rng = random.Random(1313)
    matches = columns = 0
    for _ in range(250):
        m, c = _streamed_like_oracle_and_push(rng, _kleene_case, "kleene_join")
        matches += m
        columns += c
    assert matches > 3000 and columns > 200  # many matches, written as columns


def _explosion(n: int = 40, seed: int = 5) -> tuple[str, EventBatch]:
    rng = random.Random(seed)
    recs = [{"id": i, "type": "S", "ts": i, "x": rng.randint(0, 9)} for i in range(n)]
    return ("PATTERN SEQ(S a, S+ b[], S c) WHERE c.x > a.x WITHIN 13 seconds",
            EventBatch.from_records(recs))


def test_pieces_are_bounded_and_no_match_is_built_before_it_is_written() -> None:
    """A call with ~60k matches: pieces of at most ``chunk`` matches, all columns; what the
    runtime holds before writing is one block per last event, not a match per match."""
    q, events = _explosion()
    aq = analyze(q)
    nfa = start(aq, plan="nfa", max_matches_per_call=None)
    want = nfa.push(events) + nfa.close()
    rt = start(aq, plan="chain", max_matches_per_call=None)
    held: list[int] = []
    release = rt._release_blocks  # type: ignore[attr-defined]

    def spy(ready: list[Any]) -> Any:
        held.append(len(ready))
        assert all(isinstance(h[1], KleeneBlock) for h in ready)
        return release(ready)

    rt._release_blocks = spy  # type: ignore[attr-defined]
    sink = Collect()
    n = rt.push_to(events, sink, chunk=1000) + rt.close_to(sink, chunk=1000)
    assert n == len(want) > 50_000
    assert held and sum(held) <= len(events)  # at most one block per event
    assert sink.column_pieces == len(sink.pieces) and max(map(len, sink.pieces)) <= 1000
    assert [m.bindings for m in sink.matches] == [m.bindings for m in want]


def test_long_lists_make_smaller_pieces() -> None:
    """A piece's arrays grow with its matches x its longest list: with lists of up to 30
    elements a piece holds fewer than ``chunk`` matches (memory bounded in both)."""
    recs = [{"id": i, "type": "S", "ts": i} for i in range(22)]
    aq = analyze("PATTERN SEQ(S a, S+ b[], S c) WITHIN 100 seconds")
    rt = start(aq, plan="chain", max_matches_per_call=None, max_matches_per_event=None)
    sink = Collect()
    rt.push_to(EventBatch.from_records(recs), sink, chunk=4096)
    rt.close_to(sink)
    assert sum(map(len, sink.pieces)) == oracle_count(aq, recs)
    assert max(map(len, sink.pieces)) <= 4096
    assert min(len(p) for p in sink.pieces[:-1]) < 4096  # 20-element lists: 3,276 a piece


def oracle_count(aq: Any, recs: list[dict[str, object]]) -> int:
    rt = start(aq, plan="chain", count_only=True, max_matches_per_call=None)
    rt.count_placeholders = False
    rt.push(EventBatch.from_records(recs))
    rt.close()
    return int(rt.counters.matches)


def _outcome(rt: Any, events: EventBatch, stream: bool) -> tuple[Any, ...]:
    """Matches (or the error) and the cap counters of one run."""
    sink = Collect()
    got: list[Match] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # truncation: read the counters
            for i in range(0, len(events), 9):
                part = events.slice(i, 9)
                if stream:
                    rt.push_to(part, sink, chunk=64)
                else:
                    got += rt.push(part)
            if stream:
                rt.close_to(sink, chunk=64)
            else:
                got += rt.close()
    except CapacityError as exc:
        return ("error", str(exc), exc.cap)
    ms = sink.matches if stream else got
    c = rt.counters
    return (_key(ms), c.matches, c.truncated_matches, c.truncated_runs, c.truncated_exact)


@pytest.mark.parametrize("on_cap", ["error", "truncate"])
@pytest.mark.parametrize("per_event,per_call", [
    (None, None), (500, None), (None, 3000), (700, 2500), (5000, 50_000)])
def test_caps_mean_what_they_mean_for_push(on_cap: str, per_event: int | None,
                                           per_call: int | None) -> None:
    """push_to under max_matches_per_event / max_matches_per_call, error and truncate: the
    same matches, errors and counters as push."""
    q, events = _explosion(36, seed=11)
    aq = analyze(q)
    opts = {"max_matches_per_event": per_event, "max_matches_per_call": per_call,
            "on_cap": on_cap}
    plain = _outcome(start(aq, plan="chain", **opts), events, stream=False)
    streamed = _outcome(start(aq, plan="chain", **opts), events, stream=True)
    assert streamed == plain
    if per_event is None and per_call is None:
        assert plain[1] > 10_000


def test_snapshot_between_streaming_calls() -> None:
    """push_to, snapshot, restore into a new runtime, push_to again: the uninterrupted
    matches (of the NFA, in one push)."""
    rng = random.Random(9)
    recs = [{"id": f"e{i}", "type": "S", "ts": i // 2, "x": rng.randint(0, 9),
             "k": rng.choice("uv")} for i in range(80)]
    aq = analyze("PATTERN SEQ(S a, S+ b[], S c) WHERE c.x > a.x PARTITION BY k "
                 "WITHIN 7 seconds")
    nfa = start(aq, plan="nfa")  # (the oracle's brute force is too slow here)
    events = EventBatch.from_records(recs)
    want = nfa.push(events) + nfa.close()
    rt = start(aq, plan="chain")
    sink = Collect()
    rt.push_to(EventBatch.from_records(recs[:33]), sink, chunk=50)
    blob = rt.snapshot()
    rt2 = start(aq, plan="chain")
    rt2.restore(blob)
    rt2.push_to(EventBatch.from_records(recs[33:]), sink, chunk=50)
    rt2.advance_to(10**9, sink)
    rt2.close_to(sink)
    assert _key(sink.matches) == _key(want) and len(want) > 500


@pytest.mark.parametrize("q,plan", [
    ("PATTERN SEQ(A a, B b, C c) WHERE c.x > a.x WITHIN 5 seconds", "nfa"),
    ("PATTERN SEQ(A a, B+ b[], C c) WHERE b.x > a.x", "chain"),  # the lazy join
    ("PATTERN SEQ(A a, NOT B n, C c)", "chain"),
    ("PATTERN SEQ(A a, B b, C c)", "chain"),
])
def test_other_plans_and_shapes_write_their_lists_in_pieces(q: str, plan: str) -> None:
    """Plans and shapes without blocks: push's matches, in pieces of at most ``chunk``."""
    rng = random.Random(3)
    recs = [{"id": i, "type": rng.choice("ABC"), "ts": i, "x": rng.randint(0, 5)}
            for i in range(60)]
    aq = analyze(q)
    ref = start(aq, plan=plan)
    want = []
    for i, j in ((0, 17), (17, 40), (40, 60)):
        want += ref.push(EventBatch.from_records(recs[i:j]))
    want += ref.close()
    rt = start(aq, plan=plan)
    sink = Collect()
    _pushes(rt, recs, [17, 40], sink, 7)
    assert _key(sink.matches) == _key(want) and len(want) > 5
    assert max(map(len, sink.pieces)) <= 7


def test_a_bad_chunk_is_one_clear_error() -> None:
    rt = start(analyze("PATTERN SEQ(A a, B+ b[], C c)"), plan="chain")
    for bad in (0, -3, 2.5, True):
        with pytest.raises(EngineError, match="chunk must be a positive number of matches"):
            rt.push_to(EventBatch.from_records([{"type": "A", "ts": 1}]), lambda p: None,
                       chunk=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("writer", [JsonLinesWriter, CsvWriter])
def test_writers_write_blocks_byte_for_byte(writer: Any) -> None:
    """A MatchTable of blocks (the CLI's one-process run) written by the JSON Lines and CSV
    writers: the bytes of the same matches as ``Match`` objects."""
    q, events = _explosion(30, seed=2)
    aq = analyze(q)
    rt = start(aq, plan="chain", max_matches_per_call=None)
    rt.columnar = True
    table = rt.push(events)
    table += rt.close()
    assert isinstance(table, MatchTable)
    assert any(isinstance(p, MatchBlocks) for p in table.parts)
    ref = start(aq, plan="chain", max_matches_per_call=None)
    ms = ref.push(events) + ref.close()
    assert isinstance(ms, list) and len(ms) == len(table) > 5000
    time = TimeInfo()
    a, b = io.StringIO(), io.StringIO()
    with writer(a, time) as w:
        w.write(table)
    with writer(b, time) as w:
        w.write(ms)
    assert a.getvalue() == b.getvalue()
    assert table.to_list() == ms


def test_nodes_expire_when_each_push_brings_a_partition_few_events() -> None:
    """PARTITION BY with small pushes (a partition gets 1-3 events a call): the expired
    nodes are still cut, so the stored nodes follow the window, not the stream; the matches
    are one push's."""
    rng = random.Random(21)
    recs = [{"id": i, "type": "S", "ts": i, "x": rng.randint(0, 9), "k": rng.choice("uvw")}
            for i in range(1500)]
    aq = analyze("PATTERN SEQ(S a, S+ b[], S c) WHERE c.x > a.x PARTITION BY k "
                 "WITHIN 6 seconds")
    one = start(aq, plan="chain")
    want = one.push(EventBatch.from_records(recs)) + one.close()
    rt = start(aq, plan="chain")
    sink = Collect()
    for i in range(0, len(recs), 5):
        rt.push_to(EventBatch.from_records(recs[i:i + 5]), sink)
    live = sum(rt.matcher.live(st) for st in rt.states.values())  # type: ignore[attr-defined]
    rt.close_to(sink)
    assert _key(sink.matches) == _key(want)
    # 3 states x 3 keys x (the window's ~2 events a key + at most 32 expired ones left)
    assert live < 400, live


# --- SEQ of single variables (the generated join, fast_joiner): SeqBlock -------------------
def _seq_case(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    n = rng.choice((2, 3, 3, 4))
    types = [rng.choice("ABS") for _ in range(n)]
    q = "PATTERN SEQ(" + ", ".join(f"{t} v{i}" for i, t in enumerate(types)) + ")"
    conds = []
    if rng.random() < 0.3:
        conds.append(f"v{rng.randrange(n)}.x > 0")
    if rng.random() < 0.2:
        conds.append("[k]")
    if conds:
        q += " WHERE " + " AND ".join(conds)
    if rng.random() < 0.3:
        q += " PARTITION BY k"
    w = rng.random()
    if w < 0.4:
        q += f" WITHIN {rng.randint(2, 12)} seconds"
    elif w < 0.6:
        q += f" WITHIN {rng.randint(3, 14)} EVENTS"
    ids: list[Any] = [f"e{i}" for i in range(60)] if rng.random() < 0.5 else list(range(60))
    recs: list[dict[str, object]] = []
    ts = 0
    for i in range(rng.randint(6, 45)):
        ts += rng.choice((0, 1, 1, 2))
        recs.append({"id": ids[i], "type": rng.choice("ABSS"), "ts": ts,
                     "x": rng.randint(0, 3), "k": rng.choice("uv")})
    return q, recs


def test_seq_of_singles_streams_blocks_equal_to_the_oracle_and_push() -> None:
    """Random SEQs of 2-4 single variables (masks, [k], PARTITION BY, windows in time and in
    events, int and str ids), split pushes, chunks of 1-40: the oracle's matches in its
    order, and push's; most of the output written as SeqBlock columns."""
    rng = random.Random(1314)
    matches = columns = 0
    for _ in range(250):
        m, c = _streamed_like_oracle_and_push(rng, _seq_case, "fast_join")
        matches += m
        columns += c
    assert matches > 10_000 and columns > 300


def _seq3(n: int, seed: int = 5) -> tuple[str, EventBatch]:
    rng = random.Random(seed)
    recs = [{"id": i, "type": "S", "ts": i, "x": rng.randint(0, 9)} for i in range(n)]
    return "PATTERN SEQ(S a, S b, S c) WITHIN 60 seconds", EventBatch.from_records(recs)


def test_seq_of_singles_holds_one_block_per_event_and_bounded_pieces() -> None:
    """SEQ of 3 singles over 200 events in a 60 s window (~100k matches in one call): the
    runtime holds at most one entry per event before writing, every piece holds at most
    ``chunk`` matches, all but the first events' few matches as columns, and the traced peak memory of the call is far below what its
    Match objects take (about 400 B each, docs/engine.md)."""
    import tracemalloc

    q, events = _seq3(200)
    aq = analyze(q)
    want = start(aq, plan="nfa", max_matches_per_call=None)
    ms = want.push(events) + want.close()
    rt = start(aq, plan="chain", max_matches_per_call=None)
    held: list[int] = []
    release = rt._release_blocks  # type: ignore[attr-defined]

    def spy(ready: list[Any]) -> Any:
        held.append(len(ready))
        return release(ready)

    rt._release_blocks = spy  # type: ignore[attr-defined]
    sizes: list[int] = []
    built: list[int] = []  # matches handed over as Match objects (events with < 64)

    def sink(piece: MatchColumns | list[Match]) -> None:
        sizes.append(len(piece))
        if not isinstance(piece, MatchColumns):
            built.append(len(piece))

    tracemalloc.start()
    try:
        n = rt.push_to(events, sink, chunk=500) + rt.close_to(sink, chunk=500)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == len(ms) > 100_000
    assert held and sum(held) <= len(events) + sum(built)
    assert max(sizes) <= 500
    assert sum(built) < 1000  # only the first events' few matches (below SEQ_BLOCK_MIN)
    assert peak < len(ms) * 40, (peak, len(ms))  # a Match costs ~400 B: 10x below that


@pytest.mark.parametrize("on_cap", ["error", "truncate"])
@pytest.mark.parametrize("per_event,per_call", [
    (None, None), (300, None), (None, 3000), (700, 2500)])
def test_seq_of_singles_caps_mean_what_they_mean_for_push(on_cap: str, per_event: int | None,
                                                          per_call: int | None) -> None:
    """The SeqBlock path under both caps, error and truncate: push's matches and counters."""
    q, events = _seq3(60, seed=3)
    aq = analyze(q)
    opts = {"max_matches_per_event": per_event, "max_matches_per_call": per_call,
            "on_cap": on_cap}
    plain = _outcome(start(aq, plan="chain", **opts), events, stream=False)
    streamed = _outcome(start(aq, plan="chain", **opts), events, stream=True)
    assert streamed == plain


def test_seq_of_singles_snapshot_between_streaming_calls() -> None:
    """push_to, snapshot, restore, push_to: the uninterrupted matches."""
    rng = random.Random(10)
    recs = [{"id": f"e{i}", "type": rng.choice("AB"), "ts": i // 2, "k": rng.choice("uv")}
            for i in range(120)]
    aq = analyze("PATTERN SEQ(A a, B b, A c, B d) PARTITION BY k WITHIN 12 seconds")
    nfa = start(aq, plan="nfa")
    want = nfa.push(EventBatch.from_records(recs)) + nfa.close()
    rt = start(aq, plan="chain")
    sink = Collect()
    rt.push_to(EventBatch.from_records(recs[:51]), sink, chunk=33)
    rt2 = start(aq, plan="chain")
    rt2.restore(rt.snapshot())
    rt2.push_to(EventBatch.from_records(recs[51:]), sink, chunk=33)
    rt2.close_to(sink)
    assert _key(sink.matches) == _key(want) and len(want) > 500 and sink.column_pieces


def _streamed_like_oracle_and_push(rng: random.Random, case: Any, join: str) -> tuple[int, int]:
    """One random case of ``case`` through ``push_to`` in split pushes and random chunks: the
    oracle's matches in order, counted, in pieces of at most the chunk, and ``push``'s; the
    chain plan uses the join named ``join``. Returns (matches, matches written as columns)."""
    q, recs = case(rng)
    aq = analyze(q)
    want = oracle(aq, EventBatch.from_records(recs))
    cuts = sorted(rng.sample(range(1, len(recs)), rng.randint(0, 3)))
    chunk = rng.randint(1, 40)
    rt = start(aq, plan="chain")
    assert getattr(rt.matcher, join)
    sink = Collect()
    n = _pushes(rt, recs, cuts, sink, chunk)
    assert _key(sink.matches) == _key(want), f"{q} over {recs}, cuts {cuts}"
    assert n == len(want) == rt.counters.matches
    assert all(len(p) <= chunk for p in sink.pieces)
    plain = start(aq, plan="chain")
    got: list[Match] = []
    for i, j in zip([0, *cuts], [*cuts, len(recs)], strict=True):
        if j > i:
            got += plain.push(EventBatch.from_records(recs[i:j]))
    got += plain.close()
    assert _key(got) == _key(want)
    return len(want), sink.column_pieces
