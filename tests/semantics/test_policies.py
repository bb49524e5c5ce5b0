"""PICK, EMIT RECENT and CONSUME, and the order they apply in (§9)."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

CASES = [
    case("PICK FIRST keeps the earliest a",
         "PATTERN SEQ(A a, B b, C c) PICK FIRST a",
         """
         ts  1   2   3   4
             a1  a2  b1  c1
         """,
         ["a=a1 b=b1 c=c1"]),
    case("PICK LAST keeps the latest a",
         "PATTERN SEQ(A a, B b, C c) PICK LAST a",
         """
         ts  1   2   3   4
             a1  a2  b1  c1
         """,
         ["a=a2 b=b1 c=c1"]),
    case("PICK EACH keeps all",
         "PATTERN SEQ(A a, B b, C c) PICK EACH a",
         """
         ts  1   2   3   4
             a1  a2  b1  c1
         """,
         ["a=a1 b=b1 c=c1", "a=a2 b=b1 c=c1"]),
    case("PICK groups matches equal in every other binding",
         "PATTERN SEQ(A a, B b) PICK FIRST a",
         """
         ts  1   2   3   4
             a1  a2  b1  b2
         """,
         ["a=a1 b=b1", "a=a1 b=b2"]),
    case("PICK ... WITHIN d FROM u filters first",
         "PATTERN SEQ(A a, B b) PICK LAST a WITHIN 2 seconds FROM b",
         """
         ts  1   2   4
             a1  a2  b1
         """,
         ["a=a2 b=b1"]),
    case("PICK FIRST ... WITHIN: the earliest inside the window",
         "PATTERN SEQ(A a, B b) PICK FIRST a WITHIN 2 seconds FROM b",
         """
         ts  1   2   3   4
             a1  a2  a3  b1
         """,
         ["a=a2 b=b1"]),
    case("several PICKs apply in the order written",
         "PATTERN SEQ(A a, B b, C c) PICK FIRST a, LAST b",
         """
         ts  1   2   3   4   5
             a1  a2  b1  b2  c1
         """,
         ["a=a1 b=b2 c=c1"]),
    case("PICK FIRST on a Kleene list: lexicographic on positions",
         "PATTERN SEQ(A+ a[], B b) PICK FIRST a",
         """
         ts  1   2   3
             a1  a2  b1
         """,
         ["a=[a1] b=b1"]),
    case("FAEM's maximal group: skip-till-next-match with PICK FIRST",
         "PATTERN SEQ(A+ a[], B b) USING skip-till-next-match PICK FIRST a",
         """
         ts  1   2   3
             a1  a2  b1
         """,
         ["a=[a1 a2] b=b1"]),
    case("PICK ... WITHIN n EVENTS FROM u counts positions",
         "PATTERN SEQ(A a, B b) PICK FIRST a WITHIN 3 EVENTS FROM b",
         """
         ts  1   2   3   4
             a1  a2  x1  b1
         """,
         ["a=a2 b=b1"]),
    case("EMIT RECENT inside a partition",
         "PATTERN SEQ(A a, B b) PARTITION BY k EMIT RECENT",
         """
         ts  1   2   3   4
             a1  a2  a3  b1
         """,
         ["a=a3 b=b1"],
         a1={"k": "u"}, a2={"k": "v"}, a3={"k": "u"}, b1={"k": "u"}),
    case("EMIT RECENT: the most recent events for each completing event",
         "PATTERN SEQ(A a, B b, C c) EMIT RECENT",
         """
         ts  1   2   3   4   5
             a1  b1  a2  b2  c1
         """,
         ["a=a2 b=b2 c=c1"]),
    case("EMIT RECENT: one match per completing event",
         "PATTERN SEQ(A a, B b) EMIT RECENT",
         """
         ts  1   2   3   4
             a1  a2  b1  b2
         """,
         ["a=a2 b=b1", "a=a2 b=b2"]),
    case("EMIT RECENT on Kleene: the longer list agreeing on the latest elements",
         "PATTERN SEQ(A a, B+ b[], C c) EMIT RECENT",
         """
         ts  1   2   3   4
             a1  b1  b2  c1
         """,
         ["a=a1 b=[b1 b2] c=c1"]),
    case("EMIT RECENT on Kleene: a later a beats an earlier b",
         "PATTERN SEQ(A a, B+ b[], C c) EMIT RECENT",
         """
         ts  1   2   3   4   5
             a1  b1  a2  b2  c1
         """,
         ["a=a2 b=[b2] c=c1"]),
    case("EMIT RECENT tie on the same events: compare variables from last to first",
         "PATTERN AND(A x, A y) EMIT RECENT",
         """
         ts  1   2
             a1  a2
         """,
         ["x=a1 y=a2"]),
    case("EMIT RECENT with OR: the more recent branch event",
         "PATTERN SEQ(A a, OR(B b, C c), D d) EMIT RECENT",
         """
         ts  1   2   3   4
             a1  c1  b1  d1
         """,
         ["a=a1 b=b1 d=d1"]),
    case("CONSUME a: a consumed event is not reused",
         "PATTERN SEQ(A a, B b) CONSUME a",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=b1"]),
    case("CONSUME b walks in output order",
         "PATTERN SEQ(A a, B b) CONSUME b",
         """
         ts  1   2   3
             a1  a2  b1
         """,
         ["a=a1 b=b1"]),
    case("CONSUME ALL",
         "PATTERN SEQ(A a, B b) CONSUME ALL",
         """
         ts  1   2   3   4
             a1  a2  b1  b2
         """,
         ["a=a1 b=b1", "a=a2 b=b2"]),
    case("CONSUME a Kleene list consumes every element",
         "PATTERN SEQ(A a, B+ b[]) CONSUME b",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=[b1]", "a=a1 b=[b2]"]),
    case("EMIT RECENT before CONSUME",
         "PATTERN SEQ(A a, B b) CONSUME a EMIT RECENT",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=b1"]),
    case("PICK among the matches still valid: a2 is consumed, a1 is the last a left for b2",
         "PATTERN SEQ(A a, B b) PICK LAST a CONSUME a",
         """
         ts  1   2   3   4
             a1  a2  b1  b2
         """,
         ["a=a2 b=b1", "a=a1 b=b2"]),
    case("PICK FIRST with CONSUME ALL keeps a match per valid triple (issue 15, TESLA)",
         "PATTERN SEQ(A a, B b, C c) PICK FIRST a CONSUME a, b, c",
         """
         ts  1   2   3   4   5   6
             a1  a2  b1  b2  c1  c2
         """,
         ["a=a1 b=b1 c=c1", "a=a2 b=b2 c=c2"]),
    case("PICK FIRST with CONSUME ALL gives what CONSUME ALL alone gives",
         "PATTERN SEQ(A a, B b, C c) CONSUME ALL",
         """
         ts  1   2   3   4   5   6
             a1  a2  b1  b2  c1  c2
         """,
         ["a=a1 b=b1 c=c1", "a=a2 b=b2 c=c2"]),
    case("EMIT RECENT among the matches still valid",
         "PATTERN SEQ(A a, B b) CONSUME a EMIT RECENT",
         """
         ts  1   2   3   4
             a1  a2  b1  b2
         """,
         ["a=a2 b=b1", "a=a1 b=b2"]),
    case("output order (Definition 4.4.12) decides what CONSUME ALL keeps",
         "PATTERN SEQ(A a, B b, C c, D d) WHERE b.x = c.x CONSUME ALL",
         """
         ts  1   2   3   5   6   9
             a1  b2  b3  c5  c6  d9
         """,
         ["a=a1 b=b3 c=c5 d=d9"],
         b2={"x": 1}, c6={"x": 1}, b3={"x": 2}, c5={"x": 2}),
    case("one PICK: a group's member after an incomplete group in output order is still "
         "compared (the 100,000-case differential run, issue 17)",
         # group (a=a1, c=[]): b=[a2], [a3], [a2 a3] -> LAST keeps [a3]; at d1 the release
         # stopped at (a1, [a2], [a3]) (its group waits for a3 + 3 s) and let [a3] out alone
         "PATTERN SEQ(A a, A+ b[], A* c[]) WITHIN 3 seconds PICK LAST b",
         "a1@1 a2@1 a3@2 d1@5",
         ["a=a1 b=[a3] c=[]", "a=a1 b=[a2] c=[a3]", "a=a2 b=[a3] c=[]"]),
    case("a PICK group held to the end still competes in EMIT RECENT (issue 17)",
         "PATTERN OR(A a2, A a3) WITHIN 1 seconds PICK LAST a2 EMIT RECENT",
         """
         ts  1   3
             a1  b1
         """,
         ["a3=a1"]),
    case("PICK LAST / FIRST then EMIT RECENT under skip-till-next-match (the differential "
         "run's case, issue 17)",
         "PATTERN OR(SEQ(OR(A a1, A a2)), SEQ(A{1,2} a3[])) WHERE [k] AND a1.x <= 3 "
         "WITHIN 1 seconds USING skip-till-next-match PICK LAST a2, FIRST a1 EMIT RECENT",
         "a1@1 c1@1 b1@3",
         ["a3=[a1]"],
         a1={"k": "u"}, c1={"k": "v"}, b1={"k": "u"}),
    case("two PICKs: a match held for one PICK's group holds back its rival in the other "
         "(issue 17, the long differential run)",
         "PATTERN SEQ(C* c[], B b, A* a[]) WITHIN 3 seconds PICK LAST c, LAST a",
         "b1@2 b2@2 a1@5 a2@6",
         ["b=b1 c=[] a=[a1]", "b=b2 c=[] a=[a1]"]),
    case("two PICKs, CONSUME and EMIT RECENT (the long differential run's case, issue 17)",
         "PATTERN SEQ(C* c1[], B b2, A* a3[]) WHERE b2.x <= 2 AND b2.x + 1 > b2.x WITHIN 3 "
         "seconds PICK LAST c1, LAST a3 CONSUME c1, b2 EMIT RECENT RETURN count(a3) AS a3_n",
         "b2@1 b1@2 b3@2 c2@2 c1@3 a1@5 a2@6 a3@6",
         ["c1=[] b2=b3 a3=[a1]"], values=[{"a3_n": 1}],
         b2={"x": float("inf")}, b1={"x": 0.0}, b3={"x": -0.0}, c2={"x": 1.0},
         c1={"x": float("inf")}, a1={"x": 1e300}, a2={"x": 1e300}, a3={"x": 1e300}),
    case("consumed events still negate",
         "PATTERN SEQ(A a, NOT(B n), B b) CONSUME b",
         """
         ts  1   2   3
             a1  b1  b2
         """,
         ["a=a1 b=b1"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_policies(backend: BackendFn, c: Case) -> None:
    c.check(backend)


SNOOP_CASES = [
    # issue 15: the thesis's Extended SNOOP with TESLA's first selection and CONSUMING; the
    # canonical cases above ("PICK FIRST with CONSUME ALL ...") are the same queries.
    ("SELECT * FROM SEQ(A; B; C) PICK first A CONSUMING A, B, C",
     "a1@1 a2@2 b1@3 b2@4 c1@5 c2@6", {},
     [{"A": "a1", "B": "b1", "C": "c1"}, {"A": "a2", "B": "b2", "C": "c2"}]),
    ("SELECT * FROM SEQ(A; B; C; D)\nWHERE B.x = C.x\nCONSUMING A, B, C, D",
     "a1@1 b2@2 b3@3 c5@5 c6@6 d9@9",
     {"b2": {"x": 1}, "c6": {"x": 1}, "b3": {"x": 2}, "c5": {"x": 2}},
     [{"A": "a1", "B": "b3", "C": "c5", "D": "d9"}]),
]


@pytest.mark.parametrize("text, stream, attrs, expected", SNOOP_CASES,
                         ids=["pick-first-consuming", "thesis-order"])
@pytest.mark.parametrize("engine", ["oracle", "automaton"])
def test_snoop_pick_consuming_follows_the_thesis(text: str, stream: str,
                                                 attrs: dict[str, dict[str, int]],
                                                 expected: list[dict[str, str]],
                                                 engine: str) -> None:
    """PICK and CONSUMING in the snoop dialect select among the events not yet consumed, and
    the walk follows the order of Definition 4.4.12 (docs/semantics.md 9, 10)."""
    import kleene
    from kleene.testing.timeline import events

    got = kleene.compile(text, dialect="snoop", engine=engine).run(events(stream, **attrs))
    assert [dict(m.bindings) for m in got] == expected
