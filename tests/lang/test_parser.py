"""The parser builds the documented AST (docs/language.md): hand-written expected trees."""

from __future__ import annotations

import pytest

from kleene import ast
from kleene.ast import (
    And,
    AnyOf,
    AttrRef,
    Between,
    Binary,
    Call,
    Consume,
    Emit,
    Equivalence,
    EventPattern,
    Index,
    IndexKind,
    InList,
    IsNull,
    Kleene,
    Like,
    Literal,
    Not,
    Or,
    Pick,
    PickMode,
    ReturnItem,
    Seq,
    Strategy,
    TimeUnit,
    Unary,
    VarRef,
    Window,
    Within,
)
from kleene.errors import QuerySyntaxError
from kleene.lang import parse

A, B, C, D = (EventPattern(t, t.lower()) for t in "ABCD")


def where(text: str) -> ast.Expr | None:
    return parse(f"PATTERN SEQ(A a, B+ b[], C c) WHERE {text}").where


def pattern(text: str) -> ast.Pattern:
    return parse(f"PATTERN {text}").pattern


def test_sequence_of_events() -> None:
    assert pattern("SEQ(A a, B b, C c)") == Seq((A, B, C))


def test_kleene_forms_on_a_type() -> None:
    assert pattern("B+ b[]") == Kleene(B, 1, None)
    assert pattern("B* b[]") == Kleene(B, 0, None)
    assert pattern("B{3} b[]") == Kleene(B, 3, 3)
    assert pattern("B{2,5} b[]") == Kleene(B, 2, 5)
    assert pattern("B{2,} b[]") == Kleene(B, 2, None)
    assert pattern("B+ b") == Kleene(B, 1, None)  # the [] is optional


def test_kleene_on_groups() -> None:
    assert pattern("(SEQ(A a, B b))+") == Kleene(Seq((A, B)), 1, None)
    assert pattern("SEQ(A a, B b){2,3}") == Kleene(Seq((A, B)), 2, 3)
    assert pattern("(A a ; B b)*") == Kleene(Seq((A, B)), 0, None)


def test_composites() -> None:
    assert pattern("AND(A a, B b)") == And((A, B))
    assert pattern("OR(A a, B b)") == Or((A, B))
    assert pattern("ANY(2, A a, B b, C c)") == AnyOf(2, (A, B, C))
    assert pattern("SEQ(A a, NOT(B b), C c)") == Seq((A, Not(B), C))
    assert pattern("SEQ(A a, !B b, C c)") == Seq((A, Not(B), C))


def test_infix_precedence_or_loosest_then_seq_then_and() -> None:
    assert pattern("A a ; B b & C c | D d") == Or((Seq((A, And((B, C)))), D))
    assert pattern("A a ; (B b | C c)") == Seq((A, Or((B, C))))
    assert pattern("A a ; B b ; C c") == Seq((A, B, C))
    assert pattern("(A a ; B b) ; C c") == Seq((Seq((A, B)), C))


def test_window_on_a_sub_pattern() -> None:
    q = parse("PATTERN SEQ(A a, AND(B b, C c) WITHIN 5 seconds, D d) WITHIN 1 minute")
    assert q.pattern == Seq((A, Within(And((B, C)), Window(5, TimeUnit.SECONDS)), D))
    assert q.within == Window(1, TimeUnit.MINUTES)


def test_top_level_within_is_the_query_window() -> None:
    q = parse("PATTERN A a ; B b WITHIN 10 events")
    assert q.pattern == Seq((A, B))
    assert q.within == Window(10, TimeUnit.EVENTS)


def test_event_type_spellings() -> None:
    assert pattern("147073 t") == EventPattern("147073", "t")
    assert pattern("'Stock Quote' s") == EventPattern("Stock Quote", "s")
    assert pattern('"SEQ" s') == EventPattern("SEQ", "s")
    assert pattern("ANY x") == EventPattern(None, "x")


@pytest.mark.parametrize(("text", "amount", "unit"), [
    ("5 ms", 5, TimeUnit.MILLISECONDS), ("5 milliseconds", 5, TimeUnit.MILLISECONDS),
    ("2 s", 2, TimeUnit.SECONDS), ("2 sec", 2, TimeUnit.SECONDS),
    ("1 second", 1, TimeUnit.SECONDS), ("3 min", 3, TimeUnit.MINUTES),
    ("3 mins", 3, TimeUnit.MINUTES), ("3 minutes", 3, TimeUnit.MINUTES),
    ("1.5 hours", 1.5, TimeUnit.HOURS), ("2 h", 2, TimeUnit.HOURS),
    ("1 day", 1, TimeUnit.DAYS), ("7 days", 7, TimeUnit.DAYS),
    ("10 EVENTS", 10, TimeUnit.EVENTS), ("10 UNIT", 10, TimeUnit.EVENTS),
    ("10 units", 10, TimeUnit.EVENTS),
])
def test_time_units(text: str, amount: float, unit: TimeUnit) -> None:
    assert parse(f"PATTERN A a WITHIN {text}").within == Window(amount, unit)


