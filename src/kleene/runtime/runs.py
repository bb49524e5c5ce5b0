"""The ``runs`` plan's matcher: ``SEQ(a, b+, c)`` under strict contiguity with array operations.

Under strict contiguity a partition's events form one sequence; a run begun by ``a`` at row
``s`` lives while each next row extends ``b`` (its filters, ``b[1]`` against ``a``, ``b[i]``
against ``b[i-1]``) and the window holds, and every row ``t`` right after a live ``b`` that
``c`` accepts (against ``a``) completes the match ``(s, s+1..t-1, t)``. So, over one chunk
with every partition's rows grouped (a stable sort by partition, stream order kept):

* the conjuncts on one row or on two consecutive rows are evaluated for every row at once
  (shifted comparisons of the columns; a conjunct without an array form by its compiled
  function, per row or pair);
* the end of each start's chain is the first broken link after it (``searchsorted`` over the
  broken links), the window's end the last row of the partition within ``W`` (``searchsorted``
  over partition-major times);
* the (start, end) candidates are expanded with ``repeat`` and tested against ``c``.

A run can span chunks and calls: per partition the state keeps the rows from its oldest live
start on (plain records) and which of them are live starts; the next chunk's rows of the
partition follow them. Matches come out in the documented order (by ``c``, then ``a``) with
the NFA's caps applied at the same events (docs/engine.md, "Bounded memory").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CapacityError
from ..events.matchtable import MatchColumns
from ..events.model import ID, TS, int64_array
from ..frozen import dataclass
from ..plan.linear import Plan
from .caps import over_budget, too_many_matches, too_many_runs
from .matcher import MatcherOptions

Arr = np.ndarray[Any, Any]

_OPS: dict[str, Callable[[Arr, Arr], Arr]] = {
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "=": np.equal, "!=": np.not_equal}
_EXACT = 2 ** 53
PAIRS = 1 << 22
"""Candidate (start, end) pairs expanded at once (about 100 MB of index arrays)."""


@dataclass(frozen=True, slots=True)
class RunPred:
    """One conjunct of the runs plan: where it is evaluated (``begin``, ``elem``, ``first``,
    ``link``, ``close``, ``cend``: see :mod:`kleene.plans.runs`), its array form
    (``("cmp", op, lhs, rhs)``, operands ``("col", "x"|"y", attr)`` or ``("lit", number)``)
    or None, its compiled function and the element index that function is called with."""

    role: str
    vec: tuple[Any, ...] | None
    fn: Callable[..., Any]
    index: int


@dataclass(frozen=True, slots=True)
class RunsPlan(Plan):
    """The linear plan of ``SEQ(a, b+, c)`` plus the runs plan's conjuncts."""

    preds: tuple[RunPred, ...]
    kmin: int
    kmax: int | None


class RunsState:
    """One partition's open runs: the rows from the oldest live start on (records
    ``(gpos, ts, id, cpos, wpos, *attrs)`` and their candidate bits) and the live starts
    (offsets into them)."""

    __slots__ = ("bits", "live", "tail")

    def __init__(self) -> None:
        self.tail: list[tuple[Any, ...]] = []
        self.bits: list[int] = []
        self.live: list[int] = []

    @property
    def runs(self) -> list[int]:
        """The live starts (the runtime counts live partial matches by ``runs``)."""
        return self.live


