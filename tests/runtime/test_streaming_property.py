"""Property: for random queries and streams, any slicing of push / advance / close gives exactly
the bounded result, and a snapshot / restore at any cut changes nothing."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kleene.api import analyze
from kleene.events import EventBatch, Match
from kleene.plans import evaluate, start
from kleene.testing.strategies import describe, queries, streams


def _key(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [m.key() for m in ms]


@settings(max_examples=60, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(query=queries(feature="mixed"), stream=streams(), data=st.data())
def test_any_slicing_equals_bounded(query: str, stream: EventBatch, data: st.DataObject) -> None:
    note(f"query:  {query}")
    note(f"stream: {describe(stream)}")
    aq = analyze(query)
    want = _key(evaluate(aq, stream))
    n = len(stream)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, n - 1)), max_size=4))))
    snap_at = data.draw(st.sampled_from([None, *cuts]))
    rt = start(aq)
    got: list[Match] = []
    prev = 0
    for cut in [*cuts, n]:
        if cut <= prev:
            continue
        part = stream.slice(prev, cut - prev)
        got += rt.push(part)
        if data.draw(st.booleans()):
            got += rt.advance(int(part.ts[-1]))
        if snap_at == cut:
            blob = rt.snapshot()
            rt = start(aq)
            rt.restore(blob)
        prev = cut
    got += rt.close()
    assert _key(got) == want
