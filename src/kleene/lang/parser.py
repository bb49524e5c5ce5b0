"""Recursive-descent parser for the canonical language (docs/language.md holds the EBNF).

Clauses are dispatched from a table (:data:`CLAUSES`) in their required order; patterns use
precedence climbing over the infix operators ``|`` (loosest), ``;`` and ``&`` (tightest);
expressions use precedence climbing over ``OR < AND < NOT < comparison < + - < * / % < unary``.
Dialect parsers (``kleene.lang.dialects``) subclass :class:`Parser` and override hooks.

Every node gets a span; every failure is a :class:`~kleene.errors.QuerySyntaxError` that names
what was found and what was expected.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable
from typing import NoReturn

from .. import ast
from ..diagnostics import Span
from ..errors import QuerySyntaxError
from ..syntax import CLAUSE_WORDS, RESERVED
from .functions import BUILTINS
from .lexer import Tok, Token, tokenize
from .walk_ast import split_and

# Units accepted after a number in WITHIN / INTERVAL / PICK ... WITHIN (lower-cased).
UNITS: dict[str, ast.TimeUnit] = {}
for _unit, _words in (
    (ast.TimeUnit.MILLISECONDS, ("ms", "msec", "msecs", "millisecond", "milliseconds")),
    (ast.TimeUnit.SECONDS, ("s", "sec", "secs", "second", "seconds")),
    (ast.TimeUnit.MINUTES, ("m", "min", "mins", "minute", "minutes")),
    (ast.TimeUnit.HOURS, ("h", "hr", "hrs", "hour", "hours")),
    (ast.TimeUnit.DAYS, ("d", "day", "days")),
    (ast.TimeUnit.EVENTS, ("event", "events", "unit", "units")),
):
    for _w in _words:
        UNITS[_w] = _unit

#: Clause keywords in their required order.
CLAUSE_ORDER = (*CLAUSE_WORDS[:CLAUSE_WORDS.index("EMIT") + 1], "AFTER",
                *CLAUSE_WORDS[CLAUSE_WORDS.index("EMIT") + 1:])
"""Clause keywords in required order (``AFTER MATCH SKIP`` is not reserved: a variable may
still be named ``after``)."""

_COMPARISONS = ("=", "==", "!=", "<>", "<", "<=", ">", ">=")

#: Brackets, NOT/!/- chains nest at most this deep (keeps the recursive parser off Python's
#: recursion limit; no real query comes close).
MAX_NESTING = 64
#: Deepest AST accepted (long AND chains are left-deep trees; the printer and the semantic
#: passes recurse over them).
MAX_DEPTH = 250
#: Longest integer literal (Python refuses to convert more than 4,300 digits by default).
MAX_DIGITS = 4_000
#: AND/OR chains up to this many operands are left-deep trees; longer ones are balanced, so
#: their depth grows with the logarithm of their length (see ``_chain``).
MAX_LEFT_DEEP_CHAIN = 64
_COMPOSITES = ("SEQ", "AND", "OR", "ANY", "NOT")


def parse_window_amount(raw: str) -> int | float:
    """``"5"`` -> 5, ``"1.5"`` -> 1.5 (ints stay ints so they print without ``.0``)."""
    value = float(raw)
    return int(value) if value.is_integer() and "." not in raw and "e" not in raw.lower() \
        else value


class Parser:
    """Parses one query. Subclasses (dialects) override the ``parse_*`` hooks.

    Attributes:
        strategy_in_where: accept a strategy name as a WHERE conjunct (SASE style) and lift it
            into the query's strategy.
        implicit_pattern: a text that starts with a composite pattern (``SEQ(...``, ``(``)
            is a query whose PATTERN keyword was left out, as papers print patterns.
    """

    dialect = "canonical"
    strategy_in_where = False
    implicit_pattern = False

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0
        self.depth = 0
        self.lifted_strategy: ast.Strategy | None = None
        self.limit: int | None = None
        self.nesting = 0

    # ---------------------------------------------------------------- token helpers
    def _at(self, i: int) -> Token:
        t = self.tokens[min(i, len(self.tokens) - 1)]
        if self.limit is not None and t.kind is not Tok.EOF and i >= self.limit:
            # Bounded parsing (SNOOP: one constraint per line) sees the bound as the end.
            return Token(Tok.EOF, "", Span.at(self.text, t.span.start, t.span.start))
        return t

    @property
    def tok(self) -> Token:
        """The current token."""
        return self._at(self.pos)

    def peek(self, k: int = 1) -> Token:
        """The token ``k`` positions ahead (EOF past the end)."""
        return self._at(self.pos + k)

    def advance(self) -> Token:
        """Consume and return the current token."""
        t = self.tok
        if t.kind is not Tok.EOF:
            self.pos += 1
        return t

    def at_end(self) -> bool:
        """True at the end of the text (or of the bounded region)."""
        return self.tok.kind is Tok.EOF

    @property
    def prev(self) -> Token:
        """The last consumed token."""
        return self.tokens[max(self.pos - 1, 0)]

    def span_from(self, start: Token | Span) -> Span:
        """Span from ``start`` to the end of the last consumed token."""
        s = start.span if isinstance(start, Token) else start
        end = max(self.prev.span.end, s.start)
        return Span.at(self.text, s.start, end)

    def is_kw(self, *words: str, tok: Token | None = None) -> bool:
        """True if the token is an identifier equal (case-insensitively) to one of ``words``."""
        t = tok or self.tok
        return t.kind is Tok.IDENT and t.value.upper() in words

    def is_op(self, *ops: str, tok: Token | None = None) -> bool:
        """True if the token is one of the operators ``ops``."""
        t = tok or self.tok
        return t.kind is Tok.OP and t.value in ops

    def accept_kw(self, *words: str) -> Token | None:
        """Consume the token if it is one of the keywords."""
        return self.advance() if self.is_kw(*words) else None

    def accept_op(self, *ops: str) -> Token | None:
        """Consume the token if it is one of the operators."""
        return self.advance() if self.is_op(*ops) else None

    def expect_kw(self, *words: str) -> Token:
        """Consume one of the keywords or fail."""
        if self.is_kw(*words):
            return self.advance()
        self.fail(expected=tuple(words))

    def expect_op(self, *ops: str) -> Token:
        """Consume one of the operators or fail."""
        if self.is_op(*ops):
            return self.advance()
        self.fail(expected=tuple(f"'{o}'" for o in ops))

    def fail(self, message: str | None = None, *, expected: tuple[str, ...] = (),
             tok: Token | None = None, span: Span | None = None) -> NoReturn:
        """Raise a :class:`QuerySyntaxError` at ``tok`` (default: the current token)."""
        t = tok or self.tok
        msg = message or f"unexpected {t.describe()}"
        raise QuerySyntaxError(msg, source=self.text, span=span or t.span, expected=expected)

    def nest(self) -> None:
        """Enter one level of nesting; fail cleanly when a query nests absurdly deep."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            self.fail(f"the query nests more than {MAX_NESTING} levels deep; simplify it")

    # ---------------------------------------------------------------- query
    def parse_query(self) -> ast.Query:
        """Parse a whole query and check that nothing follows it."""
        start = self.tok
        fields: dict[str, object] = {}
        seen: list[str] = []
        if self.implicit_pattern and self._starts_bare_pattern():
            # A query that is only a pattern, as papers print them: "SEQ(A a, !B b, C c)".
            fields["pattern"] = self.parse_pattern()
            seen.append("PATTERN")
        while self.tok.kind is not Tok.EOF:
            word = self.tok.value.upper() if self.tok.kind is Tok.IDENT else ""
            handler = self.clauses().get(word)
            if handler is None:
                expected = tuple(c for c in self.clause_order() if c not in seen
                                 and self._after(c, seen))
                self.fail(f"unexpected {self.tok.describe()}",
                          expected=expected or ("end of query",))
            if word in seen:
                self.fail(f"duplicate {word} clause; each clause may appear once")
            later = [c for c in seen if self._rank(c) > self._rank(word)]
            if later:
                self.fail(f"the {word} clause must come before {later[0]}; clauses go in the "
                          f"order {' '.join(self.clause_order())}")
            seen.append(word)
            handler(fields)
        if "pattern" not in fields:
            self.fail("a query needs a PATTERN clause", expected=("PATTERN",),
                      tok=start if start.kind is not Tok.EOF else None)
        if self.lifted_strategy is not None:
            if fields.get("strategy") is not None:
                self.fail("the selection strategy is given twice (in WHERE and in USING)")
            fields["strategy"] = self.lifted_strategy
        query = ast.Query(span=self.span_from(start), source=self.text, **fields)  # type: ignore[arg-type]
        check_depth(query, self.text)
        return query

    def _starts_bare_pattern(self) -> bool:
        if self.is_op("(", "!"):
            return True
        return self.is_kw(*_COMPOSITES) and self.is_op("(", tok=self.peek())

    def clause_order(self) -> tuple[str, ...]:
        """Clause keywords in required order."""
        return CLAUSE_ORDER

    def _rank(self, word: str) -> int:
        order = self.clause_order()
        return order.index(word) if word in order else len(order)

    def _after(self, clause: str, seen: list[str]) -> bool:
        return all(self._rank(s) < self._rank(clause) for s in seen)

    def clauses(self) -> dict[str, Callable[[dict[str, object]], None]]:
        """Clause keyword -> handler that stores parsed fields (table-driven dispatch)."""
        return {
            "NAME": self.clause_name,
            "PATTERN": self.clause_pattern,
            "WHERE": self.clause_where,
            "PARTITION": self.clause_partition,
            "WITHIN": self.clause_within,
            "USING": self.clause_using,
            "PICK": self.clause_pick,
            "CONSUME": self.clause_consume,
            "EMIT": self.clause_emit,
            "AFTER": self.clause_after,
            "RETURN": self.clause_return,
        }

    def clause_name(self, f: dict[str, object]) -> None:
        """``NAME name``."""
        self.advance()
        if self.tok.kind in (Tok.IDENT, Tok.STRING):
            f["name"] = self.advance().value
        else:
            self.fail(expected=("a query name",))

    def clause_pattern(self, f: dict[str, object]) -> None:
        """``PATTERN pattern``."""
        self.advance()
        f["pattern"] = self.parse_pattern()

    def clause_where(self, f: dict[str, object]) -> None:
        """``WHERE condition``."""
        self.advance()
        f["where"] = self.parse_where()

    def clause_partition(self, f: dict[str, object]) -> None:
        """``PARTITION BY attr, ...``."""
        self.advance()
        self.expect_kw("BY")
        attrs = [self.parse_name("an attribute name")]
        while self.accept_op(","):
            attrs.append(self.parse_name("an attribute name"))
        f["partition_by"] = tuple(attrs)

    def clause_within(self, f: dict[str, object]) -> None:
        """``WITHIN n unit`` / ``WITHIN n EVENTS``."""
        self.advance()
        f["within"] = self.parse_window_body(self.prev)

    def clause_using(self, f: dict[str, object]) -> None:
        """``USING strategy``."""
        self.advance()
        if self.lifted_strategy is not None:
            self.fail("the selection strategy is given twice (in WHERE and in USING); keep one")
        f["strategy"] = self.parse_strategy()

    def clause_pick(self, f: dict[str, object]) -> None:
        """``PICK FIRST|LAST|EACH var [WITHIN d FROM var], ...``."""
        self.advance()
        picks = [self.parse_pick()]
        while self.accept_op(","):
            picks.append(self.parse_pick())
        f["picks"] = tuple(picks)

    def clause_consume(self, f: dict[str, object]) -> None:
        """``CONSUME var, ...`` / ``CONSUME ALL``."""
        start = self.advance()
        f["consume"] = self.parse_consume_body(start)

    def clause_emit(self, f: dict[str, object]) -> None:
        """``EMIT ALL|RECENT|COVERAGE [TIMEOUTS]``, ``EMIT TIMEOUTS`` or
        ``EMIT ROWS [EXCLUDE v, ...]``."""
        self.advance()
        if self.accept_kw("ROWS"):
            excluded: list[str] = []
            if self.accept_kw("EXCLUDE"):
                excluded.append(self.parse_var_name())
                while self.accept_op(","):
                    excluded.append(self.parse_var_name())
            f["rows"] = tuple(excluded)
            return
        if self.accept_kw("TIMEOUTS"):
            f["timeouts"] = True
            return
        t = self.expect_kw("ALL", "RECENT", "COVERAGE")
        f["emit"] = ast.Emit(t.value.lower())
        if self.accept_kw("TIMEOUTS"):
            f["timeouts"] = True

    def clause_after(self, f: dict[str, object]) -> None:
        """``AFTER MATCH SKIP TO NEXT ROW | PAST LAST ROW | TO FIRST v | TO LAST v``."""
        start = self.advance()
        self.expect_kw("MATCH")
        self.expect_kw("SKIP")
        var: str | None = None
        if self.accept_kw("PAST"):
            self.expect_kw("LAST")
            self.expect_kw("ROW")
            mode = ast.SkipMode.PAST_LAST_ROW
        else:
            self.expect_kw("TO")
            t = self.expect_kw("NEXT", "FIRST", "LAST")
            word = t.value.upper()
            if word == "NEXT":
                self.expect_kw("ROW")
                mode = ast.SkipMode.TO_NEXT_ROW
            else:
                mode = ast.SkipMode.TO_FIRST if word == "FIRST" else ast.SkipMode.TO_LAST
                var = self.parse_var_name()
        f["after_match"] = ast.AfterMatch(mode, var, span=self.span_from(start))

    def clause_return(self, f: dict[str, object]) -> None:
        """``RETURN item, ... [AS TYPE Name]`` or ``RETURN * [AS TYPE Name]``."""
        self.advance()
        items: list[ast.ReturnItem] = []
        rtype: str | None = None
        if self.accept_op("*"):
            pass
        elif not self._at_return_type():
            items.append(self.parse_return_item())
            while self.accept_op(","):
                items.append(self.parse_return_item())
        if self.is_kw("AS"):
            self.advance()
            self.accept_kw("TYPE")
            rtype = self.parse_name("an output type name")
        f["returns"] = tuple(items)
        f["return_type"] = rtype

    def _at_return_type(self) -> bool:
        return self.is_kw("AS") and self.is_kw("TYPE", tok=self.peek()) \
            and self.peek(2).kind in (Tok.IDENT, Tok.STRING)

    def parse_return_item(self) -> ast.ReturnItem:
        """``expr [AS alias]``."""
        start = self.tok
        expr = self.parse_expr()
        alias = None
        if self.is_kw("AS") and not self._at_return_type():
            self.advance()
            alias = self.parse_name("an alias")
        return ast.ReturnItem(expr, alias, span=self.span_from(start))

    def parse_consume_body(self, start: Token) -> ast.Consume:
        """After CONSUME: ``ALL`` or a list of variables."""
        if self.accept_kw("ALL"):
            return ast.Consume((), True, span=self.span_from(start))
        names = [self.parse_var_name()]
        while self.accept_op(","):
            names.append(self.parse_var_name())
        return ast.Consume(tuple(names), span=self.span_from(start))

    def parse_pick(self) -> ast.Pick:
        """``FIRST|LAST|EACH var [WITHIN d FROM var]``."""
        start = self.tok
        mode_tok = self.expect_kw("FIRST", "LAST", "EACH")
        mode = ast.PickMode(mode_tok.value.lower())
        var = self.parse_var_name()
        within = None
        from_var = None
        if self.is_kw("WITHIN") and self._pick_within_follows():
            w = self.advance()
            within = self.parse_window_body(w)
            self.expect_kw("FROM")
            from_var = self.parse_var_name()
        return ast.Pick(mode, var, within, from_var, span=self.span_from(start))

    def _pick_within_follows(self) -> bool:
        # "PICK last E1 within 5 seconds from E2" vs. a query-level WITHIN that follows PICK.
        for k in range(1, 4):
            if self.is_kw("FROM", tok=self.peek(k)):
                return True
        return False

    def parse_strategy(self) -> ast.Strategy:
        """One of the four strategy names."""
        if self.tok.kind is Tok.STRATEGY:
            return ast.Strategy(self.advance().value)
        start = self.tok.span.start
        end = start
        while end < len(self.text) and (self.text[end].isalnum() or self.text[end] in "-_"):
            end += 1
        word = self.text[start:end]
        expected = tuple(s.value for s in ast.Strategy)
        if word:
            self.fail(f"unknown selection strategy '{word}'", expected=expected,
                      span=Span.at(self.text, start, end))
        self.fail(expected=expected)

    def parse_name(self, what: str) -> str:
        """An identifier (any word, keywords included) or a quoted name."""
        if self.tok.kind in (Tok.IDENT, Tok.STRING):
            return self.advance().value
        self.fail(expected=(what,))

    def parse_var_name(self) -> str:
        """A variable name: an identifier that is not a reserved word."""
        if self.tok.kind is Tok.IDENT and self.tok.value.upper() not in RESERVED:
            return self.advance().value
        if self.tok.kind is Tok.IDENT:
            self.fail(f"'{self.tok.value}' is a reserved word and cannot name a variable",
                      expected=("a variable name",))
        self.fail(expected=("a variable name",))

    # ---------------------------------------------------------------- windows
    def parse_window_body(self, start: Token) -> ast.Window:
        """``<number> <unit>`` after WITHIN."""
        if self.tok.kind is not Tok.NUMBER:
            self.fail(expected=("a number (e.g. WITHIN 5 seconds or WITHIN 10 EVENTS)",))
        t = self.advance()
        amount = parse_window_amount(t.value)
        if not math.isfinite(amount):
            self.fail(f"window length {t.value} is too large", tok=t)
        unit = self.parse_unit()
        return ast.Window(amount, unit, span=self.span_from(start))

    def parse_unit(self) -> ast.TimeUnit:
        """A time unit word, or EVENTS/UNITS for count windows."""
        if self.tok.kind is Tok.IDENT and self.tok.value.lower() in UNITS:
            return UNITS[self.advance().value.lower()]
        self.fail(expected=("a time unit (ms, seconds, minutes, hours, days) or EVENTS",))

    # ---------------------------------------------------------------- patterns
    def parse_pattern(self) -> ast.Pattern:
        """A pattern; inside brackets a trailing ``WITHIN`` windows the whole sub-pattern."""
        start = self.tok
        self.nest()
        p = self.parse_or_pattern()
        self.nesting -= 1
        while self.depth > 0 and self.is_kw("WITHIN"):
            w = self.advance()
            window = self.parse_window_body(w)
            p = ast.Within(p, window, span=self.span_from(start))
        return p

    def parse_or_pattern(self) -> ast.Pattern:
        """``p | q | ...`` (loosest)."""
        start = self.tok
        items = [self.parse_seq_pattern()]
        while self.accept_op("|"):
            items.append(self.parse_seq_pattern())
        return items[0] if len(items) == 1 else ast.Or(tuple(items), span=self.span_from(start))

    def parse_seq_pattern(self) -> ast.Pattern:
        """``p ; q ; ...``."""
        start = self.tok
        items = [self.parse_and_pattern()]
        while self.accept_op(";"):
            items.append(self.parse_and_pattern())
        return items[0] if len(items) == 1 else ast.Seq(tuple(items), span=self.span_from(start))

    def parse_and_pattern(self) -> ast.Pattern:
        """``p & q & ...`` (tightest infix)."""
        start = self.tok
        items = [self.parse_unary_pattern()]
        while self.accept_op("&"):
            items.append(self.parse_unary_pattern())
        return items[0] if len(items) == 1 else ast.And(tuple(items), span=self.span_from(start))

    def parse_unary_pattern(self) -> ast.Pattern:
        """``!p`` / ``NOT p`` / a postfix pattern."""
        start = self.tok
        if self.accept_op("!") or (self.is_kw("NOT") and self.accept_kw("NOT")):
            self.nest()
            body = self.parse_unary_pattern()
            self.nesting -= 1
            return ast.Not(body, span=self.span_from(start))
        return self.parse_postfix_pattern()

    def parse_postfix_pattern(self) -> ast.Pattern:
        """A primary pattern followed by an optional quantifier."""
        start = self.tok
        if self.is_op("("):
            self.advance()
            self.depth += 1
            inner = self.parse_pattern()
            self.depth -= 1
            self.expect_op(")")
            return self.parse_group_quantifier(inner, start)
        if self.is_kw(*_COMPOSITES) and self.is_op("(", tok=self.peek()):
            node = self.parse_composite()
            return self.parse_group_quantifier(node, start)
        return self.parse_event()

    def parse_group_quantifier(self, node: ast.Pattern, start: Token) -> ast.Pattern:
        """``(p)+``, ``(p)*``, ``(p){n}``, ``(p){n,m}``."""
        q = self.parse_quantifier()
        if q is None:
            return node
        reluctant = self.accept_op("?") is not None
        return ast.Kleene(node, q[0], q[1], span=self.span_from(start), reluctant=reluctant)

    def parse_quantifier(self) -> tuple[int, int | None] | None:
        """``+`` / ``*`` / ``{n}`` / ``{n,}`` / ``{n,m}`` or None."""
        if self.accept_op("+"):
            return (1, None)
        if self.accept_op("*"):
            return (0, None)
        if self.is_op("{"):
            self.advance()
            lo = self.parse_int("a repetition count")
            hi: int | None = lo
            if self.accept_op(","):
                hi = None if self.is_op("}") else self.parse_int("a maximum repetition count")
            self.expect_op("}")
            return (lo, hi)
        return None

    def parse_int(self, what: str) -> int:
        """A non-negative integer literal."""
        t = self.tok
        if t.kind is Tok.NUMBER and t.value.isdigit():
            self.advance()
            return self.int_of(t)
        self.fail(expected=(what,))

    def int_of(self, t: Token) -> int:
        """An integer token's value; a number longer than Python converts is a query error."""
        if len(t.value) > MAX_DIGITS:
            self.fail(f"number has {len(t.value):,} digits; at most {MAX_DIGITS:,} are "
                      "supported", tok=t)
        return int(t.value)

    def parse_composite(self) -> ast.Pattern:
        """``SEQ(...)``, ``AND(...)``, ``OR(...)``, ``ANY(k, ...)``, ``NOT(p)``."""
        start = self.advance()
        word = start.value.upper()
        self.expect_op("(")
        self.depth += 1
        k = None
        if word == "ANY":
            k = self.parse_int("the number k of branches in ANY(k, ...)")
            self.expect_op(",")
        items = [self.parse_pattern()]
        while self.accept_op(","):
            items.append(self.parse_pattern())
        self.depth -= 1
        self.expect_op(")")
        span = self.span_from(start)
        if word == "NOT":
            if len(items) != 1:
                self.fail("NOT takes exactly one pattern", span=span)
            return ast.Not(items[0], span=span)
        if word == "SEQ":
            return ast.Seq(tuple(items), span=span)
        if word == "AND":
            return ast.And(tuple(items), span=span)
        if word == "OR":
            return ast.Or(tuple(items), span=span)
        assert k is not None
        return ast.AnyOf(k, tuple(items), span=span)

    def parse_event_type(self) -> str | None:
        """An event type: identifier, number, quoted string; ``ANY`` means any type."""
        t = self.tok
        if t.kind is Tok.IDENT:
            up = t.value.upper()
            if up == "ANY":
                self.advance()
                return None
            if up in RESERVED:
                self.fail(f"'{t.value}' is a reserved word; quote it to use it as an event type",
                          expected=("an event type",))
            return self.advance().value
        if t.kind is Tok.NUMBER and t.value.isdigit():
            return self.advance().value
        if t.kind is Tok.STRING:
            return self.advance().value
        self.fail(expected=("an event type", "'('", "SEQ(", "AND(", "OR(", "ANY(", "NOT(", "'!'"))

    def parse_event(self) -> ast.Pattern:
        """``Type var``, ``Type+ var[]``, ``Type* var[]``, ``Type{n,m} var[]``."""
        start = self.tok
        etype = self.parse_event_type()
        q = self.parse_quantifier()
        reluctant = q is not None and self.accept_op("?") is not None
        var_tok = self.tok
        shown = "ANY" if etype is None else etype
        if var_tok.kind is Tok.IDENT and var_tok.value.upper() in RESERVED \
                and not self.is_kw(*CLAUSE_ORDER):
            self.fail(f"'{var_tok.value}' is a reserved word and cannot name a variable; "
                      f"write e.g. '{shown} x'", expected=("a variable name",))
        if var_tok.kind is not Tok.IDENT or var_tok.value.upper() in RESERVED:
            self.fail(f"event type '{shown}' needs a variable name (write e.g. '{shown} x')",
                      expected=("a variable name",))
        var = self.advance().value
        if self.is_op("[") and self.is_op("]", tok=self.peek()):
            self.advance()
            self.advance()
        ev = ast.EventPattern(etype, var, span=self.span_from(start))
        if q is None:
            return ev
        return ast.Kleene(ev, q[0], q[1], span=self.span_from(start), reluctant=reluctant)

    # ---------------------------------------------------------------- expressions
    def parse_where(self) -> ast.Expr | None:
        """The WHERE condition (dialects may lift non-expression parts out of it)."""
        if self.strategy_in_where:
            return self.parse_where_with_strategy()
        return self.parse_expr()

    def parse_where_with_strategy(self) -> ast.Expr | None:
        """SASE: ``WHERE skip-till-any-match AND [symbol] AND ...``: a strategy name may be a
        top-level conjunct; it is lifted into the query's strategy."""
        expr = self.parse_expr()
        if not any(_is_strategy_marker(e) for e in _sub_exprs(expr)):
            return expr
        kept = [c for c in split_and(expr) if not _is_strategy_marker(c)]
        for e in _sub_exprs(expr):
            if _is_strategy_marker(e) and not any(e is c for c in split_and(expr)):
                self.fail("a selection strategy in WHERE must be a condition of its own, "
                          "joined with AND (e.g. WHERE skip-till-next-match AND a.x > 1)",
                          span=e.span)
        if not kept:
            return None
        result = kept[0]
        for c in kept[1:]:
            result = ast.Binary("and", result, c, span=result.span.merge(c.span)
                                if result.span is not None else None)
        return result

    def parse_strategy_operand(self) -> ast.Expr:
        """A strategy name where an operand is expected (SASE WHERE); see above."""
        t = self.tok
        strategy = self.parse_strategy()
        if self.lifted_strategy is not None:
            self.fail("the selection strategy is given twice", tok=t)
        self.lifted_strategy = strategy
        return ast.Literal(strategy.value, _STRATEGY_KIND, span=t.span)

    def parse_expr(self) -> ast.Expr:
        """A full condition/expression."""
        self.nest()
        try:
            return self.parse_or()
        finally:
            self.nesting -= 1

    def parse_or(self) -> ast.Expr:
        """``a OR b``."""
        start = self.tok
        items = [self.parse_and()]
        spans: list[Span] = []
        while self.accept_kw("OR"):
            items.append(self.parse_and())
            spans.append(self.span_from(start))
        return _chain("or", items, spans)

    def parse_and(self) -> ast.Expr:
        """``a AND b``."""
        start = self.tok
        items = [self.parse_not()]
        spans: list[Span] = []
        while self.accept_kw("AND"):
            items.append(self.parse_not())
            spans.append(self.span_from(start))
        return _chain("and", items, spans)

    def parse_not(self) -> ast.Expr:
        """``NOT a``."""
        start = self.tok
        if self.accept_kw("NOT"):
            self.nest()
            operand = self.parse_not()
            self.nesting -= 1
            return ast.Unary("not", operand, span=self.span_from(start))
        return self.parse_predicate()

    def parse_predicate(self) -> ast.Expr:
        """Comparisons (chains desugar to AND), BETWEEN, IN, LIKE, IS NULL."""
        start = self.tok
        left = self.parse_additive()
        negated = False
        if self.is_kw("NOT") and self.is_kw("BETWEEN", "IN", "LIKE", tok=self.peek()):
            self.advance()
            negated = True
        if self.accept_kw("BETWEEN"):
            low = self.parse_additive()
            self.expect_kw("AND")
            high = self.parse_additive()
            return ast.Between(left, low, high, negated, span=self.span_from(start))
        if self.accept_kw("IN"):
            self.expect_op("(")
            items = [self.parse_expr()]
            while self.accept_op(","):
                items.append(self.parse_expr())
            self.expect_op(")")
            return ast.InList(left, tuple(items), negated, span=self.span_from(start))
        if self.accept_kw("LIKE"):
            pat = self.parse_additive()
            return ast.Like(left, pat, negated, span=self.span_from(start))
        if self.accept_kw("IS"):
            neg = bool(self.accept_kw("NOT"))
            self.expect_kw("NULL")
            return ast.IsNull(left, neg, span=self.span_from(start))
        comparisons: list[ast.Expr] = []
        while self.is_op(*_COMPARISONS):
            op = self.advance().value
            op = {"==": "=", "<>": "!="}.get(op, op)
            right = self.parse_additive()
            comparisons.append(ast.Binary(op, left, right, span=self.span_from(
                comparisons[-1].span if comparisons and comparisons[-1].span else start)))
            left = right
        if not comparisons:
            return left
        result = comparisons[0]
        for c in comparisons[1:]:
            result = ast.Binary("and", result, c, span=self.span_from(start))
        return result

    def parse_additive(self) -> ast.Expr:
        """``a + b``, ``a - b``."""
        start = self.tok
        left = self.parse_multiplicative()
        while self.is_op("+", "-"):
            op = self.advance().value
            right = self.parse_multiplicative()
            left = ast.Binary(op, left, right, span=self.span_from(start))
        return left

    def parse_multiplicative(self) -> ast.Expr:
        """``a * b``, ``a / b``, ``a % b``."""
        start = self.tok
        left = self.parse_unary()
        while self.is_op("*", "/", "%"):
            op = self.advance().value
            right = self.parse_unary()
            left = ast.Binary(op, left, right, span=self.span_from(start))
        return left

    def parse_unary(self) -> ast.Expr:
        """``-x`` (a minus before a number literal folds into the literal), ``+x``."""
        start = self.tok
        if self.is_op("-"):
            self.advance()
            if self.tok.kind is Tok.NUMBER:
                lit = self.number_literal(self.advance())
                assert isinstance(lit.value, (int, float))
                return ast.Literal(-lit.value, span=self.span_from(start))
            self.nest()
            operand = self.parse_unary()
            self.nesting -= 1
            return ast.Unary("-", operand, span=self.span_from(start))
        if self.accept_op("+"):
            self.nest()
            operand = self.parse_unary()
            self.nesting -= 1
            return operand
        return self.parse_primary()

    def number_literal(self, t: Token) -> ast.Literal:
        """A NUMBER token as an int or float literal."""
        raw = t.value
        value: int | float
        if raw.isdigit():
            value = self.int_of(t)
        else:
            value = float(raw)
            if not math.isfinite(value):
                self.fail(f"number {raw} is too large", tok=t)
        return ast.Literal(value, span=t.span)

    def parse_primary(self) -> ast.Expr:
        """Literals, references, calls, ``(expr)``, ``[attr, ...]``."""
        start = self.tok
        t = self.tok
        if t.kind is Tok.NUMBER:
            self.advance()
            return self.number_literal(t)
        if t.kind is Tok.STRING:
            self.advance()
            return ast.Literal(t.value, span=t.span)
        if self.is_op("("):
            self.advance()
            inner = self.parse_expr()
            self.expect_op(")")
            return inner
        if self.is_op("["):
            return self.parse_equivalence()
        if t.kind is Tok.STRATEGY and self.strategy_in_where:
            return self.parse_strategy_operand()
        if t.kind is not Tok.IDENT:
            self.fail(expected=("an expression",))
        up = t.value.upper()
        if up in ("TRUE", "FALSE"):
            self.advance()
            return ast.Literal(up == "TRUE", span=t.span)
        if up == "NULL":
            self.advance()
            return ast.Literal(None, span=t.span)
        if up == "TIMESTAMP" and self.peek().kind is Tok.STRING:
            self.advance()
            return self.parse_timestamp(start)
        if up == "INTERVAL" and (self.peek().kind in (Tok.NUMBER, Tok.STRING)
                                 or self.is_op("-", tok=self.peek())):
            self.advance()
            return self.parse_interval(start)
        if up in RESERVED:
            self.fail(f"unexpected keyword '{t.value}'", expected=("an expression",))
        self.advance()
        if self.is_op("("):
            return self.parse_call(t)
        if self.is_op("["):
            index = self.parse_index()
            self.expect_op(".")
            attr = self.parse_attr_name()
            return ast.AttrRef(t.value, attr, index, span=self.span_from(start))
        if self.accept_op("."):
            attr = self.parse_attr_name()
            return ast.AttrRef(t.value, attr, span=self.span_from(start))
        return ast.VarRef(t.value, span=t.span)

    def parse_attr_name(self) -> str:
        """The attribute after ``.``: any word, or a quoted name."""
        if self.tok.kind in (Tok.IDENT, Tok.STRING):
            return self.advance().value
        self.fail(expected=("an attribute name",))

    def parse_call(self, name_tok: Token) -> ast.Expr:
        """``f(args)``; ``first(v).x`` / ``last(v).x`` become indexed attribute references."""
        start = name_tok
        self.expect_op("(")
        lname = name_tok.value.lower()
        if (lname in ("first", "last") and self.tok.kind is Tok.IDENT
                and self.is_op(")", tok=self.peek()) and self.is_op(".", tok=self.peek(2))):
            var = self.advance()
            self.advance()
            self.advance()
            attr = self.parse_attr_name()
            kind = ast.IndexKind.FIRST if lname == "first" else ast.IndexKind.LAST
            index = ast.Index(kind, 0, span=self.span_from(var))
            return ast.AttrRef(var.value, attr, index, span=self.span_from(start))
        args: list[ast.Expr] = []
        if not self.is_op(")"):
            args.append(self.parse_expr())
            while self.accept_op(","):
                args.append(self.parse_expr())
        self.expect_op(")")
        return ast.Call(self.call_name(name_tok.value), tuple(args), span=self.span_from(start))

    def call_name(self, name: str) -> str:
        """Built-ins and aggregates are lower-cased; UDF names are kept as written."""
        return name.lower() if name.lower() in BUILTINS else name

    def parse_index(self) -> ast.Index:
        """``[i]``, ``[i-1]``, ``[n]``, ``[last]``, ``[last-1]``, ``[first]``, ``[..i]``."""
        start = self.expect_op("[")
        t = self.tok
        if t.kind is Tok.NUMBER and t.value.isdigit():
            self.advance()
            n = self.int_of(t)
            if n < 1:
                self.fail("Kleene indexes are 1-based; use v[1] for the first element", tok=t)
            index = ast.Index(ast.IndexKind.ABSOLUTE, n, span=None)
        elif self.is_op(".") and self.is_op(".", tok=self.peek()):
            self.advance()
            self.advance()
            if not self.is_kw("I"):
                self.fail(expected=("i (v[..i]: the elements up to the current one)",))
            self.advance()
            index = ast.Index(ast.IndexKind.UPTO, 0, span=None)
        elif self.is_kw("I", "LAST", "FIRST"):
            word = self.advance().value.upper()
            kind = {"I": ast.IndexKind.CURRENT, "LAST": ast.IndexKind.LAST,
                    "FIRST": ast.IndexKind.FIRST}[word]
            offset = 0
            if kind is not ast.IndexKind.FIRST and self.is_op("-"):
                self.advance()
                offset = -self.parse_int("an offset (e.g. i-1)")
            index = ast.Index(kind, offset, span=None)
        else:
            self.fail(expected=("i", "i-1", "a position (1, 2, ...)", "last", "last-1",
                                "..i"))
        self.expect_op("]")
        return ast.Index(index.kind, index.offset, span=self.span_from(start))

    def parse_equivalence(self) -> ast.Expr:
        """SASE ``[attr, ...]``: every bound event shares the attributes."""
        start = self.expect_op("[")
        attrs = [self.parse_name("an attribute name")]
        while self.accept_op(","):
            attrs.append(self.parse_name("an attribute name"))
        self.expect_op("]")
        return ast.Equivalence(tuple(attrs), span=self.span_from(start))

    def parse_timestamp(self, start: Token) -> ast.Literal:
        """``TIMESTAMP '2024-01-01 12:00:00'`` (UTC unless an offset is given)."""
        t = self.advance()
        try:
            dt = _dt.datetime.fromisoformat(t.value.replace("Z", "+00:00"))
        except ValueError:
            self.fail(f"invalid timestamp {t.raw}", tok=t,
                      expected=("an ISO timestamp such as '2024-01-31 12:00:00'",))
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=_dt.UTC)
        delta = dt - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
        us = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return ast.Literal(us, "timestamp", span=self.span_from(start))

    def parse_interval(self, start: Token) -> ast.Literal:
        """``INTERVAL 5 seconds`` / ``INTERVAL '5' seconds`` -> microseconds."""
        negative = bool(self.accept_op("-"))
        t = self.advance()
        raw = t.value.strip()
        try:
            amount = float(raw)
        except ValueError:
            self.fail(f"invalid interval amount {t.raw}", tok=t, expected=("a number",))
        if not math.isfinite(amount) or abs(amount) > 1e15:
            self.fail(f"interval amount {t.raw} is out of range", tok=t)
        if negative:
            amount = -amount
        unit = self.parse_unit()
        if unit is ast.TimeUnit.EVENTS:
            self.fail("an INTERVAL needs a time unit, not EVENTS", tok=self.prev)
        return ast.Literal(round(amount * unit.microseconds), "interval",
                           span=self.span_from(start))


_STRATEGY_KIND = "strategy"


def _is_strategy_marker(e: ast.Expr) -> bool:
    return isinstance(e, ast.Literal) and e.kind == _STRATEGY_KIND


def _sub_exprs(e: ast.Expr) -> list[ast.Expr]:
    out: list[ast.Expr] = []
    stack = [e]
    while stack:
        x = stack.pop()
        out.append(x)
        for name in getattr(x, "__dataclass_fields__", {}):
            v = getattr(x, name)
            if isinstance(v, tuple):
                stack.extend(i for i in v if hasattr(i, "__dataclass_fields__"))
            elif hasattr(v, "__dataclass_fields__") and name != "span":
                stack.append(v)
    return out


def _chain(op: str, items: list[ast.Expr], spans: list[Span]) -> ast.Expr:
    """``items[0] op items[1] op ...`` as a tree: left-deep (``spans[k]`` covering items 0..k+1)
    up to :data:`MAX_LEFT_DEEP_CHAIN` items, balanced beyond, so a WHERE of thousands of
    conjuncts is not "nested too deep" (AND and OR are associative; the printer writes the
    balanced tree back as the same flat chain with parentheses that re-parse to it)."""
    if len(items) <= MAX_LEFT_DEEP_CHAIN:
        result = items[0]
        for item, span in zip(items[1:], spans, strict=True):
            result = ast.Binary(op, result, item, span=span)
        return result

    def fold(lo: int, hi: int) -> ast.Expr:
        if hi - lo == 1:
            return items[lo]
        mid = (lo + hi + 1) // 2
        left, right = fold(lo, mid), fold(mid, hi)
        span = left.span.merge(right.span) if left.span is not None else right.span
        return ast.Binary(op, left, right, span=span)

    return fold(0, len(items))


def check_depth(query: ast.Query, text: str = "") -> None:
    """Reject ASTs deeper than :data:`MAX_DEPTH` (measured without recursion)."""
    stack: list[tuple[object, int]] = [(query, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            span = getattr(node, "span", None)
            raise QuerySyntaxError(
                f"the query is nested more than {MAX_DEPTH} levels deep (e.g. a very long "
                "chain of + or -); split it into several queries", source=text, span=span)
        if isinstance(node, tuple):
            stack.extend((x, depth) for x in node)
        elif hasattr(node, "__dataclass_fields__"):
            for name in node.__dataclass_fields__:
                if name not in ("span", "source"):
                    stack.append((getattr(node, name), depth + 1))


def parse_pattern(text: str) -> ast.Pattern:
    """Parse a canonical pattern fragment (spans point into ``text``).

    Example:
        >>> parse_pattern("SEQ(A a, B+ b[])") == ast.Seq((ast.EventPattern("A", "a"),
        ...     ast.Kleene(ast.EventPattern("B", "b"), 1, None)))
        True
    """
    if not isinstance(text, str):
        raise TypeError(f"a pattern must be text, not {type(text).__name__}")
    p = Parser(text)
    p.depth = 1  # a trailing WITHIN windows the fragment, as inside brackets
    node = p.parse_pattern()
    if not p.at_end():
        p.fail(expected=("end of text",))
    return node


def parse_expr(text: str) -> ast.Expr:
    """Parse a canonical condition or expression fragment (spans point into ``text``).

    Example:
        >>> parse_expr("a.x > 1") == ast.Binary(">", ast.AttrRef("a", "x"), ast.Literal(1))
        True
    """
    if not isinstance(text, str):
        raise TypeError(f"an expression must be text, not {type(text).__name__}")
    p = Parser(text)
    node = p.parse_expr()
    if not p.at_end():
        p.fail(expected=("end of text",))
    return node


def parse(text: str) -> ast.Query:
    """Parse canonical query text into a :class:`~kleene.ast.Query`.

    Example:
        >>> parse("PATTERN SEQ(A a, B b) WITHIN 5 seconds").within
        Window(amount=5, unit=<TimeUnit.SECONDS: 'seconds'>)
    """
    return Parser(text).parse_query()


__all__ = ["CLAUSE_ORDER", "MAX_DEPTH", "MAX_NESTING", "RESERVED", "UNITS", "Parser", "check_depth",
           "parse", "parse_expr", "parse_pattern", "parse_window_amount"]
