"""Property tests: printing round-trips every AST, and no input text makes the language layer
raise anything but QuerySyntaxError / QueryValidationError."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kleene import ast
from kleene.errors import QuerySyntaxError, QueryValidationError
from kleene.lang import parse, to_text
from kleene.lang.dialects import DIALECTS
from kleene.semantic import analyze

from . import strategies as S
from .fixtures import load

DIALECT_NAMES = [None, *DIALECTS]
SEEDS = [f.text for d in ("canonical", "sase", "faem", "logpp", "cem", "snoop")
         for f in load(f"{d}.txt")]
FUZZ = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def parse_and_analyze(text: str, dialect: str | None) -> None:
    """Run the whole language layer; only the two query errors may escape."""
    try:
        q = parse(text, dialect=dialect)
    except QuerySyntaxError as err:
        assert str(err)
        return
    try:
        analyze(q, udfs={"matches": lambda *a: None})
    except QueryValidationError as err:
        assert str(err)
        return
    # Whatever parsed and validated prints and parses back to the same tree.
    assert parse(to_text(q)) == q


@FUZZ
@given(S.queries)
def test_printing_round_trips_any_ast(query: ast.Query) -> None:
    text = to_text(query)
    assert parse(text, dialect="canonical") == query


@FUZZ
@given(S.exprs)
def test_expression_printing_round_trips(expr: ast.Expr) -> None:
    q = ast.Query(pattern=ast.EventPattern("A", "a"), where=expr)
    assert parse(to_text(q)).where == expr


@FUZZ
@given(st.text(max_size=80), st.sampled_from(DIALECT_NAMES))
def test_arbitrary_text(text: str, dialect: str | None) -> None:
    parse_and_analyze(text, dialect)


@FUZZ
@given(S.token_soup, st.sampled_from(DIALECT_NAMES))
def test_token_soup(text: str, dialect: str | None) -> None:
    parse_and_analyze(text, dialect)


@st.composite
def mutated_seed(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 3))):
        if not text:
            break
        i = draw(st.integers(0, len(text) - 1))
        j = draw(st.integers(i, min(len(text), i + 8)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "swap"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + " " + draw(st.sampled_from(S.VOCABULARY)) + " " + text[i:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            k = draw(st.integers(0, len(text) - 1))
            a, b = sorted((i, k))
            text = text[:a] + text[b] + text[a + 1:b] + text[a] + text[b + 1:]
    return text


@FUZZ
@given(mutated_seed(), st.sampled_from(DIALECT_NAMES))
def test_mutated_seed_queries(text: str, dialect: str | None) -> None:
    parse_and_analyze(text, dialect)


def test_deep_nesting_is_a_syntax_error_not_a_crash() -> None:
    for text in ("PATTERN A a WHERE " + "(" * 5000 + "a.x", "PATTERN " + "!" * 5000 + "A a",
                 "PATTERN A a WHERE " + "NOT " * 5000 + "a.x", "SEQ(" * 3000,
                 "PATTERN A a WHERE " + " AND ".join(["a.x > 1"] * 3000),
                 "PATTERN A a WHERE " + "-" * 3000 + "a.x"):
        for dialect in DIALECT_NAMES:
            try:
                parse(text, dialect=dialect)
            except QuerySyntaxError as err:
                assert "deep" in str(err) or "unexpected" in str(err) or "expected" in str(err)
