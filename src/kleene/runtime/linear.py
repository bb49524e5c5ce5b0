"""The NFA^b run loop over a linear plan (SEQ of single, Kleene and choice components).

A *run* is one partial match: the component it is in (``k``), how many events that component
holds (``n``) and its bindings ``B``. Bindings are shared, not copied: a new run created by a
take edge builds a new ``B`` tuple whose entries are the *same* record objects as its parent's
(the SASE+ shared buffer, with the tuple as the version pointer), so an event's record is stored
once however many runs bind it; only the small tuples that point at records are new per run.

For each event, every live run tries its edges:

* **take** (Kleene loop): append the event to the open Kleene component;
* **proceed**: close the current component (count >= min, closing predicates) and take the
  event as the first of the next component (or of a later one reachable through ``*``
  components, which then bind nothing);
* **ignore**: keep the run unchanged -- always under skip-till-any-match, only when no edge
  could be taken under skip-till-next-match, never under the contiguity strategies.

Runs are kept in creation order, which is also the order of their first timestamps, so expired
runs are a prefix of the list and are dropped without scanning the rest.
"""

from __future__ import annotations

import bisect
from dataclasses import field
from typing import Any

from ..events import Match
from ..frozen import dataclass
from ..plan.layout import CPOS, GPOS, ID, TS, WPOS
from ..plan.linear import CompKind, NegGuard, Plan
from ..plan.predicate import Predicate
from ..vocab import Strategy
from .candidate import Candidate, cand_state, output_sort_key
from .caps import event_caps
from .matcher import MatcherOptions
from .nodes import NodeRunner, decidable_early

Rec = tuple[Any, ...]


#: A run is a plain tuple ``(k, n, B, first_ts, first_wpos, first_gpos, last_cpos, subs, P)``:
#: component, events in it, bindings, where it started, its last contiguity position, the
#: first-event marks of its sub-pattern windows and its pending NOT predicates ``P`` (a tuple
#: of ``(guard index, negating record)``; see :class:`FastNot`). The generated kernel omits
#: ``subs``, and ``P`` unless the plan has a NOT decided in the automaton with predicates.
Run = tuple[Any, ...]


_DEFAULTS = MatcherOptions()


@dataclass(frozen=True, slots=True)
class FastNot:
    """A middle NOT of one event decided inside the automaton (LogCEP 4.3, docs/engine.md).

    Its interval is bounded by bound events on both sides (a positive part that cannot be empty
    before and after it in its SEQ), so it opens when a run takes its last left event and is
    decided when the run takes its first right event (*confirmation*): the negating events in
    between are found by bisection in the partition's time-ordered history of the NOT's events.
    Without predicates any such event kills the new run. With predicates, an event whose
    conjuncts can already be decided (every positive variable they mention is bound and none is
    a list variable) kills it when they are TRUE; otherwise the event goes on the run's pending
    list and is decided as soon as those variables are bound, at the latest when the match
    completes.
    """

    gi: int
    """Index in ``plan.negations``."""
    guard: NegGuard
    need: tuple[int, ...]
    """Slots of the positive variables the predicates mention."""
    early: bool
    """Decidable as soon as the ``need`` slots are bound (no list variable, no iteration)."""


@dataclass(slots=True)
class PartState:
    """Per-key runtime state: live runs, negation history and matches waiting on a trailing
    negation."""

    runs: list[Run] = field(default_factory=list)
    neg_hist: list[list[Rec]] = field(default_factory=list)
    pending: list[Candidate] = field(default_factory=list)
    last_wpos: int = -1
    last_ts: int = -(2 ** 62)
    expired: list[Run] = field(default_factory=list)
    """Dead-end partial matches waiting for the watermark to pass their expiry (EMIT
    TIMEOUTS only; docs/semantics.md 20)."""
    killer: int | None = None
    """Contiguity strategies with EMIT TIMEOUTS: the time of the event of the key's
    contiguity sub-stream right after the runs' last event, once the runtime has seen it."""