def test_window_microseconds() -> None:
    w = parse("PATTERN A a WITHIN 1.5 hours").within
    assert w is not None and w.microseconds == 5_400_000_000


def test_keywords_are_case_insensitive_identifiers_are_not() -> None:
    q1 = parse("pattern seq(A a, b+ B[]) where a.X > 1 within 5 SECONDS using SKIP-TILL-NEXT-MATCH")
    assert q1.pattern == Seq((A, Kleene(EventPattern("b", "B"), 1, None)))
    assert q1.where == Binary(">", AttrRef("a", "X"), Literal(1))
    assert q1.strategy is Strategy.SKIP_TILL_NEXT_MATCH


def test_comments_are_ignored() -> None:
    q = parse("-- rising prices\nPATTERN SEQ(A a, B b) -- two events\nWHERE a.x < b.x -- rising")
    assert q == parse("PATTERN SEQ(A a, B b) WHERE a.x < b.x")


def test_arithmetic_precedence_and_associativity() -> None:
    x, y, z = AttrRef("a", "x"), AttrRef("a", "y"), AttrRef("a", "z")
    assert where("a.x + a.y * a.z > 0") == Binary(">", Binary("+", x, Binary("*", y, z)),
                                                  Literal(0))
    assert where("a.x - a.y - a.z > 0") == Binary(">", Binary("-", Binary("-", x, y), z),
                                                  Literal(0))
    assert where("a.x % 2 = 1") == Binary("=", Binary("%", x, Literal(2)), Literal(1))


def test_comparison_operators_and_normalisation() -> None:
    x = AttrRef("a", "x")
    assert where("a.x <> 1") == Binary("!=", x, Literal(1))
    assert where("a.x == 1") == Binary("=", x, Literal(1))
    for op in ("=", "!=", "<", "<=", ">", ">="):
        assert where(f"a.x {op} 1") == Binary(op, x, Literal(1))


def test_chained_comparison_desugars_to_and() -> None:
    p = AttrRef("a", "p")
    assert where("20 < a.p < 50") == Binary("and", Binary("<", Literal(20), p),
                                            Binary("<", p, Literal(50)))
    assert where("1 <= a.p <= 2 < 3") == Binary(
        "and",
        Binary("and", Binary("<=", Literal(1), p), Binary("<=", p, Literal(2))),
        Binary("<", Literal(2), Literal(3)))


def test_boolean_operators_precedence() -> None:
    t1, t2, t3 = (Binary(">", AttrRef("a", n), Literal(0)) for n in "xyz")
    assert where("a.x > 0 OR a.y > 0 AND a.z > 0") == Binary("or", t1, Binary("and", t2, t3))
    assert where("NOT a.x > 0 AND a.y > 0") == Binary("and", Unary("not", t1), t2)
    assert where("(a.x > 0 OR a.y > 0) AND a.z > 0") == Binary("and", Binary("or", t1, t2), t3)


def test_sql_predicates() -> None:
    x = AttrRef("a", "x")
    assert where("a.x BETWEEN 1 AND 5") == Between(x, Literal(1), Literal(5))
    assert where("a.x NOT BETWEEN 1 AND 5") == Between(x, Literal(1), Literal(5), True)
    assert where("a.x IN (1, 'b')") == InList(x, (Literal(1), Literal("b")))
    assert where("a.x NOT IN (1)") == InList(x, (Literal(1),), True)
    assert where("a.x LIKE 'IB%'") == Like(x, Literal("IB%"))
    assert where("a.x NOT LIKE 'IB%'") == Like(x, Literal("IB%"), True)
    assert where("a.x IS NULL") == IsNull(x)
    assert where("a.x IS NOT NULL") == IsNull(x, True)


def test_literals() -> None:
    x = AttrRef("a", "x")
    assert where("a.x = 'it''s'") == Binary("=", x, Literal("it's"))
    assert where('a.x = "double"') == Binary("=", x, Literal("double"))
    assert where("a.x = 1.25") == Binary("=", x, Literal(1.25))
    assert where("a.x = -3") == Binary("=", x, Literal(-3))
    assert where("a.x = 2e3") == Binary("=", x, Literal(2000.0))
    assert where("a.x = TRUE") == Binary("=", x, Literal(True))
    assert where("a.x = false") == Binary("=", x, Literal(False))
    assert where("a.x = NULL") == Binary("=", x, Literal(None))
    assert where("a.x = -(3)") == Binary("=", x, Unary("-", Literal(3)))


