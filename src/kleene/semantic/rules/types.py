"""Type rules, applied only where a schema is known.

A schema maps an event type to its attributes and their kinds, e.g.
``{"Stock": {"price": float, "symbol": str}}``. Kinds may be Python types (``int``, ``float``,
``str``, ``bool``) or names (``"number"``, ``"string"``, ``"bool"``, ``"timestamp"``,
``"int64"``, ``"double"``, ``"utf8"`` ...). Attributes of types missing from the schema, and
of any-type variables, are not checked.
"""

from __future__ import annotations

from typing import Any

from ... import ast
from ...events.model import RESERVED as EVENT_COLUMNS
from ...lang.functions import AGGREGATES
from ...lang.printer import expr_text
from ..walk import children
from .context import Context

_KIND_NAMES = {
    "number": ("number", "int", "integer", "float", "double", "int8", "int16", "int32",
               "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "decimal",
               "numeric", "long"),
    "string": ("string", "str", "utf8", "large_string", "text", "large_utf8"),
    "bool": ("bool", "boolean"),
    "timestamp": ("timestamp", "datetime"),
}
_BY_NAME = {n: k for k, names in _KIND_NAMES.items() for n in names}
_PY = {int: "number", float: "number", str: "string", bool: "bool"}


def kind_of(spec: Any) -> str | None:
    """Normalise a schema entry to ``number``/``string``/``bool``/``timestamp`` (or None)."""
    if isinstance(spec, type) and spec in _PY:
        return _PY[spec]
    text = str(spec).lower()
    if text.startswith("timestamp"):
        return "timestamp"
    return _BY_NAME.get(text)


def check_types(ctx: Context) -> None:
    """Unknown attributes and mismatched operand kinds, when a schema is given."""
    if ctx.schema is None:
        return
    roots: list[ast.Expr] = [] if ctx.query.where is None else [ctx.query.where]
    roots += [r.expr for r in ctx.query.returns]
    for root in roots:
        _infer(ctx, root)


def _attr_kind(ctx: Context, e: ast.AttrRef) -> str | None:
    assert ctx.schema is not None
    info = ctx.variables.get(e.var)
    if info is None or info.type is None or info.type not in ctx.schema:
        return None
    attrs = ctx.schema[info.type]
    if e.attr in attrs:
        return kind_of(attrs[e.attr])
    if e.attr in EVENT_COLUMNS:
        return None
    import difflib  # only on an error: start-up

    close = difflib.get_close_matches(e.attr, list(attrs), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise ctx.reporter.error(
        f"event type '{info.type}' has no attribute '{e.attr}'{hint}; its attributes are: "
        + ", ".join(attrs), e.span)


def _infer(ctx: Context, e: ast.Expr) -> str | None:
    kinds = [_infer(ctx, c) for c in children(e)]
    if isinstance(e, ast.Literal):
        v = e.value
        if e.kind == "timestamp":
            return "timestamp"
        if e.kind == "interval":
            return "number"
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, (int, float)):
            return "number"
        if isinstance(v, str):
            return "string"
        return None
    if isinstance(e, ast.AttrRef):
        return _attr_kind(ctx, e)
    if isinstance(e, ast.Binary):
        left, right = kinds
        if e.op in ("+", "-", "*", "/", "%"):
            for k, side in ((left, e.left), (right, e.right)):
                if k in ("string", "bool"):
                    raise ctx.reporter.error(
                        f"arithmetic '{e.op}' on {k} value '{expr_text(side)}'; it needs "
                        "numbers", e.span)
            return "number" if left != "timestamp" else "timestamp"
        if e.op in ("and", "or"):
            return "bool"
        _comparable(ctx, e, left, right)
        return "bool"
    if isinstance(e, ast.Between):
        _comparable(ctx, e, kinds[0], kinds[1])
        _comparable(ctx, e, kinds[0], kinds[2])
        return "bool"
    if isinstance(e, ast.InList):
        for k in kinds[1:]:
            _comparable(ctx, e, kinds[0], k)
        return "bool"
    if isinstance(e, ast.Like):
        if kinds[0] not in (None, "string"):
            raise ctx.reporter.error(
                f"LIKE needs a string, but '{expr_text(e.operand)}' is a {kinds[0]}", e.span)
        return "bool"
    if isinstance(e, (ast.IsNull, ast.Equivalence)):
        return "bool"
    if isinstance(e, ast.Unary):
        return "bool" if e.op == "not" else kinds[0]
    if isinstance(e, ast.Call):
        if e.name == "count" and len(e.args) == 1:
            return "number"
        if e.name in AGGREGATES and len(e.args) == 1:
            if e.name in ("sum", "avg") and kinds[0] in ("string", "bool"):
                raise ctx.reporter.error(
                    f"{e.name}() needs numbers, but '{expr_text(e.args[0])}' is a {kinds[0]}",
                    e.span)
            return kinds[0] if e.name in ("min", "max") else "number"
        if e.name in ("lower", "upper", "trim", "substr", "concat"):
            return "string"
        if e.name in ("abs", "sqrt", "floor", "ceil", "round", "ln", "log", "exp", "power",
                      "length", "sign"):
            return "number"
        return None
    return None


def _comparable(ctx: Context, e: ast.Expr, a: str | None, b: str | None) -> None:
    if a is None or b is None or a == b:
        return
    if {a, b} <= {"number", "timestamp"}:
        return
    raise ctx.reporter.error(
        f"'{expr_text(e)}' compares a {a} with a {b}; compare values of the same kind", e.span)


__all__ = ["check_types", "kind_of"]
