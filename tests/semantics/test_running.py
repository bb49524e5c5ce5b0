"""Running aggregates (docs/semantics.md 21): ``agg(a[..i].x)`` in a conjunct that ranges over
``a``'s elements is the aggregate over a[1] .. a[i], the elements taken so far including the
current one (SQL's RUNNING aggregate in DEFINE). NULLs are skipped; AVG/MIN/MAX of no value is
NULL (the conjunct is then not TRUE), kleene's SUM of no value is 0, COUNT counts non-NULL
values. Every expected list is derived by hand: with strict contiguity, each start row and each
length of ``a`` is tried, ``a`` grows while every new element satisfies the condition with the
aggregate over the prefix, and ``b`` is the next row."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

AB = "PATTERN SEQ(ANY+ a[], ANY b) "
STRICT = " USING strict-contiguity"


def rows(n: int) -> str:
    return ("ts  " + "  ".join(f"{i:<3}" for i in range(1, n + 1)) + "\n    "
            + "  ".join(f"x{i:<2}" for i in range(1, n + 1)) + "\n")


def p(*values: float | None) -> dict[str, dict[str, float | None]]:
    return {f"x{i}": {"p": v} for i, v in enumerate(values, 1)}


CASES = [
    # Flink's example (DEFINE A AS AVG(A.price) < 15). Prices 20 10 12 30 11: from x1 the
    # first prefix averages 20; from x2 the averages are 10, 11, 17.3; from x3 12, 21; x4 30;
    # x5 11 has no b. The whole-list average would also accept a=[x1 x2 x3] (14).
    case("Flink's AVG example: every prefix of a averages below 15",
         AB + "WHERE avg(a[..i].p) < 15" + STRICT, rows(5),
         ["a=[x2] b=x3", "a=[x2 x3] b=x4", "a=[x3] b=x4"], **p(20, 10, 12, 30, 11)),
    case("Flink's AVG example under AFTER MATCH SKIP PAST LAST ROW (greedy a)",
         AB + "WHERE avg(a[..i].p) < 15" + STRICT + " AFTER MATCH SKIP PAST LAST ROW",
         rows(5), ["a=[x2 x3] b=x4"], **p(20, 10, 12, 30, 11)),
    # NULL 10 NULL 16 1: an all-NULL prefix has a NULL average (not TRUE); NULLs are skipped,
    # so from x2 the averages are 10, 10, 13, 9 (the last a has no b).
    case("AVG skips NULLs; the AVG of only NULLs is NULL",
         AB + "WHERE avg(a[..i].p) < 15" + STRICT, rows(5),
         ["a=[x2] b=x3", "a=[x2 x3] b=x4", "a=[x2 x3 x4] b=x5"],
         **p(None, 10, None, 16, 1)),
    # 1 NULL 2 3: non-NULL counts from x1: 1, 1, 2; from x2: 0, 1, 2; from x3: 1, 2.
    case("COUNT counts the non-NULL values so far",
         AB + "WHERE count(a[..i].p) < 2" + STRICT, rows(4),
         ["a=[x1] b=x2", "a=[x1 x2] b=x3", "a=[x2] b=x3", "a=[x2 x3] b=x4", "a=[x3] b=x4"],
         **p(1, None, 2, 3)),
    # NULL 2 1 5: sums from x1: 0, 2, 3, 8; from x2: 2, 3, 8; from x3: 1, 6; x4: 5.
    case("SUM so far (kleene's SUM of no value is 0)",
         AB + "WHERE sum(a[..i].p) <= 3" + STRICT, rows(4),
         ["a=[x1] b=x2", "a=[x1 x2] b=x3", "a=[x2] b=x3", "a=[x1 x2 x3] b=x4",
          "a=[x2 x3] b=x4", "a=[x3] b=x4"], **p(None, 2, 1, 5)),
    # 5 7 9 6: ranges from x1: 0, 2, 4; from x2: 0, 2, 3 (no b after x4); from x3: 0, 3.
    case("MAX - MIN so far stays within 3",
         AB + "WHERE max(a[..i].p) - min(a[..i].p) <= 3" + STRICT, rows(4),
         ["a=[x1] b=x2", "a=[x1 x2] b=x3", "a=[x2] b=x3", "a=[x2 x3] b=x4", "a=[x3] b=x4"],
         **p(5, 7, 9, 6)),
    # 1 3 2 4: each element must be the maximum so far (a[i] is the current element).
    case("the current element against the running MAX (a new high each time)",
         AB + "WHERE a[i].p >= max(a[..i].p)" + STRICT, rows(4),
         ["a=[x1] b=x2", "a=[x1 x2] b=x3", "a=[x2] b=x3", "a=[x3] b=x4"], **p(1, 3, 2, 4)),
    # NULL NULL 3: MIN and MAX of only NULLs are NULL: from x1 and x2 the first prefix fails.
    case("MIN of only NULLs is NULL", AB + "WHERE min(a[..i].p) > 0" + STRICT, rows(4),
         ["a=[x3] b=x4"], **p(None, None, 3, 1)),
    # the union plan (OR at the top): the first branch as in Flink's example, c=x4 (30 > 25);
    # a conjunct on a variable of the branch not taken does not apply
    case("OR at the top: a running aggregate in one branch",
         "PATTERN OR(SEQ(ANY+ a[], ANY b), ANY c) WHERE avg(a[..i].p) < 15 AND c.p > 25"
         + STRICT, rows(5),
         ["a=[x2] b=x3", "a=[x2 x3] b=x4", "a=[x3] b=x4", "c=x4"], **p(20, 10, 12, 30, 11)),
    # 5 1 4: checked for every i once b is bound: from x1 avg 5 < b fails for b=x2 (1) and for
    # b=x3 (4, at i=1); from x2 avg 1 < 4. The whole list's average would accept a=[x1 x2]
    # b=x3 (3 < 4).
    case("a running aggregate compared with a later variable (every prefix)",
         AB + "WHERE avg(a[..i].p) < b.p" + STRICT, rows(3), ["a=[x2] b=x3"], **p(5, 1, 4)),
    # 3 1 2 with skip-till-any-match: a is any subsequence; a[..i] are the elements chosen so
    # far (not the rows skipped). Every a holding x1 fails at i=1 (3 > 2); a=[x2] (sum 1) is
    # followed by b=x3; a=[x2 x3] and a=[x3] have no b.
    case("skip-till-any-match: the prefix is the elements chosen, not the rows between",
         AB + "WHERE sum(a[..i].p) <= 2", rows(3), ["a=[x2] b=x3"], **p(3, 1, 2)),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_running(backend: BackendFn, c: Case) -> None:
    c.check(backend)
