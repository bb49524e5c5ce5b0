"""EMIT TIMEOUTS in the streaming runtime (docs/semantics.md 20): timed-out partial matches come
out as the frontier passes their expiry, equal the oracle's whatever the batching, and survive
snapshot / restore."""

from __future__ import annotations

import pytest

from kleene.api import analyze
from kleene.plans import start
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.timeline import events

from .helpers import keys, random_stream

QUERIES = [
    "PATTERN SEQ(A a, B b, C c) WHERE b.x > a.x WITHIN 3 seconds EMIT TIMEOUTS",
    "PATTERN SEQ(A a, B b) PARTITION BY k WITHIN 2 seconds EMIT TIMEOUTS",
    "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x PARTITION BY k WITHIN 3 seconds "
    "USING skip-till-next-match EMIT TIMEOUTS",
    "PATTERN SEQ(A a, B{2} b[]) WHERE sum(b.x) > 9 PARTITION BY k WITHIN 3 seconds "
    "EMIT RECENT TIMEOUTS",
    "PATTERN SEQ(A a, OR(B b, C c), A d) WHERE d.x > a.x WITHIN 2 seconds EMIT TIMEOUTS",
    "PATTERN SEQ(A a, B* b[], C c) WHERE b.x > a.x WITHIN 2 seconds "
    "USING skip-till-next-match PICK FIRST a EMIT TIMEOUTS",
    "PATTERN SEQ(A a, B b) PARTITION BY k WITHIN 3 seconds USING strict-contiguity "
    "EMIT TIMEOUTS",
    "PATTERN SEQ(A a, B+ b[], C c) WHERE [k] WITHIN 3 seconds USING partition-contiguity "
    "EMIT TIMEOUTS",
]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("size", [1, 4, 30])
def test_streaming_timeouts_equal_the_oracle(query: str, size: int) -> None:
    batch = random_stream(5, n=30)
    want = oracle(analyze(query), batch)
    assert any(m.expired is not None for m in want)  # the case exercises timeouts
    rt = start(analyze(query))
    got = []
    for off in range(0, len(batch), size):
        got += rt.push(batch.slice(off, size))
    got += rt.close()
    assert keys(got) == keys(want)
    assert rt.counters.timeouts == sum(m.expired is not None for m in want)


def test_a_timeout_comes_out_once_the_frontier_passes_its_expiry() -> None:
    rt = start(analyze("PATTERN SEQ(A a, B b) WITHIN 5 seconds EMIT TIMEOUTS"))
    assert rt.push(events("a1@1")) == []
    assert rt.push(events("c1@6")) == []  # an event at T = 6 could still be a B
    out = rt.push(events("c2@7"))
    assert [(dict(m.bindings), m.expired) for m in out] == [({"a": "a1"}, 6_000_000)]
    assert rt.push(events("a2@10")) == []
    assert rt.advance(15_000_000) == []  # a B at 15 may still come
    out = rt.advance(15_000_001)
    assert [(dict(m.bindings), m.expired) for m in out] == [({"a": "a2"}, 15_000_000)]
    assert rt.close() == []


def test_a_match_and_a_timeout_in_one_push_are_in_output_order() -> None:
    rt = start(analyze("PATTERN SEQ(A a, B b) WITHIN 2 seconds EMIT TIMEOUTS"))
    out = rt.push(events("a1@1 b1@2 a2@3 a3@4 b2@6")) + rt.close()
    assert [(dict(m.bindings), m.expired) for m in out] == [
        ({"a": "a1", "b": "b1"}, None), ({"a": "a2"}, 5_000_000),
        ({"a": "a3", "b": "b2"}, None)]


@pytest.mark.parametrize("query", [*QUERIES[:3], *QUERIES[-2:]])
@pytest.mark.parametrize("cut", [7, 19])
def test_restore_keeps_pending_timeouts(query: str, cut: int) -> None:
    batch = random_stream(5, n=30)
    want = oracle(analyze(query), batch)
    rt = start(analyze(query))
    out = rt.push(batch.slice(0, cut))
    blob = rt.snapshot()
    rt2 = start(analyze(query))
    rt2.restore(blob)
    got = out + rt2.push(batch.slice(cut)) + rt2.close()
    assert keys(got) == keys(want)


def test_timeouts_with_allowed_lateness() -> None:
    query = "PATTERN SEQ(A a, B b) WITHIN 2 seconds EMIT TIMEOUTS"
    rt = start(analyze(query), allowed_lateness_us=1_000_000)
    got = rt.push(events("a1@1 a2@3")) + rt.push(events("b1@2.5")) + rt.push(
        events("b2@6")) + rt.close()
    want = oracle(analyze(query), events("a1@1 b1@2.5 a2@3 b2@6"))
    assert keys(got) == keys(want)
    assert [m.expired for m in got] == [None, 5_000_000]


def test_matches_table_has_an_expired_column() -> None:
    import kleene

    q = kleene.compile("PATTERN SEQ(A a, B b) WITHIN 2 seconds EMIT TIMEOUTS")
    t = q.run(events("a1@1 b1@2 a2@3 a3@4 b2@6")).to_arrow()
    assert t.column_names[:4] == ["query", "start", "end", "expired"]
    assert t.column("expired").to_pylist() == [None, 5, None]
    assert t.column("b").to_pylist() == ["b1", None, "b2"]


COMPONENTS = [("A a", "a"), ("B b", "b"), ("B+ b[]", "b"), ("B* b[]", "b"),
              ("B{1,2} b[]", "b"), ("OR(B e, C c)", "ec"), ("C c", "c"), ("A d", "d")]
CONDITIONS = [("b.x > a.x", "ab"), ("sum(b.x) > 6", "b"), ("c.x < 5", "c"), ("d.x > a.x", "ad")]


def _random_query(seed: int) -> str:
    import random

    rng = random.Random(seed)
    comps: list[str] = []
    used = ""
    for _ in range(20):
        text, names = rng.choice(COMPONENTS)
        if not set(names) & set(used):
            comps.append(text)
            used += names
        if len(comps) == 3 or (len(comps) == 2 and rng.random() < 0.5):
            break
    if all("*" in c for c in comps):
        comps.append("C z")
    conds = [c for c, names in CONDITIONS if set(names) <= set(used) and rng.random() < 0.5
             and ("sum" not in c or any("b[]" in x for x in comps))]
    if rng.random() < 0.3:
        conds.append("[k]")
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    strategy = rng.choice(["", " USING skip-till-next-match", " USING strict-contiguity",
                           " USING partition-contiguity"])
    part = rng.choice(["", " PARTITION BY k"]) if "[k]" not in conds else ""
    return (f"PATTERN SEQ({', '.join(comps)}){where}{part} WITHIN {rng.randint(1, 3)} seconds"
            f"{strategy} EMIT TIMEOUTS")


@pytest.mark.parametrize("seed", range(40))
def test_random_timeout_queries_equal_the_oracle(seed: int) -> None:
    """The nfa plan against the oracle on random SEQs of the fragment (docs/semantics.md 20)
    under every strategy, pushed in chunks of 3."""
    query = _random_query(seed)
    batch = random_stream(100 + seed, n=24)
    want = oracle(analyze(query), batch)
    rt = start(analyze(query))
    got = []
    for off in range(0, len(batch), 3):
        got += rt.push(batch.slice(off, 3))
    got += rt.close()
    assert keys(got) == keys(want), query
