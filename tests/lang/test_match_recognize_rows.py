"""The match_recognize dialect's ALL ROWS PER MATCH, RUNNING / FINAL, MATCH_NUMBER() in
expressions, PREV / NEXT with offsets and one-row aggregates in DEFINE (docs/language.md
"match_recognize", docs/semantics.md 19): translations, refusals, and runs checked against
hand-derived rows on the oracle and the engine."""

from __future__ import annotations

import pyarrow as pa
import pytest
from click.testing import CliRunner

import kleene
from kleene.cli.main import cli
from kleene.events.readers import read_events
from kleene.lang import parse, to_text


def mr(body: str, skip: str = "PAST LAST ROW") -> str:
    """``MEASURES ... ROWS PER MATCH PATTERN ... DEFINE ...`` with the SKIP clause in place."""
    k = body.index("PATTERN")
    return (f"MATCH_RECOGNIZE (PARTITION BY s ORDER BY ts {body[:k]}AFTER MATCH SKIP {skip} "
            f"{body[k:]})")


def canonical(text: str) -> str:
    return to_text(parse(text, dialect="match_recognize"))


def _events(prices: list[float]) -> kleene.EventBatch:
    table = pa.table({"id": list(range(len(prices))), "s": ["u"] * len(prices),
                      "ts": pa.array([1000 * i for i in range(len(prices))], pa.timestamp("ms")),
                      "p": prices})
    events, _ = read_events(table, time_col="ts", event_type="R", id_col="id")
    return events


def _both(text: str, events: kleene.EventBatch) -> list[kleene.Match]:
    """The oracle's matches, after checking the engine gives the same (values included)."""
    got = {e: list(kleene.compile(text, dialect="match_recognize", engine=e).run(events))
           for e in ("oracle", "automaton")}
    assert [m.key() for m in got["oracle"]] == [m.key() for m in got["automaton"]]
    return got["oracle"]


# ------------------------------------------------------------------------------ translation
@pytest.mark.parametrize(("body", "where"), [
    # PREV / NEXT k rows away, across single variables and fixed-count repetitions
    ("PATTERN (A B C) DEFINE C AS C.p > PREV(C.p, 2)", "WHERE C.p > A.p"),
    ("PATTERN (A B{2} C) DEFINE C AS C.p > PREV(C.p, 3)", "WHERE C.p > A.p"),
    ("PATTERN (A B{2,3} C) DEFINE C AS C.p > PREV(C.p, 2)", "WHERE C.p > B[last-1].p"),
    ("PATTERN (A B{2,3} C) DEFINE A AS A.p < NEXT(A.p, 2)", "WHERE A.p < B[2].p"),
    ("PATTERN (A B C) DEFINE A AS A.p < NEXT(A.p, 2) AND A.p = PREV(A.p, 0)",
     "WHERE A.p < C.p AND A.p = A.p"),
    # an aggregate over one row is that row's value (running: the current row)
    ("PATTERN (A B+ C) DEFINE A AS AVG(A.p) < 15, C AS C.p > MAX(A.p) AND COUNT(A) = 1",
     "WHERE A.p < 15 AND (C.p > A.p AND 1 = 1)"),
])
def test_define_translations(body: str, where: str) -> None:
    assert canonical(mr(body)).splitlines()[1] == where


def test_all_rows_translation() -> None:
    got = canonical(mr("MEASURES LAST(B.p) AS lb, FINAL LAST(B.p) AS flb, COUNT(*) AS n, "
                       "FINAL COUNT(*) AS fn, CLASSIFIER() AS cl, MATCH_NUMBER() + 1 AS m, "
                       "RUNNING FIRST(B.p) AS fb ALL ROWS PER MATCH OMIT EMPTY MATCHES "
                       "PATTERN (A {- B+ -} C) DEFINE B AS B.p < PREV(B.p)"))
    assert got.splitlines()[-3:] == [
        "EMIT ROWS EXCLUDE B", "AFTER MATCH SKIP PAST LAST ROW",
        "RETURN B[last].p AS lb, final(B[last].p) AS flb, coalesce(count(A), 0) + count(B) + "
        "coalesce(count(C), 0) AS n, final(coalesce(count(A), 0) + count(B) + "
        "coalesce(count(C), 0)) AS fn, classifier() AS cl, match_number() + 1 AS m, "
        "B[1].p AS fb"]
    # ONE ROW PER MATCH is unchanged: RUNNING and FINAL read the last row
    one = canonical(mr("MEASURES LAST(B.p) AS lb, FINAL LAST(B.p) AS flb ONE ROW PER MATCH "
                       "PATTERN (A B+)"))
    assert one.splitlines()[-1] == "RETURN B[last].p AS lb, B[last].p AS flb"
    assert "EMIT" not in one


