"""push / advance / close over any slicing gives exactly the bounded result (and the oracle's)."""

from __future__ import annotations

import pytest

from kleene.api import analyze
from kleene.events import EventBatch
from kleene.plans import start
from kleene.testing.oracle import evaluate as oracle

from .helpers import bounded, keys, random_stream, streamed

QUERIES = [
    "PATTERN SEQ(A a, B b)",
    "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x WITHIN 4 seconds",
    "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x WITHIN 4 seconds "
    "USING skip-till-next-match",
    "PATTERN SEQ(A a, B b, C c) PARTITION BY k USING strict-contiguity",
    "PATTERN SEQ(A a, B b) WHERE [k] USING partition-contiguity",
    "PATTERN SEQ(A a, NOT(C n), B b) WHERE n.x > a.x WITHIN 5 seconds",
    "PATTERN SEQ(A a, B b, NOT(C n)) WITHIN 3 seconds",
    "PATTERN SEQ(NOT(C n), A a, B b) WITHIN 3 seconds",
    "PATTERN SEQ(A a, B b, NOT(C n)) WITHIN 4 EVENTS",
    "PATTERN AND(A a, B b) WITHIN 3 seconds",
    "PATTERN AND(A a, B b, NOT(C n)) WITHIN 3 seconds",
    "PATTERN ANY(2, A a, B b, C c) WITHIN 2 seconds",
    "PATTERN SEQ(A a, B b) PARTITION BY k EMIT RECENT",
    "PATTERN SEQ(A a, B b) WITHIN 3 seconds CONSUME a",
    "PATTERN SEQ(A a, B b) WITHIN 3 seconds PICK FIRST a",
    "PATTERN SEQ(A a, B{2} b[]) WHERE sum(b.x) > 6 WITHIN 5 seconds RETURN a.x, sum(b.x) AS s",
    "PATTERN SEQ(A a, AND(B b, C c) WITHIN 2 seconds) WITHIN 5 seconds",
    "PATTERN OR(SEQ(A a, B b), SEQ(C c, A d)) WHERE d.x > c.x WITHIN 3 seconds",
    "PATTERN (SEQ(A a, B b)){1,2} WHERE b.x > 2 WITHIN 4 seconds",
    "PATTERN SEQ(A a, NOT(SEQ(B b, C c)), A d) WITHIN 4 seconds",
    "PATTERN SEQ(AND(A a, B b), NOT(C n)) WITHIN 4 EVENTS",
    "PATTERN SEQ(AND(A a, B b), NOT(C n)) WHERE n.x > a.x WITHIN 3 seconds",
    "PATTERN SEQ(A a, NOT(SEQ(B b, C c)), A d) WHERE c.x > b.x USING skip-till-next-match",
    "PATTERN SEQ(A a, B+ b[], NOT(SEQ(C c, A e))) WITHIN 4 seconds USING skip-till-next-match",
]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_streaming_equals_bounded_and_oracle(query: str, seed: int) -> None:
    batch = random_stream(seed, n=30)
    whole = bounded(query, batch)
    assert keys(whole) == keys(oracle(analyze(query), batch))
    assert keys(streamed(query, batch, [1])) == keys(whole)
    assert keys(streamed(query, batch, [3, 7, 2], lag=0)) == keys(whole)


def test_trailing_negation_waits_for_the_watermark() -> None:
    """SEQ(A a, B b, NOT(C n)) WITHIN 4 s: a1@1 b1@2 is emitted once the watermark passes 5."""
    rt = start(analyze("PATTERN SEQ(A a, B b, NOT(C n)) WITHIN 4 seconds"))
    assert rt.push(EventBatch.from_records([{"id": "a1", "type": "A", "ts": 1},
                                            {"id": "b1", "type": "B", "ts": 2}])) == []
    assert rt.advance(5_000_000) == []          # ts 5 could still hold a C
    out = rt.advance(5_000_001)
    assert [dict(m.bindings) for m in out] == [{"a": "a1", "b": "b1"}]
    assert rt.close() == []


def test_trailing_negation_cancelled_by_a_later_batch() -> None:
    rt = start(analyze("PATTERN SEQ(A a, B b, NOT(C n)) WITHIN 4 seconds"))
    rt.push(EventBatch.from_records([{"id": "a1", "type": "A", "ts": 1},
                                     {"id": "b1", "type": "B", "ts": 2}]))
    assert rt.push(EventBatch.from_records([{"id": "c1", "type": "C", "ts": 5}])) == []
    assert rt.close() == []


def test_matches_are_held_behind_a_pending_earlier_match() -> None:
    """Output order is global: a match ending later waits while an earlier one is pending."""
    q = "PATTERN SEQ(A a, B b, NOT(C n)) WITHIN 3 seconds"
    events = EventBatch.from_records([
        {"id": "a1", "type": "A", "ts": 1}, {"id": "b1", "type": "B", "ts": 2},
        {"id": "a2", "type": "A", "ts": 6}, {"id": "b2", "type": "B", "ts": 7}])
    rt = start(analyze(q))
    first = rt.push(events.slice(0, 2))
    assert first == []
    second = rt.push(events.slice(2, 2))
    assert [dict(m.bindings) for m in second] == [{"a": "a1", "b": "b1"}]
    assert [dict(m.bindings) for m in rt.close()] == [{"a": "a2", "b": "b2"}]


def test_closed_runtime_refuses_more_input() -> None:
    rt = start(analyze("PATTERN SEQ(A a, B b)"))
    rt.close()
    with pytest.raises(Exception, match="closed"):
        rt.push(random_stream(1, 3))


def test_pick_groups_are_released_once_complete() -> None:
    """PICK LAST b WITHIN a 3 s window: the group of a1@2 is complete when the stream is past
    2 + 3; the match comes out of push() then, not only at close(). (PICK FIRST a would be out
    at once: every a of b1's group comes before b1, docs/semantics.md 9.)"""
    rt = start(analyze("PATTERN SEQ(A a, B b) WITHIN 3 seconds PICK LAST b"))
    first = rt.push(EventBatch.from_records([
        {"id": "a1", "type": "A", "ts": 2}, {"id": "b1", "type": "B", "ts": 3},
        {"id": "b2", "type": "B", "ts": 4}]))
    assert first == []
    later = rt.push(EventBatch.from_records([{"id": "x1", "type": "X", "ts": 8}]))
    assert [dict(m.bindings) for m in later] == [{"a": "a1", "b": "b2"}]
    assert rt.close() == []


def test_consume_memory_is_pruned_on_long_streams() -> None:
    """CONSUME's set of consumed events stays bounded: positions no live run can reach go."""
    from kleene.runtime.engine import Runtime

    rt = start(analyze("PATTERN SEQ(A a, B b) WITHIN 1 seconds CONSUME ALL"))
    rt._CONSUMED_PRUNE = 10  # type: ignore[misc]
    recs = []
    for i in range(200):
        recs.append({"id": f"a{i}", "type": "A", "ts": 10 * i})
        recs.append({"id": f"b{i}", "type": "B", "ts": 10 * i + 1})
    out = []
    batch = EventBatch.from_records(recs)
    for i in range(0, len(batch), 20):
        out += rt.push(batch.slice(i, 20))
    out += rt.close()
    assert len(out) == 200
    assert len(rt.policies.consumed) < 60
    assert isinstance(rt, Runtime)
