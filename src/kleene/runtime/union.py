"""A top-level OR as several linear matchers over the same records (one per branch).

Each branch runs its own NFA^b (its own runs per key) on its slice of the candidate bits; its
candidates are re-laid onto the union's variable slots (other branches' variables unbound) and
merged in the documented output order.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from ..frozen import dataclass
from ..plan.layout import GPOS
from ..plan.linear import UnionPlan
from .candidate import Candidate, output_sort_key
from .linear import LinearMatcher, PartState
from .matcher import MatcherOptions
from .nested import NestedLinearMatcher, has_nested

_DEFAULTS = MatcherOptions()


@dataclass(slots=True)
class UnionState:
    """Per-key state: one linear state per branch."""

    parts: list[PartState] = field(default_factory=list)

    @property
    def runs(self) -> list[Any]:
        """Every branch's runs (tagged with the branch index), for snapshots."""
        return [(i, r) for i, p in enumerate(self.parts) for r in p.runs]

    @property
    def pending(self) -> list[Candidate]:
        """Matches waiting on a trailing NOT, in any branch."""
        return [c for p in self.parts for c in p.pending]

    @property
    def last_wpos(self) -> int:
        """The last per-partition position seen."""
        return max(p.last_wpos for p in self.parts)

    @last_wpos.setter
    def last_wpos(self, value: int) -> None:
        for p in self.parts:
            p.last_wpos = value


