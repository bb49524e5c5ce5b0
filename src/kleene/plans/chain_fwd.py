"""Forward CombineMatch for the chain plan's general join (docs/engine.md, "Streaming output").

:meth:`~kleene.plans.chain.ChainMatcher.combine` walks a complete node's chains backwards and
so makes its matches in another order than the output order (docs/semantics.md 10: the last
event, then the *first* event, then the events from the second-to-last down to the second).
:class:`FwdJoin` enumerates them in the output order itself, lazily: the first node
outermost (ascending), then a depth-first walk back from the last node in which every step
takes the predecessors in ascending stream position and only those from which the fixed first
node is still reachable. Going back to the first node ends the walk, and as that node is
earlier than every other, "the positions run out first" comes first, as the order wants.

Reachability is a suffix: the nodes of state ``j >= 1`` from which first node ``f`` is
reached are those from ``m_j(f)`` on, since a node reaches ``f`` exactly when one of its
snapshots exceeds that source's ``m_s(f)`` and snapshots never decrease along a partition. So
``m_j(f)`` is one bisection per source and state (:meth:`FwdJoin.firsts`), and every node the
walk visits leads to at least one match with first node ``f`` (no dead ends): the work is
the output, plus the conditions that prune it.

A node's predecessors are one range per *predecessor partition*: each source state's (a
``*`` closure that may be skipped gives a state several sources) and, for a Kleene state, its
own earlier nodes; the walk takes their heads in ascending stream position
(:meth:`FwdJoin._paths_chain` for a chain with at most one Kleene state, two ranges;
:meth:`FwdJoin._paths_general` otherwise). Where two predecessor partitions of a node share
an event type (``SEQ(a, b, b+ c[], d)``, two lists of one type), one event may head both and
the two subtrees' matches interleave: :meth:`FwdJoin._paths_shared` then walks position
sequences, each step holding every partial binding with those positions (the same events in
other states) and taking the next position over all of them; bindings that reach the first
node together are matches of the same events, written in the order of their bindings
(docs/semantics.md 10, rule 4).

Conditions the storage does not decide are evaluated during the walk: a conjunct over single
variables at the step that binds the earliest of its middle variables (the first and the
last are bound before the walk), a per-element conjunct of a Kleene list (``b[i].x >
a.x``, no ``b[i-1]``, absolute index or other list) when the element is bound; either prunes
the partial binding's subtree (a first list's: at each of its nodes, the first node too, every
later single bound; a last list's over singles, one in the middle: over the whole list at the
step of the earliest middle one, :meth:`FwdJoin._last_ok`; with the first single only: at each
of its nodes, the last before the walk, :meth:`FwdJoin._l_ok`). The rest (aggregates, whole lists, pairs) is checked on the
complete binding.

A NOT that is not trailing is tested against the matcher's negation history. One of one
event bounded by bound events on both sides whose predicates read single variables (the
automaton's "fast" NOTs) is decided during the walk (:meth:`FwdJoin._neg_setup`): at the
step that first goes below its gap, the node it takes and the one before are the interval's
ends, and at that step (or the later one that binds a variable left of the gap that its
predicates read) a negating event in the interval prunes the subtree, so the work per
written match stays bounded however many the NOT rejects. One right after a single first
state whose predicates read only the first and the last variable has its upper end, the
match's second event, bound last (a list's first element): it is bounded per first node by
the first negating event after it (:class:`_FirstNeg`, :meth:`FwdJoin._first_open`), which
skips a first node left without a match and makes the step into the first node one
comparison. A leading NOT over the first and the last variable has its whole lead-in
bound before a first node's walk and skips the first nodes it rejects
(:meth:`FwdJoin._lead_ok`) where nothing counts the matches before it (no caps; a block's
second walk). The others (predicates over a list, a leading NOT under a cap) are the
history test (``negation_ok``) on each complete match (:meth:`FwdJoin.kept`). The count
for the caps is of the matches the pruned walk makes (after the NOTs it decides at a step
or per first node, before the others' test), as the NFA counts its runs' matches
(``ChainMatcher._join_fwd``); a block holds a copy of the negation history for its second
walk.

Shape (:meth:`FwdJoin.fits`): no trailing NOT, no PICK / EMIT RECENT / CONSUME / AFTER MATCH SKIP
(RETURN allowed: its values are computed as each match is written), single variables and
Kleene lists (``+`` / ``*``), every state after the first with a source, the first
state the only start (leading ``*`` states: those and the one after them,
:meth:`FwdJoin.from_second` -- recursive, a ``*`` second state has its own ``alt`` --
and :meth:`FwdJoin._merged`); the accepting
states the last and each one followed only by ``*``
lists, whose matches (those lists empty) the same walk cut after it makes
(:meth:`FwdJoin.ending_at`; an event that ends matches in two states: one block whose walk
merges its nodes' matches in the output order, :meth:`FwdBlock.walk`; with a ``*`` first
state the cut has its ``alt`` cut too). Bounded
repetitions (``{m,n}``) are not chain plans at all.

A last event's matches are counted by one walk (:meth:`FwdJoin.count`) -- exact, so caps and
counters keep their meaning -- and, when they are :data:`BLOCK_MIN` or more, described by a
:class:`FwdBlock` (a copy of the reachable nodes) that walks again when it is written, a piece
of at most ``chunk`` matches at a time, as :class:`~kleene.events.matchtable.MatchColumns`.
"""

from __future__ import annotations

import copy
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from ..events import Match
from ..events.matchtable import MatchBlock, MatchColumns
from ..plan.automaton import CompKind, Plan
from ..plan.expr import GPOS, ID, TS, WPOS
from ..plan.predicate import Timing
from ..runtime.candidate import Candidate
from ..runtime.nodes import decidable_early
from .chain_stream import id_array

BLOCK_MIN = 64
"""A last event with this many matches or more is written as one :class:`FwdBlock`; fewer are
built as ``Match`` objects during the counting walk (a block's copy would cost more)."""

Rec = tuple[Any, ...]
View = tuple[list[Rec], list[tuple[int, ...]], int]
"""One partition as the walk reads it: records, snapshots, global index of the first."""



def shared_sources(plan: Plan, srcs: Sequence[Sequence[int]]) -> bool:
    """Do two predecessor partitions of a state share an event type? ``srcs[k]``: the states a
    node of state ``k`` follows (its sources, through ``*`` states); a Kleene state is its own
    predecessor too, and a single first state counts only with its first node. Used by
    :class:`FwdJoin` (the matcher's sources) and by the chooser (:func:`plan_sources`)."""
    comps = plan.components
    k0 = comps[0].kind is CompKind.KLEENE  # then more than the first node of state 0
    for k in range(1, len(comps)):
        preds = [j for j in srcs[k] if j > 0 or k0] + ([k] if comps[k].kind
                                                       is CompKind.KLEENE else [])
        seen: set[str | None] = set()
        for j in preds:
            ts = comps[j].types
            if len(preds) > 1 and (not ts or seen & set(ts)):
                return True
            seen |= set(ts or ())
    return False


def plan_sources(plan: Plan) -> list[list[int]]:
    """Per state, the states its nodes follow, from the plan alone: the one before it and,
    through each skippable (``*``) state, the ones before that."""
    comps = plan.components
    out: list[list[int]] = [[]]
    for k in range(1, len(comps)):
        srcs, j = [], k - 1
        while j >= 0:
            srcs.append(j)
            if comps[j].min != 0:
                break
            j -= 1
        out.append(srcs)
    return out

def late_negation(plan: Plan, g: Any, comp_of: dict[str, int]) -> bool:
    """Is NOT ``g`` of ``plan`` tested on each complete match the walk makes (the history
    test), rather than decided at the step that fixes its interval? A NOT of a sub-pattern,
    one not bounded by a state that cannot be empty on both sides in its SEQ (a leading
    one's window lead-in), or one whose predicates read a list (``comp_of``: each
    component's first variable -> its index). The matcher (:meth:`FwdJoin._neg_setup`) and
    the chooser (:func:`.chain.fwd_late_not`) both ask this."""
    comps = plan.components
    if (g.node is not None or not decidable_early(g.preds, plan.layout.list_vars)
            or not any(not comps[i].nullable for i in range(g.seq_lo, g.gap))
            or not any(not comps[i].nullable for i in range(g.gap, g.seq_hi))):
        return True
    return any(comps[comp_of[v]].kind is CompKind.KLEENE  # (decidable_early: no list read)
               for pr in g.preds for v in pr.vars if v in comp_of)


