"""AFTER MATCH SKIP rule (docs/semantics.md 19): SQL row pattern matching is defined on
contiguous rows with preferred matches; the combinations it does not define are rejected."""

from __future__ import annotations

from ... import ast
from ...lang.functions import AGGREGATES
from ...lang.printer import pattern_text
from ..analyzed import VarKind
from ..walk import sub_exprs, sub_patterns
from .context import Context


def _can_be_empty(p: ast.Pattern) -> bool:
    if isinstance(p, ast.EventPattern):
        return False
    if isinstance(p, ast.Kleene):
        return p.min == 0 or _can_be_empty(p.body)
    if isinstance(p, ast.Within):
        return _can_be_empty(p.body)
    if isinstance(p, ast.Seq):
        return all(_can_be_empty(i) for i in p.items)
    if isinstance(p, ast.Or):
        return any(_can_be_empty(i) for i in p.items)
    return False


def check_after_match(ctx: Context) -> None:
    """AFTER MATCH SKIP needs strict-contiguity and SEQ / OR / Kleene / event patterns only;
    reluctant quantifiers need AFTER MATCH SKIP."""
    q = ctx.query
    am = q.after_match
    in_return = {id(x) for r in q.returns for x in sub_exprs(r.expr)}
    for e in ctx.all_exprs():
        if not isinstance(e, ast.Call):
            continue
        if e.name == "match_number" and (am is None or id(e) not in in_return):
            raise ctx.reporter.error(
                "match_number() numbers the matches of an AFTER MATCH SKIP query: it is only "
                "valid in RETURN of such a query", e.span)
        if e.name in ("classifier", "final") and (q.rows is None or id(e) not in in_return):
            raise ctx.reporter.error(
                f"{e.name}() reads the current row of EMIT ROWS: it is only valid in RETURN "
                "of an EMIT ROWS query", e.span)
    if q.rows is not None:
        _check_rows(ctx)
    if am is None:
        for p in sub_patterns(q.pattern):
            if isinstance(p, ast.Kleene) and p.reluctant:
                raise ctx.reporter.error(
                    f"a reluctant quantifier ({pattern_text(p, nested=True)}) only has a "
                    "meaning with AFTER MATCH SKIP (it orders the preferred match); add an "
                    "AFTER MATCH SKIP clause or drop the '?'", p.span)
        return
    if q.strategy is not ast.Strategy.STRICT_CONTIGUITY:
        raise ctx.reporter.error(
            "AFTER MATCH SKIP is defined on contiguous rows: add USING strict-contiguity",
            am.span)
    what = None
    if q.picks:
        what = "PICK"
    elif q.consume is not None:
        what = "CONSUME"
    elif q.emit is not None and q.emit is not ast.Emit.ALL:
        what = f"EMIT {q.emit.value.upper()}"
    if what is not None:
        raise ctx.reporter.error(f"AFTER MATCH SKIP already selects one match per start row; "
                                 f"it cannot be combined with {what}", am.span)
    for p in sub_patterns(q.pattern):
        bad = None
        if isinstance(p, ast.And):
            bad = "AND"
        elif isinstance(p, ast.AnyOf):
            bad = "ANY"
        elif isinstance(p, ast.Not):
            bad = "NOT"
        elif isinstance(p, ast.Within) and p is not q.pattern:
            bad = "a window on a sub-pattern"
        elif isinstance(p, ast.Kleene) and _can_be_empty(p.body):
            bad = "a repetition of a pattern that can match no rows"
        if bad is not None:
            raise ctx.reporter.error(
                f"AFTER MATCH SKIP does not support {bad} ({pattern_text(p, nested=True)}); "
                "use SEQ, OR, Kleene and event patterns", p.span)
    if _can_be_empty(q.pattern):
        raise ctx.reporter.error(
            "the pattern can match no rows; kleene has no empty matches, so AFTER MATCH SKIP "
            "(whose preferred match could then be the empty one) needs a pattern that binds "
            "at least one row", q.pattern.span)
    if am.var is not None:
        info = ctx.variables.get(am.var)
        if info is None or info.kind is VarKind.NEGATED:
            raise ctx.reporter.error(
                f"AFTER MATCH SKIP {am.mode.value} {am.var}: no positive variable {am.var!r} "
                f"(variables: {ctx.var_list()})", am.span)


def _check_rows(ctx: Context) -> None:
    """``EMIT ROWS`` (docs/semantics.md 19): with AFTER MATCH SKIP, excluded variables exist,
    no RETURN field is named ``row`` (the row's id takes that name)."""
    q = ctx.query
    if q.after_match is None:
        raise ctx.reporter.error(
            "EMIT ROWS outputs the rows of SQL row pattern matches: it needs an AFTER MATCH "
            "SKIP clause", q.span)
    for v in q.rows or ():
        info = ctx.variables.get(v)
        if info is None or info.kind is VarKind.NEGATED:
            raise ctx.reporter.error(f"EMIT ROWS EXCLUDE {v}: no positive variable {v!r} "
                                     f"(variables: {ctx.var_list()})", q.span)
    for r in q.returns:
        for e in sub_exprs(r.expr):
            if isinstance(e, ast.Call) and e.name in AGGREGATES and any(
                    isinstance(x, ast.Call) and x.name == "final" for a in e.args
                    for x in sub_exprs(a)):
                raise ctx.reporter.error(
                    f"final() inside the aggregate {e.name}(): write final({e.name}(...)) "
                    "(an aggregate over the whole match)", e.span)
        if (r.alias or "") == "row":
            raise ctx.reporter.error("EMIT ROWS: the RETURN name 'row' is taken by the row's "
                                     "event id; choose another alias", r.span)


__all__ = ["check_after_match"]
