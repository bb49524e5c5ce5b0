"""``chain``: LinkedCEP's chain-partitioned match storage (docs/engine.md, "The chain plan").

Skip-till-any-match over a SEQ of single events and Kleene ``+`` / ``*`` closures. Instead of one
run per partial match (the NFA), each query state (component) keeps a *partition* of nodes, one
node per event the state took, in stream order. A node does not copy its prefix: it records, per
source partition, how many nodes that partition held when the event came (a *snapshot*); every
one of those nodes is a valid predecessor (all of them are earlier, and without cross-event
predicates nothing else constrains the choice). The nodes of a partition that share a snapshot
and come from adjacent events form a *chain* (the paper's doubly linked chain): only its tail is
"exposed" -- a later node refers to the whole chain by its length. CoverMatch (Algorithm 1) is
the construction; CombineMatch (Algorithm 2) enumerates a complete node's matches by reverse
joining over the snapshots, lazily (a generator: one match at a time, nothing materialised first).
Where the shape allows, the forward walk (:mod:`.chain_fwd`) enumerates them in the output order
instead, pruning partial bindings by the conditions, and describes a last event's many matches
as one block when the output is read lazily.

Windows: a node keeps the latest first event any of its partial matches can have (``lf``). It
never decreases along a partition, so the nodes a window still admits are a suffix of every
snapshot prefix (bisection) and every node visited while joining leads to at least one match (no
dead ends). Expired nodes are cut as a prefix.

Predicates: one-variable conditions are the runtime's candidate masks and equality / PARTITION BY
the routing, so the storage is exact for them. Every other conjunct (relating several events or
list elements, closing a Kleene list) is checked on each joined match before it is written:
correct, but then the number of matches the join visits can exceed the number written (the
forward walk checks those it can on partial bindings).

Counting (``count_only``): for the fragment SEQ + Kleene, one-variable predicates,
equality / partition, time or count windows, and conjuncts relating the first (single) variable to
one later variable, the matcher counts matches per live start event with exact integers and builds
no node at all (``counted``); outside it, it counts what the join writes. ``SEQ(a, b+, c)`` with
at most one condition ``a.x OP c.y`` is counted in O(log starts) per event by a closed form over a
Fenwick tree (:meth:`ChainMatcher._count_ranked`); CORE's fragment with a window by a
sliding-window aggregate of the per-event linear maps (:meth:`ChainMatcher._count_window`).

Negation: checked by the inherited history test on complete matches (``negation_ok``; by
the forward walk on each match it makes, for a NOT that is not trailing, or inside the walk,
pruning it, for one of one event bounded on both sides: ``chain_fwd``).
"""

from __future__ import annotations

import bisect
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterator
from dataclasses import field
from typing import Any

from .. import ast
from ..codegen import Source, build
from ..events import Match
from ..frozen import dataclass
from ..plan.automaton import CompKind, Plan, Predicate, Unsupported, compile_plan
from ..plan.expr import GPOS, ID, TS, WPOS
from ..runtime.caps import event_caps, too_many_runs
from ..runtime.linear import Candidate, LinearMatcher, PartState, cand_state
from ..runtime.matcher import MatcherOptions
from ..runtime.policies import bindings_builder
from ..semantic.analyzed import AnalyzedQuery
from ..vocab import Emit, Strategy
from . import registry
from .chain_fwd import BLOCK_MIN, FwdBlock, FwdJoin
from .chain_stream import MAX_SPAN, KleeneBlock, SeqBlock
from .registry import CompiledPlan, PlanKind, Stats, matches_estimate

Rec = tuple[Any, ...]

_NONE = -(1 << 62)
SEQ_BLOCK_MIN = 64
"""Lazy output (a sink or the CLI's columns): a last event of a SEQ of single variables whose
matches may number this many or more (the product of the reachable partitions' sizes) is
written as one :class:`~.chain_stream.SeqBlock`; fewer are built as ``Match`` objects at once
(so at most this many per event exist before they are written)."""

CHAIN_EVENT = 2.12
"""Work per input event of the pattern's types (a node per state it takes), in the
chooser's unit (the NFA's cost of one input event). Fitted, like the constants below, on
``benchmarks/chooser.py`` (docs/benchmarks.md, "The plan chooser's scale")."""
CHAIN_MATCH = 2.93
"""Work to join and write one match (enumeration), same unit."""
CHAIN_COUNT_EVENT = 7.13
"""Work per input event when counting (``count_only``) without joining, same unit."""
CHAIN_RANKED_EVENT = 2.19
"""Work per input event when the ranked counter counts (``SEQ(a, b+, c)`` with at most one
condition ``a.x OP c.y``: O(log starts), ~1 s per 470k-340k events from 5 s to 60 s windows),
same unit. Measured on the LinkedCEP explosion benchmark (docs/benchmarks.md), not refitted by
``benchmarks/chooser.py`` (1.7 in the unit before the FAEM refit, 1.27 µs; the same µs in
today's unit, 0.99 µs)."""
CHAIN_SEQ_EVENT = 1.12
"""Work per input event for a SEQ of single variables whose conditions the storage decides
(:func:`seq_shape`: the generated per-event loop of :mod:`.chain_seq` and the generated join),
same unit. Refitted in session 10 (2026-12-01) after the loop was generated, with
``benchmarks/chooser.py refit-seq`` on four runs of the LinkedCEP Experiment 1 and 2 points and
SEQs of two and three singles on the stock and Aarhus streams: of the pairs with the best total
score, the one that loses the least CPU at its misses (docs/benchmarks.md, "The chooser after
the chain's generated loop"). Was 2.0 (fitted by hand on 2026-11-24 for the interpreted loop)."""
CHAIN_SEQ_MATCH = 0.93
"""Work to join and write one match for that shape, same unit and the same refit (was 0.73:
``NFA_MATCH`` / 1.13, the chain's advantage on the ABC stream at 50 s)."""
CHAIN_KLEENE_MATCH = 0.9
"""Work to join and write one match of ``SEQ(a, b+ b[], c)`` with at most conditions between
``a`` and ``c`` (:func:`kleene_plan_shape`: :meth:`ChainMatcher._join_kleene`), same unit;
the events cost :data:`CHAIN_EVENT`. Chosen on the LinkedCEP explosion (docs/benchmarks.md,
2026-11-24: enumeration at 5-60 s windows, 3 alternating rounds) as the value inside the
range that makes every window's pick right (0.61-1.11 with the current estimates); not
refitted by ``benchmarks/chooser.py``."""
CHAIN_COUNT_START = 0.098
"""Work per live start event and state when counting with a condition between the first
variable and a later one (one count vector per live start), same unit."""
CHAIN_FWD_EVENT = 8.0
"""Work per input event for the general join's forward walk through a Kleene state
(:class:`~.chain_fwd.FwdJoin`: conditions the storage does not decide, e.g. ``b[i].price >
a.price``, with or without RETURN; the plan-level shape in :func:`chain_cost`), same unit;
measured statistics only. Fitted in session 10 (2026-12-01, after the walk replaced the
reverse join) with ``benchmarks/chooser.py refit-fwd`` on three runs of the general-join
points (stock, ABC, Aarhus; docs/benchmarks.md, "The chooser and the general join, forward"):
of the pairs with the best total score (45 of 48) the ones that lose the least CPU form a
narrow band (per event 6-16 with per match 1.05-1.1 down to 0.78-0.97); this pair is in it,
near the walk's measured cost per event at small windows (2-5x the NFA's). The ratio
fit (``refit-seq``'s method) gives 5.8-6.5 and 1.3 and takes the NFA at stock 50 s, where
the NFA stops at its cap. The walk over single variables only (no Kleene state) keeps
:data:`CHAIN_EVENT` / :data:`CHAIN_MATCH`: it measured 2.2-4.5x slower than the NFA at every
point, which those already pick."""
CHAIN_FWD_MATCH = 1.04
"""Work to walk to and write one match of that shape, same unit and the same refit (the
reverse join it replaced: :data:`CHAIN_MATCH`, 2.93)."""
CHAIN_FWD_STAR_EVENT = 2.0
"""Work per input event for the forward walk through one Kleene state that is a ``*``
closure (``SEQ(a, b* b[], c)``: ``c``'s sources are ``a`` and the list), same unit, measured
statistics only. Chosen in session 10 (2026-12-01, branch ``chooser3``) on the
``benchmarks/chooser.py`` points ``star stock`` / ``star abc`` (two runs, 14 points;
docs/benchmarks.md, "The chooser and the walk's ``*`` and two lists"): every pair in the band
per event 1.5-2.25 with per match 0.05-1.15 (narrower at the ends) picks right at all 14;
:data:`CHAIN_FWD_EVENT` / :data:`CHAIN_FWD_MATCH` at 4. Low because the NFA's estimate does
not see the ``*``: it is the same as for ``b+`` (and so are the chain's match terms), while
the NFA measured 4-6.7x slower on ``*`` than on ``+`` at the same windows (the walk
1.7-2.4x); so this pair is a ratio on the NFA's scale, not the walk's own cost. Two or more
Kleene states, ``*`` or not, take :data:`CHAIN_FWD_EVENT` / :data:`CHAIN_FWD_MATCH` where two
predecessor partitions share a type (the NFA stops at its cap first there) and
:data:`CHAIN_EVENT` / :data:`CHAIN_MATCH` where none does (the NFA measured 1.3-1.6x faster
at 20-30 s on the ABC stream); same runs."""
CHAIN_FWD_STAR_MATCH = 0.5
"""Work to walk to and write one match of that shape, same unit and the same choice."""
CHAIN_FWD_LEAD_EVENT = 1.35
"""Work per input event for the forward walk where a match may start in a leading ``*``
state and the last state is not a ``*`` (``SEQ(a* a[], b, c)``, ``SEQ(a* a[], b* b[], c)``:
:func:`fwd_group` ``"lead"``), same unit, measured statistics only. Chosen in session 12
(2026-12-01, branch ``refit``) with ``benchmarks/chooser.py refit-fwd --group lead`` on
three runs of the points ``star first`` / ``two stars`` (stock and ABC, 5-30 s, 14 points
a run; docs/benchmarks.md, "Session 12: the chooser refit for the walk's `*` ends and
NOTs"): every pair in the band per event 1.20 (per match 1.20-1.35) to 1.45 (0.05-0.35)
picks right at all 42; this one is in its middle (the estimates differ by 5 % or more at
the two deciding points, two leading ``*`` on stock at 5 s and ``*`` first on ABC at 5 s).
Low, like :data:`CHAIN_FWD_STAR_EVENT`, because the NFA's estimate does not see the ``*``
(the same as for ``+``) while its runs start in every leading state: it measured 1.3-9x
slower than the walk at every point but the stock stream's at 5-10 s. Before (the reverse
join's :data:`CHAIN_EVENT` / :data:`CHAIN_MATCH`) the NFA was taken at every point."""
CHAIN_FWD_LEAD_MATCH = 0.6
"""Work to walk to and write one match of that shape, same unit and the same choice."""
CHAIN_FWD_LAST_EVENT = 12.0
"""Work per input event for the forward walk through a ``*`` last state with no leading ``*``
(``SEQ(a, b+ b[], c* c[])``: matches end in ``b`` or ``c``; :func:`fwd_group` ``"last"``),
same unit, measured statistics only. Chosen in session 12 (branch ``refit``) with
``refit-fwd --group last`` on the points ``star last`` (stock 10-40 s, ABC 10-30 s): the NFA
is 1.25-2.4x faster wherever it does not stop at its cap, and it stops at stock 40 s, whose
terms (30 matches per event, NFA estimate 36.7) are below ABC 30 s's (27 and 49.4, the NFA
2.3x faster): no pair gets both. Of the pairs with the best score over the two runs that
have stock 40 s, those that take the chain there lose the least CPU (the others leave the
NFA to stop at its cap; the chain took 32 s): from per event 5.65 with per match 1.0 to per
event 16 (the grid's end) with up to 0.6; at 12, per match 0.2-0.8, and this pair is in
its middle (the estimates differ by 23 % or more at the deciding points). So the chain is
taken where the NFA's estimate is large, as with :data:`CHAIN_FWD_EVENT`; ABC at 30 s is the
miss."""
CHAIN_FWD_LAST_MATCH = 0.5
"""Work to walk to and write one match of that shape, same unit and the same choice."""
CHAIN_FWD_BOTH_EVENT = 1.15
"""Work per input event for the forward walk with a leading ``*`` state and a ``*`` last state
(``SEQ(a* a[], b, c* c[])``: :func:`fwd_group` ``"both"``), same unit, measured statistics
only. Chosen in session 12 (branch ``refit``) with ``refit-fwd --group both`` on the points
``star both`` (stock and ABC, 5-20 s, 8 a run): every pair in the band per event 1.05 (per
match 2.05-2.25) to 1.30 (1.50) picks right at all 24 of three runs; this one is in its
middle (estimates 6 % or more apart at stock 5 s and ABC 5 s). Its own pair because it
behaves unlike both neighbours on the same terms: on the stock stream the NFA is 1.25-2x
faster (``*`` first alone: the chain 2-4x faster at 20-30 s, the same estimates), on ABC
the chain 1.1-1.9x (``*`` last alone: the NFA 1.5-2.4x)."""
CHAIN_FWD_BOTH_MATCH = 2.0
"""Work to walk to and write one match of that shape, same unit and the same choice."""
CHAIN_FWD_NOT_MATCH = 0.56
"""Work added per match of the walk when a NOT is tested on each complete match it makes
(the history test: a NOT whose predicates read a list, a leading one's window lead-in;
:func:`fwd_late_not`), same unit, measured statistics only; a NOT the
walk decides at the step that fixes its interval costs nothing more (the walk's own pair,
whose match term then counts the matches before that NOT). Chosen in session 12 (branch
``refit``) with ``refit-fwd --group not`` on the points ``not late`` (stock 10-40 s, ABC
10-40 s; the per-event term held at :data:`CHAIN_FWD_EVENT`): a per-match total of
1.53-1.68 picks right at every point of the runs (the NFA 2-5x faster but at ABC 40 s,
where it stops at its cap); 1.6 is its middle."""


