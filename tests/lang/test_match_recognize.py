"""The match_recognize dialect (docs/language.md "match_recognize"): translation into the
canonical query, errors, and runs checked against hand-written expectations and an
independent loop over the stock query's SQL semantics."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

import kleene
from kleene.cli.main import cli
from kleene.errors import QuerySyntaxError
from kleene.events.readers import read_events
from kleene.lang import detect_dialect, parse, to_text

STOCK = """SELECT a_id, b_first, b_last, c_id FROM stock MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES A.id AS a_id, FIRST(B.id) AS b_first, LAST(B.id) AS b_last, C.id AS c_id
  ONE ROW PER MATCH
  AFTER MATCH SKIP {skip}
  PATTERN (A B+ C) WITHIN INTERVAL '{secs}' SECOND
  DEFINE
    B AS (LAST(B.price, 1) IS NULL AND B.price > A.price) OR B.price > LAST(B.price, 1),
    C AS C.price < A.price
)"""

STOCK_CANONICAL = """PATTERN SEQ(ANY A, ANY+ B[], ANY C)
WHERE (NULL IS NULL AND B[1].price > A.price OR B[1].price > NULL) AND (B[i-1].price IS NULL AND B[i].price > A.price OR B[i].price > B[i-1].price) AND C.price < A.price
PARTITION BY symbol
WITHIN 599999.999 milliseconds
USING strict-contiguity
AFTER MATCH SKIP TO NEXT ROW
RETURN A.id AS a_id, B[1].id AS b_first, B[last].id AS b_last, C.id AS c_id
"""


def mr(body: str, skip: str = "PAST LAST ROW") -> str:
    return f"MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts AFTER MATCH SKIP {skip} {body})"


def canonical(text: str) -> str:
    return to_text(parse(text, dialect="match_recognize"))


# ------------------------------------------------------------------------------ translation
def test_check_prints_the_canonical_query() -> None:
    text = STOCK.format(skip="TO NEXT ROW", secs=600)
    result = CliRunner().invoke(cli, ["check", "--dialect", "match_recognize", text])
    assert result.exit_code == 0, result.output
    assert result.output == STOCK_CANONICAL


def test_detected_from_match_recognize() -> None:
    text = STOCK.format(skip="TO NEXT ROW", secs=600)
    assert detect_dialect(text) == "match_recognize"
    result = CliRunner().invoke(cli, ["check", text])
    assert result.exit_code == 0, result.output
    assert result.output == STOCK_CANONICAL


@pytest.mark.parametrize(("body", "expected"), [
    # PREV on the first row of a list is the previous variable's (last) row
    ("PATTERN (S D+ U+) DEFINE D AS D.p < PREV(D.p), U AS U.p > PREV(U.p)",
     "PATTERN SEQ(ANY S, ANY+ D[], ANY+ U[])\n"
     "WHERE D[1].p < S.p AND D[i].p < D[i-1].p AND U[1].p > D[last].p AND U[i].p > U[i-1].p"),
    # a bare column in DEFINE is the current row; a variable without DEFINE is TRUE
    ("PATTERN (A B) DEFINE B AS p > PREV(p)",
     "PATTERN SEQ(ANY A, ANY B)\nWHERE B.p > A.p"),
    # a repeated variable: one kleene variable per occurrence, each with the condition
    ("PATTERN (S D+ U+ D+) DEFINE D AS D.p < PREV(D.p)",
     "PATTERN SEQ(ANY S, ANY+ D[], ANY+ U[], ANY+ D_2[])\n"
     "WHERE D[1].p < S.p AND D[i].p < D[i-1].p AND D_2[1].p < U[last].p "
     "AND D_2[i].p < D_2[i-1].p"),
    # reluctant quantifiers, ? and bounds
    ("PATTERN (A B+? C?? D{2,3}? E{,2}) DEFINE E AS E.p > 0",
     "PATTERN SEQ(ANY A, ANY+? B[], ANY{0,1}? C[], ANY{2,3}? D[], ANY{0,2} E[])\n"
     "WHERE E[i].p > 0"),
    # PERMUTE: the alternation of the permutations in SQL's order; {- -} is dropped
    ("PATTERN (PERMUTE(A, B) {- C -})",
     "PATTERN SEQ(OR(SEQ(ANY A, ANY B), SEQ(ANY B_2, ANY A_2)), ANY C)"),
    # another variable's row: mapped before -> its last row; mapped after -> NULL (running)
    ("PATTERN (A B+ C) DEFINE B AS B.p > A.p AND C.p IS NULL, C AS C.p < LAST(B.p)",
     "PATTERN SEQ(ANY A, ANY+ B[], ANY C)\n"
     "WHERE B[i].p > A.p AND NULL IS NULL AND C.p < B[last].p"),
    # NEXT in a list: rows 1..n-1 against the next element, the last row against C
    ("PATTERN (A B* C) DEFINE B AS B.x < NEXT(B.x) AND B.x > A.x",
     "PATTERN SEQ(ANY A, ANY* B[], ANY C)\n"
     "WHERE B[i-1].x < B[i].x AND B[i-1].x > A.x AND (count(B) = 0 OR B[last].x < C.x "
     "AND B[last].x > A.x)"),
    # NEXT of a single row; FIRST and an aggregate over an earlier variable
    ("PATTERN (A B+ C D) DEFINE C AS C.p < NEXT(C.p) AND C.p > FIRST(B.p) "
     "AND C.p > AVG(B.p)",
     "PATTERN SEQ(ANY A, ANY+ B[], ANY C, ANY D)\n"
     "WHERE C.p < D.p AND C.p > B[1].p AND C.p > avg(B.p)"),
])
def test_pattern_and_define(body: str, expected: str) -> None:
    got = canonical(mr(body))
    assert got.startswith(expected + "\n"), got


def test_measures_and_skip() -> None:
    got = canonical(
        "MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts "
        "MEASURES FIRST(B.p) AS f, LAST(B.p, 1) AS l1, FINAL COUNT(*) AS n, "
        "RUNNING SUM(B.p) AS sb, CLASSIFIER() AS cls, A.p + 1 AS ap "
        "ONE ROW PER MATCH AFTER MATCH SKIP TO LAST B "
        "PATTERN (A B+ C) DEFINE C AS C.p < A.p)")
    assert got == ("PATTERN SEQ(ANY A, ANY+ B[], ANY C)\n"
                   "WHERE C.p < A.p\n"
                   "PARTITION BY s\n"
                   "USING strict-contiguity\n"
                   "AFTER MATCH SKIP TO LAST B\n"
                   "RETURN B[1].p AS f, B[last-1].p AS l1, 1 + count(B) + 1 AS n, "
                   "sum(B.p) + nullif(count(B.p), 0) * 0 AS sb, 'C' AS cls, A.p + 1 AS ap")
    kleene.compile(got)  # a valid canonical query (single rows count 1; SQL's SUM: NULL on none)


def test_default_skip_is_past_last_row() -> None:
    got = canonical("MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B))")
    assert "AFTER MATCH SKIP PAST LAST ROW" in got


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(("text", "where", "what"), [
    ("MATCH_RECOGNIZE (PATTERN (A B+ C DEFINE B AS B.x > 1)", "column 34", "expected ')'"),
    ("MATCH_RECOGNIZE (PATTERN (A B) DEFINE Z AS Z.x > 1)", "column 39",
     "DEFINE Z: no such variable in PATTERN"),
    ("MATCH_RECOGNIZE (MEASURES A.x PATTERN (A))", "column 31", "a measure needs a name"),
    ("MATCH_RECOGNIZE (ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A))", "column 37",
     "ALL ROWS PER MATCH WITH UNMATCHED ROWS is not supported"),
    ("MATCH_RECOGNIZE (PATTERN (A B) DEFINE A AS A.x > PREV(A.x))", "column 50",
     "PREV(A.x) where the previous row is not fixed by the pattern (it may lie before "
     "the match)"),
    ("MATCH_RECOGNIZE (PATTERN (B+ A B+) DEFINE B AS B.x > SUM(B.x))", "column 54",
     "SUM over the rows mapped so far in DEFINE (a running aggregate)"),
    ("MATCH_RECOGNIZE (PATTERN (A B) SUBSET U = (A, B))", "column 32", "SUBSET is not supported"),
    ("MATCH_RECOGNIZE (PATTERN (A B) DEFINE B AS FINAL LAST(A.x) > 1)", "column 44",
     "FINAL is not allowed in DEFINE"),
    ("MATCH_RECOGNIZE (ORDER BY ts DESC PATTERN (A))", "column 30", "DESC is not supported"),
    ("MATCH_RECOGNIZE (PATTERN (A B+ C) DEFINE B AS B.x < NEXT(B.x) AND B.x > PREV(B.x))",
     "column 73", "PREV and NEXT in one DEFINE of the repeated variable B"),
    ("MATCH_RECOGNIZE (PATTERN (D U D) DEFINE D AS D.x < FIRST(D.x))", "column 52",
     "FIRST(D.x) in the DEFINE of a variable that occurs more than once"),
    # kleene would skip a conjunct on an unbound variable where SQL reads NULL: refused
    ("MATCH_RECOGNIZE (PATTERN ((A+ | X) B) DEFINE B AS B.p > LAST(A.p))", "column 57",
     "DEFINE B reads A, which is inside an alternative"),
])
def test_errors_name_line_column_and_what(text: str, where: str, what: str) -> None:
    result = CliRunner().invoke(cli, ["check", "--dialect", "match_recognize", text])
    assert result.exit_code == 1
    first = result.output.splitlines()[0]
    assert first.startswith("kleene: query error: Line 1, " + where + ": "), first
    assert what in first, first
    assert "Traceback" not in result.output


def test_empty_pattern_is_rejected_at_validation() -> None:
    result = CliRunner().invoke(cli, ["check", "--dialect", "match_recognize",
                                      "MATCH_RECOGNIZE (PATTERN (A* B*))"])
    assert result.exit_code == 1
    assert "has no positive event" in result.output.splitlines()[0]


def test_unknown_dialect_name_lists_it() -> None:
    with pytest.raises(QuerySyntaxError, match="match_recognize"):
        parse("PATTERN A a", dialect="esper")


# ------------------------------------------------------------------------------ runs
def _events(rows: list[tuple[str, int, float]]) -> kleene.EventBatch:
    table = pa.table({"id": list(range(len(rows))), "s": [r[0] for r in rows],
                      "ts": pa.array([r[1] for r in rows], pa.timestamp("ms")),
                      "p": [r[2] for r in rows]})
    events, _ = read_events(table, time_col="ts", event_type="R", id_col="id")
    return events


def _run(text: str, events: kleene.EventBatch, engine: str = "automaton"
         ) -> list[dict[str, object]]:
    found = kleene.compile(text, dialect="match_recognize", engine=engine).run(events)
    return [dict(m.bindings) for m in found]


def _bind(text: str) -> dict[str, object]:
    """``"A=0 B=[1 2]"`` -> bindings (event ids)."""
    out: dict[str, object] = {}
    for tok in _split(text):
        k, v = tok.split("=")
        out[k] = tuple(int(x) for x in v[1:-1].split()) if v.startswith("[") else int(v)
    return out


def _split(text: str) -> list[str]:
    parts, cur, depth = [], "", 0
    for ch in text:
        if ch == " " and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    return [*parts, cur]


# one partition, prices by row (ids 0..)
P = [10, 8, 9, 12, 7, 6, 11, 5]


@pytest.mark.parametrize(("body", "skip", "expected"), [
    # greedy B+ then C below A
    ("PATTERN (A B+ C) DEFINE B AS B.p > PREV(B.p), C AS C.p < A.p", "PAST LAST ROW",
     ["A=1 B=[2 3] C=4", "A=5 B=[6] C=7"]),
    ("PATTERN (A B+ C) DEFINE B AS B.p > PREV(B.p), C AS C.p < A.p", "TO NEXT ROW",
     ["A=1 B=[2 3] C=4", "A=2 B=[3] C=4", "A=5 B=[6] C=7"]),
    # reluctant: the shortest B whose next row is a C (any row below A)
    ("PATTERN (A B+? C) DEFINE C AS C.p < A.p", "PAST LAST ROW",
     ["A=0 B=[1] C=2", "A=3 B=[4] C=5"]),
    # PERMUTE(X, Y): X then Y preferred over Y then X (at row 0 only Y X fits)
    ("PATTERN (PERMUTE(X, Y)) DEFINE X AS X.p < 10, Y AS Y.p > 8", "PAST LAST ROW",
     ["Y_2=0 X_2=1", "X=2 Y=3", "X=5 Y=6"]),
    # exclusion changes nothing with ONE ROW PER MATCH
    ("PATTERN (A {- B+ -} C) DEFINE B AS B.p > PREV(B.p), C AS C.p < A.p", "PAST LAST ROW",
     ["A=1 B=[2 3] C=4", "A=5 B=[6] C=7"]),
    # SKIP TO FIRST B: the next attempt starts at B's first row; greedy B prefers C=7 to C=5
    ("PATTERN (A B+ C) DEFINE B AS B.p <= 12, C AS C.p < 7", "TO FIRST B",
     [f"A={k} B=[{' '.join(str(x) for x in range(k + 1, 7))}] C=7" for k in range(6)]),
    # SKIP TO LAST B: the next attempt starts at row 6, where no match starts
    ("PATTERN (A B+ C) DEFINE B AS B.p <= 12, C AS C.p < 7", "TO LAST B",
     ["A=0 B=[1 2 3 4 5 6] C=7"]),
    # NEXT in a repeated variable's DEFINE: every B is below the row after it (for the last
    # B that is C); B=[1 2 3] fails (12 > 7)
    ("PATTERN (A B+ C) DEFINE B AS B.p < NEXT(B.p)", "PAST LAST ROW",
     ["A=0 B=[1 2] C=3", "A=4 B=[5] C=6"]),
    ("PATTERN (A B+ C) DEFINE B AS B.p < NEXT(B.p)", "TO NEXT ROW",
     ["A=0 B=[1 2] C=3", "A=1 B=[2] C=3", "A=4 B=[5] C=6"]),
    # reluctant B with SKIP TO LAST B: C=5 first, then from row 4
    ("PATTERN (A B+? C) DEFINE B AS B.p <= 12, C AS C.p < 7", "TO LAST B",
     ["A=0 B=[1 2 3 4] C=5", "A=4 B=[5 6] C=7"]),
])
def test_runs_match_the_hand_derived_matches(body: str, skip: str, expected: list[str]) -> None:
    events = _events([("u", 1000 * i, float(p)) for i, p in enumerate(P)])
    text = mr(body, skip)
    want = [_bind(e) for e in expected]
    assert _run(text, events, "oracle") == want
    assert _run(text, events) == want


def _stock_rows(n: int, seed: int) -> list[tuple[str, int, float]]:
    rng = np.random.default_rng(seed)
    price = {"u": 100.0, "v": 100.0, "w": 100.0}
    rows = []
    for i in range(n):
        s = str(rng.choice(["u", "v", "w"]))
        price[s] = round(price[s] + float(rng.normal(0, 1)), 1)
        rows.append((s, 250 * i, price[s]))
    return rows


def _hand_loop(rows: list[tuple[str, int, float]], skip: str, w_ms: int
               ) -> list[tuple[int, int, int, int]]:
    """(A B+ C) by SQL's rules, written out: B rises above A and then strictly; greedy B is
    the whole rise (a C, below A, can only follow it); the match must span less than W."""
    out = []
    for s in sorted({r[0] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r[0] == s]
        k = 0
        while k < len(idx):
            a = idx[k]
            j = k + 1
            if j < len(idx) and rows[idx[j]][2] > rows[a][2]:
                while j + 1 < len(idx) and rows[idx[j + 1]][2] > rows[idx[j]][2]:
                    j += 1
                c = j + 1
                if c < len(idx) and rows[idx[c]][2] < rows[a][2] \
                        and rows[idx[c]][1] - rows[a][1] < w_ms:
                    out.append((a, idx[k + 1], idx[j], idx[c]))
                    k = k + 1 if skip == "TO NEXT ROW" else c + 1
                    continue
            k += 1
    return sorted(out)


def test_match_number_counts_per_partition_in_attempt_order() -> None:
    # u: 10 8 9 12 7 | v: 5 9 4  (ids interleaved: u0 v1 u2 u3 v4 u5 u6 v7 u8)
    rows = [("u", 0, 10.0), ("v", 1000, 5.0), ("u", 2000, 8.0), ("u", 3000, 9.0),
            ("v", 4000, 9.0), ("u", 5000, 12.0), ("u", 6000, 7.0), ("v", 7000, 4.0),
            ("u", 8000, 11.0)]
    text = ("MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts MEASURES A.id AS a, "
            "MATCH_NUMBER() AS n AFTER MATCH SKIP TO NEXT ROW PATTERN (A B) "
            "DEFINE B AS B.p > A.p)")
    events = _events(rows)
    for engine in ("oracle", "automaton"):
        found = kleene.compile(text, dialect="match_recognize", engine=engine).run(events)
        # u: A=2 (8<9), A=3 (9<12), A=6 (7<11); v: A=1 (5<9); output in order of the last row
        assert [(m.values["a"], m.values["n"]) for m in found] == [
            (2, 1), (1, 1), (3, 2), (6, 3)], engine


@pytest.mark.parametrize("skip", ["TO NEXT ROW", "PAST LAST ROW"])
def test_stock_query_matches_the_hand_loop(skip: str) -> None:
    rows = _stock_rows(3000, seed=7)
    events = _events([(s, t, p) for s, t, p in rows])
    text = STOCK.format(skip=skip, secs=3).replace("symbol", "s").replace("price", "p")
    found = kleene.compile(text, dialect="match_recognize").run(events)
    got = sorted((m.values["a_id"], m.values["b_first"], m.values["b_last"],
                  m.values["c_id"]) for m in found)
    want = _hand_loop(rows, skip, 3000)
    assert len(want) > 100
    assert got == want


@pytest.mark.parametrize("skip", ["TO NEXT ROW", "PAST LAST ROW", "TO LAST B"])
def test_stock_query_engine_equals_oracle(skip: str) -> None:
    events = _events(_stock_rows(150, seed=3))
    text = STOCK.format(skip=skip, secs=3).replace("symbol", "s").replace("price", "p")
    oracle = kleene.compile(text, dialect="match_recognize", engine="oracle").run(events)
    engine = kleene.compile(text, dialect="match_recognize").run(events)
    assert len(oracle) > 3
    assert [(m.bindings, m.values) for m in engine] == [(m.bindings, m.values) for m in oracle]


def test_window_is_strict_like_flink() -> None:
    # A at 0 s, B at 1 s, C at 2 s: the match spans exactly 2 s, so WITHIN 2 s rejects it
    events = _events([("u", 0, 5.0), ("u", 1000, 6.0), ("u", 2000, 1.0)])
    base = ("PATTERN (A B+ C) WITHIN INTERVAL '{}' SECOND "
            "DEFINE B AS B.p > PREV(B.p), C AS C.p < A.p")
    assert _run(mr(base.format(2)), events) == []
    assert _run(mr(base.format(3)), events) == [{"A": 0, "B": (1,), "C": 2}]


def test_streaming_holds_the_matches_until_close() -> None:
    events = _events(_stock_rows(600, seed=5))
    text = STOCK.format(skip="PAST LAST ROW", secs=3).replace("symbol", "s").replace(
        "price", "p")
    q = kleene.compile(text, dialect="match_recognize")
    rt = q.start()
    early: list[kleene.Match] = []
    for lo in range(0, len(events), 100):
        early += rt.push(events.slice(lo, min(100, len(events) - lo)))
    assert early == []
    streamed = rt.close()
    batch = q.run(events)
    assert len(batch) > 10
    assert [(m.bindings, m.values) for m in streamed] == [(m.bindings, m.values) for m in batch]


def test_explain_names_the_policy() -> None:
    result = CliRunner().invoke(cli, ["explain", "--dialect", "match_recognize",
                                      STOCK.format(skip="TO LAST B", secs=600)])
    assert result.exit_code == 0, result.output
    assert "policy: AFTER MATCH SKIP TO LAST B (one preferred match per attempt" in result.output
    assert "plan: nfa" in result.output
