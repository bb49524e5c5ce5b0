"""Which plan the engine compiles, and clear errors for what it does not support yet."""

from __future__ import annotations

import pytest

from kleene.api import analyze
from kleene.errors import EngineError
from kleene.plan.automaton import Plan, UnionPlan
from kleene.plan.groups import GroupPlan
from kleene.plans import start
from kleene.plans.tree import TreePlan


@pytest.mark.parametrize(("query", "kind"), [
    ("PATTERN SEQ(A a, B+ b[], C c)", Plan),
    ("PATTERN SEQ(A a, NOT(OR(B b, C c)), D d)", Plan),
    ("PATTERN OR(SEQ(A a, B b), SEQ(C c, D d))", UnionPlan),
    ("PATTERN OR(SEQ(A a, B b), SEQ(C c, D d)) USING skip-till-next-match", UnionPlan),
    # AND and OR-of-AND with default statistics: the refitted chooser (docs/benchmarks.md, "The
    # plan chooser's scale") estimates the tree below the logical blocks
    ("PATTERN AND(A a, B b)", TreePlan),
    ("PATTERN (SEQ(A a, B b))+", GroupPlan),
    ("PATTERN SEQ(A a, NOT(SEQ(B b, C c)), D d)", GroupPlan),
    ("PATTERN SEQ(A a, NOT(SEQ(B b, C c)), D d) USING skip-till-next-match", Plan),
    ("PATTERN OR(SEQ(A a, B b), AND(C c, D d))", TreePlan),
    ("PATTERN AND(A a, NOT(B b), C c)", GroupPlan),
])
def test_plan_choice(query: str, kind: type) -> None:
    assert isinstance(start(analyze(query)).plan, kind)


def test_union_branches_get_the_generated_kernel() -> None:
    rt = start(analyze("PATTERN OR(SEQ(A a, B b), SEQ(C c, D d))"))
    assert all(b.kernel is not None for b in rt.matcher.branches)


def test_skip_till_next_with_a_negated_sequence_is_linear() -> None:
    """A NOT of a sub-pattern under skip-till-next-match: checked on the match by an
    occurrence search over the interval (the linear plan keeps the NFA^b rule)."""
    q = "PATTERN SEQ(A a, NOT(SEQ(B b, C c)), A d) USING skip-till-next-match"
    rt = start(analyze(q))
    assert isinstance(rt.plan, Plan)
    assert rt.plan.negations[0].node is not None


def test_unsupported_shape_is_an_error_not_wrong_matches() -> None:
    """Validation rejects AND under skip-till-next-match; if such a query reaches the engine
    anyway (built by hand), it refuses it clearly instead of guessing."""
    import dataclasses

    from kleene import ast

    aq = dataclasses.replace(analyze("PATTERN AND(A a, B b)"),
                             strategy=ast.Strategy.SKIP_TILL_NEXT_MATCH)
    with pytest.raises(EngineError, match=r"does not support .*skip-till-next-match"):
        start(aq)
