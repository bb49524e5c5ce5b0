"""The match_recognize dialect's running aggregates in DEFINE (docs/semantics.md 21): an
aggregate over the DEFINE's own repeated variable is over its rows mapped so far, the current
one included (SQL: DEFINE is always RUNNING); it becomes ``agg(v[..i].x)``. Also
``LAST(A.x, k)`` in A's own DEFINE (``A[i-k].x``). Translation,
refusals, and runs against hand-derived SQL matches on the oracle and every plan that runs
MATCH_RECOGNIZE queries."""

from __future__ import annotations

import pyarrow as pa
import pytest
from click.testing import CliRunner

import kleene
from kleene.cli.main import cli
from kleene.events.readers import read_events
from kleene.lang import parse, to_text


def mr(body: str, skip: str = "PAST LAST ROW") -> str:
    return f"MATCH_RECOGNIZE (ORDER BY ts AFTER MATCH SKIP {skip} {body})"


def canonical(text: str) -> str:
    return to_text(parse(text, dialect="match_recognize"))


@pytest.mark.parametrize(("body", "where"), [
    # Flink's documented example
    ("PATTERN (A+ B) DEFINE A AS AVG(A.price) < 15", "WHERE avg(A[..i].price) < 15"),
    ("PATTERN (A+ B) DEFINE A AS RUNNING AVG(A.price) < 15", "WHERE avg(A[..i].price) < 15"),
    # SQL's SUM of no non-NULL value is NULL (kleene's is 0)
    ("PATTERN (A+ B) DEFINE A AS SUM(A.price) <= 30",
     "WHERE sum(A[..i].price) + nullif(count(A[..i].price), 0) * 0 <= 30"),
    ("PATTERN (A* B) DEFINE A AS COUNT(A.p) < 3 AND MAX(A.p) - MIN(A.p) < 5",
     "WHERE count(A[..i].p) < 3 AND max(A[..i].p) - min(A[..i].p) < 5"),
    # LAST(A.p) in A's DEFINE is the current row; an expression inside the aggregate
    ("PATTERN (A+ B) DEFINE A AS AVG(A.p * 2) < LAST(A.p) + 1",
     "WHERE avg(A[..i].p * 2) < A[i].p + 1"),
    # with PREV: the first row separately (an aggregate over one row is its value)
    ("PATTERN (X A* B) DEFINE A AS A.p > PREV(A.p) AND AVG(A.p) < 15",
     "WHERE (count(A) = 0 OR A[1].p > X.p AND A[1].p < 15) "
     "AND (A[i].p > A[i-1].p AND avg(A[..i].p) < 15)"),
    # LAST(A.p, k) in A's DEFINE: A's row k before the current one (NULL on A's first rows)
    ("PATTERN (A+ B) DEFINE A AS LAST(A.p, 2) IS NULL OR A.p > LAST(A.p, 2)",
     "WHERE (NULL IS NULL OR A[1].p > NULL) AND (A[i-2].p IS NULL OR A[i].p > A[i-2].p)"),
])
def test_translation(body: str, where: str) -> None:
    got = canonical(mr(body))
    assert got.splitlines()[1] == where, got


def test_check_prints_the_canonical_flink_example() -> None:
    text = ("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(A.id) AS s, "
            "LAST(A.id) AS e PATTERN (A+ B) DEFINE A AS AVG(A.price) < 15)")
    result = CliRunner().invoke(cli, ["check", "--dialect", "match_recognize", text])
    assert result.exit_code == 0, result.output
    assert result.output == ("PATTERN SEQ(ANY+ A[], ANY B)\nWHERE avg(A[..i].price) < 15\n"
                             "USING strict-contiguity\nAFTER MATCH SKIP PAST LAST ROW\n"
                             "RETURN A[1].id AS s, A[last].id AS e\n")


