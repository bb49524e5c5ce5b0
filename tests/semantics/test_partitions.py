"""PARTITION BY and equivalence [attr] (§1, §6)."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

U, V = {"k": "u"}, {"k": "v"}

CASES = [
    case("partition by: events pair within their partition",
         "PATTERN SEQ(A a, B b) PARTITION BY k",
         """
         ts  1   2   3   4
             a1  a2  b1  b2
         """,
         ["a=a1 b=b1", "a=a2 b=b2"],
         a1=U, a2=V, b1=U, b2=V),
    case("equivalence [k] gives the same matches",
         "PATTERN SEQ(A a, B b) WHERE [k]",
         """
         ts  1   2   3   4
             a1  a2  b1  b2
         """,
         ["a=a1 b=b1", "a=a2 b=b2"],
         a1=U, a2=V, b1=U, b2=V),
    case("output order uses global positions across partitions",
         "PATTERN SEQ(A a, B b) PARTITION BY k",
         """
         ts  1   2   3   4
             a1  a2  b2  b1
         """,
         ["a=a2 b=b2", "a=a1 b=b1"],
         a1=U, a2=V, b1=U, b2=V),
    case("NULL is a partition of its own",
         "PATTERN SEQ(A a, B b) PARTITION BY k",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=b1"],
         b2=U),
    case("NULL equals NULL for equivalence",
         "PATTERN SEQ(A a, B b) WHERE [k]",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=b1"],
         b2=U),
    case("count windows use positions inside the partition",
         "PATTERN SEQ(A a, B b) PARTITION BY k WITHIN 2 EVENTS",
         """
         ts  1   2   3   4
             a1  x1  x2  b1
         """,
         ["a=a1 b=b1"],
         a1=U, x1=V, x2=V, b1=U),
    case("without PARTITION BY the same count window is global",
         "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 2 EVENTS",
         """
         ts  1   2   3   4
             a1  x1  x2  b1
         """,
         [],
         a1=U, x1=V, x2=V, b1=U),
    case("strict contiguity inside the partition",
         "PATTERN SEQ(A a, B b) PARTITION BY k USING strict-contiguity",
         """
         ts  1   2   3
             a1  x1  b1
         """,
         ["a=a1 b=b1"],
         a1=U, x1=V, b1=U),
    case("negation only sees the partition",
         "PATTERN SEQ(A a, NOT(C c), B b) PARTITION BY k",
         """
         ts  1   2   3
             a1  c1  b1
         """,
         ["a=a1 b=b1"],
         a1=U, c1=V, b1=U),
    case("equivalence on two attributes",
         "PATTERN SEQ(A a, B b) WHERE [k, j]",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=b2"],
         a1={"k": "u", "j": 1}, b1={"k": "u", "j": 2}, b2={"k": "u", "j": 1}),
    case("equivalence covers Kleene elements",
         "PATTERN SEQ(A a, B+ b[]) WHERE [k]",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=[b2]"],
         a1=U, b1=V, b2=U),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_partitions(backend: BackendFn, c: Case) -> None:
    c.check(backend)
