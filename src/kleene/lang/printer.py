"""Printer: AST -> canonical query text, such that ``parse(to_text(q)) == q``.

Patterns print in functional form (``SEQ(...)``, ``AND(...)``); expressions print with the
fewest parentheses that keep the tree (children of equal precedence on the right are
parenthesised, so ``a - (b - c)`` survives). Names that are not plain identifiers, or are
reserved words, are quoted.
"""

from __future__ import annotations

import datetime as _dt

from .. import ast
from ..errors import QueryValidationError
from .lexer import is_identifier
from .parser import RESERVED

_PREC = {
    "or": 1, "and": 2,
    "=": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
    "+": 5, "-": 5, "*": 6, "/": 6, "%": 6,
}
_NOT_PREC = 3
_PRED_PREC = 4
_UNARY_PREC = 7
_ATOM = 8

_UNIT_WORD = {
    ast.TimeUnit.MILLISECONDS: "milliseconds",
    ast.TimeUnit.SECONDS: "seconds",
    ast.TimeUnit.MINUTES: "minutes",
    ast.TimeUnit.HOURS: "hours",
    ast.TimeUnit.DAYS: "days",
    ast.TimeUnit.EVENTS: "events",
}


def quote_string(value: str, quote: str = "'") -> str:
    """A string literal: the quote character is doubled."""
    return quote + value.replace(quote, quote * 2) + quote


def name_text(name: str) -> str:
    """An identifier as written, or double-quoted if it is not a plain, unreserved identifier."""
    if is_identifier(name) and name.upper() not in RESERVED:
        return name
    return quote_string(name, '"')


def type_text(name: str | None) -> str:
    """An event type: identifier, digits (FAEM track ids), ``ANY`` (no type) or quoted."""
    if name is None:
        return "ANY"
    if name.isdigit() and name.isascii():
        return name
    if name.upper() == "ANY":
        return quote_string(name, '"')
    return name_text(name)


def number_text(value: int | float) -> str:
    """A number that lexes back to the same value (``repr`` keeps floats exact)."""
    if isinstance(value, bool):
        raise TypeError("booleans are not numbers here")
    if isinstance(value, int):
        return str(value)
    text = repr(float(value))
    if text in ("inf", "-inf", "nan"):
        raise QueryValidationError(f"{text} cannot be written as a literal")
    return text


def window_text(w: ast.Window) -> str:
    """``5 seconds`` / ``10 events``."""
    word = _UNIT_WORD[w.unit]
    if w.amount == 1:
        word = word[:-1]
    return f"{number_text(w.amount)} {word}"


# ------------------------------------------------------------------------------------ patterns
def pattern_text(p: ast.Pattern, *, nested: bool = False) -> str:
    """Canonical text of a pattern. ``nested`` is true inside brackets (where WITHIN binds)."""
    if isinstance(p, ast.EventPattern):
        return f"{type_text(p.type)} {name_text(p.var)}"
    if isinstance(p, ast.Kleene):
        q = _quant(p.min, p.max)
        body = p.body
        if isinstance(body, ast.EventPattern):
            return f"{type_text(body.type)}{q} {name_text(body.var)}[]"
        if isinstance(body, (ast.Seq, ast.And, ast.Or, ast.AnyOf)):
            return pattern_text(body, nested=True) + q
        return f"({pattern_text(body, nested=True)}){q}"
    if isinstance(p, ast.Seq):
        return "SEQ(" + _items(p.items) + ")"
    if isinstance(p, ast.And):
        return "AND(" + _items(p.items) + ")"
    if isinstance(p, ast.Or):
        return "OR(" + _items(p.items) + ")"
    if isinstance(p, ast.AnyOf):
        return f"ANY({p.k}, " + _items(p.items) + ")"
    if isinstance(p, ast.Not):
        return "NOT(" + pattern_text(p.body, nested=True) + ")"
    if isinstance(p, ast.Within):
        inner = f"{pattern_text(p.body, nested=True)} WITHIN {window_text(p.window)}"
        return inner if nested else f"({inner})"
    raise TypeError(f"not a pattern node: {type(p).__name__}")


def _items(items: tuple[ast.Pattern, ...]) -> str:
    return ", ".join(pattern_text(i, nested=True) for i in items)


