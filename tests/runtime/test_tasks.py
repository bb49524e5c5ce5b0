"""The splitter-free task engine (``--plan tasks``, kleene.plans.tasks): the oracle's matches,
in its order, for any number of operator instances, block size and queue (issue 15)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, note, settings

import kleene
from kleene.api import analyze
from kleene.errors import KleeneError
from kleene.events import EventBatch, Match
from kleene.plans import choose, evaluate
from kleene.plans import tasks as T
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.strategies import describe, queries, streams


def _key(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [(m.query, dict(m.bindings), m.start, m.end, dict(m.values)) for m in ms]


CONFIGS = [(1, 1024, "priority"), (2, 1, "fifo"), (2, 3, "priority"), (4, 2, "fifo"),
           (4, 1024, "priority")]


@pytest.mark.parametrize("feature", ["sequence", "policies", "windows", "expressions",
                                     "return"])
def test_tasks_equal_the_oracle_at_1_2_4_workers_and_any_block(feature: str) -> None:
    @settings(max_examples=40, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(query=queries(feature=feature), stream=streams(min_events=3, max_events=10))
    def check(query: str, stream: EventBatch) -> None:
        try:
            aq = analyze(query)
            cp = choose(aq, plan="tasks")
        except KleeneError:
            assume(False)
            return
        note(f"query:  {query}")
        note(f"stream: {describe(stream)}")
        want = _key(oracle(aq, stream))
        for workers, block, queue in CONFIGS:
            with T.configure(workers=workers, block_size=block, queue=queue):
                got = _key(evaluate(cp, stream))
            assert got == want, f"tasks differ: {workers} workers, block {block}, {queue}"

    check()


HEAVY = "PATTERN SEQ(A a, B b, C c) WHERE same(a.x, b.x) AND same(a.x, c.x) WITHIN 25 EVENTS " \
        "PICK FIRST a CONSUME ALL"


def test_tasks_with_a_udf_and_policies_on_a_longer_stream_equal_nfa() -> None:
    events = EventBatch.from_records([{"type": "ABC"[(i * 7) % 3], "ts": i, "x": (i * 13) % 4}
                                      for i in range(400)])
    udfs = {"same": lambda x, y: x == y}
    want = kleene.compile(HEAVY, udfs=udfs, plan="nfa").run(events)
    assert len(want) > 10
    for workers, block, queue in CONFIGS:
        with T.configure(workers=workers, block_size=block, queue=queue):
            got = kleene.compile(HEAVY, udfs=udfs, plan="tasks").run(events)
        assert _key(got) == _key(want)
    for workers, block in [(2, 7), (3, 64)]:  # forked operator processes
        with T.configure(workers=workers, block_size=block, operators="processes"):
            cq = kleene.compile(HEAVY, udfs=udfs, plan="tasks")
            rt = cq.start()
            got = rt.push(events) + rt.close()
            assert "forked processes" in T.SETTINGS.mode
        assert rt.matcher.tasks_created > len(events)  # type: ignore[attr-defined]
        assert _key(got) == _key(want)


def test_chooser_does_not_pick_tasks_and_explain_reports_the_mode() -> None:
    cq = kleene.compile("PATTERN SEQ(A a, B b, C c) WHERE b.x > a.x WITHIN 25 EVENTS")
    assert cq.plan != "tasks"
    with T.configure(workers=2):
        lines = T.PLAN.explain(choose(cq.analyzed, plan="tasks").plan)
    assert any("2 threads" in ln and "release the GIL" in ln for ln in lines)
    with T.configure(workers=3, operators="processes"):
        lines = T.PLAN.explain(choose(cq.analyzed, plan="tasks").plan)
    assert any("3 forked processes" in ln for ln in lines)


def test_tasks_refuses_what_it_does_not_cover() -> None:
    for q, why in [("PATTERN SEQ(A a, B+ b[])", "single events"),
                   ("PATTERN SEQ(A a, B b) PARTITION BY k", "parallel by key"),
                   ("PATTERN SEQ(A a, NOT(C n), B b)", "no NOT")]:
        with pytest.raises(KleeneError, match=why):
            choose(analyze(q), plan="tasks")


def test_consumed_events_discard_tasks_when_pushed_block_by_block() -> None:
    """Invalid-task discard: pushed one block at a time, the consumed events' partial matches
    leave the structure (fewer UDF calls) and the matches stay those of nfa, in order."""
    events = EventBatch.from_records([{"type": "ABC"[(i * 7) % 3], "ts": i, "x": (i * 13) % 4}
                                      for i in range(300)])
    calls = {"n": 0}

    def same(x: int, y: int) -> bool:
        calls["n"] += 1
        return x == y

    q = HEAVY.replace(" PICK FIRST a", "")  # PICK holds matches until the window has passed
    want = kleene.compile(q, udfs={"same": same}, plan="nfa").run(events)
    assert len(want) > 10
    for workers, block, queue, structure in [(1, 4, "priority", "hash"),
                                             (2, 4, "fifo", "tree"),
                                             (4, 8, "priority", "hash")]:
        with T.configure(workers=workers, block_size=block, queue=queue, structure=structure):
            rt = kleene.compile(q, udfs={"same": same}, plan="tasks").start()
            calls["n"] = 0
            got = [m for off in range(0, len(events), block)
                   for m in rt.push(events.slice(off, block))] + rt.close()
            streamed_calls = calls["n"]
            assert rt.matcher.discarded > 0  # type: ignore[attr-defined]
            calls["n"] = 0
            kleene.compile(q, udfs={"same": same}, plan="tasks").run(events)
            whole_calls = calls["n"]
        assert _key(got) == _key(want)
        assert streamed_calls < whole_calls


def test_two_operator_instances_evaluate_at_the_same_time() -> None:
    """With 2 workers two tasks are inside the predicate at once (a barrier of 2 parties would
    time out if the operator instances ran one after the other)."""
    import threading

    barrier = threading.Barrier(2, timeout=10)
    met = {"n": 0}

    def meet(x: int, y: int) -> bool:
        if met["n"] == 0:
            barrier.wait()
            met["n"] = 1
        return x == y

    events = EventBatch.from_records([{"type": t, "ts": i, "x": 1}
                                      for i, t in enumerate("AABBC")])
    q = "PATTERN SEQ(A a, B b, C c) WHERE meet(a.x, b.x) WITHIN 25 EVENTS"
    with T.configure(workers=2, block_size=16):
        got = kleene.compile(q, udfs={"meet": meet}, plan="tasks").run(events)
    assert [m.bindings["b"] for m in got] == [
        m.bindings["b"] for m in kleene.compile(q, udfs={"meet": meet}, plan="nfa").run(events)]
    assert len(got) == 4


def test_task_settings_from_the_environment() -> None:
    s = T._from_env("workers=3, block_size=7,queue=fifo,structure=tree")
    assert (s.workers, s.block_size, s.queue, s.structure) == (3, 7, "fifo", "tree")
    with pytest.raises(ValueError, match="KLEENE_TASKS: bad setting 'workers=x'"):
        T._from_env("workers=x")


@pytest.mark.parametrize("setting", ["workers=x", "queue=lifo"])
def test_a_bad_task_setting_is_one_line_from_the_cli(setting: str, tmp_path: Any) -> None:
    """Every run imports the task plan (the chooser costs each plan): a bad ``KLEENE_TASKS``
    is a one-line query error (exit 1), not a traceback."""
    src = tmp_path / "e.csv"
    src.write_text("ts,type,x\n1,A,1\n2,B,2\n", encoding="utf-8")
    env = {**os.environ, "KLEENE_TASKS": setting,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(kleene.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-m", "kleene", "run", "PATTERN SEQ(A a, B b)", "-i",
                        str(src)], env=env, capture_output=True, text=True, check=False)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert "KLEENE_TASKS" in r.stderr or "bad task settings" in r.stderr


def test_nulls_fall_back_to_the_compiled_conditions() -> None:
    """The generated wave inlines ``b.x > a.x``; a NULL against a number raises TypeError
    there, and the block's wave is evaluated again by the null-aware compiled functions."""
    events = EventBatch.from_records([{"type": t, "ts": i, "x": x} for i, (t, x) in enumerate(
        [("A", 1), ("B", 2), ("A", None), ("B", 3), ("B", None), ("A", 0), ("B", 5)])])
    q = "PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 10 EVENTS"
    aq = analyze(q)
    want = _key(oracle(aq, events))
    assert len(want) >= 4
    for workers, block in [(1, 1), (1, 16), (2, 3)]:
        with T.configure(workers=workers, block_size=block):
            assert _key(evaluate(choose(aq, plan="tasks"), events)) == want


@pytest.mark.parametrize("operators", ["threads", "processes"])
def test_a_failing_udf_in_an_operator_instance_is_one_engine_error(operators: str) -> None:
    events = EventBatch.from_records([{"type": t, "ts": i, "x": i}
                                      for i, t in enumerate("AABBC")])

    def bad(x: int, y: int) -> bool:
        raise ValueError("boom")

    with T.configure(workers=2, operators=operators), \
            pytest.raises(KleeneError, match="user function 'bad' raised ValueError: boom"):
        kleene.compile("PATTERN SEQ(A a, B b) WHERE bad(a.x, b.x)", udfs={"bad": bad},
                       plan="tasks").run(events)
