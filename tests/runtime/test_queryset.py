"""Query sets (kleene.compile_many): each query's matches equal the oracle's for the query run
alone, in the set's documented order (docs/semantics.md, "Query sets"), for the shared network
and for queries on their own plans; add / remove at runtime; snapshot / restore."""

from __future__ import annotations

import random
from typing import Any

import pytest

import kleene
from kleene.errors import QueryValidationError
from kleene.events import EventBatch, Match
from kleene.testing.oracle import evaluate_set

TYPES = "ABCD"


def _query(rng: random.Random, name: str, shareable: bool) -> str:
    kind = rng.choice(["SEQ", "SEQ", "AND", "OR"])
    n = rng.randint(1, 3 if kind != "OR" else 3)
    types = rng.sample(TYPES, n)
    body = ", ".join(f"{t} {t.lower()}" for t in types)
    pattern = f"{kind}({body})"
    where = ""
    key = rng.choice(["PARTITION BY src", "", "WHERE [src]"])
    if not shareable:
        extra = rng.choice(["kleene", "pred", "strict"])
        if extra == "kleene" and kind == "SEQ":
            t0 = types[-1]
            pattern = f"SEQ({body.rsplit(', ', 1)[0] + ', ' if n > 1 else ''}{t0}+ {t0.lower()}[])"
        elif extra == "pred":
            where = f"{types[0].lower()}.x > 1"
        else:
            kind = "SEQ"
            pattern = f"SEQ({body})"
            key += " USING strict-contiguity" if key != "WHERE [src]" else ""
    if where:
        key = (f"WHERE {where} AND [src]" if key == "WHERE [src]" else
               f"WHERE {where} " + key)
    window = f" WITHIN {rng.randint(1, 6)} seconds"
    emit = rng.choice(["", " EMIT RECENT"])
    text = f"NAME {name} PATTERN {pattern} {key}"
    if "USING" in text:
        head, using = text.split(" USING ")
        text = f"{head}{window} USING {using}{emit}"
    else:
        text += window + emit
    return text


def _stream(rng: random.Random, n: int) -> list[dict[str, Any]]:
    ts = 0
    out = []
    for i in range(n):
        ts += rng.choice([0, 1, 1, 2])
        out.append({"id": i, "type": rng.choice(TYPES), "ts": ts, "src": rng.randint(1, 2),
                    "x": rng.randint(0, 3)})
    return out


def _expected(queries: list[kleene.CompiledQuery], recs: list[dict[str, Any]],
              spans: list[tuple[int, int]] | None = None) -> list[Match]:
    """The oracle's query-set rule: each query alone over the events it saw, merged by the
    completing event's position, then the query's place in the set, then its own order."""
    return evaluate_set([q.analyzed for q in queries], EventBatch.from_records(recs), spans)


def _keys(ms: list[Match]) -> list[Any]:
    return [m.key() for m in ms]


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("plan", ["shared", "separate"])
def test_set_equals_each_query_alone(seed: int, plan: str) -> None:
    rng = random.Random(seed)
    texts = [_query(rng, f"q{i}", shareable=rng.random() < 0.75) for i in range(5)]
    qs = kleene.compile_many(texts, plan=plan)
    recs = _stream(rng, 28)
    got = qs.run(EventBatch.from_records(recs))
    assert _keys(got) == _keys(_expected(list(qs.queries), recs))


def test_shared_network_takes_the_supported_queries() -> None:
    qs = kleene.compile_many([
        "NAME s PATTERN SEQ(A a, B b, C c) PARTITION BY src WITHIN 5 seconds",
        "NAME c PATTERN AND(A a, B b) WHERE [src] WITHIN 5 seconds EMIT RECENT",
        "NAME d PATTERN OR(A a, D d)",
        "NAME k PATTERN SEQ(A a, B+ b[]) WITHIN 5 seconds"])
    text = qs.explain()
    assert "s: shared network (SEQ of A, B, C, key ['src'], EMIT ALL)" in text
    assert "c: shared network (AND of A, B, key ['src'], EMIT RECENT)" in text
    assert "d: shared network (OR of A, D" in text
    assert "k: own plan nfa (Kleene or negated variables)" in text


