"""The generated transition function agrees with the interpreter, candidate for candidate."""

from __future__ import annotations

import pytest

from kleene.api import analyze
from kleene.plans import start

from .helpers import bounded, keys, random_stream

QUERIES = [
    "PATTERN SEQ(A a, B+ b[], C c) WHERE b[1].x > a.x AND b[i].x > b[i-1].x AND c.x < a.x "
    "PARTITION BY k WITHIN 6 seconds USING strict-contiguity",
    "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x WITHIN 6 seconds "
    "USING skip-till-next-match",
    "PATTERN SEQ(A a, B{1,3} b[], C c) WHERE avg(b.x) > a.x WITHIN 5 seconds",
    "PATTERN SEQ(A a, B b, C c) WHERE b.x > a.x AND c.x > b.x WITHIN 10 EVENTS",
    "PATTERN SEQ(A a, NOT(B n), C c) WHERE n.x = a.x WITHIN 4 seconds",
]


def test_kernel_is_used_for_linear_plans() -> None:
    rt = start(analyze(QUERIES[0]), plan="nfa")  # (the chooser takes ``runs`` for it)
    assert rt.matcher.kernel is not None
    assert "def process" in rt.matcher.kernel.source


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_kernel_equals_interpreter(query: str, seed: int) -> None:
    batch = random_stream(seed, n=60)
    fast = bounded(query, batch, plan="nfa")
    slow = bounded(query, batch, plan="nfa", use_kernel=False)
    assert keys(fast) == keys(slow)


def test_kernel_falls_back_on_mixed_types() -> None:
    """A string compared with a number is NULL (not an exception) in the inline code."""
    from kleene.events import EventBatch

    batch = EventBatch.from_records([
        {"id": "a1", "type": "A", "ts": 1, "x": 1, "s": None},
        {"id": "b1", "type": "B", "ts": 2, "x": 0, "s": "text"},
        {"id": "b2", "type": "B", "ts": 3, "x": 5, "s": None}])
    q = "PATTERN SEQ(A a, B b) WHERE b.s > a.x OR b.x > a.x"
    assert [dict(m.bindings) for m in bounded(q, batch)] == [{"a": "a1", "b": "b2"}]


def test_udf_on_a_take_edge() -> None:
    """A UDF is never vectorized: it runs per candidate event on the take edge."""
    from kleene.events import EventBatch

    def double(x: object) -> object:
        return None if x is None else x * 2  # type: ignore[operator]

    batch = EventBatch.from_records([
        {"id": "a1", "type": "A", "ts": 1, "x": 2}, {"id": "b1", "type": "B", "ts": 2, "x": 3},
        {"id": "b2", "type": "B", "ts": 3, "x": 5}])
    aq = analyze("PATTERN SEQ(A a, B b) WHERE double(a.x) > b.x RETURN double(b.x) AS d",
                 udfs={"double": double})
    from kleene.plans import evaluate

    out = evaluate(aq, batch)
    assert [(dict(m.bindings), dict(m.values)) for m in out] == [
        ({"a": "a1", "b": "b1"}, {"d": 6})]
