"""The chain plan (LinkedCEP): counters on the paper's Q4, counting without enumeration against
the oracle on many random small cases, snapshot/restore, caps."""

from __future__ import annotations

import random

import pytest

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch
from kleene.plans.registry import Stats, choose, start
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.timeline import timeline

Q4 = timeline("""
    ts  1   2   3   4   5   6   7   8
        a1  a2  b1  b2  a3  b3  c1  c2
    """)


def _run(q: str, events: EventBatch, plan: str, **opts: object) -> object:
    rt = start(analyze(q), plan=plan, **opts)
    rt.count_placeholders = False
    out = rt.push(events) + rt.close()
    return rt, out


def test_q4_temporary_matches_chain_13_nfa_24() -> None:
    """The paper's count: 13 temporary matches (10 copies) with chains, 24 (21) in the NFA."""
    rt, out = _run("PATTERN SEQ(A a, B b, C c)", Q4, "chain")
    assert len(out) == 14  # type: ignore[arg-type]
    assert rt.temporary_matches() == {"created": 13, "copied": 10, "live": 8}  # type: ignore[attr-defined]
    rt, out = _run("PATTERN SEQ(A a, B b, C c)", Q4, "nfa", use_kernel=False)
    assert len(out) == 14  # type: ignore[arg-type]
    t = rt.temporary_matches()  # type: ignore[attr-defined]
    assert (t["created"], t["copied"]) == (24, 21)


def test_count_only_counts_without_nodes() -> None:
    rt, out = _run("PATTERN SEQ(A a, B b, C c)", Q4, "chain", count_only=True)
    assert out == [] and rt.counters.matches == 14  # type: ignore[attr-defined]
    assert rt.matcher.count_mode and rt.matcher.nodes_made == 0  # type: ignore[attr-defined]


def test_count_is_an_exact_big_integer() -> None:
    """2^200 - 1 Kleene subsets between a and c: counted exactly, nothing enumerated."""
    recs = [{"id": 0, "type": "A", "ts": 0}]
    recs += [{"id": i, "type": "B", "ts": i} for i in range(1, 201)]
    recs.append({"id": 201, "type": "C", "ts": 201})
    rt, out = _run("PATTERN SEQ(A a, B+ b[], C c)", EventBatch.from_records(recs), "chain",
                   count_only=True)
    assert rt.counters.matches == 2 ** 200 - 1  # type: ignore[attr-defined]


def test_snapshot_restore_mid_stream() -> None:
    q = "PATTERN SEQ(A a, B+ b[], C c) WITHIN 5 seconds"
    aq = analyze(q)
    whole = [m.bindings for m in _run(q, Q4, "chain")[1]]  # type: ignore[index, union-attr]
    rt = start(aq, plan="chain")
    t = Q4.table
    first = rt.push(EventBatch(t.slice(0, 4), Q4.time))
    blob = rt.snapshot()
    rt2 = start(aq, plan="chain")
    rt2.restore(blob)
    rest = rt2.push(EventBatch(t.slice(4), Q4.time)) + rt2.close()
    assert [m.bindings for m in first + rest] == whole and len(whole) > 0


def test_max_runs_cap() -> None:
    with pytest.raises(CapacityError, match="max_runs_per_partition=3"):
        _run("PATTERN SEQ(A a, B b, C c)", Q4, "chain", max_runs_per_partition=3)


def test_chooser_prefers_chain_when_matches_explode() -> None:
    """With a measured rate, a Kleene whose partial matches exceed the NFA's run cap goes to
    the chain; with default statistics the NFA stays (both estimates saturate)."""
    q = analyze("PATTERN SEQ(A a, B+ b[], C c) WITHIN 60 seconds")
    measured = Stats(type_share={"A": 0.3, "B": 0.4, "C": 0.3}, events_per_second=10.0,
                     source="test")
    assert choose(q, stats=measured).choice.chosen == "chain"
    assert choose(q).choice.chosen == "nfa"
    few = Stats(type_share={"A": 0.3, "B": 0.4, "C": 0.3}, events_per_second=0.05,
                source="test")
    assert choose(q, stats=few).choice.chosen == "nfa"


# --------------------------------------------------------------------------------------------
# counting against the oracle on random small cases
# --------------------------------------------------------------------------------------------


def _random_case(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    n = rng.randint(2, 4)
    items, names = [], []
    for i in range(n):
        t = rng.choice("ABC")
        v = f"v{i}"
        kind = rng.random()
        if 0 < i and kind < 0.3:
            items.append(f"{t}+ {v}[]")
        elif 0 < i < n - 1 and kind < 0.45:
            items.append(f"{t}* {v}[]")
        else:
            items.append(f"{t} {v}")
        names.append(v)
    conds = []
    for v in names:
        if rng.random() < 0.3:
            conds.append(f"{v}.x > {rng.randint(0, 2)}")
    if rng.random() < 0.3 and "[" not in items[0]:
        conds.append(f"{names[-1]}.x >= {names[0]}.x")
    if rng.random() < 0.3:
        conds.append("[k]")
    q = f"PATTERN SEQ({', '.join(items)})"
    if conds:
        q += " WHERE " + " AND ".join(conds)
    if rng.random() < 0.3:
        q += " PARTITION BY k"
    w = rng.random()
    if w < 0.35:
        q += f" WITHIN {rng.randint(1, 4)} seconds"
    elif w < 0.55:
        q += f" WITHIN {rng.randint(2, 6)} EVENTS"
    recs: list[dict[str, object]] = []
    ts = 0
    for i in range(rng.randint(3, 10)):
        ts += rng.choice((0, 1, 1, 2))
        recs.append({"id": f"e{i}", "type": rng.choice("ABC"), "ts": ts,
                     "x": rng.randint(0, 3), "k": rng.choice("uv")})
    return q, recs


def test_count_only_equals_the_oracle_on_random_cases() -> None:
    rng = random.Random(1313)
    counted_cases = swag_cases = 0
    for _ in range(400):
        q, recs = _random_case(rng)
        events = EventBatch.from_records(recs)
        aq = analyze(q)
        want = oracle(aq, events)
        rt, out = _run(q, events, "chain", count_only=True)
        counted_cases += bool(rt.matcher.count_mode)  # type: ignore[attr-defined]
        swag_cases += bool(rt.matcher.window_swag)  # type: ignore[attr-defined]
        got = rt.counters.matches  # type: ignore[attr-defined]
        assert got == len(want), f"{q} over {recs}: counted {got}, oracle {len(want)}"
        rt, out = _run(q, events, "chain")
        assert [m.bindings for m in out] == [m.bindings for m in want], q  # type: ignore[union-attr]
    assert counted_cases > 300  # the cases really ran the counting path
    assert swag_cases > 80  # ... and the sliding-window aggregate


def test_count_only_with_a_policy_counts_what_the_policy_keeps() -> None:
    q = "PATTERN SEQ(A a, B b, C c) PICK LAST a"
    rt, _out = _run(q, Q4, "chain", count_only=True)
    assert not rt.matcher.count_mode  # type: ignore[attr-defined]
    assert rt.counters.matches == len(oracle(analyze(q), Q4)) == 6  # type: ignore[attr-defined]
