"""Runs over a :class:`~kleene.plan.blocks.GroupPlan`: AND, ANY, OR of sub-patterns, repeated
groups and sub-pattern windows (LogCEP's pushdown automaton: a logical block's state is the
tuple of its children's states and it proceeds when its condition holds).

A run is ``(key, B, first_ts, first_wpos, first_gpos, last_cpos, pending)`` under
skip-till-any-match, where runs live in buckets per interned :class:`_Key` and the run loop is
generated for the plan (:meth:`GroupMatcher._build_loop`); otherwise
``(state, B, first_ts, first_wpos, first_gpos, last_cpos)``. Conjuncts are checked when a run
completes (they may mention variables of any block, bound in any order); one-variable
conjuncts are already in the candidate masks. Simple NOTs with a bounded interval are decided
inside the automaton (taint bits and pending predicates, LogCEP 4.3; docs/engine.md); the
others follow docs/semantics.md 4 over the partition's history of possible negating events,
and a match whose NOT interval is open to the future (a trailing NOT) waits until its window
has passed.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import field
from typing import Any

from ..codegen import build
from ..frozen import dataclass
from ..plan.blocks import GroupPlan
from ..plan.layout import CPOS, GPOS, TS, WPOS
from ..plan.nodes import And, AnyK, Ev, Node, Rep, Seq, Win
from ..vocab import Strategy
from .candidate import Candidate, cand_state, output_sort_key
from .caps import event_caps
from .matcher import MatcherOptions
from .nodes import NodeRunner, decidable_early
from .nodes import all_true as _all_true
from .nodes import bind as _bind
from .nodes import flatten as _flatten

_DEFAULTS = MatcherOptions()

Rec = tuple[Any, ...]
_INF = 1 << 62


@dataclass(slots=True)
class GroupState:
    """Per-key state: live runs, history of possible negating events, waiting matches."""

    runs: list[tuple[Any, ...]] = field(default_factory=list)
    hist: list[tuple[Rec, int]] = field(default_factory=list)
    pending: list[Candidate] = field(default_factory=list)
    last_wpos: int = -1
    last_ts: int = -(2 ** 62)
    buckets: dict[Any, list[tuple[Any, ...]]] = field(default_factory=dict)
    """Live runs grouped by key (skip-till-any with memoised transitions): an event is tested
    once per key, and runs that cannot take it are never touched. The bucket's key is the
    run's key: a negating event moves a whole list to a tainted key without rewriting the
    runs, so ``r[0]`` is only the key the run was born with."""

    def all_runs(self) -> list[tuple[Any, ...]]:
        """Every live run (with its bucket's key), oldest first."""
        if not self.buckets:
            return self.runs
        out = [r if r[0] is k else (k,) + r[1:]
               for k, lst in self.buckets.items() for r in lst]
        out.sort(key=lambda r: (r[2], r[4]))
        return out

    @property
    def neg_hist(self) -> list[tuple[Rec, int]]:
        """Alias used by snapshots."""
        return self.hist

    @neg_hist.setter
    def neg_hist(self, value: list[tuple[Rec, int]]) -> None:
        self.hist = value


class _Key:
    """A bucket key of the run loop: an automaton state, the positive variables its runs have
    bound (bit mask) and the *taint* bits (fast NOTs, by index, for which a negating event has
    arrived since the interval opened: a confirming binding is then forbidden). Interned and
    memoised: its expected bits, which NOTs an arriving event arms, whether it is dead, and
    its transitions per candidate bit set (identity hash: dict lookups never rehash a
    state tuple)."""

    __slots__ = ("s", "bm", "taint", "exp", "arm", "dead", "trans")

    def __init__(self, s: Any, bm: int, taint: int, exp: int, arm: int) -> None:
        self.s = s
        self.bm = bm
        self.taint = taint
        self.exp = exp
        self.arm = arm
        self.dead = False
        self.trans: dict[int, tuple[Any, ...]] = {}

    def plain(self) -> tuple[Any, int, int]:
        """As plain data (snapshots)."""
        return (self.s, self.bm, self.taint)


@dataclass(frozen=True, slots=True)
class _FastNot:
    """A simple NOT (one event pattern or an OR of them) checked inside the automaton
    (LogCEP 4.3): a negating event arms the runs whose interval is open, a later binding
    confirms or clears it. In a SEQ the interval is (last left event, first right event);
    in an AND it is (first, last event of the block)."""

    index: int
    in_and: bool
    left: int
    """SEQ: bits of the positive variables before the NOT (a binding clears); AND: 0."""
    right: int
    """SEQ: bits after the NOT; AND: bits of the block (a binding confirms)."""
    negs: tuple[_NegVar, ...]
    """Each negated variable (one, or the events of an OR)."""


@dataclass(frozen=True, slots=True)
class _NegVar:
    """A negated variable of a fast NOT and the conjuncts that mention it."""

    bit: int
    slot: int
    preds: tuple[Any, ...]
    need: int
    """Bits of the positive variables the predicates mention."""
    early: bool
    """Can the predicates be decided as soon as the ``need`` variables are bound (no list
    variable, nothing iterated)?"""


class GroupMatcher(NodeRunner):
    """The run loop and the checks of a group plan (same interface as LinearMatcher)."""

    def __init__(self, plan: GroupPlan, options: MatcherOptions = _DEFAULTS) -> None:
        super().__init__()
        self.plan = plan
        self.max_runs = options.max_runs
        self.on_cap = options.on_cap
        self.max_matches_per_call = options.max_matches_per_call
        """The runtime's matches-per-call cap (for messages)."""
        self.truncated_runs = 0
        self.truncated_matches = 0
        self.kernel = None
        self.simple_key = False
        self.slot = dict(plan.layout.var_slots)
        self.npos = len(plan.order)
        self.strict = plan.strategy in (Strategy.STRICT_CONTIGUITY,
                                        Strategy.PARTITION_CONTIGUITY)
        self._init(plan.root)
        self._slots: dict[int, tuple[int, ...]] = {}
        _node_slots(plan.root, self._slots)
        self._open: dict[int, bool] = {}
        self._fills: dict[int, tuple[tuple[int, ...], ...]] = {}
        self.closes = self._needs_close(plan.root, plan.optional_lists)
        """Does a complete run need :meth:`_closures` (an OR / ANY item can match empty, or a
        list variable unbound until its branch is taken may take no event in that branch)?"""
        self.empty_B = tuple(
            None if (v not in plan.layout.list_vars or v in plan.optional_lists) else ()
            for v in plan.layout.var_slots)
        self.neg_bit = {v: 1 << (self.npos + i) for i, v in enumerate(plan.neg_vars)}
        self.iter_slot = {v: plan.layout.var_slots[v] for v in plan.layout.list_vars}
        self.expire_us = plan.window_us
        self.expire_events = plan.window_events
        self._info: dict[Any, tuple[int, bool, bool]] = {}
        self._trans: dict[Any, Any] = {}
        self.memo_ok = not _has_win(plan.root)
        self.dedupe = _group_rep(plan.root)
        self._slot_lists = tuple(v in plan.layout.list_vars for v, _s in sorted(
            plan.layout.var_slots.items(), key=lambda kv: kv[1]))[:self.npos]
        """A repeated group: the same match can be formed twice (dropped, :func:`_dedupe`)."""
        self.bucketed = self.memo_ok and plan.strategy is Strategy.SKIP_TILL_ANY_MATCH
        self.bit = {v: 1 << i for i, v in enumerate(plan.order)}
        self.fast = self._classify_nots() if self.bucketed else {}
        """NOTs checked inside the automaton (by index in ``plan.negations``); the others are
        checked against the history when a match completes."""
        slot = self.slot
        self._slow_sites = tuple(
            (site.index, site.in_and, tuple(slot[v] for v in site.left),
             tuple(slot[v] for v in site.right), site.window,
             tuple(slot[v] for v in site.scope),
             tuple(tuple(slot[v] for v in br) for br in site.branches))
            for site in plan.not_sites if site.index not in self.fast)
        """The NOT sites checked on complete matches (:meth:`_neg_walk`), in the plan's order,
        with variables as slots."""
        self.fast_neg = self.slow_neg = self.free_nots = 0
        for i, blk in enumerate(plan.negations):
            nb = 0
            for v in blk.vars:
                nb |= self.neg_bit[v]
            if i in self.fast:
                self.fast_neg |= nb
                if not blk.preds:
                    self.free_nots |= 1 << i
            else:
                self.slow_neg |= nb
        self.has_trailing = bool(self.slow_neg)
        self.decides_negation = bool(plan.negations) and not self.slow_neg
        """Every NOT (if any) is decided inside the automaton: no history check of complete
        matches (as ``LinearMatcher.decides_negation``)."""
        self._conf: dict[int, int] = {}
        self._clr: dict[int, int] = {}
        for bit in self.bit.values():
            for f in self.fast.values():
                if bit & f.right:
                    self._conf[bit] = self._conf.get(bit, 0) | 1 << f.index
                if bit & f.left:
                    self._clr[bit] = self._clr.get(bit, 0) | 1 << f.index
        self._early = tuple(
            (sum(self.bit[v] for v in p.vars), p.compiled.fn) for p in plan.preds
            if p.iter_var is None and p.general is None and not p.opt_slots and p.vars
            and all(v in self.bit and v not in plan.layout.list_vars for v in p.vars))
        """LogCEP's pending predicates for positive conjuncts (issue 17 item 15): (the bits
        of its variables, its function) for each conjunct over single, always-bound positive
        variables. The bucketed loop evaluates it on the transition that binds the last of
        them, and drops the run at once unless it is TRUE, instead of carrying it to the end
        of an AND block; the complete match checks every conjunct again."""
        self._keys: dict[tuple[Any, int, int], _Key] = {}
        self._nots_memo: dict[int, int] = {}
        self._loop = self._build_loop() if self.bucketed else None

    # -- candidate masks -------------------------------------------------------------------
    def mask_specs(self) -> list[tuple[str | None, Any]]:
        """(type, vectorized predicate) per candidate bit: positive, then negated variables."""
        p = self.plan
        return ([(p.var_types[v], p.masks[v]) for v in p.order]
                + [(p.var_types.get(v), p.masks[v]) for v in p.neg_vars])

    def admit_pending(self, st: GroupState, c: Candidate) -> None:
        """Park a match until its trailing-negation interval has closed."""
        st.pending.append(c)

    def forget(self, c: Candidate) -> None:
        """No bookkeeping to drop."""
        del c

    def dump_state(self, st: GroupState) -> Any:
        """Plain data for a snapshot."""
        runs = st.all_runs()
        if self.bucketed:
            runs = [(r[0].plain(),) + r[1:] for r in runs]
        return (list(runs), list(st.hist), [cand_state(c) for c in st.pending],
                st.last_wpos, st.last_ts)

    def load_state(self, data: Any) -> GroupState:
        """Inverse of :meth:`dump_state`."""
        runs, hist, pending, lw, lt = data
        st = GroupState([], list(hist), [Candidate(*c) for c in pending], lw, lt)
        if self.bucketed:
            for r in runs:
                if len(r) == 6:  # a snapshot from before keys and pending lists
                    bm = 0
                    for v, bit in self.bit.items():
                        if r[1][self.slot[v]] not in (None, ()):
                            bm |= bit
                    r = ((r[0], bm, 0),) + tuple(r[1:]) + ((),)
                nr = (self._key(*r[0]),) + tuple(r[1:])
                st.buckets.setdefault(nr[0], []).append(nr)
        else:
            st.runs = list(runs)
        return st

    def new_state(self) -> GroupState:
        """Fresh per-key state."""
        return GroupState()

    # -- node semantics --------------------------------------------------------------------
    def _expect(self, n: Node, s: Any) -> int:
        """Bits of the variables this state could take next (a run skips other events)."""
        out = 0
        for _s2, bit in self._walk(n, s, -1, _ev_bit, _keep_mark):
            out |= bit
        return out

    def _root_info(self, s: Any) -> tuple[int, bool, bool]:
        """(expected bits, done, alive) of a root state, memoised (states repeat a lot)."""
        got = self._info.get(s)
        if got is None:
            root = self.plan.root
            got = (self._expect(root, s), self._done(root, s), self._alive(root, s))
            if len(self._info) > 200_000:
                self._info.clear()
            self._info[s] = got
        return got

    def _sym_steps(self, n: Node, s: Any, b: int) -> list[tuple[Any, Ev]]:
        """Like :meth:`_steps` without the event: (new state, the leaf that takes it). Valid
        for trees without sub-pattern windows (whose marks depend on the event)."""
        return self._walk(n, s, b, _same_ev, None)

    def _transitions(self, s: Any, b: int) -> tuple[tuple[Any, int, bool, bool, bool], ...]:
        """Memoised root transitions: (new state, slot, is_list, done, alive) per way to take
        an event with candidate bits ``b`` (only the expected bits matter)."""
        key = (s, b)
        got = self._trans.get(key)
        if got is None:
            out = []
            for s2, ev in self._sym_steps(self.plan.root, s, b):
                _x, done, alive = self._root_info(s2)
                out.append((s2, ev.slot, ev.is_list, done, alive))
            got = tuple(out)
            if len(self._trans) > 200_000:
                self._trans.clear()
            self._trans[key] = got
        return got

    # -- keys, fast NOTs and pending predicates (bucketed run loop) -------------------------
    def _classify_nots(self) -> dict[int, _FastNot]:
        """The simple NOTs that can be checked inside the automaton: in a SEQ with a positive
        part on both sides that cannot be empty (so the interval is bounded by bound events
        and no window is involved), or directly in an AND (the plan's
        :class:`~kleene.plan.blocks.NotSite`). Others use the history."""
        plan = self.plan
        fast: dict[int, _FastNot] = {}
        lists = plan.layout.list_vars

        def mask(vars_: tuple[str, ...]) -> int:
            out = 0
            for v in vars_:
                out |= self.bit.get(v, 0)
            return out

        for site in plan.not_sites:
            if not (site.in_and or site.bounded):
                continue
            k = site.index
            blk = plan.negations[k]
            if blk.node is not None:
                continue
            negs = []
            for v in blk.vars:
                # docs/semantics.md 4: the conjuncts that mention this negated variable
                preds = tuple(p for p in blk.preds if v in p.vars)
                need = mask(tuple(x for p in preds for x in p.vars if x in self.bit))
                negs.append(_NegVar(self.neg_bit[v], self.slot[v], preds, need,
                                    decidable_early(preds, lists)))
            fast[k] = _FastNot(k, site.in_and, mask(site.left), mask(site.right), tuple(negs))
        return fast

    def _key(self, s: Any, bm: int, taint: int) -> _Key:
        """The interned bucket key of (state, bound variables, taint)."""
        t = (s, bm, taint)
        k = self._keys.get(t)
        if k is None:
            if len(self._keys) > 200_000:
                self._keys.clear()
            arm = 0
            for f in self.fast.values():
                if (bm & f.right) if f.in_and else (bm & f.left and not bm & f.right):
                    arm |= 1 << f.index
            k = _Key(s, bm, taint, self._root_info(s)[0], arm & ~taint)
            if taint:
                conf = self._conf
                k.dead = all(taint & conf.get(ev.bit, 0)
                             for _s2, ev in self._sym_steps(self.plan.root, s, k.exp))
            self._keys[t] = k
        return k

    def _ktrans(self, key: _Key, b: int) -> tuple[tuple[Any, ...], ...]:
        """Memoised transitions of a key for candidate bits ``b``: (next key or None when the
        run ends, slot, is_list, done, alive, confirmed NOTs, cleared NOTs, NOTs the event
        arms on the new run, bound bits). A binding that confirms a tainted NOT is absent."""
        got = key.trans.get(b)
        if got is not None:
            return got
        out = []
        for s2, ev in self._sym_steps(self.plan.root, key.s, b):
            bit = ev.bit
            conf = self._conf.get(bit, 0)
            if key.taint & conf:
                continue
            clr = self._clr.get(bit, 0)
            _x, done, alive = self._root_info(s2)
            bm2 = key.bm | bit
            k2 = self._key(s2, bm2, key.taint & ~clr) if alive else None
            if k2 is not None and k2.dead:
                alive = False
            arms = 0
            for f in self.fast.values():
                if (key.bm & f.right) if f.in_and else (
                        key.bm & f.left and not key.bm & f.right
                        and not bit & (f.left | f.right)):
                    arms |= 1 << f.index
            step: tuple[Any, ...] = (k2, ev.slot, ev.is_list, done, alive, conf, clr, arms, bm2)
            if self._early:  # then the loop unpacks one more item
                step += (tuple(fn for need, fn in self._early
                               if bit & need and need & ~bm2 == 0),)
            out.append(step)
        got = tuple(out)
        if len(key.trans) > 4096:
            key.trans.clear()
        key.trans[b] = got
        return got

    def _nots_of(self, fb: int) -> int:
        """The fast NOTs (bit per index) an event with negated-candidate bits ``fb`` could
        violate."""
        got = self._nots_memo.get(fb)
        if got is None:
            got = 0
            for f in self.fast.values():
                if any(fb & nv.bit for nv in f.negs):
                    got |= 1 << f.index
            self._nots_memo[fb] = got
        return got

    def _holds(self, nv: _NegVar, B: tuple[Any, ...], q: Rec) -> bool:
        """Would ``q`` bound to ``nv`` make every conjunct that mentions it TRUE?"""
        slot = nv.slot
        return _all_true(nv.preds, B[:slot] + (q,) + B[slot + 1:], self.iter_slot)

    def _arm_run(self, key: _Key, r: tuple[Any, ...], e: Rec, b: int,
                 am: int) -> tuple[Any, ...] | None:
        """Event ``e`` arrives inside the open interval of the NOTs ``am`` of run ``r`` (in
        the bucket of ``key``): taint the run (predicates known TRUE or absent) or park ``e``
        on its pending list (predicates that need variables bound later, LogCEP 4.3).
        Returns the run with its new key first; None: the run is dead."""
        add = am & self.free_nots
        P = r[6]
        rest = am & ~add
        while rest:
            low = rest & -rest
            rest ^= low
            f = self.fast[low.bit_length() - 1]
            for j, nv in enumerate(f.negs):
                if not b & nv.bit:
                    continue
                if nv.early and not nv.need & ~key.bm:
                    if self._holds(nv, r[1], e):
                        add |= low
                        break
                else:
                    P = P + ((f.index, j, e, False),)
        if add & ~key.taint:
            key = self._key(key.s, key.bm, key.taint | add)
            if key.dead:
                return None
        return (key, r[1], r[2], r[3], r[4], r[5], P)

    def _pend_step(self, P: tuple[Any, ...], B: tuple[Any, ...], bm: int, conf: int,
                   clr: int) -> tuple[Any, ...] | None:
        """The pending list after a binding (new bindings ``B``, bound bits ``bm``): entries of
        cleared NOTs go, confirmed ones are decided once their variables are bound. None: a
        pending predicate held, the binding is forbidden."""
        out = []
        for ent in P:
            k, j, q, c = ent
            kb = 1 << k
            if clr & kb:
                continue
            if conf & kb or c:
                nv = self.fast[k].negs[j]
                if nv.early and not nv.need & ~bm:
                    if self._holds(nv, B, q):
                        return None
                    continue
                if not c:
                    ent = (k, j, q, True)
            out.append(ent)
        return tuple(out)

    # -- the run loop ------------------------------------------------------------------------
    def _build_loop(self) -> Callable[..., None]:
        """The bucketed run loop as Python source specialised on the plan's shape (windows,
        list variables, fast NOTs, pending predicates, how matches are completed). Generated
        from booleans and integers of the plan only: no query text, no identifier or literal
        of the query reaches the source; predicates stay function objects."""
        plan = self.plan
        W, CW = self.expire_us, self.expire_events
        lists = not plan.layout.list_vars.isdisjoint(plan.order)  # a positive list variable
        fast = bool(self.fast)
        pend = any(nv.preds for f in self.fast.values() for nv in f.negs)
        simple = not plan.preds and not pend and plan.always_bound
        early = ", early" if self._early else ""
        src: list[str] = []

        def emit(depth: int, *lines: str) -> None:
            src.extend("    " * depth + line for line in lines)

        def bind(depth: int, to: str, B: str) -> None:
            if lists:
                emit(depth, "if is_list:",
                     f"    cur = {B}[slot]",
                     f"    {to} = {B}[:slot] + (((e,) if cur is None else cur + (e,)),) + "
                     f"{B}[slot + 1:]",
                     "else:",
                     f"    {to} = {B}[:slot] + (e,) + {B}[slot + 1:]")
            else:
                emit(depth, f"{to} = {B}[:slot] + (e,) + {B}[slot + 1:]")

        def done(depth: int, nr: str, B: str) -> None:
            emit(depth, "if done:")
            if simple:
                emit(depth + 1, f"rs = {B}[:{self.npos}]",
                     f"out.append(Candidate({B}, min([x[{TS}] for x in rs]), {nr}[3], "
                     f"e[{GPOS}], ets, ewp, tuple(sorted([x[{GPOS}] for x in rs]))))",
                     "nm += 1")
            elif self.closes:
                emit(depth + 1, f"for c in complete_all({nr}, e):",
                     "    out.append(c)",
                     "    nm += 1")
            else:
                emit(depth + 1, f"c = complete({nr}, e)",
                     "if c is not None:",
                     "    out.append(c)",
                     "    nm += 1")

        emit(0, "def process(st, recs, bits, out, max_matches, budget):",
             "    buckets = st.buckets",
             "    hist = st.hist",
             "    nruns = 0",
             "    for lst in buckets.values():",
             "        nruns += len(lst)",
             "    e = None",
             "    try:")
        emit(2, "for e, b in zip(recs, bits, strict=True):")
        if self.slow_neg:
            emit(3, f"if b & {self.slow_neg}:", "    hist.append((e, b))")
        emit(3, f"pb = b & {(1 << self.npos) - 1}")
        if fast:
            emit(3, f"fb = b & {self.fast_neg}",
                 "if not pb and not fb:",
                 "    continue",
                 "fbn = nots_of(fb) if fb else 0")
        else:
            emit(3, "if not pb:", "    continue")
        emit(3, f"ets = e[{TS}]", f"ewp = e[{WPOS}]", f"ecp = e[{CPOS}]", "born = []",
             "nm = 0", "if pb:")
        if W is not None:
            emit(4, f"lim = ets - {int(W)}")
        if CW is not None:
            emit(4, f"limw = ewp - {int(CW)}")
        expired = " or ".join((["{r}[2] < lim"] if W is not None else [])
                              + (["{r}[3] <= limw"] if CW is not None else []))
        emit(4, "dead = None", "for key, lst in buckets.items():")
        if expired:
            emit(5, "if " + expired.format(r="lst[0]") + ":",
                 "    cut = 1",
                 "    n = len(lst)",
                 "    while cut < n and (" + expired.format(r="lst[cut]") + "):",
                 "        cut += 1",
                 "    del lst[:cut]",
                 "    nruns -= cut",
                 "    if not lst:",
                 "        if dead is None:",
                 "            dead = []",
                 "        dead.append(key)",
                 "        continue")
        emit(5, "bb = pb & key.exp",
             "if not bb:",
             "    continue",
             "tr = key.trans.get(bb)",
             "if tr is None:",
             "    tr = ktrans(key, bb)",
             "if not tr:",
             "    continue",
             "for r in lst:")
        if expired:
            # a bucket is not in first-timestamp order (runs arrive from older keys)
            emit(6, "if " + expired.format(r="r") + ":", "    continue")
        emit(6, "B = r[1]")
        if pend:
            emit(6, "P = r[6]")
        emit(6, f"for k2, slot, is_list, done, alive, conf, clr, arms, bm2{early} in tr:")
        bind(7, "B2", "B")
        if self._early:
            emit(7, "if early and not early_ok(early, B2):", "    continue")
        if pend:
            emit(7, "P2 = P",
                 "if P:",
                 "    P2 = pend_step(P, B2, bm2, conf, clr)",
                 "    if P2 is None:",
                 "        continue",
                 "nr = (k2, B2, r[2], r[3], r[4], ecp, P2)")
        else:
            emit(7, "nr = (k2, B2, r[2], r[3], r[4], ecp, ())")
        done(7, "nr", "B2")
        emit(7, "if alive:")
        if fast:
            emit(8, "if arms & fbn:",
                 "    nr = arm_run(k2, nr, e, b, arms & fbn)",
                 "    if nr is None:",
                 "        continue")
        emit(8, "born.append(nr)")
        emit(4, "if dead is not None:",
             "    for key in dead:",
             "        del buckets[key]",
             "bb = pb & key0.exp",
             "if bb:",
             "    tr = key0.trans.get(bb)",
             "    if tr is None:",
             "        tr = ktrans(key0, bb)",
             f"    for k2, slot, is_list, done, alive, conf, clr, arms, bm2{early} in tr:")
        bind(6, "B2", "empty_B")
        if self._early:
            emit(6, "if early and not early_ok(early, B2):", "    continue")
        emit(6, f"nr = (k2, B2, ets, ewp, e[{GPOS}], ecp, ())")
        done(6, "nr", "B2")
        emit(6, "if alive:", "    born.append(nr)")
        if fast:
            emit(3, "if fbn:", "    nruns -= arm_buckets(buckets, e, b, fbn)")
        emit(3, "for nr in born:",
             "    lst = buckets.get(nr[0])",
             "    if lst is None:",
             "        buckets[nr[0]] = [nr]",
             "    else:",
             "        lst.append(nr)",
             "nruns += len(born)",
             "if (nm and (max_matches is not None or budget is not None)) or "
             f"nruns > {_INF if self.max_runs is None else int(self.max_runs)}:",
             "    nruns = caps(st, e, nm, out, max_matches, budget, nruns)")
        emit(1, "finally:",
             "    if e is not None:",
             f"        st.last_ts = e[{TS}]",
             f"        st.last_wpos = e[{WPOS}]")
        ns: dict[str, Any] = {
            "Candidate": Candidate, "ktrans": self._ktrans, "complete": self._complete,
            "complete_all": self._complete_all,
            "pend_step": self._pend_step, "arm_run": self._arm_run,
            "arm_buckets": self._arm_buckets, "nots_of": self._nots_of,
            "caps": self._bucket_caps, "empty_B": self.empty_B, "early_ok": _early_ok,
            "key0": self._key(self.init[id(plan.root)], 0, 0)}
        # generated from the plan's booleans and integers only; helpers are constants in ns
        loop: Callable[..., None] = build("\n".join(src) + "\n", ns, label="groups loop",
                                          entry="process")
        return loop

    def _bucket_caps(self, st: GroupState, e: Rec, nm: int, out: list[Candidate],
                     max_matches: int | None, budget: int | None, nruns: int) -> int:
        """:func:`~.caps.event_caps` for the bucketed loop: cuts the oldest runs when
        truncating; returns the number of live runs."""
        drop = event_caps(self, e, nm, out, max_matches, budget, nruns)
        if not drop:
            return nruns
        keep = st.all_runs()[drop:]
        st.buckets.clear()
        for r in keep:
            st.buckets.setdefault(r[0], []).append(r)
        return len(keep)

    def _arm_buckets(self, buckets: dict[Any, list[tuple[Any, ...]]], e: Rec, b: int,
                     fbn: int) -> int:
        """Arm every bucket whose interval of a NOT in ``fbn`` is open (moved whole when the
        NOTs have no predicates); returns how many runs died."""
        moves = [(key, lst, key.arm & fbn) for key, lst in buckets.items() if key.arm & fbn]
        free = self.free_nots
        died = 0
        for key, _lst, _am in moves:
            del buckets[key]
        for key, lst, am in moves:
            if not am & ~free:
                k2 = self._key(key.s, key.bm, key.taint | am)
                if k2.dead:
                    died += len(lst)
                    continue
                got = buckets.get(k2)
                if got is None:
                    buckets[k2] = lst
                else:
                    got.extend(lst)
                continue
            for r in lst:
                r2 = self._arm_run(key, r, e, b, am)
                if r2 is None:
                    died += 1
                    continue
                got = buckets.get(r2[0])
                if got is None:
                    buckets[r2[0]] = [r2]
                else:
                    got.append(r2)
        return died

    def process(self, st: GroupState, recs: list[Rec], bits: list[int],
                out: list[Candidate], max_matches: int | None,
                budget: int | None = None) -> None:
        """Feed one partition's events in order; complete matches go to ``out``.

        ``budget``: how many matches ``out`` may hold (the matches-per-call cap minus what the
        runtime already buffers); checked after each event (:func:`.caps.over_budget` raises or
        truncates). None: no cap.
        """
        if self.dedupe:
            start = len(out)
            self._process(st, recs, bits, out, max_matches, budget)
            _dedupe(out, start, self._slot_lists)
        else:
            self._process(st, recs, bits, out, max_matches, budget)

    def _process(self, st: GroupState, recs: list[Rec], bits: list[int],
                 out: list[Candidate], max_matches: int | None, budget: int | None) -> None:
        if self._loop is not None:
            self._loop(st, recs, bits, out, max_matches, budget)
            return
        pos_mask = (1 << self.npos) - 1
        strict = self.strict
        W, CW = self.expire_us, self.expire_events
        init = self.init[id(self.plan.root)]
        runs = st.runs
        extend = self._extend
        for e, b in zip(recs, bits, strict=True):
            st.last_ts, st.last_wpos = e[TS], e[WPOS]
            if b & ~pos_mask:
                st.hist.append((e, b))
            if not b & pos_mask:
                continue
            if runs and (W is not None or CW is not None):
                cut = 0
                while cut < len(runs) and (
                        (W is not None and e[TS] - runs[cut][2] > W)
                        or (CW is not None and e[WPOS] - runs[cut][3] >= CW)):
                    cut += 1
                del runs[:cut]
            new: list[tuple[Any, ...]] = []
            nm = 0
            for r in runs:
                if strict and e[CPOS] != r[5] + 1:
                    continue
                if not strict:
                    new.append(r)
                nm += extend(r[0], r[1], r[2], r[3], r[4], e, b, out, new)
            nm += extend(init, self.empty_B, e[TS], e[WPOS], e[GPOS], e, b, out, new)
            if ((max_matches is not None and nm > max_matches)
                    or (budget is not None and len(out) > budget)
                    or (self.max_runs is not None and len(new) > self.max_runs)):
                del new[:event_caps(self, e, nm, out, max_matches, budget, len(new))]
            st.runs = runs = new

    def _extend(self, s: Any, B: tuple[Any, ...], ts0: int, wp0: int, gp0: int, e: Rec,
                b: int, out: list[Candidate], new: list[tuple[Any, ...]]) -> int:
        """Every way the run (state ``s``, bindings ``B``) takes ``e``: complete matches go to
        ``out``, live runs to ``new``; returns the number of matches."""
        info = self._root_info
        exp = info(s)[0]
        if not b & exp:
            return 0
        steps: Any
        if self.memo_ok:
            steps = ((s2, _bind(B, slot, is_list, e))
                     for s2, slot, is_list, _d, _a in self._transitions(s, b & exp))
        else:
            steps = self._steps(self.plan.root, s, e, b, B)
        nm = 0
        for s2, B2 in steps:
            nr = (s2, B2, ts0, wp0, gp0, e[CPOS])
            _x, done, alive = info(s2)
            if done:
                if self.closes:
                    got = self._complete_all(nr, e)
                    out.extend(got)
                    nm += len(got)
                else:
                    c = self._complete(nr, e)
                    if c is not None:
                        out.append(c)
                        nm += 1
            if alive:
                new.append(nr)
        return nm

    def oldest(self, st: GroupState) -> int | None:
        """The smallest position a future match of this key can bind (None: no live run)."""
        return min((r[4] for lst in ([st.runs] + list(st.buckets.values())) for r in lst),
                   default=None)

    def prune(self, st: GroupState) -> None:
        """Drop history no live run or waiting match can need any more."""
        self._prune(st)

    def _needs_close(self, n: Node, optional: frozenset[str]) -> bool:
        """Can the bindings of a complete run differ from its match under ``n`` (filled into
        ``self._open`` per node): an OR / ANY item that can match empty, or a repetition over
        optional list variables that can bind none of them (it may repeat zero times, or an
        OR / ANY inside it leaves some unbound)?"""
        if isinstance(n, Ev):
            got = False
        elif isinstance(n, Win):
            got = self._needs_close(n.body, optional)
        elif isinstance(n, Rep):
            inner = self._needs_close(n.body, optional)
            got = inner or (any(v in optional for v in _node_vars(n))
                            and (n.min == 0 or _has_any(n.body)))
        else:
            kids = [self._needs_close(i, optional) for i in n.items]
            got = any(kids) or (isinstance(n, AnyK) and any(
                self._done(i, self.init[id(i)]) for i in n.items))
        self._open[id(n)] = got
        return got

    def _took(self, n: Node, B: tuple[Any, ...]) -> bool:
        """Did ``n`` bind an event in ``B``?"""
        return any(B[s] is not None and B[s] != () for s in self._slots[id(n)])

    def _closures(self, n: Node, B: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Every way the satisfied node ``n`` closes over the bindings ``B`` of a complete run
        (docs/semantics.md 2, 3): an OR / ANY chooses its items that bound events plus, to
        make up ``k``, items that bound none (each choice is its own match); the list
        variables of a repetition and of a chosen item become ``()`` when they bound nothing.
        Inside a repetition every list variable is bound, so a repetition closes one way."""
        if not self._open[id(n)]:
            return [B]  # satisfied (the run is complete) and nothing to choose or fill
        if isinstance(n, Win):
            return self._closures(n.body, B)
        if isinstance(n, Rep):
            if n.min > 0 and not self._took(n, B):
                return []
            L = list(B)
            for s in self._slots[id(n)]:
                if L[s] is None:
                    L[s] = ()
            return [tuple(L)]
        if isinstance(n, Seq | And):
            outs = [B]
            for it in n.items:
                outs = [b2 for b1 in outs for b2 in self._closures(it, b1)]
            return outs
        assert isinstance(n, AnyK)  # an event is never open
        taken = [i for i, it in enumerate(n.items) if self._took(it, B)]
        spare = [i for i, it in enumerate(n.items)
                 if i not in taken and self._done(it, self.init[id(it)])]
        if len(taken) > n.k:
            return []
        out: list[tuple[Any, ...]] = []
        for extra in itertools.combinations(spare, n.k - len(taken)):
            outs = [B]
            for i in sorted(taken + list(extra)):
                outs = [b2 for b1 in outs for b2 in self._closures(n.items[i], b1)]
            out.extend(outs)
        return out

    def _complete_all(self, r: tuple[Any, ...], e: Rec) -> list[Candidate]:
        """The matches of a complete run: one per way it closes (:meth:`_closures`). The
        ways depend only on which positive variables took an event: memoised per that mask,
        as the slots each way sets to ``()``."""
        B0 = r[1]
        mask = 0
        for s in range(self.npos):
            x = B0[s]
            if x is not None and x != ():
                mask |= 1 << s
        fills = self._fills.get(mask)
        if fills is None:
            fills = tuple(tuple(s for s in range(self.npos) if B0[s] is None and b[s] == ())
                          for b in self._closures(self.plan.root, B0))
            self._fills[mask] = fills
        out = []
        for fill in fills:
            B = B0
            if fill:
                L = list(B0)
                for s in fill:
                    L[s] = ()
                B = tuple(L)
            c = self._complete(r[:1] + (B,) + r[2:], e)
            if c is not None:
                out.append(c)
        return out

    def _complete(self, r: tuple[Any, ...], e: Rec) -> Candidate | None:
        B = r[1]
        for p in self.plan.preds:
            it = p.iter_var
            if not p.check_all(B, None if it is None else self.iter_slot[it]):
                return None
        if len(r) > 6 and r[6]:
            # pending predicates of negating events inside a confirmed interval: decided now
            for k, j, q, confirmed in r[6]:
                if confirmed and self._holds(self.fast[k].negs[j], B, q):
                    return None
        recs = self._records(B)
        return Candidate(B, min(x[TS] for x in recs), r[3], e[GPOS], e[TS], e[WPOS],
                         tuple(sorted(x[GPOS] for x in recs)))

    def _records(self, B: tuple[Any, ...]) -> list[Rec]:
        """The events a match binds (positive variables)."""
        return _flatten(B[: self.npos])

    def _prune(self, st: GroupState) -> None:
        if len(st.hist) < 256:
            return
        lookback = None
        if self.plan.max_window_us is not None:
            lookback = st.last_ts - 2 * self.plan.max_window_us
        elif self.plan.max_window_events is None:
            return
        oldest = min([r[4] for lst in ([st.runs] + list(st.buckets.values())) for r in lst]
                     + [c.positions[0] for c in st.pending],
                     default=_INF)
        keep = []
        for rec, b in st.hist:
            if rec[GPOS] >= oldest or (lookback is not None and rec[TS] >= lookback) or (
                    self.plan.max_window_events is not None
                    and rec[WPOS] >= st.last_wpos - 2 * self.plan.max_window_events):
                keep.append((rec, b))
        st.hist = keep

    # -- negation ----------------------------------------------------------------------------
    @staticmethod
    def _bound(slots: tuple[int, ...], B: tuple[Any, ...]) -> list[Rec]:
        """The events bound at ``slots``."""
        return _flatten([B[s] for s in slots])

    def _forbidden(self, st: GroupState, nblock: int, B: tuple[Any, ...],
                   inside: Any) -> bool:
        blk = self.plan.negations[nblock]
        if blk.node is not None:
            return self._forbidden_pattern(st, nblock, B, inside)
        hist = st.hist
        start, stop = 0, len(hist)
        lo, hi = getattr(inside, "lo", None), getattr(inside, "hi", None)
        if lo is not None:
            start = bisect.bisect_right(hist, lo, key=_gpos_of)
        if hi is not None:
            stop = bisect.bisect_left(hist, hi, lo=start, key=_gpos_of)
        for j in range(start, stop):
            rec, b = hist[j]
            if not inside(rec):
                continue
            for v in blk.vars:
                if not b & self.neg_bit[v]:
                    continue
                slot = self.slot[v]
                if _all_true([p for p in blk.preds if v in p.vars],
                             B[:slot] + (rec,) + B[slot + 1:], self.iter_slot):
                    return True
        return False

    def _forbidden_pattern(self, st: GroupState, nblock: int, B: tuple[Any, ...],
                           inside: Any) -> bool:
        """Is there an occurrence of the negated sub-pattern inside the interval whose
        conjuncts hold with the match?"""
        blk = self.plan.negations[nblock]
        assert blk.node is not None
        mask = 0
        for v in blk.vars:
            mask |= self.neg_bit[v]
        B0 = list(B)
        for v in blk.vars:
            B0[self.slot[v]] = () if v in self.plan.layout.list_vars else None
        recs = [(rec, b) for rec, b in st.hist if b & mask and inside(rec)]
        return self.occurs(blk.node, recs, tuple(B0), blk.preds, self.iter_slot)

    def _neg_walk(self, st: GroupState, c: Candidate, final: bool) -> tuple[bool, int | None]:
        """Check every NOT not decided in the automaton; returns (ok, deadline) where deadline
        is when an open trailing interval closes (a ts for time windows, -wpos-1 encoded for
        count windows)."""
        B = c.B
        bound = self._bound
        deadline: list[int] = []
        for k, in_and, left, right, win, scope, branches in self._slow_sites:
            if branches and not all(any(B[s] is not None for s in br) for br in branches):
                continue  # in an OR / ANY branch the match did not take
            if in_and:
                mine = bound(right, B)
                if mine and self._forbidden(st, k, B, _Between(min(x[GPOS] for x in mine),
                                                               max(x[GPOS] for x in mine))):
                    return False, (max(deadline) if deadline else None)
                continue
            inside = _interval(bound(left, B), bound(right, B), win, scope, B, final, deadline)
            if self._forbidden(st, k, B, inside):
                return False, (max(deadline) if deadline else None)
        return True, (max(deadline) if deadline else None)

    def negation_ok(self, st: GroupState, c: Candidate) -> bool:
        """Check NOTs whose interval is already complete; mark matches that must wait."""
        if not self.slow_neg:
            return True
        ok, deadline = self._neg_walk(st, c, final=False)
        c.trailing = () if deadline is None else (deadline,)
        return ok

    def needs_trailing(self, c: Candidate) -> bool:
        """Does the match wait for a trailing NOT interval to close?"""
        return bool(c.trailing)

    def match_preds_ok(self, c: Candidate) -> bool:
        """Conjuncts were checked at completion."""
        del c
        return True

    def release_pending(self, st: GroupState, watermark: int | None) -> list[Candidate]:
        """Matches whose trailing interval has closed, re-checked against the full history."""
        if not st.pending:
            return []
        done, keep = [], []
        for c in st.pending:
            d = c.trailing[0]
            closed = watermark is None or (
                d < 0 and st.last_wpos >= -d - 2) or (0 <= d < _INF and watermark > d)
            if closed:
                if self._neg_walk(st, c, final=True)[0]:
                    done.append(c)
            else:
                keep.append(c)
        st.pending = keep
        return done

    def sort_key(self, c: Candidate) -> tuple[Any, ...]:
        """Output order (docs/semantics.md 10)."""
        return output_sort_key(c, self.plan.order, self.slot)

    def neg_event(self, st: GroupState, e: Rec, b: int) -> None:
        """History of possible negating events (kept for the NOT checks)."""
        st.hist.append((e, b))


def _early_ok(fns: tuple[Any, ...], B: tuple[Any, ...]) -> bool:
    """Every early conjunct is TRUE on the bindings ``B``."""
    for fn in fns:
        if fn(B, 0) is not True:
            return False
    return True


def _interval(left: list[Rec], right: list[Rec], win: tuple[int, bool] | None,
              scope: tuple[int, ...], B: tuple[Any, ...], final: bool,
              deadline: list[int]) -> Any:
    """The NOT interval of a SEQ item as a test on a record: after the ``left`` events, before
    the ``right`` ones; an open end is bounded by the window ``win`` over the events bound at
    ``scope`` (docs/semantics.md 4). An end still open to the future appends when it closes
    to ``deadline`` (unless ``final``). ``lo``/``hi`` bound the history scan."""
    lo = max((x[GPOS] for x in left), default=None)
    hi = min((x[GPOS] for x in right), default=None)
    first = last = None
    if win is not None and (lo is None or hi is None):
        recs = _flatten([B[s] for s in scope])
        first = min(recs, key=_gpos_rec) if recs else None
        last = max(recs, key=_gpos_rec) if recs else None
    if hi is None and not final:
        if win is None or first is None:
            deadline.append(_INF)
        elif win[1]:
            deadline.append(-(first[WPOS] + win[0]) - 1)
        else:
            deadline.append(first[TS] + win[0])

    def inside(q: Rec) -> bool:
        if lo is not None:
            if q[GPOS] <= lo:
                return False
        elif win is not None and last is not None:
            if win[1] and not last[WPOS] - q[WPOS] < win[0]:
                return False
            if not win[1] and q[TS] < last[TS] - win[0]:
                return False
        if hi is not None:
            if q[GPOS] >= hi:
                return False
        elif win is not None and first is not None:
            if win[1] and not q[WPOS] - first[WPOS] < win[0]:
                return False
            if not win[1] and q[TS] > first[TS] + win[0]:
                return False
        return True
    inside.lo = lo  # type: ignore[attr-defined]
    inside.hi = hi  # type: ignore[attr-defined]
    return inside


def _gpos_rec(x: Rec) -> int:
    return int(x[GPOS])


class _Between:
    """Strictly between two positions (NOT inside AND); ``lo``/``hi`` bound the history scan."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: int, hi: int) -> None:
        self.lo = lo
        self.hi = hi

    def __call__(self, q: Rec) -> bool:
        return bool(self.lo < q[GPOS] < self.hi)


def _gpos_of(item: tuple[Rec, int]) -> int:
    return int(item[0][GPOS])


def _node_slots(n: Node, out: dict[int, tuple[int, ...]]) -> tuple[int, ...]:
    """The binding slots of the variables under each node (by ``id``), filled into ``out``."""
    if isinstance(n, Ev):
        got: tuple[int, ...] = (n.slot,)
    elif isinstance(n, Rep | Win):
        got = _node_slots(n.body, out)
    else:
        got = tuple(s for i in n.items for s in _node_slots(i, out))
    out[id(n)] = got
    return got


def _node_vars(n: Node) -> list[str]:
    """The variables under ``n``."""
    if isinstance(n, Ev):
        return [n.var]
    if isinstance(n, Rep | Win):
        return _node_vars(n.body)
    return [v for i in n.items for v in _node_vars(i)]


def _has_any(n: Node) -> bool:
    """Is there an OR / ANY under ``n``?"""
    if isinstance(n, AnyK):
        return True
    if isinstance(n, Ev):
        return False
    if isinstance(n, Rep | Win):
        return _has_any(n.body)
    return any(_has_any(i) for i in n.items)


def _group_rep(n: Node) -> bool:
    """Does ``n`` repeat a group (a repetition whose body is not one event)? Two ways of
    splitting the same events into repetitions then bind the same lists: one match
    (docs/semantics.md 2)."""
    if isinstance(n, Ev):
        return False
    if isinstance(n, Rep):
        return not isinstance(n.body, Ev) or _group_rep(n.body)
    if isinstance(n, Win):
        return _group_rep(n.body)
    return any(_group_rep(i) for i in n.items)


def _dedupe(out: list[Candidate], start: int, lists: tuple[bool, ...]) -> None:
    """Drop from ``out[start:]`` a candidate that binds exactly the events of an earlier
    one (the same match formed twice), keeping the first. ``lists``: per positive slot,
    whether it holds a list of records."""
    seen: set[tuple[Any, ...]] = set()
    kept = []
    for c in out[start:]:
        key = tuple(None if x is None else (tuple(r[GPOS] for r in x) if is_list else x[GPOS])
                    for x, is_list in zip(c.B, lists, strict=False))
        if key not in seen:
            seen.add(key)
            kept.append(c)
    out[start:] = kept


def _has_win(n: Node) -> bool:
    if isinstance(n, Win):
        return True
    if isinstance(n, Ev):
        return False
    if isinstance(n, Rep):
        return _has_win(n.body)
    return any(_has_win(i) for i in n.items)


def _ev_bit(ev: Ev) -> int:
    return ev.bit


def _same_ev(ev: Ev) -> Ev:
    return ev


def _keep_mark(w: Win, m: Any) -> Any:
    del w
    return 0 if m is None else m


__all__ = ["GroupMatcher", "GroupState"]
