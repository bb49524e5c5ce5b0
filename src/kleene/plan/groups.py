"""The group plan compiler: a validated pattern beyond a linear SEQ (AND, ANY, OR of
sub-patterns, Kleene closure on groups, windows on any sub-pattern) -> the logical-block plan of
:mod:`kleene.plan.blocks` (LogCEP's pushdown automaton; node semantics in
:mod:`kleene.plan.nodes`), with its negation tree compiled into plain data.
"""

from __future__ import annotations

from .. import ast
from ..semantic.analyzed import AnalyzedQuery
from ..vocab import Strategy
from .automaton import compile_returns
from .blocks import GroupPlan, NegBlock, NotSite
from .expr import Layout, compile_expr, refs
from .nodes import And, AnyK, Ev, Node, Rep, Seq, Win
from .patterns import (
    body_nots,
    build_node,
    neg_body_lists,
    neg_body_vars,
    nested_block,
    not_sites,
    own_preds,
    simple_neg,
)
from .predicate import Predicate, Timing, Unsupported
from .vector import row_udfs, vectorize


def _collect(p: ast.Pattern, in_rep: bool, in_or: bool, out: dict[str, tuple[bool, bool]],
             negs: list[ast.Not]) -> None:
    if isinstance(p, ast.EventPattern):
        out[p.var] = (in_rep, in_or)
    elif isinstance(p, ast.Kleene):
        _collect(p.body, True, in_or, out, negs)
    elif isinstance(p, ast.Within):
        _collect(p.body, in_rep, in_or, out, negs)
    elif isinstance(p, ast.Not):
        if in_rep:
            raise Unsupported("NOT inside a repetition")
        negs.append(p)
    else:
        orish = isinstance(p, ast.Or | ast.AnyOf)
        for item in p.items:
            _collect(item, in_rep, in_or or orish, out, negs)


