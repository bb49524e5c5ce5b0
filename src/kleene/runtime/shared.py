"""SCEMon's shared event-queue network: many queries evaluated in one pass over the events.

One *event-centric composable queue* (ECQ) per event class (Lee et al., DEBS 2011):

* the **shared instance queue** (SIQ): the stored instances of the class in arrival order, one
  copy each however many queries use it, with a hash table ``head`` from the partition key
  (SCEMon's source id) to the newest instance of that key; every instance points to the
  previous instance of the same key (``prev``), so a key's instances are a linked list;
* the **composition link table** (CLT): one link per query the class takes part in (kind,
  window, the ECQs to probe, INIT / FINE position); the **reverse CLT** (R-CLT) groups the
  sequence links by the ECQ they probe, so one probe serves every query of the group
  (sub-pattern sharing);
* the **partial matching block** (PMB) of each instance: ``{query id: t_start}``, the latest
  start time of a partial match of that query ending at the instance. *PMB reduction*: the
  entry of a query whose first class is the instance's class is not stored (it is the
  instance's own timestamp).

A network of sequences and disjunctions of plain classes runs the test phase vectorized over
each batch (:mod:`kleene.runtime.shared_vec`), with the same matches, PMBs and instances.

Processing an event is the paper's *test* phase (probe the preceding ECQ's newest instance of
the same key: O(1), extend or complete partial matches) and *insert* phase (append the instance
once, if some query may extend it later). Cleaning (every ``clean_period`` events) drops
instances older than the largest window of the queries using the class, from the front of each
SIQ. Matches are exactly those of docs/semantics.md for the supported shapes (SEQ / AND / OR of
single events of distinct types, skip-till-any-match, a time window, EMIT ALL or RECENT), in the
documented order; see docs/semantics.md, "Query sets".

Why this is not a :class:`~kleene.runtime.matcher.Matcher`: a matcher belongs to one plan and
gets one query's candidate events per key; the network's point is that one event is tested and
stored once for every query, so it sits beside :class:`~kleene.runtime.engine.Runtime` and is
driven by the query-set runtime (``kleene.queryset``).
"""

from __future__ import annotations

import warnings
from collections import deque
from itertools import product
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CapacityError, EngineError
from ..events import Match
from ..events.model import ID, TS, TYPE
from ..frozen import dataclass

if TYPE_CHECKING:  # the predicate is built by kleene.plans.shared; the network only calls it
    from ..plan.vector import VectorPred

SEQ, CNJ, DSJ = "seq", "and", "or"


@dataclass(frozen=True, slots=True)
class SharedSpec:
    """One query as the network evaluates it (plain data, no AST)."""

    name: str
    kind: str
    """``seq``, ``and`` or ``or``."""
    types: tuple[str, ...]
    """The event type of each variable, in pattern order (distinct)."""
    vars: tuple[str, ...]
    window_us: int | None
    """``WITHIN`` in microseconds (required for ``seq`` / ``and`` of two or more)."""
    recent: bool
    """EMIT RECENT (else EMIT ALL)."""
    key_attrs: tuple[str, ...]
    """PARTITION BY and equivalence attributes: SCEMon's source id."""
    filters: tuple[ClassFilter | None, ...] = ()
    """Per variable (empty: none): its one-variable WHERE conjuncts. A variable with a filter
    reads the ECQ of the *virtual class* (type, filter), shared by every query whose variable
    has the same type and the same conditions (up to the variable's name)."""

    def ecq_names(self) -> tuple[str, ...]:
        """The ECQ of each variable: its type, or its virtual class ``type WHERE ...``."""
        if not self.filters:
            return self.types
        return tuple(t if f is None else f"{t} WHERE {f.signature}"
                     for t, f in zip(self.types, self.filters, strict=True))


