"""Nested negation on the group plan: a NOT inside a NOT's body (docs/semantics.md 4, "Nested
negation").

:class:`NestedGroupMatcher` is the :class:`~kleene.runtime.groups.GroupMatcher` of a plan whose
blocks carry :class:`~kleene.plan.blocks.NestedNeg`; the pda plan builds it only for such plans,
so every other query runs the group matcher unchanged. A NOT with NOTs in its body is decided on
complete matches against the partition's history (its body and inner variables are all
history bits): an occurrence of the body found in the outer interval forbids the match only if
each inner NOT accepts it, each inner NOT being decided like a NOT of the pattern over the
events of the outer interval. An occurrence can stop being one when a later event negates it,
so a match whose outer interval is still open (a trailing NOT) is decided only once that
interval has closed.
"""

from __future__ import annotations

from typing import Any

from ..plan.blocks import GroupPlan, NegBlock, NestedNeg
from ..plan.layout import GPOS
from .candidate import Candidate
from .groups import GroupMatcher, GroupState, _interval
from .matcher import MatcherOptions
from .nodes import all_true

Rec = tuple[Any, ...]
_Site = tuple[int, bool, tuple[int, ...], tuple[int, ...], tuple[int, bool] | None,
              tuple[int, ...], tuple[tuple[int, ...], ...]]


def has_nested(plan: GroupPlan) -> bool:
    """Does some NOT of the plan have NOTs in its body?"""
    return any(b.inner is not None for b in plan.negations)


class NestedGroupMatcher(GroupMatcher):
    """The group matcher with NOTs inside NOT bodies (see the module docstring)."""

    def __init__(self, plan: GroupPlan, options: MatcherOptions) -> None:
        super().__init__(plan, options)
        self._inner_sites: dict[int, tuple[_Site, ...]] = {}

    def _sites(self, inner: NestedNeg) -> tuple[_Site, ...]:
        """The inner NOT sites with variables as slots (as ``GroupMatcher._slow_sites``)."""
        got = self._inner_sites.get(id(inner))
        if got is None:
            slot = self.slot
            got = tuple(
                (site.index, site.in_and, tuple(slot[v] for v in site.left),
                 tuple(slot[v] for v in site.right), site.window,
                 tuple(slot[v] for v in site.scope),
                 tuple(tuple(slot[v] for v in br) for br in site.branches))
                for site in inner.sites)
            self._inner_sites[id(inner)] = got
        return got

    # -- the plan's own NOT sites: as GroupMatcher._neg_walk, deferring open nested ones -----
    def _neg_walk(self, st: GroupState, c: Candidate, final: bool) -> tuple[bool, int | None]:
        B = c.B
        bound = self._bound
        deadline: list[int] = []
        for k, in_and, left, right, win, scope, branches in self._slow_sites:
            if branches and not all(any(B[s] is not None for s in br) for br in branches):
                continue
            blk = self.plan.negations[k]
            if in_and:
                mine = bound(right, B)
                if mine and self._blocks(st.hist, blk, B, _between(mine, None)):
                    return False, (max(deadline) if deadline else None)
                continue
            opened = len(deadline)
            inside = _interval(bound(left, B), bound(right, B), win, scope, B, final, deadline)
            if blk.inner is not None and len(deadline) > opened:
                continue  # its interval is still open: decided when it closes
            if self._blocks(st.hist, blk, B, inside):
                return False, (max(deadline) if deadline else None)
        return True, (max(deadline) if deadline else None)

    # -- does a NOT forbid the bindings B over the events ``inside`` accepts? -----------------
    def _blocks(self, hist: list[tuple[Rec, int]], blk: NegBlock, B: tuple[Any, ...],
                inside: Any) -> bool:
        if blk.node is None:
            for rec, b in hist:
                if not inside(rec):
                    continue
                for v in blk.vars:
                    if not b & self.neg_bit[v]:
                        continue
                    slot = self.slot[v]
                    if all_true([p for p in blk.preds if v in p.vars],
                                B[:slot] + (rec,) + B[slot + 1:], self.iter_slot):
                        return True
            return False
        own = blk.vars if blk.inner is None else blk.inner.own
        mask = 0
        for v in own:
            mask |= self.neg_bit[v]
        B0 = list(B)
        for v in blk.vars:
            B0[self.slot[v]] = () if v in self.plan.layout.list_vars else None
        node = blk.node
        runs: list[tuple[Any, tuple[Any, ...]]] = [(self._init_of(node), tuple(B0))]
        for rec, b in hist:
            if not (b & mask and inside(rec)):
                continue
            grown = []
            for s, Bx in runs:
                for s2, B2 in self._steps(node, s, rec, b, Bx):
                    if (self._done(node, s2) and all_true(blk.preds, B2, self.iter_slot)
                            and (blk.inner is None or self._accepts(hist, blk.inner, B2,
                                                                     inside))):
                        return True
                    if self._alive(node, s2):
                        grown.append((s2, B2))
            runs.extend(grown)
        return False

    def _accepts(self, hist: list[tuple[Rec, int]], inner: NestedNeg, B: tuple[Any, ...],
                 outer: Any) -> bool:
        """Do the NOTs of a body accept its occurrence ``B``, over the events ``outer``
        accepts (the enclosing NOT's interval)?"""
        bound = self._bound
        for k, in_and, left, right, win, scope, branches in self._sites(inner):
            if branches and not all(any(B[s] is not None for s in br) for br in branches):
                continue
            blk = inner.blocks[k]
            if in_and:
                mine = bound(right, B)
                if mine and self._blocks(hist, blk, B, _between(mine, outer)):
                    return False
                continue
            inside = _interval(bound(left, B), bound(right, B), win, scope, B, True, [])
            if self._blocks(hist, blk, B, _both(inside, outer)):
                return False
        return True

    def _forbidden_pattern(self, st: GroupState, nblock: int, B: tuple[Any, ...],
                           inside: Any) -> bool:
        return self._blocks(st.hist, self.plan.negations[nblock], B, inside)


def _between(mine: list[Rec], outer: Any) -> Any:
    lo = min(x[GPOS] for x in mine)
    hi = max(x[GPOS] for x in mine)

    def inside(q: Rec) -> bool:
        return bool(lo < q[GPOS] < hi) and (outer is None or bool(outer(q)))
    return inside


def _both(a: Any, b: Any) -> Any:
    def inside(q: Rec) -> bool:
        return bool(a(q)) and bool(b(q))
    return inside


__all__ = ["NestedGroupMatcher", "has_nested"]
