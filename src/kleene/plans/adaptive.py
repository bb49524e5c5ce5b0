"""``tree:adaptive``: the tree plan re-chooses its shape while it runs (issue 12, item 4).

FAEM and ZStream choose the join order from the event-type rates; when the rates drift the
chosen tree can become the expensive one. This matcher counts, per period, how many events of
the stream are candidates of each pattern variable, turns the counts into :class:`Stats`
(type shares and the event rate), re-estimates every shape with the tree's cost model
(:func:`kleene.plans.tree.shape_cost`) and, when another shape is estimated at least
``margin`` cheaper than the current one, switches to it.

**The switch point and the migration.** A switch happens between two events of a key (at the
first event of that key at or after the period's end), never inside one. Nothing is waited
for: the key's state is *migrated* at once:

* the live events are read off the current shape's leaf buffers (and, under
  skip-till-any-match, the single events of its Kleene store), dropping those the window has
  already closed over (no future match can use them);
* they are replayed, in stream order, through an empty state of the new shape, which rebuilds
  exactly the composites the new shape would hold had it run from the start (a composite is
  a function of its events; the predicates are placed per shape, the window is checked in
  every join);
* the root composites the replay completes are dropped: each consists of events that were all
  processed before the switch, so the old shape already emitted it (or holds it open);
* the maximal-grouping Kleene store, the open groups (a Kleene on the right waiting for its
  window to pass) and the positions are carried over as they are: a root composite and its
  admissible group ranges do not depend on the shape.

So a switching run emits exactly the matches of a fixed shape, in the same order, and equals
the oracle (``tests/semantics/test_tree_adaptive.py`` checks it on random streams with a switch
at every period). The migration costs one replay of the live window (its time is recorded per
switch in :attr:`AdaptiveTreeMatcher.switches`).
"""

from __future__ import annotations

import bisect
import math
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..frozen import dataclass
from ..plan.layout import GPOS, TS, WPOS
from ..runtime.candidate import Candidate
from ..runtime.matcher import MatcherOptions
from .registry import Stats
from .tree import Leaf, TreeMatcher, TreeState, shape_cost, shape_work

if TYPE_CHECKING:
    from .tree import TreePlan


@dataclass(frozen=True, slots=True)
class AdaptiveSpec:
    """How ``tree:adaptive`` re-chooses its shape."""

    period: int | None = None
    """Positions (count windows, no window) or microseconds (time windows) between two
    estimates; None: half the window (10,000 positions without a window)."""
    margin: float = 0.2
    """Switch only when another shape is estimated at least this fraction cheaper."""
    rotate: bool = False
    """Testing: switch to the next shape at every estimate, whatever the costs (exercises the
    migration as often as possible)."""

    def describe(self, plan: TreePlan) -> str:
        """One line for ``kleene explain``."""
        unit, per = _period(self, plan)
        what = "events" if unit == "pos" else "µs"
        return (f"re-estimated every {per:,} {what} from the observed event mix; switches "
                f"to a shape estimated at least {self.margin:.0%} cheaper, migrating the "
                "live window")


