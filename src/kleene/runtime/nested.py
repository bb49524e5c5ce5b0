"""Nested negation: a NOT inside a NOT's body (docs/semantics.md 4, "Nested negation").

The matchers here are the group matcher (pda plan) and the linear matcher (nfa plan, under
skip-till-next-match, the only strategy where it takes a NOT of a sub-pattern) of plans whose
negations carry :class:`~kleene.plan.blocks.NestedNeg`. The plans build them only for such
plans, so every other query runs the usual matchers unchanged.

A NOT with NOTs in its body is decided on complete matches over the history of events that could
bind its variables (its body's and its inner NOTs'): an occurrence of the body found in the
outer interval forbids the match only if each inner NOT accepts it, each inner NOT being decided
like a NOT of the pattern over the events of the outer interval (:class:`NestedCheck`). Unlike a
plain NOT, an occurrence can stop being one when a later event negates it, so a match whose outer
interval is still open (a trailing NOT) is decided only once that interval has closed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..plan.blocks import GroupPlan, NegBlock, NestedNeg
from ..plan.layout import GPOS
from ..plan.linear import NegGuard, Plan
from .candidate import Candidate
from .groups import GroupMatcher, GroupState, _interval
from .linear import LinearMatcher, PartState
from .matcher import MatcherOptions
from .nodes import NodeRunner, all_true

Rec = tuple[Any, ...]
Hist = list[tuple[Rec, int]]
_Site = tuple[int, bool, tuple[int, ...], tuple[int, ...], tuple[int, bool] | None,
              tuple[int, ...], tuple[tuple[int, ...], ...]]


def has_nested(plan: GroupPlan | Plan) -> bool:
    """Does some NOT of the plan have NOTs in its body?"""
    return any(b.inner is not None for b in plan.negations)


class NestedCheck:
    """Does a NOT forbid a match's bindings: its occurrence search with the inner NOTs."""

    def __init__(self, runner: NodeRunner, slot: dict[str, int], bit: Callable[[str], int],
                 iter_slot: dict[str, int], list_vars: frozenset[str]) -> None:
        self.runner = runner
        self.slot = slot
        self.bit = bit
        self.iter_slot = iter_slot
        self.list_vars = list_vars
        self._sites: dict[int, tuple[_Site, ...]] = {}

    def sites(self, inner: NestedNeg) -> tuple[_Site, ...]:
        """The inner NOT sites with variables as slots (as ``GroupMatcher._slow_sites``)."""
        got = self._sites.get(id(inner))
        if got is None:
            slot = self.slot
            got = tuple(
                (site.index, site.in_and, tuple(slot[v] for v in site.left),
                 tuple(slot[v] for v in site.right), site.window,
                 tuple(slot[v] for v in site.scope),
                 tuple(tuple(slot[v] for v in br) for br in site.branches))
                for site in inner.sites)
            self._sites[id(inner)] = got
        return got

    def forbids(self, hist: Hist, blk: NegBlock, B: tuple[Any, ...],
                inside: Callable[[Rec], bool]) -> bool:
        """Is there, among the events of ``hist`` that ``inside`` accepts, an event (a simple
        NOT) or an occurrence accepted by its inner NOTs (a NOT of a sub-pattern) that binds
        the NOT with the bindings ``B``?"""
        if blk.node is None:
            for rec, b in hist:
                if not inside(rec):
                    continue
                for v in blk.vars:
                    if not b & self.bit(v):
                        continue
                    slot = self.slot[v]
                    if all_true([p for p in blk.preds if v in p.vars],
                                B[:slot] + (rec,) + B[slot + 1:], self.iter_slot):
                        return True
            return False
        own = blk.vars if blk.inner is None else blk.inner.own
        mask = 0
        for v in own:
            mask |= self.bit(v)
        B0 = list(B)
        for v in blk.vars:
            B0[self.slot[v]] = () if v in self.list_vars else None
        run = self.runner
        node = blk.node
        runs: list[tuple[Any, tuple[Any, ...]]] = [(run._init_of(node), tuple(B0))]
        for rec, b in hist:
            if not (b & mask and inside(rec)):
                continue
            grown = []
            for s, Bx in runs:
                for s2, B2 in run._steps(node, s, rec, b, Bx):
                    if (run._done(node, s2) and all_true(blk.preds, B2, self.iter_slot)
                            and (blk.inner is None or self.accepts(hist, blk.inner, B2,
                                                                    inside))):
                        return True
                    if run._alive(node, s2):
                        grown.append((s2, B2))
            runs.extend(grown)
        return False

    def accepts(self, hist: Hist, inner: NestedNeg, B: tuple[Any, ...],
                outer: Callable[[Rec], bool]) -> bool:
        """Do the NOTs of a body accept its occurrence ``B``, over the events ``outer``
        accepts (the enclosing NOT's interval)?"""
        for k, in_and, left, right, win, scope, branches in self.sites(inner):
            if branches and not all(any(B[s] is not None for s in br) for br in branches):
                continue  # in an OR / ANY branch the occurrence did not take
            blk = inner.blocks[k]
            if in_and:
                mine = _bound(right, B)
                if mine and self.forbids(hist, blk, B, _between(mine, outer)):
                    return False
                continue
            inside = _interval(_bound(left, B), _bound(right, B), win, scope, B, True, [])
            if self.forbids(hist, blk, B, _both(inside, outer)):
                return False
        return True