class FwdJoin:
    """The forward join of one matcher's plan: its shape and where each conjunct is checked."""

    def __init__(self, plan: Plan, m: Any) -> None:
        comps = plan.components
        n = self.n = len(comps)
        self.last = n - 1
        self.kleene = [c.kind is CompKind.KLEENE for c in comps]
        self.kk = self.kleene.index(True) if any(self.kleene) else -1
        self.cslot = list(m.cslot)
        self.is_list = list(m.is_list)
        self.empty = list(m.empty_B)
        self.name = plan.name
        self.order = plan.order
        self.neg_ok: Any = m.negation_ok if plan.negations else None
        """With a NOT (never trailing, :meth:`fits`): the matcher's history test of a
        complete candidate (``LinearMatcher.negation_ok``), run on each match the walk
        makes when it counts for a cap (``ChainMatcher._join_fwd``)."""
        self.neg_at: list[list[tuple[Any, ...]]] | None = None
        """The NOTs the walk decides early (:meth:`_neg_place`), by the states of the step
        that decides them: ``neg_at[k][j]`` when it steps from a node of state ``k`` to one
        of ``j`` (but those of :attr:`neg0`); None: it decides none."""
        self.neg_ents: tuple[tuple[int, int, int, tuple[Any, ...], frozenset[int]], ...] = ()
        """The NOTs decided early: (index, gap, slot, predicates, the states they read)."""
        self.neg0: tuple[tuple[int, int, tuple[Any, ...]], ...] = ()
        """The early NOTs right after a single first state that read only the first and
        the last variable (index, slot, predicates): bounded per first node by the first
        negating event after it (:class:`_FirstNeg`)."""
        self.second: tuple[int, ...] = ()
        """With :attr:`neg0`: the states a match's second event may be in (a source of
        theirs is the first)."""
        self.gate: list[bool] = []
        """With :attr:`neg0`: the single states whose every node is a second event (the
        first their only source), tested at their own step."""
        self.lead_ents: tuple[tuple[int, int, tuple[Any, ...], frozenset[int], int, bool],
                              ...] = ()
        """The leading NOTs of one event over single variables (index, slot, predicates,
        the states they read, the window, a count window?): each also in :attr:`neg_late`."""
        self.lead0: tuple[tuple[int, int, tuple[Any, ...], int, bool], ...] = ()
        """Those whose predicates read only the first and the last variable: decided per
        first node before its walk (:meth:`_lead_ok`) where nothing counts the matches
        before them (:meth:`paths`' ``lead``)."""
        self.late_gis: frozenset[int] = frozenset()
        """The NOTs :attr:`neg_late` is for (not decided at a step or by :attr:`neg0`)."""
        self.lead_all = False
        """Every one of them is in :attr:`lead0`: with ``lead`` the walk needs no
        history test on the complete match."""
        self.scan0: list[bool] = []
        """With :attr:`neg0`: per state, do its step conjuncts read only the first, the
        last and its own variable (then :meth:`_first_open` checks them)?"""
        self.neg_late: Any = None
        """The history test of the complete match when some NOT is not decided early (the
        matcher's, of every NOT; the early ones pass again); None: none is needed."""
        self.neg_reads: frozenset[int] = frozenset()
        """The states whose single variable an early NOT's predicates read."""
        self.to_match: Any = None
        """With RETURN: the runtime's candidate -> ``Match`` (values computed as each match
        is written; ``ChainMatcher.bind_to_match``); None: blocks write columns."""
        comp_of = {c.vars[0]: k for k, c in enumerate(comps)}
        self.comp = tuple(comp_of[v] for v in plan.order)
        self.end_fns = [pr.compiled.fn for pr, _sl in m.end_filters]
        self.s0, self.s_last = m.end_slots
        self.srcs = [tuple(x) for x in m.srcs]
        self.lists = tuple(k for k in range(n) if self.kleene[k])
        """The Kleene states (each a list; a ``*`` one may bind no event)."""
        self.chain = (self.srcs == [()] + [(k - 1,) for k in range(1, n)]
                      and len(self.lists) <= 1)
        """The first shape (a chain of states, at most one Kleene): :meth:`_paths_chain`,
        else the general walk :meth:`_paths_general`."""
        self.shared = self._shared(plan, m)
        """One event may be in two predecessor partitions of a node: :meth:`_paths_shared`."""
        if self.shared:
            self.chain = False
        step: list[list[Any]] = [[] for _ in range(n)]
        step_pr: list[list[Any]] = [[] for _ in range(n)]
        lstep: list[list[Any]] = [[] for _ in range(n)]
        lstep_pr: list[list[Any]] = [[] for _ in range(n)]
        leaf: list[Any] = []
        kvar = {comps[k].vars[0]: k for k in self.lists}
        lists = set(self.lists)
        for pr, sl in m.filters:
            ks = {comp_of.get(v, -1) for v in pr.vars}
            mids = ks - {0, n - 1}
            simple = (pr.general is None and not pr.opt_slots and not pr.prev
                      and not pr.abs_need and -1 not in ks)
            kl = ks & lists
            if simple and kl == {0} and pr.iter_var is not None and kvar.get(pr.iter_var) == 0:
                # per element of a first list, the rest singles: at each of its nodes (the
                # first node too, before the match is made), every later single bound
                step[0].append(pr.compiled.fn)
                step_pr[0].append((pr, sl))
                continue
            if (simple and ks == {0, n - 1} and kl == {n - 1} and pr.iter_var is not None
                    and kvar.get(pr.iter_var) == n - 1):
                # per element of a last list and the first (single): at each of its nodes
                # (the last node too, before the walk: :meth:`_l_ok`)
                step[n - 1].append(pr.compiled.fn)
                step_pr[n - 1].append((pr, sl))
                continue
            if (simple and mids and kl == {n - 1} and pr.iter_var is not None
                    and kvar.get(pr.iter_var) == n - 1):
                # per element of a last list, the rest singles: over the whole list (every
                # node of it is on the stack by then) at the step of its earliest middle one
                lstep[min(mids)].append(pr.compiled.fn)
                lstep_pr[min(mids)].append((pr, sl))
                continue
            if not mids or not simple or kl & {0, n - 1}:
                leaf.append((pr, sl))
                continue
            at = min(mids)
            if kl:
                if kl == {at} and pr.iter_var is not None and kvar.get(pr.iter_var) == at:
                    step[at].append(pr.compiled.fn)  # per element, the rest bound
                    step_pr[at].append((pr, sl))
                else:
                    leaf.append((pr, sl))
            elif pr.iter_var is None:
                step[at].append(pr.compiled.fn)
                step_pr[at].append((pr, sl))
            else:
                leaf.append((pr, sl))
        self.step = [tuple(s) for s in step]
        self.step_pr = [tuple(s) for s in step_pr]
        self.lstep = [tuple(s) for s in lstep]
        """Per state, the per-element conjuncts of a last list checked at its step
        (:meth:`_last_ok`; the general walks only)."""
        self.lstep_pr = [tuple(s) for s in lstep_pr]
        if any(self.lstep):
            self.chain = False
        self.leaf = tuple(leaf)
        self._neg_setup(plan, m)
        self.bind = [not self.kleene[k] and (any(self.step[:k]) or any(self.lstep[:k])
                                             or k in self.neg_reads)
                     for k in range(n)]
        """States whose node the walk puts into the bindings it checks (read by a
        conjunct of an earlier state, bound after them, or by an early NOT)."""
        self.opt = tuple(c.kind is CompKind.KLEENE and c.min == 0 for c in comps)
        """The ``*`` states (a list that may bind no event)."""
        self.alt: FwdJoin | None = None
        """A ``*`` first state (:meth:`fits`): the walk of the matches with that list empty,
        which start in the second state (:meth:`from_second`; a ``*`` second state again:
        its own ``alt``, and so on); :meth:`paths` merges them with those starting in the
        first, by the output order."""
        self.nstart = 1
        """The states a match may start in: the leading ``*`` states and the one after them
        (:meth:`paths` takes a range of first nodes for each)."""
        if self.opt[0]:
            self.alt = self.from_second(tuple(m.end_filters))
            self.nstart = 1 + self.alt.nstart

    def _neg_setup(self, plan: Plan, m: Any) -> None:
        """Which NOTs the walk decides early (:meth:`_neg_place` says at which step). A NOT
        of one event whose interval is bounded by bound events on both sides (a state that
        cannot be empty before its gap and one after, in its SEQ: the automaton's "fast"
        NOTs) and whose predicates read single variables only (:func:`~kleene.runtime.nodes
        .decidable_early`). The rest (a NOT of a sub-pattern, a leading one's window
        lead-in, predicates over a list) are tested on the complete match
        (:attr:`neg_late`); of those, a leading one of one event over single variables is
        also listed (:attr:`lead_ents`) to be decided per first node where nothing counts
        the matches before it."""
        negs = plan.negations
        if not negs:
            return
        comps = plan.components
        comp_of = {c.vars[0]: k for k, c in enumerate(comps)}
        lists = plan.layout.list_vars
        ents: list[tuple[int, int, int, tuple[Any, ...], frozenset[int]]] = []
        leads: list[tuple[int, int, tuple[Any, ...], frozenset[int], int, bool]] = []
        lates: set[int] = set()
        n = len(comps)
        for gi, g in enumerate(negs):
            if (g.node is None and g.gap == 0 and g.win_amount is not None
                    and g.scope_lo == 0 and g.scope_hi == n - 1
                    and decidable_early(g.preds, lists)):
                # leading, its lead-in from the last event's time (position) less the
                # window to the first event: both bound before a first node's walk
                rd = frozenset(comp_of[v] for p in g.preds for v in p.vars if v in comp_of)
                leads.append((gi, m.slot[g.var], tuple(g.preds), rd, g.win_amount,
                              g.win_count))
            if late_negation(plan, g, comp_of):
                lates.add(gi)
                continue
            rd = frozenset(comp_of[v] for p in g.preds for v in p.vars if v in comp_of)
            ents.append((gi, g.gap, m.slot[g.var], tuple(g.preds), rd))
        self.neg_ents = tuple(ents)
        self.lead_ents = tuple(leads)
        self.late_gis = frozenset(lates)
        self._neg_place()
        if lates:
            self.neg_late = m.negation_ok

    def _neg_place(self) -> None:
        """Where the walk decides each early NOT (:attr:`neg_ents`, in this join's states).
        The walk goes from the last state back, so when it first steps below the gap the
        node it takes is the interval's lower end (the max of the left side) and the one
        before it the upper end (the min of the right); a NOT is decided at that step, or
        later at the first step that binds every variable its predicates read (state ``d``:
        the first node and the last are bound before the walk), and a failing test prunes
        the subtree (:meth:`_neg_pass`, :attr:`neg_at`). A NOT right after a single first
        state whose predicates read only the first and the last variable (:attr:`neg0`)
        has its lower end, the first node, fixed before the walk, and its upper end is the
        match's second event: the first negating event after the first node bounds it
        (:class:`_FirstNeg`), which skips a first node whose every second-event candidate
        is past that bound (:meth:`_first_open`) and tests the node that steps into the
        first node (and a single state whose only source is the first, at its own step)
        by one comparison -- where the upper end is a list's first element, bound last, so
        the walk no longer makes every list a NOT rejects to reject it there."""
        n, last = self.n, self.last
        at: list[list[list[Any]]] = [[[] for _ in range(n)] for _ in range(n)]
        reads: set[int] = set()
        first: list[tuple[int, int, tuple[Any, ...]]] = []
        end = {0} | ({last} if not self.kleene[last] else set())
        for gi, gap, nslot, preds, rd in self.neg_ents:
            if gap == 1 and not self.kleene[0] and rd <= end:
                first.append((gi, nslot, preds))
                continue
            d = min([gap - 1] + [k for k in rd if 0 < k < gap])
            reads |= {k for k in rd if 0 < k < last}
            ent = (gi, gap, nslot, preds)
            for k in range(d + 1, n):
                for j in range(d + 1):
                    at[k][j].append(ent)
        self.neg_at = [[tuple(x) for x in row] for row in at] if self.neg_ents else None
        self.neg_reads = frozenset(reads)
        self.neg0 = tuple(first)
        self.lead0 = tuple((gi, nslot, preds, w, cnt)
                           for gi, nslot, preds, rd, w, cnt in self.lead_ents if rd <= end)
        self.lead_all = bool(self.late_gis) and {x[0] for x in self.lead0} == self.late_gis
        if not first:
            return
        self.second = tuple(j for j in range(1, n) if 0 in self.srcs[j])
        state = dict(zip(self.order, self.comp, strict=True))
        self.gate = [not self.kleene[j] and 0 < j < last and self.srcs[j] == (0,)
                     for j in range(n)]
        self.scan0 = [all({state.get(v, -1) for v in pr.vars} <= end | {j}
                          for pr, _sl in self.step_pr[j]) for j in range(n)]

    def _neg_pass(self, nots: tuple[Any, ...], hist: Any, path: Sequence[tuple[int, int]],
                  j: int, y: int, R: list[list[Rec]], Bs: list[int], Bm: list[Any]) -> bool:
        """Do the early NOTs ``nots`` let the partial binding through, the walk's stack
        ``path`` (from the last node back) and its step to node ``y`` of state ``j``?
        ``Bm``: the bindings the steps check (every variable the NOTs read); ``hist``: the
        negation history (``neg_hist``, each NOT's events in stream order)."""
        top = len(path) - 1
        for gi, gap, nslot, preds in nots:
            i = top
            while path[i][0] < gap:  # (the states along the stack never increase)
                i -= 1
            hk, hg = path[i]  # the right side's first event
            lk, lg = (j, y) if i == top else path[i + 1]  # the left side's last
            lo = R[lk][lg - Bs[lk]][GPOS]
            hi = R[hk][hg - Bs[hk]][GPOS]
            h = hist.neg_hist[gi]
            a = bisect_right(h, lo, key=itemgetter(GPOS))
            if a >= len(h) or h[a][GPOS] >= hi:
                continue
            if not preds:
                return False
            nh = len(h)
            try:
                while a < nh:
                    q = h[a]
                    if q[GPOS] >= hi:
                        break
                    a += 1
                    Bm[nslot] = q
                    Bt = tuple(Bm)
                    if all(p.check_all(Bt, None) for p in preds):
                        return False
            finally:
                Bm[nslot] = None
        return True

    def _first_open(self, lim: _FirstNeg, R: list[list[Rec]], Bs: list[int], m: list[int],
                    his: list[int], lg: int, Bm: list[Any]) -> bool:
        """May a match with the walk's first node have a second event that ``lim`` lets
        through? Its second event is a node of a state of :attr:`second` that reaches the
        first node (from ``m[j]`` on) and that the last node ``lg`` may reach (before
        ``his[j]``) -- the last node itself for a single last state -- and passes its step
        conjuncts (checked here where they read only the first, the last and its own
        variable, :attr:`scan0`); positions ascend along a partition, so the first that
        ``lim`` rejects ends the state's scan. False: the first node has no match."""
        last, kleene, cslot = self.last, self.kleene, self.cslot
        B: list[Any] | None = None
        for j in self.second:
            if j == last and not kleene[j]:
                if lim.ok(R[j][lg - Bs[j]][GPOS]):
                    return True
                continue
            fns = self.step[j] if self.scan0[j] else ()
            rs, b = R[j], Bs[j]
            for y in range(m[j], his[j]):
                rec = rs[y - b]
                if not lim.ok(rec[GPOS]):
                    break
                if not fns:
                    return True
                if B is None:
                    B = list(Bm)
                B[cslot[j]] = (rec,) if kleene[j] else rec
                Bt = tuple(B)
                if all(fn(Bt, 0) is True for fn in fns):
                    return True
        return False

    def leads(self) -> bool:
        """Does a walk of this join (or of its :attr:`alt`'s) decide a leading NOT per first
        node when asked to (:meth:`paths`' ``lead``)?"""
        return bool(self.lead0) or (self.alt is not None and self.alt.leads())

    def leads_all(self) -> bool:
        """Do its walks (and its :attr:`alt`'s) decide every NOT :attr:`neg_late` tests
        when asked to (then no complete match needs the test)?"""
        return self.lead_all and (self.alt is None or self.alt.leads_all())

    @staticmethod
    def _lead_ok(leads: tuple[tuple[int, int, tuple[Any, ...], int, bool], ...], hist: Any,
                 frec: Rec, L: Rec, Bm: list[Any]) -> bool:
        """Do the leading NOTs ``leads`` (:attr:`lead0`) let the first node ``frec`` through
        with the last node ``L``? Their lead-in (docs/semantics.md 4): from the last
        event's time less the window (its window position less the count, plus one) to
        before the first event, both bound; ``Bm`` binds the first and the last variable."""
        B: list[Any] | None = None
        for gi, nslot, preds, w, cnt in leads:
            h = hist.neg_hist[gi]
            if cnt:
                a = bisect_left(h, L[WPOS] - w + 1, key=itemgetter(WPOS))
            else:
                a = bisect_left(h, L[TS] - w, key=itemgetter(TS))
            e = bisect_left(h, frec[GPOS], lo=a, key=itemgetter(GPOS))
            if a >= e:
                continue
            if not preds:
                return False
            if B is None:
                B = list(Bm)
            for i in range(a, e):
                B[nslot] = h[i]
                Bt = tuple(B)
                if all(p.check_all(Bt, None) for p in preds):
                    return False
            B[nslot] = None
        return True

    @staticmethod
    def fits(plan: Plan, m: Any) -> bool:
        """The shape the forward join enumerates (see the module docstring)."""
        comps = plan.components
        n = len(comps)
        ends = FwdJoin.ends(plan)
        t = 0  # the leading ``*`` states: a match starts in one of them or in state t
        while t < n and comps[t].kind is CompKind.KLEENE and comps[t].min == 0:
            t += 1
        if (n < 2 or t >= n or m.coverage or m.has_trailing or plan.match_preds
                or any(not m.srcs[k] for k in range(1, n)) or m.srcs[0]
                or m.starts_at != [True] * (t + 1) + [False] * (n - t - 1)
                or [bool(a) for a in m.accept_after] != [k in ends for k in range(n)]
                or (len(ends) > 1 and m.direct is not None)
                or (0 in ends and comps[0].kind is CompKind.KLEENE)):
            return False
        for k, c in enumerate(comps):
            if c.kind is CompKind.KLEENE:
                if not m.is_list[k] or c.min not in (0, 1) or c.max is not None:
                    return False
            elif c.kind is not CompKind.SINGLE or m.is_list[k]:
                return False
        return True

    @staticmethod
    def ends(plan: Plan) -> list[int]:
        """The states a match may end in: the last, and each one after which every state is a
        ``*`` list (``SEQ(a, b+ b[], c* c[])`` ends in ``b`` or ``c``)."""
        comps = plan.components
        out = [len(comps) - 1]
        for k in range(len(comps) - 1, 0, -1):
            c = comps[k]
            if c.kind is not CompKind.KLEENE or c.min != 0:
                break
            out.append(k - 1)
        return sorted(out)

    def ending_at(self, k: int) -> FwdJoin:
        """The walk of the matches that end in state ``k`` before the last (the ``*`` lists
        after it empty): the same join cut after ``k``. The conjuncts it would evaluate at
        ``k``'s step (where its walk starts) are checked on the complete binding; those of
        later steps hold vacuously (per element of an empty list)."""
        sub = copy.copy(self)
        sub.n, sub.last = k + 1, k
        sub.end_fns = []  # (end conjuncts need a single last variable: there are none)
        sub.leaf = self.leaf + self.step_pr[k]
        sub.step = [*self.step[:k], *([()] * (self.n - k))]
        sub.bind = [b and j < k for j, b in enumerate(self.bind)]
        sub.lstep = [()] * self.n  # (per element of the last list, now empty: vacuous)
        sub.lstep_pr = [()] * self.n
        sub._neg_place()  # (the last state is another)
        sub.chain = (not self.shared and self.srcs[:k + 1] == [()] + [(j - 1,) for j in
                                                                    range(1, k + 1)]
                     and sum(self.kleene[:k + 1]) <= 1)
        # (a ``*`` first state: the matches starting later end in ``k`` too, cut alike)
        sub.alt = None if self.alt is None else self.alt.ending_at(k - 1)
        return sub

    def from_second(self, end_pr: tuple[Any, ...]) -> FwdJoin:
        """The walk of the matches whose ``*`` first list is empty: the same join without
        its first state, read over the views from the second state on (its states are one
        less; :meth:`paths` adds one back). Its first state's step conjuncts and the end
        conjuncts are checked on the complete binding (the empty list's per element hold
        vacuously)."""
        sub = copy.copy(self)
        n = self.n - 1
        sub.n, sub.last = n, self.last - 1
        sub.kleene = self.kleene[1:]
        sub.kk = sub.kleene.index(True) if any(sub.kleene) else -1
        sub.cslot, sub.is_list = self.cslot[1:], self.is_list[1:]
        sub.comp = tuple(c - 1 for c in self.comp)  # (the empty list: -1, no state)
        sub.opt = self.opt[1:]
        # (the second state's only source is the first, :meth:`fits`: none left; a later
        # state's source through a ``*`` second state: -1, skipped by the walk, its
        # snapshot index kept)
        sub.srcs = [()] + [tuple(j - 1 for j in s) for s in self.srcs[2:]]
        sub.lists = tuple(k - 1 for k in self.lists if k)
        sub.end_fns = []
        # (the first list's per-element conjuncts: none left, vacuous; a Kleene second
        # state's, per element of it, are the new first list's)
        on0 = self.kleene[1] and n > 1
        sub.leaf = self.leaf + (() if on0 else self.step_pr[1]) + end_pr
        sub.step = [self.step[1] if on0 else (), *self.step[2:]]
        sub.step_pr = [self.step_pr[1] if on0 else (), *self.step_pr[2:]]
        comp_of = dict(zip(self.order, self.comp, strict=True))
        for pr, sl in self.lstep_pr[1]:  # (they read the new first state)
            if {comp_of[v] for v in pr.vars} == {1, self.last} and n > 1:
                sub.step[-1] = (*sub.step[-1], pr.compiled.fn)
                sub.step_pr[-1] = (*sub.step_pr[-1], (pr, sl))
            else:
                sub.leaf += ((pr, sl),)
        sub.lstep = [(), *self.lstep[2:]]
        sub.lstep_pr = [(), *self.lstep_pr[2:]]
        # (an early NOT's states one less: its left side has a state that cannot be empty,
        # so not the empty list's; one right after the new first state is bounded by it)
        sub.neg_ents = tuple((gi, gap - 1, sl, ps, frozenset(k - 1 for k in rd))
                             for gi, gap, sl, ps, rd in self.neg_ents)
        sub.lead_ents = tuple((gi, sl, ps, frozenset(k - 1 for k in rd), w, cnt)
                              for gi, sl, ps, rd, w, cnt in self.lead_ents)
        sub._neg_place()
        sub.bind = [not sub.kleene[k] and (any(sub.step[:k]) or any(sub.lstep[:k])
                                           or k in sub.neg_reads)
                    for k in range(n)]
        sub.chain = (not self.shared and sub.srcs == [()] + [(k - 1,) for k in range(1, n)]
                     and len(sub.lists) <= 1 and not any(sub.lstep))
        sub.alt = None
        sub.nstart = 1
        if sub.opt[0]:  # a ``*`` second state: matches with both lists empty start later
            sub.alt = sub.from_second(())
            sub.nstart = 1 + sub.alt.nstart
        return sub

    @staticmethod
    def _shared(plan: Plan, m: Any) -> bool:
        """Do two predecessor partitions of a node (but a single first state's: only the
        first node) share an event type? Then two of its subtrees may start at the same position
        (one event in both), and :meth:`_paths_shared` walks them together."""
        return shared_sources(plan, m.srcs)

    # ---------------------------------------------------------------------------------------
    def reach(self, P: Sequence[View], lg: int) -> list[int]:
        """Per partition, one past the last node the last node ``lg`` may reach (exact for
        a chain; an upper bound when a state has several sources)."""
        his = [0] * self.n
        his[self.last] = lg + 1
        srcs = self.srcs
        for k in range(self.last, 0, -1):
            recs, snaps, base = P[k]
            h = his[k] - base
            if h <= 0:
                continue
            snap = snaps[h - 1]
            for idx, j in enumerate(srcs[k]):
                if j >= 0 and snap[idx] > his[j]:  # (-1: before the first, from_second)
                    his[j] = snap[idx]
        return his

    def firsts(self, P: Sequence[View], f: int, m: list[int]) -> None:
        """``m[j]``: the first node of state ``j`` from which first node ``f`` is reached
        (one past the partition when none is): a node reaches ``f`` exactly when one of
        its snapshots exceeds that source's first, and snapshots never decrease."""
        m[0] = f
        srcs = self.srcs
        for j in range(1, self.n):
            recs, sj, bj = P[j]
            best = bj + len(sj)
            for idx, s in enumerate(srcs[j]):
                if s < 0:
                    continue  # (a state before the first: :meth:`from_second`)
                t = m[s]
                rs, _ss, bs = P[s]
                if t >= bs + len(rs):
                    continue  # no node of s reaches f
                v = bj + bisect_right(sj, t, key=itemgetter(idx))
                if v < best:
                    best = v
            m[j] = best

    def paths(self, P: Sequence[View], lo0: int, hi0: int, L: Rec, lg: int, lo1: int = 0,
              hi1: int = 0, rest: Sequence[tuple[int, int]] = (), hist: Any = None,
              lead: bool = False) -> Iterator[list[tuple[int, int]]]:
        """Every match ending with node ``lg`` (record ``L``) of the last partition whose
        first node is in ``[lo0, hi0)``, in the output order, as the walk's stack: (state,
        global index) pairs from the last node back to the first. The list is reused: read
        it before the next one. A ``*`` first state: also those starting in the second
        state, at a node in ``[lo1, hi1)`` (:meth:`_merged`), and, the second a ``*`` too,
        in the states after it, one ``(lo, hi)`` range each in ``rest`` (:attr:`nstart`).
        ``hist`` (an object with ``neg_hist``): the walk prunes by the NOTs it decides early
        (:meth:`_neg_setup`); None: it does not (the matches before them, as the caps
        count). ``lead`` (with ``hist``): it skips the first nodes a leading NOT of
        :attr:`lead0` rejects (nothing counts the matches before it: the NFA tests it on
        complete matches, after counting them)."""
        if self.alt is not None:
            return self._merged(P, lo0, hi0, L, lg, lo1, hi1, rest, hist, lead)
        if self.last == 0:  # a match of the first event alone (the ``*`` lists after it empty)
            # (no early NOT: its gap would be 0)
            leads = self.lead0 if lead and hist is not None else ()
            if self.kleene[0]:  # (a list: of its nodes from the first to ``lg``)
                return self._paths_list(P, lo0, hi0, lg, leads, hist)
            return self._paths_one(P, lo0, hi0, lg, leads, hist)
        if self.chain:
            return self._paths_chain(P, lo0, hi0, L, lg, hist, lead)
        if self.shared:
            return self._paths_shared(P, lo0, hi0, L, lg, hist, lead)
        return self._paths_general(P, lo0, hi0, L, lg, hist, lead)

    def _merged(self, P: Sequence[View], lo0: int, hi0: int, L: Rec, lg: int, lo1: int,
                hi1: int, rest: Sequence[tuple[int, int]] = (), hist: Any = None,
                lead: bool = False) -> Iterator[list[tuple[int, int]]]:
        """:meth:`paths` with a ``*`` first state: the matches that start in it (this walk)
        and those that start in the second state, the list empty (:attr:`alt`'s walk; a
        ``*`` second state: itself merged so, from ``rest``), two streams in the output
        order merged by it (docs/semantics.md 10: the sorted positions from the last, the
        first, the second-to-last down to the second; then the bindings in pattern order --
        the empty list is the smaller)."""
        assert self.alt is not None
        main = copy.copy(self)
        main.alt = None
        a = main.paths(P, lo0, hi0, L, lg, hist=hist, lead=lead)
        lo2, hi2 = rest[0] if rest else (0, 0)
        b = self.alt.paths(P[1:], lo1, hi1, L, lg, lo2, hi2, rest[1:], hist=hist, lead=lead)
        R = [v[0] for v in P]
        Bs = [v[2] for v in P]

        def key(path: list[tuple[int, int]]) -> tuple[Any, ...]:
            return self.order_key(path, R, Bs)

        pa = next(a, None)
        pb = next(b, None)
        if pa is not None and pb is not None:
            xa = list(pa)
            xb = [(k + 1, g) for k, g in pb]
            ka, kb = key(xa), key(xb)
            while True:
                if ka < kb:
                    yield xa
                    pa = next(a, None)
                    if pa is None:
                        yield xb
                        break
                    xa = list(pa)
                    ka = key(xa)
                else:
                    yield xb
                    pb = next(b, None)
                    if pb is None:
                        yield xa
                        break
                    xb = [(k + 1, g) for k, g in pb]
                    kb = key(xb)
            pa = next(a, None) if pa is not None else None
            pb = next(b, None) if pb is not None else None
        while pa is not None:
            yield pa
            pa = next(a, None)
        while pb is not None:
            yield [(k + 1, g) for k, g in pb]
            pb = next(b, None)

    def order_key(self, path: list[tuple[int, int]], R: list[list[Rec]], Bs: list[int]
                  ) -> tuple[Any, ...]:
        """The output order of matches with one last event (docs/semantics.md 10): the
        first position, the second-to-last down to the second, then per variable in pattern
        order its positions (every variable bound; an empty list the smallest)."""
        ps = [R[k][g - Bs[k]][GPOS] for k, g in reversed(path)]
        return (ps[0], ps[-2:0:-1], tuple(
            [[R[k][g - Bs[k]][GPOS] for k, g in reversed(path) if k == c] for c in self.comp]))

    def end_walk(self, k: int) -> FwdJoin:
        """The walk of the matches ending in state ``k`` (the whole join for the last;
        :meth:`ending_at` before it) for an event that ends matches in several states
        (:meth:`FwdBlock.walk` merges them), pruned where :meth:`ending_at` and the last
        state's conjuncts leave the check to the complete binding: a conjunct over ``k``
        and the (single) first variable alone -- per element when ``k`` is a list -- is
        checked on the last event once per first node (with the end conjuncts) and, ``k`` a
        list, at the step into each earlier element (its step conjuncts); one per element
        of a later ``*`` list (empty in these matches) holds and is dropped. The same
        matches in the same order, fewer walked. Without a single first state (or with a
        ``*`` first state) the plain walk."""
        base = self if k == self.last else self.ending_at(k)
        if k < 1 or self.kleene[0] or self.alt is not None:
            return base
        state = {v: self.comp[i] for i, v in enumerate(self.order)}
        var0, var = self.order[self.comp.index(0)], self.order[self.comp.index(k)]
        moved: list[Any] = []
        leaf: list[tuple[Any, int | None]] = []
        for pr, sl in base.leaf:
            simple = (pr.general is None and not pr.opt_slots and not pr.prev
                      and not pr.abs_need)
            if simple and pr.iter_var is not None and state.get(pr.iter_var, -1) > k:
                continue  # per element of a list that is empty here
            if (simple and pr.timing is Timing.TAKE and var in pr.vars
                    and pr.vars <= {var0, var}
                    and pr.iter_var == (var if self.kleene[k] else None)):
                moved.append(pr.compiled.fn)
            else:
                leaf.append((pr, sl))
        sub = copy.copy(base)
        sub.leaf = tuple(leaf)
        if not moved:
            return sub
        if self.kleene[k]:
            step = list(base.step)
            step[k] = (*step[k], *moved)
            sub.step = step
        s0, s_last, sk = self.s0, self.s_last, self.cslot[k]
        wrap = self.kleene[k]
        empty = self.empty

        def ends_ok(E: tuple[Any, ...], _i: int) -> bool:
            B = list(empty)
            B[s0] = E[s0]
            B[sk] = (E[s_last],) if wrap else E[s_last]
            Bt = tuple(B)
            return all(fn(Bt, 0) is True for fn in moved)

        sub.end_fns = [*base.end_fns, ends_ok]
        return sub

    def _paths_one(self, P: Sequence[View], lo0: int, hi0: int, lg: int,
                   leads: tuple[Any, ...] = (), hist: Any = None
                   ) -> Iterator[list[tuple[int, int]]]:
        path = [(0, lg)]
        if not lo0 <= lg < hi0:
            return
        if leads:  # (the event alone: first and last)
            L = P[0][0][lg - P[0][2]]
            Bm = list(self.empty)
            Bm[self.cslot[0]] = L
            if not self._lead_ok(leads, hist, L, L, Bm):
                return
        if not self.leaf or self._leaf_ok(path, [v[0] for v in P], [v[2] for v in P]):
            yield path

    def _paths_list(self, P: Sequence[View], lo0: int, hi0: int, lg: int,
                    leads: tuple[Any, ...] = (), hist: Any = None
                    ) -> Iterator[list[tuple[int, int]]]:
        """:meth:`paths` of one Kleene state (the ``*`` states before and after it empty):
        per first node ``f`` (ascending), ``lg`` alone or back through any of its own
        nodes between, each step the earliest first. Its conjuncts are on the leaf
        (:meth:`from_second`, :meth:`ending_at`)."""
        R = [v[0] for v in P]
        Bs = [v[2] for v in P]
        leaf = self.leaf
        path: list[tuple[int, int]] = [(0, lg)]
        L = R[0][lg - Bs[0]]
        Bm = list(self.empty)  # (a leading NOT's predicates read no list)
        for f in range(lo0, min(hi0, lg + 1)):
            if leads and not self._lead_ok(leads, hist, R[0][f - Bs[0]], L, Bm):
                continue
            if f == lg:
                if not leaf or self._leaf_ok(path, R, Bs):
                    yield path
                continue
            frames = [[f, lg]]  # (the next predecessor, one past the last)
            while frames:
                fr = frames[-1]
                y = fr[0]
                if y >= fr[1]:
                    frames.pop()
                    path.pop()
                    continue
                fr[0] = y + 1
                path.append((0, y))
                if y == f:
                    if not leaf or self._leaf_ok(path, R, Bs):
                        yield path
                    path.pop()
                    continue
                frames.append([f, y])
            path.append((0, lg))

    def kept(self, P: Sequence[View], lo0: int, hi0: int, L: Rec, lg: int, hist: Any,
             lo1: int = 0, hi1: int = 0, rest: Sequence[tuple[int, int]] = ()
             ) -> Iterator[list[tuple[int, int]]]:
        """:meth:`paths` less the matches a NOT rejects (``hist``: the negation history,
        an object with ``neg_hist``; unused without a NOT), in the same order: the walk
        prunes by the NOTs it decides early (:meth:`_neg_setup`), the others are tested on
        each complete match (:attr:`neg_late`)."""
        if self.neg_ok is None:
            yield from self.paths(P, lo0, hi0, L, lg, lo1, hi1, rest)
            return
        late = None if self.leads_all() else self.neg_late
        it = self.paths(P, lo0, hi0, L, lg, lo1, hi1, rest,
                        hist if self.neg_at is not None or self.leads() else None, True)
        if late is None:
            yield from it
            return
        R = [v[0] for v in P]
        Bs = [v[2] for v in P]
        for path in it:
            if late(hist, self.candidate(path, R, Bs, L)):
                yield path

    def _paths_general(self, P: Sequence[View], lo0: int, hi0: int, L: Rec, lg: int,
                       hist: Any = None, lead: bool = False
                       ) -> Iterator[list[tuple[int, int]]]:
        """:meth:`paths` for any shape of :meth:`fits`: a frame per node holds one range
        per predecessor partition (``[state, a, end]`` triples after the node's state), and
        each step takes the range head earliest in the stream (the ranges share no event,
        :meth:`fits`)."""
        n, last = self.n, self.last
        kleene = self.kleene
        step, leaf = self.step, self.leaf
        end_fns = self.end_fns
        cslot = self.cslot
        R = [v[0] for v in P]
        S = [v[1] for v in P]
        Bs = [v[2] for v in P]
        Bm = list(self.empty)
        s0, s_last = self.s0, self.s_last
        E = list(self.empty)
        E[s_last] = L
        if not self.is_list[last]:
            Bm[cslot[last]] = L
        k0_single = not kleene[0]
        m = [0] * n
        path: list[tuple[int, int]] = []
        bind = self.bind
        negt = self.neg_at if hist is not None else None
        neg0 = self.neg0 if hist is not None else ()
        leads = self.lead0 if lead and hist is not None else ()
        his0 = self.reach(P, lg) if neg0 else []
        gate = self.gate
        lim: _FirstNeg | None = None
        step0 = step[0]
        lstep = self.lstep
        stepL = step[last] if kleene[last] else ()

        def frame(k: int, g: int, f: int) -> list[int]:
            return self._ranges(S, Bs, m, k, g, f)

        for f in range(lo0, hi0):
            frec = R[0][f - Bs[0]]
            if end_fns:
                E[s0] = frec
                Et = tuple(E)
                if not all(fn(Et, 0) is True for fn in end_fns):
                    continue
            if k0_single:
                Bm[cslot[0]] = frec
                if stepL and not self._l_ok(stepL, Bm, L):
                    continue
            if leads and not self._lead_ok(leads, hist, frec, L, Bm):
                continue  # a leading NOT's lead-in holds a negating event
            self.firsts(P, f, m)
            if m[last] > lg:
                continue  # lg does not reach f
            if neg0:  # (a NOT right after the first node: its first negating event)
                lim = _FirstNeg(neg0, hist, frec[GPOS], Bm)
                if not self._first_open(lim, R, Bs, m, his0, lg, Bm):
                    continue
            path.clear()
            path.append((last, lg))
            frames: list[list[int]] = [frame(last, lg, f)]
            while frames:
                fr = frames[-1]
                best = -1
                bp = 0
                for i in range(1, len(fr), 3):
                    a = fr[i + 1]
                    if a < fr[i + 2]:
                        j = fr[i]
                        gp = R[j][a - Bs[j]][GPOS]
                        if best < 0 or gp < bp:
                            best, bp = i, gp
                if best < 0:
                    frames.pop()
                    path.pop()
                    continue
                j, y = fr[best], fr[best + 1]
                fr[best + 1] = y + 1
                nt = negt[fr[0]][j] if negt is not None else None
                if j == 0 and y == f:
                    if lim is not None:  # the second event, before the first negating one
                        tk, tg = path[-1]
                        if not lim.ok(R[tk][tg - Bs[tk]][GPOS]):
                            continue
                    if step0:  # (per element of a first list: the first node too)
                        Bm[cslot[0]] = (frec,)
                        Bt = tuple(Bm)
                        if not all(fn(Bt, 0) is True for fn in step0):
                            continue
                    if nt and not self._neg_pass(nt, hist, path, 0, f, R, Bs, Bm):
                        continue
                    path.append((0, f))
                    if not leaf or self._leaf_ok(path, R, Bs):
                        yield path
                    path.pop()
                    continue
                if lim is not None and gate[j] and not lim.ok(R[j][y - Bs[j]][GPOS]):
                    continue  # (a second event)
                fns = step[j]
                if fns:
                    rec = R[j][y - Bs[j]]
                    Bm[cslot[j]] = (rec,) if kleene[j] else rec
                    Bt = tuple(Bm)
                    if not all(fn(Bt, 0) is True for fn in fns):
                        continue
                elif bind[j]:  # a later step's conjunct (or an early NOT) reads it
                    Bm[cslot[j]] = R[j][y - Bs[j]]
                if nt and not self._neg_pass(nt, hist, path, j, y, R, Bs, Bm):
                    continue  # a NOT decided here rejects the subtree
                if lstep[j] and not self._last_ok(lstep[j], Bm, j, R[j][y - Bs[j]], path, R,
                                                  Bs):
                    continue
                path.append((j, y))
                frames.append(frame(j, y, f))

    def _paths_chain(self, P: Sequence[View], lo0: int, hi0: int, L: Rec, lg: int,
                     hist: Any = None, lead: bool = False
                     ) -> Iterator[list[tuple[int, int]]]:
        """:meth:`paths` for a chain of states with at most one Kleene state (two ranges
        per frame at most)."""
        n, last = self.n, self.last
        kleene = self.kleene
        step, leaf = self.step, self.leaf
        end_fns = self.end_fns
        cslot = self.cslot
        R = [v[0] for v in P]
        S = [v[1] for v in P]
        Bs = [v[2] for v in P]
        Bm = list(self.empty)
        s0, s_last = self.s0, self.s_last
        E = list(self.empty)
        E[s_last] = L
        if not self.is_list[last]:
            Bm[cslot[last]] = L
        k0_kleene = kleene[0]
        m = [0] * n
        path: list[tuple[int, int]] = []
        list_at = self.kk
        bind = self.bind
        negt = self.neg_at if hist is not None else None
        neg0 = self.neg0 if hist is not None else ()
        leads = self.lead0 if lead and hist is not None else ()
        his0 = self.reach(P, lg) if neg0 else []
        gate = self.gate
        lim: _FirstNeg | None = None
        step0 = step[0]
        stepL = step[last] if kleene[last] else ()
        for f in range(lo0, hi0):
            frec = R[0][f - Bs[0]]
            if end_fns:
                E[s0] = frec
                Et = tuple(E)
                if not all(fn(Et, 0) is True for fn in end_fns):
                    continue
            if not k0_kleene:
                Bm[cslot[0]] = frec
                if stepL and not self._l_ok(stepL, Bm, L):
                    continue
            if leads and not self._lead_ok(leads, hist, frec, L, Bm):
                continue  # a leading NOT's lead-in holds a negating event
            m[0] = f
            dead = False
            for j in range(1, n):
                sj, bj = S[j], Bs[j]
                m[j] = bj + bisect_right(sj, (m[j - 1],))
                if m[j] - bj >= len(sj):
                    dead = j < last
                    break
            if dead:
                continue
            if neg0:  # (a NOT right after the first node: its first negating event)
                lim = _FirstNeg(neg0, hist, frec[GPOS], Bm)
                if not self._first_open(lim, R, Bs, m, his0, lg, Bm):
                    continue
            path.clear()
            path.append((last, lg))
            frames: list[list[int]] = []
            frames.append(self._frame(S, Bs, m, f, last, lg))
            while frames:
                fr = frames[-1]
                k, a, ae, b, be = fr
                if a < ae and (b >= be or R[k - 1][a - Bs[k - 1]][GPOS]
                               < R[k][b - Bs[k]][GPOS]):
                    j, y = k - 1, a
                    fr[1] = a + 1
                elif b < be:
                    j, y = k, b
                    fr[3] = b + 1
                else:
                    frames.pop()
                    path.pop()
                    continue
                nt = negt[k][j] if negt is not None else None
                if j == 0 and y == f:
                    if lim is not None:  # the second event, before the first negating one
                        tk, tg = path[-1]
                        if not lim.ok(R[tk][tg - Bs[tk]][GPOS]):
                            continue
                    if step0:  # (per element of a first list: the first node too)
                        Bm[cslot[0]] = (frec,)
                        Bt = tuple(Bm)
                        if not all(fn(Bt, 0) is True for fn in step0):
                            continue
                    if nt and not self._neg_pass(nt, hist, path, 0, f, R, Bs, Bm):
                        continue
                    path.append((0, f))
                    if not leaf or self._leaf_ok(path, R, Bs):
                        yield path
                    path.pop()
                    continue
                if lim is not None and gate[j] and not lim.ok(R[j][y - Bs[j]][GPOS]):
                    continue  # (a second event)
                fns = step[j]
                if fns:
                    rec = R[j][y - Bs[j]]
                    Bm[cslot[j]] = (rec,) if j == list_at else rec
                    Bt = tuple(Bm)
                    if not all(fn(Bt, 0) is True for fn in fns):
                        continue
                elif bind[j]:  # a later step's conjunct (or an early NOT) reads it
                    Bm[cslot[j]] = R[j][y - Bs[j]]
                if nt and not self._neg_pass(nt, hist, path, j, y, R, Bs, Bm):
                    continue  # a NOT decided here rejects the subtree
                path.append((j, y))
                frames.append(self._frame(S, Bs, m, f, j, y))

    def _ranges(self, S: list[list[tuple[int, ...]]], Bs: list[int], m: list[int], k: int,
                g: int, f: int) -> list[int]:
        """The predecessors of node ``g`` of state ``k`` that reach first node ``f``, as
        ``[k, j, a, end, ...]``: one ``[a, end)`` range per predecessor partition ``j``."""
        fr = [k]
        snap = S[k][g - Bs[k]]
        for idx, j in enumerate(self.srcs[k]):
            if j < 0:
                continue  # (a state before the first: :meth:`from_second`)
            a, e = m[j], snap[idx]
            if j == 0 and not self.kleene[0] and e > f + 1:
                e = f + 1
            if a < e:
                fr += (j, a, e)
        if self.kleene[k]:
            a = m[k] if k else f
            if a < g:
                fr += (k, a, g)
        return fr

    def _paths_shared(self, P: Sequence[View], lo0: int, hi0: int, L: Rec, lg: int,
                      hist: Any = None, lead: bool = False
                      ) -> Iterator[list[tuple[int, int]]]:
        """:meth:`paths` where one event may be in two predecessor partitions of a node:
        the walk goes over position sequences, each step holding every partial binding
        with those positions (its *alternatives*: the same events in other states), and
        takes the next position over all of them, ascending. Alternatives that reach the
        first node together are matches of the same events, written in the order of their
        bindings (docs/semantics.md 10, rule 4: per variable in pattern order, its
        positions)."""
        last = self.last
        kleene = self.kleene
        step, leaf = self.step, self.leaf
        end_fns = self.end_fns
        cslot = self.cslot
        R = [v[0] for v in P]
        S = [v[1] for v in P]
        Bs = [v[2] for v in P]
        Bm0 = list(self.empty)
        s0, s_last = self.s0, self.s_last
        E = list(self.empty)
        E[s_last] = L
        if not self.is_list[last]:
            Bm0[cslot[last]] = L
        k0_single = not kleene[0]
        m = [0] * self.n
        bind = self.bind
        comp = self.comp
        negt = self.neg_at if hist is not None else None
        neg0 = self.neg0 if hist is not None else ()
        leads = self.lead0 if lead and hist is not None else ()
        his0 = self.reach(P, lg) if neg0 else []
        gate = self.gate
        lim: _FirstNeg | None = None
        step0 = step[0]
        lstep = self.lstep
        stepL = step[last] if kleene[last] else ()
        for f in range(lo0, hi0):
            frec = R[0][f - Bs[0]]
            if end_fns:
                E[s0] = frec
                Et = tuple(E)
                if not all(fn(Et, 0) is True for fn in end_fns):
                    continue
            if k0_single:
                Bm0[cslot[0]] = frec
                if stepL and not self._l_ok(stepL, Bm0, L):
                    continue
            if leads and not self._lead_ok(leads, hist, frec, L, Bm0):
                continue  # a leading NOT's lead-in holds a negating event
            self.firsts(P, f, m)
            if m[last] > lg:
                continue  # lg does not reach f
            if neg0:  # (a NOT right after the first node: its first negating event)
                lim = _FirstNeg(neg0, hist, frec[GPOS], Bm0)
                if not self._first_open(lim, R, Bs, m, his0, lg, Bm0):
                    continue
            # an alternative: (its stack, its node's ranges, its bindings for the steps)
            levels: list[list[tuple[tuple[tuple[int, int], ...], list[int], list[Any]]]] = [
                [(((last, lg),), self._ranges(S, Bs, m, last, lg, f), list(Bm0))]]
            while levels:
                alts = levels[-1]
                p = -1
                for _pt, fr, _b in alts:
                    for i in range(1, len(fr), 3):
                        a = fr[i + 1]
                        if a < fr[i + 2]:
                            j = fr[i]
                            gp = R[j][a - Bs[j]][GPOS]
                            if p < 0 or gp < p:
                                p = gp
                if p < 0:
                    levels.pop()
                    continue
                nxt: list[tuple[tuple[tuple[int, int], ...], list[int], list[Any]]] = []
                done: list[tuple[tuple[int, int], ...]] = []
                for pt, fr, Bm in alts:
                    for i in range(1, len(fr), 3):
                        a = fr[i + 1]
                        if a >= fr[i + 2]:
                            continue
                        j = fr[i]
                        rec = R[j][a - Bs[j]]
                        if rec[GPOS] != p:
                            continue
                        fr[i + 1] = a + 1
                        nt = negt[pt[-1][0]][j] if negt is not None else None
                        if j == 0 and a == f:
                            if lim is not None:  # the second event, before the first
                                tk, tg = pt[-1]  # negating one
                                if not lim.ok(R[tk][tg - Bs[tk]][GPOS]):
                                    continue
                            if step0:  # (per element of a first list: the first node too)
                                B2 = list(Bm)
                                B2[cslot[0]] = (rec,)
                                Bt = tuple(B2)
                                if not all(fn(Bt, 0) is True for fn in step0):
                                    continue
                            if not nt or self._neg_pass(nt, hist, pt, 0, f, R, Bs, Bm):
                                done.append(pt + ((0, f),))
                            continue
                        if lim is not None and gate[j] and not lim.ok(rec[GPOS]):
                            continue  # (a second event)
                        fns = step[j]
                        B2 = Bm
                        if fns:
                            B2 = list(Bm)
                            B2[cslot[j]] = (rec,) if kleene[j] else rec
                            Bt = tuple(B2)
                            if not all(fn(Bt, 0) is True for fn in fns):
                                continue
                        elif bind[j]:
                            B2 = list(Bm)
                            B2[cslot[j]] = rec
                        if nt and not self._neg_pass(nt, hist, pt, j, a, R, Bs, B2):
                            continue  # a NOT decided here rejects the subtree
                        if lstep[j] and not self._last_ok(lstep[j], B2, j, rec, pt, R, Bs):
                            continue
                        nxt.append((pt + ((j, a),), self._ranges(S, Bs, m, j, a, f), B2))
                if done:
                    if len(done) > 1:
                        done.sort(key=lambda pt: tuple(
                            tuple([R[k][g - Bs[k]][GPOS] for k, g in reversed(pt) if k == c])
                            for c in comp))
                    for pt in done:
                        path = list(pt)
                        if not leaf or self._leaf_ok(path, R, Bs):
                            yield path
                if nxt:
                    levels.append(nxt)

    def _frame(self, S: list[list[tuple[int, ...]]], Bs: list[int], m: list[int], f: int,
               k: int, g: int) -> list[int]:
        """The predecessors of node ``g`` of state ``k`` that reach first node ``f``: state
        ``k - 1``'s ``[a, ae)`` and (Kleene) its own ``[b, be)``, as ``[k, a, ae, b, be]``."""
        if k == 0:  # a Kleene first state: its own earlier nodes from f on
            return [0, 0, 0, f, g]
        s = S[k][g - Bs[k]][0]
        a = m[k - 1]
        ae = min(s, f + 1) if k == 1 and not self.kleene[0] else s
        if self.kleene[k]:
            return [k, a, ae, m[k], g]
        return [k, a, ae, 0, 0]

    def bindings(self, path: list[tuple[int, int]], R: list[list[Rec]], Bs: list[int]
                 ) -> tuple[Any, ...]:
        """The binding tuple of one walk's stack."""
        Bl = list(self.empty)
        cslot, kleene = self.cslot, self.kleene
        if len(self.lists) == 1:
            kk = self.kk
            lst: list[Rec] = []
            for k, g in reversed(path):
                rec = R[k][g - Bs[k]]
                if k == kk:
                    lst.append(rec)
                else:
                    Bl[cslot[k]] = rec
            Bl[cslot[kk]] = tuple(lst)
            return tuple(Bl)
        ls: dict[int, list[Rec]] = {k: [] for k in self.lists}
        for k, g in reversed(path):
            rec = R[k][g - Bs[k]]
            if kleene[k]:
                ls[k].append(rec)
            else:
                Bl[cslot[k]] = rec
        for k, lk in ls.items():
            Bl[cslot[k]] = tuple(lk)
        return tuple(Bl)

    def candidate(self, path: list[tuple[int, int]], R: list[list[Rec]], Bs: list[int],
                  L: Rec) -> Candidate:
        """The walk's stack as a complete candidate (RETURN: the runtime builds it)."""
        B = self.bindings(path, R, Bs)
        k0, g0 = path[-1]  # (a ``*`` first state empty: the second)
        f = R[k0][g0 - Bs[k0]]
        pos = tuple([R[k][g - Bs[k]][GPOS] for k, g in reversed(path)])
        return Candidate(B, f[TS], f[WPOS], L[GPOS], L[TS], L[WPOS], pos)

    def _l_ok(self, fns: Sequence[Any], Bm: list[Any], L: Rec) -> bool:
        """The per-element conjuncts of the last list with the first single (its step's)
        on the last node ``L``."""
        B2 = list(Bm)
        B2[self.cslot[self.last]] = (L,)
        Bt = tuple(B2)
        return all(fn(Bt, 0) is True for fn in fns)

    def _last_ok(self, fns: Sequence[Any], Bm: list[Any], j: int, rec: Rec,
                 path: Sequence[tuple[int, int]], R: list[list[Rec]], Bs: list[int]) -> bool:
        """The per-element conjuncts of the last list (:attr:`lstep`) at the step of single
        state ``j`` (its node ``rec``): every node of the list is on the stack ``path``."""
        last = self.last
        B2 = list(Bm)
        B2[self.cslot[j]] = rec
        lst = tuple([R[last][g - Bs[last]] for k, g in reversed(path) if k == last])
        B2[self.cslot[last]] = lst
        Bt = tuple(B2)
        return all(fn(Bt, i) is True for fn in fns for i in range(len(lst)))

    def _lows(self, P: Sequence[View], los: list[int]) -> list[int]:
        """Per state, the first node a match whose first node is at or after ``los[i]`` in
        start state ``i`` (:attr:`nstart`) can use."""
        starts = [0] * self.n
        self.firsts(P, los[0], starts)
        if self.alt is not None:
            sub = self.alt._lows(P[1:], los[1:])
            starts[1:] = [min(x, y) for x, y in zip(starts[1:], sub, strict=True)]
        return starts

    def _leaf_ok(self, path: list[tuple[int, int]], R: list[list[Rec]], Bs: list[int]) -> bool:
        B = self.bindings(path, R, Bs)
        return all(pr.check_all(B, sl) for pr, sl in self.leaf)

    def block(self, P: Sequence[View], lo0: int, his: list[int], L: Rec, lg: int,
              n: int, hist: Any = None, lo1: int = 0, rest: Sequence[tuple[int, int]] = ()
              ) -> FwdBlock:
        """A copy of the nodes the matches of ``lg`` can use, as a :class:`FwdBlock` (with a
        NOT, ``hist``'s negation history too: the block walks again after the call may have
        pruned it). ``lo1`` and ``rest``: the first nodes of the later start states
        (:meth:`paths`; their ends are ``his``')."""
        # the firsts of the earliest first node of each start state: the lowest
        starts = self._lows(P, [lo0, lo1, *(lo for lo, _hi in rest)])
        hi1 = his[1] if self.alt is not None else 0
        views = []
        for j, (recs, snaps, base) in enumerate(P[:self.n]):
            a, b = min(starts[j], his[j]) - base, his[j] - base
            views.append((recs[a:b], snaps[a:b], a + base))
        blk = FwdBlock(self, views, lo0, his[0], L, lg, n)
        blk.lo1, blk.hi1 = lo1, hi1
        blk.rest = tuple(rest)
        if self.neg_ok is not None:
            blk.hist = _Hist([list(h) for h in hist.neg_hist])
        return blk