# --------------------------------------------------------------------------------------------
# Compile: the linear plan, restricted to what the chain storage evaluates
# --------------------------------------------------------------------------------------------


def compile_chain(analyzed: AnalyzedQuery) -> Plan:
    """The linear plan of the query, or :class:`Unsupported` with the reason."""
    if analyzed.strategy is not Strategy.SKIP_TILL_ANY_MATCH:
        raise Unsupported("the chain storage enumerates skip-till-any-match only "
                          f"(the query uses {analyzed.strategy.value})")
    plan = compile_plan(analyzed)
    for c in plan.components:
        if c.kind is CompKind.CHOICE:
            raise Unsupported("an OR inside SEQ (the chain storage has one variable per state)")
        if c.kind is CompKind.KLEENE and (c.max is not None or c.min > 1):
            raise Unsupported("a bounded repetition {n,m} (chains hold + and * closures)")
    last = len(plan.components) - 1
    for w in plan.windows:
        if w.first != 0 or w.last != last:
            raise Unsupported("a window on a sub-pattern (chains expire by the whole-pattern "
                              "window)")
    if analyzed.emit is Emit.COVERAGE and plan.negations:
        raise Unsupported("EMIT COVERAGE together with NOT")
    return plan


# --------------------------------------------------------------------------------------------
# Per-key state
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Part:
    """One state's partition: its nodes in stream order (global index = ``base`` + list index).

    ``recs[i]`` the event, ``snaps[i]`` the source-partition lengths when it came (one per
    source), ``lft`` / ``lfw`` the timestamp and window position of the latest first event its
    partial matches can have (non-decreasing), ``chain[i]`` True when the node starts a new
    chain (else it extends the previous node's chain: adjacent event, same snapshot)."""

    recs: list[Rec] = field(default_factory=list)
    snaps: list[tuple[int, ...]] = field(default_factory=list)
    lft: list[int] = field(default_factory=list)
    lfw: list[int] = field(default_factory=list)
    chain: list[bool] = field(default_factory=list)
    base: int = 0
    tails: int = 0
    """Exposed tails (the paper's chains, one per prefix tail) -- for the counters."""

    @property
    def size(self) -> int:
        """Global length (nodes ever appended, expired ones included)."""
        return self.base + len(self.recs)


@dataclass(slots=True)
class ChainState(PartState):
    """Per-key state: the partitions, adjacency for coverage, live starts when counting."""

    parts: list[Part] = field(default_factory=list)
    prev_bits: int = 0
    """Candidate bits of the key's previous relevant event (adjacency)."""
    run_of: dict[tuple[int, int], int] = field(default_factory=dict)
    """EMIT COVERAGE: (gpos, component) -> the run (first gpos) the event belongs to."""
    cur_run: list[int] = field(default_factory=list)
    starts: deque[list[Any]] = field(default_factory=deque)
    """Count mode: live start events ``[ts, wpos, rec, count per component...]``."""
    total: list[int] = field(default_factory=list)
    swag: list[Any] = field(default_factory=list)
    """Count mode with a window and no pair conditions: the two-stack sliding-window
    aggregate ``[front, back, Pb, yb]`` (see :meth:`ChainMatcher._count_window`)."""
    """Count mode without window and pair conditions: all starts summed."""
    tails_hist: list[int] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# The matcher
# --------------------------------------------------------------------------------------------


def countable(p: Plan) -> tuple[tuple[Predicate, ...], ...] | None:
    """The conditions relating each component to the first variable if the matches can be
    counted per start event (CORE's fragment plus conditions on the first variable), else
    None."""
    first = p.components[0]
    v0 = first.vars[0]
    pair: list[tuple[Predicate, ...]] = []
    for k, c in enumerate(p.components):
        v = c.vars[0]
        vp = p.vars[v]
        if vp.close:
            return None
        preds = []
        for pr in vp.take:
            if (pr.general is not None or pr.opt_slots or pr.prev or pr.abs_need
                    or not pr.vars <= {v0, v} or first.kind is not CompKind.SINGLE
                    or k == 0 or (pr.iter_var not in (None, v))):
                return None
            preds.append(pr)
        pair.append(tuple(preds))
    return tuple(pair)


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


@dataclass(frozen=True, slots=True)
class Ranked:
    """The shape counted by :meth:`ChainMatcher._count_ranked`: ``SEQ(a, b+ | b*, c)`` with at
    most one condition ``a.x OP c.y`` between events (``op`` as read from ``a``'s side; None:
    no condition)."""

    star: bool
    op: str | None
    xslot: int
    yslot: int


def ranked_shape(p: Plan, pair: tuple[tuple[Predicate, ...], ...]) -> Ranked | None:
    """The ranked counter's shape (:class:`Ranked`) if the plan has it, else None."""
    comps = p.components
    if (len(comps) != 3 or p.match_preds
            or [c.kind for c in comps] != [CompKind.SINGLE, CompKind.KLEENE, CompKind.SINGLE]
            or comps[1].max is not None or comps[1].min > 1
            or p.vars[comps[0].vars[0]].is_list or p.vars[comps[2].vars[0]].is_list
            or pair[0] or pair[1] or len(pair[2]) > 1):
        return None
    star = comps[1].min == 0
    if not pair[2]:
        return Ranked(star, None, 0, 0)
    e = pair[2][0].expr
    va, vc = comps[0].vars[0], comps[2].vars[0]
    if not (isinstance(e, ast.Binary) and e.op in _FLIP and isinstance(e.left, ast.AttrRef)
            and isinstance(e.right, ast.AttrRef) and e.left.index is None
            and e.right.index is None and {e.left.var, e.right.var} == {va, vc}):
        return None
    left, right, op = e.left, e.right, e.op
    if left.var != va:
        left, right, op = right, left, _FLIP[op]
    try:
        xs, ys = p.layout.attr_slot(left.attr), p.layout.attr_slot(right.attr)
    except ValueError:
        return None
    return Ranked(star, op, xs, ys)


_LOW = 40
"""Low bits of a ranked counter's weight that count the starts (fewer than 2^40 per key)."""


def _plain(vals: list[Any]) -> bool:
    """All numbers (no bool, no NaN) or all strings: one total order, Python's comparison
    equals the query's (no NULL)."""
    types = set(map(type, vals))
    if types <= {int, float}:
        return float not in types or all(v == v for v in vals)
    return types == {str}


