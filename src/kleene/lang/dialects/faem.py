"""FAEM (tree-based Kleene, Behravesh et al.): event type names double as variables.

    PATTERN Google; Microsoft+
    WHERE Google.value > 100 AND Google.value < Microsoft.value
    WITHIN 5 UNIT

``;`` is sequence, ``&`` or ``and`` conjunction, ``|`` disjunction, ``!`` negation; Kleene is
``+``, ``*`` or ``[n]`` (also ``{n}``/``{n,m}``) after the type; ``WITHIN n UNIT`` counts events.
A numeric type name (a track id such as ``147073``) becomes the variable ``e147073``.
Without ``USING``, a FAEM query uses FAEM's Kleene semantics, ``maximal-grouping``
(docs/semantics.md 18).
"""

from __future__ import annotations

import dataclasses

from ... import ast
from ..lexer import Tok, is_identifier
from ..parser import Parser
from ..walk_ast import renumbered


def variable_for(type_name: str) -> str:
    """The variable a FAEM type name binds: itself, or ``e<digits>`` for numeric types."""
    if is_identifier(type_name):
        return type_name
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in type_name)
    return "e" + cleaned


class FaemParser(Parser):
    """FAEM: type-named variables, ``and`` as conjunction, ``[n]`` repetition."""

    dialect = "faem"

    def parse_and_pattern(self) -> ast.Pattern:
        """``p & q`` or ``p and q``."""
        start = self.tok
        items = [self.parse_unary_pattern()]
        while self.accept_op("&") or self.accept_kw("AND"):
            items.append(self.parse_unary_pattern())
        return items[0] if len(items) == 1 else ast.And(tuple(items), span=self.span_from(start))

    def parse_quantifier(self) -> tuple[int, int | None] | None:
        """Canonical quantifiers plus FAEM's ``[n]``."""
        if self.is_op("[") and self.peek().kind is Tok.NUMBER:
            self.advance()
            lo = self.parse_int("a repetition count")
            hi: int | None = lo
            if self.accept_op(","):
                hi = None if self.is_op("]") else self.parse_int("a maximum repetition count")
            self.expect_op("]")
            return (lo, hi)
        return super().parse_quantifier()

    def parse_event(self) -> ast.Pattern:
        """``Type``, ``Type+``, ``Type*``, ``Type[n]``: the type name is the variable."""
        return typed_event(self, "FAEM")


def typed_event(p: Parser, dialect: str) -> ast.Pattern:
    """An event type with an optional quantifier, the type name its variable: the events of
    the dialects whose patterns name types (FAEM, Log++)."""
    start = p.tok
    etype = p.parse_event_type()
    if etype is None:
        p.fail(f"{dialect} patterns name event types; ANY is not a type",
               expected=("an event type",), tok=start)
    q = p.parse_quantifier()
    ev = ast.EventPattern(etype, variable_for(etype), span=p.span_from(start))
    if q is None:
        return ev
    return ast.Kleene(ev, q[0], q[1], span=p.span_from(start))


def parse(text: str) -> ast.Query:
    """Parse FAEM query text.

    Example:
        >>> from kleene.lang import to_text
        >>> print(to_text(parse("PATTERN Google; Microsoft+ WITHIN 5 UNIT")))
        PATTERN SEQ(Google Google, Microsoft+ Microsoft[])
        WITHIN 5 events
        USING maximal-grouping
    """
    q = renumbered(FaemParser(text).parse_query())
    if q.strategy is None:
        q = dataclasses.replace(q, strategy=ast.Strategy.MAXIMAL_GROUPING)
    return q


__all__ = ["FaemParser", "parse", "typed_event", "variable_for"]
