"""Bounded memory across a whole call: ``max_matches_per_call`` caps the complete matches one
``push`` / ``advance`` / ``close`` buffers (returned or held), whatever the batch size.

Expected outputs are never taken from the engine alone: the uncapped run is the reference
(checked against the oracle here and by tests/semantics), and the truncated output must be the
part of it the documented rule keeps.
"""

from __future__ import annotations

import json
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kleene.api import analyze
from kleene.cli.main import cli
from kleene.errors import CapacityError, EngineError
from kleene.events import EventBatch, Match
from kleene.plans import evaluate, start
from kleene.testing.oracle import evaluate as oracle

from .helpers import keys

ANY = " USING skip-till-any-match"
LINEAR = "NAME pairs PATTERN SEQ(A a, B b)" + ANY
GROUP = "NAME both PATTERN AND(A a, B b)"
UNION = "NAME either PATTERN OR(SEQ(A a, B b), SEQ(A x, C y))"


def _recs(n_a: int, n_b: int, *, start_ts: int = 0, key: str = "p") -> list[dict[str, Any]]:
    """``n_a`` A events, then ``n_b`` B events, 1 s apart."""
    recs: list[dict[str, Any]] = []
    t = start_ts
    for kind, n in (("A", n_a), ("B", n_b)):
        for _ in range(n):
            recs.append({"id": f"{key}{kind}{t}", "type": kind, "ts": t, "k": key})
            t += 1
    return recs


def _ab(n_a: int, n_b: int, *, start_ts: int = 0) -> EventBatch:
    return EventBatch.from_records(_recs(n_a, n_b, start_ts=start_ts))


def _uncapped(aq: Any, batch: EventBatch, n: int) -> list[Match]:
    """The uncapped engine output, checked against the oracle and its known size ``n``."""
    full = evaluate(aq, batch, max_matches_per_call=None)
    assert len(full) == n
    assert keys(full) == keys(oracle(aq, batch))
    return full


def _kept_by_the_rule(out: list[Match], full: list[Match]) -> None:
    """``out`` is what truncation keeps of ``full``: matches of it in the same order, every
    match ending before the last kept event, none after it."""
    kept = keys(out)
    full_keys = keys(full)
    assert set(kept) <= set(full_keys)
    assert kept == [k for k in full_keys if k in set(kept)]  # same relative order
    last = max(m.end for m in out)
    assert kept[: sum(m.end < last for m in full)] == \
        [m.key() for m in full if m.end < last]
    assert all(m.end <= last for m in out)