class RunsMatcher:
    """Evaluates a whole chunk of a :class:`RunsPlan` with array operations
    (:meth:`process_table`, called by the runtime instead of routing records per key)."""

    has_trailing = False
    decides_negation = True
    output_keys = True

    def __init__(self, plan: RunsPlan, options: MatcherOptions) -> None:
        self.plan = plan
        self.max_runs = options.max_runs
        self.max_matches = options.max_matches_per_event
        self.on_cap = options.on_cap
        self.max_matches_per_call = options.max_matches_per_call
        self.count_mode = options.count_only
        self.counted = 0
        self.truncated_runs = 0
        self.truncated_matches = 0
        self.pending: list[MatchColumns] = []
        self.n_pending = 0
        comps = plan.components
        self.vars = tuple(c.vars[0] for c in comps)
        self.bit_idx = tuple(plan.order.index(v) for v in self.vars)
        self.slots = tuple(plan.layout.var_slots[v] for v in self.vars)
        self.nslots = len(plan.layout.var_slots)
        self.direct = None if self.count_mode else (plan.name, None)
        self.window = plan.window_us
        self.by_role: dict[str, list[RunPred]] = {}
        for p in plan.preds:
            self.by_role.setdefault(p.role, []).append(p)

    # -- the Matcher protocol (what the runtime calls besides process_table) -------------------
    def mask_specs(self) -> list[tuple[str | None, Any]]:
        """(type, vectorized one-variable conjuncts) per candidate bit."""
        p = self.plan
        return [(p.vars[v].type, p.vars[v].mask) for v in p.order]

    def new_state(self) -> RunsState:
        return RunsState()

    def live(self, st: RunsState) -> int:
        return len(st.live)

    def oldest(self, st: RunsState) -> int | None:
        return int(st.tail[st.live[0]][0]) if st.live else None

    def prune(self, st: RunsState) -> None:
        del st

    def release_pending(self, st: Any, watermark: int | None) -> list[Any]:
        del st, watermark
        return []

    def dump_state(self, st: RunsState) -> Any:
        """Plain data for a snapshot."""
        return (list(st.tail), list(st.bits), list(st.live))

    def load_state(self, data: Any) -> RunsState:
        st = RunsState()
        st.tail = [tuple(r) for r in data[0]]
        st.bits = list(data[1])
        st.live = list(data[2])
        return st

    # -- one chunk ---------------------------------------------------------------------------
    def process_table(self, rt: Any, t: pa.Table, masks: list[Arr],
                      left_rows: list[tuple[int, Any, tuple[int, ...]]], gpos: Arr, cpos: Arr,
                      rcodes: Arr, rkeys: list[Any], order: Arr | None) -> None:
        """Match one chunk of ordered events (every event of the chunk, candidates or not:
        strict contiguity counts them all): complete matches go to :attr:`pending` as column
        parts (:meth:`take_columns`), or to :attr:`counted`; per partition the open runs go
        to ``rt.states``."""
        n = t.num_rows
        ts_all = t.column(TS).to_numpy().astype(np.int64, copy=False)
        if left_rows:
            self._row_fallback(t, masks, left_rows, gpos, ts_all, cpos)
        ia, ib, ic = self.bit_idx
        a_ok, b_ok, c_ok = masks[ia], masks[ib], masks[ic]
        anym = a_ok | b_ok | c_ok
        rt.counters.candidate_events += int(np.count_nonzero(anym))
        rows = order if order is not None else np.arange(n, dtype=np.int64)
        if rt.on_cap == "truncate" and rt._saturated:
            sat = np.array([i for i, k in enumerate(rkeys) if k in rt._saturated], dtype=np.int64)
            skip = np.isin(rcodes[rows], sat)
            if skip.any():
                rt.counters.events_skipped += int(np.count_nonzero(anym[rows[skip]]))
                rows = rows[~skip]
        if len(rows) == 0:
            return
        codes_new = rcodes[rows]
        # the open runs of the chunk's partitions go first (a stable sort by partition)
        present = (np.flatnonzero(np.bincount(codes_new, minlength=len(rkeys)))
                   if len(rkeys) > 1 else np.zeros(1, dtype=np.int64))
        tails: list[tuple[int, RunsState]] = []
        for ci in present.tolist():
            st = rt.states.get(rkeys[ci])
            if st is not None and st.tail:
                tails.append((ci, st))
        nt = sum(len(st.tail) for _c, st in tails)
        trecs = [r for _c, st in tails for r in st.tail]
        tcode = np.array([ci for ci, st in tails for _r in st.tail], dtype=np.int64)
        tlive = np.zeros(nt, dtype=bool)
        tbits = np.array([b for _c, st in tails for b in st.bits], dtype=np.int64)
        off = 0
        for _c, st in tails:
            for k in st.live:
                tlive[off + k] = True
            off += len(st.tail)
        src = np.concatenate([-1 - np.arange(nt, dtype=np.int64), rows])
        code = np.concatenate([tcode, codes_new])
        perm: Arr | None = None
        if nt:
            # both sides are sorted by partition: merge, a partition's carried rows first
            perm = np.empty(len(src), dtype=np.int64)
            ar_t = np.arange(nt, dtype=np.int64)
            ar_n = np.arange(len(rows), dtype=np.int64)
            perm[ar_t + np.searchsorted(codes_new, tcode, side="left")] = ar_t
            perm[ar_n + np.searchsorted(tcode, codes_new, side="right")] = nt + ar_n
            src, code = src[perm], code[perm]
        K = len(src)
        is_new = src >= 0
        new_i = np.where(is_new, src, 0)
        tail_i = np.where(is_new, 0, -1 - src)

        def comb(new_vals: Arr, tail_vals: Sequence[Any] | Arr, dtype: Any) -> Arr:
            if not nt:
                return new_vals[rows]
            both = np.concatenate([np.asarray(tail_vals, dtype=dtype), new_vals[rows]])
            assert perm is not None
            return both[perm]

        g = comb(gpos, [r[0] for r in trecs], np.int64)
        ts = comb(ts_all, [r[1] for r in trecs], np.int64)
        cp = comb(cpos, [r[3] for r in trecs], np.int64)
        A = comb(a_ok, (tbits >> ia) & 1, bool)
        B = comb(b_ok, (tbits >> ib) & 1, bool)
        C = comb(c_ok, (tbits >> ic) & 1, bool)
        live0 = comb(np.zeros(n, dtype=bool), tlive, bool)

        ctx = _Cols(self, t, rows, trecs, perm, is_new, new_i, tail_i, g, ts, cp, gpos, ts_all,
                    cpos)
        same = np.zeros(K, dtype=bool)
        if K > 1:
            same[1:] = (code[1:] == code[:-1]) & (cp[1:] == cp[:-1] + 1)
        begin = ctx.holds("begin", A)
        belem = ctx.holds("elem", B)
        first = ctx.holds("first", same & belem)
        link = ctx.holds("link", same & belem)
        cend = ctx.holds("cend", C)
        # starts: a new row that begins a run, or a live start carried over
        allowed = np.where(is_new, begin, live0)
        nxt = np.zeros(K, dtype=bool)
        nxt[:-1] = first[1:]
        S = np.flatnonzero(allowed & nxt)
        # the partition's last row within the window of each start
        seg_last = _seg_last(code)
        if self.window is None:
            lim = seg_last[S]
        else:
            lim = _window_last(code, ts, S, self.window, seg_last)
        breaks = np.flatnonzero(~link)
        bi = np.searchsorted(breaks, S + 2, side="left")
        E = np.where(bi < len(breaks), breaks[np.minimum(bi, len(breaks) - 1)] - 1, K - 1)
        Ub = np.minimum(E, lim)
        if self.plan.kmax is not None:
            Ub = np.minimum(Ub, S + self.plan.kmax)
        ok = Ub >= S + 1
        S, Ub, lim = S[ok], Ub[ok], lim[ok]
        # candidate ends: t - 1 inside the live b, t within the window
        lo = S + 1 + self.plan.kmin
        hi = np.minimum(Ub + 1, lim)
        cnt = np.maximum(hi - lo + 1, 0)
        # (long runs: the candidate pairs are expanded a slice of starts at a time)
        cum = np.cumsum(cnt)
        cuts = np.searchsorted(cum, np.arange(PAIRS, int(cum[-1]) if len(cum) else 0, PAIRS),
                               side="left")
        found: list[tuple[Arr, Arr]] = []
        for a, b in zip(np.r_[0, cuts].tolist(), [*cuts.tolist(), len(S)], strict=True):
            if b > a:
                found.append(self._pairs(ctx, S[a:b], lo[a:b], cnt[a:b], same, cend, is_new))
        ps = np.concatenate([f[0] for f in found]) if found else S[:0]
        pt = np.concatenate([f[1] for f in found]) if found else S[:0]
        # live runs after each row: the run begun there, and every b alive through it
        diff = np.zeros(K + 1, dtype=np.int64)
        np.add.at(diff, S + 1, 1)
        np.add.at(diff, Ub + 1, -1)
        live_after = np.cumsum(diff[:-1]) + allowed
        caps = self._caps_hit(rt, pt, live_after, is_new)
        if caps:
            o = np.argsort(pt, kind="stable")  # the NFA's order: per partition, per event
            ps, pt = ps[o], pt[o]
            ps, pt, cut = self._capped(rt, ps, pt, live_after, is_new, code, rkeys, g, ctx,
                                       anym, rows)
        else:
            cut = None
        self._emit(rt, ps, pt, g, ts, ctx)
        self._keep_open(rt, code, rkeys, S, Ub, allowed, seg_last, A, B, C, ctx, cut)

    def _pairs(self, ctx: _Cols, S: Arr, lo: Arr, cnt: Arr, same: Arr, cend: Arr,
               is_new: Arr) -> tuple[Arr, Arr]:
        """The matches among starts ``S``: ends ``lo .. lo + cnt - 1`` of each, kept where
        the end is contiguous, new in this chunk, and ``c`` holds (alone and against ``a``)."""
        total = int(cnt.sum())
        ps = np.repeat(S, cnt)
        pt = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(total, dtype=np.int64)
        keep = same[pt] & cend[pt] & is_new[pt]
        ps, pt = ps[keep], pt[keep]
        if "close" in self.by_role and len(ps):
            hold = ctx.pairs("close", ps, pt)
            ps, pt = ps[hold], pt[hold]
        return ps, pt

    # -- caps ----------------------------------------------------------------------------------
    def _budget(self, rt: Any) -> int | None:
        cap = rt.max_matches_per_call
        if cap is None or self.count_mode:
            return None
        used = len(rt.held) + self.n_pending
        return cap - used if cap > used else 0

    def _caps_hit(self, rt: Any, pt: Arr, live_after: Arr, is_new: Arr) -> bool:
        if self.max_runs is not None and len(live_after) and \
                int(live_after[is_new].max(initial=0)) > self.max_runs:
            return True
        if self.max_matches is not None and len(pt) and \
                int(np.bincount(pt).max()) > self.max_matches:
            return True
        budget = self._budget(rt)
        return budget is not None and len(pt) > budget

    def _capped(self, rt: Any, ps: Arr, pt: Arr, live_after: Arr, is_new: Arr, code: Arr,
                rkeys: list[Any], g: Arr, ctx: _Cols, anym: Arr, rows: Arr
                ) -> tuple[Arr, Arr, set[int]]:
        """The caps event by event, in the NFA's order (per partition, per event: matches of
        the event, the call's budget, live runs): raise, or truncate and count. Returns the
        kept pairs and the partitions saturated (their open runs are dropped)."""
        budget = self._budget(rt)
        mm = self.max_matches
        kept: list[int] = []  # indices into ps / pt
        draining = False
        saturated: set[int] = set()
        bounds = np.searchsorted(pt, np.arange(len(is_new) + 1))
        out_n = 0
        key_start = 0
        for j in np.flatnonzero(is_new).tolist():
            ci = int(code[j])
            if ci in saturated:
                continue
            if j == 0 or code[j - 1] != ci:
                key_start = len(kept)
                draining = False
            mine = list(range(int(bounds[j]), int(bounds[j + 1])))
            nm = len(mine)
            e: Any = _LazyRec(ctx, j)
            if draining:
                self.truncated_matches += nm
                mine = []
            elif nm:
                if mm is not None and nm > mm:
                    drop = too_many_matches(self, e, nm, mm)
                    mine = mine[:nm - drop]
                if self.count_mode:
                    self.counted += len(mine)
                    mine = []
                kept += mine
                out_n += len(mine)
                if budget is not None and out_n > budget:
                    tail = kept[key_start:]
                    over_budget(self, e, tail, max(budget - (out_n - len(tail)), 0))
                    del kept[key_start + len(tail):]
                    out_n = len(kept)
                    budget = out_n
                    draining = True
            nr = int(live_after[j])
            if self.max_runs is not None and nr > self.max_runs:
                try:
                    too_many_runs(self, nr, e)
                except CapacityError as exc:
                    if rt.on_cap != "truncate":
                        raise
                    key = rkeys[ci]
                    cands: list[Any] = [((int(g[pt[i]]), int(g[ps[i]])), None, None)
                                        for i in kept[key_start:]]
                    rt._saturate(key, cands, exc)
                    del kept[key_start + len(cands):]
                    out_n = len(kept)
                    saturated.add(ci)
                    later = (code == ci) & is_new & (g > int(g[j]))
                    rt.counters.events_skipped += int(np.count_nonzero(
                        ctx.new_mask(later, anym)))
        idx = np.array(kept, dtype=np.int64)
        return ps[idx], pt[idx], saturated

    # -- output and state ----------------------------------------------------------------------
    def _emit(self, rt: Any, ps: Arr, pt: Arr, g: Arr, ts: Arr, ctx: _Cols) -> None:
        """The chunk's matches as one column part (:class:`MatchColumns`): ``a`` is row
        ``s``, ``b`` rows ``s+1..t-1``, ``c`` row ``t`` of the chunk's ids."""
        n = len(ps)
        if not n:
            return
        if self.count_mode:
            self.counted += n
            return
        if rt.on_cap == "truncate":
            rt._kept_call += n
        # the output order: by c's stream position, then a's (found in partition order)
        o = np.lexsort((g[ps], g[pt]))
        ps, pt = ps[o], pt[o]
        self.pending.append(MatchColumns(self.plan.name, self.vars, ctx.ids(),
                                         (ps, ps + 1, pt), (None, pt, None), ts[ps], ts[pt],
                                         g[pt]))
        self.n_pending += n

    def take_columns(self) -> list[MatchColumns]:
        """The matches found since the last call, as column parts in output order."""
        out, self.pending, self.n_pending = self.pending, [], 0
        return out

    def _keep_open(self, rt: Any, code: Arr, rkeys: list[Any], S: Arr, Ub: Arr, allowed: Arr,
                   seg_last: Arr, A: Arr, B: Arr, C: Arr, ctx: _Cols,
                   cut: set[int] | None) -> None:
        """Per partition of the chunk: the rows from its oldest start still live after its
        last row (None: no open run), as the partition's new state."""
        K = len(code)
        starts = np.zeros(K, dtype=bool)
        alive = Ub >= seg_last[S]
        starts[S[alive]] = True
        ends = np.flatnonzero(np.r_[code[1:] != code[:-1], True])
        starts[ends] |= allowed[ends]
        heads = np.r_[0, ends[:-1] + 1]
        flagged = np.flatnonzero(starts)
        fi: list[int] = np.asarray(np.searchsorted(flagged, heads, side="left")).tolist()
        ia, ib, ic = self.bit_idx
        bits = (A.astype(np.int64) << ia) | (B.astype(np.int64) << ib) | (C.astype(np.int64) << ic)
        states = rt.states
        keep: list[tuple[RunsState, int, int]] = []
        for e, f in zip(ends.tolist(), fi, strict=True):
            ci = int(code[e])
            if cut is not None and ci in cut:
                continue
            key = rkeys[ci]
            st = states.get(key)
            if st is None:
                st = states[key] = RunsState()
            if f >= len(flagged) or flagged[f] > e:
                if st.tail:
                    st.tail, st.bits, st.live = [], [], []
                continue
            keep.append((st, int(flagged[f]), e + 1))
        if not keep:
            return
        # every partition's carried rows' records built at once
        spans = [np.arange(lo, hi, dtype=np.int64) for _st, lo, hi in keep]
        recs = ctx.recs_at(np.concatenate(spans))
        bl = bits.tolist()
        sl = starts.tolist()
        k = 0
        for st, lo, hi in keep:
            st.tail = recs[k:k + hi - lo]
            k += hi - lo
            st.bits = bl[lo:hi]
            st.live = [i for i, x in enumerate(sl[lo:hi]) if x]

    def _row_fallback(self, t: pa.Table, masks: list[Arr],
                      left_rows: list[tuple[int, Any, tuple[int, ...]]], gpos: Arr,
                      ts: Arr, cpos: Arr) -> None:
        """One-variable conjuncts Arrow could not evaluate, per candidate row (as the
        runtime's ``_row_fallback``)."""
        for i, vm, left in left_rows:
            sel = np.flatnonzero(masks[i])
            if not len(sel):
                continue
            recs = _records(self.plan, t, sel, gpos, ts, cpos)
            for j, r in zip(sel.tolist(), recs, strict=True):
                b: list[Any] = [None] * self.nslots
                b[vm.slot] = (r,) if vm.is_list else r
                bt = tuple(b)
                for k in left:
                    if vm.row_fns[k].fn(bt, 0) is not True:
                        masks[i][j] = False
                        break


