"""EMIT ROWS (SQL's ALL ROWS PER MATCH, docs/semantics.md 19): one output record per row of
each match, in row order, with ``row`` (the row's id) first and RETURN evaluated as of the row
(the match's bindings cut after it: a list keeps its prefix, a variable mapped later is
unbound), ``final(x)`` over the whole match, ``classifier()`` the row's variable,
``match_number()`` the match's number (in any RETURN expression). Every expected value is
derived by hand from that definition."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

SEQ4 = ("PATTERN SEQ(ANY a, ANY+ b[], ANY c) USING strict-contiguity ")
ROWS4 = """
ts  1   2   3   4
    x1  x2  x3  x4
"""
V4 = {f"x{i}": {"v": i} for i in range(1, 5)}
M1 = "a=x1 b=[x2 x3] c=x4"
M2 = "a=x2 b=[x3] c=x4"

CASES = [
    case("running values: b's last, sum and list so far; final(); classifier()",
         SEQ4 + "EMIT ROWS AFTER MATCH SKIP PAST LAST ROW RETURN b[last].v AS lb, "
         "sum(b.v) AS s, count(b) AS nb, b.v AS bs, final(sum(b.v)) AS fs, "
         "classifier() AS cl, match_number() AS n", ROWS4, [M1] * 4,
         values=[
             {"row": "x1", "lb": None, "s": 0, "nb": 0, "bs": [], "fs": 5, "cl": "a", "n": 1},
             {"row": "x2", "lb": 2, "s": 2, "nb": 1, "bs": [2], "fs": 5, "cl": "b", "n": 1},
             {"row": "x3", "lb": 3, "s": 5, "nb": 2, "bs": [2, 3], "fs": 5, "cl": "b", "n": 1},
             {"row": "x4", "lb": 3, "s": 5, "nb": 2, "bs": [2, 3], "fs": 5, "cl": "c", "n": 1},
         ], **V4),
    case("EXCLUDE b: b's rows are left out, the values still see them",
         SEQ4 + "EMIT ROWS EXCLUDE b AFTER MATCH SKIP PAST LAST ROW RETURN sum(b.v) AS s, "
         "classifier() AS cl", ROWS4, [M1] * 2,
         values=[{"row": "x1", "s": 0, "cl": "a"}, {"row": "x4", "s": 5, "cl": "c"}], **V4),
    case("TO NEXT ROW: a single variable mapped later is NULL until its row (count(c) too); "
         "match_number() inside an expression",
         SEQ4 + "EMIT ROWS AFTER MATCH SKIP TO NEXT ROW RETURN c.v AS cv, final(c.v) AS fcv, "
         "a.v + 10 * match_number() AS an, count(c) AS nc", ROWS4, [M1] * 4 + [M2] * 3,
         values=[
             {"row": "x1", "cv": None, "fcv": 4, "an": 11, "nc": None},
             {"row": "x2", "cv": None, "fcv": 4, "an": 11, "nc": None},
             {"row": "x3", "cv": None, "fcv": 4, "an": 11, "nc": None},
             {"row": "x4", "cv": 4, "fcv": 4, "an": 11, "nc": 1},
             {"row": "x2", "cv": None, "fcv": 4, "an": 22, "nc": None},
             {"row": "x3", "cv": None, "fcv": 4, "an": 22, "nc": None},
             {"row": "x4", "cv": 4, "fcv": 4, "an": 22, "nc": 1},
         ], **V4),
    case("no RETURN: each row has only its id; an OR branch not taken has no rows",
         "PATTERN SEQ(OR(ANY a, SEQ(ANY b, ANY c)), ANY d) WHERE a.v > 1 "
         "USING strict-contiguity EMIT ROWS AFTER MATCH SKIP PAST LAST ROW", ROWS4,
         ["b=x1 c=x2 d=x3"] * 3,
         values=[{"row": "x1"}, {"row": "x2"}, {"row": "x3"}], **V4),
    case("a top-level OR (the union plan): each match's rows with their branch's variables",
         "PATTERN OR(SEQ(ANY a, ANY b), ANY c) WHERE b.v > 2 USING strict-contiguity "
         "EMIT ROWS AFTER MATCH SKIP PAST LAST ROW RETURN classifier() AS cl, final(b.v) AS fb",
         ROWS4, ["c=x1", "a=x2 b=x3", "a=x2 b=x3", "c=x4"],
         values=[{"row": "x1", "cl": "c", "fb": None}, {"row": "x2", "cl": "a", "fb": 3},
                 {"row": "x3", "cl": "b", "fb": 3}, {"row": "x4", "cl": "c", "fb": None}],
         **V4),
    case("nullif(x, y): NULL when x = y is TRUE, else x (ONE record per match)",
         "PATTERN SEQ(ANY a, ANY b) USING strict-contiguity AFTER MATCH SKIP PAST LAST ROW "
         "RETURN nullif(a.v, 1) AS x, nullif(b.v, 1) AS y, nullif(a.v, NULL) AS z, "
         "nullif(a.v, 'one') AS w", ROWS4, ["a=x1 b=x2", "a=x3 b=x4"],
         values=[{"x": None, "y": 2, "z": 1, "w": 1}, {"x": 3, "y": 4, "z": 3, "w": 3}],
         **V4),
    case("PARTITION BY: match numbers per partition; rows of one match stay together",
         "PATTERN SEQ(ANY a, ANY b) PARTITION BY k USING strict-contiguity EMIT ROWS "
         "AFTER MATCH SKIP PAST LAST ROW RETURN match_number() AS n, classifier() AS cl, "
         "final(b.v) - a.v AS d",
         """
         ts  1   2   3   4   5
             x1  y1  x2  y2  x3
         """, ["a=x1 b=x2"] * 2 + ["a=y1 b=y2"] * 2,
         values=[{"row": "x1", "n": 1, "cl": "a", "d": 2},
                 {"row": "x2", "n": 1, "cl": "b", "d": 2},
                 {"row": "y1", "n": 1, "cl": "a", "d": 20},
                 {"row": "y2", "n": 1, "cl": "b", "d": 20}],
         x1={"k": "p", "v": 1}, x2={"k": "p", "v": 3}, x3={"k": "p", "v": 5},
         y1={"k": "q", "v": 10}, y2={"k": "q", "v": 30}),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_rows(backend: BackendFn, c: Case) -> None:
    c.check(backend)
