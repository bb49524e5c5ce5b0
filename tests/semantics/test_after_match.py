"""AFTER MATCH SKIP: SQL row pattern matching's preferred match and skip rules
(docs/semantics.md 19). Every expected list is derived by hand from the definition: attempts
start at the partition's first row; an attempt takes the first mapping in preference order
(greedy: more repetitions first, reluctant: fewer first, OR: the branch written first) that is
a match; the SKIP rule says where the next attempt starts."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

SEQ4 = "PATTERN SEQ(ANY a, ANY+ b[], ANY c) USING strict-contiguity"
ROWS4 = """
ts  1   2   3   4
    x1  x2  x3  x4
"""
# a, b, d+, c with c.v = 0: rows x1..x7, v = 1 1 1 1 0 1 0
ABDC = ("PATTERN SEQ(ANY a, ANY b, ANY+ d[], ANY c) WHERE c.v = 0 USING strict-contiguity "
        "AFTER MATCH SKIP ")
ROWS7 = """
ts  1   2   3   4   5   6   7
    x1  x2  x3  x4  x5  x6  x7
"""
V7 = {f"x{i}": {"v": v} for i, v in enumerate((1, 1, 1, 1, 0, 1, 0), 1)}

# The V shape (Oracle's "stock price V" example): a start row, strictly falling rows, strictly
# rising rows; PREV is the row before (down[1] follows strt, up[1] follows down[last]).
V_SHAPE = ("PATTERN SEQ(ANY strt, ANY+ down[], ANY+ up[]) "
           "WHERE down[1].p < strt.p AND down[i].p < down[i-1].p "
           "AND up[1].p > down[last].p AND up[i].p > up[i-1].p "
           "PARTITION BY sym USING strict-contiguity AFTER MATCH SKIP ")
PRICES = {f"x{i}": {"p": p, "sym": "S"} for i, p in enumerate(
    (25, 12, 15, 20, 19, 15, 25, 25, 14, 12, 14, 13, 20), 1)}
ROWS13 = "ts  " + "  ".join(f"{i:<3}" for i in range(1, 14)) + "\n    " + "  ".join(
    f"x{i:<2}" for i in range(1, 14)) + "\n"
# W shape: the textbook pattern STRT DOWN+ UP+ DOWN+ UP+ (DOWN and UP occur twice, so the
# second occurrences are renamed down2 / up2 with the same conditions).
W_SHAPE = ("PATTERN SEQ(ANY strt, ANY+ down[], ANY+ up[], ANY+ down2[], ANY+ up2[]) "
           "WHERE down[1].p < strt.p AND down[i].p < down[i-1].p "
           "AND up[1].p > down[last].p AND up[i].p > up[i-1].p "
           "AND down2[1].p < up[last].p AND down2[i].p < down2[i-1].p "
           "AND up2[1].p > down2[last].p AND up2[i].p > up2[i-1].p "
           "PARTITION BY sym USING strict-contiguity AFTER MATCH SKIP ")

# Flink's stock query (benchmarks/flink_baseline.py) as the match_recognize dialect prints it
FLINK_STOCK = (
    "PATTERN SEQ(ANY A, ANY+ B[], ANY C) "
    "WHERE (NULL IS NULL AND B[1].price > A.price OR B[1].price > NULL) "
    "AND (B[i-1].price IS NULL AND B[i].price > A.price OR B[i].price > B[i-1].price) "
    "AND C.price < A.price PARTITION BY symbol WITHIN 599999.999 milliseconds "
    "USING strict-contiguity AFTER MATCH SKIP ")
# symbols X X Y X X Y Y X X, prices 10 11 50 12 9 51 49 13 8 (the hand loop's drawn timeline)
STOCK_ROWS = """
ts  1   2   3   4   5   6   7   8   9
    s0  s1  s2  s3  s4  s5  s6  s7  s8
