"""The engine's memory caps through the Spark pipeline: ``kleene.spark.match(...,
max_*=..., on_cap=...)`` and ``kleene run --spark --max-matches-per-call N --on-cap ...``.

In Spark one engine call is one group (here: one PARTITION BY key, or the whole input in one
task), so the kept matches are the embedded engine's with the same caps run per group, and the
reported drops are exactly what those runs counted.
"""

from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import kleene
from kleene.errors import InputError
from kleene.events import EventBatch, Match
from kleene.plans import choose, evaluate
from kleene.runtime.engine import Runtime
from kleene.spark.batch import CapReport, match
from kleene.spark.tasks import Caps
from kleene.testing import oracle

pytestmark = pytest.mark.spark

# key x: a1 then six Bs -> SEQ(A, B+) under skip-till-any-match has 2^6 - 1 = 63 matches;
# key y: a2 then two Bs -> 3 matches. The keys interleave in time.
ROWS = [
    {"id": "a1", "ts": 1, "type": "A", "k": "x"},
    {"id": "a2", "ts": 1, "type": "A", "k": "y"},
    {"id": "b1", "ts": 2, "type": "B", "k": "x"},
    {"id": "b2", "ts": 3, "type": "B", "k": "x"},
    {"id": "b7", "ts": 3, "type": "B", "k": "y"},
    {"id": "b3", "ts": 4, "type": "B", "k": "x"},
    {"id": "b4", "ts": 5, "type": "B", "k": "x"},
    {"id": "b8", "ts": 5, "type": "B", "k": "y"},
    {"id": "b5", "ts": 6, "type": "B", "k": "x"},
    {"id": "b6", "ts": 7, "type": "B", "k": "x"},
]
KEYED = ("NAME caps PATTERN SEQ(A a, B+ b[]) PARTITION BY k WITHIN 10 seconds "
         "USING skip-till-any-match")
UNCAPPED = 63 + 3


def _df(spark: Any, rows: list[dict[str, Any]]) -> Any:
    return spark.createDataFrame([(r["id"], r["ts"], r["type"], r["k"]) for r in rows],
                                 "id string, ts long, type string, k string")


def _batch(rows: list[dict[str, Any]]) -> EventBatch:
    return EventBatch.from_records(rows)


