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
            with T.configure(workers=workers, block_size=block, queue=queue,
                             operators="threads"):
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
        for operators in ("threads", "auto"):
            with T.configure(workers=workers, block_size=block, queue=queue,
                             operators=operators):
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
    with T.configure(workers=2, operators="threads"):
        lines = T.PLAN.explain(choose(cq.analyzed, plan="tasks").plan)
    assert any("2 threads" in ln and "release the GIL" in ln for ln in lines)
    with T.configure(workers=2):  # auto, and no UDF: cheap predicates, no pool
        lines = T.PLAN.explain(choose(cq.analyzed, plan="tasks").plan)
    assert any(ln.startswith("operators: inline (no user function") for ln in lines)
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
        with T.configure(workers=workers, block_size=block, queue=queue, structure=structure,
                         operators="threads"):
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
    with T.configure(workers=2, block_size=16, operators="threads"):
        got = kleene.compile(q, udfs={"meet": meet}, plan="tasks").run(events)
    assert [m.bindings["b"] for m in got] == [
        m.bindings["b"] for m in kleene.compile(q, udfs={"meet": meet}, plan="nfa").run(events)]
    assert len(got) == 4


def test_task_settings_from_the_environment() -> None:
    s = T._from_env("workers=3, block_size=7,queue=fifo,structure=tree,free_cores=1.2")
    assert (s.workers, s.block_size, s.queue, s.structure) == (3, 7, "fifo", "tree")
    assert (s.operators, s.free_cores) == ("auto", 1.2)
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


@pytest.mark.parametrize("operators", ["threads", "processes", "auto"])
def test_a_failing_udf_in_an_operator_instance_is_one_engine_error(operators: str) -> None:
    events = EventBatch.from_records([{"type": t, "ts": i, "x": i}
                                      for i, t in enumerate("AABBCAABBBBC")])

    def bad(x: int, y: int) -> bool:
        raise ValueError("boom")

    with T.configure(workers=2, operators=operators), \
            pytest.raises(KleeneError, match="user function 'bad' raised ValueError: boom"):
        kleene.compile("PATTERN SEQ(A a, B b) WHERE bad(a.x, b.x)", udfs={"bad": bad},
                       plan="tasks").run(events)


# threads or processes, chosen automatically (operators="auto", the default) ---------------------

AUTO = "PATTERN SEQ(A a, B b, C c) WHERE f(a.x, b.x) AND f(a.x, c.x) WITHIN 12 EVENTS " \
       "PICK FIRST a CONSUME ALL"


def _abc(n: int) -> EventBatch:
    return EventBatch.from_records([{"type": "ABC"[(i * 7) % 3], "ts": i, "x": (i * 13) % 4}
                                    for i in range(n)])


def spin(x: int, y: int) -> bool:
    """Pure Python for 1.5 ms of wall time: holds the GIL. (A busy wait on the clock, not a
    number of steps: on a loaded machine its cost in wall time stays the same, so 2 threads
    cannot look faster than 1 by luck of the scheduler; two threads still take turns.)"""
    import time

    end = time.perf_counter() + 0.0015
    while time.perf_counter() < end:
        pass
    return x == y


def sleepy(x: int, y: int) -> bool:
    """Sleeps 5 ms: releases the GIL (long against the engine's own work per task, which a
    loaded machine slows down)."""
    import time

    time.sleep(0.005)
    return x == y


@pytest.fixture(autouse=True)
def _no_free_core_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The measurements below compare a UDF that holds the GIL with one that sleeps: their
    verdicts do not depend on the machine's load, so the free-core check (which defers the
    measurement on a busy machine) is off; test_a_busy_machine_defers_the_measurement has it."""
    from dataclasses import replace

    monkeypatch.setattr(T, "SETTINGS", replace(T.SETTINGS, free_cores=0.0))


def _auto(f: Any, n: int = 150, workers: int = 2) -> tuple[Any, list[Match]]:
    """The task matcher of a run with ``operators="auto"`` and the run's matches (checked
    against the nfa plan's)."""
    events = _abc(n)
    want = kleene.compile(AUTO, udfs={"f": f}, plan="nfa").run(events)
    assert len(want) > (5 if n > 30 else 0)
    with T.configure(workers=workers, block_size=64):
        rt = kleene.compile(AUTO, udfs={"f": f}, plan="tasks").start()
        got = rt.push(events) + rt.close()
    assert _key(got) == _key(want)
    return rt.matcher, got


def test_auto_gives_processes_to_a_udf_that_holds_the_gil() -> None:
    m, _ = _auto(spin)
    assert m.operators == "processes", m.choice
    assert m.measured["speedup"] < T.THREAD_SPEEDUP
    assert "measured" in m.choice and "forked processes" in m.choice


def test_auto_gives_threads_to_a_udf_that_sleeps() -> None:
    m, _ = _auto(sleepy)
    assert m.operators == "threads", m.choice
    assert m.measured["speedup"] >= T.THREAD_SPEEDUP
    assert m.pool is not None