def compile_group_plan(analyzed: AnalyzedQuery, *, nested: bool = False) -> GroupPlan:
    """Compile any validated pattern into the logical-block plan. ``nested``: accept NOTs inside
    a NOT's body (:class:`~kleene.plan.blocks.NestedNeg`, evaluated by
    :class:`kleene.runtime.nested.NestedGroupMatcher` only); otherwise they are
    :class:`Unsupported`."""
    if analyzed.strategy is Strategy.SKIP_TILL_NEXT_MATCH:
        raise Unsupported("skip-till-next-match on AND / ANY / repeated groups")
    if analyzed.strategy is Strategy.MAXIMAL_GROUPING:
        raise Unsupported("maximal-grouping (FAEM's Kleene groups) needs the tree plan")
    info: dict[str, tuple[bool, bool]] = {}
    nots: list[ast.Not] = []
    _collect(analyzed.pattern, False, False, info, nots)
    order = tuple(analyzed.positive_vars())
    neg_blocks_vars = [neg_body_vars(n.body, nested) for n in nots]
    neg_vars = tuple(v for b in neg_blocks_vars for v, _t in b)
    all_vars = list(order) + list(neg_vars)
    neg_lists = {v for n in nots for v in neg_body_lists(n.body)}
    list_vars = frozenset([v for v in order if info[v][0]] + sorted(neg_lists))
    optional_lists = frozenset(v for v in list_vars if _optional(analyzed.pattern, v))
    attrs: list[str] = []
    for e in list(analyzed.conjuncts) + [r.expr for r in analyzed.query.returns]:
        for a in sorted(refs(e, list_vars).attrs):
            if a not in attrs and a not in ("__ts", "__id"):
                attrs.append(a)
    if analyzed.query.after_match is not None:  # AFTER MATCH groups candidates by partition
        attrs += [a for a in analyzed.query.partition_by if a not in attrs]
    layout = Layout({v: i for i, v in enumerate(all_vars)}, list_vars, tuple(attrs))
    udfs = analyzed.udfs
    variables = analyzed.variables
    bits = {v: 1 << i for i, v in enumerate(list(order) + list(neg_vars))}

    def build(p: ast.Pattern) -> Node | None:
        return build_node(p, layout, bits)

    root = build(analyzed.pattern)
    if root is None:
        raise Unsupported("a pattern without positive events")
    q = analyzed.query
    # The query-level window is not a node: runs carry their first timestamp / position and
    # expire as a prefix of the run list, which keeps root states small and repeating.

    owner = {v: bi for bi, b in enumerate(neg_blocks_vars) for v, _t in b}
    one_var: dict[str, list[ast.Expr]] = {v: [] for v in all_vars}
    positive: list[Predicate] = []
    neg_preds: list[list[Predicate]] = [[] for _ in nots]
    for ci, e in enumerate(analyzed.conjuncts):
        r = refs(e, list_vars)
        opt = tuple(layout.var_slots[v] for v in sorted(r.vars)
                    if v in order and _optional(analyzed.pattern, v))
        if len(r.iter_vars) > 1:
            free = tuple(sorted(r.unindexed - r.indexed))
            general = (tuple(layout.var_slots[v] for v in sorted(r.indexed)),
                       tuple(layout.var_slots[v] for v in free))
            pred = Predicate(e, "", Timing.MATCH,
                             compile_expr(e, layout, udfs, f"g{ci}", free=free), None,
                             bool(r.prev_vars), 0, frozenset(r.vars), opt, general)
        else:
            it = next(iter(r.iter_vars), None)
            pred = Predicate(e, "", Timing.MATCH, compile_expr(e, layout, udfs, f"g{ci}"), it,
                             bool(r.prev_vars), 0, frozenset(r.vars), opt)
        owners = {owner[v] for v in r.vars if v in owner}
        if owners:
            if len(owners) > 1:
                raise Unsupported("a predicate over two negated variables")
            neg_preds[owners.pop()].append(pred)
            if (len(r.vars) == 1 and not r.prev_vars and not r.abs_index and not r.closing
                    and not r.running and not row_udfs(r.udfs, udfs)):
                one_var[next(iter(r.vars))].append(e)
            continue
        if (len(r.vars) == 1 and not r.prev_vars and not r.abs_index and not r.closing
                and not r.running and not row_udfs(r.udfs, udfs)):
            one_var[next(iter(r.vars))].append(e)
            continue  # fully covered by the candidate mask
        positive.append(pred)
    masks = {v: (vectorize(one_var[v], layout, v, udfs) if one_var[v] else None)
             for v in all_vars}

    def uncovered(preds: list[Predicate]) -> tuple[Predicate, ...]:
        return tuple(p for p in preds
                     if not (len(p.vars) == 1 and p.expr in one_var[next(iter(p.vars))]))

    inner_nots = nested and any(body_nots(n.body) for n in nots)
    own = own_preds([n.body for n in nots], neg_preds) if inner_nots else {}
    negations = []
    for bi, b in enumerate(neg_blocks_vars):
        body = nots[bi].body
        if inner_nots:
            negations.append(nested_block(nots[bi].body, own, uncovered, masks, build))
            continue
        negations.append(NegBlock(tuple(v for v, _t in b), tuple(t for _v, t in b),
                                  uncovered(neg_preds[bi]),
                                  tuple(masks[v] for v, _t in b),
                                  None if simple_neg(body) else build(body)))
    returns = compile_returns(q, layout, list_vars, udfs)
    wins = _windows(root)
    if q.within is not None:
        w = q.within
        wins.append((int(w.amount) if w.is_count else w.microseconds, w.is_count))
    tw = [a for a, c in wins if not c]
    cw = [a for a, c in wins if c]
    qw = q.within
    return GroupPlan(analyzed.name, root, order, layout,
                     {v: variables[v].type for v in all_vars if v in variables}, masks,
                     tuple(positive), tuple(negations), neg_vars, analyzed.strategy,
                     q.partition_by, analyzed.equivalence, tuple(returns),
                     optional_lists, max(tw) if tw else None, max(cw) if cw else None,
                     None if qw is None or qw.is_count else qw.microseconds,
                     None if qw is None or not qw.is_count else int(qw.amount),
                     not_sites(analyzed.pattern, qw, {id(n): i for i, n in enumerate(nots)}),
                     _always_bound(root))


def _optional(p: ast.Pattern, var: str) -> bool:
    """Is ``var`` possibly unbound: under an OR/ANY that is not itself inside a repetition
    (docs/semantics.md 2: a list variable inside a repetition is always bound)."""
    def walk(x: ast.Pattern, in_rep: bool, opt: bool) -> bool | None:
        if isinstance(x, ast.EventPattern):
            return opt if x.var == var else None
        if isinstance(x, ast.Kleene):
            return walk(x.body, True, opt)
        if isinstance(x, ast.Within | ast.Not):
            return walk(x.body, in_rep, opt)
        here = opt or (isinstance(x, ast.Or | ast.AnyOf) and not in_rep)
        for i in x.items:
            r = walk(i, in_rep, here)
            if r is not None:
                return r
        return None
    return bool(walk(p, False, False))


def _always_bound(n: Node) -> bool:
    if isinstance(n, Ev):
        return not n.is_list
    if isinstance(n, Seq | And):
        return all(_always_bound(i) for i in n.items)
    return False


def _windows(n: Node) -> list[tuple[int, bool]]:
    if isinstance(n, Win):
        return [(n.amount, n.count)] + _windows(n.body)
    if isinstance(n, Rep):
        return _windows(n.body)
    if isinstance(n, Ev):
        return []
    return [w for i in n.items for w in _windows(i)]


# The plan data lives in kleene.plan.blocks and kleene.plan.nodes (no AST); re-exported here
# for the callers of the compiler.
__all__ = ["And", "AnyK", "Ev", "GroupPlan", "NegBlock", "Node", "NotSite", "Rep", "Seq", "Win",
           "build_node", "compile_group_plan", "neg_body_lists", "neg_body_vars"]