def _truncating(rt: Any, *batches: EventBatch) -> tuple[list[Match], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out: list[Match] = []
        for b in batches:
            out += rt.push(b)
        out += rt.close()
    return out, [str(w.message) for w in caught if w.category is RuntimeWarning]


# --------------------------------------------------------------------------------------------
# error


@pytest.mark.parametrize("use_kernel", [True, False])
@pytest.mark.parametrize("query", [LINEAR, GROUP, UNION])
def test_over_the_cap_raises_naming_query_cap_and_remedies(query: str, use_kernel: bool) -> None:
    aq = analyze(query)
    batch = _ab(30, 30)  # 900 matches of (a, b) for every query
    _uncapped(aq, batch, 900)
    with pytest.raises(CapacityError) as exc:
        evaluate(aq, batch, max_matches_per_call=500, use_kernel=use_kernel)
    msg = str(exc.value)
    assert repr(aq.name) in msg
    assert "max_matches_per_call=500" in msg
    assert "--max-matches-per-call" in msg and "on_cap='truncate'" in msg


def test_under_the_cap_nothing_changes() -> None:
    aq = analyze(LINEAR)
    batch = _ab(30, 30)
    assert keys(evaluate(aq, batch, max_matches_per_call=900)) == \
        keys(_uncapped(aq, batch, 900))


def test_matches_held_for_a_trailing_not_count_towards_the_cap() -> None:
    """Matches waiting on a trailing NOT stay buffered across calls and use the budget."""
    aq = analyze("NAME held PATTERN SEQ(A a, B b, NOT C c) WITHIN 1000 seconds "
                 "USING skip-till-any-match")
    rt = start(aq, max_matches_per_call=150)
    assert rt.push(_ab(10, 10)) == []  # 100 matches, all waiting for the window to pass
    with pytest.raises(CapacityError, match=r"'held'.*max_matches_per_call=150"):
        rt.push(_ab(0, 6, start_ts=20))  # 60 more: 160 buffered at once


def test_bad_cap_values_are_rejected() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(EngineError, match="max_matches_per_call"):
            start(analyze(LINEAR), max_matches_per_call=bad)


# --------------------------------------------------------------------------------------------
# truncate


@pytest.mark.parametrize("use_kernel", [True, False])
def test_truncate_keeps_a_prefix_of_the_uncapped_output(use_kernel: bool) -> None:
    """One partition: every match of the events before the one that reached the cap, some of
    that event's, none after; the counters say how many were dropped."""
    aq = analyze(LINEAR)
    batch = _ab(20, 20)
    full = _uncapped(aq, batch, 400)
    cap = 130
    rt = start(aq, max_matches_per_call=cap, on_cap="truncate", use_kernel=use_kernel)
    out, warned = _truncating(rt, batch)
    assert len(out) == cap
    assert rt.counters.truncated_matches == len(full) - cap
    assert rt.counters.matches == cap
    assert len(warned) == 1 and "truncated_matches" in warned[0]
    _kept_by_the_rule(out, full)


def test_truncate_gives_each_call_a_fresh_budget() -> None:
    aq = analyze("NAME pairs PATTERN SEQ(A a, B b) WITHIN 100 seconds" + ANY)
    cap = 50
    first, second = _ab(10, 10), _ab(10, 10, start_ts=1000)
    rt = start(aq, max_matches_per_call=cap, on_cap="truncate")
    out, warned = _truncating(rt, first, second)
    assert len(out) == 2 * cap and rt.counters.truncated_matches == 2 * (100 - cap)
    assert len(warned) == 1  # once per runtime
    full = keys(_uncapped(aq, _ab(10, 10), 100))
    assert keys(out[:cap]) == full[:cap]


@pytest.mark.parametrize("use_kernel", [True, False])
def test_state_keeps_advancing_after_the_budget_is_spent(use_kernel: bool) -> None:
    """Events after the cap still create and extend runs: the next call's matches are exactly
    the uncapped runtime's."""
    aq = analyze(LINEAR)
    first = EventBatch.from_records(_recs(10, 10) + _recs(5, 0, start_ts=20))
    second = _ab(0, 1, start_ts=100)
    ref = start(aq, max_matches_per_call=None)
    ref_first = ref.push(first)
    ref_second = ref.push(second) + ref.close()
    assert len(ref_first) == 100 and len(ref_second) == 15
    assert keys(ref_first + ref_second) == keys(oracle(aq, EventBatch.from_records(
        _recs(10, 10) + _recs(5, 0, start_ts=20) + _recs(0, 1, start_ts=100))))
    rt = start(aq, max_matches_per_call=50, on_cap="truncate", use_kernel=use_kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got_first = rt.push(first)
        got_second = rt.push(second) + rt.close()
    assert keys(got_first) == keys(ref_first)[:50]  # 10 matches per B event, whole events
    assert keys(got_second) == keys(ref_second)
    assert rt.counters.truncated_matches == 50


@pytest.mark.parametrize("query", [GROUP, UNION])
def test_truncate_in_group_and_union_plans(query: str) -> None:
    aq = analyze(query)
    batch = _ab(15, 15)
    full = _uncapped(aq, batch, 225)
    cap = 100
    rt = start(aq, max_matches_per_call=cap, on_cap="truncate")
    out, warned = _truncating(rt, batch)
    assert len(out) == cap and rt.counters.truncated_matches == len(full) - cap
    assert len(warned) == 1
    _kept_by_the_rule(out, full)


def test_truncate_spreads_over_partitions_in_routing_order() -> None:
    """Several partitions share the call's budget: the total stays at the cap."""
    aq = analyze("NAME pairs PATTERN SEQ(A a, B b) PARTITION BY k" + ANY)
    recs = [r for key in ("p", "q", "r") for r in _recs(10, 10, key=key)]
    batch = EventBatch.from_records(sorted(recs, key=lambda r: r["ts"]))
    full = _uncapped(aq, batch, 300)
    rt = start(aq, max_matches_per_call=150, on_cap="truncate")
    out, _ = _truncating(rt, batch)
    assert len(out) == 150 and rt.counters.truncated_matches == 150
    assert set(keys(out)) <= set(keys(full))


def _peak(fn: Any) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("query", [LINEAR, UNION, GROUP])
def test_truncate_bounds_memory_by_the_cap(query: str) -> None:
    """300 x 300 = 90,000 matches in one push; with a cap of 1,000 the peak traced memory stays
    near what 1,000 matches cost, far below the uncapped run's."""
    aq = analyze(query)
    batch = _ab(300, 300)

    def run(**opts: Any) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rt = start(aq, **opts)
            n = len(rt.push(batch)) + len(rt.close())
            assert n == (opts["max_matches_per_call"] or 90_000)

    uncapped = _peak(lambda: run(max_matches_per_call=None))
    capped = _peak(lambda: run(max_matches_per_call=1_000, on_cap="truncate"))
    # the uncapped run holds 90,000 matches (> 300 B each); the capped one at most 1,000
    # plus one event's worth (300) and the runs
    assert uncapped > 90_000 * 300
    assert capped < uncapped / 10
    assert capped < 3_000_000


# --------------------------------------------------------------------------------------------
# count_only


def test_count_only_kernel_counts_past_the_cap() -> None:
    """The counting kernel builds no match, so the cap does not apply to it."""
    aq = analyze(LINEAR)
    batch = _ab(30, 30)
    rt = start(aq, count_only=True, max_matches_per_call=10)
    assert rt.matcher.count_mode
    out = rt.push(batch) + rt.close()
    assert len(out) == 900 == rt.counters.matches
    assert rt.counters.truncated_matches == 0


def test_count_only_that_builds_candidates_is_capped() -> None:
    """With a NOT the candidates exist until output even when only counting: capped."""
    aq = analyze("NAME negc PATTERN SEQ(A a, NOT C c, B b) USING skip-till-any-match")
    rt = start(aq, count_only=True, max_matches_per_call=10)
    assert not rt.matcher.count_mode
    with pytest.raises(CapacityError, match="max_matches_per_call=10"):
        rt.push(_ab(30, 30))


# --------------------------------------------------------------------------------------------
# command line


def _csv(path: Path, n_a: int, n_b: int) -> str:
    lines = ["id,type,ts"]
    t = 0
    for kind, n in (("A", n_a), ("B", n_b)):
        for _ in range(n):
            lines.append(f"{kind}{t},{kind},{t}")
            t += 1
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("stream", [False, True])
def test_cli_flags(tmp_path: Path, stream: bool) -> None:
    events = _csv(tmp_path / "e.csv", 10, 10)  # 100 matches
    base = ["run", LINEAR, "--input", events, "-q"] + (["--stream"] if stream else [])
    r = CliRunner().invoke(cli, [*base, "--max-matches-per-call", "40"])
    assert r.exit_code == 3
    assert "max_matches_per_call=40" in r.stderr and "--max-matches-per-call" in r.stderr
    r = CliRunner().invoke(cli, [*base, "--max-matches-per-call", "40", "--on-cap", "truncate"])
    assert r.exit_code == 0
    assert len(r.stdout.splitlines()) == 40
    assert "dropped 60 matches" in r.stderr
    r = CliRunner().invoke(cli, [*base, "--max-matches-per-call", "0"])
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 100
    assert all(json.loads(line)["query"] == "pairs" for line in r.stdout.splitlines())