@pytest.mark.parametrize(("text", "what"), [
    (mr("PATTERN (A+ B) DEFINE A AS COUNT(A.*) < 3"),
     "COUNT(A) over the rows of A mapped so far in its DEFINE"),
    (mr("PATTERN (A+ B) DEFINE A AS COUNT(*) < 3"),
     "COUNT over the rows mapped so far in DEFINE (a running aggregate) over several"),
    (mr("PATTERN (A+ B) DEFINE A AS AVG(A.p) < NEXT(A.p)"),
     "AVG over the rows mapped so far in DEFINE (a running aggregate) over the repeated "
     "variable A (only over the DEFINE's own variable, occurring once in PATTERN, without "
     "NEXT)"),
    (mr("PATTERN (A+ B A+) DEFINE A AS AVG(A.p) < 15"),
     "AVG over the rows mapped so far in DEFINE"),
    (mr("PATTERN (A+ B) DEFINE A AS AVG(PREV(A.p)) < 15"), "PREV inside an aggregate"),
    (mr("PATTERN (X A+ B) DEFINE A AS A.p > PREV(A.p) AND COUNT(A.p) < 3"),
     "COUNT over A's rows so far in a DEFINE of A that also uses PREV"),
    (mr("PATTERN (A+ B) DEFINE A AS FINAL AVG(A.p) < 15"), "FINAL is not allowed in DEFINE"),
])
def test_refusals_name_the_construct(text: str, what: str) -> None:
    result = CliRunner().invoke(cli, ["check", "--dialect", "match_recognize", text])
    assert result.exit_code == 1
    first = result.output.splitlines()[0]
    assert first.startswith("kleene: query error: Line 1, column "), first
    assert what in first, first
    assert "Traceback" not in result.output


def _events(prices: list[float | None]) -> kleene.EventBatch:
    table = pa.table({"id": list(range(len(prices))),
                      "ts": pa.array([1000 * i for i in range(len(prices))], pa.timestamp("ms")),
                      "p": pa.array(prices, pa.float64())})
    events, _ = read_events(table, time_col="ts", event_type="R", id_col="id")
    return events


def _bind(text: str) -> dict[str, object]:
    """``"A=[1 2] B=3"`` -> bindings (event ids)."""
    out: dict[str, object] = {}
    i = 0
    while i < len(text):
        j = text.index("=", i)
        k = text[i:j].strip()
        if text[j + 1] == "[":
            e = text.index("]", j)
            out[k] = tuple(int(x) for x in text[j + 2:e].split())
            i = e + 1
        else:
            e = text.find(" ", j)
            e = len(text) if e < 0 else e
            out[k] = int(text[j + 1:e])
            i = e
    return out


# Flink's example on prices 20 10 12 30 11 14 9 40, each prefix of A averaging below 15:
# from row 0 the first average is 20; from row 1: 10, 11, 17.3 (so A=[1 2], B=3); from row 4:
# 11, 12.5, 11.3, 18.5 (A=[4 5 6], B=7). TO NEXT ROW also from rows 2 (12, 21), 5 (14, 11.5,
# 21), 6 (9, 24.5); rows 3 and 7 (30, 40) start nothing.
FLINK = "PATTERN (A+ B) DEFINE A AS AVG(A.p) < 15"
FLINK_P: list[float | None] = [20, 10, 12, 30, 11, 14, 9, 40]