# ------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize(("text", "what"), [
    (mr("ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A)"),
     "ALL ROWS PER MATCH WITH UNMATCHED ROWS is not supported"),
    (mr("MEASURES p AS x ALL ROWS PER MATCH PATTERN (A B)"),
     "the column p without a variable in ALL ROWS PER MATCH"),
    (mr("MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A B A)"),
     "CLASSIFIER() in ALL ROWS PER MATCH when a variable occurs more than once"),
    (mr("MEASURES FINAL CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN (A B)"),
     "FINAL CLASSIFIER() in ALL ROWS PER MATCH"),
    (mr("PATTERN (A B+ C) DEFINE B AS B.p > PREV(B.p, 2)"),
     "PREV(B.p, 2) in the DEFINE of the repeated variable B (offsets above 1)"),
    (mr("PATTERN (A B+ C) DEFINE C AS C.p > PREV(C.p, 3)"),
     "PREV(C.p, 3) where the row 3 before is not fixed by the pattern"),
    (mr("PATTERN (A+ B A+) DEFINE A AS AVG(A.p) < 15"),
     "AVG over the rows mapped so far in DEFINE (a running aggregate) over the repeated "
     "variable A"),
    (mr("PATTERN (A B) DEFINE B AS COUNT(A.p) = 1"),
     "COUNT(A.column) over the single row of A in DEFINE"),
    (mr("MEASURES 1 AS row ALL ROWS PER MATCH PATTERN (A)"),
     "the RETURN name 'row' is taken by the row's event id"),
])
def test_refusals_name_the_construct(text: str, what: str) -> None:
    result = CliRunner().invoke(cli, ["check", "--dialect", "match_recognize", text])
    assert result.exit_code == 1
    first = result.output.splitlines()[0]
    assert first.startswith("kleene: query error: Line 1, column "), first
    assert what in first, first
    assert len(result.output.strip().splitlines()) <= 3 and "Traceback" not in result.output


def test_final_inside_an_aggregate_is_rejected() -> None:
    with pytest.raises(kleene.QueryValidationError, match=r"final\(\) inside the aggregate"):
        kleene.compile("PATTERN SEQ(ANY a, ANY+ b[]) USING strict-contiguity EMIT ROWS "
                       "AFTER MATCH SKIP PAST LAST ROW RETURN sum(final(b.x)) AS s")


# ------------------------------------------------------------------------------ runs
def test_all_rows_running_and_final_values() -> None:
    # prices 10 8 6 7 9 5: V = STRT 10, DOWN 8 6, UP 7 9; the rows of DOWN excluded
    text = mr("MEASURES LAST(DOWN.p) AS bottom, FINAL LAST(UP.p) AS top, COUNT(*) AS n, "
              "SUM(UP.p) AS ups, CLASSIFIER() AS cl, MATCH_NUMBER() * 10 AS m "
              "ALL ROWS PER MATCH PATTERN (STRT {- DOWN+ -} UP+) "
              "DEFINE DOWN AS DOWN.p < PREV(DOWN.p), UP AS UP.p > PREV(UP.p)")
    found = _both(text, _events([10, 8, 6, 7, 9, 5]))
    assert [dict(m.values) for m in found] == [
        # SQL's SUM over no row is NULL (kleene's sum() would say 0: the dialect guards it)
        {"row": 0, "bottom": None, "top": 9, "n": 1, "ups": None, "cl": "STRT", "m": 10},
        {"row": 3, "bottom": 6, "top": 9, "n": 4, "ups": 7, "cl": "UP", "m": 10},
        {"row": 4, "bottom": 6, "top": 9, "n": 5, "ups": 16, "cl": "UP", "m": 10}]
    assert {tuple(m.bindings.items()) for m in found} == {
        (("STRT", 0), ("DOWN", (1, 2)), ("UP", (3, 4)))}


def test_one_row_per_match_output_is_unchanged() -> None:
    """The same measures with ONE ROW PER MATCH: one record, final values, no ``row``."""
    text = mr("MEASURES LAST(DOWN.p) AS bottom, FINAL LAST(UP.p) AS top "
              "ONE ROW PER MATCH PATTERN (STRT DOWN+ UP+) "
              "DEFINE DOWN AS DOWN.p < PREV(DOWN.p), UP AS UP.p > PREV(UP.p)")
    found = _both(text, _events([10, 8, 6, 7, 9, 5]))
    assert [dict(m.values) for m in found] == [{"bottom": 6, "top": 9}]


def test_prev_with_an_offset_and_a_one_row_aggregate() -> None:
    # (A B C) with C above the row two before it (A) and A's one-row AVG below 9:
    # prices 10 8 12 7 5 9 -> A=1 (8) B=2 C=3? 7 > 8 no; A=3 (7) B=4 C=5: 9 > 7 yes
    text = mr("MEASURES A.id AS a, C.id AS c PATTERN (A B C) "
              "DEFINE A AS AVG(A.p) < 9, C AS C.p > PREV(C.p, 2)", "TO NEXT ROW")
    found = _both(text, _events([10, 8, 12, 7, 5, 9]))
    assert [dict(m.values) for m in found] == [{"a": 3, "c": 5}]
