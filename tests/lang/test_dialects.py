"""Dialect-specific rules, each with a hand-written expected AST (docs/language.md#dialects)."""

from __future__ import annotations

import pytest

from kleene import ast
from kleene.ast import (
    And,
    AttrRef,
    Binary,
    Call,
    EventPattern,
    Kleene,
    Literal,
    Not,
    Or,
    ReturnItem,
    Seq,
    TimeUnit,
    VarRef,
    Window,
    Within,
)
from kleene.errors import QuerySyntaxError
from kleene.lang import detect_dialect, parse


def ev(t: str, v: str | None = None) -> EventPattern:
    return EventPattern(t, v or t)


@pytest.mark.parametrize(("text", "dialect"), [
    ("SELECT * FROM SEQ(E1; E2)", "snoop"),
    ("SELECT A.x PATTERN (A, B)", "logpp"),
    ("PATTERN Conjunction WITH A, B", "cem"),
    ("PATTERN SEQ(A a, B b) WHERE skip-till-any-match", "sase"),
    ("PATTERN A; B WITHIN 5 UNIT", "faem"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 seconds", None),
])
def test_detect_dialect(text: str, dialect: str | None) -> None:
    assert detect_dialect(text) == dialect


def test_dialect_names_and_aliases() -> None:
    text = "PATTERN Google; Microsoft+ WITHIN 5 UNIT"
    assert parse(text, dialect="FAEM") == parse(text, dialect="faem")
    assert parse("(A, B)", dialect="log++") == parse("(A, B)", dialect="logpp")
    with pytest.raises(QuerySyntaxError, match="unknown dialect 'esper'; choose one of: "
                                               "canonical, sase, faem, logpp, cem, snoop"):
        parse("PATTERN A a", dialect="esper")


def test_auto_detection_reports_the_canonical_error_for_canonical_text() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("PATTERN SEQ(A a, B b) WHERE a.x >")
    assert "expected an expression" in str(info.value)


def test_sase_strategy_in_where_is_lifted() -> None:
    q = parse("PATTERN SEQ(A a, B b) WHERE [id] AND skip-till-next-match AND a.x = 1",
              dialect="sase")
    assert q.strategy is ast.Strategy.SKIP_TILL_NEXT_MATCH
    assert q.where == Binary("and", ast.Equivalence(("id",)),
                             Binary("=", AttrRef("a", "x"), Literal(1)))


def test_faem_types_are_variables_and_operators() -> None:
    q = parse("PATTERN A; B and C & D | E*; F[2] WITHIN 3 UNIT", dialect="faem")
    assert q.pattern == Or((Seq((ev("A"), And((ev("B"), ev("C"), ev("D"))))),
                            Seq((Kleene(ev("E"), 0, None), Kleene(ev("F"), 2, 2)))))
    assert q.within == Window(3, TimeUnit.EVENTS)


def test_faem_numeric_types_bind_e_variables() -> None:
    q = parse("PATTERN 147073; 56437+ WITHIN 50 unit", dialect="faem")
    assert q.pattern == Seq((EventPattern("147073", "e147073"),
                             Kleene(EventPattern("56437", "e56437"), 1, None)))


def test_logpp_select_blocks_and_windows() -> None:
    q = parse("SELECT A.p AS ap, B.p AS Out PATTERN (A, (B & C; 2 seconds), !D, E^2)",
              dialect="logpp")
    assert q.pattern == Seq((ev("A"), Within(And((ev("B"), ev("C"))),
                                             Window(2, TimeUnit.SECONDS)),
                             Not(ev("D")), Kleene(ev("E"), 2, 2)))
    assert q.returns == (ReturnItem(AttrRef("A", "p"), "ap"), ReturnItem(AttrRef("B", "p")))
    assert q.return_type == "Out"


def test_cem_kinds_and_implicit_and() -> None:
    q = parse("PATTERN Disjunction WITH X, Y", dialect="cem")
    assert q.pattern == Or((ev("X"), ev("Y")))
    q = parse("PATTERN Sequence WITH X, Y WHERE [s] X.p < $5 Y.p > 1", dialect="cem")
    assert q.pattern == Seq((ev("X"), ev("Y")))
    assert q.where == Binary("and", Binary("and", ast.Equivalence(("s",)),
                                           Binary("<", AttrRef("X", "p"), Literal(5))),
                             Binary(">", AttrRef("Y", "p"), Literal(1)))


def test_snoop_event_names_types_and_filters() -> None:
    q = parse("""SELECT *
FROM SEQ(E1; ALL(E2, B); NOT(E_3); C)
WHERE FILTER
  (Constr.1) E1.type = A
  E_3.type = 'Z'
  E1.photo matches E2.photo AND
  E2.score > 80%
PICK each E2, first E1 within 2 seconds from E2
WITHIN 1 minute
RETURN Alarm raised E1, E2
CONSUMING E1""", dialect="snoop")
    assert q.pattern == Seq((EventPattern("A", "E1"),
                             And((EventPattern(None, "E2"), ev("B"))),
                             Not(EventPattern("Z", "E_3")), ev("C")))
    assert q.where == Binary(
        "and",
        Call("matches", (AttrRef("E1", "photo"), AttrRef("E2", "photo"))),
        Binary(">", AttrRef("E2", "score"), Literal(0.8)))
    assert [(p.mode, p.var, p.within, p.from_var) for p in q.picks] == [
        (ast.PickMode.EACH, "E2", None, None),
        (ast.PickMode.FIRST, "E1", Window(2, TimeUnit.SECONDS), "E2")]
    assert q.within == Window(1, TimeUnit.MINUTES)
    assert q.returns == (ReturnItem(VarRef("E1")), ReturnItem(VarRef("E2")))
    assert q.return_type == "Alarm raised"
    assert q.consume == ast.Consume(("E1",))


def test_snoop_repeated_names_are_renumbered() -> None:
    q = parse("OR(SEQ(A; D), SEQ(A; B))", dialect="snoop")
    assert q.pattern == Or((Seq((ev("A"), ev("D"))), Seq((EventPattern("A", "A_2"), ev("B")))))


def test_dialect_spans_point_into_the_original_text() -> None:
    text = "PATTERN Sequence WITH A, B WHERE $5 < A.p AND B.q = 'x'"
    q = parse(text, dialect="cem")
    assert q.source == text
    assert q.where is not None and q.where.span is not None
    # the currency sign is blanked out, so the condition starts at the number
    assert text[q.where.span.start:q.where.span.end] == "5 < A.p AND B.q = 'x'"
