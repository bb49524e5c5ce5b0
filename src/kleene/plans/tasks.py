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
    predicates;
  - ``operators="auto"`` (the default): :func:`choose_operators` decides from the UDFs the
    conditions call -- none: inline; declared (``kleene.udf(f, releases_gil=...)``): threads or
    processes; undeclared: measured on the first tasks (:meth:`TaskMatcher._measure`).
    ``kleene explain --plan tasks`` and the run summary report the choice and why;
* the merger: final matches go to the runtime, which sorts them in output order (Definition
  4.4.12, docs/semantics.md 10) and applies PICK / EMIT RECENT / CONSUME. The queue decides the
  order tasks are evaluated in, never the result.

Supported: a SEQ of single events (no Kleene, no OR choice, no NOT) under skip-till-any-match,
without PARTITION BY (a keyed query is parallel by key: ``workers=``). The cost estimate makes
the chooser prefer ``nfa``; force it with ``--plan tasks``. Settings: :func:`configure` or the
``KLEENE_TASKS`` environment variable (``workers=2,block_size=64,queue=fifo,structure=tree,
operators=auto|threads|processes``). Matches and order equal one core for any worker count,
block size, queue, structure and operator kind (``tests/runtime/test_tasks.py``; the
conformance suite with ``KLEENE_TASKS``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import field, fields, replace
from heapq import heappop, heappush
from itertools import chain, count, repeat
from typing import TYPE_CHECKING, Any

from ..codegen import build
from ..errors import QueryValidationError
from ..frozen import dataclass
from ..plan.automaton import CompKind, Plan, Unsupported, compile_plan
from ..plan.explain import linear_text
from ..plan.expr import GPOS, TS, WPOS, refs
from ..runtime.linear import Candidate
from ..runtime.matcher import MatcherOptions
from ..semantic.analyzed import AnalyzedQuery
from ..udf import PureUdf, udf_releases_gil
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

    operators: str = "auto"
    """``auto`` (chosen per query from its UDFs, :func:`choose_operators`), ``threads`` (the
    predicates release the GIL: OpenCV, numpy, I/O) or ``processes`` (they hold it: pure-Python
    UDFs; forked worker processes evaluate each transition's batch)."""

    free_cores: float = 1.5
    """``auto``: before comparing 1 thread with 2, two threads must get this many cores now
    (:func:`free_cores`), else the measurement waits for a later batch; 0 skips the check."""

    @property
    def mode(self) -> str:
        """What evaluates the tasks, as set (``kleene explain`` also says what ``auto``
        chooses for the query: :func:`choose_operators`)."""
        if self.workers <= 1:
            return "inline (1 operator instance)"
        if self.operators == "processes":
            return f"{self.workers} forked processes (batch per transition and block)"
        if self.operators == "auto":
            return f"{self.workers} operator instances, threads or processes chosen automatically"
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
        elif name == "free_cores" and value.replace(".", "", 1).isdigit():
            changes[name] = float(value)
        elif name in ("queue", "structure", "operators") and value:
            changes[name] = value
        else:
            raise QueryValidationError(
                f"KLEENE_TASKS: bad setting {item!r} (workers=N, block_size=N, "
                "queue=fifo|priority, structure=hash|tree, operators=auto|threads|processes, "
                "free_cores=X)")
    return _checked(replace(s, **changes))


def _checked(s: TaskSettings) -> TaskSettings:
    if s.workers < 1 or s.block_size < 1 or s.queue not in ("fifo", "priority") \
            or s.structure not in ("hash", "tree") \
            or s.operators not in ("auto", "threads", "processes"):
        raise QueryValidationError(
            f"bad task settings: workers={s.workers}, block_size={s.block_size} (both >= 1), "
            f"queue={s.queue!r} (fifo|priority), structure={s.structure!r} (hash|tree), "
            f"operators={s.operators!r} (auto|threads|processes)")
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


@dataclass(frozen=True, slots=True)
class TaskPlan(Plan):
    """The linear plan and, per transition, the UDFs its conditions call (name, function):
    what :func:`choose_operators` decides threads or processes from."""

    udfs: tuple[tuple[tuple[str, Any], ...], ...] = field(default=(), compare=False)


def compile_tasks(analyzed: AnalyzedQuery) -> TaskPlan:
    """The linear plan, if the task engine covers it (else :class:`Unsupported`)."""
    plan = _covered(compile_plan(analyzed))
    per: list[tuple[tuple[str, Any], ...]] = []
    for c in plan.components:
        v = plan.vars[c.vars[0]]
        names: dict[str, None] = {}
        for p in v.take + v.close:
            names.update(dict.fromkeys(sorted(refs(p.expr, set()).udfs)))
        per.append(tuple((n, analyzed.udfs[n]) for n in names if n in analyzed.udfs))
    return TaskPlan(**{f.name: getattr(plan, f.name) for f in fields(Plan)}, udfs=tuple(per))


def _covered(plan: Plan) -> Plan:
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


CHEAP_TASK_S = 50e-6
"""A task whose conditions take less than this (measured, seconds) is evaluated inline: a
queue or a pickled batch costs about that much per task, more than a second core gives."""
THREAD_SPEEDUP = 1.5
"""Measured: 2 threads evaluate tasks at least this many times as fast as one (2.0 when the
UDF releases the GIL all the time, about 1.0 or less when it holds it): threads, else
processes."""
MEASURE_S = 0.06
"""The measurement's first sequential part runs tasks until a :data:`MEASURE_ROUNDS`-th of
this many seconds has passed (or :data:`MEASURE_TASKS` tasks): q tasks; then up to
:data:`MEASURE_ROUNDS` rounds of 2q tasks on 2 threads and q on one, alternately."""
MEASURE_TASKS = 32
MEASURE_ROUNDS = 3
"""Rounds of (2 threads, 1 thread) in a measurement."""
MEASURE_MIN = 12
"""Fewer tasks in a batch are evaluated inline without a measurement (too few to tell)."""


def free_cores(seconds: float = 0.01) -> float:
    """The cores two threads get now: each hashes 64 KiB blocks (``hashlib`` releases the GIL)
    for ``seconds``; their CPU seconds over the wall time (2.0 on an idle machine with 2 free
    cores, about 1.0 or less when the machine is saturated)."""
    import hashlib

    data = b"k" * 65_536
    cpu = [0.0, 0.0]

    def spin(i: int) -> None:
        c0 = time.thread_time()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            hashlib.sha256(data).digest()
        cpu[i] = time.thread_time() - c0

    t0 = time.perf_counter()
    helper = threading.Thread(target=spin, args=(1,), name="kleene-task-probe")
    helper.start()
    spin(0)
    helper.join()
    return (cpu[0] + cpu[1]) / (time.perf_counter() - t0)


def choose_operators(plan: Plan, settings: TaskSettings) -> tuple[str, str]:
    """What evaluates the tasks, and why: ``inline``, ``threads``, ``processes``, or
    ``measure`` (decided on the first tasks, :meth:`TaskMatcher._measure`).

    With ``operators="auto"`` and more than one worker: conditions without UDFs are cheap
    (no operator pool: inline); a UDF declared ``releases_gil=False`` (it holds the GIL) gives
    processes; UDFs all declared ``releases_gil=True`` give threads; an undeclared one is
    measured. ``threads`` / ``processes`` set by hand win over everything."""
    w = settings.workers
    if w <= 1:
        return "inline", "1 worker"
    if settings.operators != "auto":
        return settings.operators, f"operators={settings.operators} (set)"
    udfs = dict(u for per in getattr(plan, "udfs", ()) for u in per)
    if not udfs:
        return "inline", ("no user function in the conditions: cheap predicates are "
                          "evaluated inline (an operator pool costs more than it gives)")
    declared = {n: udf_releases_gil(f) for n, f in udfs.items()}
    holds = sorted(n for n, d in declared.items() if d is False)
    if holds:
        return "processes", f"udf {', '.join(holds)} declared releases_gil=False"
    unknown = sorted(n for n, d in declared.items() if d is None)
    if not unknown:
        return "threads", f"udf {', '.join(sorted(udfs))} declared releases_gil=True"
    return "measure", (f"udf {', '.join(unknown)} not declared (releases_gil=): measured on "
                       "the first tasks, 1 thread against 2")


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


LAST: TaskMatcher | None = None
"""The task matcher made last (the run summary reports its operator choice)."""

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
        self.operators, self.why = choose_operators(plan, settings)
        """What evaluates the tasks (``inline``, ``threads``, ``processes``; ``measure`` until
        the measurement decided) and why (the run summary and ``kleene explain`` say it)."""
        self.measured: dict[str, float] = {}
        """The measurement, when one decided: seconds per task on 1 thread, speed-up of 2."""
        self.procs = self.operators == "processes"
        self.pool: Executor | None = None
        if self.operators == "threads":
            self._thread_pool()
        self._child = 0.0
        global LAST
        LAST = self
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

    def _thread_pool(self) -> None:
        from concurrent.futures import ThreadPoolExecutor  # only when used: start-up

        self.pool = ThreadPoolExecutor(self.settings.workers - 1, thread_name_prefix="kleene-task")

    @property
    def choice(self) -> str:
        """The operator instances and the reason, in a line (run summary, explain)."""
        w = self.settings.workers
        what = {"inline": "inline (1 operator instance)",
                "threads": f"{w} threads", "processes": f"{w} forked processes",
                "measure": "inline until measured"}[self.operators]
        m = self.measured
        if m:
            how = (f"measured: {m['per_task'] * 1e3:.3g} ms per task, 2 threads "
                   f"{m['speedup']:.2f}x 1 thread" if "speedup" in m else
                   f"measured: {m['per_task'] * 1e6:.3g} us per task, under "
                   f"{CHEAP_TASK_S * 1e6:.0f} us: no pool")
            return f"{what}; {self.why.split(': measured')[0]}; {how}"
        return f"{what}; {self.why}"

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
                finals = self._waves_batch(st, blk, self._eval_procs)
            elif self.operators == "measure":
                finals = self._waves_batch(st, blk, self._measure)
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

    def _waves_batch(self, st: TaskState, blk: _Block,
                     evaluate: Callable[[int, list[tuple[Any, ...]]], list[bool]]
                     ) -> list[tuple[Any, ...]]:
        """Per transition, the block's tasks (created here, content-free) as one batch of
        bindings that ``evaluate`` turns into one boolean per task: forked processes
        (:meth:`_eval_procs`) or the measurement (:meth:`_measure`)."""
        c0 = time.thread_time()
        self._child = 0.0
        recs = blk.recs
        last = self.ncomp - 1
        finals: list[tuple[Any, ...]] = []
        fresh: list[tuple[_PM, int]] = []
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
                oks = evaluate(k, [t[2] for t in tasks])
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
        self.critical_cpu += serial + self._child
        return finals

    def _eval_procs(self, k: int, Bts: list[tuple[Any, ...]]) -> list[bool]:
        """``workers`` forked processes: the batch in ``workers`` chunks of bindings; each
        process evaluates transition ``k``'s condition (its copy of the compiled plan,
        inherited by the fork) and sends back one boolean per task. For predicates that hold
        the GIL."""
        global _FORKED
        if self.pool is None:
            import multiprocessing  # only when used: start-up
            from concurrent.futures import ProcessPoolExecutor

            _FORKED = self  # what the forked processes evaluate with
            self.pool = ProcessPoolExecutor(self.settings.workers,
                                            mp_context=multiprocessing.get_context("fork"))
            weakref.finalize(self, self.pool.shutdown, wait=False, cancel_futures=True)
        n = self.settings.workers
        size = max(-(-len(Bts) // n), 1)
        oks: list[bool] = []
        spent = [0.0]
        for got, cpu in self.pool.map(_proc_eval, repeat(k), [Bts[i:i + size] for i in
                                                               range(0, len(Bts), size)]):
            oks.extend(got)
            spent.append(cpu)
        self._child += max(spent)
        return oks

    def _eval_here(self, k: int, Bts: list[tuple[Any, ...]]) -> list[bool]:
        fns = self.fns[k]
        return [all(fn(Bt, 0) is True for fn in fns) for Bt in Bts]

    def _eval_threads(self, k: int, Bts: list[tuple[Any, ...]]) -> list[bool]:
        """The batch in ``workers`` chunks: this thread and the pool's."""
        assert self.pool is not None
        n = self.settings.workers
        size = max(-(-len(Bts) // n), 1)
        chunks = [Bts[i:i + size] for i in range(0, len(Bts), size)]
        others = [self.pool.submit(self._eval_here, k, c) for c in chunks[1:]]
        oks = self._eval_here(k, chunks[0]) if chunks else []
        for f in others:
            oks.extend(f.result())
        return oks

    def _two_threads(self, k: int, a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]
                     ) -> list[bool]:
        """Evaluate ``a`` here and ``b`` on a helper thread at the same time."""
        got: list[bool] = []
        error: list[BaseException] = []

        def other() -> None:
            try:
                got.extend(self._eval_here(k, b))
            except BaseException as exc:  # noqa: BLE001 - raised again below
                error.append(exc)

        helper = threading.Thread(target=other, name="kleene-task-measure")
        helper.start()
        try:
            mine = self._eval_here(k, a)
        finally:
            helper.join()
        if error:
            raise error[0]
        return mine + got

    def _measure(self, k: int, Bts: list[tuple[Any, ...]]) -> list[bool]:
        """Decide threads or processes on transition ``k``'s first tasks, if its conditions
        call an undeclared UDF: q tasks on this thread (:data:`MEASURE_S`), then rounds of 2q
        tasks on 2 threads and q on this one, alternately (:data:`MEASURE_ROUNDS`). Cheaper than
        :data:`CHEAP_TASK_S` a task: inline; 2 threads at least :data:`THREAD_SPEEDUP` times
        as fast: threads (the UDF releases the GIL); else processes. Pure UDFs run unmemoized
        meanwhile (a cache hit is not the function's cost). Every result is used: the
        measurement is the evaluation of those tasks."""
        if self.operators != "measure":  # decided on an earlier transition of the block
            return (self._eval_threads if self.operators == "threads" else
                    self._eval_procs if self.procs else self._eval_here)(k, Bts)
        udfs = self.plan.udfs[k] if isinstance(self.plan, TaskPlan) else ()
        if not any(udf_releases_gil(f) is None for _n, f in udfs) or len(Bts) < MEASURE_MIN:
            return self._eval_here(k, Bts)
        with contextlib.ExitStack() as stack:
            for _n, f in udfs:
                if isinstance(f, PureUdf):
                    stack.enter_context(f.unmemoized())
            oks = self._eval_here(k, Bts[:1])  # a first call may warm caches up: not timed
            t0 = time.perf_counter()
            each: list[float] = []
            i = 1
            while i < len(Bts) - 6 and i <= MEASURE_TASKS and (
                    i <= 3 or time.perf_counter() - t0 < MEASURE_S / MEASURE_ROUNDS):
                t1 = time.perf_counter()
                oks += self._eval_here(k, Bts[i:i + 1])
                each.append(time.perf_counter() - t1)
                i += 1
            one_s, one_n = time.perf_counter() - t0, i - 1
            # the median task: a task the scheduler preempted does not make a cheap UDF costly
            cheap = sorted(each)[len(each) // 2] < CHEAP_TASK_S
            # on a machine that cannot give 2 threads the cores (TaskSettings.free_cores)
            # neither threads nor processes gain and the comparison would say nothing about
            # the UDF: this batch inline, and measured again on a later one
            need = self.settings.free_cores
            cores = free_cores() if need > 0 and not cheap else 2.0
            busy = cores < need
            two_s, two_n = 0.0, 0
            q = one_n
            for r in range(0 if cheap or busy else MEASURE_ROUNDS):
                # rounds of (2 threads, 1 thread) alternate: a change of the machine's load
                # then weighs on both sides
                m = min(q, (len(Bts) - i) // 2)
                if m < 1:
                    break
                t1 = time.perf_counter()
                oks += self._two_threads(k, Bts[i:i + m], Bts[i + m:i + 2 * m])
                two_s += time.perf_counter() - t1
                two_n += 2 * m
                i += 2 * m
                if r == MEASURE_ROUNDS - 1 or len(Bts) - i < 3 * q:
                    break
                t1 = time.perf_counter()
                oks += self._eval_here(k, Bts[i:i + q])
                one_s += time.perf_counter() - t1
                one_n += q
                i += q
        one = one_s / one_n
        if cheap:
            one = sorted(each)[len(each) // 2]
        if busy:
            self.why = (f"{self.why.split('; machine busy')[0]}; machine busy (2 threads got "
                        f"{cores:.2f} cores): measured again on a later batch")
            return oks + self._eval_here(k, Bts[i:])
        if cheap:
            self.operators, self.measured = "inline", {"per_task": one}
            return oks + self._eval_here(k, Bts[i:])
        speedup = two_n * one / two_s if two_s > 0 else float("inf")
        self.measured = {"per_task": one, "speedup": speedup}
        if speedup >= THREAD_SPEEDUP:
            self.operators = "threads"
            self._thread_pool()
            return oks + self._eval_threads(k, Bts[i:])
        self.operators, self.procs = "processes", True
        return oks + self._eval_procs(k, Bts[i:])

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
    kind, why = choose_operators(plan, s)
    return linear_text(plan) + [
        f"tasks: <transition, partial match, event>; operator instances {s.mode}; "
        f"{s.queue} queue; raw-event blocks of {s.block_size:,} events",
        f"operators: {kind} ({why})"]


PLAN = PlanKind(
    name="tasks",
    description="splitter-free task engine (parallel-cep): tasks <transition, partial match, "
                "event> evaluated by operator instances, block-synchronous",
    compile=compile_tasks,
    matcher=_matcher,
    cost=tasks_cost,
    explain=_explain,
)