def order_prefix(path: list[tuple[int, int]], R: list[list[Rec]], Bs: list[int]
                 ) -> tuple[int, ...]:
    """The first part of :meth:`FwdJoin.order_key`, flat and cheap: the first position, then
    the second-to-last down to the second (compared as ``order_key``'s first two parts are).
    Two matches with one last event and equal prefixes hold the same events (in other
    states); only then is the full key needed."""
    ps = [R[k][g - Bs[k]][GPOS] for k, g in path]
    return (ps[-1], *ps[1:-1])


FAR = 1 << 62
"""Past every stream position."""


class _FirstNeg:
    """The first event after a first node that negates a NOT right after it
    (:attr:`FwdJoin.neg0`), found lazily: a match's second event must be at or before it
    (an event at that position is not strictly between). :meth:`ok` scans the history only
    up to the positions it is asked about, so a first node costs the NOT events up to its
    latest second-event candidate or its first negating event, whichever comes first."""

    __slots__ = ("nots", "hs", "at", "B", "u", "s")

    def __init__(self, nots: tuple[tuple[int, int, tuple[Any, ...]], ...], hist: Any,
                 g0: int, Bm: list[Any]) -> None:
        self.nots = nots
        self.hs = [hist.neg_hist[gi] for gi, _sl, _ps in nots]
        self.at = [bisect_right(h, g0, key=itemgetter(GPOS)) for h in self.hs]
        self.B = list(Bm)  # (the first and the last variable bound)
        self.u = FAR
        """The position of the first negating event found (FAR: none yet)."""
        self.s = g0 + 1
        """Every NOT event before this position was examined (FAR once one negates)."""

    def ok(self, y: int) -> bool:
        """May the event at position ``y`` be the match's second (no negating event
        strictly between the first node and it)?"""
        if y <= self.s:
            return y <= self.u
        u = FAR
        B = self.B
        for i, (_gi, nslot, preds) in enumerate(self.nots):
            h = self.hs[i]
            a, nh = self.at[i], len(h)
            while a < nh:
                q = h[a]
                gq = q[GPOS]
                if gq >= y or gq >= u:
                    break
                if not preds:
                    u = gq
                    break
                B[nslot] = q
                Bt = tuple(B)
                if all(p.check_all(Bt, None) for p in preds):
                    u = gq
                    break
                a += 1
            B[nslot] = None
            self.at[i] = a
        self.u = u
        self.s = FAR if u < FAR else y
        return y <= u


