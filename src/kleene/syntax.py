"""Lexical rules and expression text shared by every layer: the reserved words, what an
identifier is, and the canonical text of an expression.

It sits beside :mod:`kleene.ast` at the bottom of the layers, so the printer (``kleene.lang``)
and the plan layer (RETURN item names, ``explain``) use one definition: the plan layer may not
import the language layer.
"""

from __future__ import annotations

import datetime as _dt

from . import ast
from .errors import QueryValidationError

CLAUSE_WORDS = ("NAME", "PATTERN", "WHERE", "PARTITION", "WITHIN", "USING", "PICK", "CONSUME",
                "EMIT", "RETURN")
"""The clause keywords, in the order clauses must appear."""

RESERVED = frozenset(CLAUSE_WORDS) | frozenset({
    "AND", "OR", "NOT", "SEQ", "ANY", "AS", "TRUE", "FALSE", "NULL", "BETWEEN", "IN", "LIKE",
    "IS", "BY", "FROM", "SELECT",
})
"""Words that cannot be used unquoted as an event type or as a variable name."""

IDENT_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
IDENT_CHARS = IDENT_START | frozenset("0123456789")


def is_identifier(text: str) -> bool:
    """True if ``text`` lexes as one identifier token (ASCII letters, digits, ``_``)."""
    return bool(text) and text[0] in IDENT_START and all(c in IDENT_CHARS for c in text)


_PREC = {
    "or": 1, "and": 2,
    "=": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
    "+": 5, "-": 5, "*": 6, "/": 6, "%": 6,
}
_NOT_PREC = 3
_PRED_PREC = 4
_UNARY_PREC = 7
_ATOM = 8

def quote_string(value: str, quote: str = "'") -> str:
    """A string literal: the quote character is doubled."""
    return quote + value.replace(quote, quote * 2) + quote


def name_text(name: str) -> str:
    """An identifier as written, or double-quoted if it is not a plain, unreserved identifier."""
    if is_identifier(name) and name.upper() not in RESERVED:
        return name
    return quote_string(name, '"')


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
    if idx.kind is ast.IndexKind.UPTO:
        return f"{var}[..i].{attr}"
    word = "i" if idx.kind is ast.IndexKind.CURRENT else "last"
    off = f"-{-idx.offset}" if idx.offset else ""
    return f"{var}[{word}{off}].{attr}"


__all__ = ["CLAUSE_WORDS", "IDENT_CHARS", "IDENT_START", "RESERVED", "expr_text", "is_identifier",
           "name_text", "number_text", "quote_string"]
