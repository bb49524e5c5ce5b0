"""How a query runs on Spark: keyed, split along the time axis, or in one task.

This module is pure (no pyspark): it reads an :class:`AnalyzedQuery` and decides the execution
shape, so ``kleene explain --spark`` can show the decision without starting Spark.

The three shapes:

``keyed``
    PARTITION BY (or an equivalence test ``[attr]`` when nothing in the query depends on global
    positions): ``repartition(key).sortWithinPartitions(key, ts, pos).mapInArrow(engine)``; each
    key's events run through a fresh engine state.
``split``
    No key, but a time window W bounds every match: the time axis is cut into ranges; each task
    gets its range plus the preceding W (and, with a trailing negation, the following W) as
    read-only context and keeps only the matches whose last event lies in its own range. Every
    match is found exactly once, by exactly one task, with no single splitter.
``single``
    Everything else (no time bound, count windows, CONSUME, PICK): one task sees the whole
    stream in order. Correct, not parallel.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from .. import ast
from ..frozen import dataclass
from ..semantic.analyzed import AnalyzedQuery

Mode = Literal["keyed", "split", "single"]


@dataclass(frozen=True, slots=True)
class SparkPlan:
    """The execution shape chosen for one query (see the module docstring)."""

    mode: Mode
    keys: tuple[str, ...] = ()
    """Key attributes (``keyed`` mode)."""
    lookback_us: int = 0
    """Context before each range (``split`` mode): the largest time window in the query."""
    lookahead_us: int = 0
    """Context after each range (``split`` mode, trailing negation only)."""
    reasons: tuple[str, ...] = ()
    """Why this shape (and why not a more parallel one), one line each."""


def _patterns(p: ast.Pattern) -> Iterator[ast.Pattern]:
    yield p
    if isinstance(p, ast.Kleene | ast.Not | ast.Within):
        yield from _patterns(p.body)
    elif isinstance(p, ast.Seq | ast.And | ast.Or | ast.AnyOf):
        for item in p.items:
            yield from _patterns(item)


def _windows(q: AnalyzedQuery) -> list[ast.Window]:
    out = [p.window for p in _patterns(q.pattern) if isinstance(p, ast.Within)]
    if q.within is not None:
        out.append(q.within)
    out.extend(pk.within for pk in q.query.picks if pk.within is not None)
    return out


def _has_trailing_not(p: ast.Pattern) -> bool:
    """A NOT that ends a SEQ (at any depth) needs events *after* the match (look-ahead)."""
    for node in _patterns(p):
        if isinstance(node, ast.Seq) and node.items:
            last = node.items[-1]
            while isinstance(last, ast.Within):
                last = last.body
            if isinstance(last, ast.Not):
                return True
    return False


def _span_bound_us(q: AnalyzedQuery) -> int | None:
    """A time bound on ts(last) - ts(first) of every match, if the query has one."""
    if q.within is not None and not q.within.is_count:
        return q.within.microseconds
    top = q.pattern
    if isinstance(top, ast.Within) and not top.window.is_count:
        return top.window.microseconds
    return None


def _always_bound(p: ast.Pattern) -> frozenset[str]:
    """The variables bound to an event (or to a non-empty list) in every match of ``p``."""
    if isinstance(p, ast.EventPattern):
        return frozenset({p.var})
    if isinstance(p, ast.Seq | ast.And) or (isinstance(p, ast.AnyOf) and p.k >= len(p.items)):
        return frozenset().union(*(_always_bound(i) for i in p.items))
    if isinstance(p, ast.Or):
        return frozenset.intersection(*(_always_bound(i) for i in p.items))
    if isinstance(p, ast.Kleene):
        return _always_bound(p.body) if p.min >= 1 else frozenset()
    if isinstance(p, ast.Within):
        return _always_bound(p.body)
    return frozenset()  # NOT, ANY k of fewer than all


def _pick_across_keys(q: AnalyzedQuery) -> str | None:
    """Why a PICK may compare matches of different keys, or None. PICK applies over all
    partitions together (docs/semantics.md, the one-paragraph summary) to the matches equal in
    every binding except v's; matches of two keys share no event, so they can be equal there
    only if every other variable can be unbound or empty (``SEQ(B b, A* a[]) PICK FIRST b``)."""
    bound = _always_bound(q.query.pattern)
    for pick in q.query.picks:
        if not bound - {pick.var}:
            return (f"PICK {pick.mode.name} {pick.var} compares matches of different keys "
                    f"(every variable but {pick.var} may be unbound or empty)")
    return None


def plan_query(q: AnalyzedQuery) -> SparkPlan:
    """Choose keyed / split / single for ``q`` (pure; see the module docstring)."""
    windows = _windows(q)
    count_windows = [w for w in windows if w.is_count]
    across = _pick_across_keys(q)
    if q.partition_by and across is None:
        return SparkPlan("keyed", keys=tuple(q.partition_by), reasons=(
            f"PARTITION BY {', '.join(q.partition_by)}: every partition is independent "
            "(positions, contiguity and count windows are per partition)",))
    blockers: list[str] = []
    if q.partition_by:  # keyed unless a PICK compares matches of different keys
        blockers.append(f"PARTITION BY {', '.join(q.partition_by)} cannot key the data: "
                        f"{across}")
    elif q.equivalence:
        eq_block = [] if across is None else [across]
        if q.strategy is ast.Strategy.STRICT_CONTIGUITY:
            eq_block.append("strict-contiguity counts positions across all keys")
        if count_windows:
            eq_block.append("a count window counts events across all keys")
        if not eq_block:
            return SparkPlan("keyed", keys=tuple(q.equivalence), reasons=(
                f"equivalence [{', '.join(q.equivalence)}]: bound events share the value and "
                "negation looks only at events with that value, so keys are independent",))
        blockers.append(f"equivalence [{', '.join(q.equivalence)}] cannot key the data: "
                        + "; ".join(eq_block))
    span = _span_bound_us(q)
    if span is None:
        blockers.append("no query-level time window (WITHIN <time>) bounds a match, so a "
                        "match may span the whole stream")
    if count_windows:
        blockers.append("a count window (WITHIN n EVENTS) needs global positions")
    if q.query.consume is not None:
        blockers.append("CONSUME makes each match depend on every earlier emitted match")
    if q.query.picks:
        blockers.append("PICK compares matches that may end in different ranges")
    if q.emit is ast.Emit.COVERAGE:
        blockers.append("EMIT COVERAGE compares matches that may end in different ranges")
    if q.query.after_match is not None:
        blockers.append("AFTER MATCH SKIP starts each attempt where the previous match says")
    if blockers or span is None:
        return SparkPlan("single", reasons=(*blockers, "runs in ONE task, in input order "
                                             "(correct, not parallel)"))
    lookback = max([span, *(w.microseconds for w in windows if not w.is_count)])
    # maximal-grouping: a Kleene group may take events after the match's last event so far
    # (until the window has passed), so a task reads ahead as for a trailing NOT
    grouping = q.strategy is ast.Strategy.MAXIMAL_GROUPING
    # EMIT TIMEOUTS: a partial match starting in the range may be extended until its window
    # has passed, so the task reads one window past its range too
    lookahead = lookback if _has_trailing_not(q.pattern) or grouping or q.query.timeouts \
        else 0
    reasons = [f"no key; every match spans at most {_fmt_us(span)}, so a task needs only "
               f"its range plus the preceding {_fmt_us(lookback)} of events as context"]
    if lookahead:
        what = ("maximal group" if grouping else "trailing NOT" if _has_trailing_not(q.pattern)
                else "timed-out partial match (EMIT TIMEOUTS)")
        reasons.append(f"a {what} looks "
                       f"{_fmt_us(lookahead)} past a match: each task also reads that much "
                       "after its range")
    if q.emit is ast.Emit.RECENT:
        reasons.append("EMIT RECENT chooses among matches that share their last event, which "
                       "all end in the same range")
    reasons.append("each task keeps only the matches whose last event lies in its own range: "
                   "every match is found exactly once")
    return SparkPlan("split", lookback_us=lookback, lookahead_us=lookahead,
                     reasons=tuple(reasons))


def _fmt_us(us: int) -> str:
    for unit, size in (("days", 86_400_000_000), ("hours", 3_600_000_000),
                       ("minutes", 60_000_000), ("seconds", 1_000_000),
                       ("milliseconds", 1_000)):
        if us >= size and us % size == 0:
            return f"{us // size} {unit}"
    return f"{us} microseconds"


def explain_plan(q: AnalyzedQuery, plan: SparkPlan | None = None) -> str:
    """A human description of how ``q`` runs on Spark (``kleene explain --spark``)."""
    plan = plan or plan_query(q)
    lines = [f"Spark execution of query {q.name!r}: {plan.mode}"]
    if plan.mode == "keyed":
        keys = ", ".join(plan.keys)
        lines.append(f"  df.repartition({keys}).sortWithinPartitions({keys}, ts, pos)"
                     ".mapInArrow(engine)")
        lines.append("  one fresh engine state per key; the task checks (key, ts, pos) order "
                     "and fails on a violation")
    elif plan.mode == "split":
        ahead = f" and the following {_fmt_us(plan.lookahead_us)}" if plan.lookahead_us else ""
        lines.append("  time axis cut into ranges [b_j, b_j+1) at approximate quantiles of ts")
        lines.append(f"  task j reads [b_j - {_fmt_us(plan.lookback_us)}, b_j+1"
                     f"{' + ' + _fmt_us(plan.lookahead_us) if plan.lookahead_us else ''})"
                     f": its range plus the preceding {_fmt_us(plan.lookback_us)}{ahead} as "
                     "read-only context")
        lines.append("  task j keeps a match only if its last event lies in [b_j, b_j+1)")
    else:
        lines.append("  df.repartition(1).sortWithinPartitions(ts, pos).mapInArrow(engine)")
    lines.append("  why:")
    lines.extend(f"    - {r}" for r in plan.reasons)
    return "\n".join(lines)


__all__ = ["Mode", "SparkPlan", "explain_plan", "plan_query"]
