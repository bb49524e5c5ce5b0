"""The linear plan compiler: a validated query -> an immutable NFA^b over the components of a
pattern (the plan data is :mod:`kleene.plan.linear`; the matchers never see the AST).

``compile_plan(analyzed)`` turns a validated query into a :class:`Plan`:

* the pattern is flattened into a sequence of **components** (SASE+ NFA^b states): a single
  event, a Kleene closure on an event type, or a choice between single events (``OR`` inside
  ``SEQ``). Each component has *take* edges (bind the event), the Kleene ones a *take* loop, and
  *proceed* edges to the following components; *ignore* edges depend on the strategy;
* ``NOT`` becomes a **negation guard** on the gap between two components (leading, inner or
  trailing);
* every WHERE conjunct is **placed** at the last variable it mentions (pattern order): on the
  take edge of that variable (for single variables and per-element tests of a Kleene variable,
  including iteration predicates ``v[i]`` vs ``v[i-1]``), or on the *proceed* edge that closes a
  Kleene variable (``last``, aggregates); one-variable conjuncts are additionally vectorized
  into per-batch candidate masks (:mod:`kleene.plan.vector`);
* windows (query-level and on sub-patterns) become window guards over component ranges.

Patterns outside this shape (AND, ANY, OR of sequences, Kleene on groups) compile to a
:class:`~kleene.plan.blocks.GroupPlan` (:mod:`kleene.plan.groups`), evaluated by
:mod:`kleene.runtime.groups`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from .. import ast
from ..errors import EngineError
from ..frozen import dataclass
from ..semantic.analyzed import AnalyzedQuery, VarKind
from ..syntax import expr_text
from .expr import HELPERS, Layout, NotInlinable, RefInfo, compile_expr, inline_condition, refs
from .layout import ReturnFn
from .linear import CompKind, Component, NegGuard, Plan, UnionPlan, VarPlan, WindowGuard
from .patterns import (
    body_nots,
    build_node,
    flat_items,
    neg_body_lists,
    neg_body_vars,
    nested_block,
    own_preds,
)
from .predicate import Predicate, Timing, Unsupported
from .vector import row_udfs, vectorize

# --------------------------------------------------------------------------------------------
# Flattening the pattern
# --------------------------------------------------------------------------------------------

@dataclass(slots=True)
class _Flat:
    """A flattened pattern: its components, negations and window guards."""

    comps: list[Component]
    negs: list[list[Any]]
    """[var, type, gap, seq_lo, seq_hi, window ctx] per NOT (ctx filled by the caller)."""
    windows: list[WindowGuard]
    complex_not: bool = False
    """Accept a NOT of a sub-pattern (checked on the complete match by an occurrence search;
    used under skip-till-next-match, where the group plan is not available)."""


def _flatten(p: ast.Pattern, out: _Flat, ctx: list[Any]) -> None:
    """Flatten into components; ``ctx`` is the innermost window context
    ``[amount, count, first_comp, last_comp]`` (amount None: no window)."""
    if isinstance(p, ast.Seq):
        lo = len(out.comps)
        mine = []
        for item in flat_items(p):
            if isinstance(item, ast.Not):
                body = item.body
                # NOT(OR(B b, C c)) forbids any event that could bind b or c: one guard each
                if isinstance(body, ast.Or) and all(isinstance(x, ast.EventPattern)
                                                    for x in body.items):
                    events = [x for x in body.items if isinstance(x, ast.EventPattern)]
                elif isinstance(body, ast.EventPattern):
                    events = [body]
                elif out.complex_not:
                    entry: list[Any] = [None, None, len(out.comps), lo, None, ctx, body]
                    out.negs.append(entry)
                    mine.append(entry)
                    continue
                elif _has_not(body):
                    raise Unsupported("nested negation (a NOT inside a NOT's body)")
                else:
                    raise Unsupported("negation of a sub-pattern")
                for ev in events:
                    entry = [ev.var, ev.type, len(out.comps), lo, None, ctx, None]
                    out.negs.append(entry)
                    mine.append(entry)
            else:
                _flatten(item, out, ctx)
        for entry in mine:
            entry[4] = len(out.comps)
    elif isinstance(p, ast.EventPattern):
        out.comps.append(Component(CompKind.SINGLE, (p.var,), (p.type,)))
    elif isinstance(p, ast.Kleene):
        if not isinstance(p.body, ast.EventPattern):
            raise Unsupported("Kleene closure on a group")
        out.comps.append(Component(CompKind.KLEENE, (p.body.var,), (p.body.type,), p.min, p.max))
    elif isinstance(p, ast.Or):
        if not all(isinstance(x, ast.EventPattern) for x in p.items):
            raise Unsupported("OR of sub-patterns inside SEQ")
        items = [x for x in p.items if isinstance(x, ast.EventPattern)]
        out.comps.append(Component(CompKind.CHOICE, tuple(x.var for x in items),
                                   tuple(x.type for x in items)))
    elif isinstance(p, ast.Not):
        raise Unsupported("NOT outside a SEQ")
    elif isinstance(p, ast.Within):
        start = len(out.comps)
        w = p.window
        amount = int(w.amount) if w.is_count else w.microseconds
        inner: list[Any] = [amount, w.is_count, start, None]
        _flatten(p.body, out, inner)
        inner[3] = len(out.comps) - 1
        if len(out.comps) > start:
            out.windows.append(WindowGuard(start, len(out.comps) - 1, amount, w.is_count))
    else:
        raise Unsupported(f"{type(p).__name__.upper()} blocks")


def _has_not(p: ast.Pattern) -> bool:
    if isinstance(p, ast.Not):
        return True
    if isinstance(p, ast.EventPattern):
        return False
    if isinstance(p, ast.Kleene | ast.Within):
        return _has_not(p.body)
    return any(_has_not(i) for i in p.items)


def compile_plan(analyzed: AnalyzedQuery, *, attrs_from: AnalyzedQuery | None = None) -> Plan:
    """Compile a validated query into the linear automaton plan (or raise Unsupported).

    ``attrs_from`` fixes the record layout's attributes from another query (the union plan's
    branches share one record layout)."""
    if analyzed.strategy is ast.Strategy.MAXIMAL_GROUPING:
        raise Unsupported("maximal-grouping (FAEM's Kleene groups) needs the tree plan")
    flat = _Flat([], [], [], analyzed.strategy is ast.Strategy.SKIP_TILL_NEXT_MATCH)
    q = analyzed.query
    top: list[Any] = [None, False, 0, None]
    if q.within is not None:
        top = [int(q.within.amount) if q.within.is_count else q.within.microseconds,
               q.within.is_count, 0, None]
    _flatten(analyzed.pattern, flat, top)
    if not flat.comps:
        raise Unsupported("a pattern without positive events")
    top[3] = len(flat.comps) - 1
    if q.within is not None:
        w = q.within
        flat.windows.append(WindowGuard(0, len(flat.comps) - 1,
                                        int(w.amount) if w.is_count else w.microseconds,
                                        w.is_count))
    variables = analyzed.variables
    order = tuple(analyzed.positive_vars())
    # every negated variable, and which guard owns it (a complex NOT owns all its body's)
    neg_names: list[str] = []
    owner: dict[str, int] = {}
    neg_lists: list[str] = []
    for gi, ng in enumerate(flat.negs):
        if ng[6] is None:
            names = [ng[0]]
        else:
            names = [v for v, _t in neg_body_vars(ng[6], True)]
            neg_lists += neg_body_lists(ng[6])
        for v in names:
            neg_names.append(v)
            owner[v] = gi
    all_vars = list(order) + neg_names
    list_vars = frozenset([v for v in order if variables[v].kind is VarKind.LIST] + neg_lists)
    comp_of: dict[str, int] = {}
    for ci, c in enumerate(flat.comps):
        for v in c.vars:
            comp_of[v] = ci
    layout = Layout({v: i for i, v in enumerate(all_vars)}, list_vars,
                    query_attrs(attrs_from or analyzed))
    udfs = analyzed.udfs
    rank = {v: i for i, v in enumerate(order)}

    take: dict[str, list[Predicate]] = {v: [] for v in order}
    close: dict[str, list[Predicate]] = {v: [] for v in order}
    one_var: dict[str, list[ast.Expr]] = {v: [] for v in all_vars}
    neg_preds: list[list[Predicate]] = [[] for _ in flat.negs]
    match_preds: list[Predicate] = []
    for ci, e in enumerate(analyzed.conjuncts):
        info = refs(e, list_vars)
        if info.udfs - set(udfs):
            raise EngineError(f"unknown function(s) {sorted(info.udfs - set(udfs))}")
        negs_here = [v for v in info.vars if v in neg_names]
        general = None
        if len(info.iter_vars) > 1:
            free = tuple(sorted(info.unindexed - info.indexed))
            general = (tuple(layout.var_slots[v] for v in sorted(info.indexed)),
                       tuple(layout.var_slots[v] for v in free))
            compiled = compile_expr(e, layout, udfs, f"p{ci}", free=free)
            iter_var = None
        else:
            iter_var = next(iter(info.iter_vars), None)
            compiled = compile_expr(e, layout, udfs, f"p{ci}")
        if negs_here:
            owners = {owner[v] for v in negs_here}
            if len(owners) > 1 or (len(negs_here) > 1 and flat.negs[min(owners)][6] is None):
                raise Unsupported("a predicate over two negated variables")
            nv = negs_here[0]
            if (info.vars == {nv} and not row_udfs(info.udfs, udfs) and not info.closing
                    and not info.prev_vars and not info.abs_index):
                one_var[nv].append(e)
            neg_preds[owner[nv]].append(Predicate(
                e, nv, Timing.NEGATION, compiled, iter_var, bool(info.prev_vars), 0,
                frozenset(info.vars), tuple(layout.var_slots[v] for v in sorted(info.vars)
                                            if v in variables and variables[v].in_or_branch),
                general))
            continue
        if not info.vars:
            raise Unsupported("a predicate that mentions no variable")
        last = max(info.vars, key=lambda v: rank[v])
        opt = tuple(layout.var_slots[v] for v in sorted(info.vars)
                    if variables[v].in_or_branch)
        is_list = last in list_vars
        abs_need = info.abs_index.get(last, 0)
        pred_take = Predicate(e, last, Timing.TAKE, compiled, iter_var, bool(info.prev_vars),
                              abs_need, frozenset(info.vars), opt, general)
        if general is not None:
            (close if is_list else take)[last].append(Predicate(
                e, last, Timing.CLOSE if is_list else Timing.TAKE, compiled, None,
                bool(info.prev_vars), 0, frozenset(info.vars), opt, general))
            continue
        if not is_list:
            if iter_var is not None and iter_var == last:
                raise Unsupported("element reference on a single variable")
            take[last].append(pred_take if iter_var is not None else _with_inline(
                pred_take, False, layout, udfs, ci))
            if info.vars == {last} and not row_udfs(info.udfs, udfs):
                one_var[last].append(e)
            continue
        closing = last in info.closing or abs_need >= 2 or (iter_var not in (None, last))
        if closing:
            close[last].append(Predicate(e, last, Timing.CLOSE, compiled, iter_var,
                                         bool(info.prev_vars), 0, frozenset(info.vars), opt))
        else:
            take[last].append(_with_inline(pred_take, True, layout, udfs, ci))
            if (info.vars == {last} and not info.prev_vars and not info.abs_index
                    and not info.running and not row_udfs(info.udfs, udfs)):
                one_var[last].append(e)

    var_plans: dict[str, VarPlan] = {}
    for v in order:
        vi = variables[v]
        mask = vectorize(one_var[v], layout, v, udfs) if one_var[v] else None
        # predicates fully covered by the mask need not run again in the loop
        covered = set(id(x) for x in (mask.exprs if mask else ()))
        tk = tuple(p for p in take[v] if id(p.expr) not in covered)
        var_plans[v] = VarPlan(v, layout.var_slots[v], comp_of[v], vi.type, v in list_vars, mask,
                               tk, tuple(close[v]))
    negations: list[NegGuard] = []
    bits = {v: 1 << i for i, v in enumerate(all_vars)}
    for gi, (nv, nt, gap, seq_lo, seq_hi, wctx, body) in enumerate(flat.negs):
        if body is not None:
            specs = tuple((v, t, vectorize(one_var[v], layout, v, udfs) if one_var[v] else None)
                          for v, t in neg_body_vars(body, True))
            covered = set(id(x) for _v, _t, m in specs for x in (m.exprs if m else ()))
            preds = tuple(p for p in neg_preds[gi] if id(p.expr) not in covered)
            inner = None
            if body_nots(body):  # nested negation (skip-till-next-match: complex_not only)
                own = own_preds([body], [list(preds)])
                block = nested_block(body, own, lambda ps: tuple(ps),
                                     {v: m for v, _t, m in specs},
                                     lambda b: build_node(b, layout, bits))
                preds, inner = block.preds, block.inner
            negations.append(NegGuard(
                specs[0][0], specs[0][1], gap, preds, None,
                seq_lo, seq_hi, wctx[0], bool(wctx[1]), wctx[2], wctx[3],
                build_node(body, layout, bits), specs, inner))
            continue
        mask = vectorize(one_var[nv], layout, nv, udfs) if one_var[nv] else None
        covered = set(id(x) for x in (mask.exprs if mask else ()))
        negations.append(NegGuard(nv, nt, gap, tuple(p for p in neg_preds[gi]
                                                     if id(p.expr) not in covered), mask,
                                  seq_lo, seq_hi, wctx[0], bool(wctx[1]), wctx[2], wctx[3]))
    returns = compile_returns(q, layout, list_vars, udfs)
    return Plan(analyzed.name, tuple(flat.comps), var_plans, order, layout, tuple(negations),
                tuple(flat.windows), tuple(match_preds), analyzed.strategy, q.partition_by,
                analyzed.equivalence, tuple(returns))


def _with_inline(p: Predicate, is_list: bool, layout: Layout,
                 udfs: Mapping[str, Callable[..., Any]], ci: int) -> Predicate:
    """``p`` with the generated kernel's inline sources of its take test (see
    :attr:`Predicate.inline`): as the first event of its variable and, for a list variable, as
    a later element. Attribute references become ``e[slot]`` for the event being taken and
    ``B[slot]...`` for events the run already holds; references with no such form (an element
    by a computed index) make the variant None."""
    v = p.var
    vslot = layout.var_slots[v]

    def source(first: bool, plain_attrs: bool = False) -> str | None:
        def access(r: ast.AttrRef) -> str | None:
            a = layout.attr_slot(r.attr)
            idx = r.index
            if r.var == v:
                if not is_list:
                    return f"e[{a}]" if idx is None else None
                if idx is None or (idx.kind is ast.IndexKind.CURRENT and idx.offset == 0):
                    return f"e[{a}]"
                if idx.kind is ast.IndexKind.CURRENT and idx.offset == -1 and not first:
                    return f"B[{vslot}][-1][{a}]"
                if (idx.kind is ast.IndexKind.FIRST or (
                        idx.kind is ast.IndexKind.ABSOLUTE and idx.offset == 1)):
                    return f"e[{a}]" if first else f"B[{vslot}][0][{a}]"
                return None
            s_ = layout.var_slots[r.var]
            if r.var not in layout.list_vars:
                return f"B[{s_}][{a}]" if idx is None else None
            if idx is None:
                return None
            if idx.kind is ast.IndexKind.LAST and idx.offset == 0:
                return f"B[{s_}][-1][{a}]"
            if idx.kind is ast.IndexKind.FIRST or (
                    idx.kind is ast.IndexKind.ABSOLUTE and idx.offset == 1):
                return f"B[{s_}][0][{a}]"
            return None

        try:
            return inline_condition(p.expr, layout, udfs, env, access,
                                    f"_q{ci}{'a' if first else 'b'}_", plain_attrs)
        except NotInlinable:
            return None

    env: dict[str, Any] = dict(HELPERS)
    inline = (source(True), source(False) if is_list else None)
    plain = (source(True, True), source(False, True) if is_list else None)
    return dataclasses.replace(p, inline=inline, inline_env=tuple(env.items()),
                               inline_plain=None if plain == inline else plain)


def query_attrs(analyzed: AnalyzedQuery) -> tuple[str, ...]:
    """The attributes a query reads (its record layout), in first-mention order."""
    attrs: list[str] = []
    lv = frozenset(v for v, i in analyzed.variables.items() if i.kind is VarKind.LIST)
    for e in list(analyzed.conjuncts) + [r.expr for r in analyzed.query.returns]:
        for a in sorted(refs(e, lv).attrs):
            if a not in attrs and a not in ("__ts", "__id"):
                attrs.append(a)
    if analyzed.query.after_match is not None:  # AFTER MATCH groups candidates by partition
        attrs += [a for a in analyzed.query.partition_by if a not in attrs]
    return tuple(attrs)


def _pattern_vars(p: ast.Pattern) -> list[str]:
    """Every variable of ``p``, negated ones included."""
    if isinstance(p, ast.EventPattern):
        return [p.var]
    if isinstance(p, ast.Kleene | ast.Within | ast.Not):
        return _pattern_vars(p.body)
    return [v for i in p.items for v in _pattern_vars(i)]


def compile_union_plan(analyzed: AnalyzedQuery) -> UnionPlan:
    """Compile ``OR(branch, ...)`` at the top level into one linear plan per branch."""
    pat = analyzed.pattern
    window = None
    if isinstance(pat, ast.Within):
        window, pat = pat.window, pat.body
    if not isinstance(pat, ast.Or):
        raise Unsupported("a union plan needs OR at the top level")
    order = tuple(analyzed.positive_vars())
    branches = []
    for item in pat.items:
        names = set(_pattern_vars(item))
        body: ast.Pattern = item if window is None else ast.Within(item, window)
        sub_q = dataclasses.replace(analyzed.query, pattern=body, returns=(), picks=(),
                                    consume=None)
        conj = tuple(c for c in analyzed.conjuncts if refs(c, frozenset()).vars <= names)
        variables = {v: dataclasses.replace(i, in_or_branch=False)
                     for v, i in analyzed.variables.items() if v in names}
        sub = dataclasses.replace(analyzed, query=sub_q, variables=variables, conjuncts=conj)
        branches.append(compile_plan(sub, attrs_from=analyzed))
    list_vars = frozenset(v for v in order if analyzed.variables[v].kind is VarKind.LIST)
    negs = [v for v, i in analyzed.variables.items() if i.kind is VarKind.NEGATED]
    layout = Layout({v: i for i, v in enumerate(list(order) + negs)}, list_vars,
                    query_attrs(analyzed))
    returns = []
    for i, r in enumerate(analyzed.query.returns):
        info = refs(r.expr, list_vars)
        if len(info.iter_vars) > 1:
            raise EngineError(f"RETURN item {_return_name(r)!r} references several list "
                              "variables elementwise; use an index or an aggregate")
        it = next(iter(info.iter_vars), None)
        returns.append((_return_name(r), compile_expr(r.expr, layout, analyzed.udfs, f"r{i}"),
                        None if it is None else layout.var_slots[it], bool(info.prev_vars)))
    return UnionPlan(analyzed.name, tuple(branches), order, layout, analyzed.strategy,
                     analyzed.query.partition_by, analyzed.equivalence, tuple(returns))


def _return_name(r: ast.ReturnItem) -> str:
    return r.alias if r.alias else expr_text(r.expr)


def compile_returns(q: ast.Query, layout: Layout, list_vars: Any,
                    udfs: Any) -> list[ReturnFn]:
    """RETURN items as (name, compiled expression, slot of the list variable it ranges over
    elementwise or None, whether it uses ``v[i-1]``). Shared by the linear and group plans."""
    returns = []
    for i, r in enumerate(q.returns):
        info = refs(r.expr, list_vars)
        if len(info.iter_vars) > 1:
            raise EngineError(f"RETURN item {_return_name(r)!r} references several list "
                              "variables elementwise; use an index or an aggregate")
        it = next(iter(info.iter_vars), None)
        returns.append((_return_name(r), compile_expr(r.expr, layout, udfs, f"r{i}"),
                        None if it is None else layout.var_slots[it], bool(info.prev_vars)))
    return returns


# The plan data lives in kleene.plan.linear and kleene.plan.predicate (no AST); re-exported here
# for the callers of the compiler.
__all__ = ["CompKind", "Component", "NegGuard", "Plan", "Predicate", "RefInfo", "Timing",
           "UnionPlan", "Unsupported", "VarPlan", "WindowGuard", "compile_plan",
           "compile_returns", "compile_union_plan", "query_attrs"]
