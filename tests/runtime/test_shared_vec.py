"""The shared network's batch-vectorized test phase (kleene.runtime.shared_vec) against the
per-event one (``SharedNetwork.vectorized = False``, the reference) and the oracle: the same
matches in the same order, the same stored instances after every push, the same PMBs (the
network's dump), across chunked pushes, cleaning inside a batch, dropped rows, add / remove
(switching between the two paths), snapshot / restore, caps and count mode."""

from __future__ import annotations

import random
from typing import Any

import pytest

import kleene
from kleene.events import EventBatch, Match
from kleene.runtime import shared_vec
from kleene.runtime.shared import SharedNetwork
from kleene.testing.oracle import evaluate_set

TYPES = "ABCDE"


def _query(rng: random.Random, name: str, key: str | None = None) -> str:
    """A query the vectorized path takes: SEQ of 1-4 distinct types, or OR."""
    kind = rng.choice(["SEQ", "SEQ", "SEQ", "OR"])
    n = rng.randint(1, 4 if kind == "SEQ" else 3)
    types = rng.sample(TYPES, n)
    body = ", ".join(f"{t} {t.lower()}{rng.randint(0, 1)}" for t in types)
    if key is None:
        key = rng.choice([" PARTITION BY src", " PARTITION BY src", "", " WHERE [src]"])
    window = "" if kind == "OR" or rng.random() < 0.1 else f" WITHIN {rng.randint(1, 8)} seconds"
    emit = rng.choice(["", " EMIT RECENT", " EMIT RECENT"])
    return f"NAME {name} PATTERN {kind}({body}){key}{window}{emit}"


def _stream(rng: random.Random, n: int, sources: int = 3) -> list[dict[str, Any]]:
    ts = 0
    out = []
    for i in range(n):
        ts += rng.choice([0, 0, 1, 1, 2])
        out.append({"id": f"e{i}", "type": rng.choice(TYPES), "ts": ts,
                    "src": rng.randint(1, sources)})
    return out


def _key(m: Match) -> tuple[Any, ...]:
    return (m.query, tuple(m.bindings.items()), m.start, m.end)


def _drive(vectorized: bool, texts: list[str], recs: list[dict[str, Any]], cuts: list[int],
           steps: dict[int, list[tuple[str, str]]] | None = None,
           **opts: Any) -> tuple[list[Any], list[Any], list[bool]]:
    """Push ``recs`` in the chunks ``cuts`` (add / remove before chunk i as ``steps[i]``);
    the matches, per push (stored instances, the network's dump), and per push whether the
    vectorized path held the network's state afterwards."""
    old = SharedNetwork.vectorized
    SharedNetwork.vectorized = vectorized
    try:
        rt = kleene.compile_many(texts, plan="shared").start(**opts)
        got: list[Any] = []
        states: list[Any] = []
        took: list[bool] = []
        prev = 0
        for i, cut in enumerate([*cuts, len(recs)]):
            for op, arg in (steps or {}).get(i, []):
                if op == "add":
                    rt.add(arg)
                else:
                    rt.remove(arg)
            got += [_key(m) for m in rt.push(EventBatch.from_records(recs[prev:cut]))]
            prev = cut
            nets = list(rt.networks.values())
            states.append((rt.stored_instances(), [n.dump() for n in nets],
                           [n.pmb_entries() for n in nets]))
            took.append(any(n.vec.valid for n in nets))
        got += [_key(m) for m in rt.close()]
        return got, states, took
    finally:
        SharedNetwork.vectorized = old


@pytest.mark.parametrize("seed", range(60))
def test_vectorized_equals_per_event_and_the_oracle(seed: int) -> None:
    rng = random.Random(seed)
    texts = [_query(rng, f"q{i}") for i in range(rng.randint(1, 7))]
    recs = _stream(rng, rng.randint(20, 90))
    cuts = sorted(rng.sample(range(1, len(recs)), rng.randint(0, 5)))
    opts = {"clean_period": rng.choice([1, 3, 10, 100_000])}
    fast, fast_states, took = _drive(True, texts, recs, cuts, **opts)
    slow, slow_states, _ = _drive(False, texts, recs, cuts, **opts)
    assert fast == slow
    assert fast_states == slow_states
    assert all(took)
    want = evaluate_set([kleene.compile(t).analyzed for t in texts],
                        EventBatch.from_records(recs))
    assert fast == [_key(m) for m in want]