class ChainMatcher(LinearMatcher):
    """CoverMatch / CombineMatch over a linear plan (see the module docstring). Negation,
    trailing NOTs, output order and masks are inherited from :class:`LinearMatcher`."""

    def __init__(self, plan: Plan, options: MatcherOptions, *, coverage: bool,
                 plain: bool = True) -> None:
        super().__init__(plan, options)
        # every NOT is checked on the complete match against the history
        self.fast = {}
        self.pend = False
        self.confirm = {}
        self.decides_negation = False
        n = self.ncomp
        self.n = n
        self.cbit = [self.bit[c.vars[0]] for c in plan.components]
        self.cslot = [plan.vars[c.vars[0]].slot for c in plan.components]
        self.is_list = [plan.vars[c.vars[0]].is_list for c in plan.components]
        self.kleene = [c.kind is CompKind.KLEENE for c in plan.components]
        self.starts_at = [k in self.targets[0] for k in range(n)]
        # sources of component k: earlier components from which a proceed edge reaches k
        self.srcs = [tuple(j for j in range(k) if k in self.targets[j + 1]) for k in range(n)]
        self.pos_bits = (1 << len(plan.order)) - 1
        self.hit_cache: dict[int, list[int]] = {}
        self.seq_hits: dict[int, list[int]] = {}
        """:meth:`_process_seq`: the states an event's bits take, the last first."""
        self.swag_cache: dict[int, tuple[Any, ...]] = {}
        self.scan_below = 12
        """The ranked counter scans its live starts (no Fenwick tree) in a chunk that begins
        with fewer of them."""
        self.win_us = plan.window_us
        self.win_ev = plan.window_events
        # conjuncts the storage does not decide: checked on each joined match
        self.filters: tuple[tuple[Predicate, int | None], ...] = tuple(
            (p, self.iter_slot.get(p.iter_var) if p.iter_var else None)
            for v in plan.order for p in plan.vars[v].take + plan.vars[v].close)
        self.exact = not self.filters
        # conjuncts over the first and the last variable only (both single): checked on the
        # two endpoint events before a joined match is built
        v0, vl = plan.components[0].vars[0], plan.components[-1].vars[0]
        ends = {v0, vl}
        self.end_filters = tuple(
            (pr, sl) for pr, sl in self.filters
            if pr.vars <= ends and pr.iter_var is None and pr.general is None
            and not pr.opt_slots and not plan.vars[v0].is_list and not plan.vars[vl].is_list)
        self.filters = tuple(f for f in self.filters if f not in self.end_filters)
        self.end_slots = (plan.vars[v0].slot, plan.vars[vl].slot)
        self.coverage = coverage
        if coverage:
            self.has_trailing = True  # coverages wait for the end of the stream
        # counters (the paper's temporary matches): created, copied, stored nodes
        self.created = 0
        self.copied = 0
        self.nodes_made = 0
        self.count_mode = False
        self.inexact = False
        """A cap stopped a join: ``truncated_matches`` is a lower bound."""
        self.counted = 0
        self.kleene_join = False
        """Direct mode and :func:`kleene_shape`: :meth:`_join_kleene` joins."""
        self.kleene_end: list[Any] = []
        self.kleene_names = plan.name
        self.fwd: FwdJoin | None = None
        """The forward join (:class:`~.chain_fwd.FwdJoin`) of the general loop's shape
        (:meth:`_join_fwd`); :meth:`combine` where it does not apply, and past a cap."""
        self.fwd_ends: dict[int, FwdJoin] = {}
        """The forward walks of the matches that end before a ``*`` last state, by state
        (:meth:`.chain_fwd.FwdJoin.ending_at`)."""
        self.fwd_walks: dict[int, FwdJoin] = {}
        """:meth:`_join_fwd_ends`'s walks, by end state (:meth:`.chain_fwd.FwdJoin.end_walk`)."""
        self.fast_join: Any = None
        """The generated join of :func:`fast_joiner` (direct mode, a SEQ of singles)."""
        self.describe = False
        """Set by the runtime for a call whose output is read lazily (a sink, or the CLI's
        columns): :meth:`_join_kleene` writes one :class:`~.chain_stream.KleeneBlock` per
        last event instead of a ``Match`` per match."""
        self.described = 0
        """Matches of the blocks written by the current :meth:`process` call beyond one per
        block (``len(out) + described`` is the number of matches written)."""
        self.pair: list[tuple[Predicate, ...]] = [() for _ in range(n)]
        if options.count_only and not plan.negations and not coverage and plain:
            self.count_mode = self._countable()
        # does a component's count feed a later one (a source, or a Kleene loop)?
        self.feeds = [kleene_k or any(k in self.srcs[j] for j in range(n))
                      for k, kleene_k in enumerate(self.kleene)]
        windowed = self.win_us is not None or self.win_ev is not None
        self.ranked = ranked_shape(plan, tuple(self.pair)) if self.count_mode and (
            any(self.pair) or windowed) else None
        self.window_swag = self.count_mode and not any(self.pair) and windowed \
            and self.ranked is None
        self.sum_starts = self.count_mode and self.win_us is None and self.win_ev is None \
            and not any(self.pair)

    def _countable(self) -> bool:
        """Can the matches be counted per start event (CORE's fragment plus conditions on
        the first variable)? Fills ``self.pair``."""
        pair = countable(self.plan)
        if pair is None:
            return False
        self.pair = list(pair)
        return True

    # ---------------------------------------------------------------------------------------
    def new_state(self) -> ChainState:
        """Fresh per-key state."""
        return ChainState(neg_hist=[[] for _ in self.plan.negations],
                          parts=[Part() for _ in range(self.n)],
                          cur_run=[-1] * self.n, total=[0] * self.n)

    def dump_state(self, st: ChainState) -> Any:  # type: ignore[override]
        """Plain data for a snapshot."""
        parts = [(p.recs, p.snaps, p.lft, p.lfw, p.chain, p.base, p.tails) for p in st.parts]
        return (parts, st.neg_hist, [cand_state(c) for c in st.pending], st.last_wpos,
                st.last_ts, st.prev_bits, sorted(st.run_of.items()), st.cur_run,
                [list(s) for s in st.starts], st.total, st.swag)

    def load_state(self, data: Any) -> ChainState:
        """Inverse of :meth:`dump_state`."""
        parts, hist, pending, lw, lt, pb, run_of, cur, starts, total, swag = data
        st = self.new_state()
        st.parts = [Part(list(a), list(b), list(c), list(d), list(e), f, g)
                    for a, b, c, d, e, f, g in parts]
        st.neg_hist = [list(h) for h in hist]
        st.pending = [Candidate(*c) for c in pending]
        st.last_wpos, st.last_ts, st.prev_bits = lw, lt, pb
        st.run_of = {tuple(k): v for k, v in run_of}
        st.cur_run = list(cur)
        st.starts = deque(list(s) for s in starts)
        st.total = list(total)
        st.swag = swag
        return st

    def oldest(self, st: ChainState) -> int | None:  # type: ignore[override]
        """The smallest position a live node binds (None: none)."""
        firsts = [p.recs[0][GPOS] for p in st.parts if p.recs]
        firsts += [s[2][GPOS] for s in st.starts]
        return min(firsts, default=None)

    def prune(self, st: ChainState) -> None:  # type: ignore[override]
        """Drop negation history no live node or waiting match can need."""
        if not self.plan.negations:
            return
        o = self.oldest(st)
        st.runs = [] if o is None else [(0, 0, None, 0, 0, o)]
        try:
            self._prune_history(st)
        finally:
            st.runs = []

    def live(self, st: ChainState) -> int:
        """Stored nodes of one key."""
        return sum([len(p.recs) for p in st.parts]) + len(st.starts)

    # ---------------------------------------------------------------------------------------
    def process(self, st: ChainState, recs: list[Rec], bits: list[int],  # type: ignore[override]
                out: list[Candidate], max_matches: int | None,
                budget: int | None = None) -> None:
        """CoverMatch per event; complete nodes are joined (CombineMatch) into ``out``."""
        self.described = 0
        if self.count_mode:
            if self.ranked is not None:
                self._count_ranked(st, recs, bits)
            elif self.window_swag:
                self._count_window(st, recs, bits)
            else:
                self._count(st, recs, bits)
            return
        if self.fast_join is not None or self.kleene_join:
            self._process_seq(st, recs, bits, out, max_matches, budget)
            return
        negs = self.plan.negations
        pos_bits = self.pos_bits
        n = self.n
        parts = st.parts
        win_us, win_ev = self.win_us, self.win_ev
        cbit, srcs, kleene, starts_at = self.cbit, self.srcs, self.kleene, self.starts_at
        accept = self.accept_after
        hit_cache = self.hit_cache
        tick = 0
        for e, b in zip(recs, bits, strict=True):
            st.last_wpos = e[WPOS]
            st.last_ts = e[TS]
            if negs and b & ~pos_bits:
                self.neg_event(st, e, b)
            b &= pos_bits
            if not b:
                continue
            ts, wp = e[TS], e[WPOS]
            bound_t = ts - win_us if win_us is not None else None
            bound_w = wp - win_ev + 1 if win_ev is not None else None
            if bound_t is not None or bound_w is not None:
                tick += 1
                if tick >= 16:  # expiry is amortised: joins bisect the window anyway
                    tick = 0
                    self._expire(st, bound_t, bound_w)
            if self.coverage:
                self._track_runs(st, e, b)
            adjacent = st.prev_bits
            st.prev_bits = b
            # CoverMatch: one node per state the event can take, from the sizes before it
            hits = hit_cache.get(b)
            if hits is None:
                hits = hit_cache[b] = [k for k in range(n) if b & cbit[k]]
            new: list[tuple[int, tuple[int, ...], int, int, int]] = []
            for k in hits:
                lt = lw = _NONE
                snap_l = []
                made = 0  # the paper's temporary matches: one per exposed tail extended
                for j in srcs[k]:
                    pj = parts[j]
                    rj = pj.recs
                    snap_l.append(pj.base + len(rj))
                    if rj:
                        if pj.lft[-1] > lt:
                            lt = pj.lft[-1]
                        if pj.lfw[-1] > lw:
                            lw = pj.lfw[-1]
                        made += pj.tails
                snap = tuple(snap_l)
                if kleene[k] and parts[k].recs:
                    lt = max(lt, parts[k].lft[-1])
                    lw = max(lw, parts[k].lfw[-1])
                    made += parts[k].tails
                if starts_at[k]:
                    lt, lw = ts, wp
                if lt == _NONE or (bound_t is not None and lt < bound_t) or (
                        bound_w is not None and lw < bound_w):
                    continue  # no partial match it could extend (inside the window)
                new.append((k, snap, lt, lw, made))
            nm = 0
            for k, snap, lt, lw, made in new:
                p = parts[k]
                ext = bool(p.recs) and bool(adjacent & cbit[k]) and p.snaps[-1] == snap
                started = 1 if starts_at[k] else 0
                self.created += made + started
                self.copied += made
                if not ext:
                    p.tails += made + started
                p.recs.append(e)
                p.snaps.append(snap)
                p.lft.append(lt)
                p.lfw.append(lw)
                p.chain.append(not ext)
                self.nodes_made += 1
            # (blocks hold ``described`` matches beyond one entry each: the budget left)
            eff = None if budget is None else budget - self.described
            full = eff is not None and len(out) >= eff and self.on_cap != "error"
            # (an event that ends matches in two states: one block merging them, else
            # candidates, whose order needs the runtime's sort)
            one_end = self.fwd is None or sum(1 for x in new if accept[x[0]]) <= 1
            tried = one_end
            for k, _snap, _lt, _lw, _made in new:
                if not accept[k]:
                    continue
                if full:
                    # the call's budget is spent: nothing this join writes could be kept;
                    # the node leads to at least one match (no dead ends), counted as a
                    # lower bound without joining
                    self.truncated_matches += 1
                    self.inexact = True
                    continue
                if self.fwd is not None:
                    # the forward walk: pruned by the conditions, made in output order;
                    # lazy output (``describe``): counted, and written by blocks
                    room = None if max_matches is None else max_matches - nm
                    if eff is not None:
                        left = eff - len(out)
                        room = left if room is None else min(room, left)
                    if not tried and self.describe:
                        # the event ends matches in several states: one block merging them
                        tried = True
                        ks = [x[0] for x in new if accept[x[0]]]
                        wrote = self._join_fwd_ends(st, e, bound_t, bound_w, out, room, ks)
                        if wrote is not None:
                            nm += wrote
                            break
                    wrote = self._join_fwd(st, e, bound_t, bound_w, out, room, k, one_end)
                    if wrote is not None:
                        nm += wrote
                        eff = None if budget is None else budget - self.described
                        continue
                for c in self.combine(st, k, parts[k].size - 1, e, bound_t, bound_w):
                    nm += 1
                    if self.coverage:
                        st.pending.append(c)
                    else:
                        out.append(c)
                    if (max_matches is not None and nm > max_matches) or (
                            eff is not None and len(out) > eff):
                        break
                else:
                    continue
                break
            nlive = self.live(st) if self.max_runs is not None and new else 0
            if ((max_matches is not None and nm > max_matches)
                    or (eff is not None and len(out) > eff)
                    or (self.max_runs is not None and nlive > self.max_runs)):
                if (max_matches is not None and nm > max_matches) or (
                        eff is not None and len(out) > eff):
                    self.inexact = True  # the join stopped: what it did not write is uncounted
                drop = event_caps(self, e, nm, out, max_matches, eff, nlive)
                if drop:
                    self._drop_oldest(st, drop)

    def _process_seq(self, st: ChainState, recs: list[Rec], bits: list[int],
                     out: list[Candidate], max_matches: int | None,
                     budget: int | None) -> None:
        """:meth:`process` for the shapes of :func:`fast_joiner` (a SEQ of single variables)
        and :func:`kleene_shape` (``SEQ(a, b+, c)``), no NOT, no coverage: the same nodes,
        counters and caps, with the source of state ``k`` being ``k - 1`` (and a Kleene
        state's own nodes). The states an event takes are visited from the last down, so each
        reads its source's length before the event itself is appended there; the last state's
        node is joined after all appends (the join reads only up to its snapshot). A
        partition's lists keep their identity (expiry cuts them in place), so they are looked
        up once per call."""
        pos_bits = self.pos_bits
        parts = st.parts
        last = self.n - 1
        win_us, win_ev = self.win_us, self.win_ev
        windowed = win_us is not None or win_ev is not None
        cbit = self.cbit
        seq_hits = self.seq_hits
        max_runs = self.max_runs
        fj = self.fast_join
        lo_of = self._lo
        R = [p.recs for p in parts]
        S = [p.snaps for p in parts]
        LT = [p.lft for p in parts]
        LW = [p.lfw for p in parts]
        CH = [p.chain for p in parts]
        KL = self.kleene
        kleene_join = self.kleene_join
        tick = 0
        created = copied = nodes = 0
        live = sum(map(len, R)) if max_runs is not None else 0
        prev_bits = st.prev_bits
        bound_t: int | None = None
        bound_w: int | None = None
        e: Rec = ()
        if windowed and recs:
            # expire once per call too: a partition may get fewer than 16 events a call (the
            # tick below restarts each call), and its nodes would never be cut
            r0 = recs[0]
            self._expire(st, None if win_us is None else r0[TS] - win_us,
                         None if win_ev is None else r0[WPOS] - win_ev + 1)
            if max_runs is not None:
                live = sum(map(len, R))
        try:
            for e, b in zip(recs, bits, strict=True):
                b &= pos_bits
                if not b:
                    continue
                if windowed:
                    if win_us is not None:
                        bound_t = e[TS] - win_us
                    if win_ev is not None:
                        bound_w = e[WPOS] - win_ev + 1
                    tick += 1
                    if tick >= 16:  # expiry is amortised: joins bisect the window anyway
                        tick = 0
                        self._expire(st, bound_t, bound_w)
                        if max_runs is not None:
                            live = sum(map(len, R))
                adjacent = prev_bits
                prev_bits = b
                hits = seq_hits.get(b)
                if hits is None:
                    hits = seq_hits[b] = [k for k in range(last, -1, -1) if b & cbit[k]]
                accepted = False
                for k in hits:
                    if k:
                        rj = R[k - 1]
                        pj = parts[k - 1]
                        if rj:
                            lt = LT[k - 1][-1]
                            lw = LW[k - 1][-1]
                            made = pj.tails
                        elif not KL[k]:
                            continue
                        else:
                            lt = lw = _NONE
                            made = 0
                        if KL[k] and R[k]:  # a Kleene state extends its own nodes too
                            if LT[k][-1] > lt:
                                lt = LT[k][-1]
                            if LW[k][-1] > lw:
                                lw = LW[k][-1]
                            made += parts[k].tails
                        if lt == _NONE or (bound_t is not None and lt < bound_t) or (
                                bound_w is not None and lw < bound_w):
                            continue  # no partial match it could extend (inside the window)
                        snap: tuple[int, ...] = (pj.base + len(rj),)
                        copied += made
                        if k == last:
                            accepted = True
                    else:
                        lt, lw, snap, made = e[TS], e[WPOS], (), 1
                    created += made
                    sk = S[k]
                    if sk and adjacent & cbit[k] and sk[-1] == snap:
                        CH[k].append(False)
                    else:
                        parts[k].tails += made
                        CH[k].append(True)
                    R[k].append(e)
                    sk.append(snap)
                    LT[k].append(lt)
                    LW[k].append(lw)
                    nodes += 1
                    live += 1
                nm = 0
                if accepted:
                    if budget is not None and len(out) + self.described >= budget \
                            and self.on_cap != "error":
                        # the call's budget is spent: the node leads to at least one match
                        # (no dead ends), counted as a lower bound without joining
                        self.truncated_matches += 1
                        self.inexact = True
                    elif kleene_join:
                        room = max_matches
                        if budget is not None:
                            left = budget - len(out) - self.described
                            room = left if room is None else min(room, left)
                        wrote = self._join_kleene(st, e, bound_t, bound_w, out, room)
                        if wrote is not None:
                            nm = wrote
                        else:  # (blocks before it hold ``described`` more matches)
                            nm = self._join_lazy(
                                st, e, bound_t, bound_w, out, max_matches,
                                None if budget is None else budget - self.described)
                    else:
                        # the first state's first node the window admits; the join's
                        # pointers skip the expired nodes of the others by their snapshots
                        lo_c = [p.base for p in parts]
                        if windowed:
                            lo_c[0] = lo_of(parts[0], bound_t, bound_w)
                        hi = S[last][-1][0]
                        rest = None if budget is None else budget - self.described
                        blk_n = self._join_seq_block(st, e, lo_c, hi, out, max_matches,
                                                    rest) if self.describe else None
                        # a bound on the node's matches: the generated join writes all of
                        # them at once only when no cap can stop it (else the lazy join)
                        fits = True
                        if blk_n is None and (max_matches is not None or rest is not None):
                            bound = 1
                            for j in range(last):
                                bound *= max(0, parts[j].base + len(R[j]) - lo_c[j])
                            fits = (max_matches is None or bound <= max_matches) and (
                                rest is None or len(out) + bound <= rest)
                        if blk_n is not None:
                            nm = blk_n
                        elif fits:
                            before = len(out)
                            fj(parts, lo_c, e, hi, out)
                            nm = len(out) - before
                        else:
                            nm = self._join_lazy(st, e, bound_t, bound_w, out, max_matches,
                                                 rest)
                eff = None if budget is None else budget - self.described
                if ((max_matches is not None and nm > max_matches)
                        or (eff is not None and len(out) > eff)
                        or (max_runs is not None and live > max_runs)):
                    drop = event_caps(self, e, nm, out, max_matches, eff, live)
                    if drop:
                        self._drop_oldest(st, drop)
                        live = self.live(st)
        finally:
            st.prev_bits = prev_bits
            self.created += created
            self.copied += copied
            self.nodes_made += nodes
            if e:  # the last event looked at (every one, as the general loop)
                st.last_wpos = e[WPOS]
                st.last_ts = e[TS]

    def _join_lazy(self, st: ChainState, e: Rec, bound_t: int | None, bound_w: int | None,
                   out: list[Any], max_matches: int | None, budget: int | None) -> int:
        """The lazy join (:meth:`combine`) of the last state's newest node into ``out``, one
        match at a time, stopping one past a cap (the caller applies it)."""
        last = self.n - 1
        nm = 0
        for c in self.combine(st, last, st.parts[last].size - 1, e, bound_t, bound_w):
            nm += 1
            out.append(c)
            if (max_matches is not None and nm > max_matches) or (
                    budget is not None and len(out) > budget):
                self.inexact = True  # what the join did not write
                break
        return nm

    def _join_fwd(self, st: ChainState, e: Rec, bound_t: int | None, bound_w: int | None,
                  out: list[Any], room: int | None, k: int = -1, blocks: bool = True
                  ) -> int | None:
        """The matches of the last state's newest node (record ``e``) by the forward walk
        (:class:`~.chain_fwd.FwdJoin`), in the output order, counted exactly: as ``Match``
        entries keyed by ``(last position, rank)`` (RETURN: candidates) -- when the output
        is read lazily (``describe``) only if fewer than :data:`~.chain_fwd.BLOCK_MIN`,
        else as one :class:`~.chain_fwd.FwdBlock`. None (nothing written) when they are
        more than ``room``: the caller's :meth:`combine` then stops one past the cap, as
        before (so capped output and counts do not change). ``k``: the state of the node (one
        before a ``*`` last state's, :meth:`FwdJoin.ending_at`); ``blocks`` False: no block
        (another node of the event ends matches too)."""
        fj = self.fwd
        assert fj is not None
        parts = st.parts
        last = self.n - 1 if k < 0 else k
        if not blocks:  # the event ends matches in several states: each one's pruned walk
            sub = self.fwd_walks.get(last)
            if sub is None:
                sub = self.fwd_walks[last] = fj.end_walk(last)
            sub.to_match = fj.to_match
            fj = sub
        elif last != self.n - 1:
            fj = self.fwd_ends[last]
        lg = parts[last].size - 1
        P = [(p.recs, p.snaps, p.base) for p in parts]
        his = fj.reach(P, lg)
        lo0 = self._lo(parts[0], bound_t, bound_w)
        lo1, hi1, rest = self._fwd_starts(fj, parts, his, bound_t, bound_w)
        if his[0] <= lo0 and hi1 <= lo1 and all(hi <= lo for lo, hi in rest):
            return 0
        small: list[Any] = []
        nm = 0
        R = [v[0] for v in P]
        Bs = [v[2] for v in P]
        direct = self.direct
        cg, cts = e[GPOS], e[TS]
        lazy = self.describe and blocks
        kept = 0  # (with a NOT: the matches it lets through; else nm)
        # the walk prunes by the NOTs it decides (FwdJoin._neg_setup: those the NFA decides
        # in its automaton), and the caps count what it makes, as the NFA counts its runs'
        # matches; the other NOTs (neg_late) are the history test on each match made,
        # counted before it as the NFA's candidates are
        # (without caps nothing counts the matches before the others: the walk skips the
        # first nodes a leading NOT rejects, FwdJoin.lead0)
        neg_ok = fj.neg_ok
        prune = neg_ok is not None and fj.neg_at is not None
        lead = neg_ok is not None and room is None and fj.leads()
        walk = fj.paths(P, lo0, his[0], e, lg, lo1, hi1, rest,
                        st if prune or lead else None, lead)
        if neg_ok is not None:
            neg_ok = None if lead and fj.leads_all() else fj.neg_late
        for path in walk:
            nm += 1
            if neg_ok is not None:
                # the history test on each complete match (the caps count before it)
                c = fj.candidate(path, R, Bs, e)
                if neg_ok(st, c):
                    kept += 1
                    if kept < BLOCK_MIN or not lazy:
                        small.append(c)
            elif nm < BLOCK_MIN or not lazy:
                if direct is None:  # candidates (RETURN: the runtime computes the values)
                    small.append(fj.candidate(path, R, Bs, e))
                else:
                    B = fj.bindings(path, R, Bs)
                    f = path[-1][1]
                    small.append(((cg, nm), Match(direct[0], direct[1](B),
                                                  R[0][f - Bs[0]][TS], cts, {}), None))
            if room is not None and nm > room:  # (a candidate too: the cap stops at room + 1)
                return None
        if neg_ok is None:
            kept = nm
        if kept < BLOCK_MIN or not lazy:
            out.extend(small)
            # (the ones a NOT rejected count for the call's budget, as candidates would)
            self.described += nm - kept
            return nm
        blk = fj.block(P, lo0, his, e, lg, kept, st, lo1, rest)
        out.append(blk if direct is None else ((cg,), blk, None))
        self.described += nm - 1
        return nm

    def _fwd_starts(self, fj: FwdJoin, parts: list[Part], his: list[int],
                    bound_t: int | None, bound_w: int | None
                    ) -> tuple[int, int, tuple[tuple[int, int], ...]]:
        """The first nodes of the forward walk's later start states (a ``*`` first state:
        the second, then each after a ``*`` second ...; :attr:`FwdJoin.nstart`) the window
        admits, up to those the last node reaches (``his``): ``lo1, hi1`` and the ``(lo,
        hi)`` of the rest (:meth:`FwdJoin.paths`)."""
        if fj.nstart == 1:
            return 0, 0, ()
        los = [(self._lo(parts[j], bound_t, bound_w), his[j]) for j in range(1, fj.nstart)]
        return los[0][0], los[0][1], tuple(los[1:])

    def _join_fwd_ends(self, st: ChainState, e: Rec, bound_t: int | None,
                       bound_w: int | None, out: list[Any], room: int | None, ks: list[int]
                       ) -> int | None:
        """The matches of an event that ends matches in the states ``ks`` (a ``*`` last
        state: :meth:`FwdJoin.ending_at`), counted over all of them, as one
        :class:`~.chain_fwd.FwdBlock` whose walk merges the states' matches in the output
        order (each state's walk pruned as :meth:`.chain_fwd.FwdJoin.end_walk` says). A NOT
        (not trailing): the count walk prunes by those it decides and tests each match it
        makes against the others, the caps count what it makes (as :meth:`_join_fwd`'s), and
        the block holds a copy of the history its walk tests again (the same answers).
        Fewer than :data:`~.chain_fwd.BLOCK_MIN` (that pass): candidates, as
        :meth:`_join_fwd` writes them. None (nothing written) when they are more than
        ``room``: then each node as before (:meth:`_join_fwd` without blocks, the reverse
        join past the cap; the caller's loop)."""
        fwd = self.fwd
        assert fwd is not None
        neg_ok = fwd.neg_ok
        parts = st.parts
        P = [(p.recs, p.snaps, p.base) for p in parts]
        R = [v[0] for v in P]
        Bs = [v[2] for v in P]
        lo0 = self._lo(parts[0], bound_t, bound_w)
        subs = []
        small: list[Candidate] = []
        nm = kept = 0
        for k in ks:
            fj = self.fwd_walks.get(k)
            if fj is None:
                fj = self.fwd_walks[k] = fwd.end_walk(k)
            fj.to_match = fwd.to_match
            lg = parts[k].size - 1
            his = fj.reach(P, lg)
            lo1, hi1, rest = self._fwd_starts(fj, parts, his, bound_t, bound_w)
            if his[0] <= lo0 and hi1 <= lo1 and all(hi <= lo for lo, hi in rest):
                continue
            c = ck = 0
            prune = neg_ok is not None and fj.neg_at is not None  # (as :meth:`_join_fwd`)
            lead = neg_ok is not None and room is None and fj.leads()
            test = fj.neg_late if neg_ok is not None else None
            if lead and fj.leads_all():
                test = None
            for path in fj.paths(P, lo0, his[0], e, lg, lo1, hi1, rest,
                                 st if prune or lead else None, lead):
                c += 1
                if test is None:
                    if kept + c < BLOCK_MIN:
                        small.append(fj.candidate(path, R, Bs, e))
                else:
                    cand = fj.candidate(path, R, Bs, e)
                    if test(st, cand):
                        ck += 1
                        if kept + ck < BLOCK_MIN:
                            small.append(cand)
                if room is not None and nm + c > room:
                    return None
            nm += c
            if test is None:
                ck = c
            if ck:
                subs.append((fj, lg, his, ck, lo1, rest))
                kept += ck
        if kept < BLOCK_MIN:
            # a few: as candidates (the runtime sorts them), as :meth:`_join_fwd` writes
            # them; those a NOT rejected count for the call's budget
            out.extend(small)
            self.described += nm - kept
            return nm
        blks = [fj.block(P, lo0, his, e, lg, ck, st, lo1, rest)
                for fj, lg, his, ck, lo1, rest in subs]
        blk = blks[0]
        for b in blks[1:]:
            b.hist = blk.hist  # (one copy of the history for the event's walks)
        blk.more = blks[1:]
        blk.n = kept
        out.append(blk)
        # (the matches a NOT rejected count for the call's budget, as candidates would)
        self.described += nm - 1
        return nm

    def sort_key(self, c: Candidate | FwdBlock) -> tuple[Any, ...]:
        """Output order (docs/semantics.md 10); a :class:`~.chain_fwd.FwdBlock` (RETURN,
        lazy output) sorts as its last event (the only entry of that event)."""
        if isinstance(c, FwdBlock):
            return (c.L[GPOS], (-1,))
        return super().sort_key(c)

    def negation_ok(self, st: ChainState, c: Candidate) -> bool:  # type: ignore[override]
        """The history test (docs/semantics.md 4); a :class:`~.chain_fwd.FwdBlock` holds
        matches its walk has tested (a NOT that is not trailing)."""
        if isinstance(c, FwdBlock):
            return True
        return super().negation_ok(st, c)

    def needs_trailing(self, c: Candidate) -> bool:
        """Must the match wait for a trailing NOT? (A block: never, :meth:`FwdJoin.fits`.)"""
        return not isinstance(c, FwdBlock) and bool(c.trailing)

    def bind_to_match(self, to_match: Any) -> None:
        """The runtime's candidate -> ``Match`` (RETURN values), for the forward join's
        blocks."""
        if self.fwd is not None and self.direct is None and self.plan.return_fns:
            self.fwd.to_match = to_match
            for sub in self.fwd_ends.values():
                sub.to_match = to_match

    def _join_seq_block(self, st: ChainState, c: Rec, lo: list[int], hi: int,
                        out: list[Any], max_matches: int | None,
                        budget: int | None) -> int | None:
        """The generated join's matches ending with ``c`` as one
        :class:`~.chain_stream.SeqBlock` (lazy output: a copy of the reachable nodes, no
        match built), counted exactly; None (nothing written) when they are fewer than
        ``SEQ_BLOCK_MIN`` (the generated join writes them: a block's copy would cost more)
        or a cap could stop them (the lazy join stops one past it)."""
        parts = st.parts
        last = self.n - 1
        bound = 1
        for j in range(last):
            bound *= max(0, parts[j].base + len(parts[j].recs) - lo[j])
        if bound < SEQ_BLOCK_MIN:
            return None
        # the reachable range [start_k, hi_k) of each partition, from the last one down
        his = [0] * last
        his[last - 1] = hi
        for k in range(last - 1, 0, -1):
            pk = parts[k]
            if his[k] <= pk.base:
                return 0
            his[k - 1] = pk.snaps[his[k] - 1 - pk.base][0]
        starts = [lo[0]] + [0] * (last - 1)
        for k in range(1, last):
            pk = parts[k]
            starts[k] = pk.base + bisect_right(pk.snaps, (starts[k - 1],))
        if any(starts[k] >= his[k] for k in range(last)):
            return 0
        ids: list[list[Any]] = []
        snaps: list[list[int]] = [[]]
        for k in range(last):
            pk = parts[k]
            a, b = starts[k] - pk.base, his[k] - pk.base
            ids.append([r[ID] for r in pk.recs[a:b]])
            if k:
                s0 = starts[k - 1]
                snaps.append([s[0] - s0 for s in pk.snaps[a:b]])
        p0 = parts[0]
        ts0 = [r[TS] for r in p0.recs[starts[0] - p0.base:his[0] - p0.base]]
        comp = {cp.vars[0]: k for k, cp in enumerate(self.plan.components)}
        assert self.direct is not None
        blk = SeqBlock(self.direct[0], self.plan.order,
                       tuple(comp[v] for v in self.plan.order), c[ID], c[TS], c[GPOS], ids,
                       ts0, snaps)
        n = len(blk)
        if (max_matches is not None and n > max_matches) or (
                budget is not None and len(out) + n > budget):
            return None
        if n:
            out.append(((c[GPOS],), blk, None))
            self.described += n - 1
        return n

    def _join_kleene(self, st: ChainState, c: Rec, bound_t: int | None, bound_w: int | None,
                     out: list[Any], room: int | None) -> int | None:
        """CombineMatch for ``SEQ(a, b+ b[], c)`` (:func:`kleene_shape`) in direct mode: every
        match ending with ``c`` (the newest node of the last partition) appended to ``out``,
        in the output order; None (nothing written) when there are more than ``room``.

        For a first node ``a`` (ascending), the b nodes after it are the suffix of the b
        partition from the first whose snapshot exceeds ``a`` to ``c``'s snapshot, and its
        matches are their non-empty subsets. In the output order (docs/semantics.md 10: the
        b positions compared from the last down) the subsets come in the order of their bit
        masks (bit i: the i-th b node), so the join counts masks: the low 8 bits index a
        table of the id tuples and reversed position tuples of those nodes' subsets (built
        in mask order, ``T + [t + (x,) for t in T]``), the high bits are built per block of
        256. Memory: one table (at most 256 entries) per first node at a time. The
        condition between ``a`` and ``c`` (if any) is checked once per first node."""
        pa, pb, pc = st.parts
        hb = pc.snaps[-1][0]
        lo_b = pb.base
        if hb <= lo_b:
            return 0
        lo_a = self._lo(pa, bound_t, bound_w)
        ha = pb.snaps[hb - 1 - lo_b][0]
        if ha <= lo_a:
            return 0
        sb = pb.snaps
        rb = pb.recs
        ra = pa.recs
        ba = pa.base
        # first pass: which first nodes pass the condition, and how many matches they make
        firsts: list[tuple[Rec, int]] = []
        total = 0
        end_fns = self.kleene_end
        fn1 = end_fns[0] if len(end_fns) == 1 else None
        E = list(self.empty_B)
        s0, s_last = self.end_slots
        E[s_last] = c
        m1 = lo_b + bisect_right(sb, (lo_a,))  # the first b node after the first a node
        for ia in range(lo_a, ha):
            while sb[m1 - lo_b][0] <= ia:
                m1 += 1
            a = ra[ia - ba]
            if end_fns:
                E[s0] = a
                Et = tuple(E)
                if fn1 is not None:
                    if fn1(Et, 0) is not True:
                        continue
                elif not all(fn(Et, 0) is True for fn in end_fns):
                    continue
            firsts.append((a, m1))
            total += (1 << (hb - m1)) - 1
            if room is not None and total > room:
                return None
        if not firsts:
            return 0
        name = self.kleene_names
        if self.describe and hb - firsts[0][1] <= MAX_SPAN:
            # lazy output: the matches are generated as columns when they are read
            mb = firsts[0][1]
            out.append(((c[GPOS],), KleeneBlock(
                name, self.plan.order, c[ID], c[TS], c[GPOS], [a[ID] for a, _m in firsts],
                [a[TS] for a, _m in firsts], [m - mb for _a, m in firsts],
                [x[ID] for x in rb[mb - lo_b:hb - lo_b]], total), None))
            self.described += total - 1
            return total
        ka, kb, kc = self.plan.order
        new = object.__new__
        sq, sbd, ss, se, sv, sx = _MATCH_SETTERS
        cg, cid, cts = c[GPOS], c[ID], c[TS]
        ap = out.append
        for a, m1 in firsts:
            nodes = rb[m1 - lo_b:hb - lo_b]
            low, high = nodes[:8], nodes[8:]
            ids: list[tuple[Any, ...]] = [()]
            rpos: list[tuple[int, ...]] = [()]
            for x in low:
                xi, xg = (x[ID],), (x[GPOS],)
                ids += [t + xi for t in ids]
                rpos += [xg + t for t in rpos]
            aid, ats, pre = a[ID], a[TS], (cg, a[GPOS])
            hid = [x[ID] for x in high]
            hg = [x[GPOS] for x in high]
            for h in range(1 << len(high)):
                if h:
                    hi_ids = tuple([v for j, v in enumerate(hid) if h >> j & 1])
                    key0 = pre + tuple([v for j, v in enumerate(hg) if h >> j & 1][::-1])
                    pairs = zip(ids, rpos, strict=True)
                else:
                    hi_ids, key0 = (), pre
                    pairs = zip(ids[1:], rpos[1:], strict=True)  # the empty subset: no match
                for li, lg in pairs:
                    mt = new(Match)
                    sq(mt, name)
                    sbd(mt, {ka: aid, kb: li + hi_ids, kc: cid})
                    ss(mt, ats)
                    se(mt, cts)
                    sv(mt, {})
                    sx(mt, None)
                    ap((key0 + lg, mt, None))
        return total

    def _drop_oldest(self, st: ChainState, drop: int) -> None:
        """``on_cap='truncate'``: forget the ``drop`` oldest nodes (by their latest first
        event) -- the matches through them are lost, and counted as truncated runs."""
        while drop > 0:
            best = None
            for p in st.parts:
                if p.recs and (best is None or p.lft[0] < best.lft[0]):
                    best = p
            if best is None:
                return
            self._cut(best, 1)
            drop -= 1

    @staticmethod
    def _cut(p: Part, cut: int) -> None:
        del p.recs[:cut], p.snaps[:cut], p.lft[:cut], p.lfw[:cut], p.chain[:cut]
        p.base += cut

    def _expire(self, st: ChainState, bound_t: int | None, bound_w: int | None) -> None:
        """Cut the nodes no future match can use (their latest first event is outside the
        window); a prefix of each partition since ``lf`` never decreases."""
        for p in st.parts:
            if not p.recs:
                continue
            if (bound_t is not None and p.lft[0] < bound_t) or (
                    bound_w is not None and p.lfw[0] < bound_w):
                cut = 0 if bound_t is None else bisect.bisect_left(p.lft, bound_t)
                if bound_w is not None:
                    cut = max(cut, bisect.bisect_left(p.lfw, bound_w))
                if cut >= 32 or cut == len(p.recs):
                    self._cut(p, cut)
                    if not p.recs:
                        p.tails = 0

    def _lo(self, p: Part, bound_t: int | None, bound_w: int | None) -> int:
        """Global index of the first node of ``p`` the window still admits."""
        lo = 0
        if bound_t is not None and p.recs and p.lft[0] < bound_t:
            lo = bisect.bisect_left(p.lft, bound_t)
        if bound_w is not None and p.recs and p.lfw[0] < bound_w:
            lo = max(lo, bisect.bisect_left(p.lfw, bound_w))
        return p.base + lo

    # ---------------------------------------------------------------------------------------
    def combine(self, st: ChainState, k: int, g: int, last: Rec, bound_t: int | None,
                bound_w: int | None) -> Iterator[Candidate]:
        """CombineMatch (Algorithm 2): every match that ends with node ``g`` of partition
        ``k``, by reverse joining through the snapshots; yields one candidate at a time (an
        explicit depth-first stack: each step moves to the next predecessor node, and every
        node on the stack is inside the window, so a match is at most one walk down away)."""
        parts = st.parts
        srcs, kleene, starts_at = self.srcs, self.kleene, self.starts_at
        filters = self.filters
        direct = self.direct
        lo_cache = [self._lo(p, bound_t, bound_w) for p in parts]
        plain = not any(self.is_list)
        is_list, cslot = self.is_list, self.cslot
        leaf = [plain and j == 0 and not srcs[j] and not kleene[j] and starts_at[j]
                for j in range(self.n)]
        list_slots = [cslot[i] for i in range(self.n) if is_list[i]]
        tail = self.empty_B[self.n:]
        path_k: list[int] = []
        path_r: list[Rec] = []
        frames: list[list[Any]] = []

        def push(k: int, g: int) -> Rec:
            p = parts[k]
            i = g - p.base
            rec = p.recs[i]
            path_k.append(k)
            path_r.append(rec)
            ranges = [(j, lo_cache[j], sz) for j, sz in zip(srcs[k], p.snaps[i], strict=True)
                      if sz > lo_cache[j]]
            if kleene[k] and g > lo_cache[k]:
                ranges.append((k, lo_cache[k], g))
            frames.append([ranges, 0, ranges[0][1] if ranges else 0])
            return rec

        def build() -> Candidate | None:
            if plain:
                B = tuple(reversed(path_r)) + tail
                positions = tuple(r[GPOS] for r in B[: self.n])
            else:
                Bl: list[Any] = list(self.empty_B)
                for sl in list_slots:
                    Bl[sl] = []
                for kk, rec in zip(reversed(path_k), reversed(path_r), strict=True):
                    if is_list[kk]:
                        Bl[cslot[kk]].append(rec)
                    else:
                        Bl[cslot[kk]] = rec
                for sl in list_slots:
                    Bl[sl] = tuple(Bl[sl])
                B = tuple(Bl)
                positions = tuple([r[GPOS] for r in reversed(path_r)])
            if filters and not all(pr.check_all(B, sl) for pr, sl in filters):
                return None
            first = path_r[-1]
            if direct is not None:
                # the output-buffer entry itself: (flat output key, Match, None)
                return ((last[GPOS], positions[0], *positions[-2:0:-1]),  # type: ignore[return-value]
                        Match(direct[0], direct[1](B), first[TS], last[TS], {}), None)
            return Candidate(B, first[TS], first[WPOS], last[GPOS], last[TS], last[WPOS],
                             positions)

        end_fns = [pr.compiled.fn for pr, _sl in self.end_filters]
        s0, s_last = self.end_slots
        E = list(self.empty_B)
        E[s_last] = last

        def admitted(rec: Rec) -> bool:
            if (bound_t is not None and rec[TS] < bound_t) or (
                    bound_w is not None and rec[WPOS] < bound_w):
                return False
            if end_fns:
                E[s0] = rec
                Et = tuple(E)
                for fn in end_fns:
                    if fn(Et, 0) is not True:
                        return False
            return True

        rec = push(k, g)
        if starts_at[k] and admitted(rec):
            c = build()
            if c is not None:
                yield c
        while frames:
            f = frames[-1]
            ranges, ri, gn = f
            if ri >= len(ranges):
                frames.pop()
                path_k.pop()
                path_r.pop()
                continue
            j, _lo, hi = ranges[ri]
            if gn >= hi:
                f[1] = ri = ri + 1
                f[2] = ranges[ri][1] if ri < len(ranges) else 0
                continue
            if leaf[j]:
                # the first state: every node of the range (the window's lower bound already
                # cut it) starts a match; no frame per node
                f[2] = hi
                pj = parts[j]
                recs_j = pj.recs
                suffix = tuple(reversed(path_r))
                pos_suffix = tuple([r[GPOS] for r in suffix])
                rev_mid = pos_suffix[-2::-1]  # the flat output key's middle positions
                for rec in recs_j[gn - pj.base: hi - pj.base]:
                    if end_fns:
                        E[s0] = rec
                        Et = tuple(E)
                        if not all(fn(Et, 0) is True for fn in end_fns):
                            continue
                    B = (rec, *suffix, *tail)
                    if filters and not all(pr.check_all(B, sl) for pr, sl in filters):
                        continue
                    if direct is not None:
                        yield ((last[GPOS], rec[GPOS], *rev_mid),  # type: ignore[misc]
                               Match(direct[0], direct[1](B), rec[TS], last[TS], {}), None)
                    else:
                        yield Candidate(B, rec[TS], rec[WPOS], last[GPOS], last[TS],
                                        last[WPOS], (rec[GPOS], *pos_suffix))
                continue
            f[2] = gn + 1
            rec = push(j, gn)
            if starts_at[j] and admitted(rec):
                c = build()
                if c is not None:
                    yield c

    # ---------------------------------------------------------------------------------------
    # counting without enumeration
    def _count(self, st: ChainState, recs: list[Rec], bits: list[int]) -> None:
        pos_bits = self.pos_bits
        n = self.n
        cbit, srcs, kleene, starts_at = self.cbit, self.srcs, self.kleene, self.starts_at
        accept = self.accept_after
        win_us, win_ev = self.win_us, self.win_ev
        pair = self.pair
        s0 = self.cslot[0]
        starts = st.starts
        counted = 0
        summed = self.sum_starts
        hit_cache = self.hit_cache
        empty_B, cslot, is_list = self.empty_B, self.cslot, self.is_list
        feeds = self.feeds
        for e, b in zip(recs, bits, strict=True):
            b &= pos_bits
            if not b:
                continue
            ts, wp = e[TS], e[WPOS]
            while starts and ((win_us is not None and ts - starts[0][0] > win_us) or (
                    win_ev is not None and wp - starts[0][1] >= win_ev)):
                starts.popleft()
            hits = hit_cache.get(b)
            if hits is None:
                hits = hit_cache[b] = [k for k in range(n) if b & cbit[k]]
            vecs = [st.total] if summed else starts
            off = 0 if summed else 3
            # per hit: the slots its count reads (old values), a bindings template with the
            # event in place for its conditions on the first variable, and their functions
            plan_k = []
            for k in hits:
                reads = [off + j for j in srcs[k]] + ([off + k] if kleene[k] else [])
                fns = [pr.compiled.fn for pr in pair[k]]
                tmpl = None
                if fns:
                    tmpl = list(empty_B)
                    tmpl[cslot[k]] = (e,) if is_list[k] else e
                plan_k.append((off + k, reads, fns, tmpl, accept[k], feeds[k]))
            for v in vecs:
                upd = []
                for at, reads, fns, tmpl, acc, feed in plan_k:
                    x = 0
                    for r in reads:
                        x += v[r]
                    if x and fns:
                        tmpl[s0] = v[2]  # type: ignore[index]
                        Bt = tuple(tmpl)  # type: ignore[arg-type]
                        for fn in fns:
                            if fn(Bt, 0) is not True:
                                x = 0
                                break
                    if x:
                        if acc:
                            counted += x
                        if feed:
                            upd.append((at, x))
                for at, x in upd:
                    v[at] += x
            init = [0] * n
            any_start = False
            for k in hits:
                if starts_at[k]:
                    init[k] = 1
                    any_start = True
                    if accept[k]:
                        counted += 1
            if any_start:
                if summed:
                    for k in hits:
                        st.total[k] += init[k]
                else:
                    starts.append([ts, wp, e, *init])
                    if self.max_runs is not None and len(starts) > self.max_runs:
                        self.counted += counted  # final even if the cap raises
                        counted = 0
                        for _ in range(too_many_runs(self, len(starts), e)):
                            starts.popleft()
        self.counted += counted

    def _swag_element(self, b: int) -> tuple[Any, ...]:
        """Per candidate bits: the event's map ``M_e`` (never changed after), its starts
        ``x_e``, the sparse rows ``(k, ((m, coefficient), ...))`` of the hit states, the
        entries of the live total an accepting hit adds (with repetition), and the matches
        its own starts complete."""
        n = self.n
        rn = range(n)
        M = [[int(i == j) for j in rn] for i in rn]
        x = [0] * n
        reads: list[int] = []
        own = 0
        hits = [k for k in rn if b & self.cbit[k]]
        for k in hits:
            row = M[k]
            for j in self.srcs[k]:
                row[j] += 1
            if self.kleene[k]:
                row[k] += 1
            if self.accept_after[k]:
                reads += list(self.srcs[k]) + ([k] if self.kleene[k] else [])
            if self.starts_at[k]:
                x[k] = 1
                if self.accept_after[k]:
                    own += 1
        rows = tuple((k, tuple((m, c) for m, c in enumerate(M[k]) if c)) for k in hits)
        return M, x, rows, tuple(reads), own

    def _count_window(self, st: ChainState, recs: list[Rec], bits: list[int]) -> None:
        """Counting in CORE's fragment with a window, flat in the window size.

        Every live start's vector of partial-match counts evolves by the same linear map per
        event (``v <- M_e v``, ``M_e = I + A_e``: a hit state adds its sources' counts), so the
        sum over the starts inside the window is a sliding-window aggregate of the elements
        ``(M_e, x_e)`` (``x_e``: the starts the event makes) under the associative composition
        ``(P2, y2) o (P1, y1) = (P2 P1, P2 y1 + y2)``. Two stacks (the back one with its running
        aggregate, the front one with suffix aggregates, refilled by a flip when it runs empty)
        give every event O(1) amortised small-matrix work and exact integers."""
        n = self.n
        pos_bits = self.pos_bits
        win_us, win_ev = self.win_us, self.win_ev
        swag_cache = self.swag_cache
        rn = range(n)
        if not st.swag:
            st.swag = [[], [], [[int(i == j) for j in rn] for i in rn], [0] * n]
        front, back, Pb, yb = st.swag
        counted = 0
        for e, b in zip(recs, bits, strict=True):
            b &= pos_bits
            if not b:
                continue
            ts, wp = e[TS], e[WPOS]
            # evict the elements before the window (they precede every live start)
            while True:
                if front:
                    f = front[-1]
                    if (win_us is not None and ts - f[2] > win_us) or (
                            win_ev is not None and wp - f[3] >= win_ev):
                        front.pop()
                        continue
                    break
                if not back or not ((win_us is not None and ts - back[0][2] > win_us) or (
                        win_ev is not None and wp - back[0][3] >= win_ev)):
                    break
                # flip: suffix aggregates from the newest back element to the oldest
                P = [[int(i == j) for j in rn] for i in rn]
                y = [0] * n
                for M, x, ets, ewp in reversed(back):
                    # (P, y) o (M, x) = (P M, P x + y)
                    y = [y[i] + sum(P[i][j] * x[j] for j in rn if x[j]) for i in rn]
                    P = [[sum(P[i][m] * M[m][j] for m in rn) for j in rn] for i in rn]
                    front.append([P, y, ets, ewp])
                back.clear()
                Pb = [[int(i == j) for j in rn] for i in rn]
                yb = [0] * n
            el = swag_cache.get(b)
            if el is None:
                el = swag_cache[b] = self._swag_element(b)
            M, x, rows, acc_reads, n_starts_acc = el
            # the live total before the event: Pb * y_front + yb (only the entries read)
            if acc_reads:
                if front:
                    yf = front[-1][1]
                    for j in acc_reads:
                        pj = Pb[j]
                        counted += yb[j] + sum(pj[i] * yf[i] for i in rn)
                else:
                    for j in acc_reads:
                        counted += yb[j]
            counted += n_starts_acc
            back.append([M, x, ts, wp])
            # back aggregate: (M, x) o (Pb, yb) = (M Pb, M yb + x), rows of the hit states
            # (rows are never changed in place: the others are shared)
            newP = Pb[:]
            newy = yb[:]
            for k, row in rows:
                newP[k] = [sum(c * Pb[m][j] for m, c in row) for j in rn]
                newy[k] = sum(c * yb[m] for m, c in row)
            for k in rn:
                if x[k]:
                    newy[k] += x[k]
            Pb, yb = newP, newy
            st.swag[2], st.swag[3] = Pb, yb
        self.counted += counted

    def _count_ranked(self, st: ChainState, recs: list[Rec], bits: list[int]) -> None:
        """Counting ``SEQ(a, b+, c) [WHERE a.x OP c.y]`` in O(log starts) per event.

        A live start ``a`` has ``2^beta - 1`` partial matches ending in ``b`` (``beta``: the
        b-candidates after it), so an event completing ``c`` adds ``sum 2^(B - B_a)`` minus the
        number of starts (``b*``: not minus), over the live starts with ``a.x OP c.y`` (``B``:
        the b-candidates so far in the chunk, ``B_a`` at the start). Each start is kept with the
        exact integer weight ``2^(K - B_a)`` (``K``: the chunk's length, so ``B <= K``), shifted
        left by :data:`_LOW` bits plus 1 (its count), in a Fenwick tree over the rank of ``a.x``
        (``=`` / ``!=``: a dict by value; while fewer than :attr:`scan_below` starts are live,
        a plain scan of them instead); the completing event reads a prefix sum and shifts it
        right by ``K - B``. Window expiry subtracts. A chunk is ``max(256, 2 x live starts)``
        events, so the setup (ranks, weights) is amortised. Between chunks the starts are kept as
        the per-start count vectors of :meth:`_count` (the same state): a chunk whose values
        are not all numbers or all strings (NULL, NaN, booleans) is counted by :meth:`_count`.
        """
        rk = self.ranked
        assert rk is not None
        i = 0
        while i < len(recs):
            size = max(256, 2 * len(st.starts))
            cr, cb = recs[i:i + size], bits[i:i + size]
            i += size
            if rk.op is not None:
                ab, cbit = self.cbit[0], self.cbit[2]
                vals = [s[2][rk.xslot] for s in st.starts]
                vals += [e[rk.xslot] for e, b in zip(cr, cb, strict=True) if b & ab]
                if not _plain(vals + [e[rk.yslot] for e, b in zip(cr, cb, strict=True)
                                      if b & cbit]):
                    self._count(st, cr, cb)
                    continue
            else:
                vals = []
            self._count_ranked_chunk(st, cr, cb, rk, vals)

    def _count_ranked_chunk(self, st: ChainState, recs: list[Rec], bits: list[int],
                            rk: Ranked, vals: list[Any]) -> None:
        """One chunk of :meth:`_count_ranked` (``vals``: the ``a.x`` values it can meet)."""
        pos_bits = self.pos_bits
        ab, bb, cbit = self.cbit
        K = len(recs)
        low, mask = _LOW, (1 << _LOW) - 1
        inf = 1 << 80
        win_us = self.win_us if self.win_us is not None else inf
        win_ev = self.win_ev if self.win_ev is not None else inf
        max_runs = self.max_runs if rk.op is not None else None
        op, xs, ys, star = rk.op, rk.xslot, rk.yslot, rk.star
        ordered = op in ("<", "<=", ">", ">=")
        # few live starts: scan them (cheaper than the tree); past twice as many the chunk
        # moves them into the tree
        scan_mode = ordered and len(st.starts) < self.scan_below
        tree_mode = ordered and not scan_mode
        eq_mode = op in ("=", "!=")
        right = op in ("<=", ">")
        complement = op in (">", ">=")
        dom: list[Any] = sorted(set(vals)) if ordered else []
        rank = {v: j + 1 for j, v in enumerate(dom)}
        m = len(dom)
        tree = [0] * (m + 1)
        eqd: dict[Any, int] = {}
        q: deque[tuple[Any, ...]] = deque()  # (expiry ts, expiry wpos, a, weight, rank, a.x)
        tot = 0
        B = 0
        counted = 0

        for s in st.starts:
            e = s[2]
            w = (((s[4] + 1) << K) << low) | 1
            tot += w
            r = 0
            if tree_mode:
                r = j = rank[e[xs]]
                while j <= m:
                    tree[j] += w
                    j += j & -j
            elif eq_mode:
                eqd[e[xs]] = eqd.get(e[xs], 0) + w
            q.append((s[0] + win_us, s[1] + win_ev, e, w, r, e[xs]))
        # the oldest start's expiry: it leaves once ts - its ts > win_us or wp - its
        # wp >= win_ev
        nt, nw = (q[0][0], q[0][1]) if q else (inf, inf)
        try:
            for e, b in zip(recs, bits, strict=True):
                b &= pos_bits
                if not b:
                    continue
                ts, wp = e[TS], e[WPOS]
                if ts > nt or wp >= nw:
                    while q and (ts > q[0][0] or wp >= q[0][1]):
                        _t, _w, _e, w, r, x = q.popleft()
                        tot -= w
                        if tree_mode:
                            while r <= m:
                                tree[r] -= w
                                r += r & -r
                        elif eq_mode:
                            eqd[x] -= w
                    nt, nw = (q[0][0], q[0][1]) if q else (inf, inf)
                if b & cbit and tot:
                    if op is None:
                        sm = tot
                    elif scan_mode:
                        y = e[ys]
                        if op == "<":
                            sm = sum([s[3] for s in q if s[5] < y])
                        elif op == "<=":
                            sm = sum([s[3] for s in q if s[5] <= y])
                        elif op == ">":
                            sm = sum([s[3] for s in q if s[5] > y])
                        else:
                            sm = sum([s[3] for s in q if s[5] >= y])
                    elif tree_mode:
                        y = e[ys]
                        j = bisect_right(dom, y) if right else bisect_left(dom, y)
                        sm = 0
                        while j:
                            sm += tree[j]
                            j &= j - 1
                        if complement:
                            sm = tot - sm
                    else:
                        sm = eqd.get(e[ys], 0)
                        if op == "!=":
                            sm = tot - sm
                    if sm:
                        counted += (sm >> low) >> (K - B)
                        if not star:
                            counted -= sm & mask
                if b & bb:
                    B += 1
                if b & ab:
                    w = ((1 << (K - B)) << low) | 1
                    tot += w
                    r = 0
                    if tree_mode:
                        r = j = rank[e[xs]]
                        while j <= m:
                            tree[j] += w
                            j += j & -j
                    elif eq_mode:
                        eqd[e[xs]] = eqd.get(e[xs], 0) + w
                    q.append((ts + win_us, wp + win_ev, e, w, r, e[xs]))
                    if scan_mode and len(q) > 2 * self.scan_below:
                        scan_mode, tree_mode = False, True
                        for k, old in enumerate(q):
                            r = j = rank[old[5]]
                            while j <= m:
                                tree[j] += old[3]
                                j += j & -j
                            q[k] = (*old[:4], r, old[5])
                    if len(q) == 1:
                        nt, nw = ts + win_us, wp + win_ev
                    if max_runs is not None and len(q) > max_runs:
                        self.counted += counted  # final even if the cap raises
                        counted = 0
                        for _ in range(too_many_runs(self, len(q), e)):
                            _t, _w, _e, w, r, x = q.popleft()
                            tot -= w
                            if tree_mode:
                                while r <= m:
                                    tree[r] -= w
                                    r += r & -r
                            elif eq_mode:
                                eqd[x] -= w
                        nt, nw = (q[0][0], q[0][1]) if q else (inf, inf)
        finally:
            self.counted += counted
            sh = K - B
            st.starts = deque([s[2][TS], s[2][WPOS], s[2], 1, ((s[3] >> low) >> sh) - 1, 0]
                              for s in q)

    # ---------------------------------------------------------------------------------------
    # EMIT COVERAGE
    def _track_runs(self, st: ChainState, e: Rec, b: int) -> None:
        """Runs of adjacent candidates per variable (docs/semantics.md 16)."""
        for k in range(self.n):
            if b & self.cbit[k]:
                if not st.prev_bits & self.cbit[k] or st.cur_run[k] < 0:
                    st.cur_run[k] = e[GPOS]
                st.run_of[(e[GPOS], k)] = st.cur_run[k]
            else:
                st.cur_run[k] = -1

    def release_pending(self, st: ChainState, watermark: int | None  # type: ignore[override]
                        ) -> list[Candidate]:
        """Coverage: at the end of the stream, the matches no other match covers; trailing
        NOTs: as the linear matcher."""
        if not self.coverage:
            return super().release_pending(st, watermark)
        if watermark is not None or not st.pending:
            return []
        groups: dict[tuple[Any, ...], list[tuple[tuple[int, ...], Candidate]]] = {}
        for c in st.pending:
            sig: list[Any] = []
            pos: list[int] = []
            for k in range(self.n):
                x = c.B[self.cslot[k]]
                elems = x if self.is_list[k] else (x,)
                sig.append(tuple(st.run_of[(r[GPOS], k)] for r in elems))
                pos.extend(r[GPOS] for r in elems)
            groups.setdefault(tuple(sig), []).append((tuple(pos), c))
        out = []
        for members in groups.values():
            # maximal elements of the product order: scan from the largest positions down
            members.sort(key=lambda m: m[0], reverse=True)
            kept: list[tuple[int, ...]] = []
            for pos_t, c in members:
                if any(all(q >= p for p, q in zip(pos_t, o, strict=True)) for o in kept):
                    continue
                kept.append(pos_t)
                out.append(c)
        st.pending = []
        return out


