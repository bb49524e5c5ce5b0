"""The tree's specialized sequence and conjunction joins (kleene.plans.tree: ``_seq_right``,
``_and_many``) on the cases they special-case: one event that could bind a variable on each
side of an AND, right sides whose slots come first, Kleene group ranges through sequence
joins; and the bracket shapes that would reorder a SEQ are refused."""

from __future__ import annotations

import pytest

from kleene.api import analyze
from kleene.errors import QueryValidationError
from kleene.events import Match
from kleene.plans import evaluate
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.timeline import events


def _key(ms: list[Match]) -> list[tuple[object, ...]]:
    return [(dict(m.bindings), m.start, m.end) for m in ms]


@pytest.mark.parametrize(("query", "shapes", "stream", "n"), [
    # a2 may be `a` or `b`, never both: the AND's sides must bind different events
    ("PATTERN AND(A a, SEQ(A b, B c)) WITHIN 5 EVENTS", ("(a&#1)", "(#1&a)"),
     "a1@1 b1@2 a2@3 b2@4", 3),
    # untyped variable on one side
    ("PATTERN AND(ANY x, SEQ(A b, B c)) WHERE x.v > 0 WITHIN 4 EVENTS",
     ("(x&#1)", "(#1&x)"), "a1@1 b1@2 a2@3 b2@4", 5),
    # the right side's slots before the left's (no slicing split); nested items are #k
    ("PATTERN AND(SEQ(A a, B b), C c) WHERE a.v < c.v WITHIN 6 EVENTS",
     ("(c&#0)", "(#0&c)"), "c1@1 a1@2 b1@3 c2@4 a2@5", 2),
    # a maximal group between two sequence joins, on either side
    ("PATTERN SEQ(A a, B+ m[], C c, D d) WHERE m.v > a.v WITHIN 8 EVENTS USING "
     "maximal-grouping", ("left", "right", "bushy", "inner", "((a;m);(c;d))"),
     "a1@1 b1@2 b2@3 c1@4 b3@5 d1@6 a2@7 b4@8 c2@9 d2@10", 2),
])
def test_fast_joins_equal_the_oracle(query: str, shapes: tuple[str, ...], stream: str,
                                     n: int) -> None:
    aq = analyze(query)
    values = {"a1": 1, "a2": 5, "b1": 2, "b2": 0, "b3": 3, "b4": 9, "c1": 3, "c2": 7,
              "d1": 1, "d2": 1}
    names = [w.partition("@")[0] for w in stream.split()]
    s = events(stream, **{k: {"v": values[k]} for k in names})
    want = _key(oracle(aq, s))
    assert len(want) == n
    for shape in shapes:
        assert _key(evaluate(aq, s, plan=f"tree:{shape}")) == want, shape


def test_a_seq_keeps_its_order_in_a_bracket_shape() -> None:
    aq = analyze("PATTERN SEQ(A a, B b, C c)")
    with pytest.raises(QueryValidationError, match="the items of a SEQ keep their order"):
        evaluate(aq, events("a1@1 b1@2 c1@3"), plan="tree:(c;(a;b))")
