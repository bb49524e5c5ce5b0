"""Builder API: compose queries in Python and get exactly the AST the parser returns.

Pattern functions (:func:`event`, :func:`seq`, :func:`and_`, :func:`or_`, :func:`any_`,
:func:`not_`, :func:`plus`, :func:`star`, :func:`repeat`, :func:`window`) accept canonical text
or AST nodes interchangeably and return a :class:`QueryBuilder`; its clause methods
(``where``, ``partition_by``, ``within``, ``using``, ``pick``, ``consume``, ``emit``,
``returns``, ``named``) return new builders, and :meth:`QueryBuilder.build` gives the
:class:`~kleene.ast.Query`.

Example:
    >>> from kleene.lang import parse
    >>> q = seq(event("Stock", "a"), plus(event("Stock", "b"))).where("a.price > 10")
    >>> q = q.within(minutes=10)
    >>> q.build() == parse("PATTERN SEQ(Stock a, Stock+ b[]) WHERE a.price > 10 WITHIN 10 minutes")
    True
"""

from __future__ import annotations

from dataclasses import replace
from typing import Union

from . import ast
from .errors import QuerySyntaxError, QueryValidationError
from .frozen import dataclass
from .lang import parser as _parser
from .lang.printer import to_text
from .lang.walk_ast import strip_spans

PatternLike = Union[str, ast.Pattern, "QueryBuilder"]
ExprLike = str | ast.Expr

_PATTERN_TYPES = (ast.EventPattern, ast.Kleene, ast.Seq, ast.And, ast.Or, ast.AnyOf, ast.Not,
                  ast.Within)
_EXPR_TYPES = (ast.Literal, ast.AttrRef, ast.VarRef, ast.Unary, ast.Binary, ast.Between,
               ast.InList, ast.Like, ast.IsNull, ast.Call, ast.Equivalence)


def parse_pattern(text: str) -> ast.Pattern:
    """Parse a canonical pattern fragment such as ``"SEQ(A a, B+ b[])"`` (without spans)."""
    return strip_spans(_parser.parse_pattern(text))


def parse_expr(text: str) -> ast.Expr:
    """Parse a canonical condition or expression fragment such as ``"a.price > 10"``."""
    return strip_spans(_parser.parse_expr(text))


def _name(x: str, what: str) -> str:
    if not isinstance(x, str):
        raise TypeError(f"{what} must be text, not {type(x).__name__}")
    p = _parser.Parser(x)
    name = p.parse_var_name()
    if not p.at_end():
        p.fail(expected=("end of text",))
    return name


def _pattern(x: PatternLike) -> ast.Pattern:
    if isinstance(x, QueryBuilder):
        return x.query.pattern
    if isinstance(x, str):
        return parse_pattern(x)
    if isinstance(x, _PATTERN_TYPES):
        return x
    raise TypeError(f"expected a pattern (text or node), not {type(x).__name__}")


def _expr(x: ExprLike) -> ast.Expr:
    if isinstance(x, str):
        return parse_expr(x)
    if isinstance(x, _EXPR_TYPES):
        return x
    raise TypeError(f"expected an expression (text or node), not {type(x).__name__}")


def _window(amount: float | None, unit: str | ast.TimeUnit | None, *, ms: float | None,
            seconds: float | None, minutes: float | None, hours: float | None,
            days: float | None, events: int | None) -> ast.Window:
    given = {k: v for k, v in (("ms", ms), ("seconds", seconds), ("minutes", minutes),
                               ("hours", hours), ("days", days), ("events", events))
             if v is not None}
    if amount is not None or unit is not None:
        if given or amount is None or unit is None:
            raise QueryValidationError(
                "give a window either as (amount, unit) or as one keyword, e.g. seconds=5")
        if isinstance(unit, str):
            if unit.lower() not in _parser.UNITS:
                raise QueryValidationError(f"unknown time unit {unit!r}; use ms, seconds, "
                                           "minutes, hours, days or events")
            unit = _parser.UNITS[unit.lower()]
        return ast.Window(amount, unit)
    if len(given) != 1:
        raise QueryValidationError(
            "give exactly one window length, e.g. within(seconds=5) or within(events=10)")
    key, value = next(iter(given.items()))
    unit_enum = {"ms": ast.TimeUnit.MILLISECONDS, "seconds": ast.TimeUnit.SECONDS,
                 "minutes": ast.TimeUnit.MINUTES, "hours": ast.TimeUnit.HOURS,
                 "days": ast.TimeUnit.DAYS, "events": ast.TimeUnit.EVENTS}[key]
    return ast.Window(value, unit_enum)