class NestedGroupMatcher(GroupMatcher):
    """The group matcher with NOTs inside NOT bodies (see the module docstring)."""

    def __init__(self, plan: GroupPlan, options: MatcherOptions) -> None:
        super().__init__(plan, options)
        self.nested = NestedCheck(self, self.slot, self.neg_bit.__getitem__, self.iter_slot,
                                  plan.layout.list_vars)

    def _neg_walk(self, st: GroupState, c: Candidate, final: bool) -> tuple[bool, int | None]:
        """As ``GroupMatcher._neg_walk``, deciding a nested NOT only once its interval has
        closed."""
        B = c.B
        bound = self._bound
        deadline: list[int] = []
        for k, in_and, left, right, win, scope, branches in self._slow_sites:
            if branches and not all(any(B[s] is not None for s in br) for br in branches):
                continue
            blk = self.plan.negations[k]
            if in_and:
                mine = bound(right, B)
                if mine and self.nested.forbids(st.hist, blk, B, _between(mine, None)):
                    return False, (max(deadline) if deadline else None)
                continue
            opened = len(deadline)
            inside = _interval(bound(left, B), bound(right, B), win, scope, B, final, deadline)
            if blk.inner is not None and len(deadline) > opened:
                continue  # its interval is still open: decided when it closes
            if self.nested.forbids(st.hist, blk, B, inside):
                return False, (max(deadline) if deadline else None)
        return True, (max(deadline) if deadline else None)


class NestedLinearMatcher(LinearMatcher):
    """The linear matcher with NOTs inside NOT bodies (see the module docstring): a nested
    guard is checked on the events of its interval (``LinearMatcher._occurs``' pairs) once
    that interval has closed, never by the incremental kill of waiting matches."""

    def __init__(self, plan: Plan, options: MatcherOptions, *, count_mode: bool = False,
                 timeouts: bool = False) -> None:
        super().__init__(plan, options, count_mode=count_mode, timeouts=timeouts)
        assert self.nodes is not None
        self.nested = NestedCheck(self.nodes, self.slot, _slot_bit(self.slot), self.iter_slot,
                                  plan.layout.list_vars)
        self._final = False
        self._blocks = {id(g): NegBlock(tuple(v for v, _t, _m in g.body),
                                        tuple(t for _v, t, _m in g.body), g.preds,
                                        tuple(m for _v, _t, m in g.body), g.node, g.inner)
                        for g in plan.negations if g.inner is not None}

    def _occurs(self, g: NegGuard, B: tuple[Any, ...], pairs: list[tuple[Rec, int]]) -> bool:
        if g.inner is None:
            return super()._occurs(g, B, pairs)
        if not self._final and not self._bound_in(B, g.gap, g.seq_hi):
            return False  # a tail still open: decided when the match is released
        return self.nested.forbids(pairs, self._blocks[id(g)], B, _anything)

    def _trailing_kill(self, st: PartState, gi: int, g: NegGuard, n: Rec) -> None:
        if g.inner is None:
            super()._trailing_kill(st, gi, g, n)

    def release_pending(self, st: PartState, watermark: int | None) -> list[Candidate]:
        """Matches whose tails have closed, with every NOT checked again on the whole tail."""
        done = super().release_pending(st, watermark)
        if not done:
            return done
        self._final = True
        try:
            return [c for c in done if self.negation_ok(st, c)]
        finally:
            self._final = False


def _slot_bit(slot: dict[str, int]) -> Callable[[str], int]:
    """The linear plan's candidate bit of a variable: its layout slot (positive variables,
    then each guard's events, in order)."""
    def bit(v: str) -> int:
        return 1 << slot[v]
    return bit


def _bound(slots: tuple[int, ...], B: tuple[Any, ...]) -> list[Rec]:
    return GroupMatcher._bound(slots, B)


def _anything(q: Rec) -> bool:
    del q
    return True


def _between(mine: list[Rec], outer: Callable[[Rec], bool] | None) -> Callable[[Rec], bool]:
    lo = min(x[GPOS] for x in mine)
    hi = max(x[GPOS] for x in mine)

    def inside(q: Rec) -> bool:
        return bool(lo < q[GPOS] < hi) and (outer is None or bool(outer(q)))
    return inside


def _both(a: Callable[[Rec], bool], b: Callable[[Rec], bool]) -> Callable[[Rec], bool]:
    def inside(q: Rec) -> bool:
        return bool(a(q)) and bool(b(q))
    return inside


__all__ = ["NestedCheck", "NestedGroupMatcher", "NestedLinearMatcher", "has_nested"]