@dataclass(frozen=True, slots=True)
class ClassFilter:
    """The one-variable WHERE conjuncts of a variable, evaluated once per batch over the events
    of its type for every query that shares them: Arrow kernels where they can (the engine's
    :class:`~kleene.plan.vector.VectorPred`), the compiled per-row functions elsewhere."""

    signature: str
    """The conjuncts with the variable's name left out, canonical (the sharing key)."""
    pred: VectorPred
    attrs: tuple[str, ...]
    """The attributes the conjuncts read (the record layout of the per-row functions)."""

    def mask(self, t: pa.Table) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """TRUE-only mask of the rows of ``t`` that satisfy every conjunct."""
        m, left = self.pred.mask(t)
        if not left:
            return m
        rows = np.flatnonzero(m)
        if len(rows) == 0:
            return m
        from .engine import _pylist

        sub = t.take(pa.array(rows))
        names = sub.column_names
        cols: list[list[Any]] = [[0] * len(rows), sub.column(TS).to_numpy().tolist(),
                                 sub.column(ID).to_pylist(), [0] * len(rows), [0] * len(rows)]
        for a in self.attrs:  # the engine's record layout (kleene.plan.layout)
            if a in names:
                col = sub.column(a)
            elif a in ("ts", "type", "id"):
                col = sub.column("__" + a)
            else:
                cols.append([None] * len(rows))
                continue
            if pa.types.is_timestamp(col.type):
                col = col.cast(pa.timestamp("us", col.type.tz)).cast(pa.int64())
            cols.append(_pylist(col))
        fns = [self.pred.row_fns[k].fn for k in left]
        for j, r in enumerate(zip(*cols, strict=True)):
            b = (r,)
            for fn in fns:
                if fn(b, 0) is not True:
                    m[rows[j]] = False
                    break
        return m


# instance slots (a list, so cleaning can cut ``prev``)
_POS, _TS, _ID, _PREV, _PMB, _KEY = range(6)
_INF = float("inf")


class _Query:
    __slots__ = ("qid", "spec", "order", "since", "ecqs", "window", "count_only", "name",
                 "vars", "n", "recent")

    def __init__(self, qid: int, spec: SharedSpec, order: int, since: int,
                 count_only: bool = False) -> None:
        self.count_only = Match(spec.name, {}, 0, 0) if count_only else None
        """Count mode: the placeholder every match of the query is (no bindings built)."""
        self.qid = qid
        self.spec = spec
        self.order = order
        self.since = since
        self.ecqs: list[_ECQ] = []
        self.window: float = _INF if spec.window_us is None else spec.window_us
        self.name = spec.name
        self.vars = spec.vars
        self.n = len(spec.types)
        self.recent = spec.recent


class _Link:
    """CLink(ECQ, Q): the query, its kind, the variable index, the ECQs to probe, flags."""

    __slots__ = ("query", "kind", "index", "probe", "init", "fine", "prev_init")

    def __init__(self, query: _Query, index: int, probe: list[_ECQ]) -> None:
        self.query = query
        self.kind = query.spec.kind
        self.index = index
        self.probe = probe
        n = len(query.spec.types)
        self.init = self.kind != SEQ or index == 0
        self.fine = self.kind != SEQ or index == n - 1
        self.prev_init = self.kind == SEQ and index == 1


class _RLink:
    """R-CLink: the sequence links of one ECQ that probe the same ECQ (sub-pattern sharing),
    their largest window, the links whose probed ECQ starts the sequence (``init``: the probed
    instance's own timestamp is the start) and the others by query id (``mid``: read from the
    probed instance's PMB)."""

    __slots__ = ("target", "window", "init", "mid", "init_ids", "init_done", "init_window",
                 "init_since", "mid_window")

    def __init__(self, target: _ECQ) -> None:
        self.target = target
        self.window: float = 0.0
        self.init: list[tuple[_Query, int, int, float, bool]] = []
        """(query, query id, since, window, completes here) per link."""
        self.mid: dict[int, tuple[_Query, float, bool]] = {}
        """query id -> (query, window, completes here)."""
        # the bulk path of the test phase (``refresh``): when the probed instance is inside
        # every init link's window and after every one's ``since``, the PMB entries of all of
        # them are one C-level dict update and only the completing links loop in Python
        self.init_ids: tuple[int, ...] = ()
        self.init_done: tuple[_Query, ...] = ()
        self.init_window: float = 0.0
        self.init_since = 0
        self.mid_window: float = 0.0

    def refresh(self) -> None:
        """Recompute the bulk-path summaries after a link is added or removed."""
        self.init_ids = tuple(x[1] for x in self.init if not x[4])
        self.init_done = tuple(x[0] for x in self.init if x[4])
        self.init_window = min((x[3] for x in self.init), default=0.0)
        self.init_since = max((x[2] for x in self.init), default=0)
        self.mid_window = min((x[1] for x in self.mid.values()), default=0.0)