# --------------------------------------------------------------------------------------------
# The plan kind
# --------------------------------------------------------------------------------------------


def chain_terms(plan: Plan, stats: Stats) -> dict[str, float]:
    """The chain's cost terms per input event: the matches its join writes, and the work of
    counting them (``count_work``: one per state, times the live start events where a
    condition relates the first variable to a later one; the join's matches outside the
    counting fragment)."""
    n = stats.events_in(plan.window_us, plan.window_events, plan.key_attrs)
    steps = []
    for c in plan.components:
        share = min(sum(stats.share(t) for t in c.types), 1.0)
        conj = len(plan.vars[c.vars[0]].take) + (plan.vars[c.vars[0]].mask is not None)
        steps.append((share, c.kind is CompKind.KLEENE, conj))
    matches = matches_estimate(steps, n, Strategy.SKIP_TILL_ANY_MATCH, registry.ORDERED)
    pair = countable(plan) if not plan.negations else None
    if pair is None:
        count_work = matches
    elif any(pair):
        share, _k, conj = steps[0]
        count_work = len(steps) * max(share * n * 0.5 ** conj, 1.0)
    else:
        count_work = float(len(steps))
    seen = min(sum(stats.share(t) for t in {t for c in plan.components for t in c.types}), 1.0)
    return {"events": seen, "matches": matches, "count_work": count_work,
            "states": float(len(steps))}


