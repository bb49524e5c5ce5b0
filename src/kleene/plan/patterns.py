"""Walks over validated patterns shared by the plan compilers (:mod:`kleene.plan.automaton`
and :mod:`kleene.plan.groups`): SEQ flattening, the logical-block node tree, the variables of a
NOT's body, and the negation tree of the group plan. Compile time only: plans keep the results
as plain data, and matchers never see a pattern.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .. import ast
from .blocks import NegBlock, NestedNeg, NotSite
from .layout import Layout
from .nodes import And, AnyK, Ev, Node, Rep, Seq, Win
from .predicate import Predicate, Unsupported

if TYPE_CHECKING:
    from .vector import VectorPred


def flat_items(p: ast.Seq) -> list[ast.Pattern]:
    """Items of a SEQ with directly nested SEQs spliced in (docs/semantics.md 4)."""
    out: list[ast.Pattern] = []
    for item in p.items:
        if isinstance(item, ast.Seq):
            out.extend(flat_items(item))
        else:
            out.append(item)
    return out


def build_node(p: ast.Pattern, layout: Layout, bits: Mapping[str, int]) -> Node | None:
    """The node tree of a pattern (NOT items are dropped: they are guards, not states)."""
    if isinstance(p, ast.EventPattern):
        return Ev(p.var, p.type, layout.var_slots[p.var], bits[p.var],
                  p.var in layout.list_vars)
    if isinstance(p, ast.Not):
        return None
    if isinstance(p, ast.Kleene):
        body = build_node(p.body, layout, bits)
        assert body is not None
        return Rep(body, p.min, p.max)
    if isinstance(p, ast.Within):
        body = build_node(p.body, layout, bits)
        assert body is not None
        return Win(body, *window(p.window))
    kids = tuple(k for k in (build_node(i, layout, bits) for i in p.items) if k is not None)
    if isinstance(p, ast.Seq):
        return Seq(kids)
    if isinstance(p, ast.And):
        return And(kids)
    if isinstance(p, ast.Or):
        return AnyK(1, kids)
    if isinstance(p, ast.AnyOf):
        return AnyK(p.k, kids)
    raise Unsupported(type(p).__name__)


def simple_neg(p: ast.Pattern) -> bool:
    """Is a NOT's body one event or an OR of events (checked event by event)?"""
    return isinstance(p, ast.EventPattern) or (
        isinstance(p, ast.Or) and all(isinstance(i, ast.EventPattern) for i in p.items))


def window(w: ast.Window) -> tuple[int, bool]:
    """A window as plan data: (length in microseconds, or in events for a count window; is a
    count window). Count windows are whole numbers (validated)."""
    return (int(w.amount) if w.is_count else w.microseconds), w.is_count


def neg_body_vars(p: ast.Pattern, nested: bool = False) -> list[tuple[str, str | None]]:
    """(variable, type) of every event pattern inside a NOT's body (with ``nested``, those of
    the NOTs inside it too; without, such a NOT is unsupported)."""
    if isinstance(p, ast.EventPattern):
        return [(p.var, p.type)]
    if isinstance(p, ast.Kleene | ast.Within):
        return neg_body_vars(p.body, nested)
    if isinstance(p, ast.Not):
        if not nested:
            raise Unsupported("nested negation (a NOT inside a NOT's body)")
        return neg_body_vars(p.body, nested)
    return [x for i in p.items for x in neg_body_vars(i, nested)]


def neg_body_lists(p: ast.Pattern, in_rep: bool = False) -> list[str]:
    """Variables inside repetitions of a NOT's body (list variables)."""
    if isinstance(p, ast.EventPattern):
        return [p.var] if in_rep else []
    if isinstance(p, ast.Kleene):
        return neg_body_lists(p.body, True)
    if isinstance(p, ast.Within | ast.Not):
        return neg_body_lists(p.body, in_rep)
    return [v for i in p.items for v in neg_body_lists(i, in_rep)]


def positive_vars(p: ast.Pattern) -> list[str]:
    """The variables of ``p`` outside NOTs, in pattern order."""
    if isinstance(p, ast.EventPattern):
        return [p.var]
    if isinstance(p, ast.Kleene | ast.Within):
        return positive_vars(p.body)
    if isinstance(p, ast.Not):
        return []
    return [v for i in p.items for v in positive_vars(i)]


def nullable(p: ast.Pattern) -> bool:
    """Could ``p`` match binding no event (conservative: True when unsure)?"""
    if isinstance(p, ast.EventPattern):
        return False
    if isinstance(p, ast.Kleene):
        return p.min == 0 or nullable(p.body)
    if isinstance(p, ast.Within):
        return nullable(p.body)
    if isinstance(p, ast.Not):
        return True
    if isinstance(p, ast.Seq | ast.And):
        return all(nullable(i) for i in p.items)
    if isinstance(p, ast.AnyOf) and p.k < 1:
        return True
    return any(nullable(i) for i in p.items)