class UnionMatcher:
    """Evaluates a :class:`UnionPlan`."""

    def __init__(self, plan: UnionPlan, options: MatcherOptions = _DEFAULTS) -> None:
        self.plan = plan
        # a branch with a NOT inside a NOT's body (skip-till-next-match) takes the nested
        # matcher; every other branch the linear matcher, as before
        self.branches = [(NestedLinearMatcher if has_nested(b) else LinearMatcher)(b, options)
                         for b in plan.branches]
        self.kernel = None
        self.simple_key = False
        self.offsets: list[int] = []
        self.widths: list[int] = []
        off = 0
        for m in self.branches:
            w = len(m.mask_specs())
            self.offsets.append(off)
            self.widths.append(w)
            off += w
        self.slot = dict(plan.layout.var_slots)
        self.maps = [[(m.plan.layout.var_slots[v], self.slot[v]) for v in m.plan.order]
                     for m in self.branches]
        self.nslots = len(self.slot)
        self.has_trailing = any(m.has_trailing for m in self.branches)
        # the output key's per-variable part, when every branch binds each of its variables
        # to one event: (first slot, [(index in the union order, slot)]) per branch
        self.simple_branches: list[tuple[int, list[tuple[int, int]]]] | None = None
        if all(m.simple_key and not m.plan.layout.list_vars for m in self.branches):
            where = {v: i for i, v in enumerate(plan.order)}
            self.simple_branches = [
                (self.slot[m.plan.order[0]],
                 [(where[v], self.slot[v]) for v in m.plan.order]) for m in self.branches]
            self.unbound_key: tuple[tuple[int, ...], ...] = ((0,),) * len(plan.order)
        self.origin: dict[int, tuple[int, Candidate]] = {}
        self.decides_negation = bool(plan.negations) and all(
            m.decides_negation or not m.plan.negations for m in self.branches)
        """Every NOT of every branch is decided inside its automaton (see LinearMatcher)."""
        self.track = bool(plan.negations) and not self.decides_negation
        """Remember each lifted match's branch (only needed for negation checks)."""

    def plain_values(self, plain: bool) -> None:
        """Forwarded to every branch (:meth:`LinearMatcher.plain_values`)."""
        for m in self.branches:
            m.plain_values(plain)

    @property
    def truncated_runs(self) -> int:
        """Runs dropped by on_cap='truncate', over all branches."""
        return sum(m.truncated_runs for m in self.branches)

    @property
    def truncated_matches(self) -> int:
        """Matches dropped by on_cap='truncate', over all branches."""
        return sum(m.truncated_matches for m in self.branches)

    def mask_specs(self) -> list[tuple[str | None, Any]]:
        """Every branch's candidate bits, one after the other."""
        return [s for m in self.branches for s in m.mask_specs()]

    def dump_state(self, st: UnionState) -> Any:
        """Plain data for a snapshot."""
        return [m.dump_state(p) for m, p in zip(self.branches, st.parts, strict=True)]

    def load_state(self, data: Any) -> UnionState:
        """Inverse of :meth:`dump_state`."""
        return UnionState([m.load_state(d) for m, d in zip(self.branches, data, strict=True)])

    def new_state(self) -> UnionState:
        """Fresh per-key state."""
        return UnionState([m.new_state() for m in self.branches])

    def _lift(self, bi: int, c: Candidate) -> Candidate:
        B = [None] * self.nslots
        for src, dst in self.maps[bi]:
            B[dst] = c.B[src]
        lifted = Candidate(tuple(B), c.first_ts, c.first_wpos, c.last_gpos, c.last_ts,
                           c.last_wpos, c.positions, c.trailing)
        if self.track:
            self.origin[id(lifted)] = (bi, c)
        return lifted

    @property
    def max_matches_per_call(self) -> int | None:
        """The runtime's matches-per-call cap (the same in every branch)."""
        return self.branches[0].max_matches_per_call

    def process(self, st: UnionState, recs: list[Any], bits: list[int],
                out: list[Candidate], max_matches: int | None,
                budget: int | None = None) -> None:
        """Run every branch on its slice of the bits; ``out`` holds at most ``budget``
        matches in all (a branch gets what the branches before it left)."""
        for bi, m in enumerate(self.branches):
            off, mask = self.offsets[bi], (1 << self.widths[bi]) - 1
            sub = [(b >> off) & mask for b in bits]
            tmp: list[Candidate] = []
            m.process(st.parts[bi], recs, sub, tmp, max_matches,
                      None if budget is None else max(0, budget - len(out)))
            out.extend(self._lift(bi, c) for c in tmp)

    def negation_ok(self, st: UnionState, c: Candidate) -> bool:
        """The branch's own negation check."""
        bi, orig = self.origin[id(c)]
        ok = self.branches[bi].negation_ok(st.parts[bi], orig)
        c.trailing = orig.trailing
        return ok

    def needs_trailing(self, c: Candidate) -> bool:
        """Does it wait for a trailing NOT?"""
        return bool(c.trailing)

    def match_preds_ok(self, c: Candidate) -> bool:
        """Nothing left to check on the whole match."""
        del c
        return True

    def admit_pending(self, st: UnionState, c: Candidate) -> None:
        """Park a match on its branch's pending list."""
        bi, orig = self.origin.pop(id(c))
        st.parts[bi].pending.append(orig)

    def forget(self, c: Candidate) -> None:
        """Drop the bookkeeping of an admitted or rejected match."""
        self.origin.pop(id(c), None)

    def release_pending(self, st: UnionState, watermark: int | None) -> list[Candidate]:
        """Released matches of every branch, lifted onto the union layout."""
        out = []
        for bi, m in enumerate(self.branches):
            for c in m.release_pending(st.parts[bi], watermark):
                lifted = self._lift(bi, c)
                self.origin.pop(id(lifted), None)
                out.append(lifted)
        return out

    def oldest(self, st: UnionState) -> int | None:
        """The smallest position a future match of this key can bind (None: no live run)."""
        vals = [x for m, p in zip(self.branches, st.parts, strict=True)
                if (x := m.oldest(p)) is not None]
        return min(vals, default=None)

    def prune(self, st: UnionState) -> None:
        """Prune every branch's history."""
        for bi, m in enumerate(self.branches):
            m.prune(st.parts[bi])

    def sort_key(self, c: Candidate) -> tuple[Any, ...]:
        """Output order (docs/semantics.md 10): :func:`output_sort_key`, built directly from
        the branch's variables when each binds one event (the others are unbound)."""
        sb = self.simple_branches
        if sb is not None:
            B = c.B
            for first, where in sb:
                if B[first] is not None:
                    per: list[tuple[Any, ...]] = list(self.unbound_key)
                    for i, slot in where:
                        per[i] = (1, (B[slot][GPOS],))
                    return (c.last_gpos, c.positions, tuple(per))
        return output_sort_key(c, self.plan.order, self.slot)


__all__ = ["UnionMatcher", "UnionState"]
