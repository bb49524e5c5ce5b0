"""The batched Spark evaluation (kleene.spark.backend.evaluate_many) is kleene.spark.match.

Every conformance case runs on the registered ``spark`` backend in tests/semantics, served from
ONE ``evaluate_many`` job (tests/semantics/conftest.py). That job lays each pair's rows out as
``match`` would (keyed / split / single) but in one shared stage; here a few cases of each
execution shape, and a failing pair, are checked against per-call ``match`` jobs, so the
batched layout cannot drift from the real one unnoticed.
"""

from __future__ import annotations

from typing import Any

import pytest

from kleene.api import analyze
from kleene.errors import KleeneError
from kleene.events import EventBatch
from kleene.spark.backend import evaluate, evaluate_many
from kleene.spark.plan import plan_query
from kleene.testing.timeline import bindings_of, events, timeline

pytestmark = pytest.mark.spark

# one query per execution shape, each over a stream with ties, two keys and a NULL key
STREAM = timeline("""
    ts  1   2   3   4   5   6   7   8
        a1  b1  a2  c1  b2  a3  b3  c2
        a4      b4      c3      a5
""", a1={"k": "u", "x": 1}, a2={"k": "v", "x": 5}, a3={"k": "u", "x": 2}, a4={"k": "v", "x": 0},
    a5={"k": "u", "x": 9}, b1={"k": "u", "x": 3}, b2={"k": "v", "x": 6},
    b3={"k": "u", "x": 1}, b4={"k": None, "x": 4}, c1={"k": "u"}, c2={"k": "v"},
    c3={"k": "u"})
QUERIES = {
    "keyed": "PATTERN SEQ(A a, B+ b[]) WHERE b[i].x > a.x PARTITION BY k WITHIN 4 seconds",
    "split": "PATTERN SEQ(A a, NOT(C c), B b) WHERE b.x > a.x WITHIN 3 seconds",
    "single": "PATTERN SEQ(A a, B b) WHERE b.x > a.x CONSUME ALL",
}


@pytest.mark.parametrize("mode", sorted(QUERIES))
def test_queries_cover_every_shape(mode: str) -> None:
    assert plan_query(analyze(QUERIES[mode])).mode == mode


def test_batched_equals_match_per_call(spark: Any) -> None:
    pairs = [(analyze(q), STREAM) for _, q in sorted(QUERIES.items())]
    batched = evaluate_many(pairs)
    for (aq, stream), got in zip(pairs, batched, strict=True):
        assert not isinstance(got, Exception), got
        # ranges=3 as the batch: the split query really is cut into ranges here
        want = evaluate(aq, stream, partitions=2, ranges=3)
        assert want, f"the stream should give {aq.name} matches"
        assert [(bindings_of([m]), m.start, m.end, dict(m.values)) for m in got] == \
            [(bindings_of([m]), m.start, m.end, dict(m.values)) for m in want]


def test_a_failing_pair_fails_alone(spark: Any) -> None:
    missing = analyze("PATTERN SEQ(A a, B b) PARTITION BY nope")
    fine = analyze("PATTERN SEQ(A a, B b)")
    small = events("a1@1 b1@2")
    got = evaluate_many([(missing, small), (fine, small), (fine, EventBatch(small.table.slice(0, 0), small.time))])
    assert isinstance(got[0], KleeneError) and "nope" in str(got[0])
    assert not isinstance(got[1], Exception) and bindings_of(got[1]) == [{"a": "a1", "b": "b1"}]
    assert got[2] == []
    with pytest.raises(KleeneError, match="nope"):
        evaluate(missing, small)