"""
STOCK_ATTRS = {f"s{k}": {"symbol": sym, "price": p} for k, (sym, p) in enumerate(zip(
    "XXYXXYYXX", (10.0, 11.0, 50.0, 12.0, 9.0, 51.0, 49.0, 13.0, 8.0), strict=True))}

CASES = [
    case("Flink's stock query, SKIP TO NEXT ROW: every A whose rising run ends below it",
         FLINK_STOCK + "TO NEXT ROW", STOCK_ROWS,
         ["A=s0 B=[s1 s3] C=s4", "A=s1 B=[s3] C=s4", "A=s2 B=[s5] C=s6", "A=s4 B=[s7] C=s8"],
         **STOCK_ATTRS),
    case("Flink's stock query, SKIP PAST LAST ROW: s4 ends X's first match, so it starts none",
         FLINK_STOCK + "PAST LAST ROW", STOCK_ROWS,
         ["A=s0 B=[s1 s3] C=s4", "A=s2 B=[s5] C=s6"], **STOCK_ATTRS),
    case("greedy: b takes as many rows as leave a c", SEQ4 + " AFTER MATCH SKIP PAST LAST ROW",
         ROWS4, ["a=x1 b=[x2 x3] c=x4"]),
    case("reluctant: b takes as few rows as possible; the next attempt starts at x4 and "
         "finds no 3 rows", SEQ4.replace("ANY+", "ANY+?") + " AFTER MATCH SKIP PAST LAST ROW",
         ROWS4, ["a=x1 b=[x2] c=x3"]),
    case("TO NEXT ROW: one (preferred) match per start row",
         SEQ4 + " AFTER MATCH SKIP TO NEXT ROW", ROWS4,
         ["a=x1 b=[x2 x3] c=x4", "a=x2 b=[x3] c=x4"]),
    case("reluctant TO NEXT ROW", SEQ4.replace("ANY+", "ANY+?") + " AFTER MATCH SKIP TO NEXT ROW",
         ROWS4, ["a=x1 b=[x2] c=x3", "a=x2 b=[x3] c=x4"]),
    case("TO NEXT ROW: every start row, greedy d", ABDC + "TO NEXT ROW", ROWS7,
         ["a=x1 b=x2 d=[x3 x4 x5 x6] c=x7", "a=x2 b=x3 d=[x4 x5 x6] c=x7",
          "a=x3 b=x4 d=[x5 x6] c=x7", "a=x4 b=x5 d=[x6] c=x7"], **V7),
    case("TO FIRST d: the next attempt starts at d's first row (x3, then x5: no match)",
         ABDC + "TO FIRST d", ROWS7,
         ["a=x1 b=x2 d=[x3 x4 x5 x6] c=x7", "a=x3 b=x4 d=[x5 x6] c=x7"], **V7),
    case("TO LAST d: the next attempt starts at x6 (no match from there)",
         ABDC + "TO LAST d", ROWS7, ["a=x1 b=x2 d=[x3 x4 x5 x6] c=x7"], **V7),
    case("PAST LAST ROW", ABDC + "PAST LAST ROW", ROWS7, ["a=x1 b=x2 d=[x3 x4 x5 x6] c=x7"],
         **V7),
    case("reluctant d stops at the first c with v = 0",
         ABDC.replace("ANY+", "ANY+?") + "PAST LAST ROW", ROWS7,
         ["a=x1 b=x2 d=[x3 x4] c=x5"], **V7),
    case("greedy then greedy: a longest, b what is left",
         "PATTERN SEQ(ANY+ a[], ANY+ b[]) WHERE b[last].v = 0 USING strict-contiguity "
         "AFTER MATCH SKIP PAST LAST ROW",
         ROWS4, ["a=[x1 x2 x3] b=[x4]"], x1={"v": 1}, x2={"v": 0}, x3={"v": 1}, x4={"v": 0}),
    case("reluctant then greedy: a shortest, b the longest run ending on v = 0",
         "PATTERN SEQ(ANY+? a[], ANY+ b[]) WHERE b[last].v = 0 USING strict-contiguity "
         "AFTER MATCH SKIP PAST LAST ROW",
         ROWS4, ["a=[x1] b=[x2 x3 x4]"], x1={"v": 1}, x2={"v": 0}, x3={"v": 1}, x4={"v": 0}),
    case("alternation: the branch written first is preferred",
         "PATTERN SEQ(OR(SEQ(ANY a, ANY b), ANY c), ANY d) USING strict-contiguity "
         "AFTER MATCH SKIP PAST LAST ROW", ROWS4.replace("x4", "  "),
         ["a=x1 b=x2 d=x3"]),
    case("alternation in the other order: c, d; then an attempt at x3 finds no d",
         "PATTERN SEQ(OR(ANY c, SEQ(ANY a, ANY b)), ANY d) USING strict-contiguity "
         "AFTER MATCH SKIP PAST LAST ROW", ROWS4.replace("x4", "  "),
         ["c=x1 d=x2"]),
    case("top-level alternation: the first branch wins although the second is longer",
         "PATTERN OR(SEQ(ANY a, ANY b), SEQ(ANY c, ANY d, ANY e)) USING strict-contiguity "
         "AFTER MATCH SKIP PAST LAST ROW", ROWS4, ["a=x1 b=x2", "a=x3 b=x4"]),
    case("top-level alternation, TO NEXT ROW",
         "PATTERN OR(SEQ(ANY a, ANY b), SEQ(ANY c, ANY d, ANY e)) USING strict-contiguity "
         "AFTER MATCH SKIP TO NEXT ROW", ROWS4, ["a=x1 b=x2", "a=x2 b=x3", "a=x3 b=x4"]),
    case("a repeated group: greedy takes two repetitions",
         "PATTERN SEQ((SEQ(A a, B b))+, C c) USING strict-contiguity "
         "AFTER MATCH SKIP PAST LAST ROW",
         """
         ts  1   2   3   4   5
             a1  b1  a2  b2  c1
         """, ["a=[a1 a2] b=[b1 b2] c=c1"]),
    case("rows are contiguous: an event in between breaks the match; each partition is on "
         "its own",
         "PATTERN SEQ(A a, B+ b[]) PARTITION BY k USING strict-contiguity "
         "AFTER MATCH SKIP PAST LAST ROW",
         """
         ts  1   2   3   4   5
             a1  a2  b1  c1  b2
         """, ["a=a2 b=[b1]"], a1={"k": 1}, a2={"k": 2}, b1={"k": 2}, c1={"k": 2},
         b2={"k": 2}),
    case("a time window prunes: b rows beyond it are not taken",
         "PATTERN SEQ(ANY a, ANY+ b[]) WITHIN 2 seconds USING strict-contiguity "
         "AFTER MATCH SKIP PAST LAST ROW", ROWS7,
         ["a=x1 b=[x2 x3]", "a=x4 b=[x5 x6]"]),
    case("the V shape, SKIP PAST LAST ROW: the next attempt starts after the V",
         V_SHAPE + "PAST LAST ROW", ROWS13,
         ["strt=x1 down=[x2] up=[x3 x4]", "strt=x5 down=[x6] up=[x7]",
          "strt=x8 down=[x9 x10] up=[x11]"], **PRICES),
    case("the V shape, SKIP TO LAST up: the next attempt starts at the top of the V",
         V_SHAPE + "TO LAST up", ROWS13,
         ["strt=x1 down=[x2] up=[x3 x4]", "strt=x4 down=[x5 x6] up=[x7]",
          "strt=x8 down=[x9 x10] up=[x11]", "strt=x11 down=[x12] up=[x13]"], **PRICES),
    case("the V shape, SKIP TO NEXT ROW: every start row that begins a V",
         V_SHAPE + "TO NEXT ROW", ROWS13,
         ["strt=x1 down=[x2] up=[x3 x4]", "strt=x4 down=[x5 x6] up=[x7]",
          "strt=x5 down=[x6] up=[x7]", "strt=x8 down=[x9 x10] up=[x11]",
          "strt=x9 down=[x10] up=[x11]", "strt=x11 down=[x12] up=[x13]"], **PRICES),
    case("the W shape, SKIP PAST LAST ROW", W_SHAPE + "PAST LAST ROW", ROWS13,
         ["strt=x1 down=[x2] up=[x3 x4] down2=[x5 x6] up2=[x7]",
          "strt=x8 down=[x9 x10] up=[x11] down2=[x12] up2=[x13]"], **PRICES),
    case("the W shape, SKIP TO NEXT ROW: the Vs at x4, x5 and x11 have no second V after "
         "them", W_SHAPE + "TO NEXT ROW", ROWS13,
         ["strt=x1 down=[x2] up=[x3 x4] down2=[x5 x6] up2=[x7]",
          "strt=x8 down=[x9 x10] up=[x11] down2=[x12] up2=[x13]",
          "strt=x9 down=[x10] up=[x11] down2=[x12] up2=[x13]"], **PRICES),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_after_match(backend: BackendFn, c: Case) -> None:
    c.check(backend)
