"""The kernel without the bool-vs-number guard (``LinearMatcher.plain_values``): used only while
no attribute column seen can hold booleans, and dropped for good once one can, so a boolean
from a later batch is still never ordered against a number from an earlier one."""

from __future__ import annotations

from typing import Any

import pytest

import kleene
from kleene.events import EventBatch
from kleene.testing.oracle import evaluate as oracle

QUERY = "PATTERN SEQ(A a, B b) WHERE b.x > a.x USING skip-till-any-match"


def _batch(rows: list[dict[str, Any]]) -> EventBatch:
    return EventBatch.from_records(rows)


def _ids(ms: list[Any]) -> list[tuple[Any, ...]]:
    return [tuple(sorted(m.bindings.items())) for m in ms]


@pytest.mark.parametrize("plan", ["nfa", "union"])
def test_plain_kernel_only_while_no_column_can_hold_booleans(plan: str) -> None:
    q = kleene.compile(QUERY if plan == "nfa" else
                       "PATTERN OR(SEQ(A a, B b), SEQ(C c, D d)) WHERE b.x > a.x "
                       "USING skip-till-any-match", plan=plan)
    rt = q.start()
    first = [{"ts": 1, "type": "A", "x": 0.5, "__id": 0}, {"ts": 2, "type": "A", "x": 2.0, "__id": 1}]
    second = [{"ts": 3, "type": "B", "x": True, "__id": 2}, {"ts": 4, "type": "B", "x": False, "__id": 3}]
    got = rt.push(_batch(first))
    assert rt.plain is True
    got += rt.push(_batch(second))
    got += rt.close()
    assert rt.plain is False
    # a boolean is never ordered against a number (docs/semantics.md): True > 0.5 is NULL
    assert got == []
    # the same events with numbers instead of booleans do match: 1.0 > 0.5
    rt = q.start()
    numbers = [dict(r, x=float(r["x"])) for r in second]
    assert _ids(rt.push(_batch(first)) + rt.push(_batch(numbers)) + rt.close()) == [
        (("a", 0), ("b", 2))]


def test_numbers_take_the_plain_kernel_and_agree_with_the_oracle() -> None:
    rows = [{"ts": i, "type": "AB"[i % 2], "x": float((i * 7) % 5), "__id": i} for i in range(40)]
    q = kleene.compile(QUERY, plan="nfa")
    rt = q.start()
    got = rt.push(_batch(rows)) + rt.close()
    m = rt.matcher
    assert m.kernels is not None and m.kernel is m.kernels[1]
    want = oracle(q.analyzed, _batch(rows))
    assert len(got) > 0 and _ids(got) == _ids(want)


def test_a_snapshot_keeps_the_guarded_kernel() -> None:
    q = kleene.compile(QUERY, plan="nfa")
    rt = q.start()
    rt.push(_batch([{"ts": 1, "type": "A", "x": True, "__id": 0}]))
    assert rt.plain is False
    rt2 = q.start()
    rt2.restore(rt.snapshot())
    assert rt2.plain is False and rt2.matcher.kernel is rt2.matcher.kernels[0]
    got = rt2.push(_batch([{"ts": 2, "type": "B", "x": 5, "__id": 1}])) + rt2.close()
    assert got == []  # 5 > TRUE is NULL
