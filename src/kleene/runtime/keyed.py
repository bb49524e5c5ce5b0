"""When keyed parallelism applies and when it pays (issue 15): the decisions, without the
machinery (:mod:`kleene.runtime.parallel`, which imports numpy, the runtime, and
``multiprocessing`` where it forks with it; a run that stays in one process imports none of
them).
"""

from __future__ import annotations

from typing import Any

from ..plan.linear import CompKind
from ..vocab import PickMode

MIN_EVENTS_PER_WORKER = 10_000
"""Below this many events per worker, forking costs more than it saves: one process."""


def _pick_spans_partitions(plan: Any, spec: Any) -> str | None:
    """A PICK FIRST/LAST v compares the matches equal in every other binding: they share an
    event (hence a partition) only if some other variable always binds one. Checked on linear
    plans (components); any other plan with such a PICK stays in one process."""
    comps = getattr(plan, "components", None)
    for p in spec.picks:
        if p.mode is PickMode.EACH:
            continue
        if comps is None or not any(
                c.kind is not CompKind.CHOICE and c.min > 0 and p.var not in c.vars
                for c in comps):
            return (f"PICK {p.mode.name} {p.var} can compare matches of different partitions "
                    "(no other variable always binds an event)")
    return None


def sequential_reason(compiled: Any, n_events: int, workers: int) -> str | None:
    """Why ``compiled`` runs in one process over ``n_events`` with ``workers`` asked (None:
    it runs in parallel)."""
    plan = compiled.plan
    if workers <= 1:
        return "one worker asked"
    if not plan.partition_by:
        return ("no PARTITION BY: partitions are the unit of keyed parallelism "
                "(positions, PICK and CONSUME would span workers)")
    why = _pick_spans_partitions(plan, compiled.spec)
    if why is not None:
        return why
    if n_events < 2 * MIN_EVENTS_PER_WORKER:
        return f"{n_events:,} events: too few to pay for a second process"
    return None


PARTS_COST = {
    "start_s": 0.45,      # interpreter, imports, compile: both ways, in the calling process
    "parts_s": 0.20,      # with parts: the type sample read here, the peek, forks, the merge
    "read_us": 0.55,      # reading one event in one process (CSV, per event)
    "part_read_us": 0.66,  # ... in parts (blocks start afresh in each part)
    "exchange_us": 0.36,  # splitting by key hash, the IPC files, gathering (all workers)
    "unit_us": 7.0,       # one unit of the plan chooser's cost estimate, matching + output
    "pays": 1.2,          # the estimated speed-up at which the workers are used
}
"""The cost model of :func:`parts_pay` (CPU seconds and microseconds per event, fitted on the
stock workload, 1M events: docs/benchmarks.md, "Keyed parallelism, reading in parts")."""


def parts_estimate(compiled: Any, events: int, parts: int) -> float:
    """The estimated speed-up of ``parts`` workers that read the input in parts against one
    process, over ``events`` events (:data:`PARTS_COST`)."""
    c = PARTS_COST
    chosen = compiled.choice.chosen
    cost = next((x.cost for x in compiled.choice.candidates
                 if x.name == chosen and x.cost is not None), 1.0)
    work_us = min(cost, 1e3) * c["unit_us"]
    one = c["start_s"] + events * (c["read_us"] + work_us) * 1e-6
    many = (c["start_s"] + c["parts_s"]
            + events * (c["part_read_us"] + c["exchange_us"] + work_us) * 1e-6 / parts)
    return one / many


def parts_pay(compiled: Any, events: int, parts: int) -> str | None:
    """Whether ``parts`` workers that read the input in parts pay against one process for
    about ``events`` events (None), or why not (for the run summary)."""
    gain = parts_estimate(compiled, events, parts)
    if gain >= PARTS_COST["pays"]:
        return None
    return (f"{parts} workers estimated {gain:.2f}x one over ~{events:,} events with the "
            f"{compiled.kind.name} plan (start-up is serial; --workers {parts} forces them)")


__all__ = ["MIN_EVENTS_PER_WORKER", "PARTS_COST", "parts_estimate", "parts_pay",
           "sequential_reason"]