def _quant(lo: int, hi: int | None) -> str:
    if (lo, hi) == (1, None):
        return "+"
    if (lo, hi) == (0, None):
        return "*"
    if hi is None:
        return f"{{{lo},}}"
    if lo == hi:
        return f"{{{lo}}}"
    return f"{{{lo},{hi}}}"


# --------------------------------------------------------------------------------- expressions
def expr_text(e: ast.Expr) -> str:
    """Canonical text of an expression."""
    return _expr(e)[0]


def _prec(e: ast.Expr) -> int:
    return _expr(e)[1]


def _wrap(e: ast.Expr, min_prec: int, *, strict: bool = False) -> str:
    text, prec = _expr(e)
    if prec < min_prec or (strict and prec == min_prec):
        return f"({text})"
    return text


def _expr(e: ast.Expr) -> tuple[str, int]:
    if isinstance(e, ast.Literal):
        return _literal(e)
    if isinstance(e, ast.AttrRef):
        return _attr(e), _ATOM
    if isinstance(e, ast.VarRef):
        return name_text(e.var), _ATOM
    if isinstance(e, ast.Call):
        name = e.name if is_identifier(e.name) and e.name.upper() not in RESERVED else None
        if name is None:
            raise QueryValidationError(f"function name {e.name!r} is not a plain identifier")
        return f"{name}(" + ", ".join(expr_text(a) for a in e.args) + ")", _ATOM
    if isinstance(e, ast.Equivalence):
        return "[" + ", ".join(name_text(a) for a in e.attrs) + "]", _ATOM
    if isinstance(e, ast.Unary):
        if e.op == "not":
            return "NOT " + _wrap(e.operand, _NOT_PREC), _NOT_PREC
        operand = e.operand
        if isinstance(operand, ast.Literal) and isinstance(operand.value, (int, float)) \
                and not isinstance(operand.value, bool) and operand.kind == "auto":
            return f"-({expr_text(operand)})", _UNARY_PREC
        inner = _wrap(operand, _UNARY_PREC)
        if inner.startswith("-"):
            inner = f"({inner})"
        return "-" + inner, _UNARY_PREC
    if isinstance(e, ast.Binary):
        prec = _PREC[e.op]
        op = e.op.upper() if e.op in ("and", "or") else e.op
        if prec == _PRED_PREC:
            # Comparisons never chain when printed (a chain would parse as AND).
            left = _wrap(e.left, _PRED_PREC, strict=True)
            right = _wrap(e.right, _PRED_PREC, strict=True)
        else:
            left = _wrap(e.left, prec)
            right = _wrap(e.right, prec, strict=True)
        return f"{left} {op} {right}", prec
    if isinstance(e, ast.Between):
        neg = "NOT " if e.negated else ""
        return (f"{_wrap(e.operand, _PRED_PREC, strict=True)} {neg}BETWEEN "
                f"{_wrap(e.low, _PRED_PREC, strict=True)} AND "
                f"{_wrap(e.high, _PRED_PREC, strict=True)}"), _PRED_PREC
    if isinstance(e, ast.InList):
        neg = "NOT " if e.negated else ""
        items = ", ".join(expr_text(i) for i in e.items)
        return f"{_wrap(e.operand, _PRED_PREC, strict=True)} {neg}IN ({items})", _PRED_PREC
    if isinstance(e, ast.Like):
        neg = "NOT " if e.negated else ""
        return (f"{_wrap(e.operand, _PRED_PREC, strict=True)} {neg}LIKE "
                f"{_wrap(e.pattern, _PRED_PREC, strict=True)}"), _PRED_PREC
    if isinstance(e, ast.IsNull):
        neg = "NOT " if e.negated else ""
        return f"{_wrap(e.operand, _PRED_PREC, strict=True)} IS {neg}NULL", _PRED_PREC
    raise TypeError(f"not an expression node: {type(e).__name__}")


