"""``runs``: contiguous runs evaluated with array operations (docs/engine.md, "The runs plan").

Takes the shape ``SEQ(A a, B+ b[], C c)`` under ``strict-contiguity`` with the conjuncts of
a Kleene run over consecutive events: one-event filters, ``b[1]`` against ``a``, ``b[i]``
against ``b[i-1]``, and ``c`` against ``a``; one whole-pattern time window; PARTITION BY (no
equivalence attributes); no NOT, RETURN, policies or AFTER MATCH. Under strict contiguity a
match is a start ``s`` and an end ``t`` of one partition's event sequence with the events
between them as ``b``: the matcher (:class:`kleene.runtime.runs.RunsMatcher`) finds them with
shifted comparisons, segment ids per partition and ``searchsorted`` instead of a loop over
events -- the same matches in the same order as the ``nfa`` plan (the conformance suite and
the differential test run it on every case).

The plan is the linear plan (:class:`kleene.plan.linear.Plan`) plus each conjunct's role and
its vectorizable form, as plain data; a conjunct without one (a UDF, arithmetic, a string
column) is evaluated per (start, end) pair by its compiled function.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from .. import ast
from ..plan.automaton import CompKind, Plan, Unsupported, compile_plan
from ..plan.explain import linear_text
from ..runtime.matcher import MatcherOptions
from ..runtime.runs import RunPred, RunsMatcher, RunsPlan
from ..semantic.analyzed import AnalyzedQuery
from ..vocab import IndexKind, Strategy
from .nfa import linear_cost, linear_terms
from .registry import CompiledPlan, PlanKind, Stats, output_spec

RUNS_SHARE = 0.25
"""The runs plan's work as a share of the NFA's estimate for the same plan (both scan the
same events; the arrays replace the NFA's per-event steps and per-run visits): measured on
the stock query, 1M events, CPU seconds of the match step, 0.32-0.40 s against the NFA's
1.3-1.9 s (counting and building; docs/benchmarks.md, issue 18)."""
RUNS_FLOOR = 0.05
"""The least work per input event (the array operations over every event of a chunk)."""
RUNS_PAIR = 1.5
"""Work per (start, end) pair a conjunct without an array form is evaluated on, in the NFA's
unit (docs/benchmarks.md, "The plan chooser's scale")."""

_CMP = frozenset({"<", "<=", ">", ">=", "=", "!="})


def _walk(e: Any) -> Iterator[Any]:
    """Every AST node under ``e`` (dataclass fields, tuples)."""
    yield e
    if dataclasses.is_dataclass(e) and not isinstance(e, type):
        for f in dataclasses.fields(e):
            v = getattr(e, f.name)
            if isinstance(v, tuple):
                for x in v:
                    yield from _walk(x)
            elif dataclasses.is_dataclass(v):
                yield from _walk(v)


def _refs(e: ast.Expr) -> list[Any]:
    return [n for n in _walk(e) if isinstance(n, ast.AttrRef | ast.VarRef)]


def _operand(e: ast.Expr, side: dict[tuple[str, Any], str]) -> tuple[Any, ...] | None:
    """An operand of a vectorizable comparison: ``("col", "x"|"y", attr)`` or
    ``("lit", number)``; None if it has no array form."""
    if isinstance(e, ast.AttrRef):
        idx = None if e.index is None else (e.index.kind, e.index.offset)
        which = side.get((e.var, idx))
        return None if which is None else ("col", which, e.attr)
    if isinstance(e, ast.Literal) and e.kind == "auto" and type(e.value) in (int, float):
        return ("lit", e.value)
    return None


def _vector(e: ast.Expr, side: dict[tuple[str, Any], str]) -> tuple[Any, ...] | None:
    """``("cmp", op, lhs, rhs)`` for a comparison of columns and numbers, else None."""
    if isinstance(e, ast.Binary) and e.op in _CMP:
        lhs, rhs = _operand(e.left, side), _operand(e.right, side)
        if lhs is not None and rhs is not None and (lhs[0] == "col" or rhs[0] == "col"):
            return ("cmp", e.op, lhs, rhs)
    return None


def compile_runs(analyzed: AnalyzedQuery) -> RunsPlan:
    """The runs plan of a query, or :class:`Unsupported` with the reason."""
    if analyzed.strategy is not Strategy.STRICT_CONTIGUITY:
        raise Unsupported("the runs plan evaluates strict-contiguity only")
    if not output_spec(analyzed).plain or analyzed.query.timeouts:
        raise Unsupported("the runs plan has no PICK, CONSUME, EMIT RECENT or TIMEOUTS")
    base: Plan = compile_plan(analyzed)
    comps = base.components
    shape = (len(comps) == 3 and comps[0].kind is CompKind.SINGLE
             and comps[1].kind is CompKind.KLEENE and comps[2].kind is CompKind.SINGLE
             and comps[1].min >= 1)
    if not shape:
        raise Unsupported("the runs plan takes SEQ(a, b+, c) only")
    if base.negations or base.match_preds or base.return_fns:
        raise Unsupported("the runs plan has no NOT, RETURN or match-level conjuncts")
    if base.equivalence:
        raise Unsupported("the runs plan routes by PARTITION BY only (no equivalence "
                          "attributes)")
    for w in base.windows:
        if w.count or w.first != 0 or w.last != 2:
            raise Unsupported("the runs plan takes one time window over the whole pattern")
    va, vb, vc = (c.vars[0] for c in comps)
    preds: list[RunPred] = []
    for v in (va, vb, vc):
        vp = base.vars[v]
        if vp.close:
            raise Unsupported("the runs plan has no conjuncts decided when b closes "
                              "(last, aggregates)")
        for p in vp.take:
            if p.general is not None or p.opt_slots:
                raise Unsupported("the runs plan takes conjuncts over a, b[1], b[i], "
                                  "b[i-1] and c only")
            role, side = _role(p.expr, v, va, vb, vc, p.iter_var, p.prev, p.vars)
            preds.append(RunPred(role, _vector(p.expr, side), p.compiled.fn,
                                 1 if role == "link" else 0))
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    return RunsPlan(**fields, preds=tuple(preds), kmin=comps[1].min, kmax=comps[1].max)


def _role(expr: ast.Expr, v: str, va: str, vb: str, vc: str, iter_var: str | None,
          prev: bool, vs: frozenset[str]) -> tuple[str, dict[tuple[str, Any], str]]:
    """Where a conjunct placed at ``v`` is evaluated (``begin``: on a start, ``elem``: on
    one element of b, ``first``: on (a, b[1]), ``link``: on (b[i-1], b[i]), ``close``: on
    (a, c), ``cend``: on c alone) and which side (x: the earlier event, y: the later one)
    each attribute reference reads."""
    refs = _refs(expr)
    bad = Unsupported("the runs plan takes conjuncts over a, b[1], b[i], b[i-1] and c only")
    b_idx = set()
    for r in refs:
        if r.var == vb:
            if isinstance(r, ast.VarRef) or r.index is None:
                raise bad
            b_idx.add((r.index.kind, r.index.offset))
    first = {(IndexKind.ABSOLUTE, 1), (IndexKind.FIRST, 0), (IndexKind.FIRST, 1)}
    if v == va:
        if vs <= {va}:
            return "begin", {(va, None): "y"}
    elif v == vc:
        if vs <= {vc}:
            return "cend", {(vc, None): "y"}
        if iter_var is None and vs <= {va, vc}:
            return "close", {(va, None): "x", (vc, None): "y"}
    elif iter_var is None:
        if vs <= {va, vb} and b_idx <= first:
            return "first", {(va, None): "x", **{(vb, k): "y" for k in first}}
    elif iter_var == vb and vs == {vb}:
        cur0, cur1 = (IndexKind.CURRENT, 0), (IndexKind.CURRENT, -1)
        if prev and b_idx <= {cur0, cur1}:
            return "link", {(vb, cur1): "x", (vb, cur0): "y"}
        if not prev and b_idx <= {cur0}:
            return "elem", {(vb, cur0): "y"}
    raise bad


def runs_cost(plan: RunsPlan, stats: Stats) -> float:
    """A share of the NFA's estimate (at least the array work per event), plus the pairs
    each conjunct without an array form is evaluated on."""
    t = linear_terms(plan, stats)
    slow = sum(1 for p in plan.preds if p.vec is None)
    return max(RUNS_SHARE * linear_cost(plan, stats), RUNS_FLOOR) + (
        RUNS_PAIR * slow * t["events"] * (1.0 + t["runs"]))


def runs_text(plan: RunsPlan) -> list[str]:
    """``kleene explain``: the linear plan, then each conjunct's role."""
    out = linear_text(plan)
    out.append("runs: contiguous runs per partition with array operations")
    for p in plan.preds:
        out.append(f"  {p.role:<6} {'arrays' if p.vec is not None else 'per pair'}")
    return out


def _matcher(cp: CompiledPlan, options: MatcherOptions) -> Any:
    return RunsMatcher(cp.plan, options)


PLAN = PlanKind(
    name="runs",
    description="SEQ(a, b+, c) under strict contiguity: runs per partition found with array "
                "operations (shifted comparisons, segments, searchsorted)",
    compile=compile_runs,
    matcher=_matcher,
    cost=runs_cost,
    explain=runs_text,
    one_process=True,
)
