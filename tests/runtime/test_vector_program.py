"""The vectorized masks the runtime evaluates are plain data lowered from the AST at plan time
(issue 11 item 1: the runtime never sees the AST), and they give the oracle's matches."""

from __future__ import annotations

from typing import Any

import kleene
from kleene import ast
from kleene.events import EventBatch
from kleene.testing.oracle import evaluate as oracle

QUERY = ("PATTERN SEQ(A a, B b) WHERE a.x > 1 AND a.x * 2 < 9 AND a.s LIKE 'f%' "
         "AND a.x BETWEEN 0 AND 5 AND a.x IN (2, 3, NULL) AND NOT (a.y IS NULL) "
         "AND abs(b.x) >= 1 AND (b.x = 2 OR -b.x < -3)")

ROWS = [{"ts": i, "type": "AB"[i % 2], "x": i % 6, "y": None if i % 5 == 0 else i,
         "s": "foo" if i % 3 else "bar", "__id": i} for i in range(60)]


def _plain(node: Any) -> bool:
    if isinstance(node, tuple):
        return all(_plain(x) for x in node)
    return node is None or type(node) in (str, int, float, bool)


def test_masks_are_plain_data_and_agree_with_the_oracle() -> None:
    q = kleene.compile(QUERY, plan="nfa")
    plan: Any = q.compiled_plan.plan  # type: ignore[union-attr]
    masks = [v.mask for v in plan.vars.values() if v.mask is not None]
    assert masks and all(m.program for m in masks)
    for m in masks:
        assert len(m.program) == len(m.exprs)
        assert _plain(m.program)
        assert not any(isinstance(x, ast.Expr) for x in m.program)
    batch = EventBatch.from_records(ROWS)
    got = q.run(batch)
    want = oracle(q.analyzed, batch)
    assert got and [m.bindings for m in got] == [m.bindings for m in want]