def fwd_group(plan: Plan) -> str | None:
    """Which pair of constants prices the chain's forward walk of ``plan`` (:func:`fwd_pair`;
    measured statistics, enumerating), or None where the matcher does not walk it through a
    Kleene state. The shape is :meth:`.chain_fwd.FwdJoin.fits` as the chooser sees it (no
    matcher: no coverage or policies known): single variables and ``+`` / ``*`` lists, at
    least one list (the walk over singles only measured 2-5x slower than the NFA: the
    reverse join's :data:`CHAIN_EVENT`), not all of them leading ``*`` states, no trailing
    NOT, not a Kleene first state that may end a match. The groups:

    * ``"last"``: a ``*`` last state (matches end in it and in the state before it);
    * ``"lead"``: else a leading ``*`` state (a match starts in it or in a later state);
    * ``"star"``: else one ``*`` closure as the only Kleene state;
    * ``"fwd"``: else one list, or lists whose predecessor partitions share a type;
    * ``"rev"``: else (two or more lists, no type shared: the NFA's runs do not explode as
      fast), priced as the reverse join.

    (docs/benchmarks.md, "The chooser and the walk's `*` and two lists" and "Session 12:
    the chooser refit for the walk's `*` ends and NOTs".)"""
    comps = plan.components
    n = len(comps)
    if n < 2 or plan.match_preds or not any(c.kind is CompKind.KLEENE for c in comps):
        return None
    lead = 0  # the leading `*` states
    while lead < n and comps[lead].kind is CompKind.KLEENE and comps[lead].min == 0:
        lead += 1
    if lead == n or any(all(c.nullable for c in comps[g.gap:]) for g in plan.negations):
        return None  # every state a leading `*`, or a trailing NOT
    for c in comps:
        list_var = plan.vars[c.vars[0]].is_list
        if c.kind is CompKind.KLEENE:
            if not list_var or c.max is not None or c.min not in (0, 1):
                return None
        elif c.kind is not CompKind.SINGLE or list_var or c.min != 1:
            return None
    if comps[0].kind is CompKind.KLEENE and 0 in FwdJoin.ends(plan):
        return None  # a Kleene first state that may end a match
    kleene = [c for c in comps if c.kind is CompKind.KLEENE]
    if comps[-1].kind is CompKind.KLEENE and comps[-1].min == 0:
        return "both" if lead else "last"
    if lead:
        return "lead"
    if len(kleene) == 1:
        return "star" if kleene[0].min == 0 else "fwd"
    from .chain_fwd import plan_sources, shared_sources

    return "fwd" if shared_sources(plan, plan_sources(plan)) else "rev"


