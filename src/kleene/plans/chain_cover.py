"""CoverMatch (LinkedCEP's Algorithm 1) computed directly on the chains: ``EMIT COVERAGE``
without enumerating every match (docs/semantics.md 16, docs/engine.md "The chain plan").

The coverage set is the set of *group maxima*: two matches can only cover each other when they
bind the same variables with lists of equal length and each of their events lies in the same
run (docs/semantics.md 16) -- call that tuple of runs the match's *group*. When every condition
is decided by the storage (one-variable candidate masks, equality / PARTITION BY routing) and
the window is the whole pattern's, the matches of one group are closed under the elementwise
maximum of their positions (the order between states, each run and the window all survive it),
so each group has exactly one match that no other match covers: its maximum. That maximum is
what the paper's chain tail is.

Storage, per key and per state ``k`` (a *partition*): a dict from the group of a partial match
that ends in state ``k`` to that group's maximum so far (the exposed tail of its chain). An
event that state ``k`` takes extends the tail of every group of each source partition (the
largest partial match of a group has the latest first event, so if any member of the group
fits the window with the event, the tail does) and becomes the new tail of the extended group
(it covers the old tail: same runs, every position at least as large). A Kleene state also
extends its own tails (one more element). Nothing else is stored: no node per event, no
snapshot join, and no match is ever enumerated. Per event the work is the number of live
groups of the source partitions (the paper's O(K^2)).

Release (streaming): a pending coverage is *final* -- no later event can be part of a match
covering it -- when the run of its last event is over (a relevant event that its variable does
not take came since: a covering match must put a new event in that run), or when the run of
its first event is over and the window is past it (the first event of a covering match lies in
that run, so no later event fits the window with it). Final coverages go out as they become
final; the runtime orders them (a pending coverage holds back every later output, as a
trailing NOT does). Everything pending at the end of the stream is final.

Caps: ``max_runs_per_partition`` counts the stored tails and pending coverages of a key;
``max_matches_per_event`` the coverages one event updates; ``max_matches_per_call`` the
coverages a call releases or adds to the pending ones. ``on_cap='truncate'`` drops the oldest
tails, or the coverages over the cap, and counts them.

Not here (the chain plan's enumeration path computes the coverage from every match at the end
of the stream): conditions the storage does not decide (between events, list-closing,
aggregates), PICK, AFTER MATCH SKIP.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from ..frozen import dataclass
from ..plan.expr import GPOS, TS, WPOS
from ..runtime.candidate import Candidate, cand_state
from ..runtime.caps import too_many_matches, too_many_runs
from ..runtime.linear import PartState
from ..runtime.matcher import MatcherOptions
from .chain import ChainMatcher
from .registry import CompiledPlan

Rec = tuple[Any, ...]
Node = tuple[tuple[Any, ...], int, int]
"""A tail: the values per state so far (an event, a tuple of events for a list, ``()`` for a
skipped ``*``), the timestamp and window position of its first event."""
Entry = tuple[Candidate, int, int]
_NEG = -(1 << 62)
"""A pending coverage: the candidate, the state of its first event and that event's run."""


@dataclass(slots=True)
class CoverState(PartState):
    """Per-key state of :class:`CoverMatcher`."""

    tails: list[dict[tuple[Any, ...], Node]] = field(default_factory=list)
    """Per state: group (runs per state) -> the group's largest partial match."""
    cov: list[dict[tuple[Any, ...], Entry]] = field(default_factory=list)
    """Per accepting state (that of the match's last event): group -> pending coverage."""
    cur_run: list[int] = field(default_factory=list)
    """Per state: the run the key's relevant events are in (its first position), -1: none."""
    cur_end: list[tuple[int, int]] = field(default_factory=list)
    """Per state: timestamp and window position of the open run's latest event."""
    ended: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    """(state, run) -> its last event's timestamp and window position, for closed runs of
    states a match can start in (window finality)."""
    prev_bits: int = 0
    tick: int = 0