class _LazyRec:
    """An event's record, built only when a cap's message or position reads it."""

    def __init__(self, ctx: _Cols, j: int) -> None:
        self.ctx, self.j = ctx, j

    def __getitem__(self, k: int) -> Any:
        return self.ctx.rec(self.j)[k]


def _seg_last(code: Arr) -> Arr:
    """Per row: the index of its partition's last row (rows grouped by partition)."""
    K = len(code)
    ends = np.flatnonzero(np.r_[code[1:] != code[:-1], True])
    counts = np.diff(np.r_[-1, ends])
    return np.repeat(ends, counts) if K else ends


def _window_last(code: Arr, ts: Arr, S: Arr, w: int, seg_last: Arr) -> Arr:
    """Per start in ``S``: the last row of its partition with ``ts - ts[s] <= w``."""
    if not len(S):
        return S
    lo, hi = int(ts.min()), int(ts.max())
    span = hi - lo + 1
    nseg = int(code.max()) + 1 if len(code) else 1
    mult = span + w + 1
    if nseg * mult < (1 << 62):
        comp = code.astype(np.int64) * mult + (ts - lo)
        return np.asarray(np.searchsorted(comp, comp[S] + w, side="right"), np.int64) - 1
    out = np.empty(len(S), dtype=np.int64)
    for k, s in enumerate(S.tolist()):
        e = int(seg_last[s])
        out[k] = s + int(np.searchsorted(ts[s:e + 1], ts[s] + w, side="right")) - 1
    return out