@dataclass(frozen=True, slots=True)
class QueryBuilder:
    """An immutable query under construction; every method returns a new builder."""

    query: ast.Query

    def build(self) -> ast.Query:
        """The AST (equal to what the parser returns for the same query text)."""
        return self.query

    def __str__(self) -> str:
        return to_text(self.query)

    def named(self, name: str) -> QueryBuilder:
        """``NAME name``."""
        return QueryBuilder(replace(self.query, name=name))

    def where(self, *conditions: ExprLike) -> QueryBuilder:
        """``WHERE c1 AND c2 ...`` (added to any existing condition with AND)."""
        expr = self.query.where
        for c in conditions:
            e = _expr(c)
            expr = e if expr is None else ast.Binary("and", expr, e)
        return QueryBuilder(replace(self.query, where=expr))

    def partition_by(self, *attrs: str) -> QueryBuilder:
        """``PARTITION BY a, b``."""
        return QueryBuilder(replace(self.query, partition_by=self.query.partition_by + attrs))

    def within(self, amount: float | None = None, unit: str | ast.TimeUnit | None = None, *,
               ms: float | None = None, seconds: float | None = None,
               minutes: float | None = None, hours: float | None = None,
               days: float | None = None, events: int | None = None) -> QueryBuilder:
        """``WITHIN``: ``within(minutes=10)``, ``within(events=5)`` or ``within(5, "s")``."""
        w = _window(amount, unit, ms=ms, seconds=seconds, minutes=minutes, hours=hours,
                    days=days, events=events)
        return QueryBuilder(replace(self.query, within=w))

    def using(self, strategy: str | ast.Strategy) -> QueryBuilder:
        """``USING skip-till-next-match`` (or any strategy name)."""
        s = strategy if isinstance(strategy, ast.Strategy) else _strategy(strategy)
        return QueryBuilder(replace(self.query, strategy=s))

    def pick(self, mode: str | ast.PickMode, var: str, *,
             within: ast.Window | tuple[float, str] | None = None,
             from_var: str | None = None) -> QueryBuilder:
        """``PICK FIRST|LAST|EACH var [WITHIN w FROM other]``; ``within=(5, "seconds")``."""
        m = mode if isinstance(mode, ast.PickMode) else ast.PickMode(mode.lower())
        w = within
        if isinstance(w, tuple):
            w = _window(w[0], w[1], ms=None, seconds=None, minutes=None, hours=None, days=None,
                        events=None)
        p = ast.Pick(m, _name(var, "a variable"), w,
                     None if from_var is None else _name(from_var, "a variable"))
        return QueryBuilder(replace(self.query, picks=self.query.picks + (p,)))

    def consume(self, *variables: str, all_vars: bool = False) -> QueryBuilder:
        """``CONSUME a, b`` or, with ``all_vars=True``, ``CONSUME ALL``."""
        c = ast.Consume((), True) if all_vars else ast.Consume(
            tuple(_name(v, "a variable") for v in variables))
        return QueryBuilder(replace(self.query, consume=c))

    def emit(self, mode: str | ast.Emit) -> QueryBuilder:
        """``EMIT ALL`` / ``EMIT RECENT``."""
        e = mode if isinstance(mode, ast.Emit) else ast.Emit(mode.lower())
        return QueryBuilder(replace(self.query, emit=e))

    def returns(self, *items: ExprLike | tuple[ExprLike, str],
                type_name: str | None = None) -> QueryBuilder:
        """``RETURN expr [AS alias], ... [AS TYPE type_name]``; an item is text, a node or
        ``(expr, alias)``."""
        out = []
        for item in items:
            if isinstance(item, tuple):
                out.append(ast.ReturnItem(_expr(item[0]), item[1]))
            else:
                out.append(ast.ReturnItem(_expr(item)))
        return QueryBuilder(replace(self.query, returns=self.query.returns + tuple(out),
                                    return_type=type_name if type_name is not None
                                    else self.query.return_type))


def _strategy(name: str) -> ast.Strategy:
    try:
        return ast.Strategy(name.lower())
    except ValueError:
        raise QuerySyntaxError(f"unknown selection strategy {name!r}; use one of: "
                               + ", ".join(s.value for s in ast.Strategy)) from None


def _q(p: ast.Pattern) -> QueryBuilder:
    return QueryBuilder(ast.Query(pattern=p))


def query(pattern: PatternLike) -> QueryBuilder:
    """Start a query from any pattern (text or node)."""
    return _q(_pattern(pattern))


def event(type_: str | None, var: str) -> QueryBuilder:
    """``Type var``; ``type_=None`` matches any event type."""
    if type_ is not None and not isinstance(type_, str):
        raise TypeError("an event type is a string (or None for any type)")
    return _q(ast.EventPattern(type_, _name(var, "a variable")))


def seq(*items: PatternLike) -> QueryBuilder:
    """``SEQ(p1, ..., pn)``."""
    return _q(ast.Seq(tuple(_pattern(i) for i in items)))


def and_(*items: PatternLike) -> QueryBuilder:
    """``AND(p1, ..., pn)``."""
    return _q(ast.And(tuple(_pattern(i) for i in items)))


def or_(*items: PatternLike) -> QueryBuilder:
    """``OR(p1, ..., pn)``."""
    return _q(ast.Or(tuple(_pattern(i) for i in items)))


def any_(k: int, *items: PatternLike) -> QueryBuilder:
    """``ANY(k, p1, ..., pn)``."""
    return _q(ast.AnyOf(k, tuple(_pattern(i) for i in items)))


def not_(item: PatternLike) -> QueryBuilder:
    """``NOT(p)``."""
    return _q(ast.Not(_pattern(item)))


def repeat(item: PatternLike, min: int, max: int | None) -> QueryBuilder:
    """``p{min,max}`` (``max=None``: unbounded)."""
    return _q(ast.Kleene(_pattern(item), min, max))


def plus(item: PatternLike) -> QueryBuilder:
    """``p+``: one or more."""
    return repeat(item, 1, None)


def star(item: PatternLike) -> QueryBuilder:
    """``p*``: zero or more."""
    return repeat(item, 0, None)


def window(item: PatternLike, amount: float | None = None,
           unit: str | ast.TimeUnit | None = None, *, ms: float | None = None,
           seconds: float | None = None, minutes: float | None = None,
           hours: float | None = None, days: float | None = None,
           events: int | None = None) -> QueryBuilder:
    """A window on a sub-pattern: ``p WITHIN 5 seconds`` inside a composite."""
    w = _window(amount, unit, ms=ms, seconds=seconds, minutes=minutes, hours=hours, days=days,
                events=events)
    return _q(ast.Within(_pattern(item), w))


__all__ = ["QueryBuilder", "and_", "any_", "event", "not_", "or_", "parse_expr",
           "parse_pattern", "plus", "query", "repeat", "seq", "star", "window"]
