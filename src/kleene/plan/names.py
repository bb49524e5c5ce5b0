"""Default names of RETURN items: the expression's canonical text (docs/semantics.md 11).

The plan layer may not import the language layer (import-linter), so this is a small,
self-contained transcription of the canonical printer's expression rules
(``kleene.lang.printer.expr_text``); ``tests/runtime/test_names.py`` pins the two together.
"""

from __future__ import annotations

import datetime as _dt
import string

from .. import ast

_PREC = {"or": 1, "and": 2, "=": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
         "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
_NOT_PREC, _PRED_PREC, _UNARY_PREC, _ATOM = 3, 4, 7, 8
_IDENT_START = frozenset(string.ascii_letters + "_")
_IDENT_CHARS = _IDENT_START | frozenset(string.digits)
_RESERVED = frozenset({
    "NAME", "PATTERN", "WHERE", "PARTITION", "WITHIN", "USING", "PICK", "CONSUME", "EMIT",
    "RETURN", "AND", "OR", "NOT", "SEQ", "ANY", "AS", "TRUE", "FALSE", "NULL", "BETWEEN", "IN",
    "LIKE", "IS", "BY", "FROM", "SELECT"})


def _quote(value: str, q: str = "'") -> str:
    return q + value.replace(q, q * 2) + q


def _is_ident(text: str) -> bool:
    return bool(text) and text[0] in _IDENT_START and all(c in _IDENT_CHARS for c in text)


def _name(name: str) -> str:
    return name if _is_ident(name) and name.upper() not in _RESERVED else _quote(name, '"')


def _number(value: int | float) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


def expr_text(e: ast.Expr) -> str:
    """Canonical text of an expression (the default name of a RETURN item)."""
    return _expr(e)[0]


def _wrap(e: ast.Expr, min_prec: int, *, strict: bool = False) -> str:
    text, prec = _expr(e)
    if prec < min_prec or (strict and prec == min_prec):
        return f"({text})"
    return text


def _expr(e: ast.Expr) -> tuple[str, int]:  # noqa: C901 - one branch per node type
    if isinstance(e, ast.Literal):
        return _literal(e)
    if isinstance(e, ast.AttrRef):
        return _attr(e), _ATOM
    if isinstance(e, ast.VarRef):
        return _name(e.var), _ATOM
    if isinstance(e, ast.Call):
        return f"{e.name}(" + ", ".join(expr_text(a) for a in e.args) + ")", _ATOM
    if isinstance(e, ast.Equivalence):
        return "[" + ", ".join(_name(a) for a in e.attrs) + "]", _ATOM
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
    return type(e).__name__, _ATOM


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
        text = _number(v)
        return text, (_UNARY_PREC if text.startswith("-") else _ATOM)
    return _quote(v), _ATOM


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
    var = _name(e.var)
    attr = e.attr if _is_ident(e.attr) else _quote(e.attr, '"')
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


__all__ = ["expr_text"]