def fwd_pair(group: str) -> tuple[float, float]:
    """The constants (per event, per match) of a :func:`fwd_group`."""
    return {"fwd": (CHAIN_FWD_EVENT, CHAIN_FWD_MATCH),
            "star": (CHAIN_FWD_STAR_EVENT, CHAIN_FWD_STAR_MATCH),
            "lead": (CHAIN_FWD_LEAD_EVENT, CHAIN_FWD_LEAD_MATCH),
            "last": (CHAIN_FWD_LAST_EVENT, CHAIN_FWD_LAST_MATCH),
            "both": (CHAIN_FWD_BOTH_EVENT, CHAIN_FWD_BOTH_MATCH),
            "rev": (CHAIN_EVENT, CHAIN_MATCH)}[group]


def fwd_late_not(plan: Plan) -> bool:
    """Does the walk test a NOT of ``plan`` on each complete match it makes (the history
    test), rather than prune by it at the step that fixes its interval
    (:func:`.chain_fwd.late_negation`, as the matcher decides it)?"""
    from .chain_fwd import late_negation

    comp_of = {c.vars[0]: k for k, c in enumerate(plan.components)}
    return any(late_negation(plan, g, comp_of) for g in plan.negations)


def chain_cost(plan: Plan, stats: Stats) -> float:
    """Estimated work per event, on the chooser's scale (the NFA's cost of one input event).

    An event adds at most one node per state and copies nothing (:data:`CHAIN_EVENT`); the
    join writes each match (:data:`CHAIN_MATCH`). Counting (``count_only``) builds no node in
    the counting fragment: :data:`CHAIN_COUNT_EVENT` plus :data:`CHAIN_COUNT_START` per live
    start and state (the ranked counter's shape: :data:`CHAIN_RANKED_EVENT`). A SEQ of single
    variables whose conditions the storage decides (:func:`seq_shape`) runs the generated
    join: :data:`CHAIN_SEQ_EVENT` and :data:`CHAIN_SEQ_MATCH`; ``SEQ(a, b+, c)`` with
    conditions between ``a`` and ``c`` only (:func:`kleene_plan_shape`) its mask join:
    :data:`CHAIN_KLEENE_MATCH` per match -- both with measured statistics only (with the
    defaults every query keeps the plan it had before those joins). The general join's
    forward walk through Kleene states (the shape of :meth:`.chain_fwd.FwdJoin.fits`, seen
    on the plan: :func:`fwd_group`), enumerating, costs its group's pair (:func:`fwd_pair`):
    :data:`CHAIN_FWD_EVENT` / :data:`CHAIN_FWD_MATCH` through one list or through lists whose
    predecessor partitions share a type, :data:`CHAIN_FWD_STAR_EVENT` /
    :data:`CHAIN_FWD_STAR_MATCH` through one ``*`` closure as the only Kleene state,
    :data:`CHAIN_FWD_LEAD_EVENT` / ``_MATCH`` with a leading ``*`` state,
    :data:`CHAIN_FWD_LAST_EVENT` / ``_MATCH`` with a ``*`` last state,
    :data:`CHAIN_FWD_BOTH_EVENT` / ``_MATCH`` with both, and :data:`CHAIN_EVENT` /
    :data:`CHAIN_MATCH` through two or more lists that share no type; a NOT the walk decides
    costs nothing more, one it tests on each complete match (:func:`fwd_late_not`)
    :data:`CHAIN_FWD_NOT_MATCH` per match; also with measured statistics only (counting does
    not walk: the matcher counts with the reverse join, :data:`CHAIN_EVENT`).
    Where the NFA's live runs exceed its default ``max_runs_per_partition``
    (100,000) the NFA stops with CapacityError while the chain stores none of them: the
    estimate is then capped below the NFA's (only with measured statistics, and for PARTITION
    BY / equivalence only when they count the keys: the cap is per key)."""
    from .nfa import linear_cost, linear_terms

    t = chain_terms(plan, stats)
    pair = countable(plan) if stats.count_only and not plan.negations else None
    if pair is not None and (any(pair) or plan.window_us is not None
                             or plan.window_events is not None) \
            and ranked_shape(plan, pair) is not None:
        cost = CHAIN_RANKED_EVENT * t["events"]
    elif pair is not None:
        cost = CHAIN_COUNT_EVENT * t["events"] + CHAIN_COUNT_START * t["count_work"]
    elif stats.source != "defaults" and (seq_shape(plan) or kleene_plan_shape(plan)):
        # only with measured statistics: with the defaults (an assumed 1,000 events per
        # window) the default plan of these queries stays the NFA, as before these joins
        seq = seq_shape(plan)
        per_match = CHAIN_SEQ_MATCH if seq else CHAIN_KLEENE_MATCH
        cost = (CHAIN_SEQ_EVENT if seq else CHAIN_EVENT) * t["events"] + per_match * t["matches"]
        if t["matches"] >= 1e18:
            cost = 1e18  # a saturated estimate stays saturated (a constant below 1 would not)
    elif stats.source != "defaults" and not stats.count_only \
            and (group := fwd_group(plan)) is not None:
        per_event, per_match = fwd_pair(group)
        if fwd_late_not(plan):  # a NOT tested on each match the walk makes
            per_match += CHAIN_FWD_NOT_MATCH
        cost = per_event * t["events"] + per_match * t["matches"]
        if t["matches"] >= 1e18:
            cost = 1e18
    else:
        cost = CHAIN_EVENT * t["events"] + CHAIN_MATCH * t["matches"]
    if stats.source == "defaults":
        # no measured rate: every window holds the same assumed 1,000 events and both
        # estimates saturate for any Kleene; ties go to registry order (the NFA)
        return min(cost, 1e18)
    if linear_terms(plan, stats)["runs"] > 100_000 and stats.knows_keys(plan.key_attrs):
        cost = min(cost, 0.5 * linear_cost(plan, stats))
    return min(cost, 0.5e18)


