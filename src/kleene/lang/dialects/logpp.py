"""Log++ (LogCEP, the pushdown-automaton paper): SQL-like clauses, comma sequences, logical
blocks with their own windows; event type names double as variables.

    SELECT A.price, G.price AS Alert
    PATTERN (A, (B & C & D), (E | F), !H, G+)
    WHERE [symbol] AND A.price > G.price
    WITHIN 10 seconds

``(p1, ..., pn)`` is a sequence, ``(p1 & ...)`` a conjunction, ``(p1 | ...)`` a disjunction,
``!p`` a negation; ``(block; 5 seconds)`` windows a block; Kleene is ``+``, ``*``, ``^n``,
``{n}`` or ``[n]``. ``SELECT attrs AS TypeName``: the final ``AS`` names the output type.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ast
from ..lexer import Tok
from ..parser import Parser
from ..walk_ast import renumbered
from .faem import typed_event

CLAUSES = ("SELECT", "PATTERN", "WHERE", "PARTITION", "WITHIN", "USING", "PICK", "CONSUME",
           "EMIT", "RETURN")


class LogppParser(Parser):
    """Log++ grammar."""

    dialect = "logpp"
    implicit_pattern = True

    def clause_order(self) -> tuple[str, ...]:
        """SELECT comes first (it replaces RETURN)."""
        return CLAUSES

    def clauses(self) -> dict[str, Callable[[dict[str, object]], None]]:
        """Canonical clauses plus SELECT."""
        table = super().clauses()
        table["SELECT"] = self.clause_select
        del table["NAME"]
        return table

    def clause_select(self, f: dict[str, object]) -> None:
        """``SELECT * | item, ... [AS TypeName]``: the last ``AS`` names the output type."""
        self.advance()
        items: list[ast.ReturnItem] = []
        if not self.accept_op("*"):
            while True:
                start = self.tok
                expr = self.parse_expr()
                alias = None
                if self.accept_kw("AS"):
                    alias = self.parse_name("an alias or output type name")
                items.append(ast.ReturnItem(expr, alias, span=self.span_from(start)))
                if not self.accept_op(","):
                    break
        rtype = None
        if self.accept_kw("AS"):
            rtype = self.parse_name("an output type name")
        elif items and items[-1].alias is not None:
            last = items[-1]
            rtype = last.alias
            items[-1] = ast.ReturnItem(last.expr, None, span=last.span)
        f["returns"] = tuple(items)
        f["return_type"] = rtype

    def parse_pattern(self) -> ast.Pattern:
        """A comma list (sequence) of blocks; inside a block ``; w`` windows it."""
        start = self.tok
        self.nest()
        items = [self.parse_or_pattern()]
        while self.accept_op(","):
            items.append(self.parse_or_pattern())
        self.nesting -= 1
        p = items[0] if len(items) == 1 else ast.Seq(tuple(items), span=self.span_from(start))
        if self.depth > 0 and self.is_op(";"):
            w = self.advance()
            bracket = self.accept_op("[")
            window = self.parse_window_body(w)
            if bracket:
                self.expect_op("]")
            p = ast.Within(p, window, span=self.span_from(start))
        return p

    def parse_seq_pattern(self) -> ast.Pattern:
        """Log++ has no infix ``;`` sequence (``;`` introduces a block window)."""
        return self.parse_and_pattern()

    def parse_quantifier(self) -> tuple[int, int | None] | None:
        """``+``, ``*``, ``^n``, ``{n}``, ``[n]``."""
        if self.is_op("^"):
            self.advance()
            n = self.parse_int("a repetition count")
            return (n, n)
        if self.is_op("[") and self.peek().kind is Tok.NUMBER:
            self.advance()
            n = self.parse_int("a repetition count")
            self.expect_op("]")
            return (n, n)
        return super().parse_quantifier()

    def parse_postfix_pattern(self) -> ast.Pattern:
        """Blocks in parentheses, or an event type."""
        start = self.tok
        if self.is_op("("):
            self.advance()
            self.depth += 1
            inner = self.parse_pattern()
            self.depth -= 1
            self.expect_op(")")
            return self.parse_group_quantifier(inner, start)
        return self.parse_event()

    def parse_event(self) -> ast.Pattern:
        """``Type`` with an optional Kleene suffix; the type name is the variable."""
        return typed_event(self, "Log++")


def parse(text: str) -> ast.Query:
    """Parse Log++ query text.

    Example:
        >>> from kleene.lang import to_text
        >>> print(to_text(parse("PATTERN (A, (B & C; 5 seconds), !D, E+) WITHIN 1 minute")))
        PATTERN SEQ(A A, AND(B B, C C) WITHIN 5 seconds, NOT(D D), E+ E[])
        WITHIN 1 minute
    """
    return renumbered(LogppParser(text).parse_query())


__all__ = ["LogppParser", "parse"]
