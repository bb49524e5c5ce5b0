"""Name rules: variables are identifiers, bound once, and every reference names one of them."""

from __future__ import annotations

from ... import ast
from ...lang.lexer import is_identifier
from ...lang.parser import RESERVED
from ..analyzed import VarKind
from ..walk import mentioned_vars, sub_exprs, where
from .context import Context


def check_names(ctx: Context) -> None:
    """Variable names (and output names) must be plain, unreserved identifiers."""
    for b in ctx.bindings:
        var = b.event.var
        if not is_identifier(var):
            raise ctx.reporter.error(
                f"variable name {var!r} is not an identifier; use letters, digits and '_' "
                "(starting with a letter or '_')", b.event.span)
        if var.upper() in RESERVED:
            raise ctx.reporter.error(
                f"variable name '{var}' is a reserved word; rename it (e.g. '{var.lower()}1')",
                b.event.span)
    for attr in ctx.query.partition_by:
        if not is_identifier(attr):
            raise ctx.reporter.error(
                f"PARTITION BY attribute {attr!r} must be a plain identifier "
                "(letters, digits, '_')", ctx.query.span)


def check_bound_once(ctx: Context) -> None:
    """A variable is bound by exactly one event pattern."""
    first: dict[str, ast.EventPattern] = {}
    for b in ctx.bindings:
        var = b.event.var
        if var in first:
            a, c = first[var].span, b.event.span
            located = a is not None and c is not None and bool(ctx.query.source)
            locs = f" (at {where(a)} and {where(c)})" if located else ""
            raise ctx.reporter.error(f"variable '{var}' is bound twice{locs}; rename one", c)
        first[var] = b.event


def check_references(ctx: Context) -> None:
    """Every variable mentioned in WHERE and RETURN is bound by the pattern."""
    for e in ctx.all_exprs():
        if isinstance(e, (ast.AttrRef, ast.VarRef)) and e.var not in ctx.variables:
            hint = _suggest(e.var, list(ctx.variables))
            raise ctx.reporter.error(
                f"unknown variable '{e.var}'{hint}; the pattern binds: {ctx.var_list()}",
                e.span)


def check_clause_variables(ctx: Context) -> None:
    """PICK, CONSUME and RETURN name positive (bound, non-negated) variables only."""
    q = ctx.query
    for p in q.picks:
        _positive(ctx, p.var, "PICK", p.span)
        if p.from_var is not None:
            _positive(ctx, p.from_var, "PICK ... FROM", p.span)
        if p.within is not None and p.from_var is None:
            raise ctx.reporter.error("PICK ... WITHIN needs FROM <variable>", p.span)
    if q.consume is not None:
        for v in q.consume.vars:
            _positive(ctx, v, "CONSUME", q.consume.span)
    for r in q.returns:
        for e in sub_exprs(r.expr):
            if isinstance(e, ast.Equivalence):
                raise ctx.reporter.error("an equivalence test [attr] belongs in WHERE, "
                                         "not RETURN", e.span)
        for v in mentioned_vars(r.expr):
            _positive(ctx, v, "RETURN", r.span)


def _positive(ctx: Context, var: str, clause: str, span: object) -> None:
    from ...diagnostics import Span

    sp = span if isinstance(span, Span) else None
    info = ctx.variables.get(var)
    if info is None:
        hint = _suggest(var, list(ctx.variables))
        raise ctx.reporter.error(
            f"{clause} names unknown variable '{var}'{hint}; the pattern binds: "
            f"{ctx.var_list()}", sp)
    if info.kind is VarKind.NEGATED:
        positives = ", ".join(v.name for v in ctx.variables.values()
                              if v.kind is not VarKind.NEGATED) or "(none)"
        raise ctx.reporter.error(
            f"{clause} names '{var}', which is inside NOT and is never bound; "
            f"use a positive variable ({positives})", sp)


def _suggest(name: str, candidates: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, candidates, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


__all__ = ["check_bound_once", "check_clause_variables", "check_names", "check_references"]
