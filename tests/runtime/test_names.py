"""RETURN items without alias are named by their canonical text (docs/semantics.md 11), in
the matches the engine actually produces, for every shape of expression."""

from __future__ import annotations

from kleene.api import compile as compile_query
from kleene.events import EventBatch
from kleene.lang import parse
from kleene.lang.printer import expr_text

ITEMS = ("a.x, count(b), first(b).x, b[last-1].x, b[2].x, (a.x + 1) * 2, "
         "a.x - (a.y - 1), -a.x, a.x IS NOT NULL, a.x NOT IN (1, 2), a.x BETWEEN 1 AND 2, "
         "a.s LIKE 'a%', 1.5, TRUE, NULL, abs(a.x - 1), NOT (a.x > 1 OR a.y < 0), 'it''s'")
QUERY = f"PATTERN SEQ(A a, B+ b[]) WITHIN 10 seconds RETURN {ITEMS}"


def test_engine_names_unaliased_return_items_by_their_canonical_text() -> None:
    """The keys of Match.values are exactly the items as the printer writes them."""
    events = EventBatch.from_records([
        {"id": "a1", "type": "A", "ts": 1, "x": 1, "y": 2, "s": "ab"},
        {"id": "b1", "type": "B", "ts": 2, "x": 3, "y": 0, "s": "c"},
        {"id": "b2", "type": "B", "ts": 3, "x": 4, "y": 0, "s": "d"},
    ])
    matches = compile_query(QUERY).run(events)
    assert [dict(m.bindings) for m in matches] == [
        {"a": "a1", "b": ("b1",)}, {"a": "a1", "b": ("b2",)}, {"a": "a1", "b": ("b1", "b2")}]
    names = [expr_text(r.expr) for r in parse(QUERY).returns]
    assert names[:3] == ["a.x", "count(b)", "first(b).x"]
    assert list(matches[2].values) == names
    assert matches[2].values["count(b)"] == 2
    assert matches[2].values["(a.x + 1) * 2"] == 4
    assert matches[2].values["'it''s'"] == "it's"
