"""Bounded memory: caps on live runs and on matches per event, as errors or truncation."""

from __future__ import annotations

import pytest

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch
from kleene.plans import evaluate, start


def _as(n: int) -> EventBatch:
    return EventBatch.from_records([{"id": f"a{i}", "type": "A", "ts": i} for i in range(n)]
                                   + [{"id": "b1", "type": "B", "ts": n}])


def test_run_cap_raises_with_query_name_and_cap() -> None:
    aq = analyze("NAME blowup PATTERN SEQ(A+ a[], B b)")
    with pytest.raises(CapacityError, match=r"'blowup'.*max_runs_per_partition=50"):
        evaluate(aq, _as(12), max_runs_per_partition=50)


def test_match_cap_raises_with_query_name_and_cap() -> None:
    aq = analyze("NAME many PATTERN SEQ(A a, B b)")
    with pytest.raises(CapacityError, match=r"'many'.*max_matches_per_event=3"):
        evaluate(aq, _as(5), max_matches_per_event=3)


def test_truncate_saturates_at_the_runs_cap_and_counts_exactly() -> None:
    """The runs cap saturates the partition (docs/engine.md, "Bounded memory"): its partial
    matches and later events are dropped; the chain plan's counter counts the dropped
    matches exactly (2^12 - 1 of them: the cap was reached before b1 came)."""
    rt = start(analyze("PATTERN SEQ(A+ a[], B b)"), max_runs_per_partition=50,
               on_cap="truncate")
    with pytest.warns(RuntimeWarning, match="truncate"):
        out = rt.push(_as(12)) + rt.close()
    c = rt.counters
    assert out == []
    assert c.truncated_runs == 63  # a0..a5: 2^6 - 1 live runs > 50
    assert c.events_skipped == 12 + 1 - 6  # a6..a11 and b1 were never matched
    assert (c.truncated_matches, c.truncated_exact) == (2 ** 12 - 1, True)


def test_no_cap_reached_gives_all_matches() -> None:
    out = evaluate(analyze("PATTERN SEQ(A+ a[], B b)"), _as(6))
    assert len(out) == 2 ** 6 - 1


def test_bad_on_cap_value() -> None:
    with pytest.raises(Exception, match="on_cap"):
        start(analyze("PATTERN SEQ(A a, B b)"), on_cap="ignore")


def test_count_only_counts_without_bindings() -> None:
    out = evaluate(analyze("PATTERN SEQ(A a, B b)"), _as(4), count_only=True)
    assert len(out) == 4


def test_count_only_in_the_kernel_counts_the_same() -> None:
    """count_only without policies never builds a match: the kernel just counts."""
    from kleene.plans import start

    q = "PATTERN SEQ(A a, B+ b[]) WITHIN 100 seconds"
    rt = start(analyze(q), count_only=True)
    assert rt.matcher.count_mode
    out = rt.push(_as(6)) + rt.close()
    assert len(out) == len(evaluate(analyze(q), _as(6))) == 6
    assert rt.counters.matches == 6


def test_match_cap_truncates_and_counts() -> None:
    rt = start(analyze("PATTERN SEQ(A a, B b)"), max_matches_per_event=3, on_cap="truncate")
    with pytest.warns(RuntimeWarning, match="truncate"):
        out = rt.push(_as(5)) + rt.close()
    assert len(out) == 3
    assert rt.counters.truncated_matches == 2


def test_group_plan_run_cap() -> None:
    """The logical-block engine honours the same caps (error, or truncate with a count)."""
    recs = [{"id": f"a{i}", "type": "A", "ts": i} for i in range(30)]
    batch = EventBatch.from_records(recs + [{"id": "b1", "type": "B", "ts": 30}])
    q = "NAME grp PATTERN AND(A+ a[], B b)"
    with pytest.raises(CapacityError, match=r"'grp'.*max_runs_per_partition=100"):
        evaluate(analyze(q), batch, plan="pda", max_runs_per_partition=100)
    # the pda plan, named: the chooser may take the tree plan, which saturates a run later
    rt = start(analyze(q), plan="pda", max_runs_per_partition=100, on_cap="truncate")
    with pytest.warns(RuntimeWarning, match="truncate"):
        out = rt.push(batch) + rt.close()
    c = rt.counters
    # saturated at the runs cap (a0..a6: 127 runs), before b1: no match is kept, and the
    # AND has no exact counter (the chain plan does not take it): a lower bound
    assert (out, c.truncated_runs, c.events_skipped) == ([], 127, 31 - 7)
    assert c.truncated_exact is False
