"""snapshot() / restore() mid-stream: a restored runtime continues with identical results."""

from __future__ import annotations

import pytest

from kleene.api import analyze
from kleene.errors import EngineError
from kleene.plans import start

from .helpers import bounded, keys, random_stream

QUERIES = [
    "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x PARTITION BY k WITHIN 5 seconds",
    "PATTERN SEQ(A a, B b, NOT(C n)) WITHIN 3 seconds",
    "PATTERN SEQ(A a, NOT(C n), B b) WHERE n.x > a.x WITHIN 5 seconds CONSUME a",
    "PATTERN AND(A a, B b) WITHIN 3 seconds",
    "PATTERN OR(SEQ(A a, B b), SEQ(C c, B d)) WITHIN 3 seconds USING skip-till-next-match",
]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("cut", [5, 17, 29])
def test_restore_mid_stream_gives_identical_results(query: str, cut: int) -> None:
    batch = random_stream(11, n=40)
    expected = bounded(query, batch)
    rt = start(analyze(query))
    out = rt.push(batch.slice(0, cut))
    blob = rt.snapshot()
    assert isinstance(blob, bytes)
    # carry on in a brand-new runtime (as after a restart)
    rt2 = start(analyze(query))
    rt2.restore(blob)
    out2 = out + rt2.push(batch.slice(cut)) + rt2.close()
    assert keys(out2) == keys(expected)
    # the original is unaffected by the snapshot
    out1 = out + rt.push(batch.slice(cut)) + rt.close()
    assert keys(out1) == keys(expected)


def test_snapshot_of_another_query_is_refused() -> None:
    a = start(analyze("NAME q1 PATTERN SEQ(A a, B b)"))
    b = start(analyze("NAME q2 PATTERN SEQ(A a, B b)"))
    with pytest.raises(EngineError, match="q2"):
        b.restore(a.snapshot())


def test_snapshot_bytes_cannot_carry_code() -> None:
    import pickle

    rt = start(analyze("PATTERN SEQ(A a, B b)"))
    evil = pickle.dumps(EngineError("x"))  # any class reference
    with pytest.raises(EngineError, match="non-data"):
        rt.restore(evil)


@pytest.mark.parametrize("query", QUERIES)
def test_reset_forgets_everything_but_counters(query: str) -> None:
    """After reset() (used by Spark tasks to reuse one runtime for every key) a runtime gives
    exactly the matches of a new one, even after being closed mid-way through another stream."""
    first, second = random_stream(3, n=30), random_stream(12, n=30)
    rt = start(analyze(query))
    rt.push(first.slice(0, 20))
    rt.close()
    seen = rt.counters.events_in
    rt.reset()
    got = rt.push(second) + rt.close()
    assert keys(got) == keys(bounded(query, second))
    assert rt.counters.events_in == seen + len(second)


def test_restore_drops_late_output_collected_before() -> None:
    """Late events are output, not state: restore() starts a fresh late output."""
    q = "PATTERN SEQ(A a, B b) WITHIN 3 seconds"
    batch = random_stream(5, n=20)
    rt = start(analyze(q))
    blob = rt.snapshot()
    rt.push(batch.slice(10))
    rt.push(batch.slice(0, 3))  # behind the frontier: late
    late = rt.late
    assert late is not None and len(late) == 3
    rt.restore(blob)
    assert rt.late is None