@pytest.mark.parametrize("seed", range(6))
def test_long_streams_small_chunks_and_dropped_rows(seed: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 16 events inside a push and rows dropped once older than every window."""
    monkeypatch.setattr(shared_vec, "_CHUNK_CELLS", 1)
    rng = random.Random(100 + seed)
    texts = [_query(rng, f"q{i}") for i in range(8)]
    texts = [t if "WITHIN" in t or "OR(" in t else t + " WITHIN 3 seconds" for t in texts]
    recs = _stream(rng, 2500, sources=7)
    cuts = [400, 401, 1300, 2000]
    fast, fast_states, took = _drive(True, texts, recs, cuts, clean_period=97)
    slow, slow_states, _ = _drive(False, texts, recs, cuts, clean_period=97)
    assert fast == slow
    assert fast_states == slow_states
    assert all(took)
    assert len(fast) > 100


@pytest.mark.parametrize("seed", range(15))
def test_add_and_remove_switch_between_the_paths(seed: int) -> None:
    """An AND query (the vectorized path does not take it) added then removed: the network
    runs per event meanwhile, then rebuilds its rows from the SIQs; a SEQ added later sees
    only the events after it."""
    rng = random.Random(300 + seed)
    src = " PARTITION BY src"
    texts = [_query(rng, f"q{i}", src) for i in range(4)]
    recs = _stream(rng, 120)
    cuts = [20, 40, 60, 80, 100]
    steps = {1: [("add", "NAME cnj PATTERN AND(A a, B b) PARTITION BY src WITHIN 4 seconds")],
             2: [("add", _query(rng, "late1", src))],
             3: [("remove", "cnj"), ("remove", "q0")],
             4: [("add", _query(rng, "late2", src))]}
    fast, fast_states, took = _drive(True, texts, recs, cuts, steps, clean_period=7)
    slow, slow_states, _ = _drive(False, texts, recs, cuts, steps, clean_period=7)
    assert fast == slow
    assert fast_states == slow_states
    assert took == [True, False, False, True, True, True]


def test_too_many_cells_fall_back_to_the_per_event_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the key x class budget the network runs per event, with the same matches."""
    monkeypatch.setattr(shared_vec, "_MAX_CELLS", 30)
    rng = random.Random(5)
    texts = [_query(rng, f"q{i}") for i in range(5)]
    recs = _stream(rng, 200, sources=40)
    fast, fast_states, took = _drive(True, texts, recs, [5, 100])
    slow, slow_states, _ = _drive(False, texts, recs, [5, 100])
    assert fast == slow
    assert fast_states == slow_states
    assert took == [True, False, False]


@pytest.mark.parametrize("seed", range(4))
def test_snapshot_restore_and_count_mode(seed: int) -> None:
    rng = random.Random(700 + seed)
    texts = [_query(rng, f"q{i}") for i in range(6)]
    recs = _stream(rng, 80)
    qs = kleene.compile_many(texts, plan="shared")
    whole = [_key(m) for m in qs.run(EventBatch.from_records(recs))]
    rt = qs.start()
    first = rt.push(EventBatch.from_records(recs[:35]))
    rt2 = qs.start()
    rt2.restore(rt.snapshot())
    rest = rt2.push(EventBatch.from_records(recs[35:])) + rt2.close()
    assert [_key(m) for m in first + rest] == whole
    counting = qs.start(count_only=True)
    assert len(counting.push(EventBatch.from_records(recs))) == len(whole)
    assert counting.counts == {n: sum(k[0] == n for k in whole) for n in qs.names}


@pytest.mark.parametrize("truncate", [False, True])
def test_caps_as_the_per_event_path(truncate: bool) -> None:
    texts = ["NAME s PATTERN SEQ(A a, B b) WITHIN 100 seconds",
             "NAME r PATTERN SEQ(A a, B b) WITHIN 100 seconds EMIT RECENT",
             "NAME o PATTERN OR(A a, B b)"]
    recs = [{"id": i, "type": "AAB"[i % 3], "ts": i} for i in range(30)]
    for opts in ({"max_matches_per_event": 3}, {"max_matches_per_call": 7}):
        if truncate:
            opts = {**opts, "on_cap": "truncate"}
            with pytest.warns(RuntimeWarning, match="cap was reached"):
                fast = _drive(True, texts, recs, [12], **opts)
            with pytest.warns(RuntimeWarning, match="cap was reached"):
                slow = _drive(False, texts, recs, [12], **opts)
            assert fast[:2] == slow[:2]
            assert fast[2] == [True, True]
        else:
            msgs = []
            for vec in (True, False):
                with pytest.raises(kleene.CapacityError, match="query '[so]'") as e:
                    _drive(vec, texts, recs, [12], **opts)
                msgs.append(str(e.value))
            assert msgs[0] == msgs[1]


@pytest.mark.parametrize("kind", ["SEQ", "AND"])
def test_matches_of_one_event_in_the_documented_order(kind: str) -> None:
    """docs/semantics.md §10 for four events completed by the same d1: p1 first, then p3,
    then p2 (not p1, p2, p3): (a1 b2 c1 d1) comes before (a1 b1 c2 d1)."""
    # ts  1   2   3   4   5   6
    #     a1  b1  b2  c1  c2  d1
    recs = [{"id": i, "type": i[0].upper(), "ts": t}
            for t, i in enumerate(["a1", "b1", "b2", "c1", "c2", "d1"], 1)]
    text = f"NAME q PATTERN {kind}(A a, B b, C c, D d) WITHIN 10 seconds"
    got = [tuple(m.bindings.values())
           for m in kleene.compile_many([text], plan="shared").run(EventBatch.from_records(recs))]
    assert got == [("a1", "b1", "c1", "d1"), ("a1", "b2", "c1", "d1"),
                   ("a1", "b1", "c2", "d1"), ("a1", "b2", "c2", "d1")]
    want = evaluate_set([kleene.compile(text).analyzed], EventBatch.from_records(recs))
    assert got == [tuple(m.bindings.values()) for m in want]


def test_many_classes_run_per_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``_MAX_CLASSES`` classes the network takes the per-event path, same matches."""
    monkeypatch.setattr(shared_vec, "_MAX_CLASSES", 3)
    texts = ["NAME s PATTERN SEQ(A a, B b) PARTITION BY src WITHIN 5 seconds",
             "NAME t PATTERN SEQ(C c, D d) PARTITION BY src WITHIN 5 seconds"]
    rng = random.Random(9)
    recs = _stream(rng, 60)
    fast, fast_states, took = _drive(True, texts, recs, [30])
    slow, slow_states, _ = _drive(False, texts, recs, [30])
    assert fast == slow and fast_states == slow_states
    assert took == [False, False]
    assert fast == [_key(m) for m in evaluate_set([kleene.compile(t).analyzed for t in texts],
                                                  EventBatch.from_records(recs))]
