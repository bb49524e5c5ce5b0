"""Keyed parallelism (kleene.runtime.parallel): N worker processes give the single-process
matches, match for match and in order (issue 15)."""

from __future__ import annotations

import dataclasses
import io
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings

import kleene
from kleene.api import analyze
from kleene.errors import KleeneError
from kleene.events import EventBatch, Match
from kleene.events.textcols import utf8_bytes
from kleene.events.writers import JsonLinesWriter
from kleene.plans import choose
from kleene.runtime import keyed, parallel
from kleene.runtime.engine import Runtime, run_batch
from kleene.testing.strategies import describe, queries, streams


def _key(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [(m.query, dict(m.bindings), m.start, m.end, dict(m.values)) for m in ms]


@pytest.fixture
def no_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parallel even on a handful of events (the tests' streams are tiny)."""
    monkeypatch.setattr(keyed, "MIN_EVENTS_PER_WORKER", 0)  # (read by sequential_reason)


@pytest.mark.parametrize("feature", ["partitions", "policies", "kleene", "negation", "mixed"])
def test_workers_equal_one_process_on_random_partitioned_queries(no_minimum: None,
                                                                 feature: str) -> None:
    @settings(max_examples=40, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(query=queries(feature=feature), stream=streams(min_events=4, max_events=12))
    def check(query: str, stream: EventBatch) -> None:
        try:
            aq = analyze(query)
            if not aq.partition_by:
                aq = analyze(dataclasses.replace(aq.query, partition_by=("k",)))
            compiled = choose(aq)
        except KleeneError:
            assume(False)
            return
        note(f"query:  {query} (PARTITION BY k)")
        note(f"stream: {describe(stream)}")
        one = run_batch(Runtime(compiled), stream)
        want = _key(one)
        for workers in (2, 3):
            got = parallel.run_parallel(compiled, stream, workers)
            assert _key(got.matches) == want, f"{workers} workers differ from one process"
        lines = parallel.run_parallel(compiled, stream, 2,
                                      texts=JsonLinesWriter(io.StringIO(), stream.time).texts)
        assert _written(lines, stream) == _jsonl(one, stream), "worker-formatted lines differ"

    check()


def _jsonl(matches: list[Match], stream: EventBatch) -> str:
    """What the JSON Lines writer writes for ``matches`` in one process."""
    out = io.StringIO()
    JsonLinesWriter(out, stream.time).write(matches)
    return out.getvalue()


def _written(run: parallel.ParallelRun, stream: EventBatch) -> str:
    """The output of a run with ``texts=``: the workers' merged lines, or (one process) the
    matches written as usual."""
    if run.texts is None:
        assert run.workers == 1
        return _jsonl(run.matches, stream)
    assert run.workers > 1 and run.matches == []
    return "".join(bytes(utf8_bytes(t)).decode() for t in run.texts)


def _stock(n: int, symbols: int, seed: int = 7) -> EventBatch:
    rng = np.random.default_rng(seed)
    return EventBatch.from_records([
        {"id": i, "type": "Stock", "ts": i, "symbol": f"S{int(s)}", "price": float(p)}
        for i, (s, p) in enumerate(zip(rng.integers(0, symbols, n),
                                       rng.normal(100, 5, n).round(1), strict=True))])


STOCK = """PATTERN SEQ(Stock a, Stock+ b[], Stock c)
WHERE b[1].price > a.price AND b[i].price > b[i-1].price AND c.price < a.price
PARTITION BY symbol WITHIN 10 minutes USING strict-contiguity"""


def test_api_workers_gives_the_same_matches_in_the_same_order() -> None:
    """``compile(..., workers=2).run`` on enough events to fork: really two processes, and
    the output of one."""
    events = _stock(2 * parallel.MIN_EVENTS_PER_WORKER + 1000, symbols=20)
    one = kleene.compile(STOCK).run(events)
    two = kleene.compile(STOCK, workers=2).run(events)
    assert len(one) > 100
    assert _key(two) == _key(one)
    compiled = kleene.compile(STOCK).compiled_plan
    run = parallel.run_parallel(compiled, events, 2)
    assert run.workers == 2 and run.reason is None
    assert run.counters.events_in == len(events)


def test_workers_format_their_own_lines_as_one_writer_would(no_minimum: None) -> None:
    """``texts=``: each worker formats its matches, the merge orders the lines; the text is
    the single-process writer's, byte for byte, and the count is the matches'."""
    events = _stock(3000, symbols=10)
    compiled = kleene.compile(STOCK).compiled_plan
    one = run_batch(Runtime(compiled), events)
    assert len(one) > 50
    for workers in (2, 3):
        run = parallel.run_parallel(compiled, events, workers,
                                    texts=JsonLinesWriter(io.StringIO(), events.time).texts)
        assert run.workers == workers and run.n_matches() == len(one)
        assert _written(run, events) == _jsonl(one, events)


def test_unpartitioned_query_runs_in_one_process_and_says_why(no_minimum: None) -> None:
    events = _stock(200, symbols=3)
    compiled = kleene.compile("PATTERN SEQ(Stock a, Stock b) WHERE b.price > a.price + 5"
                              ).compiled_plan
    run = parallel.run_parallel(compiled, events, 2)
    assert run.workers == 1 and run.reason is not None and "PARTITION BY" in run.reason
    assert _key(run.matches) == _key(run_batch(Runtime(compiled), events))


def test_a_per_call_cap_decides_as_in_one_process(no_minimum: None) -> None:
    """``max_matches_per_call`` counts one call's matches, and a bounded run is one call over
    the whole input: a cap the whole output reaches but no worker's share does raises as one
    process raises; with ``on_cap="truncate"`` the kept matches are one process's."""
    from kleene.errors import CapacityError

    events = _stock(3000, symbols=10)
    compiled = kleene.compile(STOCK).compiled_plan
    total = len(run_batch(Runtime(compiled), events))
    cap = total * 3 // 4  # above each worker's share of the matches, below the whole
    with pytest.raises(CapacityError):
        run_batch(Runtime(compiled, max_matches_per_call=cap), events)
    with pytest.raises(CapacityError):
        parallel.run_parallel(compiled, events, 2, {"max_matches_per_call": cap})
    opts = {"max_matches_per_call": cap, "on_cap": "truncate"}
    rt = Runtime(compiled, **opts)  # type: ignore[arg-type]
    with pytest.warns(RuntimeWarning, match="a cap was reached"):
        kept = run_batch(rt, events)
    with pytest.warns(RuntimeWarning, match="a cap was reached"):
        run = parallel.run_parallel(compiled, events, 2, opts)
    assert len(kept) == cap and _key(run.matches) == _key(kept)
    assert run.workers == 1 and "max_matches_per_call" in str(run.reason)
    assert run.counters.truncated_matches == rt.counters.truncated_matches > 0
    run = parallel.run_parallel(compiled, events, 2, {"max_matches_per_call": total + 1})
    assert run.workers == 2 and len(run.matches) == total


def test_count_only_counts_across_workers(no_minimum: None) -> None:
    events = _stock(3000, symbols=10)
    compiled = kleene.compile(STOCK).compiled_plan
    want = len(run_batch(Runtime(compiled), events))
    run = parallel.run_parallel(compiled, events, 2, {"count_only": True})
    assert run.workers == 2 and run.counters.matches == want and run.matches == []


def test_keys_go_to_workers_by_a_stable_hash() -> None:
    t = _stock(500, symbols=7).table
    a = parallel.key_workers(t, ["symbol"], 3)
    b = parallel.key_workers(t.slice(100), ["symbol"], 3)
    assert set(a.tolist()) <= {0, 1, 2}
    # the same key goes to the same worker whatever batch it arrives in
    sym = t.column("symbol").to_pylist()
    where = {s: int(w) for s, w in zip(sym, a.tolist(), strict=True)}
    assert all(where[s] == int(w) for s, w in zip(sym[100:], b.tolist(), strict=True))
    assert len(set(where.values())) > 1


def test_the_counting_router_sends_keys_where_the_sorting_one_does() -> None:
    """``key_workers`` counts the key codes (no sort) when the code space is small: the same
    worker per row as hashing the keys of ``key_codes`` (nulls and two key columns too)."""
    from kleene.runtime.engine import key_codes

    rng = np.random.default_rng(5)
    n = 400
    sym = [None if x == 0 else f"S{x}" for x in rng.integers(0, 9, n).tolist()]
    t = EventBatch.from_records([{"id": i, "type": "T", "ts": i, "s": s, "k": int(k)}
                                 for i, (s, k) in enumerate(zip(
                                     sym, rng.integers(0, 4, n).tolist(), strict=True))]).table
    for attrs in (["s"], ["s", "k"], ["k", "s"]):
        inv, keys = key_codes(t, attrs)
        for workers in (2, 3):
            want = [zlib.crc32(repr(keys[c]).encode()) % workers for c in inv.tolist()]
            assert parallel.key_workers(t, attrs, workers).tolist() == want


@pytest.mark.parametrize("lines", [
    [],
    [["a", "b"], ["c"]],
    [["x" * 3, ""], ["é\"z"]],
])
@pytest.mark.parametrize("mixed", [False, True])
def test_lines_file_round_trip(tmp_path: Any, lines: list[list[str]], mixed: bool) -> None:
    """A part worker's output lines go to the calling process through a shared file
    (written, then mapped and unlinked): the same strings in the same order, whatever the
    arrays' string types."""
    import os

    import pyarrow as pa

    arrays = [pa.array(chunk, pa.large_string() if mixed and i % 2 else pa.string())
              for i, chunk in enumerate(lines)]
    path = parallel._write_lines(str(tmp_path), 3, arrays)
    back = parallel._read_lines(path)
    assert not os.path.exists(path)
    assert [s for a in back for s in a.to_pylist()] == [s for c in lines for s in c]
    if mixed and len(lines) > 1:
        assert {a.type for a in back} == {pa.large_string()}