class CoverMatcher(ChainMatcher):
    """CoverMatch on the chain partitions (see the module docstring)."""

    def __init__(self, cp: CompiledPlan, options: MatcherOptions) -> None:
        super().__init__(cp.plan, options, coverage=True, plain=cp.spec.plain)
        n = self.n
        self.start_pre: list[tuple[Any, ...] | None] = [
            ((),) * k if self.starts_at[k] else None for k in range(n)]
        # per state: the skipped * states before it when a match can start there; and its
        # sources, each with the skipped * states in between
        self.src_gaps = [tuple((j, ((),) * (k - j - 1)) for j in self.srcs[k])
                         for k in range(n)]
        self.accepting = [bool(a) for a in self.accept_after]
        self.windowed = self.win_us is not None or self.win_ev is not None

    # ---------------------------------------------------------------------------------------
    def new_state(self) -> CoverState:  # type: ignore[override]
        """Fresh per-key state."""
        n = self.n
        return CoverState(tails=[{} for _ in range(n)], cov=[{} for _ in range(n)],
                          cur_run=[-1] * n, cur_end=[(0, 0)] * n)

    def dump_state(self, st: CoverState) -> Any:  # type: ignore[override]
        """Plain data for a snapshot."""
        cov = [[(sig, cand_state(c), k0, r0) for sig, (c, k0, r0) in d.items()]
               for d in st.cov]
        return ([list(d.items()) for d in st.tails], cov, list(st.cur_run), list(st.cur_end),
                list(st.ended.items()), st.prev_bits, st.tick, st.last_wpos, st.last_ts)

    def load_state(self, data: Any) -> CoverState:  # type: ignore[override]
        """Inverse of :meth:`dump_state`."""
        tails, cov, cur, end, ended, pb, tick, lw, lt = data
        st = self.new_state()
        st.tails = [{tuple(s): (tuple(v), ft, fw) for s, (v, ft, fw) in d} for d in tails]
        st.cov = [{tuple(s): (Candidate(*c), k0, r0) for s, c, k0, r0 in d} for d in cov]
        st.cur_run = list(cur)
        st.cur_end = [tuple(x) for x in end]
        st.ended = {tuple(k): tuple(v) for k, v in ended}
        st.prev_bits, st.tick, st.last_wpos, st.last_ts = pb, tick, lw, lt
        self._sync(st)
        return st

    @staticmethod
    def _sync(st: CoverState) -> None:
        """``pending``: what the runtime reads (its release bound, the call's cap)."""
        st.pending = [x[0] for d in st.cov for x in d.values()]

    def oldest(self, st: CoverState) -> int | None:  # type: ignore[override]
        """The smallest position a stored tail or pending coverage binds (None: none)."""
        firsts = [min(c.positions) for c in st.pending]
        for d in st.tails:
            for vals, _ft, _fw in d.values():
                firsts.append(_first_gpos(vals))
        return min(firsts, default=None)

    def prune(self, st: CoverState) -> None:  # type: ignore[override]
        """No negation history (EMIT COVERAGE with NOT does not compile)."""
        del st

    def live(self, st: CoverState) -> int:  # type: ignore[override]
        """Stored tails and pending coverages of one key."""
        return sum(map(len, st.tails)) + sum(map(len, st.cov))

    # ---------------------------------------------------------------------------------------
    def process(self, st: CoverState, recs: list[Rec], bits: list[int],  # type: ignore[override]
                out: list[Candidate], max_matches: int | None,
                budget: int | None = None) -> None:
        """Algorithm 1 per event; coverages made final by the event go to ``out``."""
        n = self.n
        pos_bits = self.pos_bits
        cbit, kleene, starts_at = self.cbit, self.kleene, self.starts_at
        is_list, accepting, feeds = self.is_list, self.accepting, self.feeds
        win_us, win_ev = self.win_us, self.win_ev
        windowed = self.windowed
        tails, cov, cur_run, cur_end = st.tails, st.cov, st.cur_run, st.cur_end
        max_runs = self.max_runs
        hit_cache = self.seq_hits
        pend0 = sum(map(len, cov)) if budget is not None else 0
        changed = False
        prev_bits = st.prev_bits
        bt: int | None = None
        bw: int | None = None
        nlive = self.live(st) if max_runs is not None else 0
        e: Rec = ()
        lo_t = lo_w = _NEG
        created = copied = 0
        start_pre, src_gaps = self.start_pre, self.src_gaps
        try:
            for e, b in zip(recs, bits, strict=True):
                b &= pos_bits
                if not b:
                    continue
                ts, wp, g = e[TS], e[WPOS], e[GPOS]
                if windowed:
                    if win_us is not None:
                        bt = lo_t = ts - win_us
                    if win_ev is not None:
                        bw = lo_w = wp - win_ev + 1
                # runs (docs/semantics.md 16): one per state, among the relevant events
                closed: list[int] | None = None
                if b != prev_bits:
                    closed = []
                    for k in range(n):
                        if b & cbit[k]:
                            if cur_run[k] < 0:
                                cur_run[k] = g
                        elif cur_run[k] >= 0:
                            closed.append(k)
                            if windowed and starts_at[k]:
                                st.ended[(k, cur_run[k])] = cur_end[k]
                            cur_run[k] = -1
                prev_bits = b
                hits = hit_cache.get(b)
                if hits is None:
                    hits = hit_cache[b] = [k for k in range(n - 1, -1, -1) if b & cbit[k]]
                nm = 0
                for k in hits:
                    r = cur_run[k]
                    if windowed and starts_at[k]:
                        cur_end[k] = (ts, wp)
                    if is_list[k]:
                        one1: tuple[Any, ...] = ((e,),)
                        rone1: tuple[Any, ...] = ((r,),)
                    else:
                        one1, rone1 = (e,), (r,)
                    pre = start_pre[k]
                    new: list[tuple[tuple[Any, ...], Node]] = (
                        [] if pre is None else [(pre + rone1, (pre + one1, ts, wp))])
                    for j, gap in src_gaps[k]:
                        tj = tails[j]
                        if not tj:
                            continue
                        if gap:
                            new += [(sig + gap + rone1, (vals + gap + one1, ft, fw))
                                    for sig, (vals, ft, fw) in tj.items()
                                    if ft >= lo_t and fw >= lo_w]
                        else:
                            new += [(sig + rone1, (vals + one1, ft, fw))
                                    for sig, (vals, ft, fw) in tj.items()
                                    if ft >= lo_t and fw >= lo_w]
                    if kleene[k] and tails[k]:
                        new += [(sig[:-1] + (sig[-1] + (r,),),
                                 (vals[:-1] + (vals[-1] + (e,),), ft, fw))
                                for sig, (vals, ft, fw) in tails[k].items()
                                if ft >= lo_t and fw >= lo_w]
                    if not new:
                        continue
                    created += len(new)
                    copied += len(new) - (pre is not None)
                    if feeds[k]:
                        tk = tails[k]
                        size = len(tk)
                        tk.update(new)
                        nlive += len(tk) - size
                    if accepting[k]:
                        if max_matches is not None and nm + len(new) > max_matches:
                            drop = too_many_matches(self, e, nm + len(new), max_matches)
                            new = new[:len(new) - drop] if drop < len(new) else []
                        nm += len(new)
                        ck = cov[k]
                        size = len(ck)
                        for sig, node in new:
                            ck[sig] = self._entry(sig, node, e)
                        nlive += len(ck) - size
                        changed = True
                if closed:
                    for k in closed:
                        if cov[k]:
                            # the run of these coverages' last event is over: final
                            out.extend(x[0] for x in cov[k].values())
                            nlive -= len(cov[k])
                            cov[k].clear()
                            changed = True
                if windowed:
                    st.tick += 1
                    if st.tick >= 32:
                        st.tick = 0
                        self._expire(st, bt, bw)
                        if max_runs is not None:
                            nlive = self.live(st)
                if budget is not None and changed:
                    made_c = len(out) + sum(map(len, cov)) - pend0
                    if made_c > budget:
                        self._over_budget(st, e, out, made_c - budget)
                        nlive = self.live(st) if max_runs is not None else 0
                if max_runs is not None and nlive > max_runs:
                    nlive = self.live(st)
                    if nlive > max_runs:
                        drop = too_many_runs(self, nlive, e)
                        self._drop_oldest(st, drop)
                        nlive = self.live(st)
                        changed = True
        finally:
            self.created += created
            self.copied += copied
            self.nodes_made += created
            st.prev_bits = prev_bits
            if e:  # the last event looked at
                st.last_wpos = e[WPOS]
                st.last_ts = e[TS]
            if changed:
                self._sync(st)

    def _entry(self, sig: tuple[Any, ...], node: Node, e: Rec) -> Entry:
        """The pending coverage of a complete tail ending with ``e``."""
        vals, ft, fw = node
        B = list(self.empty_B)
        pos: list[int] = []
        k0 = -1
        for k, x in enumerate(vals):
            B[self.cslot[k]] = x
            if self.is_list[k]:
                pos.extend(r[GPOS] for r in x)
                if x and k0 < 0:
                    k0 = k
            else:
                pos.append(x[GPOS])
                if k0 < 0:
                    k0 = k
        r0 = sig[k0][0] if self.is_list[k0] else sig[k0]
        return (Candidate(tuple(B), ft, fw, e[GPOS], e[TS], e[WPOS], tuple(pos)), k0, r0)

    def _expire(self, st: CoverState, bt: int | None, bw: int | None) -> None:  # type: ignore[override]
        """Forget the tails no later event can extend (their first event is out of the
        window for every later event)."""
        for k, d in enumerate(st.tails):
            if d:
                st.tails[k] = {s: t for s, t in d.items()
                               if not ((bt is not None and t[1] < bt)
                                       or (bw is not None and t[2] < bw))}

    def _drop_oldest(self, st: CoverState, drop: int) -> None:  # type: ignore[override]
        """``on_cap='truncate'``: forget the ``drop`` stored tails with the oldest first
        events (the coverages through them are lost; counted as truncated runs)."""
        items = sorted(((t[1], t[2], k, s) for k, d in enumerate(st.tails) for s, t in d.items()),
                       key=lambda x: (x[0], x[1]))
        for _ft, _fw, k, s in items[:drop]:
            del st.tails[k][s]

    def _over_budget(self, st: CoverState, e: Rec, out: list[Candidate], over: int) -> None:
        """The call's cap: raise, or drop the ``over`` newest pending coverages."""
        if self.on_cap not in ("truncate", "saturate"):
            from ..runtime.caps import over_budget

            over_budget(self, e, out, len(out) - over)
            return
        self.truncated_matches += over
        for d in reversed(st.cov):
            while over and d:
                d.pop(next(reversed(d)))
                over -= 1
        if over:
            del out[len(out) - over:]

    # ---------------------------------------------------------------------------------------
    def release_pending(self, st: CoverState, watermark: int | None  # type: ignore[override]
                        ) -> list[Candidate]:
        """Pending coverages that are final by ``watermark`` (None: end of stream, all): the
        run of their first event is over and no event at or after the watermark fits the
        window with that run's last event."""
        if not st.pending:
            return []
        if watermark is None:
            out = list(st.pending)
            for d in st.cov:
                d.clear()
            st.pending = []
            st.ended.clear()
            return out
        if not self.windowed:
            return []
        win_us, win_ev = self.win_us, self.win_ev
        out = []
        for d in st.cov:
            done = []
            for sig, (c, k0, r0) in d.items():
                if st.cur_run[k0] == r0:
                    continue  # the first event's run is still open
                end = st.ended.get((k0, r0))
                if end is None:
                    continue
                if (win_us is not None and watermark > end[0] + win_us) or (
                        win_ev is not None and end[1] <= st.last_wpos + 1 - win_ev):
                    done.append(sig)
                    out.append(c)
            for sig in done:
                del d[sig]
        if out:
            self._sync(st)
            if len(st.ended) > 64 + 2 * len(st.pending):
                keep = {(k0, r0) for d in st.cov for _c, k0, r0 in d.values()}
                st.ended = {k: v for k, v in st.ended.items() if k in keep}
        return out


def _first_gpos(vals: tuple[Any, ...]) -> int:
    for x in vals:
        if isinstance(x, tuple) and (not x or isinstance(x[0], tuple)):
            if x:
                return int(x[0][GPOS])
        else:
            return int(x[GPOS])
    return 0


def direct_cover(cp: CompiledPlan, m: ChainMatcher) -> bool:
    """Can :class:`CoverMatcher` evaluate this query (every condition decided by the storage,
    no PICK / AFTER MATCH SKIP / TIMEOUTS)?"""
    plan = cp.plan
    spec = cp.spec
    return (not m.filters and not m.end_filters and not plan.match_preds
            and not plan.negations and not spec.picks and spec.after_match is None
            and not spec.timeouts)


def cover_matcher(cp: CompiledPlan, options: MatcherOptions) -> CoverMatcher | None:
    """The direct CoverMatch matcher, or None when the query needs the enumeration path."""
    m = CoverMatcher(cp, options)
    return m if direct_cover(cp, m) else None


__all__ = ["CoverMatcher", "CoverState", "cover_matcher", "direct_cover"]