def test_a_declared_udf_is_not_measured_and_the_declaration_wins() -> None:
    m, _ = _auto(kleene.udf(spin, releases_gil=True), n=60)
    assert (m.operators, m.measured) == ("threads", {})
    assert "declared releases_gil=True" in m.choice
    m, _ = _auto(kleene.udf(sleepy, releases_gil=False), n=60)
    assert (m.operators, m.measured) == ("processes", {})
    assert "declared releases_gil=False" in m.choice
    # a declared pure UDF keeps its memo
    pure = kleene.udf(sleepy, pure=True, releases_gil=True)
    m, _ = _auto(pure, n=60)
    assert m.operators == "threads" and pure.hits > 0
    # one UDF that holds the GIL is enough for processes
    cq = kleene.compile("PATTERN SEQ(A a, B b) WHERE f(a.x, b.x) AND g(a.x, b.x)",
                        udfs={"f": kleene.udf(sleepy, releases_gil=True),
                              "g": kleene.udf(spin, releases_gil=False)})
    assert T.choose_operators(choose(cq.analyzed, plan="tasks").plan,
                              T.TaskSettings(workers=2)) == (
        "processes", "udf g declared releases_gil=False")


def test_cheap_conditions_get_no_pool() -> None:
    """No UDF: inline at once; a cheap UDF: measured, then inline."""
    with T.configure(workers=2):
        rt = kleene.compile("PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 5 EVENTS",
                            plan="tasks").start()
        rt.push(_abc(50))
    assert rt.matcher.operators == "inline" and rt.matcher.pool is None
    m, _ = _auto(lambda x, y: x == y)
    assert m.operators == "inline" and m.pool is None
    assert m.measured["per_task"] < T.CHEAP_TASK_S


def test_a_pure_udf_is_measured_without_its_memo() -> None:
    """Cache hits are not the function's cost: a pure UDF that sleeps is measured as one that
    sleeps (threads), and its memo works again after the measurement."""
    pure = kleene.udf(sleepy, pure=True)
    m, _ = _auto(pure)
    assert m.operators == "threads", m.choice
    assert pure.hits > 0


def test_a_busy_machine_defers_the_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    """When two threads cannot get 1.5 cores, the comparison would say nothing about the UDF:
    the batch runs inline and the next batch measures again; once cores are free it decides."""
    real = T.free_cores
    got = iter([1.0, 0.9, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    monkeypatch.setattr(T, "free_cores", lambda: next(got))
    events = _abc(150)
    want = kleene.compile(AUTO, udfs={"f": spin}, plan="nfa").run(events)
    with T.configure(workers=2, block_size=32, free_cores=1.5):
        rt = kleene.compile(AUTO, udfs={"f": spin}, plan="tasks").start()
        out = []
        out += rt.push(events.slice(0, 40))
        m = rt.matcher
        assert m.operators == "measure" and "machine busy (2 threads got 0.90 cores)" in m.choice
        out += rt.push(events.slice(40)) + rt.close()
    assert m.operators == "processes" and "machine busy" not in m.choice
    assert _key(out) == _key(want)
    assert 0 < real(0.005) <= 2.5  # the probe itself: cores two threads got


def test_too_few_tasks_stay_inline_until_measured() -> None:
    """Fewer than 12 tasks in a transition's batch: evaluated inline, nothing decided yet."""
    m, got = _auto(spin, n=9)
    assert m.operators == "measure" and m.measured == {} and m.pool is None
    assert "inline until measured" in m.choice


def test_the_run_summary_says_what_evaluated_the_tasks(tmp_path: Any) -> None:
    mod = tmp_path / "gil_udfs.py"
    mod.write_text("import time\n\n\ndef spin(x, y):\n    end = time.perf_counter() + 0.0015\n"
                   "    while time.perf_counter() < end:\n        pass\n    return x == y\n",
                   encoding="utf-8")
    src = tmp_path / "e.csv"
    src.write_text("ts,type,x\n" + "".join(f"{i},{'ABC'[(i * 7) % 3]},{(i * 13) % 4}\n"
                                            for i in range(150)), encoding="utf-8")
    env = {**os.environ, "KLEENE_TASKS": "workers=2,block_size=64,free_cores=0",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(kleene.__file__).parents[1]),
                                                       str(tmp_path),
                                                       os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-m", "kleene", "run", AUTO.replace("f(", "spin("),
                        "-i", str(src), "--udf", "gil_udfs:spin", "--plan", "tasks"],
                       env=env, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("operators"))
    assert "2 forked processes" in line and "measured" in line and "spin" in line


def test_the_thesis_query_discards_tasks_when_streamed() -> None:
    """``PICK FIRST a`` in ``SEQ(A a, B b, C c)``: a match is out as soon as it is found (every
    ``a`` of its group precedes the shared ``b``), so CONSUME ALL consumes during the stream and
    the invalid-task discard fires: fewer UDF calls than one batch, the same matches."""
    events = _abc(300)
    calls = {"n": 0}

    def same(x: int, y: int) -> bool:
        calls["n"] += 1
        return x == y

    want = kleene.compile(HEAVY, udfs={"same": same}, plan="nfa").run(events)
    with T.configure(block_size=4):
        rt = kleene.compile(HEAVY, udfs={"same": same}, plan="tasks").start()
        calls["n"] = 0
        got = [m for off in range(0, len(events), 4) for m in rt.push(events.slice(off, 4))]
        got += rt.close()
        streamed = calls["n"]
        calls["n"] = 0
        kleene.compile(HEAVY, udfs={"same": same}, plan="tasks").run(events)
    assert _key(got) == _key(want) and len(got) > 10
    assert rt.matcher.discarded > 0
    assert streamed < calls["n"] / 2
