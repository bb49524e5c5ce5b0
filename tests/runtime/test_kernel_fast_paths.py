"""The NFA kernel's fast paths (finished Matches, idle runs, one contiguity test per event) give
the interpreter's matches, and are chosen only where nothing sits between kernel and output."""

from __future__ import annotations

import pytest

from kleene.api import analyze
from kleene.events import EventBatch
from kleene.plans import evaluate, start

from .helpers import keys, random_stream

STOCK = ("PATTERN SEQ(A a, B+ b[], C c) WHERE b[1].x > a.x AND b[i].x > b[i-1].x "
         "AND c.x < a.x PARTITION BY k WITHIN 6 seconds USING strict-contiguity")
FAST = [
    STOCK,
    "PATTERN SEQ(A a, B+ b[], C c) WHERE a.x >= 4 AND b[i].x < 3 AND c.x >= 4 "
    "PARTITION BY k WITHIN 8 seconds USING skip-till-next-match",
    "PATTERN SEQ(A a, B b, C+ c[]) WHERE b.x > a.x AND c[i].x >= b.x WITHIN 6 seconds",
    "PATTERN SEQ(A a, B+ b[], C c) WHERE c.x < a.x WITHIN 3 EVENTS "
    "USING partition-contiguity",
]


@pytest.mark.parametrize("query", FAST)
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_fast_paths_agree_with_the_interpreter(query: str, seed: int) -> None:
    aq = analyze(query)
    batch = random_stream(seed, n=60)
    assert start(aq, plan="nfa").direct
    assert keys(evaluate(aq, batch, plan="nfa")) == keys(
        evaluate(aq, batch, plan="nfa", use_kernel=False))


@pytest.mark.parametrize("query", FAST)
def test_fast_paths_across_pushes_and_a_snapshot(query: str) -> None:
    aq = analyze(query)
    batch = random_stream(21, n=60)
    rt = start(aq, plan="nfa")
    out = rt.push(batch.slice(0, 30))
    rt2 = start(aq, plan="nfa")
    rt2.restore(rt.snapshot())
    out += rt2.push(batch.slice(30)) + rt2.close()
    assert keys(out) == keys(evaluate(aq, batch, plan="nfa", use_kernel=False))


@pytest.mark.parametrize("query", [
    STOCK + " RETURN a.x AS ax",
    "PATTERN SEQ(A a, NOT(B n), C c) WITHIN 4 seconds",
    "PATTERN SEQ(A a, C c) WITHIN 4 seconds CONSUME a",
])
def test_direct_output_only_without_return_negation_or_policies(query: str) -> None:
    assert not start(analyze(query)).direct


def test_count_only_does_not_build_matches() -> None:
    rt = start(analyze(STOCK), count_only=True)
    assert not rt.direct and rt.matcher.count_mode


def test_stock_matches_by_hand() -> None:
    # one key, x = 5, 6, 7, 2 typed A, B, B, C: a=5, b=[6, 7], c=2 (increasing b, c < a)
    batch = EventBatch.from_records([
        {"id": i, "type": t, "ts": i, "x": x, "k": "u"}
        for i, (t, x) in enumerate([("A", 5), ("B", 6), ("B", 7), ("C", 2)])])
    got = evaluate(analyze(STOCK), batch)
    assert [(dict(m.bindings), m.start, m.end) for m in got] == [
        ({"a": 0, "b": (1, 2), "c": 3}, 0, 3_000_000)]
