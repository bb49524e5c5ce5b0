"""``tasks``: the splitter-free task engine of parallel-cep-without-splitter (chapters 4-5),
for queries without a partition key.

Instead of splitting the stream by content, every incoming raw event is combined with every
live partial match into a *task* ``<transition, partial match, event>`` (Algorithms 4.3 and 4.4)
without reading the event's content; identical *operator instances* evaluate the tasks in
parallel; true results become new partial matches in a *central partial-match structure*.

This implementation, inside kleene's shared runtime (the matcher seam):

* the central structure: live partial matches as nodes (the parent's bindings plus one event,
  the thesis's tree) with a hash map from an event's position to the nodes that hold it (used
  by the clean-up when a window expires them);
* raw-event *blocks* of ``block_size`` events ending in a *synchronization point*: every task
  of the block is created (in waves: a new partial match gets tasks for the later events of the
  block, Algorithm 4.4) and evaluated before the block's final matches are handed on and expired
  partial matches are cleaned up (Section 5.4.2);
* a task queue, FIFO or the thesis's priority queue (longer partial match first, then earlier
  event; Section 5.4.1); the queue decides the order tasks are evaluated in, never the result;
* operator instances: a thread pool of ``workers`` threads (1: evaluated inline). Threads run in
  parallel when the predicates release the GIL (numpy, OpenCV, I/O); processes are not
  implemented (``TaskSettings.mode`` reports what was used);
* the merger: final matches go to the runtime, which sorts them in output order (Definition
  4.4.12, docs/semantics.md 10) and applies PICK / EMIT RECENT / CONSUME there. Invalid-task
  discard on consumption is therefore not done inside the engine (consumption happens after
  matching, in the runtime's policies): the matches are the same, the work is not reduced.

Supported: a SEQ of single events (no Kleene, no OR choice, no NOT) under skip-till-any-match,
without PARTITION BY (a keyed query is parallel by key: ``workers=``). The cost estimate makes
the chooser prefer ``nfa`` (one task per partial match and event is more work than NFA^b's
shared runs); force it with ``--plan tasks``. Matches and order equal one core for any worker
count and block size (``tests/runtime/test_tasks.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from ..plan.automaton import CompKind, Plan, Unsupported, compile_plan
from ..plan.explain import linear_text
from ..plan.expr import GPOS, TS, WPOS
from ..runtime.linear import Candidate
from ..runtime.matcher import MatcherOptions
from ..semantic.analyzed import AnalyzedQuery
from ..vocab import Strategy
from .registry import CompiledPlan, PlanKind, Stats, runs_estimate

TASK_OVERHEAD = 4.0
"""Work per task relative to NFA^b offering an event to a run: a task is an object, a queue
entry and a result; the chooser takes ``tasks`` only when forced."""


@dataclass(frozen=True)
class TaskSettings:
    """How the task engine runs (``configure`` changes them)."""

    workers: int = 1
    """Operator instances (threads); 1 evaluates inline."""
    block_size: int = 1024
    """Raw events between two synchronization points."""
    queue: str = "priority"
    """``fifo`` or ``priority`` (longer partial match first, then earlier event)."""

    @property
    def mode(self) -> str:
        """What evaluates the tasks (reported by ``kleene explain``)."""
        return "inline (1 operator instance)" if self.workers <= 1 else \
            f"{self.workers} threads (processes: not implemented)"


SETTINGS = TaskSettings()


@contextmanager
def configure(**changes: Any) -> Iterator[TaskSettings]:
    """Run with other settings: ``with configure(workers=4, block_size=16): ...`` (matchers
    built inside take them)."""
    global SETTINGS
    old = SETTINGS
    new = replace(old, **changes)
    if new.workers < 1 or new.block_size < 1 or new.queue not in ("fifo", "priority"):
        raise ValueError(f"bad task settings {new}")
    SETTINGS = new
    try:
        yield new
    finally:
        SETTINGS = old


def compile_tasks(analyzed: AnalyzedQuery) -> Plan:
    """The linear plan, if the task engine covers it (else :class:`Unsupported`)."""
    plan = compile_plan(analyzed)
    if plan.partition_by:
        raise Unsupported("a PARTITION BY query is parallel by key (workers=), not by tasks")
    if plan.strategy is not Strategy.SKIP_TILL_ANY_MATCH:
        raise Unsupported("the task engine implements skip-till-any-match only")
    if plan.negations:
        raise Unsupported("the task engine has no NOT")
    if any(c.kind is not CompKind.SINGLE for c in plan.components):
        raise Unsupported("the task engine takes a SEQ of single events (no Kleene, no OR)")
    if plan.match_preds or any(p.iter_var is not None or p.general is not None
                               for v in plan.vars.values() for p in v.take + v.close):
        raise Unsupported("the task engine takes conjuncts over single events only")
    return plan


def tasks_cost(plan: Plan, stats: Stats) -> float:
    """One task per live partial match and event, at :data:`TASK_OVERHEAD` each."""
    n = stats.events_in(plan.window_us, plan.window_events)
    steps = [(min(sum(stats.share(t) for t in c.types), 1.0), False,
              sum(len(plan.vars[v].take) for v in c.vars)) for c in plan.components]
    return TASK_OVERHEAD * (1.0 + runs_estimate(steps, n, plan.strategy))


class _PM:
    """A partial match: a node of the central structure (the parent's bindings plus one
    event; ``k`` components bound)."""

    __slots__ = ("B", "first", "k", "last", "positions")

    def __init__(self, B: tuple[Any, ...], k: int, first: Any, last: Any,
                 positions: tuple[int, ...]) -> None:
        self.B = B
        self.k = k
        self.first = first
        self.last = last
        self.positions = positions


class TaskState:
    """Per key: the live partial matches and the hash map event position -> nodes."""

    def __init__(self) -> None:
        self.pms: list[_PM] = []
        self.by_event: dict[int, list[_PM]] = {}


class TaskMatcher:
    """Evaluates a linear plan of single events with tasks (see the module docstring)."""

    has_trailing = False
    decides_negation = True

    def __init__(self, plan: Plan, settings: TaskSettings) -> None:
        self.plan = plan
        self.settings = settings
        self.truncated_runs = 0
        self.truncated_matches = 0
        self.counted = 0
        self.ncomp = len(plan.components)
        self.nslots = len(plan.layout.var_slots)
        self.comp_var = [plan.vars[c.vars[0]] for c in plan.components]
        self.slot = dict(plan.layout.var_slots)
        # windows as (first, last, amount, count) applying when component k is taken
        self.guards = [[w for w in plan.windows if w.first < k <= w.last]
                       for k in range(self.ncomp)]
        self.expire = plan.window_us
        self.expire_events = plan.window_events
        self.pool = (ThreadPoolExecutor(settings.workers, thread_name_prefix="kleene-task")
                     if settings.workers > 1 else None)
        self.tasks_created = 0
        self.tasks_true = 0

    # the seam ------------------------------------------------------------------------------
    def mask_specs(self) -> list[tuple[str | None, Any]]:
        """One candidate bit per component (its variable's type and vectorized mask)."""
        return [(v.type, v.mask) for v in self.comp_var]

    def new_state(self) -> TaskState:
        return TaskState()

    def _eval(self, task: tuple[_PM | None, Any, int]) -> _PM | None:
        """An operator instance: the transition's condition on (partial match, event)."""
        pm, (rec, bits), k = task
        if not bits >> k & 1:
            return None
        var = self.comp_var[k]
        if pm is None:
            B: list[Any] = [None] * self.nslots
            B[var.slot] = rec
            Bt = tuple(B)
            first = rec
            positions: tuple[int, ...] = (rec[GPOS],)
        else:
            for w in self.guards[k]:
                f = pm.B[self.comp_var[w.first].slot]
                if w.count:
                    if rec[WPOS] - f[WPOS] >= w.amount:
                        return None
                elif rec[TS] - f[TS] > w.amount:
                    return None
            Bl = list(pm.B)
            Bl[var.slot] = rec
            Bt = tuple(Bl)
            first = pm.first
            positions = (*pm.positions, rec[GPOS])
        for p in var.take + var.close:
            if p.compiled.fn(Bt, 0) is not True:
                return None
        return _PM(Bt, k + 1, first, rec, positions)

    def _run(self, tasks: list[tuple[_PM | None, Any, int]]) -> list[_PM | None]:
        if self.settings.queue == "priority":
            # longer partial match first, then the earlier event (Section 5.4.1)
            order = sorted(range(len(tasks)), key=lambda i: (
                -(0 if tasks[i][0] is None else tasks[i][0].k),  # type: ignore[union-attr]
                tasks[i][1][0][GPOS]))
        else:
            order = list(range(len(tasks)))
        queued = [tasks[i] for i in order]
        if self.pool is None or len(queued) < 2:
            results = [self._eval(t) for t in queued]
        else:
            chunk = max(1, len(queued) // (4 * self.settings.workers))
            results = list(self.pool.map(self._eval, queued, chunksize=chunk))
        out: list[_PM | None] = [None] * len(tasks)
        for i, r in zip(order, results, strict=True):
            out[i] = r
        return out

    def process(self, st: TaskState, recs: list[Any], bits: list[int], out: list[Any],
                max_matches: int | None, budget: int | None = None) -> None:
        """Raw-event blocks, each ended by a synchronization point."""
        del max_matches, budget
        size = self.settings.block_size
        for b0 in range(0, len(recs), size):
            self._block(st, list(zip(recs[b0:b0 + size], bits[b0:b0 + size], strict=True)),
                        out)

    def _block(self, st: TaskState, block: list[tuple[Any, int]], out: list[Any]) -> None:
        last = self.ncomp - 1
        # wave 0: every live partial match (and the start state) x every event of the block
        tasks: list[tuple[_PM | None, Any, int]] = []
        for j, ev in enumerate(block):
            tasks.append((None, ev, 0))
            for pm in st.pms:
                tasks.append((pm, ev, pm.k))
            del j
        finals: list[_PM] = []
        while tasks:
            self.tasks_created += len(tasks)
            results = self._run(tasks)
            new: list[tuple[_PM, int]] = []  # (partial match, index of its event in block)
            index = {id(ev[0]): j for j, ev in enumerate(block)}
            for r in results:
                if r is None:
                    continue
                self.tasks_true += 1
                if r.k - 1 == last:
                    finals.append(r)
                else:
                    new.append((r, index[id(r.last)]))
            # Algorithm 4.4: a new partial match gets a task for every later event of the block
            tasks = []
            for pm, j in new:
                st.pms.append(pm)
                for p in pm.positions:
                    st.by_event.setdefault(p, []).append(pm)
                for ev in block[j + 1:]:
                    tasks.append((pm, ev, pm.k))
        # synchronization point: hand the final matches to the merger, clean up
        for f in finals:
            out.append(Candidate(f.B, f.first[TS], f.first[WPOS], f.last[GPOS], f.last[TS],
                                 f.last[WPOS], f.positions))
        if block:
            self._clean(st, block[-1][0])

    def _clean(self, st: TaskState, now: Any) -> None:
        """Drop the partial matches no later event can complete (whole-pattern window)."""
        if self.expire is None and self.expire_events is None:
            return
        keep = []
        for pm in st.pms:
            f = pm.first
            if (self.expire is not None and now[TS] - f[TS] > self.expire) or (
                    self.expire_events is not None
                    and now[WPOS] - f[WPOS] >= self.expire_events - 1):
                for p in pm.positions:
                    lst = st.by_event.get(p)
                    if lst is not None:
                        lst.remove(pm)
                        if not lst:
                            del st.by_event[p]
                continue
            keep.append(pm)
        st.pms = keep

    def sort_key(self, c: Candidate) -> tuple[Any, ...]:
        return (c.last_gpos, c.positions)

    def negation_ok(self, st: Any, c: Candidate) -> bool:
        return True

    def match_preds_ok(self, c: Candidate) -> bool:
        return True

    def needs_trailing(self, c: Candidate) -> bool:
        return False

    def admit_pending(self, st: Any, c: Candidate) -> None:
        raise AssertionError("the task engine has no trailing NOT")

    def release_pending(self, st: Any, watermark: int | None) -> list[Candidate]:
        return []

    def forget(self, c: Candidate) -> None:
        pass

    def oldest(self, st: TaskState) -> int | None:
        return min((pm.first[GPOS] for pm in st.pms), default=None)

    def prune(self, st: Any) -> None:
        pass

    def dump_state(self, st: TaskState) -> Any:
        return [(pm.B, pm.k, pm.first, pm.last, pm.positions) for pm in st.pms]

    def load_state(self, data: Any) -> TaskState:
        st = TaskState()
        for B, k, first, last, positions in data:
            pm = _PM(tuple(B), k, tuple(first), tuple(last), tuple(positions))
            st.pms.append(pm)
            for p in pm.positions:
                st.by_event.setdefault(p, []).append(pm)
        return st


def _matcher(cp: CompiledPlan, options: MatcherOptions) -> TaskMatcher:
    del options
    return TaskMatcher(cp.plan, SETTINGS)


def _explain(plan: Plan) -> list[str]:
    s = SETTINGS
    return linear_text(plan) + [
        f"tasks: <transition, partial match, event>; operator instances {s.mode}; "
        f"{s.queue} queue; raw-event blocks of {s.block_size:,} events"]


PLAN = PlanKind(
    name="tasks",
    description="splitter-free task engine (parallel-cep): tasks <transition, partial match, "
                "event> evaluated by operator instances, block-synchronous",
    compile=compile_tasks,
    matcher=_matcher,
    cost=tasks_cost,
    explain=_explain,
)
