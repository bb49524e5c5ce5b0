"""Which plan the engine compiles, and clear errors for what it does not support yet."""

from __future__ import annotations

import pytest

from kleene.api import analyze
from kleene.errors import EngineError
from kleene.plan.automaton import Plan, UnionPlan
from kleene.plan.groups import GroupPlan
from kleene.runtime.engine import start


@pytest.mark.parametrize(("query", "kind"), [
    ("PATTERN SEQ(A a, B+ b[], C c)", Plan),
    ("PATTERN SEQ(A a, NOT(OR(B b, C c)), D d)", Plan),
    ("PATTERN OR(SEQ(A a, B b), SEQ(C c, D d))", UnionPlan),
    ("PATTERN OR(SEQ(A a, B b), SEQ(C c, D d)) USING skip-till-next-match", UnionPlan),
    ("PATTERN AND(A a, B b)", GroupPlan),
    ("PATTERN (SEQ(A a, B b))+", GroupPlan),
    ("PATTERN SEQ(A a, NOT(SEQ(B b, C c)), D d)", GroupPlan),
    ("PATTERN OR(SEQ(A a, B b), AND(C c, D d))", GroupPlan),
])
def test_plan_choice(query: str, kind: type) -> None:
    assert isinstance(start(analyze(query)).plan, kind)


def test_union_branches_get_the_generated_kernel() -> None:
    rt = start(analyze("PATTERN OR(SEQ(A a, B b), SEQ(C c, D d))"))
    assert all(b.kernel is not None for b in rt.matcher.branches)


def test_unsupported_shape_is_an_error_not_wrong_matches() -> None:
    q = "PATTERN SEQ(A a, NOT(SEQ(B b, C c)), D d) USING skip-till-next-match"
    with pytest.raises(EngineError, match=r"does not support negation of a sub-pattern under "
                                          r"skip-till-next-match"):
        start(analyze(q))
