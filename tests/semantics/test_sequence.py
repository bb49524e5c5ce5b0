"""SEQ: order by position, several variables of one type, WHERE, output order (§3, §10)."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

CASES = [
    case("every a before every b",
         "PATTERN SEQ(A a, B b)",
         """
         ts  1   2   3   4
             a1  b1  a2  b2
         """,
         ["a=a1 b=b1", "a=a1 b=b2", "a=a2 b=b2"]),
    case("three components",
         "PATTERN SEQ(A a, B b, C c)",
         """
         ts  1   2   3   4
             a1  b1  c1  b2
         """,
         ["a=a1 b=b1 c=c1"]),
    case("nested SEQ behaves as flattened",
         "PATTERN SEQ(A a, SEQ(B b, C c))",
         """
         ts  1   2   3   4
             a1  b1  c1  b2
         """,
         ["a=a1 b=b1 c=c1"]),
    case("a single event pattern matches every event of its type",
         "PATTERN A a",
         """
         ts  1   2   3
             a1  b1  a2
         """,
         ["a=a1", "a=a2"]),
    case("two variables of one type bind different events",
         "PATTERN SEQ(A x, A y)",
         """
         ts  1   2   3
             a1  a2  a3
         """,
         ["x=a1 y=a2", "x=a1 y=a3", "x=a2 y=a3"]),
    case("WHERE compares two variables",
         "PATTERN SEQ(A a, B b) WHERE b.x > a.x",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=b2"],
         a1={"x": 5}, b1={"x": 3}, b2={"x": 7}),
    case("reversed order is no match",
         "PATTERN SEQ(A a, B b)",
         """
         ts  1   2
             b1  a1
         """,
         []),
    case("output order: same last event, then the first event",
         "PATTERN SEQ(A a, B b)",
         """
         ts  1   2   3
             a1  a2  b1
         """,
         ["a=a1 b=b1", "a=a2 b=b1"]),
    case("output order: same last and first events, then drop the last and compare again",
         "PATTERN SEQ(A a, B b, C c, D d) WHERE b.x = c.x",
         """
         ts  1   2   3   5   6   9
             a1  b2  b3  c5  c6  d9
         """,
         ["a=a1 b=b3 c=c5 d=d9", "a=a1 b=b2 c=c6 d=d9"],
         b2={"x": 1}, c6={"x": 1}, b3={"x": 2}, c5={"x": 2}),
    case("output order: a shorter match that is a prefix after dropping last events is first",
         "PATTERN SEQ(A a, B+ b[], C c)",
         """
         ts  1   2   3   4
             a1  b1  b2  c1
         """,
         ["a=a1 b=[b1] c=c1", "a=a1 b=[b2] c=c1", "a=a1 b=[b1 b2] c=c1"]),
    case("events of other types in between are skipped (skip-till-any-match)",
         "PATTERN SEQ(A a, B b)",
         """
         ts  1   2   3   4
             a1  c1  d1  b1
         """,
         ["a=a1 b=b1"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_sequence(backend: BackendFn, c: Case) -> None:
    c.check(backend)
