"""Hypothesis strategies for query ASTs (any tree the printer must round-trip) and for text."""

from __future__ import annotations

from hypothesis import strategies as st

from kleene import ast
from kleene.lang.functions import BUILTINS
from kleene.lang.parser import RESERVED

identifiers = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,5}\Z").filter(
    lambda s: s.upper() not in RESERVED)
any_names = st.one_of(identifiers, st.text(max_size=6))
event_types = st.one_of(st.none(), any_names, st.from_regex(r"\A[0-9]{1,7}\Z"))
udf_names = identifiers.filter(lambda s: s.lower() not in BUILTINS)
call_names = st.one_of(st.sampled_from(sorted(BUILTINS)), udf_names)

numbers = st.one_of(st.integers(-10**12, 10**12),
                    st.floats(allow_nan=False, allow_infinity=False, width=64))
literals = st.one_of(
    st.builds(ast.Literal, numbers),
    st.builds(ast.Literal, st.text(max_size=8)),
    st.builds(ast.Literal, st.booleans()),
    st.just(ast.Literal(None)),
    st.builds(ast.Literal, st.integers(-62_135_596_800 * 10**6, 253_402_300_799 * 10**6),
              st.just("timestamp")),
    st.builds(ast.Literal, st.integers(-10**13, 10**13), st.just("interval")),
)
indexes = st.one_of(
    st.none(),
    st.builds(ast.Index, st.just(ast.IndexKind.CURRENT), st.integers(-3, 0)),
    st.builds(ast.Index, st.just(ast.IndexKind.LAST), st.integers(-3, 0)),
    st.builds(ast.Index, st.just(ast.IndexKind.ABSOLUTE), st.integers(1, 9)),
    st.builds(ast.Index, st.just(ast.IndexKind.FIRST), st.just(0)),
)
leaves = st.one_of(
    literals,
    st.builds(ast.AttrRef, identifiers, any_names, indexes),
    st.builds(ast.VarRef, identifiers),
    st.builds(ast.Equivalence, st.lists(any_names, min_size=1, max_size=3).map(tuple)),
)
BINARY_OPS = ("+", "-", "*", "/", "%", "=", "!=", "<", "<=", ">", ">=", "and", "or")


def _compound(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    return st.one_of(
        st.builds(ast.Unary, st.sampled_from(["not", "-"]), children),
        st.builds(ast.Binary, st.sampled_from(BINARY_OPS), children, children),
        st.builds(ast.Between, children, children, children, st.booleans()),
        st.builds(ast.InList, children, st.lists(children, min_size=1, max_size=3).map(tuple),
                  st.booleans()),
        st.builds(ast.Like, children, children, st.booleans()),
        st.builds(ast.IsNull, children, st.booleans()),
        st.builds(ast.Call, call_names, st.lists(children, max_size=3).map(tuple)),
    )


exprs = st.recursive(leaves, _compound, max_leaves=12)

units = st.sampled_from(list(ast.TimeUnit))
windows = st.builds(
    ast.Window,
    st.one_of(st.integers(1, 10**6),
              st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)),
    units)
events = st.builds(ast.EventPattern, event_types, identifiers)


def _kleene_bounds(draw: st.DrawFn) -> tuple[int, int | None]:
    lo = draw(st.integers(0, 5))
    hi = draw(st.one_of(st.none(), st.integers(lo, lo + 3)))
    return lo, hi


@st.composite
def _kleene(draw: st.DrawFn, children: st.SearchStrategy[ast.Pattern]) -> ast.Pattern:
    lo, hi = _kleene_bounds(draw)
    return ast.Kleene(draw(children), lo, hi)


def _pattern_compound(children: st.SearchStrategy[ast.Pattern]) -> st.SearchStrategy[
        ast.Pattern]:
    items = st.lists(children, min_size=1, max_size=3).map(tuple)
    return st.one_of(
        _kleene(children),
        st.builds(ast.Seq, items),
        st.builds(ast.And, items),
        st.builds(ast.Or, items),
        st.builds(ast.AnyOf, st.integers(0, 4), items),
        st.builds(ast.Not, children),
        st.builds(ast.Within, children, windows),
    )


patterns = st.recursive(events, _pattern_compound, max_leaves=8)


@st.composite
def picks(draw: st.DrawFn) -> ast.Pick:
    mode = draw(st.sampled_from(list(ast.PickMode)))
    var = draw(identifiers)
    if draw(st.booleans()):
        return ast.Pick(mode, var, draw(windows), draw(identifiers))
    return ast.Pick(mode, var)


consumes = st.one_of(
    st.none(),
    st.just(ast.Consume((), True)),
    st.builds(ast.Consume, st.lists(identifiers, min_size=1, max_size=3).map(tuple)),
)
return_items = st.builds(ast.ReturnItem, exprs, st.one_of(st.none(), any_names))

queries = st.builds(
    ast.Query,
    pattern=patterns,
    name=st.one_of(st.none(), any_names),
    where=st.one_of(st.none(), exprs),
    partition_by=st.lists(any_names, max_size=2).map(tuple),
    within=st.one_of(st.none(), windows),
    strategy=st.one_of(st.none(), st.sampled_from(list(ast.Strategy))),
    picks=st.lists(picks(), max_size=2).map(tuple),
    consume=consumes,
    emit=st.one_of(st.none(), st.sampled_from(list(ast.Emit))),
    returns=st.lists(return_items, max_size=3).map(tuple),
    return_type=st.one_of(st.none(), any_names),
)

#: Words and symbols of every dialect, for token-soup inputs.
VOCABULARY = (
    "PATTERN", "WHERE", "WITHIN", "PARTITION", "BY", "USING", "PICK", "CONSUME", "EMIT",
    "RETURN", "NAME", "SEQ", "AND", "OR", "ANY", "NOT", "ALL", "AS", "TYPE", "FIRST", "LAST",
    "EACH", "FROM", "RECENT", "SELECT", "FILTER", "CONSUMING", "WITH", "Sequence",
    "Conjunction", "Disjunction", "BETWEEN", "IN", "LIKE", "IS", "NULL", "TRUE", "TIMESTAMP",
    "INTERVAL", "matches", "skip-till-any-match", "skip-till-next-match", "strict-contiguity",
    "seconds", "events", "UNIT", "ms", "count", "sum", "first", "last", "i", "A", "B", "a",
    "b", "E1", "147073", "0", "5", "1.5", "'s'", '"T"', "(", ")", "[", "]", "{", "}", ",",
    ";", "&", "|", "!", "+", "-", "*", "/", "%", "=", "<", ">", "<=", "!=", ".", "^", "\n",
    "$5", "80%", "(Constr.1)", "[]", "--",
)
token_soup = st.lists(st.sampled_from(VOCABULARY), max_size=30).map(" ".join)
