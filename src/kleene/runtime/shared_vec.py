"""The shared network's test phase vectorized over a batch (``SharedNetwork.process``'s fast path).

Networks of sequences and disjunctions of plain classes (no ``AND``, no virtual classes) take
this path; it computes the same matches, PMB entries and stored instances as the per-event
test phase of :mod:`kleene.runtime.shared`, and keeps the network's SIQs, hash heads, ``prev``
links and PMBs exactly as that path does, so the two can alternate (a query added that the fast
path cannot take switches the network to the per-event path, and back).

Why it is the same (docs/engine.md, "The shared network, vectorized"): with skip-till-any-match,
the PMatch start of query ``q`` at an instance ``x`` of its class ``i`` (i >= 1) is reached by
the *greedy chain*: the newest instance of class ``i - 1`` of ``x``'s key before ``x``, then the
newest instance of class ``i - 2`` before that one, ... down to class 0; the entry exists iff
that start is inside ``q``'s window of ``x`` and at or after ``q``'s ``since``. (The per-event
path stores the newest start found through the newest *stored* instance; an instance is not
stored only when no query's prefix is valid at it, and a chain through such an instance is
invalid for every later event too, so following every event gives the same entries.) A query
completes at an event of its last class iff the chain from the event is valid, and EMIT RECENT's
match is that chain. So the network keeps, per event, its **snapshot row**: for every class,
the newest event of the same key before it (an array-based PMB that every query shares); a
batch's rows are one scan over the batch sorted by key, and every (event, link) pair follows its
chain with array indexing. What is left per event in Python: writing the PMB and the instance,
cleaning at the same events, and building the matches (EMIT ALL enumerates its matches with the
per-event path's walk over the SIQs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..events import Match
from .shared import SEQ

if TYPE_CHECKING:
    from .shared import _ECQ, Entry, SharedNetwork, _Query

_I64 = np.int64
_NOWIN = 2 ** 62
"""A window longer than any stream (a query without WITHIN)."""
_MAX_CELLS = 1 << 24
"""Most key x class cells of the ``last`` table (128 MB); beyond, the per-event path runs."""
_MAX_CLASSES = 128
"""Most classes the fast path takes: its snapshot rows cost O(classes) per event, the
per-event path's probes O(classes of the key inside a window); beyond about 128 classes (and
~24 events per key and window, SCEMon's workload) the per-event path is faster."""
_CHUNK_CELLS = 1 << 21
"""Events x classes of one chunk's scan (16 MB)."""