def _column(t: pa.Table, attr: str) -> pa.ChunkedArray | None:
    """A layout attribute's column (``ts`` / ``type`` / ``id`` fall back to the reserved
    columns, as the runtime's routing does); None when the batch has no such column."""
    names = t.column_names
    if attr in names:
        col = t.column(attr)
    elif attr in ("ts", "type", "id"):
        col = t.column("__" + attr)
    else:
        return None
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("us", col.type.tz)).cast(pa.int64())
    return col


def _records(plan: Plan, t: pa.Table, sel: Arr, gpos: Arr, ts: Arr, cpos: Arr
             ) -> list[tuple[Any, ...]]:
    """Records ``(gpos, ts, id, cpos, wpos, *attrs)`` of rows ``sel`` of ``t`` (the layout
    every compiled conjunct reads)."""
    from .engine import _pylist

    arr = int64_array(sel)
    cols: list[list[Any]] = [gpos[sel].tolist(), ts[sel].tolist(),
                             _pylist(t.column(ID).take(arr)), cpos[sel].tolist(),
                             cpos[sel].tolist()]
    for a in plan.layout.attrs:
        col = _column(t, a)
        cols.append([None] * len(sel) if col is None else _pylist(col.take(arr)))
    return list(zip(*cols, strict=True))


