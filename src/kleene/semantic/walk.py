"""Tree walks shared by the semantic rules: pattern variables with their context, expression
sub-terms and the variables an expression mentions."""

from __future__ import annotations

from collections.abc import Iterator

from .. import ast
from ..diagnostics import Span
from ..errors import QueryValidationError
from ..frozen import dataclass
from ..lang.walk_ast import split_and


@dataclass(frozen=True, slots=True)
class Binding:
    """Where a variable is bound in the pattern, and under what operators."""

    event: ast.EventPattern
    order: int
    repeated: bool
    """Under a Kleene (on the type or on an enclosing group)."""
    negated: bool
    """Under a NOT."""
    or_path: tuple[tuple[int, int, bool], ...]
    """(id of the OR/ANY node, branch index, exclusive) for every enclosing OR/ANY;
    ``exclusive`` is true when at most one branch binds (OR, ANY(1, ...))."""
    optional_branch: bool = False
    """Under an OR, or an ANY(k, ...) with fewer than all branches: may be unbound."""


def bindings(pattern: ast.Pattern) -> list[Binding]:
    """Every EventPattern in pattern order, with its context."""
    out: list[Binding] = []

    def go(p: ast.Pattern, repeated: bool, negated: bool,
           or_path: tuple[tuple[int, int, bool], ...], optional_branch: bool) -> None:
        if isinstance(p, ast.EventPattern):
            out.append(Binding(p, len(out), repeated, negated, or_path, optional_branch))
        elif isinstance(p, ast.Kleene):
            go(p.body, True, negated, or_path, optional_branch)
        elif isinstance(p, (ast.Not,)):
            go(p.body, repeated, True, or_path, optional_branch)
        elif isinstance(p, ast.Within):
            go(p.body, repeated, negated, or_path, optional_branch)
        elif isinstance(p, (ast.Or, ast.AnyOf)):
            exclusive = isinstance(p, ast.Or) or p.k == 1
            optional = isinstance(p, ast.Or) or p.k < len(p.items)
            for i, item in enumerate(p.items):
                go(item, repeated, negated, (*or_path, (id(p), i, exclusive)),
                   optional_branch or optional)
        elif isinstance(p, (ast.Seq, ast.And)):
            for item in p.items:
                go(item, repeated, negated, or_path, optional_branch)
        else:  # pragma: no cover - the AST is closed
            raise TypeError(f"not a pattern node: {type(p).__name__}")

    go(pattern, False, False, (), False)
    return out


def sub_patterns(p: ast.Pattern) -> Iterator[ast.Pattern]:
    """``p`` and every pattern node below it, pre-order."""
    yield p
    if isinstance(p, (ast.Kleene, ast.Not, ast.Within)):
        yield from sub_patterns(p.body)
    elif isinstance(p, (ast.Seq, ast.And, ast.Or, ast.AnyOf)):
        for item in p.items:
            yield from sub_patterns(item)


def children(e: ast.Expr) -> tuple[ast.Expr, ...]:
    """Direct sub-expressions of ``e``."""
    if isinstance(e, ast.Unary):
        return (e.operand,)
    if isinstance(e, ast.Binary):
        return (e.left, e.right)
    if isinstance(e, ast.Between):
        return (e.operand, e.low, e.high)
    if isinstance(e, ast.InList):
        return (e.operand, *e.items)
    if isinstance(e, ast.Like):
        return (e.operand, e.pattern)
    if isinstance(e, ast.IsNull):
        return (e.operand,)
    if isinstance(e, ast.Call):
        return e.args
    return ()


def sub_exprs(e: ast.Expr) -> Iterator[ast.Expr]:
    """``e`` and every expression below it, pre-order."""
    yield e
    for c in children(e):
        yield from sub_exprs(c)


def mentioned_vars(e: ast.Expr) -> list[str]:
    """Variables referenced in ``e`` (by AttrRef or VarRef), in first-mention order."""
    seen: dict[str, None] = {}
    for s in sub_exprs(e):
        if isinstance(s, (ast.AttrRef, ast.VarRef)):
            seen.setdefault(s.var, None)
    return list(seen)


def where(span: Span | None) -> str:
    """``line L, column C`` for a span, or ``''`` when unknown (builder nodes)."""
    return f"line {span.line}, column {span.col}" if span is not None else ""


class Reporter:
    """Raises :class:`QueryValidationError` rendered against the query's source."""

    def __init__(self, query: ast.Query) -> None:
        self.query = query

    def error(self, message: str, span: Span | None = None) -> QueryValidationError:
        """Build the error (the caller raises it, so control flow stays visible)."""
        src = self.query.source
        return QueryValidationError(message, source=src, span=span if src else None)


__all__ = ["Binding", "Reporter", "bindings", "children", "mentioned_vars", "split_and",
           "sub_exprs", "sub_patterns", "where"]
