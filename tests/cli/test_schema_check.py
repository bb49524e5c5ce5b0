"""Issue 16, item 1: a query is checked against the input it runs on (the CSV header, the
events' Arrow schema): an unknown attribute, event type or PARTITION BY column, and a string
compared with a number, are query errors (exit 1) with a did-you-mean, not 0 silent matches.

The CLI cases run on slices of the real datasets in /work/shared/data (see each SOURCE.md).
"""

from __future__ import annotations

import gzip
import json
import os
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

import kleene
from kleene.cli.main import EXIT_QUERY, cli
from kleene.semantic.schema import InputSchema, check_against, suggest

DATA = Path(os.environ.get("KLEENE_SHARED_DATA", "/work/shared/data"))
AARHUS = DATA / "aarhus_traffic" / "aarhus_traffic_2014-08.csv.gz"
GLUCOSE = DATA / "cgm_glucose" / "cgm_glucose.csv.gz"
needs_data = pytest.mark.skipif(not (AARHUS.exists() and GLUCOSE.exists()),
                                reason="the shared datasets are not here")

CONGESTION = ("PATTERN SEQ(Traffic a, Traffic b) WHERE a.avgSpeed > 60 AND b.avgSpeed < 30 "
              "PARTITION BY REPORT_ID WITHIN 10 minutes")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The first 3,000 readings of the Aarhus traffic data (TIMESTAMP, REPORT_ID, avgSpeed...)."""
    dest = tmp_path_factory.mktemp("traffic") / "traffic.csv"
    with gzip.open(AARHUS, "rt", encoding="utf-8") as f:
        dest.write_text("".join(next(f) for _ in range(3_001)), encoding="utf-8")
    return str(dest)


@needs_data
@pytest.mark.parametrize("stream", [(), ("--stream", "--batch-size", "500")])
@pytest.mark.parametrize(("query", "message", "caret"), [
    (CONGESTION.replace("a.avgSpeed", "a.avgspeed"),
     "has no column 'avgspeed' (did you mean 'avgSpeed'?); its columns are: TIMESTAMP, "
     "REPORT_ID, avgMeasuredTime, avgSpeed, medianMeasuredTime, vehicleCount", "a.avgspeed"),
    (CONGESTION.replace("BY REPORT_ID", "BY REPORTID"),
     "PARTITION BY REPORTID: {src} has no column 'REPORTID' (did you mean 'REPORT_ID'?)",
     "REPORTID"),
    (CONGESTION.replace("(Traffic a", "(Trafic a"),
     "event type 'Trafic' (variable 'a') does not occur in {src} (did you mean 'Traffic'?); "
     "its types are: Traffic", "Trafic a"),
    (CONGESTION.replace("a.avgSpeed > 60", "a.avgSpeed > '60'"),
     "'a.avgSpeed > '60'' compares a number with a string; compare values of the same kind",
     "a.avgSpeed > '60'"),
    (CONGESTION + " RETURN a.REPORT_ID + a.vehiclecount AS x",
     "has no column 'vehiclecount' (did you mean 'vehicleCount'?)", "a.vehiclecount"),
])
def test_typos_against_the_traffic_header_exit_1(traffic: str, query: str, message: str,
                                                 caret: str, stream: tuple[str, ...]) -> None:
    code, out, err = invoke("run", query, "--input", traffic, "--event-type", "Traffic",
                            *stream)
    assert code == EXIT_QUERY, err
    assert out == ""
    first, text, marks = err.splitlines()
    assert first.startswith("kleene: query error: Line 1, column ")
    assert message.format(src=traffic) in first
    column = text.index(caret)  # the caret is under the misspelt name
    assert marks.index("^") == column and marks.count("^") >= len(caret.split()[0])


@needs_data
def test_correct_query_runs(traffic: str) -> None:
    code, out, err = invoke("run", CONGESTION, "--input", traffic, "--event-type", "Traffic",
                            "--count", "--quiet")
    assert (code, err) == (0, "")
    assert int(out) > 0


@needs_data
def test_glucose_column_typo(tmp_path: Path) -> None:
    src = tmp_path / "cgm.csv"
    with gzip.open(GLUCOSE, "rt", encoding="utf-8") as f:
        src.write_text("".join(next(f) for _ in range(2_001)), encoding="utf-8")
    hypo = ("PATTERN SEQ(G a, G+ b[], G c) WHERE a.glucose >= 70 AND b[i].Glucose < 70 AND "
            "c.glucose >= 70 WITHIN 2 hours USING skip-till-next-match")
    code, _, err = invoke("run", hypo, "--input", str(src), "--time-col", "datetime",
                          "--event-type", "G")
    assert code == EXIT_QUERY
    assert "has no column 'Glucose' (did you mean 'glucose'?); its columns are: isig, " \
           "datetime, glucose" in err
    code, out, err = invoke("run", hypo.replace("Glucose", "glucose"), "--input", str(src),
                            "--time-col", "datetime", "--event-type", "G", "-q", "--count")
    assert code == 0, err


def test_type_values_of_a_type_column(tmp_path: Path) -> None:
    """With a type column, the whole input is read before matching: a type that never occurs
    is an error; with --stream only the first chunk is known, so it is a warning and the run
    goes on (the type may come later: here it does)."""
    src = tmp_path / "ticks.csv"
    src.write_text("ts,type,price\n1,Stock,10\n2,Stock,11\n3,Stock,12\n4,Bond,5\n")
    q = "PATTERN SEQ(Stock a, Bond b) WHERE b.price < a.price WITHIN 10 seconds"
    code, _, err = invoke("run", q.replace("Stock a", "Stok a"), "--input", str(src))
    assert code == EXIT_QUERY
    assert "event type 'Stok' (variable 'a') does not occur in" in err
    assert "(did you mean 'Stock'?); its types are: Bond, Stock" in err
    code, out, err = invoke("run", q.replace("Bond b", "bond b"), "--input", str(src))
    assert code == EXIT_QUERY and "(did you mean 'Bond'?)" in err
    code, out, err = invoke("run", q, "--input", str(src), "--stream", "--batch-size", "2",
                            "--quiet")
    assert code == 0
    assert err == ("kleene: warning: event type 'Bond' (variable 'b') is not among the types "
                   f"of the first rows of {src}: Stock\n")
    assert [json.loads(line)["match"] for line in out.splitlines()] == [
        {"a": 0, "b": 3}, {"a": 1, "b": 3}, {"a": 2, "b": 3}]


def test_pseudo_attributes_and_the_time_column_are_known(tmp_path: Path) -> None:
    src = tmp_path / "e.csv"
    src.write_text("TIMESTAMP,kind,x\n2014-01-01T00:00:00,A,1\n2014-01-01T00:00:01,B,2\n")
    q = ("PATTERN SEQ(A a, B b) WHERE b.ts > a.ts AND b.TIMESTAMP > a.TIMESTAMP "
         "AND a.type = 'A' AND a.kind = 'A' AND a.id = 0 RETURN b.x - a.x AS d")
    code, out, err = invoke("run", q, "--input", str(src), "--type-col", "kind", "--quiet")
    assert code == 0, err
    assert json.loads(out)["values"] == {"d": 1}


def test_api_checks_when_events_are_given() -> None:
    events = kleene.EventBatch.from_records([
        {"type": "A", "ts": 1, "sym": "X", "price": 1.5},
        {"type": "B", "ts": 2, "sym": "X", "price": 2.5}])
    with pytest.raises(kleene.QueryValidationError, match=r"has no column 'Price' \(did you "
                                                          r"mean 'price'\?\)"):
        kleene.compile("PATTERN SEQ(A a, B b) WHERE b.Price > 1", schema=events)
    with pytest.raises(kleene.QueryValidationError, match="compares a string with a number"):
        kleene.compile("PATTERN SEQ(A a, B b) WHERE a.sym = 1", schema=events)
    with pytest.raises(kleene.QueryValidationError, match="PARTITION BY symbol: the input has "
                                                          "no column 'symbol'"):
        kleene.compile("PATTERN SEQ(A a, B b) PARTITION BY symbol", schema=events)
    with pytest.raises(kleene.QueryValidationError, match=r"\[symbl\]: the input has no "
                                                          r"column 'symbl' \(did you mean "
                                                          r"'sym'\?\)"):
        kleene.compile("PATTERN SEQ(A a, B b) WHERE [symbl]", schema=events)
    q = kleene.compile("PATTERN SEQ(A a, B c) WHERE c.price > a.price")
    with pytest.raises(kleene.QueryValidationError, match="event type 'B'|does not occur"):
        q.check(events.slice(0, 1))
    assert q.check(events) == []
    good = kleene.compile("PATTERN SEQ(A a, B b) WHERE b.price > a.price PARTITION BY sym",
                          schema=events)
    assert [m.bindings for m in good.run(events)] == [{"a": 0, "b": 1}]
    # a first chunk only: a missing type is a warning
    partial = InputSchema.of(events.slice(0, 1), types_complete=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kleene.compile("PATTERN SEQ(A a, B b)", schema=partial)
    assert [str(w.message) for w in caught] == [
        "event type 'B' (variable 'b') is not among the types of the first rows of the "
        "input: A"]


def test_schema_without_types_checks_columns_only() -> None:
    aq = kleene.analyze("PATTERN SEQ(Whatever a, B b) WHERE a.x > b.x")
    assert check_against(aq, InputSchema({"x": "int64"})) == []
    with pytest.raises(kleene.QueryValidationError, match="no column 'x'"):
        check_against(aq, InputSchema({"y": "int64"}))


def test_suggest() -> None:
    cols = ["TIMESTAMP", "REPORT_ID", "avgSpeed", "vehicleCount"]
    assert suggest("avgspeed", cols) == " (did you mean 'avgSpeed'?)"
    assert suggest("reportid", cols) == " (did you mean 'REPORT_ID'?)"
    assert suggest("timestamp", cols) == " (did you mean 'TIMESTAMP'?)"
    assert suggest("humidity", cols) == ""