class _Hist:
    """A block's copy of the negation history, as ``negation_ok`` reads a state."""

    __slots__ = ("neg_hist",)

    def __init__(self, neg_hist: list[list[Any]]) -> None:
        self.neg_hist = neg_hist


class FwdBlock(MatchBlock):
    """The ``n`` matches ending with one last event ``L`` (node ``lg`` of the last
    partition) of :class:`FwdJoin`'s shape: a copy of the nodes its walk reads; walked again
    when written, a piece at a time."""

    __slots__ = ("join", "views", "lo0", "hi0", "L", "lg", "n", "hist", "lo1", "hi1", "more",
                 "rest")

    def __init__(self, join: FwdJoin, views: list[View], lo0: int, hi0: int, L: Rec, lg: int,
                 n: int) -> None:
        self.join, self.views, self.lo0, self.hi0 = join, views, lo0, hi0
        self.L, self.lg, self.n = L, lg, n
        self.hist: Any = None
        """With a NOT: the negation history its walk checks each match against."""
        self.more: list[FwdBlock] = []
        """An event that ends matches in several states (a ``*`` last state): the blocks
        of its other nodes, whose matches :meth:`walk` merges with this one's in the output
        order (``n`` counts them all)."""
        self.lo1 = self.hi1 = 0
        """A ``*`` first state: the range of the second state's starts (:meth:`FwdJoin.paths`)."""
        self.rest: tuple[tuple[int, int], ...] = ()
        """Leading ``*`` states: the ranges of the later start states' starts."""

    def __len__(self) -> int:
        return self.n

    def _own(self) -> Iterator[list[tuple[int, int]]]:
        return self.join.kept(self.views, self.lo0, self.hi0, self.L, self.lg, self.hist,
                              self.lo1, self.hi1, self.rest)

    def walk(self) -> Iterator[tuple[FwdBlock, list[tuple[int, int]]]]:
        """Its matches in the output order, each with the block whose views it reads (one of
        :attr:`more`'s when the event ends matches in several states: merged by
        :func:`order_prefix`, :meth:`FwdJoin.order_key` where two heads tie on it)."""
        if not self.more:
            for path in self._own():
                yield self, path
            return
        blks = [self, *self.more]
        Rs = [[v[0] for v in b.views] for b in blks]
        Bss = [[v[2] for v in b.views] for b in blks]
        its = [b._own() for b in blks]
        # per stream its head: (the cheap key, the stream, the path); the full key only
        # when two heads tie on the cheap one (the same events, in other states)
        heads: list[tuple[tuple[int, ...], int, list[tuple[int, int]]]] = []
        for i, it in enumerate(its):
            p = next(it, None)
            if p is not None:
                heads.append((order_prefix(p, Rs[i], Bss[i]), i, list(p)))
        while heads:
            j = 0
            tied = False
            for h in range(1, len(heads)):
                if heads[h][0] < heads[j][0]:
                    j, tied = h, False
                elif heads[h][0] == heads[j][0]:
                    tied = True
            if tied:
                kj = heads[j][0]
                j = min((h for h in range(len(heads)) if heads[h][0] == kj),
                        key=lambda h: blks[heads[h][1]].join.order_key(
                            heads[h][2], Rs[heads[h][1]], Bss[heads[h][1]]))
            _k, i, x = heads[j]
            yield blks[i], x
            p = next(its[i], None)
            if p is None:
                heads.pop(j)
            else:
                heads[j] = (order_prefix(p, Rs[i], Bss[i]), i, list(p))

    @property
    def last_gpos(self) -> int:
        """The stream position of its matches' last event (as a candidate's)."""
        return int(self.L[GPOS])

    @classmethod
    def columns(cls, blocks: Sequence[MatchBlock], chunk: int
                ) -> Iterator[MatchColumns | list[Match]]:
        """Consecutive blocks' matches as column parts of at most ``chunk`` matches (with
        RETURN: lists of ``Match`` with their values, built as they are written)."""
        if chunk < 1:
            raise ValueError(f"chunk must be a positive number of matches, not {chunk}")
        if blocks and blocks[0].join.to_match is not None:  # type: ignore[attr-defined]
            yield from cls._matches(blocks, chunk)
            return
        piece = _Piece()
        offs: dict[int, list[int]] = {}
        for blk0 in blocks:
            assert isinstance(blk0, FwdBlock)
            for blk, path in blk0.walk():
                j = blk.join
                R = [v[0] for v in blk.views]
                Bs = [v[2] for v in blk.views]
                o = offs.get(id(blk))
                if o is None:
                    o = offs[id(blk)] = piece.add_block(blk, R)
                piece.add(path, j.comp, j.kleene, o, Bs, R, blk.L)
                if piece.size >= chunk:
                    yield piece.columns(j)
                    piece = _Piece()
                    offs = {}
        if piece.size:
            yield piece.columns(blocks[-1].join)  # type: ignore[attr-defined]


    @staticmethod
    def _matches(blocks: Sequence[MatchBlock], chunk: int) -> Iterator[list[Match]]:
        out: list[Match] = []
        for blk in blocks:
            assert isinstance(blk, FwdBlock)
            j = blk.join
            to_match = j.to_match
            for b, path in blk.walk():
                R = [v[0] for v in b.views]
                Bs = [v[2] for v in b.views]
                out.append(to_match(b.join.candidate(path, R, Bs, blk.L)))
                if len(out) >= chunk:
                    yield out
                    out = []
        if out:
            yield out


