"""Equal timestamps are ordered by input position (§1, §12)."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

CASES = [
    case("tied events keep input order",
         "PATTERN SEQ(A a, B b)",
         "a1@1 b1@1 b2@1",
         ["a=a1 b=b1", "a=a1 b=b2"]),
    case("a tie does not make a sequence when input order is reversed",
         "PATTERN SEQ(A a, B b)",
         "b1@1 a1@1",
         []),
    case("a drawn tie: the upper row comes first",
         "PATTERN SEQ(B x, B y)",
         """
         ts  1   2
             a1  b1
                 b2
         """,
         ["x=b1 y=b2"]),
    case("tied events span a window of length 0",
         "PATTERN SEQ(A a, B b) WITHIN 1 milliseconds",
         "a1@1 b1@1 b2@2",
         ["a=a1 b=b1"]),
    case("a tied C before b in input order is between a and b",
         "PATTERN SEQ(A a, NOT(C c), B b)",
         "a1@1 c1@2 b1@2",
         []),
    case("a tied C after b in input order is not",
         "PATTERN SEQ(A a, NOT(C c), B b)",
         "a1@1 b1@2 c1@2",
         ["a=a1 b=b1"]),
    case("a tied C before b is not in a trailing NOT's tail",
         "PATTERN SEQ(A a, B b, NOT(C c)) WITHIN 2 seconds",
         "a1@1 c1@2 b1@2",
         ["a=a1 b=b1"]),
    case("strict contiguity follows input order among ties",
         "PATTERN SEQ(A a, B b) USING strict-contiguity",
         "a1@1 c1@1 b1@1 b2@1",
         []),
    case("input order is kept even when timestamps go backwards in the input",
         "PATTERN SEQ(A a, B b)",
         "b1@2 a1@1",
         ["a=a1 b=b1"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_ties(backend: BackendFn, c: Case) -> None:
    c.check(backend)
