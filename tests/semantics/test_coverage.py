"""EMIT COVERAGE: LinkedCEP's complex event instance coverage (docs/semantics.md 16), with the
paper's two examples (Q2 on S(a1, b1, b2, b3, c1), Q4 on S_t(a1, a2, b1, b2, a3, b3, c1, c2))."""

from __future__ import annotations

import pytest

from kleene.api import analyze
from kleene.backends import BackendFn
from kleene.lang.printer import to_text
from kleene.testing.timeline import Case, case

Q4_STREAM = """
         ts  1   2   3   4   5   6   7   8
             a1  a2  b1  b2  a3  b3  c1  c2
         """

CASES = [
    case("Q4: the 14 skip-till-any matches (EMIT ALL)",
         "PATTERN SEQ(A a, B b, C c)",
         Q4_STREAM,
         ["a=a1 b=b1 c=c1", "a=a1 b=b2 c=c1", "a=a1 b=b3 c=c1", "a=a2 b=b1 c=c1",
          "a=a2 b=b2 c=c1", "a=a2 b=b3 c=c1", "a=a3 b=b3 c=c1",
          "a=a1 b=b1 c=c2", "a=a1 b=b2 c=c2", "a=a1 b=b3 c=c2", "a=a2 b=b1 c=c2",
          "a=a2 b=b2 c=c2", "a=a2 b=b3 c=c2", "a=a3 b=b3 c=c2"]),
    case("Q4: the three coverages of the paper",
         "PATTERN SEQ(A a, B b, C c) EMIT COVERAGE",
         Q4_STREAM,
         ["a=a2 b=b2 c=c2", "a=a2 b=b3 c=c2", "a=a3 b=b3 c=c2"]),
    case("Q2: one coverage per Kleene list length",
         "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].val < b[i-1].val EMIT COVERAGE",
         """
         ts  1   2   3   4   5
             a1  b1  b2  b3  c1
         """,
         ["a=a1 b=[b3] c=c1", "a=a1 b=[b2 b3] c=c1", "a=a1 b=[b1 b2 b3] c=c1"],
         b1={"val": 3}, b2={"val": 2}, b3={"val": 1}),
    case("Q2 with b2 above b1: [b1 b2] is no match, [b2 b3] covers [b1 b3]",
         "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].val < b[i-1].val EMIT COVERAGE",
         """
         ts  1   2   3   4   5
             a1  b1  b2  b3  c1
         """,
         ["a=a1 b=[b3] c=c1", "a=a1 b=[b2 b3] c=c1"],
         b1={"val": 3}, b2={"val": 5}, b3={"val": 1}),
    case("an irrelevant event does not break a run",
         "PATTERN SEQ(A a, B b) EMIT COVERAGE",
         """
         ts  1   2   3   4
             a1  x1  a2  b1
         """,
         ["a=a2 b=b1"]),
    case("an event failing a candidate condition is irrelevant",
         "PATTERN SEQ(A a, B b) WHERE a.x > 0 EMIT COVERAGE",
         """
         ts  1   2   3   4
             a1  a2  a3  b1
         """,
         ["a=a3 b=b1"],
         a1={"x": 1}, a2={"x": -1}, a3={"x": 1}),
    case("a relevant event of another variable ends a run",
         "PATTERN SEQ(A a, B b, C c) EMIT COVERAGE",
         """
         ts  1   2   3   4   5
             a1  b1  a2  b2  c1
         """,
         ["a=a1 b=b1 c=c1", "a=a1 b=b2 c=c1", "a=a2 b=b2 c=c1"]),
    case("a window rules out the covering match",
         "PATTERN SEQ(A a, B b) WITHIN 2 seconds EMIT COVERAGE",
         """
         ts  1   3   4
             a1  b1  b2
         """,
         ["a=a1 b=b1"]),
    case("a predicate rules out the covering match",
         "PATTERN SEQ(A a, B b) WHERE b.x > a.x EMIT COVERAGE",
         """
         ts  1   2   3
             a1  a2  b1
         """,
         ["a=a1 b=b1"],
         a1={"x": 1}, a2={"x": 5}, b1={"x": 3}),
    case("one type in two variables: runs per variable",
         "PATTERN SEQ(S a, S b) EMIT COVERAGE",
         """
         ts  1   2   3
             s1  s2  s3
         """,
         ["a=s2 b=s3"]),
    case("runs are per partition",
         "PATTERN SEQ(A a, B b) PARTITION BY k EMIT COVERAGE",
         """
         ts  1   2   3   4   5
             a1  a2  a3  b1  b2
         """,
         ["a=a3 b=b1", "a=a2 b=b2"],
         a1={"k": 1}, a2={"k": 2}, a3={"k": 1}, b1={"k": 1}, b2={"k": 2}),
    case("Kleene star: an empty list is its own length",
         "PATTERN SEQ(A a, B* b[], C c) EMIT COVERAGE",
         """
         ts  1   2   3   4
             a1  a2  b1  c1
         """,
         ["a=a2 b=[] c=c1", "a=a2 b=[b1] c=c1"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_coverage(backend: BackendFn, c: Case) -> None:
    c.check(backend)


def test_emit_coverage_prints_back() -> None:
    text = to_text(analyze("PATTERN SEQ(A a, B b) EMIT COVERAGE").query)
    assert "EMIT COVERAGE" in text
    assert analyze(text).emit.value == "coverage"
