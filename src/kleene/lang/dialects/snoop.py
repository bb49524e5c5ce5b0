"""Extended SNOOP (the parallel-CEP thesis): SNOOP's ``SELECT * FROM <operator tree>`` with
TESLA's PICK and CONSUMING.

    SELECT *
    FROM ALL(SEQ(E1; E2), E3)
    WHERE
        FILTER
            E1.type = A
            E1.photoData matches E2.photoData
            E3.light = "Red"
    PICK last E1 within 5 seconds from E2
    WITHIN 5 seconds
    RETURN MayCollideEvent
    CONSUMING E1

Operators: ``SEQ(p; q; ...)``, ``ALL(p, ...)`` (conjunction), ``ANY(n, p, ...)``, ``OR(p, ...)``,
``NOT(p)``. Names of the form ``E1``/``E_1`` are variables of any event type; a constraint
``E1.type = A`` gives the variable its type (it moves into the pattern). Any other name is an
event type that doubles as its variable (``SEQ(A; B; C)``).

WHERE holds one constraint per line (``FILTER`` and a trailing ``AND`` are optional; labels such
as ``(Constr.1)`` are skipped). ``x matches y`` calls the UDF ``matches``; ``80%`` is 0.8; a
currency sign before a number is ignored. ``RETURN`` is free text naming the output type,
optionally ending with the variables to return (``RETURN Recent news E1, E2``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ... import ast
from ..lexer import Tok
from ..parser import Parser, check_depth
from ..walk_ast import events, renumbered, replace_events, split_and
from ._text import mask_currency

CLAUSES = ("SELECT", "FROM", "WHERE", "PICK", "WITHIN", "RETURN", "CONSUMING")
_RETURN = re.compile(r"(?<![.\w\"'])RETURN\b(.*?)(?=(?<![.\w])CONSUMING\b|\Z)",
                     re.IGNORECASE | re.DOTALL)
_ANY_TYPE_NAME = re.compile(r"^[Ee]_?[0-9]+$")


def is_any_type_name(name: str) -> bool:
    """``E1``, ``E_2``: SNOOP's event variables, whose type comes from ``E1.type = T``."""
    return bool(_ANY_TYPE_NAME.match(name))


