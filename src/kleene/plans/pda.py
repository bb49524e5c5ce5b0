"""``pda``: LogCEP's logical blocks (a pushdown automaton over AND / ANY / SEQ / repeated
groups), with negation decided in the automaton where it can be (docs/engine.md)."""

from __future__ import annotations

from typing import Any

from .. import ast
from ..plan.explain import group_text
from ..plan.groups import And, AnyK, Ev, GroupPlan, Node, Rep, Seq, Win, compile_group_plan
from ..runtime.matcher import MatcherOptions
from ..semantic.analyzed import AnalyzedQuery
from .registry import CompiledPlan, PlanKind, Stats, runs_estimate

BLOCK_OVERHEAD = 1.6
"""The logical-block matcher's work per partial match relative to the NFA's (it tracks
per-block state). Not a fitted value: it only has to make the NFA win wherever both apply.
Measured once (2026-11-23, CPU, median of 5): on the stock query (strict contiguity, Kleene,
200k events) the pushdown plan took 81.8 s against the NFA's 0.58 s, far more than 1.6x."""


def _steps(n: Node, plan: GroupPlan, stats: Stats) -> list[tuple[float, bool, int]]:
    if isinstance(n, Ev):
        return [(stats.share(n.type), False, 1 if plan.masks.get(n.var) is not None else 0)]
    if isinstance(n, Rep):
        return [(s, True, c) for s, _k, c in _steps(n.body, plan, stats)]
    if isinstance(n, Win):
        return _steps(n.body, plan, stats)
    if isinstance(n, AnyK) and n.k == 1:
        # OR: the branches run side by side; estimate by the most expensive one
        branches = [_steps(i, plan, stats) for i in n.items]
        return max(branches, key=lambda st: runs_estimate(st, 1_000.0, plan.strategy))
    out: list[tuple[float, bool, int]] = []
    for i in n.items:
        out += _steps(i, plan, stats)
    if isinstance(n, And | AnyK):
        # any order: every permutation's prefixes are live at once
        out = out + out[:-1]
    assert isinstance(n, Seq | And | AnyK)
    return out


def _runs(node: Node, plan: GroupPlan, stats: Stats, n: float) -> float:
    """Expected live runs: a top-level OR's branches run side by side (their sum)."""
    if isinstance(node, Win):
        return _runs(node.body, plan, stats, n)
    if isinstance(node, AnyK) and node.k == 1:
        return sum(_runs(i, plan, stats, n) for i in node.items)
    return runs_estimate(_steps(node, plan, stats), n, plan.strategy)


def _cost(plan: GroupPlan, stats: Stats) -> float:
    n = stats.events_in(plan.window_us, plan.window_events)
    return 1.0 + BLOCK_OVERHEAD * _runs(plan.root, plan, stats, n)


def _can_be_empty(p: ast.Pattern) -> bool:
    """Can ``p`` match binding no event (NOTs bind none)?"""
    if isinstance(p, ast.EventPattern | ast.Not):
        return isinstance(p, ast.Not)
    if isinstance(p, ast.Kleene):
        return p.min == 0
    if isinstance(p, ast.Within):
        return _can_be_empty(p.body)
    if isinstance(p, ast.Seq | ast.And):
        return all(_can_be_empty(i) for i in p.items)
    if isinstance(p, ast.AnyOf):
        return sum(_can_be_empty(i) for i in p.items if not isinstance(i, ast.Not)) >= p.k
    return any(_can_be_empty(i) for i in p.items if not isinstance(i, ast.Not))


def _compile(analyzed: AnalyzedQuery) -> GroupPlan:
    return compile_group_plan(analyzed, nested=True)


def _matcher(cp: CompiledPlan, options: MatcherOptions) -> Any:
    # the matchers' modules are imported when a pda plan runs, not when the registry loads
    from ..runtime.groups import GroupMatcher
    from ..runtime.nested import NestedGroupMatcher, has_nested

    if has_nested(cp.plan):  # a NOT inside a NOT's body: only such plans take this matcher
        return NestedGroupMatcher(cp.plan, options)
    return GroupMatcher(cp.plan, options)


PLAN = PlanKind(
    name="pda",
    description="LogCEP logical blocks: a pushdown automaton over AND / ANY / SEQ / groups",
    compile=_compile,
    matcher=_matcher,
    cost=_cost,
    explain=group_text,
    after_match=True,
    running=True,
)