def chain_text(plan: Plan) -> list[str]:
    """``kleene explain`` lines."""
    from ..plan.explain import linear_text

    out = ["chain storage (LinkedCEP): one partition per state, nodes refer to source "
           "partitions by snapshot; CombineMatch joins complete nodes"]
    filters = [p for v in plan.order for p in plan.vars[v].take + plan.vars[v].close]
    if filters:
        out.append(f"  {len(filters)} conjunct(s) checked on each joined match (not "
                   "decided by the storage; where the forward walk applies, on partial "
                   "matches as they are joined)")
    return out + linear_text(plan)


def seq_shape(plan: Plan) -> bool:
    """A SEQ of single variables without NOT, RETURN or conditions the storage does not
    decide (every condition is a one-variable mask or the routing): the shape of
    :func:`fast_joiner` (which also needs direct output: no policies)."""
    return (len(plan.components) >= 2 and not plan.negations and not plan.match_preds
            and not plan.return_fns
            and all(c.kind is CompKind.SINGLE for c in plan.components)
            and not any(vp.take or vp.close or vp.is_list for vp in plan.vars.values()))


def kleene_plan_shape(plan: Plan) -> bool:
    """The plan of :func:`kleene_shape` as the chooser sees it (no matcher): ``SEQ(a, b+ b[],
    c)`` without NOT or RETURN whose conditions between events all relate only ``a`` and
    ``c``."""
    comps = plan.components
    if (len(comps) != 3 or plan.negations or plan.match_preds or plan.return_fns
            or [c.kind for c in comps] != [CompKind.SINGLE, CompKind.KLEENE, CompKind.SINGLE]
            or comps[1].min != 1 or comps[1].max is not None):
        return False
    va, vb, vc = (c.vars[0] for c in comps)
    pv = plan.vars
    return (not pv[va].take and not pv[va].close and not pv[vb].take and not pv[vb].close
            and not pv[vc].close and all(pr.vars <= {va, vc} and pr.iter_var is None
                                         and pr.general is None and not pr.opt_slots
                                         for pr in pv[vc].take))


