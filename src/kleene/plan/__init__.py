"""Immutable compiled plans: the NFA^b automaton (linear SEQ plans and their per-branch union
for a top-level OR), the logical-block pushdown plan (AND / ANY / groups), predicate compilation
(vectorized masks and generated Python) and the plans' explain text."""

from .automaton import Plan, UnionPlan, compile_plan, compile_union_plan
from .groups import GroupPlan, compile_group_plan

__all__ = ["GroupPlan", "Plan", "UnionPlan", "compile_group_plan", "compile_plan",
           "compile_union_plan"]
