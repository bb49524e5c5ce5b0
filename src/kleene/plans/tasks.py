"""``tasks``: the splitter-free task engine of parallel-cep-without-splitter (chapters 4-5),
for queries without a partition key.

Instead of splitting the stream by content, every incoming raw event is combined with every
live partial match into a *task* ``<transition, partial match, event>`` (Algorithms 4.3 and 4.4)
without reading the event's content; identical *operator instances* evaluate the tasks in
parallel; true results become new partial matches in a *central partial-match structure*.

This implementation, inside kleene's shared runtime (the matcher seam):

* task creation reads meta-data only (the thesis's "key-based" information, Section 3.4): the
  event's type (its candidate bit, which also carries the vectorized one-event conjuncts, the
  runtime's vectorize step) and its window position / timestamp: a partial match gets tasks
  only for the later events its counter or time window still admits (two binary searches
  per partial match and transition, not one test per event);
* the central structure: live partial matches per depth (the tree's levels; a node is a plain
  tuple holding the parent's bindings plus one event) and, with ``structure="hash"`` (the
  default), a hash map from an event's position to the nodes holding it; ``"tree"`` has no map;
* raw-event *blocks* of ``block_size`` events ending in a *synchronization point* (Section
  5.4.2): every task of the block is evaluated before the block's final matches go to the
  runtime, window-expired partial matches are cleaned up, and partial matches holding an event
  the runtime has consumed leave the structure (*invalid-task discard*, found through the hash
  map; the runtime's CONSUME decides what is consumed, so this saves work between pushes and
  never changes a match);
* operator instances, ``workers`` of them:
  - 1: inline, the block's tasks evaluated as one batch per transition (the tasks of transition
    ``k`` need only the partial matches made by transition ``k - 1``), no queue, no task
    objects: the cheap-predicate case costs about what the sequential plan does;
  - ``operators="threads"``: this thread and ``workers - 1`` pool threads pull tasks from the
    task queue, FIFO or the thesis's priority queue (longer partial match first, then the
    earlier event; Section 5.4.1); a true task's new partial match gets its tasks at once
    (Algorithm 4.4). The predicates run outside the queue's lock, so UDFs that release the GIL
    (OpenCV, numpy, I/O) run in parallel. UDFs are then called from several threads and must
    be thread-safe;
  - ``operators="processes"``: forked worker processes (they inherit the compiled plan)
    evaluate each transition's batch of tasks in ``workers`` chunks, for predicates that hold
    the GIL (pure-Python UDFs); the bindings are pickled, so this pays only for costly
    predicates. ``kleene explain --plan tasks`` reports the mode;
* the merger: final matches go to the runtime, which sorts them in output order (Definition
  4.4.12, docs/semantics.md 10) and applies PICK / EMIT RECENT / CONSUME. The queue decides the
  order tasks are evaluated in, never the result.

Supported: a SEQ of single events (no Kleene, no OR choice, no NOT) under skip-till-any-match,
without PARTITION BY (a keyed query is parallel by key: ``workers=``). The cost estimate makes
the chooser prefer ``nfa``; force it with ``--plan tasks``. Settings: :func:`configure` or the
``KLEENE_TASKS`` environment variable (``workers=2,block_size=64,queue=fifo,structure=tree,
operators=processes``). Matches and order equal one core for any worker count, block size,
queue, structure and operator kind (``tests/runtime/test_tasks.py``; the conformance suite with
``KLEENE_TASKS``).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from heapq import heappop, heappush
from itertools import chain, count, repeat
from typing import TYPE_CHECKING, Any

from ..codegen import build
from ..errors import QueryValidationError
from ..frozen import dataclass
from ..plan.automaton import CompKind, Plan, Unsupported, compile_plan
from ..plan.explain import linear_text
from ..plan.expr import GPOS, TS, WPOS
from ..runtime.linear import Candidate
from ..runtime.matcher import MatcherOptions
from ..semantic.analyzed import AnalyzedQuery
from ..vocab import Strategy
from .registry import CompiledPlan, PlanKind, Stats, runs_estimate

if TYPE_CHECKING:
    from concurrent.futures import Executor

TASK_OVERHEAD = 4.0
"""Work per task relative to NFA^b offering an event to a run. Measured with one worker the
task engine costs 1.2-1.5x the ``nfa`` plan's CPU; the estimate stays high on purpose: the
chooser does not weigh parallelism or predicate cost, so it takes ``tasks`` only when forced."""


@dataclass(frozen=True)
class TaskSettings:
    """How the task engine runs (``configure`` changes them)."""

    workers: int = 1
    """Operator instances (threads); 1 evaluates inline."""
    block_size: int = 1024
    """Raw events between two synchronization points."""
    queue: str = "priority"
    """``fifo`` or ``priority`` (longer partial match first, then earlier event)."""
    structure: str = "hash"
    """The central partial-match structure: ``hash`` (the thesis's tree with a hash map from
    an event's position to the nodes ending in it) or ``tree`` (without the hash map)."""

    operators: str = "threads"
    """``threads`` (the predicates release the GIL: OpenCV, numpy, I/O) or ``processes`` (they
    hold it: pure-Python UDFs; forked worker processes evaluate each transition's batch)."""

    @property
    def mode(self) -> str:
        """What evaluates the tasks (reported by ``kleene explain``)."""
        if self.workers <= 1:
            return "inline (1 operator instance)"
        if self.operators == "processes":
            return f"{self.workers} forked processes (batch per transition and block)"
        return f"{self.workers} threads (task queue; for predicates that release the GIL)"


def _from_env(text: str | None) -> TaskSettings:
    """``KLEENE_TASKS="workers=2,block_size=3,queue=fifo,structure=tree"``: the defaults (the
    conformance suite runs the task engine at 2 and 4 workers with it)."""
    s = TaskSettings()
    if not text:
        return s
    changes: dict[str, Any] = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if name in ("workers", "block_size") and value.isdigit():
            changes[name] = int(value)
        elif name in ("queue", "structure", "operators") and value:
            changes[name] = value
        else:
            raise QueryValidationError(
                f"KLEENE_TASKS: bad setting {item!r} (workers=N, block_size=N, "
                "queue=fifo|priority, structure=hash|tree, operators=threads|processes)")
    return _checked(replace(s, **changes))


def _checked(s: TaskSettings) -> TaskSettings:
    if s.workers < 1 or s.block_size < 1 or s.queue not in ("fifo", "priority") \
            or s.structure not in ("hash", "tree") \
            or s.operators not in ("threads", "processes"):
        raise QueryValidationError(
            f"bad task settings: workers={s.workers}, block_size={s.block_size} (both >= 1), "
            f"queue={s.queue!r} (fifo|priority), structure={s.structure!r} (hash|tree), "
            f"operators={s.operators!r} (threads|processes)")
    return s


SETTINGS = _from_env(os.environ.get("KLEENE_TASKS"))


@contextmanager
def configure(**changes: Any) -> Iterator[TaskSettings]:
    """Run with other settings: ``with configure(workers=4, block_size=16): ...`` (matchers
    built inside take them)."""
    global SETTINGS
    old = SETTINGS
    new = _checked(replace(old, **changes))
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


_PM = tuple[Any, ...]
"""A partial match, a node of the central structure: ``(B, k, first, last, positions)`` --
the parent's bindings plus one event, ``k`` components bound. A plain tuple (no per-node
object: cheaper to make, and the cyclic garbage collector stops tracking it)."""
B_, K_, FIRST_, LAST_, POS_ = range(5)


def _final_key(f: tuple[Any, ...]) -> tuple[Any, ...]:
    """A final match ``(B, first, last, positions)``'s :meth:`TaskMatcher.sort_key`."""
    return (f[2][GPOS], f[3])


_FORKED: TaskMatcher | None = None
"""The matcher a forked operator process evaluates with (set before the fork)."""


def _proc_eval(k: int, Bts: list[tuple[Any, ...]]) -> tuple[list[bool], float]:
    """In a forked process: transition ``k``'s condition on each task's bindings, and the CPU
    seconds it took."""
    m = _FORKED
    assert m is not None
    c0 = time.process_time()
    fns = m.fns[k]
    out = [all(fn(Bt, 0) is True for fn in fns) for Bt in Bts]
    return out, time.process_time() - c0


class TaskState:
    """Per key: the central partial-match structure. ``levels[k]`` holds the live partial
    matches with ``k`` components bound (the tree's depth ``k``); with the ``hash`` structure a
    hash map from an event's position to the nodes that end in it."""

    def __init__(self, ncomp: int, hashed: bool) -> None:
        self.levels: list[list[_PM]] = [[] for _ in range(ncomp)]
        self.by_event: dict[int, list[_PM]] | None = {} if hashed else None

    @property
    def pms(self) -> list[_PM]:
        return [pm for lv in self.levels for pm in lv]

    def add(self, pm: _PM) -> None:
        self.levels[pm[K_]].append(pm)
        if self.by_event is not None:
            for p in pm[POS_]:
                self.by_event.setdefault(p, []).append(pm)

    def drop(self, dead: list[_PM]) -> None:
        """Remove nodes from the structure (levels and hash map)."""
        gone = {id(pm) for pm in dead}
        for k, lv in enumerate(self.levels):
            self.levels[k] = [pm for pm in lv if id(pm) not in gone]
        if self.by_event is not None:
            for pm in dead:
                for p in pm[POS_]:
                    lst = self.by_event.get(p)
                    if lst is not None:
                        lst[:] = [x for x in lst if x is not pm]
                        if not lst:
                            del self.by_event[p]

    def discard_consumed(self, consumed: set[int]) -> int:
        """Invalid-task discard (Section 5.3.6): partial matches holding a consumed event can
        only make matches the merger drops; they leave the structure, so their tasks are never
        created. With the hash map the consumed events' nodes are looked up directly; the
        plain tree is scanned. Returns the number dropped."""
        if self.by_event is not None:
            hit = [p for p in self.by_event if p in consumed]
            dead = list({id(pm): pm for p in hit for pm in self.by_event[p]}.values())
        else:
            dead = [pm for lv in self.levels for pm in lv
                    if any(p in consumed for p in pm[POS_])]
        if dead:
            self.drop(dead)
        return len(dead)


class _Block:
    """One raw-event block as the task creation sees it: per transition ``k`` the block indices
    of the events whose type (and vectorized single-event conjuncts) fit ``k``, and their
    window positions and timestamps (meta-data, never content) for the counter/time window."""

    __slots__ = ("evk", "recs", "ts", "wp")

    def __init__(self, recs: list[Any], bits: list[int], ncomp: int) -> None:
        self.recs = recs
        self.evk = [[j for j, b in enumerate(bits) if b >> k & 1] for k in range(ncomp)]
        self.wp = [[recs[j][WPOS] for j in e] for e in self.evk]
        self.ts = [[recs[j][TS] for j in e] for e in self.evk]


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
        self.fns = [tuple(p.compiled.fn for p in v.take + v.close) for v in self.comp_var]
        self.slots = [v.slot for v in self.comp_var]
        # windows (first component's slot, amount, count) applying when component k is taken
        self.guards = [[(self.slots[w.first], w.amount, w.count) for w in plan.windows
                        if w.first < k <= w.last] for k in range(self.ncomp)]
        self.expire = plan.window_us
        self.expire_events = plan.window_events
        self.waves = [self._make_wave(k) for k in range(self.ncomp)]
        self.procs = settings.workers > 1 and settings.operators == "processes"
        self.pool: Executor | None = None
        if settings.workers > 1 and not self.procs:
            from concurrent.futures import ThreadPoolExecutor  # only when used: start-up

            self.pool = ThreadPoolExecutor(settings.workers - 1, thread_name_prefix="kleene-task")
        self.tasks_created = 0
        self.tasks_true = 0
        self.discarded = 0
        """Partial matches dropped because an event of theirs was consumed."""
        self._consumed: Callable[[], set[int]] | None = None
        self.busy_cpu = 0.0
        """CPU seconds the operator instances spent in the blocks (all threads)."""
        self.critical_cpu = 0.0
        """Per block the busiest operator instance's CPU seconds, summed: the blocks' wall time
        on idle cores (what a loaded machine's wall clock cannot show)."""

    def _make_wave(self, k: int) -> Callable[..., int] | None:
        """Transition ``k``'s batch for one block as a generated loop (the tasks of every live
        partial match, the windows' bounds and the condition inlined from the plan's sources
        as the NFA kernel does: ``e`` the event, ``B`` the partial match, tested before the
        bindings are built); returns the number of tasks. None when a conjunct has no inline
        form (the compiled functions are used)."""
        if k == 0:
            return None
        conds: list[str] = []
        env: dict[str, Any] = {"chain": chain, "repeat": repeat, "bisect_left": bisect_left,
                               "bisect_right": bisect_right}
        for p in self.comp_var[k].take + self.comp_var[k].close:
            src = p.inline[0] if p.inline is not None else None
            if src is None:
                return None
            env.update(p.inline_env)
            conds.append(src)
        slot = self.slots[k]
        last = k == self.ncomp - 1
        lines = [
            "def wave(old, fresh, es, wpk, tsk, recs, finals, made):",
            "    ne = len(es)",
            "    created = 0",
            "    for pm, lo in chain(zip(old, repeat(0)),",
            "                        ((pm, bisect_right(es, j)) for pm, j in fresh)):",
            f"        B = pm[{B_}]",
            "        hi = ne"]
        for gslot, amount, counter in self.guards[k]:
            lines.append(f"        h = bisect_left(wpk, B[{int(gslot)}][{WPOS}] + {int(amount)})"
                         if counter else
                         f"        h = bisect_right(tsk, B[{int(gslot)}][{TS}] + {int(amount)})")
            lines.append("        if h < hi:")
            lines.append("            hi = h")
        lines += [
            "        if lo >= hi:",
            "            continue",
            "        created += hi - lo",
            f"        first = pm[{FIRST_}]",
            f"        pos = pm[{POS_}]",
            f"        pre = B[:{slot}]",
            f"        post = B[{slot + 1}:]",
            "        for j in es[lo:hi]:",
            "            e = recs[j]",
            f"            if {' and '.join(conds) or 'True'}:",
            "                Bt = (*pre, e, *post)",
            (f"                finals.append((Bt, first, e, (*pos, e[{GPOS}])))" if last else
             f"                made.append(((Bt, {k + 1}, first, e, (*pos, e[{GPOS}])), j))"),
            "    return created",
            ""]
        fn: Callable[..., int] = build("\n".join(lines), env, label="tasks", entry="wave")
        return fn

    # the seam ------------------------------------------------------------------------------
    def mask_specs(self) -> list[tuple[str | None, Any]]:
        """One candidate bit per component (its variable's type and vectorized mask)."""
        return [(v.type, v.mask) for v in self.comp_var]

    def bind_consumed(self, consumed: Callable[[], set[int]]) -> None:
        """The runtime's consumed positions (CONSUME), read at every synchronization point."""
        self._consumed = consumed

    def new_state(self) -> TaskState:
        return TaskState(self.ncomp, self.settings.structure == "hash")

    def process(self, st: TaskState, recs: list[Any], bits: list[int], out: list[Any],
                max_matches: int | None, budget: int | None = None) -> None:
        """Raw-event blocks, each ended by a synchronization point."""
        del max_matches, budget
        size = self.settings.block_size
        for b0 in range(0, len(recs), size):
            if self._consumed is not None:
                consumed = self._consumed()
                if consumed:
                    self.discarded += st.discard_consumed(consumed)
            blk = _Block(recs[b0:b0 + size], bits[b0:b0 + size], self.ncomp)
            if self.procs:
                finals = self._waves_procs(st, blk)
            elif self.pool is None:
                c0 = time.thread_time()
                finals = self._waves(st, blk)
                c = time.thread_time() - c0
                self.busy_cpu += c
                self.critical_cpu += c
            else:
                finals = self._queued(st, blk)
            # synchronization point: hand the final matches to the merger (in output order:
            # the runtime's merge of the blocks then sorts runs already in order), clean up
            finals.sort(key=_final_key)
            for B, first, rec, positions in finals:
                out.append(Candidate(B, first[TS], first[WPOS], rec[GPOS], rec[TS], rec[WPOS],
                                     positions))
            if blk.recs:
                self._clean(st, blk.recs[-1])

    # task creation (content-free: type bits and window positions only) -----------------------
    def _range(self, blk: _Block, k: int, B: tuple[Any, ...], after: int) -> tuple[int, int]:
        """The tasks of partial match ``B`` for transition ``k``: ``evk[k][lo:hi]``, the
        events after block index ``after`` that its windows still admit."""
        e = blk.evk[k]
        lo = 0 if after < 0 else bisect_right(e, after)
        hi = len(e)
        for slot, amount, counter in self.guards[k]:
            f = B[slot]
            if counter:
                hi = min(hi, bisect_left(blk.wp[k], f[WPOS] + amount))
            else:
                hi = min(hi, bisect_right(blk.ts[k], f[TS] + amount))
        return lo, hi

    # operator instances ------------------------------------------------------------------------
    def _waves(self, st: TaskState, blk: _Block) -> list[tuple[Any, ...]]:
        """One operator instance, inline: the block's tasks in one batch per transition (the
        tasks of transition ``k`` need only the partial matches of transition ``k - 1``), no
        queue, no task objects."""
        recs = blk.recs
        last = self.ncomp - 1
        finals: list[tuple[Any, ...]] = []
        fresh: list[tuple[_PM, int]] = []  # partial matches made by the previous wave
        created = true = 0
        for k in range(self.ncomp):
            e = blk.evk[k]
            fns = self.fns[k]
            slot = self.slots[k]
            made: list[tuple[_PM, int]] = []
            if k == 0:
                created += len(e)
                empty: list[Any] = [None] * self.nslots
                for j in e:
                    rec = recs[j]
                    empty[slot] = rec
                    Bt = tuple(empty)
                    for fn in fns:
                        if fn(Bt, 0) is not True:
                            break
                    else:
                        if last == 0:
                            finals.append((Bt, rec, rec, (rec[GPOS],)))
                        else:
                            made.append(((Bt, 1, rec, rec, (rec[GPOS],)), j))
            else:
                guards = self.guards[k]
                wpk, tsk = blk.wp[k], blk.ts[k]
                ne = len(e)
                one = fns[0] if len(fns) == 1 else None
                final = k == last
                nxt = k + 1
                wave = self.waves[k]
                if wave is not None:
                    nf, nm = len(finals), len(made)
                    try:
                        created += wave(st.levels[k], fresh, e, wpk, tsk, recs, finals, made)
                    except TypeError:  # mixed types: the null-aware compiled functions below
                        del finals[nf:], made[nm:]
                    else:
                        for pm, _j in fresh:
                            st.add(pm)
                        fresh = made
                        true += len(made)
                        continue
                for pm, lo in chain(zip(st.levels[k], repeat(0)),
                                    ((pm, bisect_right(e, j)) for pm, j in fresh)):
                    B = pm[B_]
                    hi = ne
                    for gslot, amount, counter in guards:
                        f = B[gslot]
                        if counter:
                            h = bisect_left(wpk, f[WPOS] + amount)
                        else:
                            h = bisect_right(tsk, f[TS] + amount)
                        if h < hi:
                            hi = h
                    if lo >= hi:
                        continue
                    created += hi - lo
                    first, pos = pm[FIRST_], pm[POS_]
                    pre, post = B[:slot], B[slot + 1:]
                    for j in e[lo:hi]:
                        rec = recs[j]
                        Bt = (*pre, rec, *post)
                        if one is not None:
                            if one(Bt, 0) is not True:
                                continue
                        else:
                            ok = True
                            for fn in fns:
                                if fn(Bt, 0) is not True:
                                    ok = False
                                    break
                            if not ok:
                                continue
                        if final:
                            finals.append((Bt, first, rec, (*pos, rec[GPOS])))
                        else:
                            made.append(((Bt, nxt, first, rec, (*pos, rec[GPOS])), j))
            for pm, _j in fresh:
                st.add(pm)
            fresh = made
            true += len(made)
        self.tasks_created += created
        self.tasks_true += true + len(finals)
        return finals

    def _waves_procs(self, st: TaskState, blk: _Block) -> list[tuple[Any, ...]]:
        """``workers`` forked processes: per transition, the block's tasks (created here,
        content-free) go out in ``workers`` chunks of bindings; each process evaluates the
        transition's condition (its copy of the compiled plan, inherited by the fork) and
        sends back one boolean per task. For predicates that hold the GIL."""
        global _FORKED
        c0 = time.thread_time()
        if self.pool is None:
            import multiprocessing  # only when used: start-up
            from concurrent.futures import ProcessPoolExecutor

            _FORKED = self  # what the forked processes evaluate with
            self.pool = ProcessPoolExecutor(self.settings.workers,
                                            mp_context=multiprocessing.get_context("fork"))
            weakref.finalize(self, self.pool.shutdown, wait=False, cancel_futures=True)
        recs = blk.recs
        last = self.ncomp - 1
        finals: list[tuple[Any, ...]] = []
        fresh: list[tuple[_PM, int]] = []
        child = 0.0
        for k in range(self.ncomp):
            e = blk.evk[k]
            slot = self.slots[k]
            tasks: list[tuple[_PM | None, int, tuple[Any, ...]]] = []
            if k == 0:
                for j in e:
                    b: list[Any] = [None] * self.nslots
                    b[slot] = recs[j]
                    tasks.append((None, j, tuple(b)))
            else:
                for pm, after in chain(zip(st.levels[k], repeat(-1)), fresh):
                    lo, hi = self._range(blk, k, pm[B_], after)
                    B = pm[B_]
                    tasks.extend((pm, j, (*B[:slot], recs[j], *B[slot + 1:]))
                                 for j in e[lo:hi])
            self.tasks_created += len(tasks)
            if self.fns[k] and tasks:
                n = self.settings.workers
                size = -(-len(tasks) // n)
                chunks = [[t[2] for t in tasks[i:i + size]] for i in range(0, len(tasks), size)]
                oks: list[bool] = []
                spent = [0.0]
                for got, cpu in self.pool.map(_proc_eval, repeat(k), chunks):
                    oks.extend(got)
                    spent.append(cpu)
                child += max(spent)
            else:
                oks = [True] * len(tasks)
            made: list[tuple[_PM, int]] = []
            for (src, j, Bt), ok in zip(tasks, oks, strict=True):
                if not ok:
                    continue
                rec = recs[j]
                first = rec if src is None else src[FIRST_]
                pos = (rec[GPOS],) if src is None else (*src[POS_], rec[GPOS])
                if k == last:
                    finals.append((Bt, first, rec, pos))
                else:
                    made.append(((Bt, k + 1, first, rec, pos), j))
            for pm, _j in fresh:
                st.add(pm)
            fresh = made
            self.tasks_true += len(made)
        self.tasks_true += len(finals)
        serial = time.thread_time() - c0
        self.busy_cpu += serial
        self.critical_cpu += serial + child
        return finals

    def _queued(self, st: TaskState, blk: _Block) -> list[tuple[Any, ...]]:
        """``workers`` operator instances (this thread and the pool's) pulling tasks from the
        task queue (FIFO or priority: longer partial match first, then earlier event; Section
        5.4.1). A true task's new partial match gets its tasks at once (Algorithm 4.4); the
        block ends when the queue is empty and no task is in flight. The predicates run outside
        the lock: UDFs that release the GIL (OpenCV, numpy, I/O) run in parallel."""
        recs = blk.recs
        last = self.ncomp - 1
        prio = self.settings.queue == "priority"
        heap: list[tuple[int, int, int, _PM | None, int]] = []
        fifo: deque[tuple[int, int, int, _PM | None, int]] = deque()
        seq = count()
        cond = threading.Condition()
        finals: list[tuple[Any, ...]] = []
        made: list[_PM] = []
        state = {"inflight": 0, "created": 0, "true": 0}
        error: list[BaseException] = []

        def put(pm: _PM | None, k: int, after: int) -> None:  # under the lock
            e = blk.evk[k]
            if pm is None:
                lo, hi = 0, len(e)
            else:
                lo, hi = self._range(blk, k, pm[B_], after)
            state["created"] += max(hi - lo, 0)
            for j in e[lo:hi]:
                t = (-k, j, next(seq), pm, k)
                if prio:
                    heappush(heap, t)
                else:
                    fifo.append(t)

        put(None, 0, -1)
        for k in range(1, self.ncomp):
            for pm in st.levels[k]:
                put(pm, k, -1)

        def evaluate(pm: _PM | None, k: int, j: int) -> tuple[Any, ...] | None:
            rec = recs[j]
            slot = self.slots[k]
            if pm is None:
                b: list[Any] = [None] * self.nslots
                b[slot] = rec
                Bt = tuple(b)
            else:
                Bt = (*pm[B_][:slot], rec, *pm[B_][slot + 1:])
            for fn in self.fns[k]:
                if fn(Bt, 0) is not True:
                    return None
            return Bt

        cpu: list[float] = []

        def work() -> None:
            c0 = time.thread_time()
            try:
                pull()
            finally:
                with cond:
                    cpu.append(time.thread_time() - c0)

        def pull() -> None:
            while True:
                with cond:
                    while not (heap or fifo) and state["inflight"] and not error:
                        cond.wait()
                    if error or not (heap or fifo):
                        cond.notify_all()
                        return
                    _p, j, _s, pm, k = heappop(heap) if prio else fifo.popleft()
                    state["inflight"] += 1
                try:
                    Bt = evaluate(pm, k, j)  # the operator instance, outside the lock
                except BaseException as exc:
                    with cond:
                        error.append(exc)
                        state["inflight"] -= 1
                        cond.notify_all()
                    return
                with cond:
                    state["inflight"] -= 1
                    if Bt is not None:
                        state["true"] += 1
                        rec = recs[j]
                        first = rec if pm is None else pm[FIRST_]
                        positions = (rec[GPOS],) if pm is None else (*pm[POS_], rec[GPOS])
                        if k == last:
                            finals.append((Bt, first, rec, positions))
                        else:
                            npm = (Bt, k + 1, first, rec, positions)
                            made.append(npm)
                            put(npm, k + 1, j)
                    if heap or fifo or not state["inflight"]:
                        cond.notify_all()

        assert self.pool is not None
        others = [self.pool.submit(work) for _ in range(self.settings.workers - 1)]
        work()
        for f in others:
            f.result()
        if error:
            raise error[0]
        self.busy_cpu += sum(cpu)
        self.critical_cpu += max(cpu)
        # the structure's order does not depend on the threads' timing
        made.sort(key=lambda pm: pm[POS_])
        for pm in made:
            st.add(pm)
        self.tasks_created += state["created"]
        self.tasks_true += state["true"]
        return finals

    def _clean(self, st: TaskState, now: Any) -> None:
        """Drop the partial matches no later event can complete (whole-pattern window)."""
        if self.expire is None and self.expire_events is None:
            return
        ts, wpos = now[TS], now[WPOS]
        for k, lv in enumerate(st.levels):
            keep = []
            for pm in lv:
                f = pm[FIRST_]
                if (self.expire is not None and ts - f[TS] > self.expire) or (
                        self.expire_events is not None
                        and wpos - f[WPOS] >= self.expire_events - 1):
                    if st.by_event is not None:
                        for p in pm[POS_]:
                            lst = st.by_event[p]
                            lst.remove(pm)
                            if not lst:
                                del st.by_event[p]
                    continue
                keep.append(pm)
            st.levels[k] = keep

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
        return min((pm[FIRST_][GPOS] for lv in st.levels for pm in lv), default=None)

    def prune(self, st: Any) -> None:
        pass

    def dump_state(self, st: TaskState) -> Any:
        return [list(pm) for pm in st.pms]

    def load_state(self, data: Any) -> TaskState:
        st = self.new_state()
        for B, k, first, last, positions in data:
            st.add((tuple(B), k, tuple(first), tuple(last), tuple(positions)))
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