class VecState:
    """The fast path's arrays: one row per event the network took since its rows were (re)built
    (rows before ``base`` are dropped: older than every window), and the query tables."""

    def __init__(self, net: SharedNetwork) -> None:
        self.net = net
        self.col: dict[_ECQ, int] = {}
        self.ecq_of: list[_ECQ | None] = []
        self.ncols = 0
        self.base = 0
        """Global row number of row 0 of the arrays."""
        self.n = 0
        """Rows in use."""
        self.ts = np.empty(0, _I64)
        self.pos = np.empty(0, _I64)
        self.ids = np.empty(0, object)
        self.snap = np.empty((0, 0), _I64)
        """Per row and class: the global row of the newest event of its key before it, or -1."""
        self.last = np.full((0, 0), -1, _I64)
        """Per key and class: the global row of its newest event (the carry-in of a batch)."""
        self.valid = False
        """Rows and ``last`` reflect the network's events (else rebuilt from its SIQs)."""
        self.lazy = False
        """Some stored instance has a lazy PMB (``kleene.runtime.shared._pmb``)."""
        self.tables_dirty = True
        self.wmax: float = 0.0
        self._rows: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        """Per query id, its table row: (its class columns, (n, window, since, order, qid,
        recent, vars group))."""
        self._groups: dict[tuple[str, ...], int] = {}
        """Variable-name tuples numbered (``qvars``); grows only."""

    # ------------------------------------------------------------------ tables
    def refresh(self) -> bool:
        """Rebuild the query tables after add / remove; False if the fast path cannot take
        the network (an AND, a virtual class, or too many cells)."""
        net = self.net
        for ecq in net.ecqs.values():
            if ecq.filter is not None or ecq.cnj:
                return False
        if self.ncols > 2 * len(net.ecqs) + 16:  # classes removed: renumber, rebuild the rows
            self.col, self.ecq_of, self.ncols = {}, [], 0
            self.snap = np.empty((0, 0), _I64)
            self.last = np.full((0, 0), -1, _I64)
            self.ts = np.empty(0, _I64)
            self.pos = np.empty(0, _I64)
            self.ids = np.empty(0, object)
            self.base = self.n = 0
            self.valid = False
            self._rows = {}
        for ecq in net.ecqs.values():
            if ecq not in self.col:
                self._add_col(ecq)
        if len(net.ecqs) > _MAX_CLASSES or not self.fits():
            return False
        seq = [q for q in net.queries.values() if q.spec.kind == SEQ and q.n >= 2]
        self.queries = seq
        nq = len(seq)
        # per query, its row of the tables, computed once (a query's fields never change; the
        # column numbers only when the columns are renumbered, which clears the cache): an
        # add or remove with 5K queries registered costs array work, not 5K Python rows
        rows = self._rows
        groups = self._groups
        for q in seq:
            if q.qid not in rows:
                rows[q.qid] = (tuple(self.col[e] for e in q.ecqs),
                               (q.n, _NOWIN if q.window == float("inf") else int(q.window),
                                q.since, q.order, q.qid, q.recent,
                                groups.setdefault(q.vars, len(groups))))
        got = [rows[q.qid] for q in seq]
        if len(rows) > 2 * nq + 64:  # removed queries' rows
            self._rows = {q.qid: r for q, r in zip(seq, got, strict=True)}
        qn_t = [r[1][0] for r in got]
        maxn = max(qn_t, default=2)
        self.maxn = maxn
        if nq and min(qn_t) == maxn:
            qcols = np.array([r[0] for r in got], _I64).reshape(nq, maxn)
        else:
            qcols = np.zeros((nq, maxn), _I64)
            for a, r in enumerate(got):
                qcols[a, :len(r[0])] = r[0]
        nums = np.array([r[1] for r in got], _I64).reshape(nq, 7)
        self.qcols = qcols
        self.qn = qn = nums[:, 0].copy()
        self.qwin = nums[:, 1].copy()
        self.qsince = nums[:, 2].copy()
        self.qorder = nums[:, 3].copy()
        self.qid = nums[:, 4].copy()
        self.qrecent = nums[:, 5].astype(bool)
        self.all_recent = bool(self.qrecent.all())
        self.qname = np.array([q.name for q in seq] + [""], object)[:-1]
        self.placeholders = [q.count_only for q in seq]
        self.qvars = nums[:, 6].copy()
        self.vars_of = list(groups)
        self.any_dsj = any(e.dsj for e in net.ecqs.values())
        # the links (query, index >= 1) grouped by R-CLink: (column of their class, column of
        # the previous class), CSR; each group's largest window
        w = self.snap.shape[1]
        self.width = w
        links = qn - 1  # the links (query, index >= 1) of each query, in order
        lq = np.repeat(np.arange(nq, dtype=_I64), links)
        li = np.arange(len(lq), dtype=_I64) - np.repeat(np.cumsum(links) - links, links) + 1
        cx = qcols[lq, li]
        cp = qcols[lq, li - 1]
        g = cx * w + cp
        o = np.argsort(g, kind="stable")
        cnt = np.bincount(g, minlength=w * w).astype(_I64)
        self.gcnt, self.goff = cnt, np.cumsum(cnt) - cnt
        self.lq, self.li = lq[o], li[o]
        rwin = np.full((w, w), -1, _I64)
        np.maximum.at(rwin, (cx, cp), self.qwin[lq])
        # per class, its R-CLinks: the previous classes it has links from, and their window
        rx, rp = np.nonzero(rwin >= 0)
        self.rcnt = np.bincount(rx, minlength=w).astype(_I64)
        self.roff = np.cumsum(self.rcnt) - self.rcnt
        self.rprev = rp.astype(_I64)
        self.rwin_of = rwin[rx, rp]
        self.wmax = max((e.window for e in net.ecqs.values()), default=0.0)
        self.tables_dirty = False
        return True

    def fits(self) -> bool:
        """The ``last`` table (keys x classes) stays within :data:`_MAX_CELLS` (the keys grow
        with every batch, so the network asks before each one)."""
        return (len(self.net.keys) + 1) * self.ncols <= _MAX_CELLS

    def _add_col(self, ecq: _ECQ) -> None:
        self.col[ecq] = self.ncols
        self.ecq_of.append(ecq)
        self.ncols += 1
        if self.snap.shape[1] < self.ncols:
            grow = max(self.ncols, 2 * self.snap.shape[1], 8)
            s = np.full((self.snap.shape[0], grow), -1, _I64)
            s[:, :self.snap.shape[1]] = self.snap
            self.snap = s
            last = np.full((self.last.shape[0], grow), -1, _I64)
            last[:, :self.last.shape[1]] = self.last
            self.last = last

    def _keys_cap(self, nkeys: int) -> None:
        if self.last.shape[0] < nkeys:
            grow = max(nkeys, 2 * self.last.shape[0], 64)
            last = np.full((grow, self.last.shape[1]), -1, _I64)
            last[:self.last.shape[0]] = self.last
            self.last = last

    def rebuild(self) -> None:
        """Rows from the network's stored instances (after the per-event path ran, a restore,
        or a removed class): a chain through stored instances only is the same chain."""
        net = self.net
        self.base = 0
        self.n = 0
        self.last[:] = -1
        insts = [(inst, self.col[e]) for e in net.ecqs.values() for inst in e.siq]
        insts.sort(key=lambda x: x[0][0])
        self._keys_cap(len(net.keys) + 1)
        if insts:
            pos = np.array([i[0] for i, _c in insts], _I64)
            ts = np.array([i[1] for i, _c in insts], _I64)
            ids = [i[2] for i, _c in insts]
            keys = np.array([i[5] for i, _c in insts], _I64)
            cols = np.array([c for _i, c in insts], _I64)
            step = max(1, _CHUNK_CELLS // max(1, self.snap.shape[1]))
            for a in range(0, len(insts), step):
                self._append(keys[a:a + step], cols[a:a + step], ts[a:a + step],
                             pos[a:a + step], ids[a:a + step])
        self.valid = True

    # ------------------------------------------------------------------ rows
    def _append(self, keys: np.ndarray[Any, Any], cols: np.ndarray[Any, Any],
                ts: np.ndarray[Any, Any], pos: np.ndarray[Any, Any], ids: list[Any]) -> int:
        """Append one row per event (in order) with its snapshot row; returns the global row of
        the first."""
        m = len(keys)
        if self.n + m > len(self.ts):
            self._make_room(m)
        r0 = self.base + self.n
        rows = np.arange(r0, r0 + m, dtype=_I64)
        width = self.snap.shape[1]
        order = np.argsort(keys, kind="stable")
        ks = keys[order]
        start = np.empty(m, bool)
        start[0] = True
        start[1:] = ks[1:] != ks[:-1]
        g = np.cumsum(start) - 1
        base = self.base
        span = r0 + m - base + 2  # encoded values are row - base + 1 in [0, span)
        b = np.zeros((m, width), _I64)
        co = cols[order]
        ro = rows[order]
        if m > 1:
            b[np.arange(1, m), co[:-1]] = ro[:-1] - base + 1
        st = np.flatnonzero(start)
        carry = self.last[ks[st]]
        b[st] = np.where(carry >= base, carry - base + 1, 0)
        off = (g * span)[:, None]
        b += off
        np.maximum.accumulate(b, axis=0, out=b)
        b -= off
        snap_sorted = b + (base - 1)
        snap_sorted[b == 0] = -1
        a = self.n
        self.snap[a + order] = snap_sorted  # rows in event order
        # the key's newest row of each class after the batch
        gl = np.append(st[1:] - 1, m - 1)
        fin = snap_sorted[gl]
        fin[np.arange(len(gl)), co[gl]] = ro[gl]
        self.last[ks[gl]] = fin
        self.ts[a:a + m] = ts
        self.pos[a:a + m] = pos
        self.ids[a:a + m] = np.fromiter(ids, dtype=object, count=m)
        self.n += m
        return r0

    def _make_room(self, m: int) -> None:
        """Drop the rows older than every window (a prefix: time-ordered) and grow."""
        net = self.net
        drop = 0
        if self.n and self.wmax != float("inf"):
            cutoff = net.max_ts - self.wmax
            drop = int(np.searchsorted(self.ts[:self.n], cutoff, side="left"))
        keep = self.n - drop
        cap = max(len(self.ts), 1024)
        while keep + m > cap // 2 and keep + m > cap - cap // 4:
            cap *= 2
        if cap < keep + m:
            cap = keep + m
        width = self.snap.shape[1]
        ts = np.empty(cap, _I64)
        pos = np.empty(cap, _I64)
        ids = np.empty(cap, object)
        snap = np.empty((cap, width), _I64)
        ts[:keep] = self.ts[drop:self.n]
        pos[:keep] = self.pos[drop:self.n]
        ids[:keep] = self.ids[drop:self.n]
        snap[:keep] = self.snap[drop:self.n]
        self.ts, self.pos, self.ids, self.snap = ts, pos, ids, snap
        self.base += drop
        self.n = keep

    def _look(self, x: np.ndarray[Any, Any], c: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The snapshot entry of class ``c`` of global row ``x`` (-1 where ``x`` is none or
        dropped)."""
        ok = x >= self.base
        r = np.where(ok, x - self.base, 0)
        return np.where(ok, self.snap[r, c], -1)

    # ------------------------------------------------------------------ one batch
    def process(self, ecqs: list[_ECQ], keys: list[int], tl: list[int], il: list[Any],
                offs: list[int], gpos0: int, n_batch: int, out: list[Entry]) -> None:
        """The events (their ECQ, key, timestamp, id, offset in the batch) through the network,
        in chunks; cleaning as the per-event path does."""
        net = self.net
        self._keys_cap(len(net.keys) + 1)
        step = max(16, _CHUNK_CELLS // max(1, self.snap.shape[1]))
        next_at = net.clean_period - net.since_clean
        last_clean = -net.since_clean
        for a in range(0, len(keys), step):
            b = a + step
            next_at, last_clean = self._chunk(ecqs[a:b], keys[a:b], tl[a:b], il[a:b],
                                              offs[a:b], gpos0, out, next_at, last_clean)
        net.since_clean = n_batch - last_clean

    def _chunk(self, ecqs: list[_ECQ], keys: list[int], tl: list[int], il: list[Any],
               offs: list[int], gpos0: int, out: list[Entry], next_at: int,
               last_clean: int) -> tuple[int, int]:
        net = self.net
        col = self.col
        m = len(keys)
        kk = np.array(keys, _I64)
        cc = np.array([col[e] for e in ecqs], _I64)
        tt = np.array(tl, _I64)
        pp = np.array(offs, _I64) + gpos0
        r0 = self._append(kk, cc, tt, pp, il)
        base = self.base
        # the R-CLinks to probe: per event and R-CLink of its class, the newest instance of the
        # key of the R-CLink's previous class, if inside its largest window; then every link of
        # those R-CLinks
        recent: list[tuple[int, Match]] = []
        rb: list[int] = []
        mj: list[int] = []
        mo: list[int] = []
        ms: list[Match] = []
        walks: dict[int, list[_Query]] = {}
        pmbs: list[tuple[Any, ...] | None] = [None] * m
        snap = self.snap[r0 - base:r0 - base + m]
        c1 = self.rcnt[cc]
        t1 = int(c1.sum())
        j1 = np.repeat(np.arange(m, dtype=_I64), c1)
        k1 = self.roff[cc][j1] + (np.arange(t1, dtype=_I64) - (np.cumsum(c1) - c1)[j1])
        pp = self.rprev[k1]
        xp = snap[j1, pp]
        ok1 = xp >= base
        ok1 &= tt[j1] - self.ts[np.where(ok1, xp - base, 0)] <= self.rwin_of[k1]
        sel1 = np.flatnonzero(ok1)
        jj, pp, xp = j1[sel1], pp[sel1], xp[sel1]
        g = cc[jj] * self.width + pp
        cnt = self.gcnt[g]
        tot = int(cnt.sum())
        if tot:
            rep = np.repeat(np.arange(len(g), dtype=_I64), cnt)
            first = np.cumsum(cnt) - cnt
            li = self.goff[g][rep] + (np.arange(tot, dtype=_I64) - first[rep])
            q = self.lq[li]
            i = self.li[li]
            jr = jj[rep]
            x = xp[rep]
            qc = self.qcols
            chain = [x]
            x0 = x
            for d in range(2, self.maxn):
                sub = np.flatnonzero(i - d >= 0)
                if len(sub) == 0:
                    break
                if d == 2:
                    x0 = x.copy()
                nx = np.full(tot, -1, _I64)
                nx[sub] = self._look(chain[-1][sub], qc[q[sub], i[sub] - d])
                chain.append(nx)
                x0[sub] = nx[sub]
            ok = x0 >= base
            r = np.where(ok, x0 - base, 0)
            start = self.ts[r]
            ok &= (tt[jr] - start <= self.qwin[q]) & (self.pos[r] >= self.qsince[q])
            fine = i == self.qn[q] - 1
            pm = np.flatnonzero(ok & ~fine)
            if len(pm):
                # lazy PMBs: each instance's entries are a slice of these arrays (pairs are
                # in event order), made a dict only when read
                pj = jr[pm]
                pq = self.qid[q[pm]]
                ps = start[pm]
                uj, ua = np.unique(pj, return_index=True)
                ub = np.append(ua[1:], len(pj))
                for j, a, b in zip(uj.tolist(), ua.tolist(), ub.tolist(), strict=True):
                    pmbs[j] = (pq, ps, a, b)
                self.lazy = True
            done = np.flatnonzero(ok & fine)
            if len(done):
                mj, mo, ms = self._matches(done, jr, q, chain, start, r0 - base, walks)
        # direct delivery (no per-event lists) when nothing else completes at these events and
        # no cap can be reached
        direct = not walks and not self.any_dsj and (not mj or (
            len(mj) + net.call_total <= net.call_cap
            and int(np.bincount(mj).max()) <= net.event_cap))
        if not direct and mj:
            recent = list(zip(mo, ms, strict=True))
            rb = np.searchsorted(np.array(mj, _I64), np.arange(m + 1)).tolist()
        # the events in order: cleaning, completions, insert phase, delivery
        view_all = net.view
        for j in range(m):
            off = offs[j]
            if off >= next_at:
                ts = tl[j]
                if ts > net.max_ts:
                    net.max_ts = ts
                net.clean()
                last_clean = off
                next_at = off + net.clean_period
            ecq = ecqs[j]
            found = recent[rb[j]:rb[j + 1]] if rb else []
            k = keys[j]
            extra = False
            if direct:
                pass
            elif walks:
                qs = walks.get(j)
                if qs:
                    for qq in qs:
                        net._complete_all(qq, k, gpos0 + off, tl[j], il[j], found)
                    extra = True
            if ecq.dsj and not direct:
                ts = tl[j]
                eid = il[j]
                for link in ecq.dsj:
                    qq = link.query
                    found.append((qq.order, qq.count_only or
                                  Match(qq.spec.name, {qq.spec.vars[link.index]: eid}, ts, ts)))
                extra = True
            pmb = pmbs[j]
            if ecq.store_all or pmb:
                head = ecq.head
                inst = [gpos0 + off, tl[j], il[j], head.get(k), pmb, k]
                ecq.siq.append(inst)
                head[k] = inst
                view = view_all.get(k)
                if view is None:
                    view = view_all[k] = {}
                view[ecq] = inst
            if found:
                net._deliver(found, extra, gpos0 + off, il[j], out)
        if direct and mj:
            net.call_total += len(mj)
            out += zip([gpos0 + offs[j] for j in mj], mo, ms, strict=True)
        return next_at, last_clean

    def _matches(self, done: np.ndarray[Any, Any], jr: np.ndarray[Any, Any],
                 q: np.ndarray[Any, Any], chain: list[np.ndarray[Any, Any]],
                 start: np.ndarray[Any, Any], r0: int,
                 walks: dict[int, list[_Query]]) -> tuple[list[int], list[int], list[Match]]:
        """The EMIT RECENT matches the events complete, by event then query order: each one's
        event (index in the chunk), query order and match (EMIT ALL queries go to ``walks``:
        enumerated by the per-event path's walk, in order). ``r0``: the chunk's first row."""
        dj = jr[done]
        dq = q[done]
        o = np.lexsort((self.qorder[dq], dj))
        done, dj, dq = done[o], dj[o], dq[o]
        if not self.all_recent:
            rec = self.qrecent[dq]
            if not rec.all():
                qs = self.queries
                for j, a in zip(dj[~rec].tolist(), dq[~rec].tolist(), strict=True):
                    walks.setdefault(j, []).append(qs[a])
                done, dj, dq = done[rec], dj[rec], dq[rec]
        djl = dj.tolist()
        orders = self.qorder[dq].tolist()
        if self.net.count_only:
            ph = self.placeholders
            return djl, orders, [ph[a] for a in dq.tolist()]
        # the chain's ids, from the first class to the completing event, per group of
        # queries with the same variables
        ids = self.ids
        base = self.base
        starts = start[done].tolist()
        ends = self.ts[r0 + dj].tolist()
        eids = self.ids[r0 + dj].tolist()
        names = self.qname[dq].tolist()
        stacked = np.stack(chain)
        vg = self.qvars[dq]
        groups = np.unique(vg)
        bound: list[dict[str, Any]] = []
        for gi in groups.tolist():
            vs = self.vars_of[gi]
            n = len(vs)
            rows = np.flatnonzero(vg == gi) if len(groups) > 1 else None
            dn = done if rows is None else done[rows]
            cols: list[list[Any]] = []
            for c in range(n - 1):  # chain[d] holds the instance of class index n - 2 - d
                got = stacked[n - 2 - c, dn]
                cols.append(ids[np.where(got >= base, got - base, 0)].tolist())
            ev = eids if rows is None else [eids[e] for e in rows.tolist()]
            if n == 3:
                k0, k1, k2 = vs
                ds = [{k0: a, k1: b, k2: c} for a, b, c in zip(cols[0], cols[1], ev,
                                                               strict=True)]
            elif n == 2:
                k0, k1 = vs
                ds = [{k0: a, k1: b} for a, b in zip(cols[0], ev, strict=True)]
            else:
                ds = [dict(zip(vs, r, strict=True)) for r in zip(*cols, ev, strict=True)]
            if rows is None:
                bound = ds
            else:
                if not bound:
                    bound = [{}] * len(dj)
                for e, d in zip(rows.tolist(), ds, strict=True):
                    bound[e] = d
        return djl, orders, list(map(Match, names, bound, starts, ends))


__all__ = ["VecState"]
