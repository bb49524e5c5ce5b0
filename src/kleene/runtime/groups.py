"""Runs over a :class:`~kleene.plan.groups.GroupPlan`: AND, ANY, OR of sub-patterns, repeated
groups and sub-pattern windows (LogCEP's pushdown automaton: a logical block's state is the
tuple of its children's states and it proceeds when its condition holds).

A run is ``(state, B, first_ts, first_wpos, first_gpos, last_cpos)``. Conjuncts are checked
when a run completes (they may mention variables of any block, bound in any order); one-variable
conjuncts are already in the candidate masks. Negation follows docs/semantics.md 4 over the
partition's history of possible negating events; a match whose NOT interval is open to the
future (a trailing NOT) waits until its window has passed.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from .. import ast
from ..errors import CapacityError
from ..plan.expr import CPOS, GPOS, TS, WPOS
from ..plan.groups import And, AnyK, Ev, GroupPlan, Node, Rep, Seq, Win
from .linear import Candidate, cand_state, output_sort_key

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
    """Live runs grouped by automaton state (skip-till-any with memoised transitions): an
    event is tested once per state, and runs that cannot take it are never touched."""

    def all_runs(self) -> list[tuple[Any, ...]]:
        """Every live run, oldest first."""
        if not self.buckets:
            return self.runs
        out = [r for lst in self.buckets.values() for r in lst]
        out.sort(key=lambda r: (r[2], r[4]))
        return out

    @property
    def neg_hist(self) -> list[tuple[Rec, int]]:
        """Alias used by snapshots."""
        return self.hist

    @neg_hist.setter
    def neg_hist(self, value: list[tuple[Rec, int]]) -> None:
        self.hist = value


class NodeRunner:
    """The semantics of logical-block nodes (init / done / alive / take), shared by the group
    matcher and by the negated sub-patterns of linear plans."""

    def __init__(self) -> None:
        self.init: dict[int, Any] = {}
        self._done_memo: dict[tuple[int, Any], bool] = {}

    def _init(self, n: Node) -> Any:
        if isinstance(n, Ev):
            s: Any = 0
        elif isinstance(n, Seq):
            s = (0, self._init(n.items[0]))
            for it in n.items[1:]:
                self._init(it)
        elif isinstance(n, And | AnyK):
            s = tuple(self._init(i) for i in n.items)
        elif isinstance(n, Rep):
            self._init(n.body)
            s = (0, None)
        else:
            s = (self._init(n.body), None)
        self.init[id(n)] = s
        return s

    def _done(self, n: Node, s: Any) -> bool:
        key = (id(n), s)
        got = self._done_memo.get(key)
        if got is None:
            got = self._done_calc(n, s)
            if len(self._done_memo) > 200_000:
                self._done_memo.clear()
            self._done_memo[key] = got
        return got

    def _done_calc(self, n: Node, s: Any) -> bool:
        if isinstance(n, Ev):
            return bool(s == 1)
        if isinstance(n, Seq):
            idx, cs = s
            if not self._done(n.items[idx], cs):
                return False
            return all(self._done(it, self.init[id(it)]) for it in n.items[idx + 1:])
        if isinstance(n, And):
            return all(self._done(i, x) for i, x in zip(n.items, s, strict=True))
        if isinstance(n, AnyK):
            chosen = 0
            for i, x in zip(n.items, s, strict=True):
                if x != self.init[id(i)]:
                    if not self._done(i, x):
                        return False
                    chosen += 1
            return chosen == n.k
        if isinstance(n, Rep):
            count, cs = s
            if cs is not None:
                if not self._done(n.body, cs):
                    return False
                count += 1
            return bool(count >= n.min)
        return self._done(n.body, s[0])

    def _alive(self, n: Node, s: Any) -> bool:
        """Could this state still take an event?"""
        if isinstance(n, Ev):
            return bool(s == 0)
        if isinstance(n, Seq):
            idx, cs = s
            return idx < len(n.items) - 1 or self._alive(n.items[idx], cs)
        if isinstance(n, And):
            return any(self._alive(i, x) for i, x in zip(n.items, s, strict=True))
        if isinstance(n, AnyK):
            started = sum(1 for i, x in zip(n.items, s, strict=True) if x != self.init[id(i)])
            if started < n.k:
                return True
            return any(self._alive(i, x) for i, x in zip(n.items, s, strict=True)
                       if x != self.init[id(i)])
        if isinstance(n, Rep):
            count, cs = s
            if cs is not None and self._alive(n.body, cs):
                return True
            after = count + (1 if cs is not None else 0)
            return n.max is None or bool(after < n.max)
        return self._alive(n.body, s[0])

    def _steps(self, n: Node, s: Any, e: Rec, b: int, B: tuple[Any, ...]
               ) -> list[tuple[Any, tuple[Any, ...]]]:
        if isinstance(n, Ev):
            if s != 0 or not b & n.bit:
                return []
            slot = n.slot
            if n.is_list:
                cur = B[slot]
                val: Any = (e,) if cur is None else cur + (e,)
            else:
                val = e
            return [(1, B[:slot] + (val,) + B[slot + 1:])]
        if isinstance(n, Seq):
            idx, cs = s
            out = [((idx, s2), B2) for s2, B2 in self._steps(n.items[idx], cs, e, b, B)]
            j, cur = idx, cs
            while j + 1 < len(n.items) and self._done(n.items[j], cur):
                j += 1
                cur = self.init[id(n.items[j])]
                out.extend(((j, s2), B2) for s2, B2 in self._steps(n.items[j], cur, e, b, B))
            return out
        if isinstance(n, And):
            out = []
            for i, (it, x) in enumerate(zip(n.items, s, strict=True)):
                for s2, B2 in self._steps(it, x, e, b, B):
                    out.append((s[:i] + (s2,) + s[i + 1:], B2))
            return out
        if isinstance(n, AnyK):
            started = sum(1 for i, x in zip(n.items, s, strict=True) if x != self.init[id(i)])
            out = []
            for i, (it, x) in enumerate(zip(n.items, s, strict=True)):
                if x == self.init[id(it)] and started >= n.k:
                    continue
                for s2, B2 in self._steps(it, x, e, b, B):
                    out.append((s[:i] + (s2,) + s[i + 1:], B2))
            return out
        if isinstance(n, Rep):
            count, cs = s
            out = []
            if cs is not None:
                out.extend(((count, s2), B2) for s2, B2 in self._steps(n.body, cs, e, b, B))
            if cs is None or self._done(n.body, cs):
                after = count + (1 if cs is not None else 0)
                if n.max is None or after < n.max:
                    out.extend(((after, s2), B2) for s2, B2 in
                               self._steps(n.body, self.init[id(n.body)], e, b, B))
            return out
        cs, mark = s
        out = []
        for s2, B2 in self._steps(n.body, cs, e, b, B):
            m = mark
            if n.count:
                if m is None:
                    m = e[WPOS]
                elif e[WPOS] - m >= n.amount:
                    continue
            else:
                if m is None:
                    m = e[TS]
                elif e[TS] - m > n.amount:
                    continue
            out.append(((s2, m), B2))
        return out

    def _init_of(self, n: Node) -> Any:
        got = self.init.get(id(n))
        return self._init(n) if got is None else got

    def occurs(self, node: Node, records: list[tuple[Rec, int]], B0: tuple[Any, ...],
               preds: tuple[Any, ...], iter_slot: dict[str, int]) -> bool:
        """Is there an occurrence of ``node`` (every assignment, as under skip-till-any-match)
        over ``records`` (in order, with their candidate bits) that makes every predicate
        TRUE, starting from the bindings ``B0``?"""
        runs: list[tuple[Any, tuple[Any, ...]]] = [(self._init_of(node), B0)]
        for rec, b in records:
            grown = []
            for s, Bx in runs:
                for s2, B2 in self._steps(node, s, rec, b, Bx):
                    if self._done(node, s2) and all(
                            p.check_all(B2, None if p.iter_var is None else
                                        iter_slot.get(p.iter_var)) for p in preds):
                        return True
                    if self._alive(node, s2):
                        grown.append((s2, B2))
            runs.extend(grown)
        return False


class GroupMatcher(NodeRunner):
    """The run loop and the checks of a group plan (same interface as LinearMatcher)."""

    def __init__(self, plan: GroupPlan, *, max_runs: int | None = None,
                 on_cap: str = "error") -> None:
        super().__init__()
        self.plan = plan
        self.max_runs = max_runs
        self.on_cap = on_cap
        self.truncated_runs = 0
        self.truncated_matches = 0
        self.kernel = None
        self.simple_key = False
        self.slot = dict(plan.layout.var_slots)
        self.npos = len(plan.order)
        self.strict = plan.strategy in (ast.Strategy.STRICT_CONTIGUITY,
                                        ast.Strategy.PARTITION_CONTIGUITY)
        self._init(plan.root)
        self.empty_B = tuple(
            None if (v not in plan.layout.list_vars or v in plan.optional_lists) else ()
            for v in plan.layout.var_slots)
        self.neg_bit = {v: 1 << (self.npos + i) for i, v in enumerate(plan.neg_vars)}
        self.has_trailing = bool(plan.negations)
        self.iter_slot = {v: plan.layout.var_slots[v] for v in plan.layout.list_vars}
        self.expire_us = plan.window_us
        self.expire_events = plan.window_events
        self.pattern_vars: dict[int, list[str]] = {}
        self._info: dict[Any, tuple[int, bool, bool]] = {}
        self._trans: dict[Any, Any] = {}
        self._sides_cache: dict[tuple[int, int], tuple[list[str], list[str]]] = {}
        self.memo_ok = not _has_win(plan.root)
        self.bucketed = self.memo_ok and plan.strategy is ast.Strategy.SKIP_TILL_ANY_MATCH

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
        return (list(st.all_runs()), list(st.hist), [cand_state(c) for c in st.pending],
                st.last_wpos, st.last_ts)

    def load_state(self, data: Any) -> GroupState:
        """Inverse of :meth:`dump_state`."""
        runs, hist, pending, lw, lt = data
        st = GroupState([], list(hist), [Candidate(*c) for c in pending], lw, lt)
        if self.bucketed:
            for r in runs:
                st.buckets.setdefault(r[0], []).append(r)
        else:
            st.runs = list(runs)
        return st

    def new_state(self) -> GroupState:
        """Fresh per-key state."""
        return GroupState()

    # -- node semantics --------------------------------------------------------------------
    def _expect(self, n: Node, s: Any) -> int:
        """Bits of the variables this state could take next (a run skips other events)."""
        if isinstance(n, Ev):
            return n.bit if s == 0 else 0
        if isinstance(n, Seq):
            idx, cs = s
            out = self._expect(n.items[idx], cs)
            j, cur = idx, cs
            while j + 1 < len(n.items) and self._done(n.items[j], cur):
                j += 1
                cur = self.init[id(n.items[j])]
                out |= self._expect(n.items[j], cur)
            return out
        if isinstance(n, And):
            out = 0
            for i, x in zip(n.items, s, strict=True):
                out |= self._expect(i, x)
            return out
        if isinstance(n, AnyK):
            started = sum(1 for i, x in zip(n.items, s, strict=True) if x != self.init[id(i)])
            out = 0
            for i, x in zip(n.items, s, strict=True):
                if x != self.init[id(i)] or started < n.k:
                    out |= self._expect(i, x)
            return out
        if isinstance(n, Rep):
            count, cs = s
            out = 0
            if cs is not None:
                out |= self._expect(n.body, cs)
            if cs is None or self._done(n.body, cs):
                after = count + (1 if cs is not None else 0)
                if n.max is None or after < n.max:
                    out |= self._expect(n.body, self.init[id(n.body)])
            return out
        return self._expect(n.body, s[0])

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
        if isinstance(n, Ev):
            return [(1, n)] if s == 0 and b & n.bit else []
        if isinstance(n, Seq):
            idx, cs = s
            out = [((idx, s2), ev) for s2, ev in self._sym_steps(n.items[idx], cs, b)]
            j, cur = idx, cs
            while j + 1 < len(n.items) and self._done(n.items[j], cur):
                j += 1
                cur = self.init[id(n.items[j])]
                out.extend(((j, s2), ev) for s2, ev in self._sym_steps(n.items[j], cur, b))
            return out
        if isinstance(n, And):
            out = []
            for i, (it, x) in enumerate(zip(n.items, s, strict=True)):
                for s2, ev in self._sym_steps(it, x, b):
                    out.append((s[:i] + (s2,) + s[i + 1:], ev))
            return out
        if isinstance(n, AnyK):
            started = sum(1 for i, x in zip(n.items, s, strict=True) if x != self.init[id(i)])
            out = []
            for i, (it, x) in enumerate(zip(n.items, s, strict=True)):
                if x == self.init[id(it)] and started >= n.k:
                    continue
                for s2, ev in self._sym_steps(it, x, b):
                    out.append((s[:i] + (s2,) + s[i + 1:], ev))
            return out
        if isinstance(n, Rep):
            count, cs = s
            out = []
            if cs is not None:
                out.extend(((count, s2), ev) for s2, ev in self._sym_steps(n.body, cs, b))
            if cs is None or self._done(n.body, cs):
                after = count + (1 if cs is not None else 0)
                if n.max is None or after < n.max:
                    out.extend(((after, s2), ev) for s2, ev in
                               self._sym_steps(n.body, self.init[id(n.body)], b))
            return out
        raise AssertionError("sub-pattern windows are not memoised")

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

    # -- the run loop ------------------------------------------------------------------------
    def _process_buckets(self, st: GroupState, recs: list[Rec], bits: list[int],
                         out: list[Candidate], max_matches: int | None) -> None:
        """The run loop with runs bucketed by state (skip-till-any / next without contiguity
        and with memoised transitions): the ignore edge keeps runs where they are, so an
        event only visits the states that expect it."""
        pos_mask = (1 << self.npos) - 1
        W, CW = self.expire_us, self.expire_events
        init = self.init[id(self.plan.root)]
        info = self._root_info
        trans = self._transitions
        buckets = st.buckets
        nruns = sum(len(x) for x in buckets.values())
        for e, b in zip(recs, bits, strict=True):
            st.last_ts, st.last_wpos = e[TS], e[WPOS]
            if b & ~pos_mask:
                st.hist.append((e, b))
            if not b & pos_mask:
                continue
            ets, ewp, ecp = e[TS], e[WPOS], e[CPOS]
            born: list[tuple[Any, ...]] = []
            nm = 0
            dead = []
            for s, lst in buckets.items():
                if W is not None or CW is not None:
                    cut = 0
                    n = len(lst)
                    while cut < n and ((W is not None and ets - lst[cut][2] > W) or (
                            CW is not None and ewp - lst[cut][3] >= CW)):
                        cut += 1
                    if cut:
                        del lst[:cut]
                        nruns -= cut
                        if not lst:
                            dead.append(s)
                            continue
                exp = info(s)[0]
                if not b & exp:
                    continue
                tr = trans(s, b & exp)
                if not tr:
                    continue
                for r in lst:
                    # a bucket is not strictly in first-timestamp order (runs arrive from
                    # older states), so the window is also checked here
                    if (W is not None and ets - r[2] > W) or (
                            CW is not None and ewp - r[3] >= CW):
                        continue
                    B = r[1]
                    for s2, slot, is_list, done, alive in tr:
                        if is_list:
                            cur = B[slot]
                            B2 = B[:slot] + (((e,) if cur is None else cur + (e,)),) + \
                                B[slot + 1:]
                        else:
                            B2 = B[:slot] + (e,) + B[slot + 1:]
                        nr = (s2, B2, r[2], r[3], r[4], ecp)
                        if done:
                            c = self._complete(nr, e)
                            if c is not None:
                                out.append(c)
                                nm += 1
                        if alive:
                            born.append(nr)
            for s in dead:
                del buckets[s]
            exp0 = info(init)[0]
            if b & exp0:
                B = self.empty_B
                for s2, slot, is_list, done, alive in trans(init, b & exp0):
                    B2 = B[:slot] + (((e,) if is_list else e),) + B[slot + 1:]
                    nr = (s2, B2, ets, ewp, e[GPOS], ecp)
                    if done:
                        c = self._complete(nr, e)
                        if c is not None:
                            out.append(c)
                            nm += 1
                    if alive:
                        born.append(nr)
            for nr in born:
                lst2 = buckets.get(nr[0])
                if lst2 is None:
                    buckets[nr[0]] = [nr]
                else:
                    lst2.append(nr)
            nruns += len(born)
            if max_matches is not None and nm > max_matches:
                if self.on_cap != "truncate":
                    raise CapacityError(
                        f"query {self.plan.name!r}: event {e[2]!r} completed {nm} matches, "
                        f"more than max_matches_per_event={max_matches}")
                self.truncated_matches += nm - max_matches
                del out[len(out) - (nm - max_matches):]
            if self.max_runs is not None and nruns > self.max_runs:
                if self.on_cap != "truncate":
                    raise CapacityError(
                        f"query {self.plan.name!r}: {nruns} live runs in one partition "
                        f"exceed max_runs_per_partition={self.max_runs}; narrow the pattern "
                        "(a window, a stricter strategy) or raise the cap, or pass "
                        "on_cap='truncate'")
                keep = st.all_runs()[nruns - self.max_runs:]
                self.truncated_runs += nruns - self.max_runs
                buckets.clear()
                for r in keep:
                    buckets.setdefault(r[0], []).append(r)
                nruns = len(keep)

    def process(self, st: GroupState, recs: list[Rec], bits: list[int],
                out: list[Candidate], max_matches: int | None) -> None:
        """Feed one partition's events in order."""
        if self.bucketed:
            self._process_buckets(st, recs, bits, out, max_matches)
            return
        root = self.plan.root
        pos_mask = (1 << self.npos) - 1
        strict = self.strict
        W, CW = self.expire_us, self.expire_events
        init = self.init[id(root)]
        runs = st.runs
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
            info = self._root_info
            for r in runs:
                if strict and e[CPOS] != r[5] + 1:
                    continue
                if not strict:
                    new.append(r)
                exp = info(r[0])[0]
                if not b & exp:
                    continue
                if self.memo_ok:
                    B = r[1]
                    for s2, slot, is_list, done, alive in self._transitions(r[0], b & exp):
                        if is_list:
                            cur = B[slot]
                            B2 = B[:slot] + (((e,) if cur is None else cur + (e,)),) + \
                                B[slot + 1:]
                        else:
                            B2 = B[:slot] + (e,) + B[slot + 1:]
                        nr = (s2, B2, r[2], r[3], r[4], e[CPOS])
                        if done:
                            c = self._complete(nr, e)
                            if c is not None:
                                out.append(c)
                                nm += 1
                        if alive:
                            new.append(nr)
                    continue
                for s2, B2 in self._steps(root, r[0], e, b, r[1]):
                    nr = (s2, B2, r[2], r[3], r[4], e[CPOS])
                    _x, done, alive = info(s2)
                    if done:
                        c = self._complete(nr, e)
                        if c is not None:
                            out.append(c)
                            nm += 1
                    if alive:
                        new.append(nr)
            exp0 = info(init)[0]
            if b & exp0 and self.memo_ok:
                B = self.empty_B
                for s2, slot, is_list, done, alive in self._transitions(init, b & exp0):
                    B2 = B[:slot] + (((e,) if is_list else e),) + B[slot + 1:]
                    nr = (s2, B2, e[TS], e[WPOS], e[GPOS], e[CPOS])
                    if done:
                        c = self._complete(nr, e)
                        if c is not None:
                            out.append(c)
                            nm += 1
                    if alive:
                        new.append(nr)
            elif b & exp0:
                for s2, B2 in self._steps(root, init, e, b, self.empty_B):
                    nr = (s2, B2, e[TS], e[WPOS], e[GPOS], e[CPOS])
                    _x, done, alive = info(s2)
                    if done:
                        c = self._complete(nr, e)
                        if c is not None:
                            out.append(c)
                            nm += 1
                    if alive:
                        new.append(nr)
            if max_matches is not None and nm > max_matches:
                if self.on_cap != "truncate":
                    raise CapacityError(
                        f"query {self.plan.name!r}: event {e[2]!r} completed {nm} matches, "
                        f"more than max_matches_per_event={max_matches}")
                self.truncated_matches += nm - max_matches
                del out[len(out) - (nm - max_matches):]
            if self.max_runs is not None and len(new) > self.max_runs:
                if self.on_cap == "truncate":
                    self.truncated_runs += len(new) - self.max_runs
                    del new[: len(new) - self.max_runs]
                else:
                    raise CapacityError(
                        f"query {self.plan.name!r}: {len(new)} live runs in one partition "
                        f"exceed max_runs_per_partition={self.max_runs}; narrow the pattern "
                        "(a window, a stricter strategy) or raise the cap, or pass "
                        "on_cap='truncate'")
            st.runs = runs = new

    def oldest(self, st: GroupState) -> int | None:
        """The smallest position a future match of this key can bind (None: no live run)."""
        return min((r[4] for lst in ([st.runs] + list(st.buckets.values())) for r in lst),
                   default=None)

    def prune(self, st: GroupState) -> None:
        """Drop history no live run or waiting match can need any more."""
        self._prune(st)

    def _complete(self, r: tuple[Any, ...], e: Rec) -> Candidate | None:
        B = r[1]
        for p in self.plan.preds:
            it = p.iter_var
            if not p.check_all(B, None if it is None else self.iter_slot[it]):
                return None
        positions = sorted(x[GPOS] for x in self._records(B))
        return Candidate(B, min(x[TS] for x in self._records(B)), r[3], e[GPOS], e[TS],
                         e[WPOS], tuple(positions))

    def _records(self, B: tuple[Any, ...]) -> list[Rec]:
        out: list[Rec] = []
        for x in B[: self.npos]:
            if x is None:
                continue
            if isinstance(x, tuple) and (not x or isinstance(x[0], tuple)):
                out.extend(x)
            else:
                out.append(x)
        return out

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
    def _pvars(self, p: ast.Pattern) -> list[str]:
        got = self.pattern_vars.get(id(p))
        if got is None:
            got = []

            def walk(x: ast.Pattern) -> None:
                if isinstance(x, ast.EventPattern):
                    got.append(x.var)
                elif isinstance(x, ast.Kleene | ast.Within):
                    walk(x.body)
                elif isinstance(x, ast.Not):
                    return
                else:
                    for i in x.items:
                        walk(i)
            walk(p)
            self.pattern_vars[id(p)] = got
        return got

    def _sides(self, p: ast.Pattern, items: list[ast.Pattern], i: int
               ) -> tuple[list[str], list[str]]:
        """Variables before and after item ``i`` of a SEQ (cached per node)."""
        key = (id(p), i)
        got = self._sides_cache.get(key)
        if got is None:
            got = ([v for it in items[:i] for v in self._pvars(it)],
                   [v for it in items[i + 1:] for v in self._pvars(it)])
            self._sides_cache[key] = got
        return got

    def _bound(self, vars_: list[str], B: tuple[Any, ...]) -> list[Rec]:
        out: list[Rec] = []
        for v in vars_:
            x = B[self.slot[v]]
            if x is None:
                continue
            if isinstance(x, tuple) and (not x or isinstance(x[0], tuple)):
                out.extend(x)
            else:
                out.append(x)
        return out

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
                B2 = B[:slot] + (rec,) + B[slot + 1:]
                if all(p.check_all(B2, None if p.iter_var is None else
                                   self.iter_slot.get(p.iter_var)) for p in blk.preds):
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
        """Check every NOT; returns (ok, deadline) where deadline is when an open trailing
        interval closes (a ts for time windows, -wpos-1 encoded for count windows)."""
        B = c.B
        not_index = self.plan.not_index
        deadline: list[int] = []
        ok = [True]

        def interval(left: list[Rec], right: list[Rec], win: ast.Window | None,
                     scope_fn: Any) -> Any:
            lo = max((x[GPOS] for x in left), default=None)
            hi = min((x[GPOS] for x in right), default=None)
            first = last = None
            if win is not None and (lo is None or hi is None):
                scope = scope_fn()
                first = min(scope, key=lambda x: x[GPOS]) if scope else None
                last = max(scope, key=lambda x: x[GPOS]) if scope else None
            if hi is None and not final:
                if win is None or first is None:
                    deadline.append(_INF)
                elif win.is_count:
                    deadline.append(-(first[WPOS] + int(win.amount)) - 1)
                else:
                    deadline.append(first[TS] + win.microseconds)

            def inside(q: Rec) -> bool:
                if lo is not None:
                    if q[GPOS] <= lo:
                        return False
                elif win is not None and last is not None:
                    if win.is_count and not last[WPOS] - q[WPOS] < win.amount:
                        return False
                    if not win.is_count and q[TS] < last[TS] - win.microseconds:
                        return False
                if hi is not None:
                    if q[GPOS] >= hi:
                        return False
                elif win is not None and first is not None:
                    if win.is_count and not q[WPOS] - first[WPOS] < win.amount:
                        return False
                    if not win.is_count and q[TS] > first[TS] + win.microseconds:
                        return False
                return True
            inside.lo = lo  # type: ignore[attr-defined]
            inside.hi = hi  # type: ignore[attr-defined]
            return inside

        def walk(p: ast.Pattern, win: ast.Window | None, scope: Any) -> bool:
            if isinstance(p, ast.EventPattern | ast.Kleene):
                return True
            if isinstance(p, ast.Within):
                body = p.body
                return walk(body, p.window, lambda: self._bound(self._pvars(body), B))
            if isinstance(p, ast.Not):
                return True
            if isinstance(p, ast.Or | ast.AnyOf):
                return all(walk(i, win, scope) for i in p.items
                           if any(B[self.slot[v]] not in (None,) for v in self._pvars(i)))
            items = _flat_items(p) if isinstance(p, ast.Seq) else list(p.items)
            if isinstance(p, ast.And):
                mine = self._bound(self._pvars(p), B)
                for item in items:
                    if isinstance(item, ast.Not):
                        k = not_index[id(item)]
                        if mine:
                            a = min(x[GPOS] for x in mine)
                            z = max(x[GPOS] for x in mine)
                            between = _Between(a, z)
                            if self._forbidden(st, k, B, between):
                                return False
            else:
                for i, item in enumerate(items):
                    if not isinstance(item, ast.Not):
                        continue
                    k = not_index[id(item)]
                    lv, rv = self._sides(p, items, i)
                    left = self._bound(lv, B)
                    right = self._bound(rv, B)
                    if self._forbidden(st, k, B, interval(left, right, win, scope)):
                        return False
            return all(walk(i, win, scope) for i in items if not isinstance(i, ast.Not))

        ok[0] = walk(self.plan.analyzed.pattern, self.plan.analyzed.within,
                     lambda: self._records(B))
        return ok[0], (max(deadline) if deadline else None)

    def negation_ok(self, st: GroupState, c: Candidate) -> bool:
        """Check NOTs whose interval is already complete; mark matches that must wait."""
        if not self.plan.negations:
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


def _has_win(n: Node) -> bool:
    if isinstance(n, Win):
        return True
    if isinstance(n, Ev):
        return False
    if isinstance(n, Rep):
        return _has_win(n.body)
    return any(_has_win(i) for i in n.items)


def _flat_items(p: ast.Seq) -> list[ast.Pattern]:
    """Items of a SEQ with directly nested SEQs spliced in (docs/semantics.md 4)."""
    out: list[ast.Pattern] = []
    for item in p.items:
        if isinstance(item, ast.Seq):
            out.extend(_flat_items(item))
        else:
            out.append(item)
    return out


__all__ = ["GroupMatcher", "GroupState"]
