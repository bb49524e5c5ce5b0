"""Compile once, run many (issue 11 item 4): a compiled query keeps its plan and its generated
code; running or starting it again compiles nothing."""

from __future__ import annotations

import kleene
from kleene import codegen
from kleene.events import EventBatch

EVENTS = EventBatch.from_records([{"id": i, "type": "AB"[i % 2], "ts": i, "x": i % 5}
                                  for i in range(40)])


def test_a_hundred_runs_compile_nothing_after_the_first() -> None:
    q = kleene.compile("PATTERN SEQ(A a, B+ b[], A c) WHERE b[i].x >= b[i-1].x "
                       "WITHIN 6 seconds USING skip-till-next-match")
    plan = q.compiled_plan
    first = q.run(EVENTS)
    assert first  # the query matches something, so the kernel really ran
    compiled = codegen.STATS["compiled"]
    for _ in range(100):
        assert q.run(EVENTS) == first
        rt = q.start()
        assert rt.push(EVENTS) + rt.close() == first
    assert q.compiled_plan is plan                      # the plan is compiled once
    assert codegen.STATS["compiled"] == compiled        # no generated code compiled again
    # one kernel factory, and its variant without the bool guard (the columns are numbers)
    assert sorted(k[-1] == "plain" for k in plan.memo if k[0] == "kernel") == [False, True]


def test_options_that_change_the_kernel_get_their_own_factory() -> None:
    q = kleene.compile("PATTERN SEQ(A a, B b) WITHIN 3 seconds")
    n = q.run(EVENTS)
    counted = q.start(count_only=True)
    assert len(counted.push(EVENTS) + counted.close()) == len(n)
    assert sum(k[0] == "kernel" for k in q.compiled_plan.memo) == 2


def test_explain_kernel_prints_the_generated_source() -> None:
    from click.testing import CliRunner

    from kleene.cli.main import cli

    res = CliRunner().invoke(cli, ["explain", "--kernel", "PATTERN SEQ(A a, B b) WHERE b.x > a.x"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("def make(m):\n") and "def process(" in res.output
    compile(res.output, "<kernel>", "exec")  # the printed source is valid Python
    # an AND goes to a plan without a generated kernel (which one is the chooser's call)
    import kleene

    chosen = kleene.compile("PATTERN AND(A a, B b)").compiled_plan.kind.name
    assert chosen not in ("nfa", "union")
    res = CliRunner().invoke(cli, ["explain", "--kernel", "PATTERN AND(A a, B b)"])
    assert res.exit_code == 1 and f"plan {chosen!r} has no generated kernel" in res.output


def test_a_truncating_kernel_still_drains_once_its_budget_is_spent() -> None:
    """The factory binds the counting variant per matcher (``DRAIN = MAKE_DRAIN(m)``): once a
    call's budget is spent, the rest of the events only advance runs and count what is
    dropped. (A slip in the factory dropped this hand-off silently; the output was the same,
    only slower, so this checks the generated code and the counters.)"""
    import warnings

    q = kleene.compile("PATTERN SEQ(A a, B+ b[], A c) WITHIN 20 seconds", on_cap="truncate",
                       max_matches_per_call=5)
    rt = q.start()
    assert "DRAIN(st, recs[rest:]" in rt.matcher.kernel.source
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        kept = rt.push(EVENTS) + rt.close()
    full = kleene.compile("PATTERN SEQ(A a, B+ b[], A c) WITHIN 20 seconds").run(EVENTS)
    assert len(kept) == 5 and kept == full[:5]
    assert rt.counters.truncated_matches == len(full) - 5
