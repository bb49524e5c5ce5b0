"""Streaming lateness is defined per event (docs/engine.md, "Streaming rules"): an event is late
when it is behind the newest earlier event minus the allowed lateness. The late events and the
matches must not depend on how the stream is cut into batches."""

from __future__ import annotations

import random

import pytest

import kleene
from kleene.events import EventBatch
from kleene.testing.oracle import evaluate as oracle


def _stream(seed: int, n: int) -> list[dict[str, object]]:
    rnd = random.Random(seed)
    out = []
    t = 0
    for i in range(n):
        t += rnd.choice([0, 1, 1, 2, 3])
        ts = t - (rnd.choice([0, 0, 0, 1, 2, 5, 9]) if rnd.random() < 0.3 else 0)
        out.append({"id": i, "type": rnd.choice("AB"), "ts": ts, "x": rnd.randint(0, 9)})
    return out


def _late_by_definition(rows: list[dict[str, object]], lateness: int) -> list[object]:
    newest = None
    late = []
    for r in rows:
        ts = int(r["ts"])  # type: ignore[call-overload]
        if newest is not None and ts < newest - lateness:
            late.append(r["id"])
        else:
            newest = ts if newest is None else max(newest, ts)
    return late


QUERY = "PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 6 seconds"


@pytest.mark.parametrize("lateness_s", [0, 2])
@pytest.mark.parametrize("seed", range(4))
def test_late_events_and_matches_do_not_depend_on_batch_size(seed: int,
                                                              lateness_s: int) -> None:
    rows = _stream(seed, 150)
    want_late = _late_by_definition(rows, lateness_s)  # ts in seconds
    on_time = [r for r in rows if r["id"] not in set(want_late)]
    reference = oracle(kleene.analyze(QUERY),
                       EventBatch.from_records(on_time))  # sorted stably by ts
    q = kleene.compile(QUERY)
    results = {}
    for size in (1, 2, 3, 7, 64, 1000, 65_536):
        rt = q.start(allowed_lateness_us=lateness_s * 1_000_000)
        got = []
        for i in range(0, len(rows), size):
            got += rt.push(EventBatch.from_records(rows[i:i + size], sort=False))
        got += rt.close()
        late = rt.late
        results[size] = (late.ids.to_pylist() if late is not None else [], got)
        assert rt.counters.late_events == len(want_late), size
    for size, (late_ids, got) in results.items():
        assert late_ids == want_late, size
        assert got == reference, size
