"""Time and count windows, on the query and on sub-patterns (§7)."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

CASES = [
    case("time window is inclusive",
         "PATTERN SEQ(A a, B b) WITHIN 2 seconds",
         """
         ts  1   3   4
             a1  b1  b2
         """,
         ["a=a1 b=b1"]),
    case("count window: pos(last) - pos(first) < n, every type counts",
         "PATTERN SEQ(A a, B b) WITHIN 3 EVENTS",
         """
         ts  1   2   3   4
             a1  c1  b1  b2
         """,
         ["a=a1 b=b1"]),
    case("milliseconds",
         "PATTERN SEQ(A a, B b) WITHIN 500 milliseconds",
         "a1@1 b1@1.5 b2@1.6",
         ["a=a1 b=b1"]),
    case("window over a Kleene list",
         "PATTERN SEQ(A a, B+ b[]) WITHIN 2 seconds",
         """
         ts  1   2   3   4
             a1  b1  b2  b3
         """,
         ["a=a1 b=[b1]", "a=a1 b=[b2]", "a=a1 b=[b1 b2]"]),
    case("window on a sub-pattern applies to its events only",
         "PATTERN SEQ(A a, AND(B b, C c) WITHIN 1 seconds)",
         """
         ts  1   2   4   5
             a1  b1  c1  b2
         """,
         ["a=a1 b=b2 c=c1"]),
    case("sub-pattern window and query window together",
         "PATTERN SEQ(A a, AND(B b, C c) WITHIN 1 seconds) WITHIN 3 seconds",
         """
         ts  1   2   4   5
             a1  b1  c1  b2
         """,
         []),
    case("minutes",
         "PATTERN SEQ(A a, B b) WITHIN 1 minutes",
         "a1@0 b1@60 b2@61",
         ["a=a1 b=b1"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_windows(backend: BackendFn, c: Case) -> None:
    c.check(backend)
