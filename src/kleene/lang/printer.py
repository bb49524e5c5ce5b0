"""Printer: AST -> canonical query text, such that ``parse(to_text(q)) == q``.

Patterns print in functional form (``SEQ(...)``, ``AND(...)``); expressions print with the
fewest parentheses that keep the tree (children of equal precedence on the right are
parenthesised, so ``a - (b - c)`` survives). Names that are not plain identifiers, or are
reserved words, are quoted.
"""

from __future__ import annotations

from .. import ast
from ..syntax import expr_text, name_text, number_text, quote_string

_UNIT_WORD = {
    ast.TimeUnit.MILLISECONDS: "milliseconds",
    ast.TimeUnit.SECONDS: "seconds",
    ast.TimeUnit.MINUTES: "minutes",
    ast.TimeUnit.HOURS: "hours",
    ast.TimeUnit.DAYS: "days",
    ast.TimeUnit.EVENTS: "events",
}


def type_text(name: str | None) -> str:
    """An event type: identifier, digits (FAEM track ids), ``ANY`` (no type) or quoted."""
    if name is None:
        return "ANY"
    if name.isdigit() and name.isascii():
        return name
    if name.upper() == "ANY":
        return quote_string(name, '"')
    return name_text(name)


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
        q = _quant(p.min, p.max) + ("?" if p.reluctant else "")
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
    if q.emit is not None or q.timeouts:
        emit = [] if q.emit is None else [q.emit.value.upper()]
        lines.append(" ".join(["EMIT", *emit, *(["TIMEOUTS"] if q.timeouts else [])]))
    if q.rows is not None:
        excl = " EXCLUDE " + ", ".join(name_text(v) for v in q.rows) if q.rows else ""
        lines.append(f"EMIT ROWS{excl}")
    if q.after_match is not None:
        am = q.after_match
        target = f" {name_text(am.var)}" if am.var is not None else ""
        lines.append(f"AFTER MATCH SKIP {am.mode.value}{target}")
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