def not_sites(pattern: ast.Pattern, query_window: ast.Window | None,
              index_of: Mapping[int, int]) -> tuple[NotSite, ...]:
    """The negation tree of a pattern, flattened in the order a complete match's checks visit
    it: a SEQ's or AND's own NOTs (in item order), then its items' NOTs, depth first; OR / ANY
    branches in order. ``index_of`` maps ``id()`` of each NOT node (of ``pattern``, alive
    during compilation) to its block index. NOTs inside Kleene closures or NOT bodies are not
    sites (validation rejects the former; the latter belong to their NOT)."""
    out: list[NotSite] = []
    top = window(query_window) if query_window is not None else None

    def walk(p: ast.Pattern, win: tuple[int, bool] | None, scope: tuple[str, ...],
             branches: tuple[tuple[str, ...], ...]) -> None:
        if isinstance(p, ast.EventPattern | ast.Kleene | ast.Not):
            return
        if isinstance(p, ast.Within):
            walk(p.body, window(p.window), tuple(positive_vars(p.body)), branches)
            return
        if isinstance(p, ast.Or | ast.AnyOf):
            for branch in p.items:
                walk(branch, win, scope, branches + (tuple(positive_vars(branch)),))
            return
        items = flat_items(p) if isinstance(p, ast.Seq) else list(p.items)
        in_and = isinstance(p, ast.And)
        block = tuple(positive_vars(p))
        for i, item in enumerate(items):
            if not isinstance(item, ast.Not):
                continue
            if in_and:
                out.append(NotSite(index_of[id(item)], True, (), block, True, win, scope,
                                   branches))
                continue
            left = tuple(v for it in items[:i] for v in positive_vars(it))
            right = tuple(v for it in items[i + 1:] for v in positive_vars(it))
            bounded = (any(not nullable(x) for x in items[:i])
                       and any(not nullable(x) for x in items[i + 1:]))
            out.append(NotSite(index_of[id(item)], False, left, right, bounded, win, scope,
                               branches))
        for item in items:
            if not isinstance(item, ast.Not):
                walk(item, win, scope, branches)

    walk(pattern, top, tuple(positive_vars(pattern)), ())
    return tuple(out)


def body_nots(p: ast.Pattern) -> list[ast.Not]:
    """The NOTs of a NOT's body, not those inside their own bodies (validation keeps NOTs out
    of repetitions)."""
    if isinstance(p, ast.Not):
        return [p]
    if isinstance(p, ast.EventPattern):
        return []
    if isinstance(p, ast.Kleene | ast.Within):
        return body_nots(p.body)
    return [n for i in p.items for n in body_nots(i)]


def own_preds(bodies: list[ast.Pattern], neg_preds: list[list[Predicate]]
              ) -> dict[int, list[Predicate]]:
    """The conjuncts of each NOT at any depth, keyed by ``id`` of its body: a conjunct belongs
    to the innermost NOT whose variables it mentions (docs/semantics.md 4, "Nested negation";
    validation keeps the NOTs it mentions on one chain). ``bodies``: the outermost NOTs'."""
    depth: dict[str, tuple[int, int]] = {}

    def walk(body: ast.Pattern, d: int) -> None:
        for v in positive_vars(body):
            depth[v] = (d, id(body))
        for m in body_nots(body):
            walk(m.body, d + 1)

    for b in bodies:
        walk(b, 0)
    own: dict[int, list[Predicate]] = {}
    for preds in neg_preds:
        for p in preds:
            _d, k = max(depth[v] for v in p.vars if v in depth)
            own.setdefault(k, []).append(p)
    return own


def nested_block(body: ast.Pattern, own: dict[int, list[Predicate]],
                 uncovered: Callable[[list[Predicate]], tuple[Predicate, ...]],
                 masks: Mapping[str, VectorPred | None],
                 build: Callable[[ast.Pattern], Node | None]) -> NegBlock:
    """The block of the NOT of ``body``, with the NOTs inside it (recursively)."""
    b = neg_body_vars(body, True)
    inner = body_nots(body)
    nested = None
    if inner:
        nested = NestedNeg(tuple(positive_vars(body)),
                           tuple(nested_block(m.body, own, uncovered, masks, build)
                                 for m in inner),
                           not_sites(body, None, {id(m): i for i, m in enumerate(inner)}))
    return NegBlock(tuple(v for v, _t in b), tuple(t for _v, t in b),
                    uncovered(own.get(id(body), [])), tuple(masks[v] for v, _t in b),
                    None if simple_neg(body) else build(body), nested)


__all__ = ["body_nots", "build_node", "flat_items", "neg_body_lists", "neg_body_vars",
           "nested_block", "not_sites", "nullable", "own_preds", "positive_vars", "simple_neg",
           "window"]
