"""Function rules: every call is a built-in, an aggregate or a registered UDF, with the right
number of arguments; bare variables and ``[attr]`` only where they mean something."""

from __future__ import annotations

from ... import ast
from ...lang.functions import AGGREGATES, SCALARS
from ..walk import children, split_and
from .context import Context

UDF_HINT = ("user functions (UDFs) are registered by name via kleene.compile(..., "
            "udfs={{'{name}': fn}}) or on the command line with --udf module:function")


def check_functions(ctx: Context) -> None:
    """Resolve calls; check arities, bare variables and equivalence placement."""
    top = {id(c) for c in split_and(ctx.query.where)}
    roots: list[ast.Expr] = [] if ctx.query.where is None else [ctx.query.where]
    # A bare variable as a whole RETURN item returns the event(s) it binds.
    roots += [r.expr for r in ctx.query.returns if not isinstance(r.expr, ast.VarRef)]
    for root in roots:
        _walk(ctx, root, None, top)


def _walk(ctx: Context, e: ast.Expr, parent: ast.Expr | None, top: set[int]) -> None:
    if isinstance(e, ast.Equivalence) and id(e) not in top:
        raise ctx.reporter.error(
            "an equivalence test [attr] must be a top-level WHERE condition joined with AND "
            "(e.g. WHERE [symbol] AND a.price > 10)", e.span)
    if isinstance(e, ast.VarRef):
        # Aggregates get their own, more specific message (kleene.check_aggregates).
        ok = isinstance(parent, ast.Call) and (
            parent.name in AGGREGATES or parent.name in ctx.udfs)
        if not ok:
            raise ctx.reporter.error(
                f"bare variable '{e.var}' in an expression; refer to an attribute such as "
                f"{e.var}.price (a bare variable is allowed only in count({e.var}) and as a "
                "UDF argument)", e.span)
    if isinstance(e, ast.Call):
        _check_call(ctx, e)
    for c in children(e):
        _walk(ctx, c, e, top)


def _check_call(ctx: Context, e: ast.Call) -> None:
    name, n = e.name, len(e.args)
    if name in AGGREGATES and n == 1:
        return
    if name in ("min", "max") and n >= 2:
        return
    if name in SCALARS:
        lo, hi = SCALARS[name]
        if n < lo or (hi >= 0 and n > hi):
            want = str(lo) if lo == hi else (f"{lo} or more" if hi < 0 else f"{lo} to {hi}")
            raise ctx.reporter.error(
                f"{name}() takes {want} argument{'s' if want != '1' else ''}, got {n}", e.span)
        return
    if name in AGGREGATES:
        raise ctx.reporter.error(
            f"aggregate {name}() takes one argument (e.g. {name}(b.price)), got {n}", e.span)
    if name.lower() in ("first", "last"):
        raise ctx.reporter.error(
            f"{name}(v) selects an element of a Kleene variable and must be followed by an "
            f"attribute, e.g. {name}(b).price", e.span)
    if name in ctx.udfs:
        return
    builtins = ", ".join(sorted(n for n in SCALARS
                               if n not in ("match_number", "classifier", "final")))
    raise ctx.reporter.error(
        f"unknown function '{name}'; " + UDF_HINT.format(name=name)
        + f" (built-ins: {builtins}; aggregates: {', '.join(AGGREGATES)})", e.span)


__all__ = ["UDF_HINT", "check_functions"]
