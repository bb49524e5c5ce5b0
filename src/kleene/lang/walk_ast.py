"""Small structural helpers over the AST used by the dialects and the builder."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

from .. import ast

_N = TypeVar("_N")


def replace_events(p: ast.Pattern,
                   fn: Callable[[ast.EventPattern], ast.EventPattern]) -> ast.Pattern:
    """Rebuild ``p`` with every EventPattern replaced by ``fn(event)`` (spans kept)."""
    if isinstance(p, ast.EventPattern):
        return fn(p)
    if isinstance(p, ast.Kleene):
        return ast.Kleene(replace_events(p.body, fn), p.min, p.max, span=p.span)
    if isinstance(p, ast.Not):
        return ast.Not(replace_events(p.body, fn), span=p.span)
    if isinstance(p, ast.Within):
        return ast.Within(replace_events(p.body, fn), p.window, span=p.span)
    if isinstance(p, ast.AnyOf):
        return ast.AnyOf(p.k, tuple(replace_events(i, fn) for i in p.items), span=p.span)
    if isinstance(p, ast.Seq):
        return ast.Seq(tuple(replace_events(i, fn) for i in p.items), span=p.span)
    if isinstance(p, ast.And):
        return ast.And(tuple(replace_events(i, fn) for i in p.items), span=p.span)
    if isinstance(p, ast.Or):
        return ast.Or(tuple(replace_events(i, fn) for i in p.items), span=p.span)
    raise TypeError(f"not a pattern node: {type(p).__name__}")


def events(p: ast.Pattern) -> list[ast.EventPattern]:
    """Every EventPattern of ``p`` in pattern order."""
    if isinstance(p, ast.EventPattern):
        return [p]
    if isinstance(p, (ast.Kleene, ast.Not, ast.Within)):
        return events(p.body)
    return [e for i in p.items for e in events(i)]


def split_and(e: ast.Expr | None) -> list[ast.Expr]:
    """Top-level conjuncts of ``e`` (left to right)."""
    if e is None:
        return []
    if isinstance(e, ast.Binary) and e.op == "and":
        return split_and(e.left) + split_and(e.right)
    return [e]




def number_repeated_vars(p: ast.Pattern) -> ast.Pattern:
    """Rename the 2nd, 3rd, ... binding of a variable to ``v_2``, ``v_3`` (dialects whose type
    names double as variables, e.g. SNOOP's ``OR(SEQ(A; D), SEQ(A; B; C))``)."""
    seen: dict[str, int] = {}
    taken = {e.var for e in events(p)}

    def rename(e: ast.EventPattern) -> ast.EventPattern:
        n = seen.get(e.var, 0) + 1
        seen[e.var] = n
        if n == 1:
            return e
        k = n
        while f"{e.var}_{k}" in taken:
            k += 1
        new = f"{e.var}_{k}"
        taken.add(new)
        return ast.EventPattern(e.type, new, span=e.span)

    return replace_events(p, rename)


def renumbered(q: ast.Query) -> ast.Query:
    """``q`` with repeated variables renumbered (see :func:`number_repeated_vars`)."""
    p = number_repeated_vars(q.pattern)
    if p == q.pattern:
        return q
    return ast.Query(pattern=p, name=q.name, where=q.where, partition_by=q.partition_by,
                     within=q.within, strategy=q.strategy, picks=q.picks, consume=q.consume,
                     emit=q.emit, returns=q.returns, return_type=q.return_type, span=q.span,
                     source=q.source)



def strip_spans(node: _N) -> _N:
    """A copy of ``node`` with every span set to None (spans of a builder fragment would
    point into the fragment, not into a query text)."""
    if isinstance(node, tuple):
        return tuple(strip_spans(x) for x in node)  # type: ignore[return-value]
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return node
    changes: dict[str, object] = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if f.name == "span":
            if value is not None:
                changes["span"] = None
        elif dataclasses.is_dataclass(value) or isinstance(value, tuple):
            new = strip_spans(value)
            if new is not value:
                changes[f.name] = new
    return dataclasses.replace(node, **changes) if changes else node


__all__ = ["events", "number_repeated_vars", "renumbered", "replace_events", "split_and",
           "strip_spans"]
