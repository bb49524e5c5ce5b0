"""SQL row pattern recognition (``MATCH_RECOGNIZE``, SQL:2016 / Flink / Trino / Oracle),
translated into a canonical kleene query with ``USING strict-contiguity`` and
``AFTER MATCH SKIP`` (docs/semantics.md 19, docs/language.md "match_recognize").

    SELECT * FROM stock MATCH_RECOGNIZE (
      PARTITION BY symbol ORDER BY ts
      MEASURES A.id AS a_id, LAST(B.id) AS b_last
      ONE ROW PER MATCH
      AFTER MATCH SKIP TO NEXT ROW
      PATTERN (A B+ C) WITHIN INTERVAL '10' MINUTE
      DEFINE B AS B.price > PREV(B.price), C AS C.price < A.price
    )

Every pattern variable becomes a kleene variable of any type (a repeated variable gets one
kleene variable per occurrence: ``DOWN``, ``DOWN_2``); quantifiers become Kleene repetitions
(reluctant ones keep their ``?``); ``PERMUTE(A, B)`` becomes the alternation of the
permutations in SQL's order; ``{- -}`` exclusion only changes ALL ROWS PER MATCH output
(``EMIT ROWS EXCLUDE``), so with ONE ROW PER MATCH it is dropped. A DEFINE condition is evaluated on each row its variable
maps (running semantics); the translation writes it as WHERE conjuncts over that row
(``b[i]``), its predecessor (``PREV``: ``b[i-1]`` or the previous variable's last row), its
rows so far (a running aggregate: ``avg(b[..i].x)``) and the rows mapped before it. MEASURES become RETURN items: with ONE ROW PER MATCH evaluated on the
whole match; with ALL ROWS PER MATCH (``EMIT ROWS``) as of each output row (RUNNING), FINAL
ones in ``final(...)``. What cannot be written that way is refused with the construct named.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import field, replace
from typing import NoReturn

from ... import ast
from ...diagnostics import Span
from ...frozen import dataclass
from ..lexer import Tok, Token
from ..parser import Parser

_UNIT_US = {"MILLISECOND": 1_000, "SECOND": 1_000_000, "MINUTE": 60_000_000,
            "HOUR": 3_600_000_000, "DAY": 86_400_000_000}
_AGGREGATES = ("sum", "avg", "min", "max", "count")
_NAV = ("prev", "next", "first", "last")
_CLAUSE_WORDS = ("DEFINE", "WITHIN", "SUBSET", "MEASURES", "PATTERN", "AFTER", "ONE", "ALL",
                 "PARTITION", "ORDER")


# ------------------------------------------------------------------------------ the regex tree
@dataclass(slots=True)
class _Node:
    """A PATTERN clause node as parsed, before it becomes an AST pattern."""

    kind: str  # "var" | "seq" | "alt" | "rep" | "perm" | "excl"
    span: Span
    items: list[_Node] = field(default_factory=list)
    name: str = ""
    lo: int = 1
    hi: int | None = 1
    reluctant: bool = False
    occ: str = ""
    """For a var: its kleene variable (the occurrence's name)."""
    excluded: bool = False
    """For a var: inside ``{- -}`` (its rows are left out of ALL ROWS PER MATCH)."""
    parent: _Node | None = None


@dataclass(slots=True)
class _Measure:
    """One MEASURES item: an expression and its alias."""

    expr: ast.Expr
    alias: str
    span: Span


class MatchRecognizeParser(Parser):
    """``[SELECT ... FROM t] MATCH_RECOGNIZE ( ... )``."""

    dialect = "match_recognize"

    # ------------------------------------------------------------------ expressions
    def parse_primary(self) -> ast.Expr:
        """Adds ``RUNNING`` / ``FINAL``, ``COUNT(*)``, ``V.*`` and bare columns."""
        t = self.tok
        if t.kind is Tok.IDENT:
            up = t.value.upper()
            if up in ("RUNNING", "FINAL") and self.peek().kind is Tok.IDENT \
                    and self.is_op("(", tok=self.peek(2)):
                self.advance()
                inner = self.parse_primary()
                return ast.Call("__" + up.lower(), (inner,), span=self.span_from(t))
            if self.is_op("(", tok=self.peek()) and self.is_op("*", tok=self.peek(2)) \
                    and self.is_op(")", tok=self.peek(3)):
                self.advance()
                self.advance()
                self.advance()
                self.advance()
                return ast.Call(up.lower(), (ast.VarRef("*", span=self.prev.span),),
                                span=self.span_from(t))
            if self.is_op(".", tok=self.peek()) and self.is_op("*", tok=self.peek(2)):
                self.advance()
                self.advance()
                self.advance()
                return ast.VarRef(t.value, span=self.span_from(t))
        return super().parse_primary()

    def parse_call(self, name_tok: Token) -> ast.Expr:
        """Every call keeps its arguments as written (``LAST(B.price, 1)``)."""
        start = name_tok
        self.expect_op("(")
        args: list[ast.Expr] = []
        if not self.is_op(")"):
            args.append(self.parse_expr())
            while self.accept_op(","):
                args.append(self.parse_expr())
        self.expect_op(")")
        return ast.Call(name_tok.value.lower(), tuple(args), span=self.span_from(start))

    # ------------------------------------------------------------------ the statement
    def parse_query(self) -> ast.Query:
        """The whole statement -> a canonical query."""
        start = self.tok
        select: list[tuple[str, Token]] | None = None
        if self.accept_kw("SELECT"):
            if not self.accept_op("*"):
                select = []
                while True:
                    t = self.tok
                    select.append((self.parse_name("a column name"), t))
                    if not self.accept_op(","):
                        break
            self.expect_kw("FROM")
            self.parse_name("a table name")
        mr = self.expect_kw("MATCH_RECOGNIZE")
        self.expect_op("(")
        partition: list[str] = []
        if self.accept_kw("PARTITION"):
            self.expect_kw("BY")
            partition.append(self.parse_name("a column name"))
            while self.accept_op(","):
                partition.append(self.parse_name("a column name"))
        if self.accept_kw("ORDER"):
            self.expect_kw("BY")
            self.parse_name("the time column")
            self.accept_kw("ASC")
            if self.is_kw("DESC"):
                self.fail("ORDER BY ... DESC is not supported: kleene reads rows in time order")
            if self.is_op(","):
                self.fail("ORDER BY with more than one column is not supported: kleene orders "
                          "rows by the time column (--time-col), ties by input order")
        measures: list[_Measure] = []
        if self.accept_kw("MEASURES"):
            measures.append(self._measure())
            while self.accept_op(","):
                measures.append(self._measure())
        all_rows = False
        if self.accept_kw("ALL"):
            self.expect_kw("ROWS")
            self.expect_kw("PER")
            self.expect_kw("MATCH")
            all_rows = True
            if self.is_kw("WITH"):
                self.fail("ALL ROWS PER MATCH WITH UNMATCHED ROWS is not supported: kleene "
                          "outputs the rows of matches only")
            if self.accept_kw("SHOW", "OMIT"):  # kleene has no empty matches: both the same
                self.expect_kw("EMPTY")
                self.expect_kw("MATCHES")
        elif self.accept_kw("ONE"):
            self.expect_kw("ROW")
            self.expect_kw("PER")
            self.expect_kw("MATCH")
        after = ast.AfterMatch(ast.SkipMode.PAST_LAST_ROW)  # SQL's default
        if self.is_kw("AFTER"):
            t = self.advance()
            self.expect_kw("MATCH")
            self.expect_kw("SKIP")
            if self.accept_kw("PAST"):
                self.expect_kw("LAST")
                self.expect_kw("ROW")
                after = ast.AfterMatch(ast.SkipMode.PAST_LAST_ROW, span=self.span_from(t))
            else:
                self.expect_kw("TO")
                w = self.expect_kw("NEXT", "FIRST", "LAST")
                if w.value.upper() == "NEXT":
                    self.expect_kw("ROW")
                    after = ast.AfterMatch(ast.SkipMode.TO_NEXT_ROW, span=self.span_from(t))
                else:
                    var = self.parse_name("a pattern variable")
                    mode = (ast.SkipMode.TO_FIRST if w.value.upper() == "FIRST"
                            else ast.SkipMode.TO_LAST)
                    after = ast.AfterMatch(mode, var, span=self.span_from(t))
        self.expect_kw("PATTERN")
        self.expect_op("(")
        pattern = self._alt()
        self.expect_op(")")
        within: ast.Window | None = None
        if self.is_kw("WITHIN"):
            within = self._within()
        if self.is_kw("SUBSET"):
            self.fail("SUBSET is not supported (a union variable has no kleene form; write "
                      "the measure over its member variables)")
        defines: dict[str, tuple[ast.Expr, Token]] = {}
        if self.accept_kw("DEFINE"):
            while True:
                t = self.tok
                name = self.parse_name("a pattern variable")
                self.expect_kw("AS")
                if name.upper() in defines:
                    self.fail(f"{name} is defined twice", tok=t)
                defines[name.upper()] = (self.parse_expr(), t)
                if not self.accept_op(","):
                    break
        self.expect_op(")")
        if self.accept_kw("AS"):
            self.parse_name("an alias")
        elif self.tok.kind is Tok.IDENT:
            self.advance()
        if not self.at_end():
            self.fail(expected=("end of query",))
        return _Translator(self, pattern, defines, measures, partition, within, after,
                           select, mr, all_rows).query(start)

    def _measure(self) -> _Measure:
        start = self.tok
        e = self.parse_expr()
        if not self.accept_kw("AS"):
            self.fail("a measure needs a name: write <expression> AS <name>", expected=("AS",))
        alias = self.parse_name("a measure name")
        return _Measure(e, alias, self.span_from(start))

    def _within(self) -> ast.Window:
        start = self.advance()
        self.expect_kw("INTERVAL")
        t = self.tok
        if t.kind is not Tok.STRING or not t.value.strip().isdigit():
            self.fail(expected=("a quoted whole number, e.g. '10'",))
        self.advance()
        amount = int(t.value.strip())
        u = self.tok
        unit = u.value.upper().rstrip("S") if u.kind is Tok.IDENT else ""
        if unit not in _UNIT_US:
            self.fail(expected=tuple(_UNIT_US))
        self.advance()
        us = amount * _UNIT_US[unit]
        if us < 1:
            self.fail("WITHIN needs a positive interval", tok=t)
        # Flink's WITHIN: last - first < W; kleene's: <= W; on microseconds, < W is <= W - 1.
        return ast.Window((us - 1) / 1000, ast.TimeUnit.MILLISECONDS, span=self.span_from(start))

    # ------------------------------------------------------------------ PATTERN
    def _alt(self) -> _Node:
        start = self.tok
        items = [self._seq()]
        while self.accept_op("|"):
            items.append(self._seq())
        if len(items) == 1:
            return items[0]
        return _Node("alt", self.span_from(start), items)

    def _seq(self) -> _Node:
        start = self.tok
        items: list[_Node] = []
        while (self.tok.kind is Tok.IDENT and not self.is_kw(*_CLAUSE_WORDS)) \
                or self.is_op("(", "{", "^", "$"):
            items.append(self._term())
        if not items:
            self.fail(expected=("a pattern variable", "'('", "PERMUTE(", "'{-'"))
        if len(items) == 1:
            return items[0]
        return _Node("seq", self.span_from(start), items)

    def _term(self) -> _Node:
        start = self.tok
        if self.is_op("^", "$"):
            self.fail(f"the anchor '{self.tok.value}' is not supported")
        if self.is_op("("):
            self.advance()
            if self.is_op(")"):
                self.fail("an empty pattern () is not supported (kleene has no empty matches)")
            node = self._alt()
            self.expect_op(")")
            node = _Node("seq", self.span_from(start), [node]) if node.kind == "var" else node
        elif self.is_op("{"):
            self.advance()
            self.expect_op("-")
            body = self._alt()
            self.expect_op("-")
            self.expect_op("}")
            node = _Node("excl", self.span_from(start), [body])
        elif self.is_kw("PERMUTE") and self.is_op("(", tok=self.peek()):
            self.advance()
            self.advance()
            items = [self._alt()]
            while self.accept_op(","):
                items.append(self._alt())
            self.expect_op(")")
            node = _Node("perm", self.span_from(start), items)
        else:
            t = self.advance()
            node = _Node("var", t.span, name=t.value)
        q = self._quantifier()
        if q is None:
            return node
        lo, hi = q
        reluctant = self.accept_op("?") is not None
        return _Node("rep", self.span_from(start), [node], lo=lo, hi=hi, reluctant=reluctant)

    def _quantifier(self) -> tuple[int, int | None] | None:
        if self.accept_op("+"):
            return (1, None)
        if self.accept_op("*"):
            return (0, None)
        if self.accept_op("?"):
            return (0, 1)
        if self.is_op("{") and not self.is_op("-", tok=self.peek()):
            t = self.advance()
            lo = 0 if self.is_op(",") else self.parse_int("a repetition count")
            hi: int | None = lo
            if self.accept_op(","):
                hi = None if self.is_op("}") else self.parse_int("a maximum repetition count")
            self.expect_op("}")
            if hi is not None and hi < lo:
                self.fail(f"{{{lo},{hi}}}: the maximum is below the minimum", tok=t)
            return (lo, hi)
        return None


# ------------------------------------------------------------------------------ translation
class _Translator:
    """MATCH_RECOGNIZE parts -> canonical AST (see the module docstring)."""

    def __init__(self, p: MatchRecognizeParser, pattern: _Node,
                 defines: dict[str, tuple[ast.Expr, Token]], measures: list[_Measure],
                 partition: list[str], within: ast.Window | None, after: ast.AfterMatch,
                 select: list[tuple[str, Token]] | None, mr: Token,
                 all_rows: bool = False) -> None:
        self.p = p
        self.all_rows = all_rows
        self.fail = p.fail
        self.defines = defines
        self.measures = measures
        self.partition = partition
        self.within = within
        self.after = after
        self.select = select
        self.mr = mr
        self.root = self._expand(pattern)
        self.occs: dict[str, list[_Node]] = {}  # upper-case variable -> occurrences
        self.spelling: dict[str, str] = {}
        self.leaves: list[_Node] = []
        self._name(self.root, None)

    # ----------------------------------------------------------- pattern
    def _expand(self, n: _Node) -> _Node:
        """PERMUTE -> alternation of permutations (SQL's order); {- -} -> its body (it only
        changes ALL ROWS PER MATCH output); one-item groups -> the item."""
        items = [self._expand(i) for i in n.items]
        if n.kind == "perm":
            perms = [_Node("seq", n.span, [_copy(x) for x in order])
                     for order in itertools.permutations(items)]
            return perms[0] if len(perms) == 1 else _Node("alt", n.span, perms)
        if n.kind == "excl":
            for leaf in _leaves(items[0]):
                leaf.excluded = True
            return items[0]
        if n.kind == "seq" and len(items) == 1:
            return items[0]
        return replace(n, items=items)

    def _name(self, n: _Node, parent: _Node | None) -> None:
        n.parent = parent
        if n.kind == "var":
            key = n.name.upper()
            self.spelling.setdefault(key, n.name)
            seen = self.occs.setdefault(key, [])
            base = self.spelling[key]
            n.occ = base if not seen else f"{base}_{len(seen) + 1}"
            seen.append(n)
            self.leaves.append(n)
        for i in n.items:
            self._name(i, n)

    def _pattern(self, n: _Node) -> ast.Pattern:
        if n.kind == "var":
            return ast.EventPattern(None, n.occ, span=n.span)
        if n.kind == "rep":
            return ast.Kleene(self._pattern(n.items[0]), n.lo, n.hi, span=n.span,
                              reluctant=n.reluctant)
        items = tuple(self._pattern(i) for i in n.items)
        if n.kind == "seq":
            return ast.Seq(items, span=n.span)
        return ast.Or(items, span=n.span)

    @staticmethod
    def _ancestors(n: _Node) -> Iterator[_Node]:
        a = n.parent
        while a is not None:
            yield a
            a = a.parent

    def _in_rep(self, n: _Node) -> bool:
        return any(a.kind == "rep" for a in self._ancestors(n))

    def _is_list(self, n: _Node) -> bool:
        return self._in_rep(n)

    def _own_rep(self, n: _Node) -> bool:
        """The occurrence is ``V+`` / ``V*`` / ``V{n,m}`` itself (not inside a repeated
        group)."""
        return n.parent is not None and n.parent.kind == "rep" and not self._in_rep(n.parent)

    def _mandatory(self, n: _Node) -> bool:
        """Every match maps at least one row to ``n`` (no alternation or optional
        repetition above it)."""
        return not any(a.kind == "alt" or (a.kind == "rep" and a.lo == 0)
                       for a in self._ancestors(n))

    def _under_alt(self, n: _Node) -> bool:
        return any(a.kind == "alt" for a in self._ancestors(n))

    def _single(self, n: _Node) -> bool:
        return not self._in_rep(n)

    # row references -------------------------------------------------------
    def _last_row(self, n: _Node, attr: str) -> ast.Expr | None:
        """The last row of sub-pattern ``n`` when the pattern fixes which variable maps it."""
        if n.kind == "var":
            if self._in_rep(n):
                return ast.AttrRef(n.occ, attr, ast.Index(ast.IndexKind.LAST, 0))
            return ast.AttrRef(n.occ, attr)
        if n.kind == "rep" and n.lo >= 1 and n.items[0].kind == "var":
            return ast.AttrRef(n.items[0].occ, attr, ast.Index(ast.IndexKind.LAST, 0))
        if n.kind == "seq":
            return self._last_row(n.items[-1], attr)
        return None

    def _first_row(self, n: _Node, attr: str) -> ast.Expr | None:
        if n.kind == "var":
            if self._in_rep(n):
                return ast.AttrRef(n.occ, attr, ast.Index(ast.IndexKind.FIRST, 0))
            return ast.AttrRef(n.occ, attr)
        if n.kind == "rep" and n.lo >= 1 and n.items[0].kind == "var":
            return ast.AttrRef(n.items[0].occ, attr, ast.Index(ast.IndexKind.FIRST, 0))
        if n.kind == "seq":
            return self._first_row(n.items[0], attr)
        return None

    def _neighbour(self, n: _Node, attr: str, step: int, k: int = 1) -> ast.Expr | None:
        """The row ``k`` rows before (step -1) or after (+1) the rows of ``n``, when the
        pattern fixes it: the rows between are single variables or repetitions of a variable
        with a fixed count, and the row itself is a single variable's or one of a repetition's
        first / last ``min`` rows."""
        cur = n.parent if n.parent is not None and n.parent.kind == "rep" \
            and n.parent.items[0] is n and n.kind == "var" else n
        while True:
            par = cur.parent
            if par is None or par.kind == "rep":
                return None
            if par.kind == "seq":
                j = par.items.index(cur) + step
                while 0 <= j < len(par.items):
                    sib = par.items[j]
                    if k == 1:
                        return self._last_row(sib, attr) if step < 0 \
                            else self._first_row(sib, attr)
                    if sib.kind == "var" and not self._in_rep(sib):
                        k -= 1
                    elif sib.kind == "rep" and sib.items[0].kind == "var":
                        occ = sib.items[0].occ
                        if k <= sib.lo:
                            idx = ast.Index(ast.IndexKind.LAST, 1 - k) if step < 0 \
                                else ast.Index(ast.IndexKind.ABSOLUTE, k)
                            return ast.AttrRef(occ, attr, idx)
                        if sib.hi != sib.lo:
                            return None  # how many rows it took is not fixed
                        k -= sib.lo
                    else:
                        return None
                    j += step
            cur = par

    # ----------------------------------------------------------- expressions
    def _unsupported(self, what: str, e: ast.Expr) -> NoReturn:
        self.p.fail(f"not supported in MATCH_RECOGNIZE: {what}", span=e.span)

    def _offset(self, call: ast.Call, default: int) -> int:
        """The whole-number offset argument of a navigation call (``default`` if absent)."""
        if len(call.args) < 2:
            return default
        lit = call.args[1]
        if isinstance(lit, ast.Literal) and isinstance(lit.value, int) \
                and not isinstance(lit.value, bool) and lit.value >= 0:
            return lit.value
        self._unsupported(f"{call.name.upper()} with an offset that is not a whole number",
                          call)

    def _var_of(self, e: ast.Expr) -> str | None:
        if isinstance(e, ast.AttrRef) and e.index is None and e.var.upper() in self.occs:
            return e.var.upper()
        return None

    def _order(self, a: _Node, b: _Node) -> str:
        """"before" if ``a``'s rows precede ``b``'s in every match binding both, "apart" if
        no match binds both (different alternatives), "inside" if they share a repeated
        group."""
        pa: list[_Node] = []
        x: _Node | None = a
        while x is not None:
            pa.append(x)
            x = x.parent
        y: _Node | None = b
        prev_b: _Node = b
        while y is not None and y not in pa:
            prev_b = y
            y = y.parent
        assert y is not None
        prev_a = pa[pa.index(y) - 1] if pa.index(y) > 0 else a
        if y.kind == "alt":
            return "apart"
        if y.kind == "rep":
            return "inside"
        return "before" if y.items.index(prev_a) < y.items.index(prev_b) else "after"

    def _define_expr(self, e: ast.Expr, o: _Node, mode: str) -> ast.Expr:
        """A DEFINE condition at occurrence ``o``'s current row: ``mode`` is "one" (a single
        row), "first" (the first row of o's list), "i" (row i >= 2 of the list), and for a
        condition with NEXT: "shift" (row i-1 for i >= 2, its next row is row i) or "last" (the
        list's last row, whose next row is the next variable's first)."""
        v = o.name.upper()

        def cur(attr: str) -> ast.Expr:
            if mode == "one":
                return ast.AttrRef(o.occ, attr)
            if mode == "first":
                return ast.AttrRef(o.occ, attr, ast.Index(ast.IndexKind.ABSOLUTE, 1))
            if mode == "shift":
                return ast.AttrRef(o.occ, attr, ast.Index(ast.IndexKind.CURRENT, -1))
            if mode == "last":
                return ast.AttrRef(o.occ, attr, ast.Index(ast.IndexKind.LAST, 0))
            return ast.AttrRef(o.occ, attr, ast.Index(ast.IndexKind.CURRENT, 0))

        def before_cur(attr: str, k: int) -> ast.Expr | None:
            """The row mapped ``k`` rows before the current one (PREV)."""
            if mode == "i":
                return ast.AttrRef(o.occ, attr, ast.Index(ast.IndexKind.CURRENT, -1))
            return self._neighbour(o, attr, -1, k)

        def other(w: str, attr: str, how: str, k: int, node: ast.Expr) -> ast.Expr:
            """A row of another variable ``w`` (mapped before o: its final rows)."""
            occs = self.occs[w]
            if len(occs) > 1:
                self._unsupported(f"DEFINE {self.spelling[v]} reads {self.spelling[w]}, which "
                                  "occurs more than once in PATTERN", node)
            wn = occs[0]
            rel = self._order(wn, o)
            if rel in ("after", "apart"):
                return ast.Literal(None, span=node.span)  # not mapped yet: NULL
            if rel == "inside":
                self._unsupported(f"DEFINE {self.spelling[v]} reads {self.spelling[w]} "
                                  "inside the same repeated group", node)
            if self._under_alt(wn):
                # kleene skips a conjunct on an unbound variable; SQL reads NULL there
                self._unsupported(f"DEFINE {self.spelling[v]} reads {self.spelling[w]}, "
                                  "which is inside an alternative (it may be unmapped)", node)
            if self._single(wn):
                return ast.AttrRef(wn.occ, attr) if k == 0 else ast.Literal(None)
            if how == "first":
                return ast.AttrRef(wn.occ, attr, ast.Index(ast.IndexKind.ABSOLUTE, 1 + k))
            return ast.AttrRef(wn.occ, attr, ast.Index(ast.IndexKind.LAST, -k))

        def nav_arg(call: ast.Call) -> tuple[str | None, str, int]:
            if not call.args or len(call.args) > 2:
                self._unsupported(f"{call.name.upper()} takes a column and an optional offset",
                                  call)
            a = call.args[0]
            k = self._offset(call, 0 if call.name in ("first", "last") else 1)
            if isinstance(a, ast.AttrRef) and a.index is None:
                w = a.var.upper()
                if w in self.occs:
                    return w, a.attr, k
            if isinstance(a, ast.VarRef) and a.var.upper() not in self.occs:
                return None, a.var, k
            self._unsupported(f"{call.name.upper()} of an expression (only of a column, "
                              "e.g. PREV(B.price))", call)
            raise AssertionError

        def tr(x: ast.Expr) -> ast.Expr:
            if isinstance(x, ast.AttrRef):
                if x.index is not None:
                    self._unsupported("an index on a pattern variable", x)
                w = x.var.upper()
                if w not in self.occs:
                    self.fail(f"{x.var} is not a pattern variable (variables: "
                              f"{', '.join(self.spelling.values())})", span=x.span)
                if w == v:
                    return replace(cur(x.attr), span=x.span)
                return other(w, x.attr, "last", 0, x)
            if isinstance(x, ast.VarRef):
                if x.var.upper() in self.occs or x.var == "*":
                    self._unsupported(f"{x.var} as a value", x)
                return replace(cur(x.var), span=x.span)
            if isinstance(x, ast.Call):
                name = x.name
                if name == "__final":
                    self.fail("FINAL is not allowed in DEFINE (SQL: DEFINE is always running)",
                              span=x.span)
                if name == "__running":
                    return tr(x.args[0])
                if name in ("classifier", "match_number"):
                    self._unsupported(f"{name.upper()}() in DEFINE", x)
                if name in _NAV:
                    wn, attr, k = nav_arg(x)
                    w = wn or v
                    if name in ("prev", "next"):
                        if w != v:
                            self._unsupported(f"{name.upper()} of another variable's row "
                                              f"({self.spelling[w]}) in DEFINE "
                                              f"{self.spelling[v]}", x)
                        if k == 0:  # the current row itself
                            return replace(cur(attr), span=x.span)
                        if k != 1 and mode in ("i", "shift"):
                            self._unsupported(f"{name.upper()}({self.spelling[v]}.{attr}, {k}) "
                                              "in the DEFINE of the repeated variable "
                                              f"{self.spelling[v]} (offsets above 1)", x)
                        if name == "prev" and mode in ("shift", "last"):
                            self._unsupported(f"PREV and NEXT in one DEFINE of the repeated "
                                              f"variable {self.spelling[v]}", x)
                        if name == "prev":
                            ref = before_cur(attr, k)
                            where = "before the match" if ref is None else ""
                        elif mode == "shift":
                            ref = ast.AttrRef(o.occ, attr, ast.Index(ast.IndexKind.CURRENT, 0))
                            where = ""
                        else:
                            ref = self._neighbour(o, attr, 1, k) if mode in ("one", "last") \
                                else None
                            where = "" if ref is not None else "after the match or elsewhere"
                        if ref is None and k > 1:
                            self._unsupported(
                                f"{name.upper()}({self.spelling[v]}.{attr}, {k}) where the row "
                                f"{k} {'before' if name == 'prev' else 'after'} is not fixed by "
                                f"the pattern (it may lie {'before' if name == 'prev' else 'after'}"
                                " the match, or past an alternative or a repetition of varying "
                                "length)", x)
                        if ref is None:
                            self._unsupported(
                                f"{name.upper()}({self.spelling[v]}.{attr}) where the "
                                f"{'previous' if name == 'prev' else 'next'} row is not fixed "
                                f"by the pattern (it may lie {where or 'in an alternative'})",
                                x)
                        assert ref is not None
                        return replace(ref, span=x.span)
                    if w != v:
                        return other(w, attr, name, k, x)
                    if len(self.occs[v]) > 1 and (k > 0 or name == "first"):
                        self._unsupported(f"{name.upper()}({self.spelling[v]}.{attr}"
                                          f"{', ' + str(k) if k else ''}) in the DEFINE of a "
                                          "variable that occurs more than once", x)
                    if name == "last":
                        if k == 0:
                            return replace(cur(attr), span=x.span)
                        if mode == "i":  # B's row k before the current one (NULL if none)
                            return ast.AttrRef(o.occ, attr,
                                               ast.Index(ast.IndexKind.CURRENT, -k), span=x.span)
                        if mode in ("shift", "last"):
                            self._unsupported(f"LAST({self.spelling[v]}.{attr}, {k}) and NEXT "
                                              "in one DEFINE of a repeated variable", x)
                        return ast.Literal(None, span=x.span)  # a single row / B's first row
                    if k == 0:
                        if mode == "one":
                            return ast.AttrRef(o.occ, attr, span=x.span)
                        return ast.AttrRef(o.occ, attr, ast.Index(ast.IndexKind.ABSOLUTE, 1),
                                           span=x.span)
                    if mode == "one":
                        return ast.Literal(None, span=x.span)
                    self._unsupported(f"FIRST({self.spelling[v]}.{attr}, {k}) in its own "
                                      "DEFINE", x)
                if name in _AGGREGATES:
                    args = x.args
                    if len(args) != 1:
                        self._unsupported(f"{name.upper()} with {len(args)} arguments", x)
                    wa = self._agg_var(args[0])
                    if wa is not None and len(self.occs[wa]) == 1 \
                            and self._single(self.occs[wa][0]) and (
                                wa == v or (self._order(self.occs[wa][0], o) == "before"
                                            and not self._under_alt(self.occs[wa][0]))):
                        # the aggregate over one row (running, or a row mapped before): SUM,
                        # AVG, MIN, MAX of one value are the value (NULL if NULL)
                        if name == "count":
                            if isinstance(args[0], ast.VarRef):
                                return ast.Literal(1, span=x.span)
                            self._unsupported(f"COUNT({self.spelling[wa]}.column) over the "
                                              f"single row of {self.spelling[wa]} in DEFINE", x)
                        return tr(args[0])
                    if wa == v and len(self.occs[v]) == 1 and mode in ("i", "first"):
                        return self._running(name, args[0], o, mode, x, tr)
                    if wa is None or wa == v:
                        what = "several variables' or all rows" if wa is None else (
                            f"the repeated variable {self.spelling[wa]}")
                        self._unsupported(f"{name.upper()} over the rows mapped so far in "
                                          f"DEFINE (a running aggregate) over {what} (only "
                                          "over the DEFINE's own variable, occurring once in "
                                          "PATTERN, without NEXT)", x)
                    if len(self.occs[wa]) > 1 or self._order(self.occs[wa][0], o) != "before" \
                            or self._under_alt(self.occs[wa][0]):
                        self._unsupported(f"{name.upper()} over {self.spelling[wa]} in DEFINE "
                                          f"{self.spelling[v]} (it must be one variable "
                                          "mapped entirely before, outside alternatives)", x)
                    return _sql_aggregate(name, self._agg_arg(args[0], wa), x)
                return ast.Call(name, tuple(tr(a) for a in x.args), span=x.span)
            return _map_children(x, tr)

        return tr(e)

    def _running(self, name: str, a: ast.Expr, o: _Node, mode: str, node: ast.Expr,
                 tr: Callable[[ast.Expr], ast.Expr]) -> ast.Expr:
        """A running aggregate over the DEFINE's own repeated variable (SQL: over its rows
        mapped so far, the current one included): ``agg(b[..i].x)`` (docs/semantics.md 21) at
        rows i >= 2, the one-row value at the first row (mode "first", a condition with
        PREV)."""
        v = self.spelling[o.name.upper()]
        if isinstance(a, ast.VarRef):
            self._unsupported(f"{name.upper()}({a.var}) over the rows of {v} mapped so far in "
                              f"its DEFINE (count a column that is never NULL instead, e.g. "
                              f"COUNT({v}.price))", node)
        if mode == "first":
            if name == "count":
                self._unsupported(f"COUNT over {v}'s rows so far in a DEFINE of {v} that "
                                  "also uses PREV", node)
            return replace(tr(a), span=node.span)  # SUM, AVG, MIN, MAX of one value

        def up(x: ast.Expr) -> ast.Expr:
            if isinstance(x, ast.AttrRef):
                if x.index is not None:
                    self._unsupported("an index on a pattern variable", x)
                return ast.AttrRef(o.occ, x.attr, ast.Index(ast.IndexKind.UPTO, 0), span=x.span)
            if isinstance(x, ast.Call) and (x.name in _AGGREGATES or x.name in _NAV
                                            or x.name in ("__running", "__final")):
                self._unsupported(f"{x.name.strip('_').upper()} inside an aggregate in DEFINE",
                                  x)
            return _map_children(x, up)
        return _sql_aggregate(name, up(a), node)

    def _agg_var(self, a: ast.Expr) -> str | None:
        if isinstance(a, ast.VarRef) and a.var.upper() in self.occs:
            return a.var.upper()
        found = {r.var.upper() for r in _refs(a)}
        if len(found) == 1 and next(iter(found)) in self.occs:
            return next(iter(found))
        return None

    def _agg_arg(self, a: ast.Expr, w: str) -> ast.Expr:
        occ = self.occs[w][0].occ

        def tr(x: ast.Expr) -> ast.Expr:
            if isinstance(x, ast.VarRef):
                return ast.VarRef(occ, span=x.span)
            if isinstance(x, ast.AttrRef):
                if x.index is not None:
                    self._unsupported("an index on a pattern variable", x)
                return ast.AttrRef(occ, x.attr, span=x.span)
            return _map_children(x, tr)
        return tr(a)

    def _conditions(self) -> list[ast.Expr]:
        out: list[ast.Expr] = []
        for key, (cond, tok) in self.defines.items():
            if key not in self.occs:
                self.fail(f"DEFINE {tok.value}: no such variable in PATTERN", tok=tok)
            for o in self.occs[key]:
                if self._single(o):
                    out.append(self._define_expr(cond, o, "one"))
                    continue
                if not self._own_rep(o):
                    self._unsupported(f"DEFINE {tok.value} on a variable inside a repeated "
                                      "group (write the group's variables with their own "
                                      "quantifiers)", cond)
                assert o.parent is not None
                if _calls(cond, "next"):
                    # NEXT of row i is row i + 1: the condition at rows 1..n-1 is written with
                    # row i-1 as the current row (i >= 2), the last row's separately
                    shift = self._define_expr(cond, o, "shift")
                    if not _uses_prev_element(shift, o.occ):
                        self._unsupported(f"NEXT in a DEFINE of {tok.value} that does not "
                                          "read the current row", cond)
                    last = self._define_expr(cond, o, "last")
                    if o.parent.lo == 0:
                        last = ast.Binary("or", ast.Binary(
                            "=", ast.Call("count", (ast.VarRef(o.occ),)), ast.Literal(0)), last)
                    out += [shift, last]
                    continue
                rest = self._define_expr(cond, o, "i")
                if not _uses_prev_element(rest, o.occ):
                    out.append(rest)  # every element, no predecessor needed
                    continue
                first = self._define_expr(cond, o, "first")
                assert o.parent is not None
                if o.parent.lo == 0:
                    empty = ast.Binary("=", ast.Call("count", (ast.VarRef(o.occ),)),
                                       ast.Literal(0))
                    first = ast.Binary("or", empty, first)
                out += [first, rest]
        return out

    # ----------------------------------------------------------- MEASURES
    def _measure_expr(self, e: ast.Expr) -> ast.Expr:
        final = False  # inside FINAL (ALL ROWS PER MATCH)
        def occ_for(w: str, which: str, node: ast.Expr) -> _Node:
            occs = self.occs[w]
            if len(occs) == 1:
                return occs[0]
            pick = occs[0] if which == "first" else occs[-1]
            if not self._mandatory(pick):
                self._unsupported(f"{which.upper()} of {self.spelling[w]}, which occurs more "
                                  "than once and whose " + which + " occurrence may be unmapped",
                                  node)
            return pick

        def row(w: str, attr: str, which: str, k: int, node: ast.Expr) -> ast.Expr:
            o = occ_for(w, which, node)
            if self._single(o):
                return ast.AttrRef(o.occ, attr, span=node.span) if k == 0 \
                    else ast.Literal(None, span=node.span)
            if which == "first":
                return ast.AttrRef(o.occ, attr, ast.Index(ast.IndexKind.ABSOLUTE, 1 + k),
                                   span=node.span)
            return ast.AttrRef(o.occ, attr, ast.Index(ast.IndexKind.LAST, -k), span=node.span)

        def tr(x: ast.Expr) -> ast.Expr:
            if isinstance(x, ast.AttrRef):
                if x.index is not None:
                    self._unsupported("an index on a pattern variable", x)
                w = x.var.upper()
                if w not in self.occs:
                    self.fail(f"{x.var} is not a pattern variable", span=x.span)
                return row(w, x.attr, "last", 0, x)
            if isinstance(x, ast.VarRef):
                if x.var.upper() in self.occs or x.var == "*":
                    self._unsupported(f"{x.var} as a value", x)
                if x.var in self.partition or x.var.upper() in (
                        p.upper() for p in self.partition):
                    ref = self._first_row(self.root, x.var)
                    if ref is not None:
                        return replace(ref, span=x.span)
                if self.all_rows:
                    self._unsupported(f"the column {x.var} without a variable in ALL ROWS PER "
                                      "MATCH (each output row has its row's id in 'row'; "
                                      f"qualify the column, e.g. V.{x.var})", x)
                ref = self._last_row(self.root, x.var)
                if ref is None:
                    self._unsupported(f"the column {x.var} without a variable (the match's "
                                      "last row is not fixed by the pattern)", x)
                assert ref is not None
                return replace(ref, span=x.span)
            if isinstance(x, ast.Call):
                name = x.name
                if name == "__final" and self.all_rows:
                    nonlocal final
                    final, outer = True, final
                    inner = tr(x.args[0])
                    final = outer
                    return inner if outer else ast.Call("final", (inner,), span=x.span)
                if name in ("__running", "__final"):
                    # ONE ROW PER MATCH: both read the last row; ALL ROWS: RUNNING is the
                    # default (the bindings as of the output row, docs/semantics.md 19)
                    return tr(x.args[0])
                if name == "match_number":
                    if x.args:
                        self._unsupported("MATCH_NUMBER with arguments", x)
                    return ast.Call("match_number", (), span=x.span)
                if name == "classifier" and self.all_rows:
                    if final:
                        self._unsupported("FINAL CLASSIFIER() in ALL ROWS PER MATCH", x)
                    if any(len(o) > 1 for o in self.occs.values()):
                        self._unsupported("CLASSIFIER() in ALL ROWS PER MATCH when a variable "
                                          "occurs more than once in PATTERN", x)
                    return ast.Call("classifier", (), span=x.span)
                if name == "classifier":
                    last = self._last_var(self.root)
                    if last is None:
                        self._unsupported("CLASSIFIER() where the variable of the match's "
                                          "last row is not fixed by the pattern", x)
                    return ast.Literal(last, span=x.span)
                if name in ("prev", "next"):
                    self._unsupported(f"{name.upper()} in MEASURES", x)
                if name in ("first", "last"):
                    if not x.args or len(x.args) > 2:
                        self._unsupported(f"{name.upper()} takes a column and an offset", x)
                    a = x.args[0]
                    k = self._offset(x, 0)
                    wv = self._var_of(a)
                    if wv is None or not isinstance(a, ast.AttrRef):
                        self._unsupported(f"{name.upper()} of anything but V.column", x)
                    return row(wv, a.attr, name, k, x)
                if name in _AGGREGATES:
                    if len(x.args) != 1:
                        self._unsupported(f"{name.upper()} with {len(x.args)} arguments", x)
                    a = x.args[0]
                    if isinstance(a, ast.VarRef) and a.var == "*":
                        if name != "count":
                            self._unsupported(f"{name.upper()}(*)", x)
                        return self._count_all(x)
                    wa = self._agg_var(a)
                    if wa is None:
                        self._unsupported(f"{name.upper()} over rows of several variables or "
                                          "of none", x)
                    if len(self.occs[wa]) > 1:
                        self._unsupported(f"{name.upper()} over {self.spelling[wa]}, which "
                                          "occurs more than once in PATTERN", x)
                    return _sql_aggregate(name, self._agg_arg(a, wa), x)
                return ast.Call(name, tuple(tr(a) for a in x.args), span=x.span)
            return _map_children(x, tr)

        return tr(e)

    def _count_all(self, node: ast.Expr) -> ast.Expr:
        total: ast.Expr | None = None
        for o in self.leaves:
            if self._under_alt(o):
                self._unsupported("COUNT(*) when a variable may be unmapped (an alternative)",
                                  node)
            term: ast.Expr = ast.Call("count", (ast.VarRef(o.occ),))
            if self._single(o):
                # a single row: 1 (ONE ROW: always mapped); ALL ROWS (running): count(v) is
                # 1 once its row is mapped, NULL before (docs/semantics.md 19)
                term = ast.Literal(1) if not self.all_rows else ast.Call("coalesce", (
                    term, ast.Literal(0)))
            total = term if total is None else ast.Binary("+", total, term)
        assert total is not None
        return total

    def _last_var(self, n: _Node) -> str | None:
        if n.kind == "var":
            return self.spelling[n.name.upper()]
        if n.kind == "seq":
            last = n.items[-1]
            if last.kind == "rep" and last.lo == 0:
                return None
            return self._last_var(last)
        if n.kind == "rep" and n.lo >= 1:
            return self._last_var(n.items[0])
        return None

    # ----------------------------------------------------------- the query
    def query(self, start: Token) -> ast.Query:
        p = self.p
        after = self.after
        if after.var is not None:
            key = after.var.upper()
            if key not in self.occs:
                self.fail(f"AFTER MATCH SKIP {after.mode.value} {after.var}: no such pattern "
                          "variable", span=after.span)
            if len(self.occs[key]) > 1:
                self.fail(f"not supported in MATCH_RECOGNIZE: AFTER MATCH SKIP "
                          f"{after.mode.value} {after.var}, which occurs more than once in "
                          "PATTERN", span=after.span)
            after = replace(after, var=self.occs[key][0].occ)
        conds = self._conditions()
        where: ast.Expr | None = None
        for c in conds:
            where = c if where is None else ast.Binary("and", where, c)
        names = {m.alias.upper() for m in self.measures}
        if self.select is not None:
            for col, tok in self.select:
                if col.upper() not in names and col.upper() not in (
                        x.upper() for x in self.partition):
                    p.fail(f"SELECT {col}: not a measure or PARTITION BY column", tok=tok)
        returns = [ast.ReturnItem(self._measure_expr(m.expr), m.alias, span=m.span)
                   for m in self.measures]
        if self.select is not None:
            have = {r.alias.upper(): r for r in returns if r.alias is not None}
            chosen = []
            for col, _tok in self.select:
                if col.upper() in have:
                    chosen.append(have[col.upper()])
                else:
                    ref = self._first_row(self.root, col)
                    if ref is None:
                        p.fail(f"SELECT {col}: the partition column cannot be read from a "
                               "row the pattern always maps", tok=_tok)
                    assert ref is not None
                    chosen.append(ast.ReturnItem(ref, col))
            returns = chosen
        return ast.Query(pattern=self._pattern(self.root), where=where,
                         partition_by=tuple(self.partition), within=self.within,
                         strategy=ast.Strategy.STRICT_CONTIGUITY, returns=tuple(returns),
                         span=p.span_from(start), source=p.text, after_match=after,
                         rows=tuple(n.occ for n in self.leaves if n.excluded)
                         if self.all_rows else None)


def _sql_aggregate(name: str, arg: ast.Expr, node: ast.Expr) -> ast.Expr:
    """SQL's aggregate as kleene's: the same, but SQL's SUM over no non-NULL value is NULL
    where kleene's is 0, so ``SUM(x)`` is ``sum(x) + nullif(count(x), 0) * 0``."""
    agg = ast.Call(name, (arg,), span=node.span)
    if name != "sum":
        return agg
    guard = ast.Call("nullif", (ast.Call("count", (arg,)), ast.Literal(0)))
    return ast.Binary("+", agg, ast.Binary("*", guard, ast.Literal(0)), span=node.span)


def _leaves(n: _Node) -> Iterator[_Node]:
    if n.kind == "var":
        yield n
    for i in n.items:
        yield from _leaves(i)


def _copy(n: _Node) -> _Node:
    return replace(n, items=[_copy(i) for i in n.items], parent=None)


def _refs(e: ast.Expr) -> list[ast.AttrRef]:
    out: list[ast.AttrRef] = []

    def walk(x: ast.Expr) -> ast.Expr:
        if isinstance(x, ast.AttrRef):
            out.append(x)
            return x
        return _map_children(x, walk)
    walk(e)
    return out


def _calls(e: ast.Expr, name: str) -> bool:
    """``e`` calls ``name`` somewhere."""
    found = False

    def walk(x: ast.Expr) -> ast.Expr:
        nonlocal found
        if isinstance(x, ast.Call) and x.name == name:
            found = True
        return _map_children(x, walk)
    walk(e)
    return found


def _uses_prev_element(e: ast.Expr, occ: str) -> bool:
    """``e`` reads an element before the current one (``occ[i-k]``): it ranges over i >= 2,
    and the first row needs its own conjunct."""
    return any(r.var == occ and r.index is not None and r.index.kind is ast.IndexKind.CURRENT
               and r.index.offset < 0 for r in _refs(e))


def _map_children(x: ast.Expr, f: Callable[[ast.Expr], ast.Expr]) -> ast.Expr:
    """``x`` with ``f`` applied to each direct sub-expression."""
    if isinstance(x, ast.Binary):
        return replace(x, left=f(x.left), right=f(x.right))
    if isinstance(x, ast.Unary):
        return replace(x, operand=f(x.operand))
    if isinstance(x, ast.Call):
        return replace(x, args=tuple(f(a) for a in x.args))
    if isinstance(x, ast.IsNull):
        return replace(x, operand=f(x.operand))
    if isinstance(x, ast.Between):
        return replace(x, operand=f(x.operand), low=f(x.low), high=f(x.high))
    if isinstance(x, ast.InList):
        return replace(x, operand=f(x.operand), items=tuple(f(i) for i in x.items))
    if isinstance(x, ast.Like):
        return replace(x, operand=f(x.operand))
    return x


def parse(text: str) -> ast.Query:
    """Parse a MATCH_RECOGNIZE statement into the canonical query.

    Example:
        >>> from kleene.lang import to_text
        >>> print(to_text(parse('''MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts
        ...   MEASURES A.id AS a ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW
        ...   PATTERN (A B+) DEFINE B AS B.p > PREV(B.p))''')))
        PATTERN SEQ(ANY A, ANY+ B[])
        WHERE B[1].p > A.p AND B[i].p > B[i-1].p
        PARTITION BY s
        USING strict-contiguity
        AFTER MATCH SKIP TO NEXT ROW
        RETURN A.id AS a
    """
    return MatchRecognizeParser(text).parse_query()


__all__ = ["MatchRecognizeParser", "parse"]