class _ECQ:
    __slots__ = ("name", "type", "filter", "siq", "head", "clt", "rclt", "cnj", "dsj",
                 "store_all", "window")
    # rclt: probed ECQ -> R-CLink

    def __init__(self, name: str, type_: str, filter_: ClassFilter | None) -> None:
        self.name = name
        self.type = type_
        self.filter = filter_
        """The virtual class's conditions (None: every event of the type)."""
        self.siq: deque[list[Any]] = deque()
        self.head: dict[Any, list[Any]] = {}
        self.clt: dict[int, _Link] = {}
        self.rclt: dict[_ECQ, _RLink] = {}
        self.cnj: list[_Link] = []
        self.dsj: list[_Link] = []
        self.store_all = 0
        """How many queries start a sequence here or take part in a conjunction: if any,
        every instance is stored (otherwise only instances that extended a partial match)."""
        self.window: float = 0.0

    def link_add(self, link: _Link) -> None:
        """Add a CLink and update the R-CLT (O(1): adding a query costs no rebuild)."""
        q = link.query
        self.clt[q.qid] = link
        self.window = max(self.window, q.window)
        if link.kind == DSJ:
            self.dsj.append(link)
        elif link.kind == CNJ:
            self.cnj.append(link)
            self.store_all += 1
        elif link.index == 0:
            self.store_all += 1
        else:
            target = link.probe[0]
            r = self.rclt.get(target)
            if r is None:
                r = self.rclt[target] = _RLink(target)
            if link.prev_init:
                r.init.append((q, q.qid, q.since, q.window, link.fine))
            else:
                r.mid[q.qid] = (q, q.window, link.fine)
            r.window = max(r.window, q.window)
            r.refresh()

    def link_remove(self, link: _Link) -> None:
        """Remove a CLink; windows shrink to the largest of the remaining links."""
        q = link.query
        del self.clt[q.qid]
        if link.kind == DSJ:
            self.dsj.remove(link)
        elif link.kind == CNJ:
            self.cnj.remove(link)
            self.store_all -= 1
        elif link.index == 0:
            self.store_all -= 1
        else:
            r = self.rclt[link.probe[0]]
            if link.prev_init:
                r.init = [x for x in r.init if x[1] != q.qid]
            else:
                del r.mid[q.qid]
            if not r.init and not r.mid:
                del self.rclt[link.probe[0]]
            else:
                r.window = max([x[3] for x in r.init] + [x[1] for x in r.mid.values()])
                r.refresh()
        self.window = max((lk.query.window for lk in self.clt.values()), default=0.0)

def _pmb(inst: list[Any]) -> dict[int, float] | None:
    """An instance's PMB as a dict: the vectorized test phase leaves it *lazy* (``(query ids,
    starts, a, b)``: rows ``a:b`` of its batch's arrays) until something reads it."""
    p = inst[_PMB]
    if type(p) is tuple:
        q, st, a, b = p
        p = inst[_PMB] = dict(zip(q[a:b].tolist(), st[a:b].tolist(), strict=True))
    return p  # type: ignore[no-any-return]


def _walk(ecqs: list[_ECQ], i: int, k: int, before: int, lo: float, since: int, qid: int,
          acc: list[list[Any]], chains: list[list[list[Any]]]) -> None:
    """Every chain of instances of ``ecqs[0..i]`` (key ``k``) before ``before`` that starts at
    or after ``lo``: the instance of class i must carry a PMatch of the query (i > 0)."""
    inst = ecqs[i].head.get(k)
    while inst is not None:
        ip = inst[_POS]
        if inst[_TS] < lo or ip < since:
            return
        if ip < before:
            if i == 0:
                acc.append(inst)
                chains.append(acc[::-1])
                acc.pop()
            else:
                pmb = _pmb(inst)
                if pmb is not None and pmb.get(qid, -_INF) >= lo:
                    acc.append(inst)
                    _walk(ecqs, i - 1, k, ip, lo, since, qid, acc, chains)
                    acc.pop()
        inst = inst[_PREV]


def _order(ps: list[int]) -> tuple[int, ...]:
    """The output order of matches of one query completed by the same event, on their sorted
    positions p1 < ... < pn (docs/semantics.md §10): p1, then p(n-1), p(n-2), ..., p2 (pn is
    the completing event's: the same for all)."""
    return (ps[0], *reversed(ps[1:]))


Entry = tuple[int, int, Match]
"""(global position of the completing event, query order, match)."""

_first = itemgetter(0)


