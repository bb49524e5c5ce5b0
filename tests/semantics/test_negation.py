"""NOT between positive parts, leading and trailing NOT with windows, NOT inside AND (§4)."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

CASES = [
    case("a qualifying C between a and b kills the match",
         "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x > a.x",
         """
         ts  1   2   3   4
             a1  c1  b1  b2
         """,
         [],
         a1={"x": 5}, c1={"x": 9}),
    case("a C that fails the negation's condition does not",
         "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x > a.x",
         """
         ts  1   2   3   4
             a1  c1  b1  b2
         """,
         ["a=a1 b=b1", "a=a1 b=b2"],
         a1={"x": 5}, c1={"x": 1}),
    case("only the interval strictly between counts",
         "PATTERN SEQ(A a, NOT(C c), B b)",
         """
         ts  1   2   3   4   5
             a1  c1  b1  a2  b2
         """,
         ["a=a2 b=b2"]),
    case("a NOT at the edge of a nested SEQ is between its neighbours (SEQ is flattened)",
         "PATTERN SEQ(A a, SEQ(NOT(C c), B b))",
         """
         ts  1   2   3   4   5
             a1  c1  b1  a2  b2
         """,
         ["a=a2 b=b2"]),
    case("! is NOT",
         "PATTERN SEQ(A a, !C c, B b)",
         """
         ts  1   2   3   4   5
             a1  c1  b1  a2  b2
         """,
         ["a=a2 b=b2"]),
    case("NOT of an OR of events",
         "PATTERN SEQ(A a, NOT(OR(C c, D d)), B b)",
         """
         ts  1   2   3   4   5
             a1  d1  b1  a2  b2
         """,
         ["a=a2 b=b2"]),
    case("two NOTs in a row share the interval",
         "PATTERN SEQ(A a, NOT(C c), NOT(D d), B b)",
         """
         ts  1   2   3   4   5   6
             a1  d1  b1  a2  c1  b2
         """,
         []),
    case("NOT after a Kleene: from the last element on",
         "PATTERN SEQ(A a, B+ b[], NOT(C c), D d)",
         """
         ts  1   2   3   4   5
             a1  b1  c1  b2  d1
         """,
         ["a=a1 b=[b2] d=d1", "a=a1 b=[b1 b2] d=d1"]),
    case("leading NOT: only the lead-in of the window counts",
         "PATTERN SEQ(NOT(C c), A a, B b) WITHIN 3 seconds",
         """
         ts  1   2   3   5
             c1  a1  c2  b1
         """,
         ["a=a1 b=b1"]),
    case("leading NOT: the lead-in bound is inclusive",
         "PATTERN SEQ(NOT(C c), A a, B b) WITHIN 3 seconds",
         """
         ts  2   4   5
             c1  a1  b1
         """,
         []),
    case("leading NOT with a count window",
         "PATTERN SEQ(NOT(C c), A a, B b) WITHIN 3 EVENTS",
         """
         ts  1   2   3
             c1  a1  b1
         """,
         []),
    case("leading NOT with a count window: outside the lead-in",
         "PATTERN SEQ(NOT(C c), A a, B b) WITHIN 3 EVENTS",
         """
         ts  1   2   3   4
             c1  x1  a1  b1
         """,
         ["a=a1 b=b1"]),
    case("trailing NOT: the tail bound is inclusive",
         "PATTERN SEQ(A a, B b, NOT(C c)) WITHIN 4 seconds",
         """
         ts  1   2   5   6
             a1  b1  c1  c2
         """,
         []),
    case("trailing NOT: a C after the tail does not matter",
         "PATTERN SEQ(A a, B b, NOT(C c)) WITHIN 4 seconds",
         """
         ts  1   2   6
             a1  b1  c1
         """,
         ["a=a1 b=b1"]),
    case("trailing NOT with a count window",
         "PATTERN SEQ(A a, B b, NOT(C c)) WITHIN 3 EVENTS",
         """
         ts  1   2   3
             a1  b1  c1
         """,
         []),
    case("trailing NOT with a count window: a C beyond it",
         "PATTERN SEQ(A a, B b, NOT(C c)) WITHIN 3 EVENTS",
         """
         ts  1   2   3   4
             a1  b1  x1  c1
         """,
         ["a=a1 b=b1"]),
    case("leading NOT only sees the partition",
         "PATTERN SEQ(NOT(C c), A a, B b) PARTITION BY k WITHIN 3 seconds",
         """
         ts  2   3   4
             c1  a1  b1
         """,
         ["a=a1 b=b1"],
         c1={"k": "v"}, a1={"k": "u"}, b1={"k": "u"}),
    case("NOT inside AND: between the first and last event of the block",
         "PATTERN AND(A a, B b, NOT(C c))",
         """
         ts  1   2   3   4
             b1  c1  a1  b2
         """,
         ["a=a1 b=b2"]),
    case("negation under equivalence only sees events with the match's value",
         "PATTERN SEQ(A a, NOT(C c), B b) WHERE [k]",
         """
         ts  1   2   3   4
             a1  c1  b1  b2
         """,
         ["a=a1 b=b2"],
         a1={"k": "u"}, c1={"k": "v"}, b1={"k": "v"}, b2={"k": "u"}),
    case("a negation condition on a Kleene variable holds for every element",
         "PATTERN SEQ(A+ a[], NOT(C c), B b) WHERE c.x > a.x",
         """
         ts  1   2   3   4
             a1  a2  c1  b1
         """,
         ["a=[a1 a2] b=b1", "a=[a2] b=b1"],
         a1={"x": 1}, a2={"x": 5}, c1={"x": 3}),
    case("NOT of a sequence forbids an occurrence of the whole sequence",
         "PATTERN SEQ(A a, NOT(SEQ(B b, C c)), D d)",
         """
         ts  1   2   3   4   5   6   7   8
             a1  c1  b1  d1  a2  b2  c2  d2
         """,
         ["a=a1 d=d1"]),
    case("NOT of a repetition forbids that many events",
         "PATTERN SEQ(A a, NOT(B{2} b[]), D d)",
         """
         ts  1   2   3   4   5   6   7
             a1  b1  d1  a2  b2  b3  d2
         """,
         ["a=a1 d=d1"]),
    case("the negated variable's condition may use several positive variables",
         "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x BETWEEN a.x AND b.x",
         """
         ts  1   2   3   4
             a1  c1  b1  b2
         """,
         ["a=a1 b=b1"],
         a1={"x": 1}, c1={"x": 5}, b1={"x": 3}, b2={"x": 9}),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_negation(backend: BackendFn, c: Case) -> None:
    c.check(backend)