def test_order_across_queries_by_completing_event_then_set_order() -> None:
    # ts   1    2    3
    #      a1   b1   c1
    qs = kleene.compile_many(["NAME second PATTERN SEQ(B b, C c) WITHIN 5 seconds",
                              "NAME first PATTERN SEQ(A a, B b) WITHIN 5 seconds",
                              "NAME third PATTERN SEQ(A a, C c) WITHIN 5 seconds"])
    recs = [{"id": "a1", "type": "A", "ts": 1}, {"id": "b1", "type": "B", "ts": 2},
            {"id": "c1", "type": "C", "ts": 3}]
    got = [(m.query, tuple(m.bindings.values())) for m in qs.run(EventBatch.from_records(recs))]
    assert got == [("first", ("a1", "b1")), ("second", ("b1", "c1")), ("third", ("a1", "c1"))]


def test_duplicate_names_are_an_error() -> None:
    with pytest.raises(QueryValidationError, match="two queries are named 'x'"):
        kleene.compile_many(["NAME x PATTERN A a", "NAME x PATTERN B b"])
    rt = kleene.compile_many(["NAME x PATTERN A a"]).start()
    with pytest.raises(QueryValidationError, match="already running"):
        rt.add("NAME x PATTERN B b")
    with pytest.raises(QueryValidationError, match="no query named 'y'"):
        rt.remove("y")


@pytest.mark.parametrize("seed", range(25))
def test_add_and_remove_while_streaming(seed: int) -> None:
    """An added query sees the events pushed after it; a removed one emits nothing more."""
    rng = random.Random(1000 + seed)
    recs = _stream(rng, 36)
    chunks = [recs[i:i + 6] for i in range(0, len(recs), 6)]
    base = [_query(rng, f"q{i}", shareable=rng.random() < 0.8) for i in range(3)]
    qs = kleene.compile_many(base, plan="shared")
    rt = qs.start(clean_period=5)
    live: dict[str, int] = {n: 0 for n in qs.names}
    spans: dict[str, tuple[int, int]] = {}
    texts = dict(zip(qs.names, base, strict=True))
    got: list[Match] = []
    at = 0
    for ci, chunk in enumerate(chunks):
        if ci in (1, 3):
            name = f"added{ci}"
            texts[name] = _query(rng, name, shareable=rng.random() < 0.8)
            rt.add(texts[name])
            live[name] = at
        if ci == 4:
            victim = rng.choice(sorted(live))
            rt.remove(victim)
            spans[victim] = (live.pop(victim), at)
        got += rt.push(EventBatch.from_records(chunk))
        at += len(chunk)
    got += rt.close()
    for n, lo in live.items():
        spans[n] = (lo, len(recs))
    order = list(texts)  # set order = order of addition
    queries = [kleene.compile(texts[n]) for n in order]
    exp = _expected(queries, recs, [spans[n] for n in order])
    assert _keys(got) == _keys(exp)


def test_snapshot_restore_continues_the_same_matches() -> None:
    rng = random.Random(7)
    recs = _stream(rng, 40)
    texts = ["NAME s PATTERN SEQ(A a, B b, C c) PARTITION BY src WITHIN 6 seconds",
             "NAME r PATTERN SEQ(B b, D d) PARTITION BY src WITHIN 4 seconds EMIT RECENT",
             "NAME c PATTERN AND(A a, C c) PARTITION BY src WITHIN 3 seconds",
             "NAME k PATTERN SEQ(A a, C+ c[]) PARTITION BY src WITHIN 3 seconds"]
    qs = kleene.compile_many(texts)
    whole = qs.run(EventBatch.from_records(recs))
    rt = qs.start()
    first = rt.push(EventBatch.from_records(recs[:20]))
    blob = rt.snapshot()
    rt2 = qs.start()
    rt2.restore(blob)
    rest = rt2.push(EventBatch.from_records(recs[20:])) + rt2.close()
    assert _keys(first + rest) == _keys(whole)
    assert rt2.counts == {n: sum(m.query == n for m in whole) for n in qs.names}


