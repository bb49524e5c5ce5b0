"""`kleene run` with several queries: files, a directory, a file of several queries; query
names on every record, per-query counts in the summary, unique names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kleene.cli.main import cli, split_queries

EVENTS = "ts,type,src\n1,A,1\n2,B,1\n3,C,1\n4,B,2\n5,C,2\n"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "ev.csv").write_text(EVENTS)
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "ab.kleene").write_text(
        "PATTERN SEQ(A a, B b) PARTITION BY src WITHIN 10 seconds\n")
    (tmp_path / "q" / "more.kleene").write_text(
        "-- two queries\nPATTERN SEQ(B b, C c) PARTITION BY src WITHIN 10 seconds\n;\n"
        "NAME kl PATTERN SEQ(A a, B+ b[]) PARTITION BY src WITHIN 10 seconds\n")
    (tmp_path / "q" / "ignored.txt").write_text("PATTERN A a")
    return tmp_path


def _records(out: str) -> list[tuple[str, dict[str, object]]]:
    return [(r["query"], r["match"]) for r in map(json.loads, out.splitlines())]


EXPECTED = [("ab", {"a": 0, "b": 1}), ("kl", {"a": 0, "b": [1]}),
            ("more_1", {"b": 1, "c": 2}), ("more_1", {"b": 3, "c": 4})]


@pytest.mark.parametrize("stream", [False, True])
def test_directory_of_queries(files: Path, stream: bool) -> None:
    args = ["run", str(files / "q"), "-i", str(files / "ev.csv")] + (["--stream"] if stream
                                                                     else [])
    code, out, err = invoke(*args)
    assert code == 0, err
    assert _records(out) == EXPECTED
    assert "query set of 3, shared network" in err
    lines = [ln.split() for ln in err.splitlines()]
    assert ["ab", "1"] in lines and ["more_1", "2"] in lines and ["kl", "1"] in lines


def test_several_files_same_as_directory(files: Path) -> None:
    code, out, _ = invoke("run", str(files / "q" / "ab.kleene"), str(files / "q" / "more.kleene"),
                          "-i", str(files / "ev.csv"), "--plan", "separate", "-q")
    assert code == 0
    assert _records(out) == EXPECTED


def test_duplicate_names_exit_1(files: Path) -> None:
    q = str(files / "q" / "ab.kleene")
    code, out, err = invoke("run", q, q, "-i", str(files / "ev.csv"))
    assert code == 1
    assert "two queries are named 'ab'" in err
    assert "Traceback" not in err and out == ""


def test_single_query_plan_for_a_set_is_refused(files: Path) -> None:
    code, _, err = invoke("run", str(files / "q"), "-i", str(files / "ev.csv"), "--plan", "nfa")
    assert code == 1
    assert "a query set takes auto, shared, separate" in err


def test_split_queries() -> None:
    assert split_queries("PATTERN A a\n;\n  ;  \n-- only a comment\n;\nPATTERN B b") == [
        "PATTERN A a\n", "PATTERN B b"]
    assert split_queries("PATTERN SEQ(A a; B b)") == ["PATTERN SEQ(A a; B b)"]


def test_explain_a_query_set(files: Path) -> None:
    code, out, err = invoke("explain", str(files / "q"))
    assert code == 0, err
    assert out.splitlines() == [
        "ab: shared network (SEQ of A, B, key ['src'], EMIT ALL)",
        "more_1: shared network (SEQ of B, C, key ['src'], EMIT ALL)",
        "kl: own plan nfa (Kleene or negated variables)"]


NESTED = ("NAME ab PATTERN SEQ(A a, B b) WHERE [src] WITHIN 10 seconds\n;\n"
          "NAME twice PATTERN SEQ(ab x, ab y) PARTITION BY src WITHIN 10 seconds\n")


@pytest.mark.parametrize("stream", [False, True])
def test_nested_query_set(tmp_path: Path, stream: bool) -> None:
    """A query whose event type is another query's NAME reads its matches (docs/semantics.md
    §17); the type check knows the set's names."""
    (tmp_path / "ev.csv").write_text("ts,type,src\n1,A,1\n2,B,1\n3,A,1\n4,B,1\n5,B,2\n")
    (tmp_path / "set.kleene").write_text(NESTED)
    code, out, err = invoke("run", str(tmp_path / "set.kleene"), "-i", str(tmp_path / "ev.csv"),
                            *(["--stream"] if stream else []))
    assert code == 0, err
    assert _records(out) == [("ab", {"a": 0, "b": 1}), ("ab", {"a": 0, "b": 3}),
                             ("ab", {"a": 2, "b": 3}), ("twice", {"x": "ab#1", "y": "ab#2"}),
                             ("twice", {"x": "ab#1", "y": "ab#3"}),
                             ("twice", {"x": "ab#2", "y": "ab#3"})]
    code, out, err = invoke("explain", str(tmp_path / "set.kleene"))
    assert code == 0, err
    assert "twice: own plan nfa (reads the matches of ab)" in out


def test_nested_cycle_exit_1(tmp_path: Path) -> None:
    (tmp_path / "ev.csv").write_text(EVENTS)
    (tmp_path / "set.kleene").write_text("NAME p PATTERN SEQ(q a, B b) WITHIN 3 seconds\n;\n"
                                         "NAME q PATTERN SEQ(p a, B b) WITHIN 3 seconds\n")
    code, out, err = invoke("run", str(tmp_path / "set.kleene"), "-i", str(tmp_path / "ev.csv"))
    assert code == 1
    assert "'p' and 'q' read each other's matches" in err
    assert "Traceback" not in err and out == ""