class _Cols:
    """The chunk's rows in partition-major order (carried rows first): the columns the
    conjuncts read, as arrays, and records where a compiled function must run."""

    def __init__(self, m: RunsMatcher, t: pa.Table, rows: Arr, trecs: list[tuple[Any, ...]],
                 perm: Arr | None, is_new: Arr, new_i: Arr, tail_i: Arr, g: Arr, ts: Arr,
                 cp: Arr, gpos: Arr, ts_all: Arr, cpos: Arr) -> None:
        self.m, self.t, self.rows, self.trecs, self.perm = m, t, rows, trecs, perm
        self.is_new, self.new_i, self.tail_i = is_new, new_i, tail_i
        self.g, self.ts, self.cp = g, ts, cp
        self.gpos, self.ts_all, self.cpos = gpos, ts_all, cpos
        self.attr_index = {a: 5 + k for k, a in enumerate(m.plan.layout.attrs)}
        self._num: dict[str, tuple[Arr, Arr] | None] = {}
        self._recs: list[tuple[Any, ...]] | None = None

    def new_mask(self, sel: Arr, per_row: Arr) -> Arr:
        """``sel`` (over combined rows) restricted to rows whose chunk-row flag is set."""
        return sel & per_row[self.new_i] & self.is_new

    def num(self, attr: str) -> tuple[Arr, Arr] | None:
        """(values, valid) of a numeric attribute over the combined rows, or None."""
        if attr in self._num:
            return self._num[attr]
        out = None
        col = _column(self.t, attr)
        if col is not None and (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
            valid = col.is_valid().to_numpy(zero_copy_only=False)
            vals = pc.fill_null(col, 0).to_numpy() if col.null_count else col.to_numpy()
            tv = [r[self.attr_index[attr]] for r in self.trecs]
            kinds = (int, float) if vals.dtype.kind == "f" else (int,)
            if all(v is None or (type(v) in kinds and (vals.dtype.kind == "f"
                                                       or -(2 ** 63) <= v < 2 ** 63))
                   for v in tv):
                v = vals[self.rows]
                ok = valid[self.rows]
                if self.trecs:
                    v = np.concatenate([np.array([0 if x is None else x for x in tv],
                                                 dtype=vals.dtype), v])
                    ok = np.concatenate([np.array([x is not None for x in tv], dtype=bool), ok])
                    assert self.perm is not None
                    v, ok = v[self.perm], ok[self.perm]
                if v.dtype.kind in "iuf":
                    out = (v, ok)
        self._num[attr] = out
        return out

    def _operand(self, op: tuple[Any, ...], x: Arr, y: Arr) -> tuple[Arr | Any, Arr | None] | None:
        if op[0] == "lit":
            return op[1], None
        col = self.num(op[2])
        if col is None:
            return None
        rows = x if op[1] == "x" else y
        return col[0][rows], col[1][rows]

    def _vector(self, vec: tuple[Any, ...], x: Arr, y: Arr) -> Arr | None:
        """The comparison over rows (x, y), TRUE only (NULL is not TRUE); None when its
        columns have no exact array form."""
        _k, op, lhs, rhs = vec
        a = self._operand(lhs, x, y)
        b = self._operand(rhs, x, y)
        if a is None or b is None:
            return None
        (av, aok), (bv, bok) = a, b
        kinds = {np.asarray(av).dtype.kind if aok is not None else type(av).__name__[0],
                 np.asarray(bv).dtype.kind if bok is not None else type(bv).__name__[0]}
        if kinds & {"i", "u"} and kinds & {"f"}:
            # int beside float: numpy compares through float64; exact only up to 2**53
            for v, ok in ((av, aok), (bv, bok)):
                if ok is None:
                    if isinstance(v, int) and abs(v) > _EXACT:
                        return None
                elif np.asarray(v).dtype.kind in "iu" and len(v) and \
                        int(np.abs(v).max()) > _EXACT:
                    return None
        for v, ok in ((av, aok), (bv, bok)):
            if ok is None and isinstance(v, int) and not -(2 ** 63) <= v < 2 ** 63:
                return None
        with np.errstate(invalid="ignore"):
            res = _OPS[op](av, bv)
        res = np.asarray(res, dtype=bool)
        if aok is not None:
            res = res & aok
        if bok is not None:
            res = res & bok
        return res

    def holds(self, role: str, base: Arr) -> Arr:
        """``base`` and every conjunct of ``role`` on the rows where it holds (pairs (j-1, j)
        for ``first`` / ``link``, the row itself otherwise)."""
        preds = self.m.by_role.get(role)
        if not preds:
            return base
        y = np.flatnonzero(base)
        x = y - 1 if role in ("first", "link") else y
        hold = self._all(role, preds, x, y)
        out = np.zeros(len(base), dtype=bool)
        out[y[hold]] = True
        return out

    def pairs(self, role: str, x: Arr, y: Arr) -> Arr:
        return self._all(role, self.m.by_role[role], x, y)

    def _all(self, role: str, preds: list[RunPred], x: Arr, y: Arr) -> Arr:
        hold = np.ones(len(y), dtype=bool)
        for p in preds:
            if not hold.any():
                break
            r = None if p.vec is None else self._vector(p.vec, x, y)
            if r is None:
                r = self._slow(role, p, x, y, hold)
            hold &= r
        return hold

    def _slow(self, role: str, p: RunPred, x: Arr, y: Arr, hold: Arr) -> Arr:
        """A conjunct by its compiled function, per row or pair still in question."""
        recs = self.all_recs()
        sa, sb, sc = self.m.slots
        res = np.zeros(len(y), dtype=bool)
        fn, idx = p.fn, p.index
        for k in np.flatnonzero(hold).tolist():
            b: list[Any] = [None] * self.m.nslots
            b[sb] = ()
            ry = recs[int(y[k])]
            if role == "begin":
                b[sa] = ry
            elif role == "elem":
                b[sb] = (ry,)
            elif role == "cend":
                b[sc] = ry
            elif role == "first":
                b[sa], b[sb] = recs[int(x[k])], (ry,)
            elif role == "link":
                b[sb] = (recs[int(x[k])], ry)
            else:  # close
                b[sa], b[sc] = recs[int(x[k])], ry
            res[k] = fn(tuple(b), idx) is True
        return res

    def all_recs(self) -> list[tuple[Any, ...]]:
        if self._recs is None:
            self._recs = self.recs(0, len(self.is_new))
        return self._recs

    def recs(self, lo: int, hi: int) -> list[tuple[Any, ...]]:
        """Records of combined rows ``lo..hi-1``."""
        if self._recs is not None:
            return self._recs[lo:hi]
        new = self.is_new[lo:hi]
        out: list[tuple[Any, ...]] = []
        if new.all():
            sel = self.new_i[lo:hi]
            return _records(self.m.plan, self.t, sel, self.gpos, self.ts_all, self.cpos)
        fresh = iter(_records(self.m.plan, self.t, self.new_i[lo:hi][new], self.gpos,
                              self.ts_all, self.cpos))
        for is_n, ti in zip(new.tolist(), self.tail_i[lo:hi].tolist(), strict=True):
            out.append(next(fresh) if is_n else self.trecs[ti])
        return out

    def recs_at(self, idx: Arr) -> list[tuple[Any, ...]]:
        """Records of the combined rows ``idx``."""
        if self._recs is not None:
            allr = self._recs
            return [allr[i] for i in idx.tolist()]
        new = self.is_new[idx]
        fresh = iter(_records(self.m.plan, self.t, self.new_i[idx][new], self.gpos,
                              self.ts_all, self.cpos))
        return [next(fresh) if is_n else self.trecs[ti]
                for is_n, ti in zip(new.tolist(), self.tail_i[idx].tolist(), strict=True)]

    def rec(self, j: int) -> tuple[Any, ...]:
        return self.recs(j, j + 1)[0]

    def ids(self) -> Arr | list[Any]:
        """The event ids of the combined rows (an int64 array when they are integers)."""
        col = self.t.column(ID)
        if pa.types.is_signed_integer(col.type) and col.null_count == 0 and \
                all(type(r[2]) is int and -(2 ** 63) <= r[2] < 2 ** 63 for r in self.trecs):
            new_a: Arr = col.to_numpy().astype(np.int64)[self.rows]
            if not self.trecs:
                return new_a
            both_a = np.concatenate([np.array([r[2] for r in self.trecs], dtype=np.int64),
                                     new_a])
            assert self.perm is not None
            out_a: Arr = both_a[self.perm]
            return out_a
        new: list[Any] = col.take(int64_array(self.rows)).to_pylist()
        if not self.trecs:
            return new
        both = [r[2] for r in self.trecs] + new
        assert self.perm is not None
        return [both[k] for k in self.perm.tolist()]


__all__ = ["RunPred", "RunsMatcher", "RunsPlan", "RunsState"]
