"""RETURN values, default names, NULLs and the match's start / end (§11)."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case, events, run

CASES = [
    case("scalars, aggregates and elementwise lists",
         "PATTERN SEQ(A a, B+ b[]) RETURN a.x AS ax, count(b) AS n, b.x AS xs",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=[b1]", "a=a1 b=[b2]", "a=a1 b=[b1 b2]"],
         values=[{"ax": 1, "n": 1, "xs": [2]}, {"ax": 1, "n": 1, "xs": [3]},
                 {"ax": 1, "n": 2, "xs": [2, 3]}],
         a1={"x": 1}, b1={"x": 2}, b2={"x": 3}),
    case("default names are the canonical expression text",
         "PATTERN SEQ(A a, B+ b[]) RETURN a.x, sum(b.x), b[last].x",
         """
         ts  1   2
             a1  b1
         """,
         ["a=a1 b=[b1]"],
         values=[{"a.x": 1, "sum(b.x)": 2, "b[last].x": 2}],
         a1={"x": 1}, b1={"x": 2}),
    case("NULLs: missing attribute, division by zero",
         "PATTERN SEQ(A a, B b) RETURN a.nope AS m, a.x / b.x AS q, b.x / a.x AS r",
         """
         ts  1   2
             a1  b1
         """,
         ["a=a1 b=b1"],
         values=[{"m": None, "q": None, "r": 0.0}],
         a1={"x": 4, "nope": None}, b1={"x": 0}),
    case("an unbound branch variable returns NULL",
         "PATTERN SEQ(A a, OR(B b, C c)) RETURN b.x AS bx, c.x AS cx",
         """
         ts  1   2
             a1  c1
         """,
         ["a=a1 c=c1"],
         values=[{"bx": None, "cx": 7}],
         c1={"x": 7}),
    case("true division and Python modulo",
         "PATTERN A a RETURN a.x / 2 AS half, a.x % 3 AS m",
         "a1@1",
         ["a=a1"],
         values=[{"half": -3.5, "m": 2}],
         a1={"x": -7}),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_return(backend: BackendFn, c: Case) -> None:
    c.check(backend)


def test_start_and_end_are_first_and_last_positive_timestamps(backend: BackendFn) -> None:
    ms = run(backend, "PATTERN SEQ(A a, NOT(C c), B+ b[]) WHERE c.x > 100",
             events("a1@1 c1@2 b1@3 b2@5"))
    assert [(m.start, m.end) for m in ms] == [
        (1_000_000, 3_000_000), (1_000_000, 5_000_000), (1_000_000, 5_000_000)]


def test_match_query_name(backend: BackendFn) -> None:
    ms = run(backend, "NAME pairs PATTERN SEQ(A a, B b)", events("a1@1 b1@2"))
    assert [m.query for m in ms] == ["pairs"]