def _literal(e: ast.Literal) -> tuple[str, int]:
    v = e.value
    if e.kind == "timestamp" and isinstance(v, int) and not isinstance(v, bool):
        dt = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(microseconds=v)
        return f"TIMESTAMP '{dt.isoformat().replace('+00:00', 'Z')}'", _ATOM
    if e.kind == "interval" and isinstance(v, int) and not isinstance(v, bool):
        return f"INTERVAL {_interval_amount(v)}", _ATOM
    if v is None:
        return "NULL", _ATOM
    if isinstance(v, bool):
        return ("TRUE" if v else "FALSE"), _ATOM
    if isinstance(v, (int, float)):
        text = number_text(v)
        return text, (_UNARY_PREC if text.startswith("-") else _ATOM)
    return quote_string(v), _ATOM


def _interval_amount(us: int) -> str:
    for unit, word in ((ast.TimeUnit.DAYS, "days"), (ast.TimeUnit.HOURS, "hours"),
                       (ast.TimeUnit.MINUTES, "minutes"), (ast.TimeUnit.SECONDS, "seconds"),
                       (ast.TimeUnit.MILLISECONDS, "milliseconds")):
        if us % unit.microseconds == 0:
            return f"{us // unit.microseconds} {word}"
    whole, frac = divmod(abs(us), 1000)
    sign = "-" if us < 0 else ""
    return f"{sign}{whole}.{frac:03d} milliseconds"


def _attr(e: ast.AttrRef) -> str:
    var = name_text(e.var)
    attr = e.attr if is_identifier(e.attr) else quote_string(e.attr, '"')
    idx = e.index
    if idx is None:
        return f"{var}.{attr}"
    if idx.kind is ast.IndexKind.FIRST:
        return f"first({var}).{attr}"
    if idx.kind is ast.IndexKind.ABSOLUTE:
        return f"{var}[{idx.offset}].{attr}"
    word = "i" if idx.kind is ast.IndexKind.CURRENT else "last"
    off = f"-{-idx.offset}" if idx.offset else ""
    return f"{var}[{word}{off}].{attr}"


# ------------------------------------------------------------------------------------ queries
def to_text(q: ast.Query) -> str:
    """Print a query in the canonical language, one clause per line.

    Example:
        >>> from kleene.lang import parse
        >>> print(to_text(parse("pattern seq(A a, B+ b[]) within 5 s")))
        PATTERN SEQ(A a, B+ b[])
        WITHIN 5 seconds
    """
    lines: list[str] = []
    if q.name is not None:
        lines.append(f"NAME {name_text(q.name)}")
    lines.append(f"PATTERN {pattern_text(q.pattern)}")
    if q.where is not None:
        lines.append(f"WHERE {expr_text(q.where)}")
    if q.partition_by:
        lines.append("PARTITION BY " + ", ".join(name_text(a) for a in q.partition_by))
    if q.within is not None:
        lines.append(f"WITHIN {window_text(q.within)}")
    if q.strategy is not None:
        lines.append(f"USING {q.strategy.value}")
    if q.picks:
        lines.append("PICK " + ", ".join(_pick(p) for p in q.picks))
    if q.consume is not None:
        if q.consume.all_vars:
            lines.append("CONSUME ALL")
        else:
            lines.append("CONSUME " + ", ".join(name_text(v) for v in q.consume.vars))
    if q.emit is not None:
        lines.append(f"EMIT {q.emit.value.upper()}")
    if q.returns or q.return_type is not None:
        items = ", ".join(_return_item(r) for r in q.returns) if q.returns else "*"
        rtype = f" AS TYPE {name_text(q.return_type)}" if q.return_type is not None else ""
        lines.append(f"RETURN {items}{rtype}")
    return "\n".join(lines)


def _pick(p: ast.Pick) -> str:
    text = f"{p.mode.value.upper()} {name_text(p.var)}"
    if p.within is not None:
        text += f" WITHIN {window_text(p.within)} FROM {name_text(p.from_var or '')}"
    return text


def _return_item(r: ast.ReturnItem) -> str:
    text = expr_text(r.expr)
    if r.alias is not None:
        # "AS TYPE x" introduces the output type, so an alias spelled TYPE is quoted.
        alias = quote_string(r.alias, '"') if r.alias.upper() == "TYPE" else name_text(r.alias)
        text += f" AS {alias}"
    return text


__all__ = ["expr_text", "name_text", "pattern_text", "quote_string", "to_text", "type_text",
           "window_text"]
