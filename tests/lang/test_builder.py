"""The builder returns exactly the parser's AST; text and nodes are interchangeable."""

from __future__ import annotations

import pytest

from kleene import ast
from kleene.builder import (
    and_,
    any_,
    event,
    not_,
    or_,
    parse_expr,
    plus,
    query,
    repeat,
    seq,
    star,
    window,
)
from kleene.errors import QuerySyntaxError, QueryValidationError
from kleene.lang import parse, to_text
from kleene.semantic import analyze


def test_issue_example() -> None:
    q = seq(event("Stock", "a"), plus(event("Stock", "b"))).where("a.price > 10").within(
        minutes=10)
    assert q.build() == parse(
        "PATTERN SEQ(Stock a, Stock+ b[]) WHERE a.price > 10 WITHIN 10 minutes")


def test_text_and_nodes_are_interchangeable() -> None:
    by_nodes = seq(event("A", "a"), plus(event("B", "b")), event("C", "c"))
    by_text = seq("A a", "B+ b[]", "C c")
    mixed = seq(ast.EventPattern("A", "a"), "B+ b[]", event("C", "c"))
    expected = parse("PATTERN SEQ(A a, B+ b[], C c)")
    assert by_nodes.build() == by_text.build() == mixed.build() == expected
    cond = ast.Binary(">", ast.AttrRef("a", "x"), ast.Literal(1))
    assert by_text.where(cond).build() == by_text.where("a.x > 1").build()


def test_every_pattern_operator() -> None:
    q = seq(
        "A a",
        window(and_("B b", "C c"), seconds=5),
        not_("D d"),
        or_("E e", "F f"),
        any_(2, "G g", "H h", "I i"),
        star("J j"),
        repeat(event("K", "k"), 2, 4),
        plus(seq("L l", "M m")),
        event(None, "n"),
    )
    assert q.build() == parse(
        "PATTERN SEQ(A a, AND(B b, C c) WITHIN 5 seconds, NOT(D d), OR(E e, F f), "
        "ANY(2, G g, H h, I i), J* j[], K{2,4} k[], SEQ(L l, M m)+, ANY n)")


def test_every_clause() -> None:
    q = (query("SEQ(A a, B+ b[], C c)")
         .named("full")
         .where("[symbol]", "b[i].x > b[i-1].x")
         .where("c.x > a.x")
         .partition_by("venue")
         .within(1.5, "hours")
         .using("skip-till-next-match")
         .pick("first", "a", within=(5, "seconds"), from_var="c")
         .pick(ast.PickMode.EACH, "c")
         .consume("a", "c")
         .emit("recent")
         .returns("a.x", ("count(b)", "n"), type_name="Rise"))
    assert q.build() == parse("""
        NAME full
        PATTERN SEQ(A a, B+ b[], C c)
        WHERE [symbol] AND b[i].x > b[i-1].x AND c.x > a.x
        PARTITION BY venue
        WITHIN 1.5 hours
        USING skip-till-next-match
        PICK FIRST a WITHIN 5 seconds FROM c, EACH c
        CONSUME a, c
        EMIT RECENT
        RETURN a.x, count(b) AS n AS TYPE Rise""")
    analyze(q.build())


@pytest.mark.parametrize(("kw", "text"), [
    ({"ms": 250}, "250 ms"), ({"seconds": 5}, "5 seconds"), ({"minutes": 10}, "10 minutes"),
    ({"hours": 1.5}, "1.5 hours"), ({"days": 2}, "2 days"), ({"events": 7}, "7 events"),
])
def test_window_keywords(kw: dict[str, float], text: str) -> None:
    assert query("A a").within(**kw).build() == parse(f"PATTERN A a WITHIN {text}")


def test_consume_all_and_printing() -> None:
    q = query("SEQ(A a, B b)").consume(all_vars=True)
    assert q.build() == parse("PATTERN SEQ(A a, B b) CONSUME ALL")
    assert str(q) == to_text(q.build()) == "PATTERN SEQ(A a, B b)\nCONSUME ALL"


def test_builder_errors_point_at_the_fragment() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        seq("A a", "B")
    assert str(info.value) == (
        "Line 1, column 2: event type 'B' needs a variable name (write e.g. 'B x'); "
        "expected a variable name\n  B\n   ^")
    with pytest.raises(QuerySyntaxError, match="expected end of text"):
        parse_expr("a.x > 1 b")
    with pytest.raises(QueryValidationError, match="exactly one window length"):
        query("A a").within(seconds=1, minutes=2)
    with pytest.raises(QuerySyntaxError, match="unknown selection strategy"):
        query("A a").using("skip-till-some-match")
    with pytest.raises(TypeError):
        seq(42)  # type: ignore[arg-type]


def test_builder_queries_validate_like_parsed_ones() -> None:
    with pytest.raises(QueryValidationError, match="variable 'a' is bound twice; rename one"):
        analyze(seq("A a", "B a").build())
