"""Selection strategies: strict-contiguity, partition-contiguity, skip-till-next-match (§8)."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.errors import QueryValidationError
from kleene.testing.timeline import Case, case, events, run

STNM = "USING skip-till-next-match"

CASES = [
    case("strict contiguity",
         "PATTERN SEQ(A a, B b) USING strict-contiguity",
         """
         ts  1   2   3   4
             a1  b1  c1  b2
         """,
         ["a=a1 b=b1"]),
    case("strict contiguity with Kleene",
         "PATTERN SEQ(A a, B+ b[]) USING strict-contiguity",
         """
         ts  1   2   3   4   5
             a1  b1  b2  c1  b3
         """,
         ["a=a1 b=[b1]", "a=a1 b=[b1 b2]"]),
    case("partition contiguity: consecutive among equal [k]",
         "PATTERN SEQ(A a, B b) WHERE [k] USING partition-contiguity",
         """
         ts  1   2   3   4
             a1  a2  b1  b2
         """,
         ["a=a1 b=b1", "a=a2 b=b2"],
         a1={"k": "u"}, a2={"k": "v"}, b1={"k": "u"}, b2={"k": "v"}),
    case("strict contiguity on the same stream finds none",
         "PATTERN SEQ(A a, B b) WHERE [k] USING strict-contiguity",
         """
         ts  1   2   3   4
             a1  a2  b1  b2
         """,
         [],
         a1={"k": "u"}, a2={"k": "v"}, b1={"k": "u"}, b2={"k": "v"}),
    case("next match: the Kleene run keeps every B, skips other types",
         f"PATTERN SEQ(A a, B+ b[], C c) {STNM}",
         """
         ts  1   2   3   4   5
             a1  b1  x1  b2  c1
         """,
         ["a=a1 b=[b1 b2] c=c1"]),
    case("next match: every A starts a run that takes the next B",
         f"PATTERN SEQ(A a, B b) {STNM}",
         """
         ts  1   2   3   4
             a1  a2  b1  b2
         """,
         ["a=a1 b=b1", "a=a2 b=b1"]),
    case("next match: an element failing the iteration condition is skipped",
         f"PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x {STNM}",
         """
         ts  1   2   3   4   5
             a1  b1  b2  b3  c1
         """,
         ["a=a1 b=[b1 b3] c=c1"],
         b1={"x": 1}, b2={"x": 0}, b3={"x": 2}),
    case("next match: a trailing Kleene gives every prefix",
         f"PATTERN SEQ(A a, B+ b[]) {STNM}",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=[b1]", "a=a1 b=[b1 b2]"]),
    case("next match: an event failing its own condition does not start the Kleene",
         f"PATTERN SEQ(A a, B+ b[], C c) WHERE b.x > 0 {STNM}",
         """
         ts  1   2   3   4
             a1  b1  b2  c1
         """,
         ["a=a1 b=[b2] c=c1"],
         b1={"x": 0}, b2={"x": 1}),
    case("next match: a closing condition keeps the run in the Kleene",
         f"PATTERN SEQ(A a, B+ b[], C c) WHERE count(b) >= 2 {STNM}",
         """
         ts  1   2   3   4   5
             a1  b1  c1  b2  c2
         """,
         ["a=a1 b=[b1 b2] c=c2"]),
    case("next match: without it the first C ends the run",
         f"PATTERN SEQ(A a, B+ b[], C c) {STNM}",
         """
         ts  1   2   3   4   5
             a1  b1  c1  b2  c2
         """,
         ["a=a1 b=[b1] c=c1"]),
    case("next match: a Kleene at its maximum proceeds",
         f"PATTERN SEQ(A a, B{{2}} b[], C c) {STNM}",
         """
         ts  1   2   3   4   5
             a1  b1  b2  b3  c1
         """,
         ["a=a1 b=[b1 b2] c=c1"]),
    case("next match: an empty star when the next component comes first",
         f"PATTERN SEQ(A a, B* b[], C c) {STNM}",
         """
         ts  1   2   3   4
             a1  c1  b1  c2
         """,
         ["a=a1 b=[] c=c1"]),
    case("next match with negation",
         f"PATTERN SEQ(A a, NOT(C c), B b) {STNM}",
         """
         ts  1   2   3
             a1  c1  b1
         """,
         []),
    case("next match: OR of single events takes the first that fits",
         f"PATTERN SEQ(A a, OR(B b, C c)) {STNM}",
         """
         ts  1   2   3
             a1  c1  b1
         """,
         ["a=a1 c=c1"]),
    case("next match: events of other partitions are not candidates",
         f"PATTERN SEQ(A a, B b) PARTITION BY k {STNM}",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=b2"],
         a1={"k": "u"}, b1={"k": "v"}, b2={"k": "u"}),
    case("next match: neither are events with another equivalence value",
         f"PATTERN SEQ(A a, B b) WHERE [k] {STNM}",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=b2"],
         a1={"k": "u"}, b1={"k": "v"}, b2={"k": "u"}),
    case("next match: a run takes what fits now, even if a window later fails",
         f"PATTERN SEQ(A a, SEQ(B b, C c) WITHIN 1 seconds) {STNM}",
         "a1@1 b1@2 b2@4 c1@4.5",
         []),
    case("skip-till-any on the same stream",
         "PATTERN SEQ(A a, SEQ(B b, C c) WITHIN 1 seconds)",
         "a1@1 b1@2 b2@4 c1@4.5",
         ["a=a1 b=b2 c=c1"]),
    case("next match: OR at the top level, each branch its own query",
         f"PATTERN OR(SEQ(A a, B b), SEQ(C c, D d)) {STNM}",
         """
         ts  1   2   3   4   5
             a1  c1  b1  b2  d1
         """,
         ["a=a1 b=b1", "c=c1 d=d1"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_selection_strategy(backend: BackendFn, c: Case) -> None:
    c.check(backend)


@pytest.mark.parametrize("query", [
    f"PATTERN AND(A a, B b) {STNM}",
    f"PATTERN ANY(1, A a, B b) {STNM}",
    f"PATTERN (SEQ(A a, B b))+ {STNM}",
])
def test_next_match_rejects_unsupported_operators(backend: BackendFn, query: str) -> None:
    with pytest.raises(QueryValidationError, match="skip-till-"):
        run(backend, query, events("a1@1 b1@2"))
