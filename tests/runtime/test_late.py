"""Out-of-order input: reordered within the allowed lateness, otherwise counted and kept."""

from __future__ import annotations

from kleene.api import analyze
from kleene.events import EventBatch
from kleene.plans import start


def _ev(id_: str, ts: int) -> EventBatch:
    return EventBatch.from_records([{"id": id_, "type": id_[0].upper(), "ts": ts}])


def test_late_event_is_counted_and_reported() -> None:
    rt = start(analyze("PATTERN SEQ(A a, B b)"))
    assert rt.push(_ev("a1", 5)) == []
    assert [dict(m.bindings) for m in rt.push(_ev("b1", 6))] == [{"a": "a1", "b": "b1"}]
    assert rt.push(_ev("a2", 2)) == []         # behind the frontier (6): late
    assert rt.counters.late_events == 1
    late = rt.late
    assert late is not None and late.ids.to_pylist() == ["a2"]
    # the late a2 is not matched: with a B after it, it would have made a match
    assert [dict(m.bindings) for m in rt.push(_ev("b2", 7))] == [{"a": "a1", "b": "b2"}]
    assert rt.close() == []


def test_allowed_lateness_reorders() -> None:
    """a1@5 arrives after b1@6 but within 2 s of lateness: the match a1 b1 is found."""
    rt = start(analyze("PATTERN SEQ(A a, B b)"), allowed_lateness_us=2_000_000)
    out = rt.push(_ev("b1", 6))
    out += rt.push(_ev("a0", 4))
    out += rt.push(_ev("b2", 9))     # frontier moves to 7: a0 and b1 are processed
    out += rt.close()
    assert [dict(m.bindings) for m in out] == [{"a": "a0", "b": "b1"}, {"a": "a0", "b": "b2"}]
    assert rt.counters.late_events == 0


def test_watermark_makes_older_events_late() -> None:
    rt = start(analyze("PATTERN SEQ(A a, B b)"), allowed_lateness_us=10_000_000)
    rt.push(_ev("a1", 5))
    rt.advance(8_000_000)
    rt.push(_ev("b1", 7))                     # below the watermark
    assert rt.counters.late_events == 1
    assert rt.close() == []
