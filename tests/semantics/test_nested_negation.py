"""Nested negation: a NOT inside a NOT's body (docs/semantics.md 4, "Nested negation")."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

ISSUE = "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), E e) WITHIN 10 seconds"
KC = ("PATTERN SEQ(A a, AND(B b, NOT(SEQ(F f, O o, NOT(AND(V v, W w)))), G g, NOT(L+ l[]))) "
      "WITHIN 3 minutes")
"""OpenCEP's NestedNegationWithKCTest: AAPL a, AND(AMZN b, NOT(SEQ(FB, ORLY, NOT(AND(DRIV,
AVID)))), GOOG g, NOT(LOCM+)) within 3 minutes, with one-letter types."""

CASES = [
    case("issue 17 item 14: a C between b and d makes b..d no occurrence",
         ISSUE,
         """
         ts  1   2   3   4   5   6   7   8   9
             a1  b1  c1  d1  e1  a2  b2  d2  e2
         """,
         ["a=a1 e=e1"]),
    case("without the inner C, b..d is an occurrence and excludes the match",
         ISSUE,
         """
         ts  1   2   4   5
             a1  b1  d1  e1
         """,
         []),
    case("a C outside b..d does not help",
         ISSUE,
         """
         ts  1   2   3   4   5
             a1  c1  b1  d1  e1
         """,
         []),
    case("every B..D pair of the interval must have its C",
         ISSUE,
         """
         ts  1   2   3   4   5   6   7
             a1  b1  c1  b2  d1  e1  e2
         """,
         []),
    case("a trailing inner NOT reaches to the end of the outer interval, no further",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c))), E e)",
         """
         ts  1   2   3   4   5
             a1  b1  e1  c1  e2
         """,
         ["a=a1 e=e2"]),
    case("a leading inner NOT reaches back to the start of the outer interval",
         "PATTERN SEQ(A a, NOT(SEQ(NOT(C c), B b)), E e)",
         """
         ts  1   2   3   4   5   6   7
             a1  c1  b1  e1  a2  b2  e2
         """,
         ["a=a1 e=e1", "a=a1 e=e2"]),
    case("an inner NOT in an AND body: between the body's first and last event",
         "PATTERN SEQ(A a, NOT(AND(B b, D d, NOT(C c))), E e)",
         """
         ts  1   2   3   4   5   6   7   8   9
             a1  d1  c1  b1  e1  a2  b2  d2  e2
         """,
         ["a=a1 e=e1"]),
    case("the inner NOT's condition on the body's variable: a C that fails it does not count",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), E e) WHERE c.x = b.x",
         """
         ts  1   2   3   4   5
             a1  b1  c1  d1  e1
         """,
         [],
         b1={"x": 1}, c1={"x": 2}),
    case("... and a C that satisfies it does",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), E e) WHERE c.x = b.x",
         """
         ts  1   2   3   4   5
             a1  b1  c1  d1  e1
         """,
         ["a=a1 e=e1"],
         b1={"x": 2}, c1={"x": 2}),
    case("the inner NOT's condition may use the match's positive variables",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), E e) WHERE c.x > a.x",
         """
         ts  1   2   3   4   5   6   7   8   9   10
             a1  b1  c1  d1  e1  a2  b2  c2  d2  e2
         """,
         ["a=a1 e=e1"],
         a1={"x": 5}, c1={"x": 9}, a2={"x": 5}, c2={"x": 3}),
    case("the body's own condition still selects the occurrences",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), E e) WHERE b.x > a.x",
         """
         ts  1   2   3   4
             a1  b1  d1  e1
         """,
         ["a=a1 e=e1"],
         a1={"x": 5}, b1={"x": 1}),
    case("PARTITION BY: a C of another partition does not negate",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), E e) PARTITION BY k",
         """
         ts  1   2   3   4   5
             a1  b1  c1  d1  e1
         """,
         [],
         a1={"k": "u"}, b1={"k": "u"}, c1={"k": "v"}, d1={"k": "u"}, e1={"k": "u"}),
    case("PARTITION BY: a C of the same partition does",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), E e) PARTITION BY k",
         """
         ts  1   2   3   4   5
             a1  b1  c1  d1  e1
         """,
         ["a=a1 e=e1"],
         a1={"k": "u"}, b1={"k": "u"}, c1={"k": "u"}, d1={"k": "u"}, e1={"k": "u"}),
    case("equivalence: only a C with the match's value negates",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), E e) WHERE [k]",
         """
         ts  1   2   3   4   5   6
             a1  b1  c1  c2  d1  e1
         """,
         ["a=a1 e=e1"],
         a1={"k": "u"}, b1={"k": "u"}, c1={"k": "v"}, c2={"k": "u"}, d1={"k": "u"},
         e1={"k": "u"}),
    case("a window inside the body bounds its trailing inner NOT: C after the tail is no help",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c)) WITHIN 2 seconds), E e)",
         """
         ts  1   2   5   6
             a1  b1  c1  e1
         """,
         []),
    case("... a C inside the tail is",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c)) WITHIN 2 seconds), E e)",
         """
         ts  1   2   4   6
             a1  b1  c1  e1
         """,
         ["a=a1 e=e1"]),
    case("a leading outer NOT: its body and inner NOT stay inside the window's lead-in",
         "PATTERN SEQ(NOT(SEQ(B b, NOT(C c))), A a) WITHIN 3 seconds",
         """
         ts  2   4   5
             b1  a1  c1
         """,
         []),
    case("a leading outer NOT: a C between b and a saves the match",
         "PATTERN SEQ(NOT(SEQ(B b, NOT(C c))), A a) WITHIN 3 seconds",
         """
         ts  2   3   4
             b1  c1  a1
         """,
         ["a=a1"]),
    case("a trailing outer NOT waits for its tail; a later C saves the match",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c)))) WITHIN 4 seconds",
         """
         ts  1   2   3   7   8
             a1  b1  c1  a2  b2
         """,
         ["a=a1"]),
    case("three levels: the innermost NOT decides the middle one",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(SEQ(C c, NOT(D d))), E e)), F f)",
         """
         ts  1   2   3   4   5   6
             a1  b1  c1  e1  d1  f1
         """,
         ["a=a1 f=f1"]),
    case("three levels: a D after c inside b..e makes b..e an occurrence again",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(SEQ(C c, NOT(D d))), E e)), F f)",
         """
         ts  1   2   3   4   5   6
             a1  b1  c1  d1  e1  f1
         """,
         []),
    case("skip-till-next-match: each A takes the next E, then the nested NOT filters",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), E e) USING skip-till-next-match",
         """
         ts  1   2   3   4   5   6   7   8   9
             a1  b1  c1  d1  e1  a2  b2  d2  e2
         """,
         ["a=a1 e=e1"]),
    case("skip-till-next-match: a trailing nested NOT waits for its tail",
         "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c)))) WITHIN 4 seconds USING skip-till-next-match",
         """
         ts  1   2   3   7   8
             a1  b1  c1  a2  b2
         """,
         ["a=a1"]),
    case("skip-till-next-match, top-level OR: the nested NOT in one branch",
         "PATTERN OR(SEQ(A a, NOT(SEQ(B b, NOT(C c))), E e), SEQ(D d, E f)) "
         "USING skip-till-next-match",
         """
         ts  1   2   3   4   5   6   7   8   9
             a1  b1  c1  e1  d1  e2  a2  b2  e3
         """,
         ["a=a1 e=e1", "d=d1 f=e2"]),
    case("OpenCEP NestedNegationWithKC: V and W after f..o make it no occurrence",
         KC,
         """
         ts  1   2   3   4   5   6   7   8   9   10
             a1  b1  f1  o1  v1  w1  g1  f2  o2  g2
         """,
         ["a=a1 b=b1 g=g1"]),
    case("OpenCEP NestedNegationWithKC: without the V, f..o is an occurrence",
         KC,
         """
         ts  1   2   3   4   6   7
             a1  b1  f1  o1  w1  g1
         """,
         []),
    case("OpenCEP NestedNegationWithKC: an L inside the AND block excludes the match",
         KC,
         """
         ts  1   2   3   4
             a1  g1  l1  b1
         """,
         []),
    case("OpenCEP NestedNegationWithKC: the AND block's events in either order",
         KC,
         """
         ts  1   2   3   4   5   6   7
             a1  g1  f1  o1  w1  v1  b1
         """,
         ["a=a1 b=b1 g=g1"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_nested_negation(backend: BackendFn, c: Case) -> None:
    c.check(backend)