def _period(spec: AdaptiveSpec, plan: TreePlan) -> tuple[str, int]:
    """(clock, period): the clock is ``pos`` (stream positions) or ``ts`` (microseconds)."""
    if plan.window_events is None and plan.window_us is not None:
        return "ts", spec.period or max(1, plan.window_us // 2)
    if plan.window_events is not None:
        return "pos", spec.period or max(1, plan.window_events // 2)
    return "pos", spec.period or 10_000


class AdaptiveState(TreeState):
    """A key's tree state and the shape it belongs to."""

    __slots__ = ("shape",)

    def __init__(self, nnodes: int, shape: int) -> None:
        super().__init__(nnodes)
        self.shape = shape


class AdaptiveTreeMatcher:
    """The tree matcher of :mod:`kleene.plans.tree`, one per shape, and the switch between
    them (the Matcher protocol, runtime/matcher.py)."""

    decides_negation = False

    def __init__(self, plan: TreePlan, stats: Stats, options: MatcherOptions) -> None:
        self.plan = plan
        self.spec: AdaptiveSpec = plan.adaptive
        self.stats = stats
        self.shapes = list(plan.shapes)
        self.names = [s.name for s in self.shapes]
        costs = [shape_cost(plan, s, stats) for s in self.shapes]
        self.current = costs.index(min(costs))
        self.ms: list[TreeMatcher | None] = [None] * len(self.shapes)
        self.options = options
        first = self._m(self.current)
        self.has_trailing = first.has_trailing
        self.max_matches_per_call = options.max_matches_per_call
        self.clock, self.period = _period(self.spec, plan)
        self.cell: int | None = None
        self.counts: Counter[int] = Counter()
        self.lo: tuple[int, int] | None = None
        """(gpos, ts): the smallest of the current period's candidates (``hi``: the largest)."""
        self.hi: tuple[int, int] = (0, 0)
        self.switches: list[dict[str, Any]] = []
        """Per switch: the stream position and time it took effect, the shapes, the estimates,
        and per key migrated the migration's CPU seconds and the events replayed."""
        self.estimates = 0

    def _m(self, i: int) -> TreeMatcher:
        m = self.ms[i]
        if m is None:
            m = self.ms[i] = TreeMatcher(self.plan, self.shapes[i], self.options)
        return m

    # -- counters the runtime reads (summed over the shapes' matchers) -----------------------
    @property
    def truncated_runs(self) -> int:
        return sum(m.truncated_runs for m in self.ms if m is not None)

    @property
    def truncated_matches(self) -> int:
        return sum(m.truncated_matches for m in self.ms if m is not None)

    @property
    def counted(self) -> int:
        return 0

    # -- protocol ----------------------------------------------------------------------------
    def mask_specs(self) -> list[tuple[str | None, Any]]:
        """The same for every shape (per pattern variable)."""
        return self._m(self.current).mask_specs()

    def new_state(self) -> AdaptiveState:
        """Fresh per-key state of the current shape."""
        return AdaptiveState(len(self._m(self.current).nodes), self.current)

    def dump_state(self, st: AdaptiveState) -> Any:
        """The shape's name and its state."""
        return (self.names[st.shape], self._m(st.shape).dump_state(st))

    def load_state(self, data: Any) -> AdaptiveState:
        """Inverse of :meth:`dump_state`."""
        name, inner = data
        i = self.names.index(name)
        t = self._m(i).load_state(inner)
        st = AdaptiveState(0, i)
        for a in TreeState.__slots__:
            setattr(st, a, getattr(t, a))
        return st

    def sort_key(self, c: Candidate) -> tuple[Any, ...]:
        """The documented output order (shape-independent)."""
        return self._m(self.current).sort_key(c)

    def negation_ok(self, st: AdaptiveState, c: Candidate) -> bool:
        """No NOT in a tree plan."""
        return True

    def match_preds_ok(self, c: Candidate) -> bool:
        """Every conjunct was checked in the tree."""
        return True

    def needs_trailing(self, c: Candidate) -> bool:
        """Open groups are kept by the matcher itself."""
        return False

    def admit_pending(self, st: AdaptiveState, c: Candidate) -> None:
        """Not used (see TreeMatcher.admit_pending)."""
        st.pending.append(c)

    def forget(self, c: Candidate) -> None:
        """No bookkeeping."""
        del c

    def oldest(self, st: AdaptiveState) -> int | None:
        """The smallest position a live composite binds."""
        return self._m(st.shape).oldest(st)

    def prune(self, st: AdaptiveState) -> None:
        """Nothing kept for negation."""
        del st

    def release_pending(self, st: AdaptiveState, watermark: int | None) -> list[Candidate]:
        """Open groups whose window has passed."""
        return self._m(st.shape).release_pending(st, watermark)

    # -- evaluation --------------------------------------------------------------------------
    def process(self, st: AdaptiveState, recs: list[Any], bits: list[int], out: list[Any],
                max_matches: int | None, budget: int | None = None) -> None:
        """The key's events, cut at the period boundaries; at each boundary the shape is
        re-estimated, and the key's state migrated if it changed."""
        col = TS if self.clock == "ts" else GPOS
        per = self.period
        i, n = 0, len(recs)
        while i < n:
            cell = recs[i][col] // per
            if self.cell is None:
                self.cell = cell
            elif cell > self.cell:
                self._estimate()
                self.cell = cell
            if st.shape != self.current:
                self._migrate(st, recs[i])
            j = bisect.bisect_left(recs, (cell + 1) * per, lo=i, key=lambda r: r[col])
            self.counts.update(bits[i:j])
            # the period's extent over every key processed in it (keys come one after another)
            first, last = recs[i], recs[j - 1]
            if self.lo is None:
                self.lo = (first[GPOS], first[TS])
                self.hi = (last[GPOS], last[TS])
            else:
                self.lo = (min(self.lo[0], first[GPOS]), min(self.lo[1], first[TS]))
                self.hi = (max(self.hi[0], last[GPOS]), max(self.hi[1], last[TS]))
            # ``budget`` bounds len(out), which grows over the slices of this call
            self._m(st.shape).process(st, recs[i:j], bits[i:j], out, max_matches, budget)
            i = j

    def observed(self) -> Stats | None:
        """The statistics of the period just ended (None: too few events to tell)."""
        if self.lo is None:
            return None
        span = self.hi[0] - self.lo[0] + 1
        if span < 2:
            return None
        plan = self.plan
        per_var: dict[str, float] = {}
        for k, v in enumerate(plan.order):  # candidate bit k is the k-th variable's
            per_var[v] = sum(c for b, c in self.counts.items() if b >> k & 1)
        shares: dict[str, float] = {}
        sel = self.stats.selectivity
        for v, cnt in per_var.items():
            t = plan.base.var_types[v]
            if t is None:
                continue
            share = cnt / span
            if plan.base.masks.get(v) is not None:
                share = share / sel  # the cost model applies the mask's selectivity itself
            shares[t] = max(shares.get(t, 0.0), min(share, 1.0))
        dt = (self.hi[1] - self.lo[1]) / 1e6
        rate = span / dt if dt > 0 else None
        return Stats(type_share=shares, events_per_second=rate,
                     selectivity=self.stats.selectivity, default_share=0.0,
                     source=f"observed over positions {self.lo[0]:,}-{self.hi[0]:,}")

    def _estimate(self) -> None:
        stats = self.observed()
        self.counts.clear()
        at = self.hi
        self.lo = None
        if stats is None and not self.spec.rotate:
            return
        self.estimates += 1
        # the margin is on the join work (the shapes' per-event term is the same)
        costs = [math.nan if stats is None else shape_work(self.plan, s, stats)
                 for s in self.shapes]
        cur = self.current
        if self.spec.rotate:
            best = (cur + 1) % len(self.shapes)
        else:
            best = costs.index(min(costs))
            if best == cur or costs[best] > costs[cur] * (1.0 - self.spec.margin):
                return
        self.current = best
        self.switches.append({"after_gpos": at[0], "after_ts": at[1],
                              "from": self.names[cur], "to": self.names[best],
                              "estimates": dict(zip(self.names, costs, strict=True)),
                              "migrations": []})

    def _migrate(self, st: AdaptiveState, at: Any) -> None:
        t0 = time.process_time()
        src, dst = self._m(st.shape), self._m(self.current)
        replayed = migrate(src, st, dst)
        st.shape = self.current
        if self.switches:
            self.switches[-1]["migrations"].append(
                {"gpos": at[GPOS], "seconds": time.process_time() - t0, "replayed": replayed})


def migrate(src: TreeMatcher, st: TreeState, dst: TreeMatcher) -> int:
    """Rebuild ``st`` (a state of ``src``'s shape) in place as a state of ``dst``'s shape;
    returns the number of events replayed. See the module docstring."""
    W, CW = src.W, src.CW
    last_ts, last_w = st.last_ts, st.last_wpos
    live: dict[int, list[Any]] = {}
    for i, n in enumerate(src.nodes):
        if not isinstance(n, Leaf):
            continue
        if n.kleene:
            if src.grouping:
                continue  # the group store is carried over as it is
            recs = [s[0] for s in st.kstore[i] if len(s) == 1]
        else:
            recs = [c[0][n.slot] for c in st.bufs[i]]
        for r in recs:
            if (W is not None and last_ts - r[TS] > W) or (CW is not None
                                                            and last_w - r[WPOS] >= CW):
                continue
            x = live.get(r[GPOS])
            if x is None:
                live[r[GPOS]] = [r, n.bit]
            else:
                x[1] |= n.bit
    new = dst.new_state()
    if src.grouping and src.kidx is not None and dst.kidx is not None:
        new.kstore[dst.kidx] = list(st.kstore[src.kidx])
    root = dst.shape.root
    for g in sorted(live):
        r, b = live[g]
        dst._delta(new, root, r, b)  # its root composites were emitted before the switch
    # the open groups, the positions and the expiry counter stay in ``st`` as they are
    st.bufs, st.kstore = new.bufs, new.kstore
    if dst.max_runs is not None:
        total = sum(len(x) for x in st.bufs) + (
            0 if dst.grouping else sum(len(st.kstore[i]) for i in dst.kleaves))
        if total > dst.max_runs:
            dst._cap_runs(st, total)
    return len(live)


__all__ = ["AdaptiveSpec", "AdaptiveState", "AdaptiveTreeMatcher", "migrate"]