class SharedNetwork:
    """The ECQ network of the queries that share one partition key (``key_attrs``)."""

    vectorized = True
    """Take the batch-vectorized test phase (``kleene.runtime.shared_vec``) when the network
    allows it; False: always the per-event one (the reference the tests compare it with)."""

    def __init__(self, key_attrs: tuple[str, ...], *, clean_period: int = 100_000,
                 max_matches_per_event: int | None = 1_000_000,
                 max_matches_per_call: int | None = None,
                 on_cap: str = "error", count_only: bool = False) -> None:
        if clean_period < 1:
            raise EngineError(f"clean_period must be a positive number of events, not "
                              f"{clean_period!r}")
        self.key_attrs = key_attrs
        self.clean_period = int(clean_period)
        self.max_matches_per_event = max_matches_per_event
        self.max_matches_per_call = None if count_only else max_matches_per_call
        """Per query and ``process`` call (as ``Runtime``'s per push); not in count mode."""
        self.call_counts: dict[int, int] | None = None
        """Matches per query order made by the current ``process`` call (counted once the
        call's matches could reach ``max_matches_per_call``)."""
        self.call_total = 0
        self.event_cap: float = _INF if max_matches_per_event is None else max_matches_per_event
        self.call_cap: float = _INF if self.max_matches_per_call is None \
            else self.max_matches_per_call
        self.on_cap = on_cap
        self.warned = False
        self.count_only = count_only
        """Build no bindings: every match is its query's placeholder (``--count``)."""
        self.ecqs: dict[str, _ECQ] = {}
        self.by_type: dict[str, list[_ECQ]] = {}
        """Event type -> its ECQs (the type's own, then virtual classes with conditions)."""
        self.queries: dict[int, _Query] = {}
        self.view: dict[int, dict[_ECQ, list[Any]]] = {}
        """Per key: its newest stored instance of each class (the ECQs it can probe)."""
        self.keys: dict[Any, int] = {}
        """Partition key value -> small int (the SIQ hash key)."""
        self.max_ts = -(2 ** 62)
        self.since_clean = 0
        self.truncated_matches = 0
        self.cleanings = 0
        self.stored_log: deque[tuple[int, int]] = deque(maxlen=1000)
        """Stored instances before and after each recent cleaning (the paper's measure)."""
        from .shared_vec import VecState

        self.vec = VecState(self)
        self.vec_ok = False

    # ------------------------------------------------------------------ the network (Fig. 3)
    def add(self, qid: int, spec: SharedSpec, order: int, since: int) -> None:
        """Insert a query: create missing ECQs, add one CLink per class (and R-CLink)."""
        q = _Query(qid, spec, order, since, self.count_only)
        filters = spec.filters or (None,) * len(spec.types)
        for name, t, f in zip(spec.ecq_names(), spec.types, filters, strict=True):
            if name not in self.ecqs:
                ecq = self.ecqs[name] = _ECQ(name, t, f)
                group = self.by_type.setdefault(t, [])
                group.append(ecq)
                group.sort(key=lambda e: e.filter is not None)  # the plain class first
        q.ecqs = [self.ecqs[name] for name in spec.ecq_names()]
        for i, ecq in enumerate(q.ecqs):
            if spec.kind == SEQ:
                probe = [q.ecqs[i - 1]] if i > 0 else []
            elif spec.kind == CNJ:
                probe = [e for j, e in enumerate(q.ecqs) if j != i]
            else:
                probe = []
            ecq.link_add(_Link(q, i, probe))
        self.queries[qid] = q
        self.vec.tables_dirty = True

    def remove(self, qid: int) -> None:
        """Delete a query's CLinks; an ECQ whose CLT becomes empty is dropped with its
        instances. PMB entries of the query are freed with their instances by cleaning (the
        query id is never reused, so they are never read again)."""
        q = self.queries.pop(qid)
        self.vec.tables_dirty = True
        for ecq in q.ecqs:
            ecq.link_remove(ecq.clt[qid])
            if not ecq.clt:
                self.ecqs.pop(ecq.name, None)
                group = self.by_type[ecq.type]
                group.remove(ecq)
                if not group:
                    del self.by_type[ecq.type]
                for k in list(ecq.head):
                    v = self.view.get(k)
                    if v is not None:
                        v.pop(ecq, None)
                self.vec.valid = False

    def stored(self) -> int:
        """Instances stored in all SIQs (one copy per event)."""
        return sum(len(e.siq) for e in self.ecqs.values())

    def pmb_entries(self) -> int:
        """PMatch entries stored in all PMBs."""
        return sum(len(_pmb(i) or ()) for e in self.ecqs.values() for i in e.siq)

    # ------------------------------------------------------------------ one batch
    def process(self, t: pa.Table, gpos0: int) -> list[Entry]:
        """Run an ordered batch (rows ``gpos0 ...``) through the network; the matches of every
        query, in (completing position, query order, positions) order."""
        n = t.num_rows
        out: list[Entry] = []
        self.call_counts = None
        self.call_total = 0
        if n == 0 or not self.ecqs:
            return out
        ts_all = t.column(TS).to_numpy()
        sel, combos, codes = self._classes(t)
        if len(sel) == 0:
            self.max_ts = max(self.max_ts, int(ts_all[-1]))
            self.since_clean += n
            self._maybe_clean()
            return out
        sel_arr = pa.array(sel)
        keys = self._keys(t, sel_arr)
        cl = codes.tolist()
        tl = ts_all[sel].tolist()
        il = t.column(ID).take(sel_arr).to_pylist()
        offs = sel.tolist()
        vec = self.vec
        if self.vectorized:
            if vec.tables_dirty:
                self.vec_ok = vec.refresh()
                vec.tables_dirty = False  # also when refused: retried after the next add/remove
            if self.vec_ok and vec.fits():
                if not vec.valid:
                    vec.rebuild()
                vec.process([combos[c][0] for c in cl], keys, tl, il, offs, gpos0, n, out)
                self.max_ts = max(self.max_ts, int(ts_all[-1]))
                self._maybe_clean()
                return out
        vec.valid = False
        if vec.lazy:  # the per-event test phase reads PMBs as dicts
            vec.lazy = False
            for e in self.ecqs.values():
                for inst in e.siq:
                    _pmb(inst)
        # clean every clean_period input events, also inside a batch (before the event that
        # reaches the period: instances older than its window are useless from then on)
        next_at = self.clean_period - self.since_clean
        last_clean = -self.since_clean
        event = self._event
        for c, k, ts, eid, off in zip(cl, keys, tl, il, offs, strict=True):
            if off >= next_at:
                self.max_ts = max(self.max_ts, ts)
                self.clean()
                last_clean = off
                next_at = off + self.clean_period
            event(combos[c], k, gpos0 + off, ts, eid, out)
        self.max_ts = max(self.max_ts, int(ts_all[-1]))
        self.since_clean = n - last_clean
        self._maybe_clean()
        return out

    def _classes(self, t: pa.Table) -> tuple[np.ndarray[Any, Any], list[tuple[_ECQ, ...]],
                                             np.ndarray[Any, Any]]:
        """One type pass and one pass per distinct condition set, for every query: the rows
        some ECQ takes, the ECQ combinations, and each selected row's combination."""
        n = t.num_rows
        enc = pc.dictionary_encode(t.column(TYPE)).combine_chunks()
        names = enc.dictionary.to_pylist()
        idx = enc.indices.fill_null(len(names)).to_numpy(zero_copy_only=False).astype(np.int64)
        groups = [self.by_type.get(nm) if isinstance(nm, str) else None for nm in names]
        combos: list[tuple[_ECQ, ...]] = []
        if all(g is None or (len(g) == 1 and g[0].filter is None) for g in groups):
            # no conditions: a type's one ECQ (the common case: a lookup table)
            lut = np.full(len(names) + 1, -1, dtype=np.int64)
            for i, g in enumerate(groups):
                if g is not None:
                    lut[i] = len(combos)
                    combos.append((g[0],))
            code = lut[idx]
            sel = np.flatnonzero(code >= 0)
            return sel, combos, code[sel]
        code = np.full(n, -1, dtype=np.int64)
        for i, g in enumerate(groups):
            if g is None:
                continue
            rows = np.flatnonzero(idx == i)
            if len(rows) == 0:
                continue
            sub = t.take(pa.array(rows)) if any(e.filter is not None for e in g) else None
            bits = np.zeros(len(rows), dtype=np.int64)
            for j, e in enumerate(g):
                if e.filter is None:
                    bits |= 1 << j
                else:
                    assert sub is not None
                    bits |= e.filter.mask(sub).astype(np.int64) << j
            uniq, inv = np.unique(bits, return_inverse=True)
            ids = np.empty(len(uniq), dtype=np.int64)
            for u, b in enumerate(uniq.tolist()):
                if b == 0:
                    ids[u] = -1
                else:
                    ids[u] = len(combos)
                    combos.append(tuple(e for j, e in enumerate(g) if b >> j & 1))
            code[rows] = ids[inv]
        sel = np.flatnonzero(code >= 0)
        return sel, combos, code[sel]

    def _keys(self, t: pa.Table, sel: pa.Array) -> list[int]:
        """The partition key of each selected row, interned to a small int (one pass)."""
        n = len(sel)
        if not self.key_attrs:
            return [0] * n
        cols = []
        for a in self.key_attrs:
            if a in t.column_names:
                col = t.column(a).take(sel)
                if pa.types.is_dictionary(col.type):
                    col = col.cast(col.type.value_type)
                cols.append(col)
            else:
                cols.append(pa.nulls(n))
        intern = self.keys
        if len(cols) == 1:
            enc = pc.dictionary_encode(cols[0], null_encoding="encode").combine_chunks()
            vals = enc.dictionary.to_pylist()
            gid = np.array([intern.setdefault((v,), len(intern)) for v in vals],
                           dtype=np.int64)
            out: list[int] = gid[enc.indices.to_numpy(zero_copy_only=False)].tolist()
            return out
        rows = zip(*(c.to_pylist() for c in cols), strict=True)
        return [intern.setdefault(r, len(intern)) for r in rows]

    # ------------------------------------------------------------------ test + insert phases
    def _event(self, ecqs: tuple[_ECQ, ...], k: int, pos: int, ts: int, eid: Any,
               out: list[Entry]) -> None:
        """The event through each ECQ that takes it (its type's, and the virtual classes whose
        conditions it satisfies: a query reads at most one of them, its types being
        distinct), then its matches in (query order, the query's order), capped."""
        found: list[tuple[int, Match]] = []
        view = self.view.get(k)
        if view is None:
            view = self.view[k] = {}
        for ecq in ecqs:
            self._test_insert(ecq, k, pos, ts, eid, view, found)
        if found:
            self._deliver(found, True, pos, eid, out)

    def _deliver(self, found: list[tuple[int, Match]], unsorted: bool, pos: int, eid: Any,
                 out: list[Entry]) -> None:
        """An event's matches into ``out`` in query order (``unsorted``: sort them first),
        capped."""
        nf = len(found)
        if unsorted and nf > 1:
            found.sort(key=_first)  # stable: a query's matches keep their order
        # per-query cap accounting only once a cap could be reached: no query has more
        # matches in this event or call than all queries together
        if nf > self.event_cap or self.call_total + nf > self.call_cap:
            found = self._capped(found, eid, out)
        self.call_total += len(found)
        out += [(pos, o, m) for o, m in found]

    def _test_insert(self, ecq: _ECQ, k: int, pos: int, ts: int, eid: Any,
                     view: dict[_ECQ, list[Any]], found: list[tuple[int, Match]]) -> None:
        pmb: dict[int, float] = {}
        # sequences: probe once per R-CLink (sub-pattern sharing), visiting only the classes
        # this key has stored instances of
        rclt = ecq.rclt
        if rclt:
            rget = rclt.get
            for tgt, p in view.items():
                r = rget(tgt)
                if r is None:
                    continue
                pts = p[_TS]
                gap = ts - pts
                if gap > r.window:
                    continue
                if r.init:
                    if gap <= r.init_window and p[_POS] >= r.init_since:
                        if r.init_ids:  # every init link takes it: one dict update
                            pmb.update(dict.fromkeys(r.init_ids, pts))
                        for q in r.init_done:
                            self._complete_seq(q, p, k, pos, ts, eid, found)
                    else:
                        for q, qid, since, window, fine in r.init:
                            if p[_POS] < since or gap > window:
                                continue
                            if fine:
                                self._complete_seq(q, p, k, pos, ts, eid, found)
                            else:
                                pmb[qid] = pts
                ppmb = p[_PMB]
                if ppmb and r.mid:
                    mid = r.mid
                    hits = ppmb.keys() & mid.keys()  # C-level intersection
                    if not hits:
                        continue
                    for qid in hits:
                        tstart = ppmb[qid]
                        q, window, fine = mid[qid]
                        if ts - tstart > window:
                            continue
                        if fine:
                            self._complete_seq(q, p, k, pos, ts, eid, found)
                        else:
                            pmb[qid] = tstart
        # conjunctions: probe every other ECQ of the query (the newest instance is enough to
        # decide; the enumeration walks further back)
        for link in ecq.cnj:
            q = link.query
            lo = ts - q.window
            ok = True
            for o in link.probe:
                newest = o.head.get(k)
                if newest is None or newest[_TS] < lo or newest[_POS] < q.since:
                    ok = False
                    break
            if ok:
                self._complete_cnj(q, link, k, pos, ts, eid, found)
        # disjunctions: the event itself
        for link in ecq.dsj:
            q = link.query
            found.append((q.order, q.count_only or
                          Match(q.spec.name, {q.spec.vars[link.index]: eid}, ts, ts)))
        # insert phase: at most one copy, only if a later event may use it
        if ecq.store_all or pmb:
            inst = [pos, ts, eid, ecq.head.get(k), pmb or None, k]
            ecq.siq.append(inst)
            ecq.head[k] = inst
            view[ecq] = inst

    def _capped(self, found: list[tuple[int, Match]], eid: Any,
                out: list[Entry]) -> list[tuple[int, Match]]:
        """Each query's caps, as if it ran alone: ``max_matches_per_event`` on the matches
        this event completes, ``max_matches_per_call`` on those of this call; ``on_cap``
        ``error`` raises, ``truncate`` keeps the first ones and counts the rest."""
        mm, cap = self.max_matches_per_event, self.max_matches_per_call
        if cap is not None and self.call_counts is None:  # from now on, per query
            self.call_counts = {}
            for _g, o, _m in out:
                self.call_counts[o] = self.call_counts.get(o, 0) + 1
        kept: list[tuple[int, Match]] = []
        i, n = 0, len(found)
        while i < n:
            o = found[i][0]
            j = i + 1
            while j < n and found[j][0] == o:
                j += 1
            group = found[i:j]
            i = j
            if mm is not None and len(group) > mm:
                self._over(group, len(group) - mm, f"event {eid!r} completed {len(group)} "
                           f"matches, more than max_matches_per_event={mm}; raise the cap "
                           "(CLI --max-matches-per-event N, 0 for no cap)")
                del group[mm:]
            if cap is not None:
                assert self.call_counts is not None
                used = self.call_counts.get(o, 0)
                budget = cap - used if cap > used else 0
                if len(group) > budget:
                    self._over(group, len(group) - budget,
                               f"more than max_matches_per_call={cap} complete matches in "
                               f"one push/advance/close call (reached at event {eid!r}); "
                               "raise the cap (CLI --max-matches-per-call N, 0 for no cap) "
                               "or push smaller batches")
                    del group[budget:]
                self.call_counts[o] = used + len(group)
            kept += group
        return kept

    def _over(self, group: list[tuple[int, Match]], drop: int, what: str) -> None:
        name = group[0][1].query
        if self.on_cap != "truncate":
            raise CapacityError(f"query {name!r} (shared network): {what}, or keep the first "
                                "matches and count the rest (CLI --on-cap truncate; "
                                "on_cap='truncate')")
        self.truncated_matches += drop
        if not self.warned:
            self.warned = True
            warnings.warn(f"query {name!r}: a cap was reached and on_cap='truncate' dropped "
                          "matches in the shared network; see truncated_matches",
                          RuntimeWarning, stacklevel=6)

    def _complete_seq(self, q: _Query, p: list[Any], k: int, pos: int, ts: int, eid: Any,
                      found: list[tuple[int, Match]]) -> None:
        """Complete query ``q`` at the event (``p``: the probed instance of the previous
        class that extended it)."""
        if q.recent:
            if q.count_only is not None:  # the probe proved the one most recent match
                found.append((q.order, q.count_only))
                return
            n = q.n
            if n == 2:
                bound = dict(zip(q.vars, (p[_ID], eid), strict=True))
                found.append((q.order, Match(q.name, bound, p[_TS], ts)))
                return
            lo = ts - q.window
            qid, since = q.qid, q.since
            ecqs = q.ecqs
            # the probed instance p is the newest qualifying one of the previous class; from
            # there backwards, the newest qualifying instance of each earlier class
            ids = [eid, p[_ID]]
            before = p[_POS]
            first_ts = p[_TS]
            for i in range(n - 3, -1, -1):
                inst = ecqs[i].head.get(k)
                while inst is not None:
                    ip = inst[_POS]
                    if inst[_TS] < lo or ip < since:
                        inst = None
                        break
                    if ip < before and (i == 0 or (inst[_PMB] is not None
                                                   and inst[_PMB].get(qid, -_INF) >= lo)):
                        break
                    inst = inst[_PREV]
                if inst is None:  # cannot happen when the probe succeeded; be safe
                    return
                ids.append(inst[_ID])
                before = inst[_POS]
                first_ts = inst[_TS]
            ids.reverse()
            found.append((q.order, Match(q.name, dict(zip(q.vars, ids, strict=True)), first_ts,
                                         ts)))
            return
        self._complete_all(q, k, pos, ts, eid, found)

    def _complete_all(self, q: _Query, k: int, pos: int, ts: int, eid: Any,
                      found: list[tuple[int, Match]]) -> None:
        """EMIT ALL: every chain of instances that completes ``q`` at the event, in the
        order of their positions."""
        n = q.n
        lo = ts - q.window
        qid, since = q.qid, q.since
        ecqs = q.ecqs
        chains: list[list[list[Any]]] = []
        _walk(ecqs, n - 2, k, pos, lo, since, qid, [], chains)
        if len(chains) > 1:
            chains.sort(key=lambda c: _order([x[_POS] for x in c]))
        for c in chains:
            self._emit(q, c, pos, ts, eid, found)

    def _complete_cnj(self, q: _Query, link: _Link, k: int, pos: int, ts: int, eid: Any,
                      found: list[tuple[int, Match]]) -> None:
        lo = ts - q.window
        since = q.since
        pools: list[list[list[Any]]] = []
        for o in link.probe:
            pool: list[list[Any]] = []
            inst = o.head.get(k)
            while inst is not None and inst[_TS] >= lo and inst[_POS] >= since:
                pool.append(inst)
                if q.spec.recent:
                    break
                inst = inst[_PREV]
            pools.append(pool)
        spec = q.spec
        me = link.index
        combos: list[tuple[tuple[int, ...], tuple[list[Any], ...]]] = []
        for combo in product(*pools):
            combos.append((_order(sorted([x[_POS] for x in combo] + [pos])), combo))
        combos.sort(key=lambda c: c[0])
        if q.count_only is not None:
            found.extend((q.order, q.count_only) for _ps, _c in combos)
            return
        for _ps, combo in combos:
            ids: list[Any] = list(x[_ID] for x in combo)
            ids.insert(me, eid)
            start = min([x[_TS] for x in combo] + [ts])
            found.append((q.order, Match(spec.name, dict(zip(spec.vars, ids, strict=True)),
                                         start, ts)))

    @staticmethod
    def _emit(q: _Query, chain: list[list[Any]], pos: int, ts: int, eid: Any,
              found: list[tuple[int, Match]]) -> None:
        if q.count_only is not None:
            found.append((q.order, q.count_only))
            return
        spec = q.spec
        ids = [x[_ID] for x in chain]
        ids.append(eid)
        found.append((q.order, Match(spec.name, dict(zip(spec.vars, ids, strict=True)),
                                     chain[0][_TS], ts)))

    # ------------------------------------------------------------------ cleaning
    def _maybe_clean(self) -> None:
        if self.since_clean >= self.clean_period:
            self.clean()

    def clean(self) -> None:
        """Drop instances older than the largest window of the queries using their class
        (time-ordered SIQs: the obsolete instances are a prefix)."""
        self.since_clean = 0
        self.cleanings += 1
        before = self.stored()
        for ecq in self.ecqs.values():
            siq, head = ecq.siq, ecq.head
            cutoff = self.max_ts - ecq.window
            while siq and siq[0][_TS] < cutoff:
                inst = siq.popleft()
                inst[_PREV] = None
                inst[_PMB] = None
                k = inst[_KEY]
                if head.get(k) is inst:
                    del head[k]
                    v = self.view[k]
                    del v[ecq]
                    if not v:
                        del self.view[k]
        self.stored_log.append((before, self.stored()))

    # ------------------------------------------------------------------ snapshot / restore
    def dump(self) -> dict[str, Any]:
        """The network's instances as plain data (queries are re-added by the owner)."""
        return {
            "siq": {name: [[i[_POS], i[_TS], i[_ID], _pmb(i), i[_KEY]] for i in e.siq]
                    for name, e in self.ecqs.items()},
            "keys": list(self.keys.items()), "max_ts": self.max_ts,
            "since_clean": self.since_clean, "truncated": self.truncated_matches,
        }

    def load(self, data: dict[str, Any]) -> None:
        """Rebuild SIQs, hash heads and ``prev`` links from :meth:`dump`'s data."""
        self.keys = {tuple(k) if isinstance(k, list) else k: v for k, v in data["keys"]}
        self.max_ts = data["max_ts"]
        self.since_clean = data["since_clean"]
        self.truncated_matches = data["truncated"]
        self.view = {}
        self.vec.valid = False
        for ecq in self.ecqs.values():
            ecq.siq.clear()
            ecq.head.clear()
        for name, rows in data["siq"].items():
            target = self.ecqs.get(name)
            if target is None:
                continue
            ecq = target
            for pos, ts, eid, pmb, k in rows:
                inst = [pos, ts, eid, ecq.head.get(k), pmb, k]
                ecq.siq.append(inst)
                ecq.head[k] = inst
                self.view.setdefault(k, {})[ecq] = inst


__all__ = ["CNJ", "DSJ", "SEQ", "Entry", "SharedNetwork", "SharedSpec"]
