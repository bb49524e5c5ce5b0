"""``union``: a top-level OR of linear patterns, one NFA^b (and kernel) per branch, merged in
output order (docs/semantics.md 8)."""

from __future__ import annotations

from typing import Any

from ..plan.automaton import UnionPlan, compile_union_plan
from ..plan.explain import union_text
from ..runtime.kernel import kernel_supported
from ..runtime.matcher import MatcherOptions
from .nfa import kernel_for, linear_cost
from .registry import CompiledPlan, PlanKind, Stats


def _cost(plan: UnionPlan, stats: Stats) -> float:
    return sum(linear_cost(b, stats) for b in plan.branches)


def _matcher(cp: CompiledPlan, options: MatcherOptions) -> Any:
    from ..runtime.union import UnionMatcher  # imported when a union runs: start-up

    m = UnionMatcher(cp.plan, options)
    for i, bm in enumerate(m.branches):
        if options.use_kernel and kernel_supported(bm.plan):
            bm.kernel = kernel_for(bm, cp.memo, ("branch kernel", i, options))
    return m


PLAN = PlanKind(
    name="union",
    description="top-level OR: one NFA^b per branch, merged in output order",
    compile=compile_union_plan,
    matcher=_matcher,
    cost=_cost,
    explain=union_text,
    after_match=True,
    running=True,
)
