"""maximal-grouping: FAEM's Kleene semantics (docs/semantics.md 18), with the paper's worked
examples (Behravesh et al., "Optimizing Expressibility and Performance of Kleene Operators on
Binary Tree-based Directed Graph"): Query 1 over the stream of Fig. 3, Query 3 with kleene num
over Fig. 4, Query 3 over Fig. 5 in both variants. The expected matches are the composite events
the paper's text derives, not an engine's output."""

from __future__ import annotations

import pytest

from kleene.api import analyze
from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

# Fig. 3: m1 m2 g3 g4 m5 g6 m7, WITHIN 5 UNIT (a count window: m1 leaves it at g6, m2 at m7).
# The text gives no values; every Google is above 100 and below every Microsoft ("with
# respect to constraints" everything joins), so only the window and the order select.
FIG3 = """
ts  1   2   3   4   5   6   7
    m1  m2  g3  g4  m5  g6  m7
"""
FIG3_VALUES = {"g3": {"value": 101}, "g4": {"value": 102}, "g6": {"value": 103},
               "m1": {"value": 200}, "m2": {"value": 200}, "m5": {"value": 200},
               "m7": {"value": 200}}
# Fig. 4 (Query 3 with Microsoft[3]; A, B, C, D = Google, Microsoft, Del, Intel): b3 fails
# Intel.value > Microsoft.value against d12, the other five Kleene events pass.
FIG4 = """
ts  2   3   4   6   7   8   9   10  12
    g2  m3  m4  m6  m7  m8  m9  d10 i12
"""
FIG4_VALUES = {"m3": {"value": 25}, "m4": {"value": 10}, "m6": {"value": 10},
               "m7": {"value": 10}, "m8": {"value": 10}, "m9": {"value": 10},
               "i12": {"value": 20}}
FIG5 = """
ts  2   3   6   7   8   9
    g2  m3  m6  m7  d8  i9
"""
FIG5_VALUES = {"g2": {"value": 12}, "m3": {"value": 16}, "m6": {"value": 12},
               "m7": {"value": 13}, "d8": {"value": 18}}

Q3 = ("PATTERN SEQ(G g, M* m[], D d, I i) WHERE i.value > m.value WITHIN 200 EVENTS "
      "USING maximal-grouping")

CASES = [
    case("FAEM Query 1 over Fig. 3: one maximal group per Google, Kleene on the right",
         "PATTERN SEQ(G g, M+ m[]) WHERE g.value > 100 AND g.value < m.value "
         "WITHIN 5 EVENTS USING maximal-grouping",
         FIG3,
         ["g=g3 m=[m5 m7]", "g=g4 m=[m5 m7]", "g=g6 m=[m7]"], **FIG3_VALUES),
    case("FAEM Fig. 3 as traced (G & M+ = (M+;G) | (G;M+)): m1 m2 g3, m1 m2 g4, m2 m5 g6, "
         "g3 m5 m7, g4 m5 m7, g6 m7",
         "PATTERN AND(G g, M+ m[]) WHERE g.value > 100 AND g.value < m.value "
         "WITHIN 5 EVENTS USING maximal-grouping",
         FIG3,
         ["g=g3 m=[m1 m2]", "g=g4 m=[m1 m2]", "g=g6 m=[m2 m5]", "g=g3 m=[m5 m7]",
          "g=g4 m=[m5 m7]", "g=g6 m=[m7]"], **FIG3_VALUES),
    case("FAEM Fig. 4: Microsoft[3] is every 3-combination of the group b4 b6 b7 b8 b9 "
         "(b3 fails Intel > Microsoft and only b3 is removed)",
         "PATTERN SEQ(G g, M{3} m[], D d, I i) WHERE i.value > m.value WITHIN 200 EVENTS "
         "USING maximal-grouping",
         FIG4,
         # output order (§10): same last, first and d10; then the latest M first
         [f"g=g2 m=[{' '.join(c)}] d=d10 i=i12" for c in (
             ("m4", "m6", "m7"), ("m4", "m6", "m8"), ("m4", "m7", "m8"), ("m6", "m7", "m8"),
             ("m4", "m6", "m9"), ("m4", "m7", "m9"), ("m6", "m7", "m9"), ("m4", "m8", "m9"),
             ("m6", "m8", "m9"), ("m7", "m8", "m9"))],
         **FIG4_VALUES),
    case("FAEM Fig. 5, i9 = 11: every Microsoft fails, the composite g2 d8 i9 stays (M* admits "
         "the empty group; ZStream would drop it)",
         Q3, FIG5, ["g=g2 m=[] d=d8 i=i9"], **FIG5_VALUES, i9={"value": 11}),
    case("FAEM Fig. 5, i9 = 14: m3 (16) is removed from the group, m6 m7 stay",
         Q3, FIG5, ["g=g2 m=[m6 m7] d=d8 i=i9"], **FIG5_VALUES, i9={"value": 14}),
    case("plus: an empty group is no match",
         "PATTERN SEQ(G g, M+ m[], D d) WHERE d.value > m.value USING maximal-grouping",
         """
         ts  1   2   3
             g1  m1  d1
         """,
         [], m1={"value": 5}, d1={"value": 1}),
    case("Kleene on the left: the group before each terminating event",
         "PATTERN SEQ(M+ m[], G g) USING maximal-grouping",
         """
         ts  1   2   3   4
             m1  m2  g1  g2
         """,
         ["m=[m1 m2] g=g1", "m=[m1 m2] g=g2"]),
    case("star under conjunction: the empty group only when neither side has one",
         "PATTERN AND(M* m[], G g) WITHIN 2 seconds USING maximal-grouping",
         """
         ts  1   5   6
             g1  m1  g2
         """,
         ["m=[] g=g1", "m=[m1] g=g2"]),
    case("a window bounds the group",
         "PATTERN SEQ(G g, M+ m[]) WITHIN 2 seconds USING maximal-grouping",
         """
         ts  1   2   3   4
             g1  m1  m2  m3
         """,
         ["g=g1 m=[m1 m2]"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_maximal_grouping(backend: BackendFn, c: Case) -> None:
    c.check(backend)


def test_faem_dialect_defaults_to_maximal_grouping() -> None:
    faem = analyze("PATTERN G; M*; D; I WHERE I.value > M.value WITHIN 200 UNIT",
                   dialect="faem")
    canonical = analyze("PATTERN SEQ(G G, M* M[], D D, I I) WHERE I.value > M.value "
                        "WITHIN 200 EVENTS USING maximal-grouping")
    assert faem.strategy is canonical.strategy
    assert faem.pattern == canonical.pattern
    explicit = analyze("PATTERN G; M+ WITHIN 5 UNIT USING skip-till-any-match", dialect="faem")
    assert explicit.strategy.value == "skip-till-any-match"
