"""Kleene closure, Kleene references, aggregates and repeated groups (§3, §5)."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

CASES = [
    case("plus: every subsequence is its own match",
         "PATTERN SEQ(A a, B+ b[], C c)",
         """
         ts  1   2   3   4
             a1  b1  b2  c1
         """,
         ["a=a1 b=[b1] c=c1", "a=a1 b=[b2] c=c1", "a=a1 b=[b1 b2] c=c1"]),
    case("star may bind nothing",
         "PATTERN SEQ(A a, B* b[], C c)",
         """
         ts  1   2
             a1  c1
         """,
         ["a=a1 b=[] c=c1"]),
    case("star: the empty and the non-empty list",
         "PATTERN SEQ(A a, B* b[], C c)",
         """
         ts  1   2   3
             a1  b1  c1
         """,
         ["a=a1 b=[] c=c1", "a=a1 b=[b1] c=c1"]),
    case("exactly n",
         "PATTERN SEQ(A a, B{2} b[])",
         """
         ts  1   2   3   4
             a1  b1  b2  b3
         """,
         ["a=a1 b=[b1 b2]", "a=a1 b=[b1 b3]", "a=a1 b=[b2 b3]"]),
    case("between n and m",
         "PATTERN SEQ(A a, B{1,2} b[])",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=[b1]", "a=a1 b=[b2]", "a=a1 b=[b1 b2]"]),
    case("b[i] vs b[i-1] and unindexed b: every element / every pair",
         "PATTERN SEQ(A a, B+ b[]) WHERE b[i].x > b[i-1].x AND b.x > a.x",
         """
         ts  1   2   3   4
             a1  b1  b2  b3
         """,
         ["a=a1 b=[b1]", "a=a1 b=[b2]", "a=a1 b=[b1 b2]", "a=a1 b=[b3]", "a=a1 b=[b1 b3]"],
         a1={"x": 0}, b1={"x": 1}, b2={"x": 3}, b3={"x": 2}),
    case("aggregates: sum and count",
         "PATTERN SEQ(A a, B+ b[]) WHERE sum(b.x) >= 5 AND count(b) <= 2",
         """
         ts  1   2   3   4
             a1  b1  b2  b3
         """,
         ["a=a1 b=[b1 b2]", "a=a1 b=[b3]", "a=a1 b=[b1 b3]", "a=a1 b=[b2 b3]"],
         b1={"x": 1}, b2={"x": 4}, b3={"x": 6}),
    case("first() and last()",
         "PATTERN SEQ(A a, B+ b[]) WHERE last(b).x - first(b).x >= 2",
         """
         ts  1   2   3   4
             a1  b1  b2  b3
         """,
         ["a=a1 b=[b1 b3]", "a=a1 b=[b2 b3]", "a=a1 b=[b1 b2 b3]"],
         b1={"x": 1}, b2={"x": 2}, b3={"x": 4}),
    case("an absolute index out of range is NULL",
         "PATTERN SEQ(A a, B+ b[]) WHERE b[2].x = 5",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=[b1 b2]"],
         b1={"x": 5}, b2={"x": 5}),
    case("b[last-1]",
         "PATTERN SEQ(A a, B+ b[]) WHERE b[last-1].x = 1",
         """
         ts  1   2   3   4
             a1  b1  b2  b3
         """,
         ["a=a1 b=[b1 b2]", "a=a1 b=[b1 b3]", "a=a1 b=[b2 b3]", "a=a1 b=[b1 b2 b3]"],
         b1={"x": 1}, b2={"x": 1}, b3={"x": 0}),
    case("avg, min and max",
         "PATTERN SEQ(A a, B+ b[]) WHERE avg(b.x) = 2 AND max(b.x) - min(b.x) = 2",
         """
         ts  1   2   3   4
             a1  b1  b2  b3
         """,
         ["a=a1 b=[b1 b3]", "a=a1 b=[b1 b2 b3]"],
         b1={"x": 1}, b2={"x": 2}, b3={"x": 3}),
    case("count of an empty star is 0",
         "PATTERN SEQ(A a, B* b[], C c) WHERE count(b) = 0",
         """
         ts  1   2   3
             a1  b1  c1
         """,
         ["a=a1 b=[] c=c1"]),
    case("repeated group: one entry per repetition",
         "PATTERN (SEQ(A a, B b)){2}",
         """
         ts  1   2   3   4
             a1  b1  a2  b2
         """,
         ["a=[a1 a2] b=[b1 b2]"]),
    case("repeated group with +",
         "PATTERN (SEQ(A a, B b))+",
         """
         ts  1   2   3   4
             a1  b1  a2  b2
         """,
         ["a=[a1] b=[b1]", "a=[a1] b=[b2]", "a=[a1 a2] b=[b1 b2]", "a=[a2] b=[b2]"]),
    case("repeated OR: each repetition takes one branch",
         "PATTERN (OR(A a, B b)){2}",
         """
         ts  1   2   3
             a1  b1  a2
         """,
         ["a=[a1] b=[b1]", "a=[a1 a2] b=[]", "a=[a2] b=[b1]"]),
    case("Kleene on the first variable",
         "PATTERN SEQ(A+ a[], B b)",
         """
         ts  1   2   3
             a1  a2  b1
         """,
         ["a=[a1] b=b1", "a=[a1 a2] b=b1", "a=[a2] b=b1"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_kleene(backend: BackendFn, c: Case) -> None:
    c.check(backend)
