"""Kleene rules: sensible bounds; indexes and aggregates only on Kleene (list) variables."""

from __future__ import annotations

from ... import ast
from ...lang.functions import AGGREGATES
from ...lang.printer import expr_text
from ..analyzed import VarKind
from ..walk import mentioned_vars, sub_exprs, sub_patterns
from .context import Context


def check_quantifiers(ctx: Context) -> None:
    """``{n,m}`` needs 0 <= n <= m and m >= 1."""
    for p in sub_patterns(ctx.query.pattern):
        if not isinstance(p, ast.Kleene):
            continue
        if p.min < 0:
            raise ctx.reporter.error(f"a repetition count cannot be negative ({p.min})", p.span)
        if p.max is not None and p.max < max(p.min, 1):
            shown = f"{{{p.min},{p.max}}}" if p.max != p.min else f"{{{p.max}}}"
            raise ctx.reporter.error(
                f"repetition {shown} allows no repetition; the maximum must be at least 1 "
                "and at least the minimum (e.g. {1,3})", p.span)


def _kleene_hint(ctx: Context, var: str) -> str:
    info = ctx.variables.get(var)
    t = info.type if info is not None and info.type is not None else "T"
    return f"declare it as a Kleene variable, e.g. '{t}+ {var}[]'"


def check_indexes(ctx: Context) -> None:
    """``v[i].x``, ``v[2].x``, ``first(v).x``, ``v[last].x`` need a Kleene variable."""
    return_exprs = {id(s) for r in ctx.query.returns for s in sub_exprs(r.expr)}
    for e in ctx.all_exprs():
        if not isinstance(e, ast.AttrRef) or e.index is None:
            continue
        info = ctx.variables.get(e.var)
        if info is None:
            continue
        text = expr_text(e)
        if info.kind is VarKind.SINGLE:
            raise ctx.reporter.error(
                f"'{text}' indexes variable '{e.var}', which binds one event; write "
                f"'{e.var}.{e.attr}', or {_kleene_hint(ctx, e.var)}", e.span)
        if info.kind is VarKind.NEGATED:
            raise ctx.reporter.error(
                f"'{text}' indexes '{e.var}', which is inside NOT and never bound; refer to "
                f"'{e.var}.{e.attr}' instead", e.span)
        idx = e.index
        if idx.kind in (ast.IndexKind.CURRENT, ast.IndexKind.LAST) and idx.offset > 0:
            raise ctx.reporter.error(
                f"'{text}': an offset from i or last must be zero or negative (i-1, last-1)",
                e.span)
        if idx.kind is ast.IndexKind.ABSOLUTE and idx.offset < 1:
            raise ctx.reporter.error(
                f"'{text}': positions are 1-based; the first element is {e.var}[1]", e.span)
        if idx.kind is ast.IndexKind.CURRENT and id(e) in return_exprs:
            raise ctx.reporter.error(
                f"'{text}' ranges over every element and only makes sense in WHERE; in RETURN "
                f"use first({e.var}).{e.attr}, {e.var}[last].{e.attr} or an aggregate",
                e.span)


def check_aggregates(ctx: Context) -> None:
    """``count(v)``, ``sum(v.x)``, ... over exactly one Kleene variable, without an index."""
    for e in ctx.all_exprs():
        if not (isinstance(e, ast.Call) and e.name in AGGREGATES and len(e.args) == 1):
            continue
        arg = e.args[0]
        if isinstance(arg, ast.VarRef) and e.name != "count":
            raise ctx.reporter.error(
                f"{e.name}() needs an attribute of a Kleene variable, e.g. "
                f"{e.name}({arg.var}.price); count({arg.var}) counts its events", e.span)
        vars_ = mentioned_vars(arg)
        if len(vars_) != 1:
            raise ctx.reporter.error(
                f"{e.name}() aggregates over one Kleene variable, e.g. {e.name}(b.price); "
                f"'{expr_text(arg)}' mentions {len(vars_)} variables", e.span)
        var = vars_[0]
        info = ctx.variables.get(var)
        if info is None:
            continue
        if info.kind is VarKind.SINGLE and not (
                ctx.query.rows is not None and isinstance(arg, ast.VarRef)):
            # EMIT ROWS: count(v) of a single variable is 1 once its row is mapped (semantics 19)
            raise ctx.reporter.error(
                f"aggregate {e.name}() needs a Kleene variable, but '{var}' binds one event; "
                f"{_kleene_hint(ctx, var)}", e.span)
        if info.kind is VarKind.NEGATED:
            raise ctx.reporter.error(
                f"aggregate {e.name}() over '{var}', which is inside NOT and never bound",
                e.span)
        for s in sub_exprs(arg):
            if isinstance(s, ast.AttrRef) and s.index is not None \
                    and s.index.kind is not ast.IndexKind.UPTO:
                raise ctx.reporter.error(
                    f"{e.name}() already ranges over every element of '{var}'; drop the index "
                    f"in '{expr_text(s)}'", s.span)
            if isinstance(s, ast.Call) and s.name in AGGREGATES and len(s.args) == 1:
                raise ctx.reporter.error("aggregates cannot be nested", s.span)


def _upto_refs(e: ast.Expr) -> list[ast.AttrRef]:
    return [s for s in sub_exprs(e) if isinstance(s, ast.AttrRef) and s.index is not None
            and s.index.kind is ast.IndexKind.UPTO]


def check_running(ctx: Context) -> None:
    """``v[..i].x`` (docs/semantics.md 21): inside one aggregate's argument in a WHERE
    conjunct, every reference to ``v`` there written so, and no other list variable iterated
    by the conjunct."""
    allowed: set[int] = set()
    for c in ctx.conjuncts():
        for e in sub_exprs(c):
            if not (isinstance(e, ast.Call) and e.name in AGGREGATES and len(e.args) == 1):
                continue
            ups = _upto_refs(e.args[0])
            if not ups:
                continue
            var = ups[0].var
            for s in sub_exprs(e.args[0]):
                if isinstance(s, ast.AttrRef | ast.VarRef) and s.var == var \
                        and all(s is not u for u in ups):
                    raise ctx.reporter.error(
                        f"'{expr_text(e)}' is a running aggregate over {var}[..i]: write every "
                        f"reference to '{var}' in it as {var}[..i].attr", s.span)
            allowed.update(id(u) for u in ups)
            iterated = {s.var for s in sub_exprs(c) if isinstance(s, ast.AttrRef)
                        and s.index is not None and s.index.kind is ast.IndexKind.CURRENT
                        and s.var != var}
            if iterated:
                raise ctx.reporter.error(
                    f"'{expr_text(e)}' runs over '{var}', but its conjunct also iterates "
                    f"'{sorted(iterated)[0]}' by [i]; a running aggregate's i is its own "
                    "variable's", e.span)
    for e in ctx.all_exprs():
        if isinstance(e, ast.AttrRef) and e.index is not None \
                and e.index.kind is ast.IndexKind.UPTO and id(e) not in allowed:
            raise ctx.reporter.error(
                f"'{expr_text(e)}' (the elements up to i) is only allowed inside an aggregate "
                f"in a WHERE condition, e.g. avg({e.var}[..i].{e.attr}) < 15", e.span)


__all__ = ["check_aggregates", "check_indexes", "check_quantifiers", "check_running"]