class SnoopParser(Parser):
    """Extended SNOOP grammar."""

    dialect = "snoop"

    def __init__(self, text: str) -> None:
        masked = mask_currency(text)
        self.return_text: str | None = None
        self.return_span: tuple[int, int] | None = None
        m = _RETURN.search(masked)
        if m is not None:
            # RETURN is free text: hide it from the lexer, keep offsets.
            self.return_text = text[m.start(1):m.end(1)]
            self.return_span = (m.start(), m.end())
            masked = masked[:m.start(1)] + " " * (m.end(1) - m.start(1)) + masked[m.end(1):]
        super().__init__(masked)
        self.text = text

    def clause_order(self) -> tuple[str, ...]:
        """SELECT, FROM, WHERE, PICK, WITHIN, RETURN, CONSUMING."""
        return CLAUSES

    def clauses(self) -> dict[str, Callable[[dict[str, object]], None]]:
        """SNOOP's clause table."""
        return {
            "SELECT": self.clause_select,
            "FROM": self.clause_from,
            "WHERE": self.clause_where,
            "PICK": self.clause_pick_lines,
            "WITHIN": self.clause_within,
            "RETURN": self.clause_return_text,
            "CONSUMING": self.clause_consume,
        }

    def parse_query(self) -> ast.Query:
        """A full query, or a bare operator tree such as ``SEQ(A; B; C)``."""
        if not self.is_kw(*CLAUSES):
            start = self.tok
            pattern = self.parse_pattern()
            if self.tok.kind is not Tok.EOF:
                self.fail(expected=("end of query",))
            q = ast.Query(pattern, span=self.span_from(start), source=self.text)
            check_depth(q, self.text)
            return self._bind_types(q)
        q = super().parse_query()
        return self._bind_types(q)

    def clause_select(self, f: dict[str, object]) -> None:
        """``SELECT *`` (the output is described by RETURN)."""
        self.advance()
        self.expect_op("*")

    def clause_from(self, f: dict[str, object]) -> None:
        """``FROM <operator tree>``."""
        self.advance()
        f["pattern"] = self.parse_pattern()

    def clause_pick_lines(self, f: dict[str, object]) -> None:
        """``PICK first|last|each E [within d from F]``, separated by commas or lines."""
        self.advance()
        picks = [self.parse_pick()]
        while self.accept_op(",") or self.is_kw("FIRST", "LAST", "EACH"):
            picks.append(self.parse_pick())
        f["picks"] = tuple(picks)

    def clause_return_text(self, f: dict[str, object]) -> None:
        """Free text naming the output type, optionally followed by variables."""
        self.advance()
        text = " ".join((self.return_text or "").split()).rstrip(".").strip()
        if not text:
            return
        m = re.match(r"^(.*?)\s*((?:[A-Za-z_][A-Za-z0-9_]*\s*,\s*)*[A-Za-z_][A-Za-z0-9_]*)$",
                     text)
        items: list[ast.ReturnItem] = []
        if m is not None and m.group(1):
            names = [n.strip() for n in m.group(2).split(",")]
            if len(names) > 1 or "," in m.group(2) or is_any_type_name(names[0]):
                items = [ast.ReturnItem(ast.VarRef(n)) for n in names]
                text = m.group(1).strip()
        f["returns"] = tuple(items)
        f["return_type"] = text

    # ---------------------------------------------------------------- pattern
    def parse_pattern(self) -> ast.Pattern:
        """An operator application or an event name."""
        self.nest()
        try:
            return self._parse_pattern()
        finally:
            self.nesting -= 1

    def _parse_pattern(self) -> ast.Pattern:
        start = self.tok
        word = self.tok.value.upper() if self.tok.kind is Tok.IDENT else ""
        if word in ("SEQ", "ALL", "OR", "ANY", "NOT") and self.is_op("(", tok=self.peek()):
            self.advance()
            self.advance()
            if word == "NOT":
                body = self.parse_pattern()
                self.expect_op(")")
                return ast.Not(body, span=self.span_from(start))
            k = None
            if word == "ANY":
                k = self.parse_int("the number of events ANY needs")
                self.expect_op(",")
            items = [self.parse_pattern()]
            while self.accept_op(";" if word == "SEQ" else ",", ",", ";"):
                items.append(self.parse_pattern())
            self.expect_op(")")
            span = self.span_from(start)
            if k is not None:
                return ast.AnyOf(k, tuple(items), span=span)
            if word == "SEQ":
                return ast.Seq(tuple(items), span=span)
            if word == "ALL":
                return ast.And(tuple(items), span=span)
            return ast.Or(tuple(items), span=span)
        if self.accept_op("!"):
            body = self.parse_pattern()
            return ast.Not(body, span=self.span_from(start))
        name = self.parse_event_type()
        if name is None:
            self.fail("SNOOP names events; ANY is written ANY(n, ...)", tok=start)
        etype = None if is_any_type_name(name) else name
        return ast.EventPattern(etype, name, span=self.span_from(start))

    # ---------------------------------------------------------------- WHERE
    def parse_where(self) -> ast.Expr | None:
        """``[FILTER]`` then one constraint per line (``AND`` optional)."""
        self.accept_kw("FILTER")
        parts: list[ast.Expr] = []
        start = self.tok
        while self.tok.kind is not Tok.EOF and not self.is_kw(*CLAUSES):
            if self.accept_kw("AND"):
                continue
            self._skip_label()
            end = self._line_end()
            trailing_and = self.is_kw("AND", tok=self.tokens[end - 1]) and end - 1 > self.pos
            self.limit = end - 1 if trailing_and else end
            try:
                parts.append(self.parse_expr())
                if not self.at_end():
                    self.fail("one constraint per line; this line continues after a complete "
                              "constraint", expected=("AND", "end of line"))
            finally:
                self.limit = None
            if trailing_and:
                self.advance()
        if not parts:
            return None
        expr = parts[0]
        for p in parts[1:]:
            expr = ast.Binary("and", expr, p, span=self.span_from(start))
        return expr

    def _line_end(self) -> int:
        line = self.tokens[self.pos].span.line
        i = self.pos
        while self.tokens[i].kind is not Tok.EOF and self.tokens[i].span.line == line:
            i += 1
        return i

    def _skip_label(self) -> None:
        # "(Constr.1)": lexes as ( Constr .1 ) or ( Constr . 1 ).
        t = self.tokens
        i = self.pos
        if not (t[i].kind is Tok.OP and t[i].value == "("):
            return
        j = i + 1
        if t[j].kind is not Tok.IDENT or not t[j].value.lower().startswith("constr"):
            return
        j += 1
        while t[j].kind is Tok.NUMBER or (t[j].kind is Tok.OP and t[j].value == "."):
            j += 1
        if t[j].kind is Tok.OP and t[j].value == ")":
            self.pos = j + 1

    def parse_predicate(self) -> ast.Expr:
        """Adds ``x matches y`` (the UDF ``matches``)."""
        start = self.tok
        if self._matches_ahead():
            left = self.parse_additive()
            word = self.advance()
            right = self.parse_additive()
            return ast.Call(word.value.lower(), (left, right), span=self.span_from(start))
        return super().parse_predicate()

    def _matches_ahead(self) -> bool:
        depth = 0
        i = self.pos
        while True:
            t = self._at(i)
            if t.kind is Tok.EOF:
                return False
            if t.kind is Tok.OP and t.value in "([":
                depth += 1
            elif t.kind is Tok.OP and t.value in ")]":
                if depth == 0:
                    return False
                depth -= 1
            elif depth == 0 and t.kind is Tok.IDENT and t.value.upper() in ("MATCHES", "MATCH"):
                return True
            elif depth == 0 and (t.kind is Tok.IDENT and t.value.upper() in ("AND", "OR")):
                return False
            elif depth == 0 and t.kind is Tok.OP and t.value in ("=", "!=", "<>", "<", ">",
                                                                  "<=", ">=", ","):
                return False
            i += 1

    def parse_multiplicative(self) -> ast.Expr:
        """Adds percentages: ``80%`` is 0.8."""
        start = self.tok
        left = self.parse_unary()
        while self.is_op("*", "/", "%"):
            if self.is_op("%") and self._percent():
                self.advance()
                if isinstance(left, ast.Literal) and isinstance(left.value, (int, float)) \
                        and not isinstance(left.value, bool):
                    left = ast.Literal(left.value / 100, span=self.span_from(start))
                else:
                    left = ast.Binary("/", left, ast.Literal(100), span=self.span_from(start))
                continue
            op = self.advance().value
            right = self.parse_unary()
            left = ast.Binary(op, left, right, span=self.span_from(start))
        return left

    def _percent(self) -> bool:
        nxt = self.peek()
        return nxt.kind is Tok.EOF or (nxt.kind is Tok.OP and nxt.value in (")", ",", "=", "<",
                                                                            ">", "<=", ">=",
                                                                            "!=", "<>")) \
            or self.is_kw("AND", "OR", tok=nxt)

    # ---------------------------------------------------------------- type constraints
    def _bind_types(self, q: ast.Query) -> ast.Query:
        """Move ``E.type = T`` constraints into the pattern."""
        conjuncts = split_and(q.where)
        types: dict[str, str] = {}
        rest: list[ast.Expr] = []
        names = {e.var for e in events(q.pattern) if e.type is None}
        for c in conjuncts:
            bound = _type_constraint(c, names)
            if bound is not None and bound[0] not in types:
                types[bound[0]] = bound[1]
            else:
                rest.append(c)
        if not types:
            return q
        pattern = replace_events(q.pattern, lambda e: ast.EventPattern(
            types.get(e.var, e.type), e.var, span=e.span))
        where: ast.Expr | None = None
        for c in rest:
            where = c if where is None else ast.Binary("and", where, c, span=q.where.span
                                                       if q.where is not None else None)
        return ast.Query(pattern=pattern, name=q.name, where=where, partition_by=q.partition_by,
                         within=q.within, strategy=q.strategy, picks=q.picks,
                         consume=q.consume, emit=q.emit, returns=q.returns,
                         return_type=q.return_type, span=q.span, source=q.source)


def _type_constraint(c: ast.Expr, events: set[str]) -> tuple[str, str] | None:
    if not (isinstance(c, ast.Binary) and c.op == "="):
        return None
    left, right = c.left, c.right
    if isinstance(right, ast.AttrRef):
        left, right = right, left
    if not (isinstance(left, ast.AttrRef) and left.index is None and left.attr.lower() == "type"
            and left.var in events):
        return None
    if isinstance(right, ast.VarRef) and right.var not in events:
        return left.var, right.var
    if isinstance(right, ast.Literal) and isinstance(right.value, str):
        return left.var, right.value
    return None


def parse(text: str) -> ast.Query:
    """Parse Extended SNOOP query text.

    Example:
        >>> from kleene.lang import to_text
        >>> print(to_text(parse("SELECT * FROM SEQ(E1; E2) WHERE E1.type = A\\n E2.type = B")))
        PATTERN SEQ(A E1, B E2)
    """
    return renumbered(SnoopParser(text).parse_query())


__all__ = ["SnoopParser", "is_any_type_name", "parse"]