class LinearMatcher:
    """Evaluates a :class:`Plan` one partition at a time."""

    def __init__(self, plan: Plan, options: MatcherOptions = _DEFAULTS, *,
                 count_mode: bool = False, timeouts: bool = False) -> None:
        """``options``: the caps (constructor data, docs/engine.md); ``count_mode``: whether
        this matcher counts instead of building candidates (the plan decides it from
        ``options.count_only`` and what the query's output needs); ``timeouts``: EMIT
        TIMEOUTS (the interpreter only: no kernel is set)."""
        self.plan = plan
        comps = plan.components
        self.ncomp = len(comps)
        self.max_runs = options.max_runs
        self.on_cap = options.on_cap
        self.truncated_runs = 0
        self.truncated_matches = 0
        self.max_matches: int | None = options.max_matches_per_event
        """The matches-per-event cap baked into the generated kernel."""
        self.max_matches_per_call: int | None = options.max_matches_per_call
        """The runtime's matches-per-call cap (for messages; the kernel checks the ``budget``
        argument only when it is not None)."""
        self.count_mode = count_mode
        """Count complete matches (``counted``) instead of building candidates (kernel)."""
        self.created = 0
        """Temporary (partial or complete) matches created; the interpreter counts them,
        the generated kernel does not (``use_kernel=False`` to measure)."""
        self.copied = 0
        """Of those, the ones copied from an existing partial match (not started anew)."""
        self.counted = 0
        self.output_keys = False
        """The kernel's direct entries carry the output-order key (docs/semantics.md 10)."""
        self.direct: tuple[str, Any] | None = None
        """(query name, bindings builder) when the kernel emits finished output entries
        ``(sort key, Match, None)`` instead of candidates (no NOT, policies or RETURN)."""
        # the per-variable part of the output key follows from the sorted positions when
        # every variable is always bound and at most one of them is a list
        self.simple_key = all(c.kind is not CompKind.CHOICE and c.min > 0
                              for c in plan.components) and sum(
            c.kind is CompKind.KLEENE for c in plan.components) <= 1
        self.kernel: Any = None
        """The generated transition function (kleene.runtime.kernel), when the plan allows."""
        self.kernels: tuple[Any, Any] | None = None
        """(guarded, plain) kernels when the plan's comparisons need a bool-vs-number guard:
        :meth:`plain_values` picks one."""
        self.timeouts = timeouts
        self.kmap: dict[int, int] = {}
        """Contiguity strategies with EMIT TIMEOUTS: contiguity position -> time of the
        events of the current key's sub-stream in the chunk being matched (set by the
        runtime)."""
        """EMIT TIMEOUTS (docs/semantics.md 20): the interpreter (never the kernel) marks a
        skip-till-any run that took an event as *extended* (a 10th tuple entry) and keeps
        dead ends in ``PartState.expired``; :meth:`expired_partials` hands them over."""
        order = plan.order
        self.bit = {v: 1 << i for i, v in enumerate(order)}
        self.nvars = len(plan.layout.var_slots)
        # per component: list of (var, bit, slot, is_list, take preds)
        self.comp_vars: list[list[tuple[str, int, int, bool, tuple[Predicate, ...]]]] = []
        for c in comps:
            self.comp_vars.append([(v, self.bit[v], plan.vars[v].slot, plan.vars[v].is_list,
                                    plan.vars[v].take) for v in c.vars])
        self.slot = dict(plan.layout.var_slots)
        self.kind = [c.kind for c in comps]
        self.cmin = [c.min for c in comps]
        self.cmax = [c.max if c.max is not None else 1 << 62 for c in comps]
        # windows touching each component: (index in subs, amount, count)
        self.win = plan.windows
        self.comp_windows: list[list[int]] = [
            [wi for wi, w in enumerate(plan.windows) if w.first <= ci <= w.last]
            for ci in range(self.ncomp)]
        # the proceed targets from component k (k = -1: begin): j in k+1.. while skipped ones
        # are nullable
        self.targets: list[list[int]] = []
        for k in range(-1, self.ncomp):
            t = []
            for j in range(k + 1, self.ncomp):
                t.append(j)
                if not comps[j].nullable:
                    break
            self.targets.append(t)
        # can the pattern accept after component k (all later components nullable)?
        self.accept_after = [all(c.nullable for c in comps[k + 1:]) for k in range(self.ncomp)]
        self.strategy = plan.strategy
        self.strict = plan.strategy in (Strategy.STRICT_CONTIGUITY,
                                        Strategy.PARTITION_CONTIGUITY)
        self.stnm = plan.strategy is Strategy.SKIP_TILL_NEXT_MATCH
        self.expire_us = plan.window_us
        self.expire_events = plan.window_events
        self.empty_B: tuple[Any, ...] = tuple(() if v in plan.layout.list_vars else None
                             for v in plan.layout.var_slots)
        self.has_trailing = any(all(c.nullable for c in comps[g.gap:]) for g in plan.negations)
        # candidate bits: positive variables, then each guard's variable(s) (a NOT of a
        # sub-pattern has one per event inside it), in the layout's order
        self.neg_bits: list[int] = []
        nb = len(order)
        for g in plan.negations:
            width = len(g.body) if g.node is not None else 1
            self.neg_bits.append(((1 << width) - 1) << nb)
            nb += width
        self.nodes: NodeRunner | None = None
        if any(g.node is not None for g in plan.negations):
            self.nodes = NodeRunner()
        self.iter_slot = {v: plan.layout.var_slots[v] for v in plan.layout.list_vars}
        # NOTs decided inside the automaton (FastNot); the others keep the history check
        self.fast: dict[int, FastNot] = {}
        lists = plan.layout.list_vars
        for gi, g in enumerate(plan.negations):
            if g.node is not None or not any(
                    not comps[i].nullable for i in range(g.seq_lo, g.gap)) or not any(
                    not comps[i].nullable for i in range(g.gap, g.seq_hi)):
                continue
            need = sorted({plan.layout.var_slots[v] for p in g.preds for v in p.vars
                           if v in plan.vars})
            self.fast[gi] = FastNot(gi, g, tuple(need), decidable_early(g.preds, lists))
        self.pend = any(f.guard.preds for f in self.fast.values())
        """Runs carry a pending list (some NOT decided in the automaton has predicates)."""
        self.decides_negation = bool(plan.negations) and len(self.fast) == len(plan.negations)
        """Every NOT is decided inside the automaton: complete matches need no check."""
        # the fast NOTs whose interval closes when a run proceeds from component k into j
        self.confirm: dict[tuple[int, int], tuple[FastNot, ...]] = {}
        for k in range(self.ncomp):
            for j in range(k + 1, self.ncomp):
                fs = tuple(f for f in self.fast.values() if k < f.guard.gap <= j)
                if fs:
                    self.confirm[(k, j)] = fs
        self.close_preds = [tuple(p for v in c.vars for p in plan.vars[v].close) for c in comps]

    # ---------------------------------------------------------------------------------------
    def mask_specs(self) -> list[tuple[str | None, Any]]:
        """(type, vectorized predicate) per candidate bit: positive variables, then NOTs."""
        p = self.plan
        out: list[tuple[str | None, Any]] = [(p.vars[v].type, p.vars[v].mask) for v in p.order]
        for g in p.negations:
            if g.node is not None:
                out.extend((t, m) for _v, t, m in g.body)
            else:
                out.append((g.type, g.mask))
        return out

    def admit_pending(self, st: PartState, c: Candidate) -> None:
        """Park a match until its trailing-negation window has passed."""
        st.pending.append(c)

    def forget(self, c: Candidate) -> None:
        """No bookkeeping to drop."""
        del c

    def dump_state(self, st: PartState) -> Any:
        """Plain data for a snapshot."""
        state = (list(st.runs), st.neg_hist, [cand_state(c) for c in st.pending],
                 st.last_wpos, st.last_ts)
        return (*state, list(st.expired), st.killer) if self.timeouts else state

    def load_state(self, data: Any) -> PartState:
        """Inverse of :meth:`dump_state`."""
        runs, hist, pending, lw, lt = data[:5]
        width = 9 if self.kernel is None else (8 if self.pend else 7)
        # a snapshot from before runs carried pending lists: none pending
        runs = [r + ((),) if len(r) == width - 1 else r for r in runs]
        return PartState(list(runs), [list(h) for h in hist],
                         [Candidate(*c) for c in pending], lw, lt,
                         list(data[5]) if len(data) > 5 else [],
                         data[6] if len(data) > 6 else None)

    def new_state(self) -> PartState:
        """Fresh per-key state."""
        return PartState(neg_hist=[[] for _ in self.plan.negations])

    def _check_take(self, preds: tuple[Predicate, ...], B: tuple[Any, ...], v: str, n: int,
                    is_list: bool) -> bool:
        for p in preds:
            if p.opt_slots and p.skipped(B):
                continue
            if p.general is not None:
                if not p.check_all(B, None):
                    return False
                continue
            it = p.iter_var
            if it is None:
                if is_list and p.abs_need != n:
                    continue
                if p.compiled.fn(B, 0) is not True:
                    return False
            elif it == v:
                i = n - 1
                if p.prev and i == 0:
                    continue
                if p.compiled.fn(B, i) is not True:
                    return False
            elif not p.check_all(B, self.iter_slot[it]):
                return False
        return True

    def _close_ok(self, k: int, B: tuple[Any, ...], n: int) -> bool:
        """Can component k close holding n events (count and closing predicates)?"""
        if n < self.cmin[k]:
            return False
        for p in self.close_preds[k]:
            if not p.check_all(B, self.iter_slot.get(p.iter_var) if p.iter_var else None):
                return False
        return True

    def _window_ok(self, comp: int, subs: tuple[Any, ...], e: Rec) -> tuple[Any, ...] | None:
        """Check the windows covering ``comp`` when ``e`` is taken; returns the updated
        per-window first-event marks, or None when a window is exceeded."""
        wl = self.comp_windows[comp]
        if not wl:
            return subs
        out = list(subs)
        for wi in wl:
            w = self.win[wi]
            first = subs[wi]
            if w.count:
                if first is None:
                    out[wi] = e[WPOS]
                elif e[WPOS] - first >= w.amount:
                    return None
            else:
                if first is None:
                    out[wi] = e[TS]
                elif e[TS] - first > w.amount:
                    return None
        return tuple(out)

    def _options(self, r: Run | None, e: Rec, bits: int) -> list[Run]:
        """Every run that results from taking ``e`` (take loop and proceed edges)."""
        out: list[Run] = []
        B: tuple[Any, ...]
        if r is None:
            k, n, B, subs = -1, 0, self.empty_B, (None,) * len(self.win)
        else:
            k, n, B, subs = r[0], r[1], r[2], r[7]
        # take loop on an open Kleene component
        if k >= 0 and self.kind[k] is CompKind.KLEENE and n < self.cmax[k]:
            v, bit, slot, _is_list, preds = self.comp_vars[k][0]
            if bits & bit:
                subs2 = self._window_ok(k, subs, e)
                if subs2 is not None:
                    B2 = B[:slot] + (B[slot] + (e,),) + B[slot + 1:]
                    if self._check_take(preds, B2, v, n + 1, True):
                        assert r is not None
                        out.append((k, n + 1, B2, r[3], r[4], r[5], e[CPOS], subs2, r[8]))
        # proceed edges
        if k >= 0 and not self._close_ok(k, B, n):
            return out
        Bp = B
        for j in self.targets[k + 1]:
            for v, bit, slot, is_list, preds in self.comp_vars[j]:
                if not bits & bit:
                    continue
                subs2 = self._window_ok(j, subs, e)
                if subs2 is None:
                    continue
                B2 = Bp[:slot] + (((e,) if is_list else e),) + Bp[slot + 1:]
                if not self._check_take(preds, B2, v, 1, is_list):
                    continue
                if r is None:
                    out.append((j, 1, B2, e[TS], e[WPOS], e[GPOS], e[CPOS], subs2, ()))
                else:
                    out.append((j, 1, B2, r[3], r[4], r[5], e[CPOS], subs2, r[8]))
            # skipping component j (nullable): it binds nothing and closes empty
            if self.cmin[j] == 0 and not self._close_ok(j, Bp, 0):
                break
        return out

    def _accepts(self, r: Run) -> bool:
        k = r[0]
        if not self.accept_after[k]:
            return False
        if not self._close_ok(k, r[2], r[1]):
            return False
        for j in range(k + 1, self.ncomp):
            if not self._close_ok(j, r[2], 0):
                return False
        return True

    def _alive_after(self, r: Run) -> bool:
        """Could the run still take an event later?"""
        k = r[0]
        return k < self.ncomp - 1 or (self.kind[k] is CompKind.KLEENE and r[1] < self.cmax[k])

    def neg_event(self, st: PartState, e: Rec, b: int) -> None:
        """Record a possible negating event; it may cancel matches waiting on a trailing NOT."""
        for gi, g in enumerate(self.plan.negations):
            if b & self.neg_bits[gi]:
                st.neg_hist[gi].append(e if g.node is None else (e, b))
                if st.pending and gi not in self.fast:
                    self._trailing_kill(st, gi, g, e)

    # ---------------------------------------------------------------------------------------
    def plain_values(self, plain: bool) -> None:
        """The runtime's word on the attribute values this matcher will see, from now on and
        in its state: with ``plain`` no value is a boolean (every attribute column's Arrow type
        is numeric, text, temporal or null), so the kernel without the bool-vs-number guard
        gives the same answers faster. The runtime says ``False`` for good once a column can
        hold booleans (docs/engine.md, "Generated code")."""
        if self.kernels is not None:
            self.kernel = self.kernels[1 if plain else 0]

    def process(self, st: PartState, recs: list[Rec], bits: list[int],
                out: list[Candidate], max_matches: int | None,
                budget: int | None = None) -> None:
        """Feed one partition's events (in order) to its runs; complete matches go to ``out``.

        ``budget``: how many matches ``out`` may hold (the matches-per-call cap minus what the
        runtime already buffers); checked after each event, so ``out`` never holds more than
        ``budget`` on return (:func:`.caps.over_budget` raises or truncates). None: no cap.
        """
        if self.kernel is not None:
            self.kernel(st, recs, bits, out, max_matches, budget)
            return
        runs = st.runs
        negs = self.plan.negations
        strict, stnm = self.strict, self.stnm
        expire_us, expire_ev = self.expire_us, self.expire_events
        pos_bits = (1 << len(self.plan.order)) - 1
        fast = bool(self.fast)
        tout = self.timeouts
        for e, b in zip(recs, bits, strict=True):
            st.last_wpos = e[WPOS]
            st.last_ts = e[TS]
            if negs and b & ~pos_bits:
                self.neg_event(st, e, b)
            if not b & pos_bits:
                continue
            kill = None
            if tout and strict and runs:
                # every run ends at the key's last candidate (cpos c): the event at c + 1
                # kills those it does not extend (docs/semantics.md 20)
                c = runs[0][6]
                kill = e[TS] if e[CPOS] == c + 1 else (
                    st.killer if st.killer is not None else self.kmap.get(c + 1))
            # drop expired runs (a prefix: runs are in first-timestamp order)
            if runs and (expire_us is not None or expire_ev is not None):
                cut = 0
                for r in runs:
                    if (expire_us is not None and e[TS] - r[3] > expire_us) or (
                            expire_ev is not None and e[WPOS] - r[4] >= expire_ev):
                        cut += 1
                    else:
                        break
                if cut:
                    if tout:
                        self._time_out(st, runs[:cut], kill)
                    del runs[:cut]
            new_runs: list[Run] = []
            nm = 0
            for r in runs:
                if strict and e[CPOS] != r[6] + 1:
                    if tout:
                        self._time_out(st, (r,), kill)
                    continue
                opts = self._options(r, e, b)
                if tout and strict and not opts:
                    self._time_out(st, (r,), kill)  # killed by e, inside its window
                self.created += len(opts)
                self.copied += len(opts)
                if not strict and not (stnm and opts):
                    # EMIT TIMEOUTS: a run that took an event is extended (never times out)
                    new_runs.append((*r, True) if tout and opts and len(r) == 9 else r)
                for o in opts:
                    if fast:
                        o2 = self._neg_step(st, r, o, e)
                        if o2 is None:
                            continue  # a NOT decided inside the automaton forbids it
                        o = o2
                    if self._accepts(o) and (not o[8] or self.pending_ok(o[2], o[8])):
                        nm += 1
                        out.append(self._candidate(o, e))
                    elif tout and not self._alive_after(o):
                        # a dead end as soon as it exists (under a contiguity strategy it
                        # stays with the runs until the next event decides it)
                        (new_runs if strict else st.expired).append(o)
                    if self._alive_after(o):
                        new_runs.append(o)
            fresh = self._options(None, e, b)
            self.created += len(fresh)
            for o in fresh:
                if self._accepts(o):
                    nm += 1
                    out.append(self._candidate(o, e))
                elif tout and not self._alive_after(o):
                    (new_runs if strict else st.expired).append(o)
                if self._alive_after(o):
                    new_runs.append(o)
            if ((max_matches is not None and nm > max_matches)
                    or (budget is not None and len(out) > budget)
                    or (self.max_runs is not None and len(new_runs) > self.max_runs)):
                del new_runs[:event_caps(self, e, nm, out, max_matches, budget,
                                         len(new_runs))]
            st.runs = runs = new_runs
            if tout:
                st.killer = None  # the runs now end at e: the event after e is not known

    # ---------------------------------------------------------------------------------------
    # timed-out partial matches (EMIT TIMEOUTS, docs/semantics.md 20)
    def _dead_end(self, r: Run) -> bool:
        """A run that never took another event and is not itself a match."""
        return len(r) == 9 and not self._accepts(r)

    def _time_out(self, st: PartState, runs: Any, kill: int | None) -> None:
        """Park the dead ends among ``runs`` (which can take nothing more); under a contiguity
        strategy only those whose window expired before ``kill``, the time of the event after
        their last one (None: no such event)."""
        W = self.expire_us
        assert W is not None
        st.expired.extend(r for r in runs if self._dead_end(r) and (
            not self.strict or kill is None or r[3] + W < kill))

    def expired_partials(self, st: PartState, watermark: int | None
                         ) -> list[tuple[tuple[Any, ...], Match]]:
        """The timed-out partial matches of this key whose expiry T = first ts + W is below
        ``watermark`` (None: end of stream, all of them), as ``(sort key, Match)`` with the
        key ``(T, last position, first position, ..., per-variable)`` of docs/semantics.md 20."""
        W = self.expire_us
        assert W is not None
        ready: list[Run] = []
        if watermark is None:
            self._time_out(st, st.runs, st.killer)
            ready, st.expired, st.runs = st.expired, [], []
        else:
            if st.expired:
                keep: list[Run] = []
                for r in st.expired:
                    (ready if r[3] + W < watermark else keep).append(r)
                st.expired = keep
            cut = 0
            for r in st.runs:  # runs are in first-timestamp order
                if r[3] + W >= watermark:
                    break
                cut += 1
            if cut:
                before = len(st.expired)  # those not expired yet stay
                self._time_out(st, st.runs[:cut], st.killer)
                ready.extend(st.expired[before:])
                del st.expired[before:]
                del st.runs[:cut]
        return [self._partial_match(r, W) for r in ready]

    def _partial_match(self, r: Run, W: int) -> tuple[tuple[Any, ...], Match]:
        comps = self.plan.components
        B = r[2]
        binds: dict[str, Any] = {}
        gbind: dict[str, tuple[int, ...]] = {}
        recs: list[Rec] = []
        for ci in range(r[0] + 1):
            for v in comps[ci].vars:
                x = B[self.slot[v]]
                if self.plan.vars[v].is_list:
                    recs.extend(x)
                    binds[v] = tuple(y[ID] for y in x)
                    gbind[v] = tuple(y[GPOS] for y in x)
                elif x is not None:
                    recs.append(x)
                    binds[v] = x[ID]
                    gbind[v] = (x[GPOS],)
        pos = sorted(p for g in gbind.values() for p in g)
        ts = [y[TS] for y in recs]
        T = r[3] + W
        key = (T, pos[-1], (pos[0], *pos[-2:0:-1]),
               *((1, *gbind[v]) if v in gbind else (0,) for v in self.plan.order))
        return key, Match(self.plan.name, binds, min(ts), max(ts), {}, T)

    def _candidate(self, r: Run, e: Rec) -> Candidate:
        positions: list[int] = []
        for x in r[2][: len(self.plan.order)]:
            if x is None:
                continue
            if isinstance(x, tuple) and (not x or isinstance(x[0], tuple)):
                positions.extend(y[GPOS] for y in x)
            else:
                positions.append(x[GPOS])
        positions.sort()
        return Candidate(r[2], r[3], r[4], e[GPOS], e[TS], e[WPOS], tuple(positions))

    # ---------------------------------------------------------------------------------------
    # negation decided inside the automaton (FastNot)
    def _last_gpos(self, r: Run) -> int:
        """Position of the last event run ``r`` took (in its current component)."""
        B = r[2]
        for _v, _bit, slot, is_list, _p in self.comp_vars[r[0]]:
            x = B[slot]
            if x is None or x == ():
                continue
            return int((x[-1] if is_list else x)[GPOS])
        raise AssertionError("a run holds an event in its current component")

    def _neg_step(self, st: PartState, r: Run, o: Run, e: Rec) -> Run | None:
        """The new run ``o`` (run ``r`` took ``e``) after its NOTs decided in the automaton:
        None when one forbids it, else ``o`` with its pending list updated."""
        P = r[8]
        fs = self.confirm.get((r[0], o[0])) if o[0] != r[0] else None
        if not P and not fs:
            return o
        B2 = o[2]
        P2 = self.pending_step(B2, P) if P else P
        if P2 is None:
            return None
        if fs:
            P2 = self.confirm_nots(st, fs, self._last_gpos(r), e[GPOS], B2, P2)
            if P2 is None:
                return None
        return o if P2 is P else o[:8] + (P2,)

    def confirm_nots(self, st: PartState, fs: tuple[FastNot, ...], lo: int, hi: int,
                     B2: tuple[Any, ...], P: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """A run takes its first event after the NOTs ``fs`` (position ``hi``; its last event
        before them is at ``lo``): each negating event strictly between them (bisection in the
        NOT's history) forbids the binding ``B2``, is decided now, or goes on the pending list.
        None: forbidden."""
        for f in fs:
            hist = st.neg_hist[f.gi]
            i = bisect.bisect_right(hist, lo, key=_gpos)
            n = len(hist)
            if i == n or hist[i][GPOS] >= hi:
                continue
            g = f.guard
            if not g.preds:
                return None
            decide = f.early and all(B2[s] is not None for s in f.need)
            while i < n:
                q = hist[i]
                if q[GPOS] >= hi:
                    break
                i += 1
                if not decide:
                    P = P + ((f.gi, q),)
                elif self._neg_violates(g, B2, q):
                    return None
        return P

    def pending_step(self, B2: tuple[Any, ...], P: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Decide the pending entries whose variables ``B2`` now binds (None: one holds, the
        binding is forbidden); the rest stay pending."""
        keep = []
        for ent in P:
            f = self.fast[ent[0]]
            if f.early and all(B2[s] is not None for s in f.need):
                if self._neg_violates(f.guard, B2, ent[1]):
                    return None
            else:
                keep.append(ent)
        return P if len(keep) == len(P) else tuple(keep)

    def pending_ok(self, B: tuple[Any, ...], P: tuple[Any, ...]) -> bool:
        """A complete match (bindings ``B``): does no pending entry's predicate hold?"""
        for gi, q in P:
            if self._neg_violates(self.fast[gi].guard, B, q):
                return False
        return True

    # ---------------------------------------------------------------------------------------
    # negation checked on complete matches (history)
    def _bound_in(self, B: tuple[Any, ...], lo: int, hi: int) -> list[Rec]:
        """Records bound by components ``lo..hi-1``."""
        out: list[Rec] = []
        comps = self.plan.components
        for ci in range(lo, hi):
            for v in comps[ci].vars:
                x = B[self.slot[v]]
                if x is None or x == ():
                    continue
                if isinstance(x[0], tuple):
                    out.extend(x)
                else:
                    out.append(x)
        return out

    def _neg_violates(self, g: NegGuard, B: tuple[Any, ...], n: Rec) -> bool:
        slot = self.slot[g.var]
        B2 = B[:slot] + (n,) + B[slot + 1:]
        for p in g.preds:
            if not p.check_all(B2, self.iter_slot.get(p.iter_var) if p.iter_var else None):
                return False
        return True

    def negation_ok(self, st: PartState, c: Candidate) -> bool:
        """docs/semantics.md 4 for every NOT: the interval between the parts of its SEQ, or the
        window's lead-in / tail for a leading / trailing one. A tail that reaches past what has
        been seen makes the match wait (``c.trailing``: (guard, lower gpos, last ts, last
        wpos) per open tail, None meaning unbounded)."""
        trailing: list[tuple[Any, ...]] = []
        fast = self.fast
        for gi, g in enumerate(self.plan.negations):
            if gi in fast:
                continue
            left = self._bound_in(c.B, g.seq_lo, g.gap)
            right = self._bound_in(c.B, g.gap, g.seq_hi)
            lo = max((x[GPOS] for x in left), default=None)
            hi = min((x[GPOS] for x in right), default=None)
            scope = self._bound_in(c.B, g.scope_lo, g.scope_hi + 1) if g.win_amount else []
            first = min(scope, key=lambda x: x[GPOS]) if scope else None
            last = max(scope, key=lambda x: x[GPOS]) if scope else None
            hist = st.neg_hist[gi]
            W = g.win_amount
            rec_of = _first if g.node is not None else _same
            # lower end
            if lo is not None:
                start = bisect.bisect_right(hist, lo, key=lambda r: rec_of(r)[GPOS])
            elif W is not None and last is not None:
                if g.win_count:
                    start = bisect.bisect_left(hist, last[WPOS] - W + 1,
                                               key=lambda r: rec_of(r)[WPOS])
                else:
                    start = bisect.bisect_left(hist, last[TS] - W,
                                               key=lambda r: rec_of(r)[TS])
            else:
                start = 0
            # upper end
            dl_ts = dl_wp = None
            if hi is None and W is not None and first is not None:
                if g.win_count:
                    dl_wp = first[WPOS] + W - 1
                else:
                    dl_ts = first[TS] + W
            # upper end: bisection when the interval ends at a bound event
            stop = len(hist) if hi is None else bisect.bisect_left(
                hist, hi, lo=start, key=lambda r: rec_of(r)[GPOS])
            if g.node is not None:
                inside = []
                for j in range(start, stop):
                    n = hist[j][0]
                    if dl_ts is not None and n[TS] > dl_ts:
                        break
                    if dl_wp is not None and n[WPOS] > dl_wp:
                        break
                    inside.append(hist[j])
                if inside and self._occurs(g, c.B, inside):
                    return False
            elif not g.preds and hi is not None:
                if start < stop:  # any event in the interval negates
                    return False
            else:
                for j in range(start, stop):
                    n = hist[j]
                    if dl_ts is not None and n[TS] > dl_ts:
                        break
                    if dl_wp is not None and n[WPOS] > dl_wp:
                        break
                    if self._neg_violates(g, c.B, n):
                        return False
            if hi is None:
                base = lo if lo is not None else c.last_gpos
                trailing.append((gi, base, dl_ts, dl_wp, W is None))
        c.trailing = tuple(trailing)
        return True

    def needs_trailing(self, c: Candidate) -> bool:
        """Must the match wait for the end of its trailing-negation window?"""
        return bool(c.trailing)

    def match_preds_ok(self, c: Candidate) -> bool:
        """Conjuncts checked on the whole match (none in the linear plan today)."""
        del c
        return True

    def sort_key(self, c: Candidate) -> tuple[Any, ...]:
        """Output order (docs/semantics.md 10). When every component binds at least one event
        and none is a choice, the per-variable part follows from the positions."""
        if self.simple_key:
            return (c.last_gpos, c.positions)
        return output_sort_key(c, self.plan.order, self.slot)

    def _occurs(self, g: NegGuard, B: tuple[Any, ...], pairs: list[tuple[Rec, int]]) -> bool:
        """Does the negated sub-pattern occur over these (record, bits) with the match?"""
        B0 = list(B)
        for v, _t, _m in g.body:
            B0[self.slot[v]] = () if v in self.plan.layout.list_vars else None
        assert self.nodes is not None and g.node is not None
        return self.nodes.occurs(g.node, pairs, tuple(B0), g.preds, self.iter_slot)

    def _trailing_kill(self, st: PartState, gi: int, g: NegGuard, n: Rec) -> None:
        keep = []
        for c in st.pending:
            dead = False
            for tgi, base, dl_ts, dl_wp, _unbounded in c.trailing:
                if tgi != gi or n[GPOS] <= base:
                    continue
                if dl_ts is not None and n[TS] > dl_ts:
                    continue
                if dl_wp is not None and n[WPOS] > dl_wp:
                    continue
                if g.node is not None:
                    # the tail so far (this event included) may now hold an occurrence
                    pairs = [x for x in st.neg_hist[gi] if x[0][GPOS] > base
                             and (dl_ts is None or x[0][TS] <= dl_ts)
                             and (dl_wp is None or x[0][WPOS] <= dl_wp)]
                    if self._occurs(g, c.B, pairs):
                        dead = True
                        break
                    continue
                if self._neg_violates(g, c.B, n):
                    dead = True
                    break
            if not dead:
                keep.append(c)
        st.pending = keep

    def release_pending(self, st: PartState, watermark: int | None) -> list[Candidate]:
        """Matches whose every open tail is over (watermark None: end of stream)."""
        if not st.pending:
            return []
        done: list[Candidate] = []
        keep: list[Candidate] = []
        for c in st.pending:
            closed = watermark is None or all(
                not unbounded and (dl_ts is None or watermark > dl_ts)
                and (dl_wp is None or st.last_wpos >= dl_wp)
                for _gi, _b, dl_ts, dl_wp, unbounded in c.trailing)
            (done if closed else keep).append(c)
        st.pending = keep
        return done

    def oldest(self, st: PartState) -> int | None:
        """The smallest position a future match of this key can bind (None: no live run)."""
        return min((r[5] for r in st.runs), default=None)

    def prune(self, st: PartState) -> None:
        """Drop negation history no live run or waiting match can need any more."""
        self._prune_history(st)

    def _prune_history(self, st: PartState) -> None:
        if not self.plan.negations:
            return
        oldest = min([r[5] for r in st.runs] + [c.positions[0] for c in st.pending],
                     default=None)
        for gi, g in enumerate(self.plan.negations):
            hist = st.neg_hist[gi]
            if len(hist) < 64:
                continue
            rec_of = _first if g.node is not None else _same
            if g.gap == g.seq_lo:
                tw, cw = (None, g.win_amount) if g.win_count else (g.win_amount, None)
                if tw is not None:
                    cut = bisect.bisect_left(hist, st.last_ts - tw,
                                             key=lambda r: rec_of(r)[TS])
                elif cw is not None:
                    cut = bisect.bisect_left(hist, st.last_wpos - cw,
                                             key=lambda r: rec_of(r)[WPOS])
                else:
                    continue
            else:
                if oldest is None:
                    cut = len(hist)
                else:
                    cut = bisect.bisect_left(hist, oldest, key=lambda r: rec_of(r)[GPOS])
                if gi in self.fast and cut < len(hist):
                    # a run whose first event is outside the window dies before it takes
                    # another event, so no confirmation can reach further back
                    if self.expire_us is not None:
                        cut = max(cut, bisect.bisect_left(hist, st.last_ts - self.expire_us,
                                                          key=_ts))
                    if self.expire_events is not None:
                        cut = max(cut, bisect.bisect_left(
                            hist, st.last_wpos + 1 - self.expire_events, key=_wpos))
            if cut:
                del hist[:cut]


def _first(x: Any) -> Any:
    return x[0]


def _gpos(x: Rec) -> int:
    return int(x[GPOS])


def _ts(x: Rec) -> int:
    return int(x[TS])


def _wpos(x: Rec) -> int:
    return int(x[WPOS])


def _same(x: Any) -> Any:
    return x


# Candidate, cand_state, decidable_early and output_sort_key live in .candidate / .nodes and stay
# importable from here.
__all__ = ["Candidate", "FastNot", "LinearMatcher", "PartState", "Run", "cand_state",
           "decidable_early", "output_sort_key"]