class _Piece:
    """One column part being filled: the ids of the blocks it reads and, per variable, a row
    per match (a Kleene list's as ``[lo, hi)`` offsets into ``items``)."""

    def __init__(self) -> None:
        self.ids: list[Any] = []
        self.size = 0
        self.cols: list[list[int]] | None = None
        self.his: list[list[int]] = []
        self.items: list[int] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.last: list[int] = []

    def add_block(self, blk: FwdBlock, R: list[list[Rec]]) -> list[int]:
        offs = []
        for recs in R:
            offs.append(len(self.ids))
            self.ids += [r[ID] for r in recs]
        return offs

    def add(self, path: list[tuple[int, int]], comp: tuple[int, ...], kleene: list[bool],
            offs: list[int], Bs: list[int], R: list[list[Rec]], L: Rec) -> None:
        if self.cols is None:
            self.cols = [[] for _ in comp]
            self.his = [[] for _ in comp]
        at = [0] * len(kleene)
        for k, g in path:
            if not kleene[k]:
                at[k] = offs[k] + g - Bs[k]
        items = self.items
        for i, k in enumerate(comp):
            if kleene[k]:
                self.cols[i].append(len(items))
                items += [offs[k] + g - Bs[k] for kj, g in reversed(path) if kj == k]
                self.his[i].append(len(items))
            else:
                self.cols[i].append(at[k])
        k0, f = path[-1]  # (a ``*`` first state empty: the second)
        self.start.append(R[k0][f - Bs[k0]][TS])
        self.end.append(L[TS])
        self.last.append(L[GPOS])
        self.size += 1

    def columns(self, j: FwdJoin) -> MatchColumns:
        assert self.cols is not None
        lo: list[Any] = []
        hi: list[Any] = []
        items: list[Any] = []
        it = np.asarray(self.items, np.int64) if j.lists else None
        for i, k in enumerate(j.comp):
            lo.append(np.asarray(self.cols[i], np.int64))
            if j.kleene[k]:
                hi.append(np.asarray(self.his[i], np.int64))
                items.append(it)
            else:
                hi.append(None)
                items.append(None)
        return MatchColumns(j.name, j.order, id_array(self.ids), tuple(lo), tuple(hi),
                            np.asarray(self.start, np.int64), np.asarray(self.end, np.int64),
                            np.asarray(self.last, np.int64),
                            tuple(items) if j.lists else None)


__all__ = ["BLOCK_MIN", "FwdBlock", "FwdJoin"]
