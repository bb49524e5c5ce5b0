"""The chain plan's generated per-event loop for a SEQ of single variables (``chain_seq``):
against the oracle, match for match and in order, and against the interpreted loop it
replaces (``ChainMatcher._process_seq``): the same matches, counters, caps, errors and
per-key state, on random keyed streams pushed in pieces, with idle keys (events before any
start event) and snapshot/restore."""

from __future__ import annotations

import random
import warnings
from typing import Any

import pytest

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch
from kleene.plans.registry import start
from kleene.testing.oracle import evaluate as oracle


def _case(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    n = rng.randint(2, 4)
    names = [f"v{i}" for i in range(n)]
    # a rare first type makes many idle prefixes (the Aarhus keys before their first start)
    items = [f"{rng.choice('ABCD')} {v}" for v in names]
    conds = [f"{v}.x > {rng.randint(0, 2)}" for v in names if rng.random() < 0.3]
    q = f"PATTERN SEQ({', '.join(items)})"
    if conds:
        q += " WHERE " + " AND ".join(conds)
    if rng.random() < 0.7:
        q += " PARTITION BY k"
    w = rng.random()
    if w < 0.5:
        q += f" WITHIN {rng.randint(1, 6)} seconds"
    elif w < 0.7:
        q += f" WITHIN {rng.randint(2, 8)} EVENTS"
    recs: list[dict[str, object]] = []
    ts = 0
    for i in range(rng.randint(4, 60)):
        ts += rng.choice((0, 1, 1, 2))
        t = recs[-1]["type"] if recs and rng.random() < 0.5 else rng.choice("ABCD")
        recs.append({"id": f"e{i}", "type": t, "ts": ts, "x": rng.randint(0, 3),
                     "k": rng.choice("uvw")})
    return q, recs


def _interpreted(rt: Any) -> Any:
    """The same runtime with the generated loop and state constructor taken off (the class's
    ``process`` / ``new_state``: the interpreted ``_process_seq``)."""
    m = rt.matcher
    del m.process, m.new_state
    return rt


def _run(rt: Any, recs: list[dict[str, object]], cuts: list[int]) -> list[Any]:
    out = []
    for a, b in zip([0, *cuts], [*cuts, len(recs)], strict=True):
        if b > a:
            out += rt.push(EventBatch.from_records(recs[a:b]))
    return out + rt.close()


def _state(rt: Any) -> dict[Any, Any]:
    # lists and tuples alike: a key's untouched partitions are the shared empty ones
    return {k: repr(rt.matcher.dump_state(st)) for k, st in rt.states.items()}


def _counters(rt: Any) -> tuple[int, ...]:
    m = rt.matcher
    c = rt.counters
    return (m.created, m.copied, m.nodes_made, c.matches, c.truncated_matches,
            c.truncated_runs)


def test_generated_loop_equals_the_oracle_and_the_interpreted_loop() -> None:
    rng = random.Random(1313)
    installed = matches = idle = 0
    for _ in range(300):
        q, recs = _case(rng)
        aq = analyze(q)
        want = oracle(aq, EventBatch.from_records(recs))
        cuts = sorted(rng.sample(range(1, len(recs) + 1), rng.randint(0, 3)))
        new = start(aq, plan="chain")
        installed += "process" in vars(new.matcher)
        got = _run(new, recs, cuts)
        old = _interpreted(start(aq, plan="chain"))
        ref = _run(old, recs, cuts)
        assert [(m.bindings, m.start, m.end) for m in got] == \
            [(m.bindings, m.start, m.end) for m in want], f"{q} over {recs}"
        assert [m.key() for m in got] == [m.key() for m in ref]
        assert _counters(new) == _counters(old), q
        assert _state(new) == _state(old), q
        idle += sum(not any(p.recs for p in st.parts) for st in new.states.values())
        matches += len(want)
    assert installed == 300
    assert matches > 2000 and idle > 100


def test_idle_keys_share_no_partition_once_they_start() -> None:
    """Keys get their own partitions at their first start event; the rest keep none."""
    recs = [{"id": f"e{i}", "type": t, "ts": i, "k": k}
            for i, (t, k) in enumerate([("B", "u"), ("C", "v"), ("A", "u"), ("B", "u"),
                                        ("A", "w"), ("C", "u"), ("B", "w"), ("C", "w")])]
    aq = analyze("PATTERN SEQ(A a, B b, C c) PARTITION BY k WITHIN 10 seconds")
    rt = start(aq, plan="chain")
    out = _run(rt, recs, [3, 5])
    assert [m.bindings for m in out] == [m.bindings for m in
                                         oracle(aq, EventBatch.from_records(recs))]
    parts = {k[0] if isinstance(k, tuple) else k: st.parts
             for k, st in rt.states.items()}  # type: ignore[attr-defined]
    assert parts["u"] is not parts["w"]
    assert parts["u"][0] is not parts["w"][0]
    assert parts["v"] is rt.matcher.new_state().parts  # type: ignore[attr-defined]
    assert [len(p.recs) for p in parts["u"]] == [1, 1, 1]


@pytest.mark.parametrize("opts", [
    {"max_runs_per_partition": 3}, {"max_matches_per_event": 2},
    {"max_matches_per_call": 5}, {"max_runs_per_partition": 4, "on_cap": "truncate"},
    {"max_matches_per_event": 3, "on_cap": "truncate"},
    {"max_matches_per_call": 4, "on_cap": "truncate"},
])
def test_caps_as_the_interpreted_loop(opts: dict[str, Any]) -> None:
    """Every cap, raising or truncating: the same error (message) or the same kept matches
    and truncation counts as the interpreted loop."""
    rng = random.Random(5)
    seen = 0
    for _ in range(60):
        q, recs = _case(rng)
        aq = analyze(q)
        results = []
        for rt in (start(aq, plan="chain", **opts),
                   _interpreted(start(aq, plan="chain", **opts))):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # truncation's warning
                    got = _run(rt, recs, [len(recs) // 2])
                results.append(("ok", [m.key() for m in got], _counters(rt)))
            except CapacityError as exc:
                results.append(("error", str(exc), None))
        assert results[0] == results[1], q
        seen += results[0][0] == "error" or results[0][2][4] + results[0][2][5] > 0
    assert seen > 5  # the caps were reached


def test_snapshot_restore_of_idle_and_busy_keys() -> None:
    rng = random.Random(21)
    recs = [{"id": f"e{i}", "type": rng.choice("AABCCC"), "ts": i // 2, "x": 0,
             "k": rng.choice("uvwxyz")} for i in range(120)]
    aq = analyze("PATTERN SEQ(C a, B b, A c) PARTITION BY k WITHIN 20 seconds")
    want = [m.key() for m in oracle(aq, EventBatch.from_records(recs))]
    for cut in (1, 7, 40, 90):
        rt = start(aq, plan="chain")
        got = rt.push(EventBatch.from_records(recs[:cut]))
        rt2 = start(aq, plan="chain")
        rt2.restore(rt.snapshot())
        got += rt2.push(EventBatch.from_records(recs[cut:])) + rt2.close()
        assert [m.key() for m in got] == want and len(want) > 20