def test_timestamps_and_intervals_are_microseconds() -> None:
    x = AttrRef("a", "x")
    assert where("a.x > TIMESTAMP '1970-01-01 00:00:01'") == Binary(
        ">", x, Literal(1_000_000, "timestamp"))
    assert where("a.x > TIMESTAMP '2024-01-01T01:00:00+01:00'") == Binary(
        ">", x, Literal(1_704_067_200_000_000, "timestamp"))
    assert where("a.x < INTERVAL 1.5 minutes") == Binary("<", x, Literal(90_000_000, "interval"))
    assert where("a.x < INTERVAL '2' ms") == Binary("<", x, Literal(2_000, "interval"))


def test_kleene_references() -> None:
    def ref(text: str) -> ast.Expr:
        e = where(f"{text} > 0")
        assert isinstance(e, Binary)
        return e.left

    assert ref("b[i].v") == AttrRef("b", "v", Index(IndexKind.CURRENT, 0))
    assert ref("b[i-1].v") == AttrRef("b", "v", Index(IndexKind.CURRENT, -1))
    assert ref("b[1].v") == AttrRef("b", "v", Index(IndexKind.ABSOLUTE, 1))
    assert ref("b[3].v") == AttrRef("b", "v", Index(IndexKind.ABSOLUTE, 3))
    assert ref("b[last].v") == AttrRef("b", "v", Index(IndexKind.LAST, 0))
    assert ref("b[last-1].v") == AttrRef("b", "v", Index(IndexKind.LAST, -1))
    assert ref("last(b).v") == AttrRef("b", "v", Index(IndexKind.LAST, 0))
    assert ref("first(b).v") == AttrRef("b", "v", Index(IndexKind.FIRST, 0))
    assert ref("b.v") == AttrRef("b", "v")


def test_calls_aggregates_and_udfs() -> None:
    e = where("COUNT(b) > 2 AND Avg(b.v) < 1 AND myUdf(a.x, b) = TRUE")
    assert e == Binary("and", Binary("and",
                                     Binary(">", Call("count", (VarRef("b"),)), Literal(2)),
                                     Binary("<", Call("avg", (AttrRef("b", "v"),)), Literal(1))),
                       Binary("=", Call("myUdf", (AttrRef("a", "x"), VarRef("b"))),
                              Literal(True)))


def test_equivalence_tests() -> None:
    assert where("[symbol]") == Equivalence(("symbol",))
    assert where("[symbol, venue] AND a.x > 1") == Binary(
        "and", Equivalence(("symbol", "venue")), Binary(">", AttrRef("a", "x"), Literal(1)))


def test_all_clauses() -> None:
    q = parse("""
        NAME q1
        PATTERN SEQ(A a, B+ b[], C c)
        WHERE [s]
        PARTITION BY s, t
        WITHIN 5 minutes
        USING strict-contiguity
        PICK FIRST a WITHIN 2 seconds FROM c, EACH c
        CONSUME a, c
        EMIT RECENT
        RETURN a.x AS ax, count(b) AS TYPE Out
    """)
    assert q == ast.Query(
        pattern=Seq((A, Kleene(B, 1, None), C)),
        name="q1",
        where=Equivalence(("s",)),
        partition_by=("s", "t"),
        within=Window(5, TimeUnit.MINUTES),
        strategy=Strategy.STRICT_CONTIGUITY,
        picks=(Pick(PickMode.FIRST, "a", Window(2, TimeUnit.SECONDS), "c"),
               Pick(PickMode.EACH, "c")),
        consume=Consume(("a", "c")),
        emit=Emit.RECENT,
        returns=(ReturnItem(AttrRef("a", "x"), "ax"), ReturnItem(Call("count", (VarRef("b"),)))),
        return_type="Out",
    )


def test_consume_all_and_return_forms() -> None:
    assert parse("PATTERN A a CONSUME ALL").consume == Consume((), True)
    q = parse("PATTERN A a RETURN * AS TYPE Alert")
    assert (q.returns, q.return_type) == ((), "Alert")
    q = parse("PATTERN A a RETURN a.x AS y AS Alert")  # a second AS names the type
    assert (q.returns, q.return_type) == ((ReturnItem(AttrRef("a", "x"), "y"),), "Alert")


def test_spans_point_into_the_source() -> None:
    text = "PATTERN SEQ(A a, B b)\nWHERE a.x > 1"
    q = parse(text)
    assert q.source == text
    assert isinstance(q.pattern, Seq)
    b = q.pattern.items[1]
    assert b.span is not None and text[b.span.start:b.span.end] == "B b"
    assert (b.span.line, b.span.col) == (1, 18)
    assert q.where is not None and q.where.span is not None
    assert (q.where.span.line, q.where.span.col) == (2, 7)
    assert text[q.where.span.start:q.where.span.end] == "a.x > 1"


def test_spans_do_not_affect_equality() -> None:
    assert parse("PATTERN   A a") == parse("PATTERN A a")


def test_non_string_input_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse(b"PATTERN A a")  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", "   ", "-- only a comment"])
def test_empty_query_is_a_syntax_error(text: str) -> None:
    with pytest.raises(QuerySyntaxError, match="a query needs a PATTERN clause"):
        parse(text)