def test_cleaning_keeps_the_network_bounded() -> None:
    qs = kleene.compile_many(["NAME s PATTERN SEQ(A a, B b) PARTITION BY src WITHIN 2 seconds",
                              "NAME t PATTERN SEQ(B b, A a) PARTITION BY src WITHIN 2 seconds"])
    rt = qs.start(clean_period=10)
    recs = [{"id": i, "type": "AB"[i % 2], "ts": i, "src": (i // 2) % 3} for i in range(200)]
    n = 0
    for i in range(0, 200, 20):
        n += len(rt.push(EventBatch.from_records(recs[i:i + 20])))
    assert rt.stored_instances() <= 3 * 2 + 20  # one window's worth, not the whole stream
    assert n == len(qs.run(EventBatch.from_records(recs)))
    assert n > 0


@pytest.mark.parametrize("seed", range(6))
def test_count_only_counts_the_same_matches_per_query(seed: int) -> None:
    rng = random.Random(500 + seed)
    texts = [_query(rng, f"q{i}", shareable=rng.random() < 0.8) for i in range(5)]
    recs = _stream(rng, 30)
    qs = kleene.compile_many(texts, plan="shared")
    full = qs.run(EventBatch.from_records(recs))
    rt = qs.start(count_only=True)
    counted = rt.push(EventBatch.from_records(recs)) + rt.close()
    assert len(counted) == len(full)
    assert rt.counts == {n: sum(m.query == n for m in full) for n in qs.names}


@pytest.mark.parametrize("plan", ["shared", "separate"])
def test_late_events_as_each_query_alone(plan: str) -> None:
    """Out-of-order pushes: an event behind the newest earlier one is late (counted, not
    matched), per event, exactly as for one query's Runtime."""
    texts = ["NAME s PATTERN SEQ(A a, B b) PARTITION BY src WITHIN 5 seconds",
             "NAME o PATTERN OR(A a, C c)"]
    chunks = [[{"id": 0, "type": "A", "ts": 1, "src": 1}, {"id": 1, "type": "A", "ts": 3, "src": 1},
               {"id": 2, "type": "B", "ts": 2, "src": 1}],
              [{"id": 3, "type": "C", "ts": 2, "src": 1}, {"id": 4, "type": "B", "ts": 4, "src": 1}]]
    rt = kleene.compile_many(texts, plan=plan).start()
    got = []
    for c in chunks:
        got += rt.push(EventBatch.from_records(c, sort=False))
    got += rt.close()
    alone = []
    for text in texts:
        one = kleene.compile(text).start()
        for c in chunks:
            alone += one.push(EventBatch.from_records(c, sort=False))
        alone += one.close()
        assert one.counters.late_events == 2
    assert sorted(_keys(got)) == sorted(_keys(alone))
    assert [tuple(m.bindings.values()) for m in got] == [(0,), (1,), (0, 4), (1, 4)]


def test_cap_on_matches_per_event_in_the_network() -> None:
    qs = kleene.compile_many(["NAME s PATTERN SEQ(A a, B b) WITHIN 100 seconds",
                              "NAME t PATTERN SEQ(A a, C c) WITHIN 100 seconds"], plan="shared")
    recs = [{"id": i, "type": "A", "ts": i} for i in range(5)] + [{"id": 9, "type": "B", "ts": 9}]
    with pytest.raises(kleene.CapacityError, match="max_matches_per_event=3"):
        qs.start(max_matches_per_event=3).push(EventBatch.from_records(recs))
    rt = qs.start(max_matches_per_event=3, on_cap="truncate")
    assert len(rt.push(EventBatch.from_records(recs))) == 3
