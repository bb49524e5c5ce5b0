"""benchmarks.linkedcep measures what it claims: the null sink counts every match the plans
write (the same number as one materialised run), on a tiny ABC stream."""

from __future__ import annotations

from benchmarks import linkedcep


def test_null_sink_counts_every_match_of_both_plans() -> None:
    events = linkedcep.abc_stream(120)
    q = linkedcep.query_groups("abc")[2][0].format(window="40 seconds")
    _dt, whole = linkedcep.run_once(q, events, "nfa")
    assert whole > 100
    for plan in linkedcep.PLANS:
        for chunk in (1, 7, 250):
            _dt, m = linkedcep.to_null_sink(q, events, plan, chunk=chunk)
            assert m == whole, (plan, chunk)


def test_experiment_rows_name_their_groups() -> None:
    events = linkedcep.abc_stream(60)
    groups = linkedcep.query_groups("abc")
    rows = linkedcep.experiment(events, [groups[0][:2], groups[2][:2]], "20 seconds",
                                lambda _s: None, [1, 3])
    assert [r["group"] for r in rows] == ["Q1", "Q3"]
    assert all(r["nfa_ms"] > 0 and r["chain_ms"] > 0 for r in rows)


def test_streaming_sink_counts_what_push_returns() -> None:
    """``--only sink``: push_to into the null sink writes as many matches as push returns
    (the explosion query, with and without its WHERE), and reports its memory."""
    for where in (True, False):
        sink = linkedcep.sink_one(600, 30, where, "sink")
        listed = linkedcep.sink_one(600, 30, where, "list")
        assert sink["matches"] == listed["matches"] > 1_000
        assert sink["rss_peak_mb"] >= sink["rss_before_mb"] > 0


def test_seq3_sink_counts_what_push_returns() -> None:
    """``--only sink3``: the SEQ of three singles writes through push_to as many matches as
    push returns (C(k, 2) per event for the k events of its window before it)."""
    sink = linkedcep.sink_one(300, 2, False, "sink", shape="seq3")
    listed = linkedcep.sink_one(300, 2, False, "list", shape="seq3")
    assert sink["shape"] == "seq3"
    assert sink["matches"] == listed["matches"] > 20_000