@pytest.mark.parametrize(("body", "skip", "prices", "expected"), [
    (FLINK, "PAST LAST ROW", FLINK_P, ["A=[1 2] B=3", "A=[4 5 6] B=7"]),
    (FLINK, "TO NEXT ROW", FLINK_P,
     ["A=[1 2] B=3", "A=[2] B=3", "A=[4 5 6] B=7", "A=[5 6] B=7", "A=[6] B=7"]),
    # SQL's SUM of only NULLs is NULL: A takes rows while every price so far is NULL
    ("PATTERN (A+ B) DEFINE A AS SUM(A.p) IS NULL", "PAST LAST ROW", [None, None, 5, None],
     ["A=[0 1] B=2"]),
    # COUNT counts non-NULL prices: 0, 1, 1, 2 from row 0
    ("PATTERN (A+ B) DEFINE A AS COUNT(A.p) <= 1", "PAST LAST ROW",
     [None, 3, None, 4, 7], ["A=[0 1 2] B=3"]),
    # AVG skips NULLs; the AVG of only NULLs is NULL (row 0 starts nothing): from row 1 the
    # averages are 10, 10, 13 then 17 (A=[1 2 3], B=4)
    ("PATTERN (A+ B) DEFINE A AS AVG(A.p) < 15", "PAST LAST ROW",
     [None, 10, None, 16, 30], ["A=[1 2 3] B=4"]),
    # rising A whose range so far stays within 5, then a B below X: prices 10 11 13 17 2 12
    # 14 1. From row 0, A=[1 2 3] has range 6, and after A=[1 2] or [1] no B is below 10;
    # from row 1, A=[2 3] (range 4) and B=4 (2 < 11); from row 5, A=[6] and B=7.
    ("PATTERN (X A+ B) DEFINE A AS A.p > PREV(A.p) AND MAX(A.p) - MIN(A.p) <= 5, "
     "B AS B.p < X.p", "PAST LAST ROW", [10, 11, 13, 17, 2, 12, 14, 1],
     ["X=1 A=[2 3] B=4", "X=5 A=[6] B=7"]),
    # every row above A's row two before it (TRUE while there is none): prices 5 1 6 2 7 3 1
    # 0. From row 0 rows 2..5 each beat the row two back (6 > 5, 2 > 1, 7 > 6, 3 > 2) and row
    # 6 does not (1 < 7): A=[0..5], B=6; from row 7 nothing follows. TO NEXT ROW: the same
    # from rows 1..4; from row 5 row 6 has no row two back in A (TRUE) and row 7 fails (0 <
    # 3): A=[5 6], B=7; from row 6 A=[6 7] leaves no B, so A=[6], B=7.
    ("PATTERN (A+ B) DEFINE A AS LAST(A.p, 2) IS NULL OR A.p > LAST(A.p, 2)", "PAST LAST ROW",
     [5, 1, 6, 2, 7, 3, 1, 0], ["A=[0 1 2 3 4 5] B=6"]),
    ("PATTERN (A+ B) DEFINE A AS LAST(A.p, 2) IS NULL OR A.p > LAST(A.p, 2)", "TO NEXT ROW",
     [5, 1, 6, 2, 7, 3, 1, 0],
     ["A=[0 1 2 3 4 5] B=6", "A=[1 2 3 4 5] B=6", "A=[2 3 4 5] B=6", "A=[3 4 5] B=6",
      "A=[4 5] B=6", "A=[5 6] B=7", "A=[6] B=7"]),
])
@pytest.mark.parametrize(("engine", "plan"), [
    ("oracle", None), ("automaton", None), ("automaton", "nfa"), ("automaton", "pda")])
def test_runs_match_the_hand_derived_matches(body: str, skip: str,
                                             prices: list[float | None], expected: list[str],
                                             engine: str, plan: str | None) -> None:
    q = kleene.compile(mr(body, skip), dialect="match_recognize", engine=engine, plan=plan)
    found = q.run(_events(prices))
    assert [dict(m.bindings) for m in found] == [_bind(e) for e in expected]


def test_other_plans_refuse_with_the_reason() -> None:
    with pytest.raises(kleene.QueryValidationError, match="running aggregate"):
        kleene.compile("PATTERN SEQ(A+ a[], B b) WHERE avg(a[..i].p) < 15", plan="tree")


def test_all_rows_per_match_with_a_running_define() -> None:
    """ALL ROWS PER MATCH: the same matches as ONE ROW, and MEASURES AVG(A.p) as of each row
    (running): 10, 11, then 11 at B; 11, 12.5, 34/3, then 34/3 at B."""
    text = ("MATCH_RECOGNIZE (ORDER BY ts MEASURES AVG(A.p) AS av, CLASSIFIER() AS c "
            f"ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW {FLINK})")
    want = [(1, 10.0, "A"), (2, 11.0, "A"), (3, 11.0, "B"), (4, 11.0, "A"), (5, 12.5, "A"),
            (6, 34 / 3, "A"), (7, 34 / 3, "B")]
    for engine in ("oracle", "automaton"):
        found = kleene.compile(text, dialect="match_recognize", engine=engine).run(
            _events(FLINK_P))
        assert [(m.values["row"], m.values["av"], m.values["c"]) for m in found] == want
        assert [dict(m.bindings) for m in found] == (
            [_bind("A=[1 2] B=3")] * 3 + [_bind("A=[4 5 6] B=7")] * 4)