def _key(bindings: dict[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Bindings as sorted (variable, ids) pairs: Spark's map of arrays and a Match's."""
    return tuple(sorted((k, tuple(v) if isinstance(v, list | tuple) else (v,))
                        for k, v in bindings.items()))


def _spark_matches(out: Any) -> list[tuple[Any, ...]]:
    return sorted(_key(r["match"]) for r in out.select("match").collect())


def _embedded_per_key(query: str, rows: list[dict[str, Any]], **caps: Any) -> tuple[
        list[tuple[Any, ...]], int, int]:
    """The embedded engine with ``caps`` run on each key's events alone (one Spark group):
    (the kept matches, runs dropped, matches dropped)."""
    q = kleene.analyze(query)
    kept: list[Match] = []
    runs = matches = 0
    for k in sorted({r["k"] for r in rows}):
        rt = Runtime(choose(q), **caps)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "a cap was reached": counted
            kept += rt.push(_batch([r for r in rows if r["k"] == k])) + rt.close()
        runs += rt.counters.truncated_runs
        matches += rt.counters.truncated_matches
    return sorted(_key(m.bindings) for m in kept), runs, matches


def test_cap_defaults_are_the_runtimes() -> None:
    """kleene.spark.match's caps default to Runtime's (the spec keeps its own copy so the
    driver needs not import the engine)."""
    params = inspect.signature(Runtime.__init__).parameters
    assert Caps().options() == {k: params[k].default for k in Caps().options()}
    match_params = inspect.signature(match).parameters
    assert {k: match_params[k].default for k in Caps().options()} == Caps().options()


def test_options_are_checked_on_the_driver(spark: Any) -> None:
    """Bad caps fail before any Spark job, naming the option (or the engine)."""
    df = _df(spark, ROWS)
    common: dict[str, Any] = {"time_col": "ts", "type_col": "type", "id_col": "id"}
    with pytest.raises(InputError, match=r"^max_matches_per_call must be a positive integer "
                                         r"or None \(no cap\), not 0$"):
        match(df, KEYED, max_matches_per_call=0, **common)
    with pytest.raises(InputError, match=r"^max_runs_per_partition must be .*not True$"):
        match(df, KEYED, max_runs_per_partition=True, **common)
    with pytest.raises(InputError, match=r"^on_cap must be 'error' or 'truncate', not 'drop'$"):
        match(df, KEYED, on_cap="drop", **common)
    with pytest.raises(InputError, match=r"^max_matches_per_event, on_cap: the caps are options "
                                         r"of the automaton engine, not 'oracle'$"):
        match(df, KEYED, engine="oracle", max_matches_per_event=3, on_cap="truncate",
              cap_report=CapReport(), **common)
    with pytest.raises(InputError, match=r"on_cap='truncate' needs cap_report=CapReport\(\)"):
        match(df, KEYED, on_cap="truncate", **common)
    report = CapReport()
    match(df, KEYED, on_cap="truncate", cap_report=report, **common)  # lazy: no job yet
    with pytest.raises(InputError, match="already belongs to another match"):
        match(df, KEYED, on_cap="truncate", cap_report=report, **common)
    assert (report.truncated_runs, report.truncated_matches, report.groups) == (0, 0, {})


def test_on_cap_error_fails_the_job_with_the_cap_message(spark: Any) -> None:
    out = match(_df(spark, ROWS), KEYED, time_col="ts", type_col="type", id_col="id",
                max_matches_per_call=10)
    with pytest.raises(Exception, match=r"CapacityError: query 'caps': more than "  # noqa: B017
                                         r"max_matches_per_call=10 complete matches in one "
                                         r"push/advance/close call"):
        out.collect()


def test_truncate_keeps_the_embedded_matches_per_key_and_counts_the_rest(spark: Any) -> None:
    q = kleene.analyze(KEYED)
    assert len(oracle.evaluate(q, _batch(ROWS))) == UNCAPPED
    report = CapReport()
    out = match(_df(spark, ROWS), KEYED, time_col="ts", type_col="type", id_col="id",
                max_matches_per_call=10, on_cap="truncate", cap_report=report)
    got = _spark_matches(out)
    kept, runs, dropped = _embedded_per_key(KEYED, ROWS, max_matches_per_call=10,
                                            on_cap="truncate")
    # key x keeps its first 10 of 63, key y all 3
    assert len(got) == 13 and got == kept
    assert report.truncated_matches == UNCAPPED - len(got) == dropped == 53
    assert report.truncated_runs == runs == 0
    assert report.groups == {("x",): (0, 53)}
    # a second action on the same result runs the tasks again: still counted once
    assert out.count() == 13 and report.truncated_matches == 53
    # the embedded engine over the whole input is ONE call: the cap bounds all keys together
    with pytest.warns(RuntimeWarning):
        assert len(evaluate(q, _batch(ROWS), max_matches_per_call=10, on_cap="truncate")) == 10


def test_truncated_runs_in_one_task_equal_the_embedded_run(spark: Any) -> None:
    """Without PARTITION BY or a time window the query runs in one task: one group, so the
    kept matches and both counts are the embedded engine's over the whole input."""
    text = "NAME caps PATTERN SEQ(A a, B+ b[]) WHERE a.k = b[i].k USING skip-till-any-match"
    q = kleene.analyze(text)
    caps: dict[str, Any] = {"max_runs_per_partition": 8, "max_matches_per_event": 3,
                            "on_cap": "truncate"}
    with pytest.warns(RuntimeWarning):
        rt = Runtime(choose(q), **caps)
        expected = rt.push(_batch(ROWS)) + rt.close()
    runs, dropped = rt.counters.truncated_runs, rt.counters.truncated_matches
    # both caps act (the embedded engine's numbers): the runs cap saturates the task's one
    # partition after 6 events (10 live runs > 8), keeping the 7 matches completed so far
    # (the per-event cap alone keeps 18 and drops 48 matches); the chain plan's counter
    # counts the dropped matches exactly: 7 + 59 = 66, every match
    assert (len(expected), runs, dropped) == (7, 10, UNCAPPED - 7)
    report = CapReport()
    out = match(_df(spark, ROWS), text, time_col="ts", type_col="type", id_col="id",
                cap_report=report, **caps)
    assert _spark_matches(out) == sorted(_key(m.bindings) for m in expected)
    assert report.groups == {(): (runs, dropped)}
    assert (report.truncated_runs, report.truncated_matches) == (runs, dropped)


def _csv(path: Path) -> None:
    lines = ["ts,type,k"] + [f"{r['ts']},{r['type']},{r['k']}" for r in ROWS]
    path.write_text("\n".join(lines) + "\n")


def test_cli_spark_caps(spark: Any, tmp_path: Path) -> None:
    from kleene.cli.main import cli

    src = tmp_path / "events.csv"
    _csv(src)
    runner = CliRunner()
    full = runner.invoke(cli, ["run", KEYED, "--input", str(src), "--quiet"])
    assert full.exit_code == 0, full.stderr
    every = set(full.stdout.splitlines())
    assert len(every) == UNCAPPED
    res = runner.invoke(cli, ["run", KEYED, "--input", str(src), "--spark",
                              "--max-matches-per-call", "10", "--on-cap", "truncate"])
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 13 and set(lines) <= every
    assert sorted(json.loads(line)["match"]["a"] for line in lines) == [0] * 10 + [1] * 3
    assert ("kleene: warning: a cap was reached and --on-cap truncate dropped 53 matches and 0 "
            "partial matches (runs); the output is incomplete") in res.stderr
    assert "dropped (caps)            53   matches, 0 runs (--on-cap truncate)" in res.stderr
    res = runner.invoke(cli, ["run", KEYED, "--input", str(src), "--spark", "--quiet",
                              "--max-matches-per-call", "10"])
    assert res.exit_code == 3
    assert "query 'caps': more than max_matches_per_call=10 complete matches" in res.stderr
    res = runner.invoke(cli, ["run", KEYED, "--input", str(src), "--spark", "--engine",
                              "oracle", "--on-cap", "truncate"])
    # a usage error (exit 1, README "Exit codes"), refused before Spark starts
    assert res.exit_code == 1
    assert res.stderr.endswith("--max-matches-per-call and --on-cap are options of the "
                               "automaton engine, not 'oracle'\n")
