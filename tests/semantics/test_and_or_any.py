"""AND, OR and ANY(k, ...) (§3), including conditions on unbound branch variables (§5)."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

CASES = [
    case("AND: any order",
         "PATTERN AND(A a, B b)",
         """
         ts  1   2   3
             b1  a1  b2
         """,
         ["a=a1 b=b1", "a=a1 b=b2"]),
    case("AND of one type: both assignments, never the same event twice",
         "PATTERN AND(A x, A y)",
         """
         ts  1   2
             a1  a2
         """,
         ["x=a1 y=a2", "x=a2 y=a1"]),
    case("AND needs disjoint events",
         "PATTERN AND(A x, A y)",
         """
         ts  1
             a1
         """,
         []),
    case("AND: items may interleave",
         "PATTERN AND(SEQ(A a, B b), C c)",
         """
         ts  1   2   3
             a1  c1  b1
         """,
         ["a=a1 b=b1 c=c1"]),
    case("AND output order",
         "PATTERN AND(A a, B b)",
         """
         ts  1   2   3
             a1  a2  b1
         """,
         ["a=a1 b=b1", "a=a2 b=b1"]),
    case("OR: exactly one branch, the other unbound",
         "PATTERN SEQ(A a, OR(B b, C c))",
         """
         ts  1   2   3
             a1  b1  c1
         """,
         ["a=a1 b=b1", "a=a1 c=c1"]),
    case("OR at the top level",
         "PATTERN OR(A a, B b)",
         """
         ts  1   2
             a1  b1
         """,
         ["a=a1", "b=b1"]),
    case("OR with a SEQ branch",
         "PATTERN SEQ(A a, OR(SEQ(B b, C c), D d))",
         """
         ts  1   2   3   4
             a1  b1  d1  c1
         """,
         ["a=a1 d=d1", "a=a1 b=b1 c=c1"]),
    case("a condition on an unbound branch variable does not apply",
         "PATTERN SEQ(A a, OR(B b, C c)) WHERE b.x > 5",
         """
         ts  1   2   3
             a1  b1  c1
         """,
         ["a=a1 c=c1"],
         b1={"x": 2}),
    case("ANY: each choice of k branches",
         "PATTERN ANY(2, A a, B b, C c)",
         """
         ts  1   2   3
             a1  b1  c1
         """,
         ["a=a1 b=b1", "a=a1 c=c1", "b=b1 c=c1"]),
    case("ANY(1, ...) is OR",
         "PATTERN ANY(1, A a, B b)",
         """
         ts  1   2
             a1  b1
         """,
         ["a=a1", "b=b1"]),
    case("ANY: branches in any order",
         "PATTERN ANY(2, A a, B b, C c)",
         """
         ts  1   2
             b1  a1
         """,
         ["a=a1 b=b1"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_and_or_any(backend: BackendFn, c: Case) -> None:
    c.check(backend)