def kleene_shape(plan: Plan, m: ChainMatcher) -> bool:
    """``SEQ(a, b+ b[], c)`` whose only condition the storage does not decide relates ``a``
    and ``c`` (checked once per first node): the shape of :meth:`ChainMatcher._join_kleene`."""
    comps = plan.components
    return (len(comps) == 3 and not m.filters and not m.coverage and not plan.negations
            and not plan.match_preds and not plan.return_fns
            and [c.kind for c in comps] == [CompKind.SINGLE, CompKind.KLEENE, CompKind.SINGLE]
            and comps[1].min == 1 and comps[1].max is None
            and m.is_list == [False, True, False]
            and plan.order == tuple(c.vars[0] for c in comps)
            and m.srcs == [(), (0,), (1,)] and m.starts_at == [True, False, False]
            and [bool(a) for a in m.accept_after] == [False, False, True])


_MATCH_SETTERS = tuple(Match.__dict__[f].__set__ for f in ("query", "bindings", "start",
                                                             "end", "values", "expired"))
"""``Match``'s slot setters: a match built without a call to ``__init__``."""


def fast_joiner(plan: Plan, m: ChainMatcher) -> Any:
    """A generated CombineMatch for a SEQ of single variables (each state's source is the
    state before it) whose conditions are all decided by the storage (masks, routing), in
    direct mode: ``join(parts, lo, c, hi, out)`` appends to ``out`` every match ending with
    ``c`` (the newest node of the last partition, whose snapshot of the state before it is
    ``hi``; ``lo[0]``: the first state's first node the window admits, ``lo[k]`` for the
    others a node at or before their first admitted one), as direct entries
    ``(flat output key, Match, None)``, already in the output order (docs/semantics.md 10):
    the first variable outermost, then the second-to-last down to the second. None when the
    plan has another shape.

    For a first node ``i0`` the nodes of partition ``k`` that reach it are those from
    ``m_k`` on (the first whose snapshot exceeds ``m_{k-1}``; snapshots never decrease, so
    the pointers only move forward as ``i0`` grows); a node of partition ``k`` at index ``i``
    takes the nodes of ``k - 1`` in ``[m_{k-1}, snap_i)``. A node the window no longer
    admits refers only to first nodes before ``lo[0]``, so the pointers pass it. Every
    visited node leads to a
    match (no dead ends), so the work is the output. The Match is built through the slots'
    descriptors inline (no call per match). Only constants and integers reach the source."""
    n = m.n
    if (m.direct is None or n < 2 or m.filters or m.end_filters or m.coverage
            or plan.negations or plan.match_preds or plan.return_fns
            or any(m.kleene) or any(m.is_list)
            or m.srcs != [()] + [(k - 1,) for k in range(1, n)]
            or m.starts_at != [True] + [False] * (n - 1)
            or [bool(a) for a in m.accept_after] != [False] * (n - 1) + [True]
            or [m.cslot[k] for k in range(n)] != list(range(n))):
        return None
    comp_of = {c.vars[0]: k for k, c in enumerate(plan.components)}
    if sorted(comp_of) != sorted(plan.order):
        return None
    d = Match.__dict__
    env: dict[str, Any] = {"NAME": m.direct[0], "new": object.__new__, "Match": Match}
    for f in ("query", "bindings", "start", "end", "values", "expired"):
        env[f"S_{f}"] = d[f].__set__
    for i, v in enumerate(plan.order):
        env[f"K{i}"] = v
    last = n - 1
    src = Source()
    with src.block("def join(P, lo, c, hi, out):"):
        src.line(f"cg = c[{GPOS}]", f"cid = c[{ID}]", f"cts = c[{TS}]", "ap = out.append")
        for k in range(last):
            src.line(f"r{k} = P[{k}].recs", f"b{k} = P[{k}].base")
            if k:
                src.line(f"s{k} = P[{k}].snaps")
        # the reachable range of each partition, from the last one down: hi{k} (exclusive)
        src.line(f"hi{last - 1} = hi")
        for k in range(last - 1, 0, -1):
            src.line(f"if hi{k} <= lo[{k}]:", "    return",
                     f"hi{k - 1} = s{k}[hi{k} - 1 - b{k}][0]")
        src.line("if hi0 <= lo[0]:", "    return")
        for k in range(1, last):
            src.line(f"m{k} = lo[{k}]")
        with src.block("for i0 in range(lo[0], hi0):"):
            src.line("e0 = r0[i0 - b0]", f"g0 = e0[{GPOS}]", f"id0 = e0[{ID}]",
                     f"t0 = e0[{TS}]")
            for k in range(1, last):
                prev = "i0" if k == 1 else f"m{k - 1}"
                src.line(f"while s{k}[m{k} - b{k}][0] <= {prev}:", f"    m{k} += 1")
            # loops: the second-to-last outermost, the second innermost
            depth = src.depth
            for k in range(last - 1, 0, -1):
                top = "hi" if k == last - 1 else f"e{k}s"
                sl = f"[m{k} - b{k}:{top} - b{k}]"
                if k > 1:
                    src.at(depth, f"for e{k}, q{k} in zip(r{k}{sl}, s{k}{sl}):",
                           f"    e{k - 1}s = q{k}[0]")
                else:
                    src.at(depth, f"for e{k} in r{k}{sl}:")
                depth += 1
            ids = {0: "id0", last: "cid"}
            binds = ", ".join(f"K{i}: {ids[comp_of[v]]}" if comp_of[v] in ids
                              else f"K{i}: e{comp_of[v]}[{ID}]"
                              for i, v in enumerate(plan.order))
            key = ", ".join(["cg", "g0"] + [f"e{k}[{GPOS}]" for k in range(last - 1, 0, -1)])
            src.at(depth, "x = new(Match)", "S_query(x, NAME)",
                   "S_bindings(x, {" + binds + "})", "S_start(x, t0)", "S_end(x, cts)",
                   "S_values(x, {})", "S_expired(x, None)", f"ap((({key},), x, None))")
    return build("\n".join(src.lines) + "\n", env, label=f"chain join {plan.name}",
                 entry="join")


def _matcher(cp: CompiledPlan, options: MatcherOptions) -> Any:
    plan = cp.plan
    if cp.spec.emit is Emit.COVERAGE:
        # CoverMatch directly on the chains where the storage decides every condition
        from .chain_cover import cover_matcher

        cover = cover_matcher(cp, options)
        if cover is not None:
            return cover
    m = ChainMatcher(plan, options, coverage=cp.spec.emit is Emit.COVERAGE,
                     plain=cp.spec.plain)
    if (not options.count_only and not plan.negations and not m.has_trailing
            and cp.spec.plain and m.simple_key and not plan.return_fns):
        built = bindings_builder(plan)
        if built is not None:
            # no NOT, policies or RETURN: the join writes finished (key, Match) entries
            m.direct = (plan.name, built[0])
            m.output_keys = True  # the join's entries carry the flat output-order key
            m.fast_join = fast_joiner(plan, m)
            if kleene_shape(plan, m):
                m.kleene_join = True
                m.kleene_end = [pr.compiled.fn for pr, _sl in m.end_filters]
            elif m.fast_join is None and FwdJoin.fits(plan, m):
                m.fwd = FwdJoin(plan, m)  # the general join, forward, for lazy output
            # a SEQ of singles: the per-event loop and per-key state generated per query
            from .chain_seq import install

            install(m)
    elif (not options.count_only and not m.has_trailing and cp.spec.plain
          and (plan.return_fns or not m.simple_key or plan.negations)
          and FwdJoin.fits(plan, m)):
        # RETURN, lists no direct entry keys (two Kleene states, a ``*``) or a NOT that is
        # not trailing (tested on each match the walk makes): candidates, or blocks that
        # write columns (RETURN: build them lazily)
        m.fwd = FwdJoin(plan, m)
        m.fwd_ends = {k: m.fwd.ending_at(k) for k in FwdJoin.ends(plan)[:-1]}
    return m


PLAN = PlanKind(
    name="chain",
    description="LinkedCEP chain-partitioned match storage with reverse joining "
                "(skip-till-any-match SEQ / Kleene), coverage output, counting",
    compile=compile_chain,
    matcher=_matcher,
    cost=chain_cost,
    explain=chain_text,
    coverage=True,
)
