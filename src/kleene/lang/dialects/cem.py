"""SCEMon's CEM queries: a composition kind and a list of event classes; class names double
as variables.

    PATTERN Sequence
    WITH CNMA_A, RSTR_B, BAR_C
    WHERE [symbol]
    20 < CNMA_A.payment < 50 AND
    BAR_C.payment < 50
    WITHIN 5 hours

``Sequence``/``Conjunction``/``Disjunction`` become SEQ/AND/OR. In WHERE the conditions may
follow each other without ``AND`` (the paper writes ``[symbol]`` on its own line), and a
currency sign before a number (``$20``) is ignored. ``EMIT RECENT``/``EMIT ALL`` select the
paper's recent/all selection modes.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import ast
from ..lexer import Tok
from ..parser import Parser
from ..walk_ast import renumbered
from ._text import mask_currency
from .faem import variable_for

_KINDS: dict[str, type[ast.Seq] | type[ast.And] | type[ast.Or]] = {
    "SEQUENCE": ast.Seq, "CONJUNCTION": ast.And, "DISJUNCTION": ast.Or}
CLAUSES = ("NAME", "PATTERN", "WITH", "WHERE", "PARTITION", "WITHIN", "USING", "PICK",
           "CONSUME", "EMIT", "RETURN")


class CemParser(Parser):
    """CEM grammar."""

    dialect = "cem"

    def __init__(self, text: str) -> None:
        # A space keeps every offset (and so every span and caret) where it was.
        super().__init__(mask_currency(text))
        self.text = text
        self.kind: type[ast.Seq] | type[ast.And] | type[ast.Or] | None = None
        self.kind_tok = self.tok

    def clause_order(self) -> tuple[str, ...]:
        """PATTERN kind, then WITH, then the canonical clauses."""
        return CLAUSES

    def clauses(self) -> dict[str, Callable[[dict[str, object]], None]]:
        """Canonical clauses with CEM's PATTERN and WITH."""
        table = super().clauses()
        table["WITH"] = self.clause_with
        return table

    def clause_pattern(self, f: dict[str, object]) -> None:
        """``PATTERN Sequence|Conjunction|Disjunction``."""
        self.advance()
        self.kind_tok = self.tok
        word = self.tok.value.upper() if self.tok.kind is Tok.IDENT else ""
        if word not in _KINDS:
            self.fail(expected=("Sequence", "Conjunction", "Disjunction"))
        self.advance()
        self.kind = _KINDS[word]

    def clause_with(self, f: dict[str, object]) -> None:
        """``WITH E1, E2, ...``: the event classes in order."""
        with_tok = self.advance()
        if self.kind is None:
            self.fail("WITH needs a PATTERN Sequence|Conjunction|Disjunction before it",
                      tok=with_tok)
        events: list[ast.Pattern] = []
        while True:
            start = self.tok
            etype = self.parse_event_type()
            if etype is None:
                self.fail("CEM lists event classes; ANY is not a class", tok=start,
                          expected=("an event class",))
            events.append(ast.EventPattern(etype, variable_for(etype),
                                           span=self.span_from(start)))
            if not self.accept_op(","):
                break
        span = self.span_from(self.kind_tok)
        f["pattern"] = events[0] if len(events) == 1 else self.kind(tuple(events), span=span)

    def parse_query(self) -> ast.Query:
        """A CEM query needs both PATTERN kind and WITH."""
        if self.is_kw("PATTERN") and not self._has_with():
            self.fail("a CEM query lists its event classes in a WITH clause after PATTERN",
                      expected=("WITH",), tok=self.tokens[-1])
        return super().parse_query()

    def _has_with(self) -> bool:
        return any(t.kind is Tok.IDENT and t.value.upper() == "WITH" for t in self.tokens)

    def parse_where(self) -> ast.Expr | None:
        """Conditions joined by AND, or simply one after another."""
        start = self.tok
        parts = [self.parse_expr()]
        while self._starts_condition():
            parts.append(self.parse_expr())
        expr = parts[0]
        for p in parts[1:]:
            expr = ast.Binary("and", expr, p, span=self.span_from(start))
        return expr

    def _starts_condition(self) -> bool:
        t = self.tok
        if t.kind is Tok.EOF:
            return False
        if t.kind is Tok.IDENT:
            return t.value.upper() not in self.clause_order()
        return t.kind in (Tok.NUMBER, Tok.STRING) or self.is_op("[", "(", "-")


def parse(text: str) -> ast.Query:
    """Parse a CEM query.

    Example:
        >>> from kleene.lang import to_text
        >>> print(to_text(parse("PATTERN Conjunction WITH A, B WHERE [symbol] WITHIN 2 hours")))
        PATTERN AND(A A, B B)
        WHERE [symbol]
        WITHIN 2 hours
    """
    return renumbered(CemParser(text).parse_query())


__all__ = ["CemParser", "parse"]
