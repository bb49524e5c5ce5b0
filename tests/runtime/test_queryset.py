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


def _alone(text: str, recs: list[dict[str, Any]], **opts: Any) -> list[Any]:
    return _keys(kleene.compile(text, **opts).run(EventBatch.from_records(recs)))


def test_cap_on_matches_per_event_is_per_query_in_the_network() -> None:
    """max_matches_per_event bounds each query's matches of one event, as if it ran alone:
    two queries completing 5 matches each at b9 are under a cap of 5; under 3, each keeps its
    first 3 (truncate) exactly as alone."""
    texts = ["NAME s PATTERN SEQ(A a, B b) WITHIN 100 seconds",
             "NAME t PATTERN SEQ(A x, B y) WITHIN 100 seconds",
             "NAME u PATTERN SEQ(A a, C c) WITHIN 100 seconds"]
    qs = kleene.compile_many(texts, plan="shared")
    assert qs.uses_network()
    recs = [{"id": i, "type": "A", "ts": i} for i in range(5)] + [{"id": 9, "type": "B", "ts": 9}]
    assert len(qs.start(max_matches_per_event=5).push(EventBatch.from_records(recs))) == 10
    with pytest.raises(kleene.CapacityError, match="query 's'.*max_matches_per_event=3"):
        qs.start(max_matches_per_event=3).push(EventBatch.from_records(recs))
    rt = qs.start(max_matches_per_event=3, on_cap="truncate")
    with pytest.warns(RuntimeWarning, match="cap was reached"):
        got = rt.push(EventBatch.from_records(recs))
    with pytest.warns(RuntimeWarning, match="cap was reached"):
        want = sorted(_alone(texts[0], recs, max_matches_per_event=3, on_cap="truncate")
                      + _alone(texts[1], recs, max_matches_per_event=3, on_cap="truncate"))
    assert sorted(_keys(got)) == want
    assert len(got) == 6


def test_cap_on_matches_per_call_is_per_query_in_the_network() -> None:
    """max_matches_per_call bounds each query's matches of one push (the network is the
    query's plan for that call); truncate keeps the first ones, as alone (one partition)."""
    texts = ["NAME s PATTERN SEQ(A a, B b) WITHIN 100 seconds",
             "NAME o PATTERN OR(A a, B b)"]
    qs = kleene.compile_many(texts, plan="shared")
    recs = [{"id": i, "type": "AB"[i % 2], "ts": i} for i in range(8)]
    assert len(qs.start(max_matches_per_call=10).push(EventBatch.from_records(recs))) == 18
    with pytest.raises(kleene.CapacityError, match="query 'o'.*max_matches_per_call=6"):
        qs.start(max_matches_per_call=6).push(EventBatch.from_records(recs))
    rt = qs.start(max_matches_per_call=6, on_cap="truncate")
    with pytest.warns(RuntimeWarning, match="cap was reached"):
        got = rt.push(EventBatch.from_records(recs))
    with pytest.warns(RuntimeWarning, match="cap was reached"):
        want = _alone(texts[0], recs, max_matches_per_call=6, on_cap="truncate")
    assert [k for k in _keys(got) if k[0] == "s"] == want
    assert sum(m.query == "o" for m in got) == 6
    # the budget is per call: the next push has a fresh one
    more = rt.push(EventBatch.from_records([{"id": 20, "type": "B", "ts": 20}]))
    assert [m.query for m in more] == ["s"] * 4 + ["o"]


def test_conditions_are_virtual_classes_shared_across_queries() -> None:
    """One-variable WHERE conjuncts are evaluated in the network: the events of a type that
    satisfy them form one ECQ, shared by the queries that say the same thing about their
    own variable (whatever its name); a plain variable reads the type's own ECQ."""
    texts = ["NAME p PATTERN SEQ(A a, B b) WHERE a.x > 1 AND [src] WITHIN 9 seconds",
             "NAME q PATTERN SEQ(A z, C c) WHERE z.x > 1 AND [src] WITHIN 9 seconds",
             "NAME r PATTERN SEQ(A a, C c) WHERE c.x IN (0, 2) AND [src] WITHIN 9 seconds",
             "NAME s PATTERN AND(A a, B b) WHERE b.x < 3 AND [src] WITHIN 9 seconds"]
    qs = kleene.compile_many(texts, plan="shared")
    assert "p: shared network (SEQ of A, B, key ['src'], EMIT ALL, conditions on a)" \
        in qs.explain()
    rt = qs.start()
    recs = _stream(random.Random(3), 40)
    got = rt.push(EventBatch.from_records(recs)) + rt.close()
    assert _keys(got) == _keys(_expected(list(qs.queries), recs))
    assert sum(q.query != "p" for q in got) > 0 and any(m.query == "p" for m in got)
    (net,) = rt.networks.values()
    assert sorted(net.ecqs) == sorted([
        "A", "B", "C", next(n for n in net.ecqs if n.startswith("A WHERE")),
        next(n for n in net.ecqs if n.startswith("B WHERE")),
        next(n for n in net.ecqs if n.startswith("C WHERE"))])
    assert sum(n.startswith("A WHERE") for n in net.ecqs) == 1  # p's a and q's z share it
    assert "A" in net.ecqs  # r and s read every A


@pytest.mark.parametrize("seed", range(12))
def test_conditions_arrow_cannot_evaluate_run_per_row(seed: int) -> None:
    """A UDF (or anything Arrow cannot evaluate) in a one-variable condition is checked per
    row by the compiled function; the set equals the oracle."""
    rng = random.Random(900 + seed)
    udfs = {"odd": lambda v: None if v is None else v % 2 == 1}
    texts = ["NAME u PATTERN SEQ(A a, B b) WHERE odd(a.x) AND [src] WITHIN 4 seconds",
             "NAME v PATTERN SEQ(A a, B b) WHERE odd(a.x) AND b.x >= 1 PARTITION BY src "
             "WITHIN 4 seconds EMIT RECENT",
             "NAME w PATTERN OR(A a, C c) WHERE a.x % 2 = 0 AND c.x != 1"]
    qs = kleene.compile_many(texts, plan="shared", udfs=udfs)
    assert all(not isinstance(s, str) for s in qs.specs())
    recs = _stream(rng, 30)
    got = qs.run(EventBatch.from_records(recs))
    assert _keys(got) == _keys(_expected(list(qs.queries), recs))


def test_conditions_over_two_variables_fall_back_with_the_reason() -> None:
    qs = kleene.compile_many(["NAME x PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 3 seconds",
                              "NAME y PATTERN SEQ(A a, B b) WITHIN 3 seconds"], plan="shared")
    assert "x: own plan nfa (WHERE conditions over two or more variables)" in qs.explain()


# ---------------------------------------------------------------------------- nested queries
def _producer(rng: random.Random, name: str) -> str:
    kind = rng.choice(["SEQ", "AND", "OR"])
    types = rng.sample("ABC", rng.randint(1, 2))
    body = ", ".join(f"{t} {t.lower()}" for t in types)
    cond = rng.choice(["", f"{types[0].lower()}.x > 0 AND "])
    key = rng.choice(["WHERE [src]", "PARTITION BY src"])
    where = f"WHERE {cond}[src]" if key == "WHERE [src]" else \
        (f"WHERE {cond[:-5]} PARTITION BY src" if cond else "PARTITION BY src")
    emit = rng.choice(["", " EMIT RECENT"])
    return f"NAME {name} PATTERN {kind}({body}) {where} WITHIN {rng.randint(1, 4)} seconds{emit}"


def _consumer(rng: random.Random, name: str, producers: list[str]) -> str:
    first = rng.choice(producers)
    second = rng.choice(producers + ["D", "A"])
    if second == first:
        items = f"{first} x, {first} y" if rng.random() < 0.5 else f"{first}+ x[]"
    else:
        items = f"{first} x, {second} y"
    pattern = rng.choice(["SEQ", "AND"]) if "[]" not in items else "SEQ"
    if "[]" in items:
        items += ", D d"
    key = rng.choice(["PARTITION BY src", ""])
    return f"NAME {name} PATTERN {pattern}({items}) {key} WITHIN {rng.randint(2, 6)} seconds"


@pytest.mark.parametrize("seed", range(30))
def test_nested_queries_equal_the_oracle(seed: int) -> None:
    """Consumers read producers' matches as events (docs/semantics.md §17): the whole set, fed
    in chunks, equals oracle.evaluate_set (each consumer over the input and its producers'
    derived events, placed right after their completing events)."""
    rng = random.Random(4000 + seed)
    prods = [_producer(rng, f"p{i}") for i in range(2)]
    cons = [_consumer(rng, f"c{i}", ["p0", "p1"]) for i in range(2)]
    texts = prods + cons
    rng.shuffle(texts)
    extra = _query(rng, "other", shareable=True)
    qs = kleene.compile_many(texts + [extra])
    recs = [dict(r, type=rng.choice("ABCD")) for r in _stream(rng, 30)]
    rt = qs.start(clean_period=rng.choice([1, 7, 100]))
    got: list[Match] = []
    for i in range(0, len(recs), 7):
        got += rt.push(EventBatch.from_records(recs[i:i + 7]))
    got += rt.close()
    want = _expected(list(qs.queries), recs)
    assert _keys(got) == _keys(want)
    NESTED_SEEN.append(sum(m.query.startswith("c") for m in want))


NESTED_SEEN: list[int] = []
"""Consumer matches per seed of the test above (the next test checks the draw is not empty)."""


def test_nested_draws_make_consumer_matches() -> None:
    if len(NESTED_SEEN) < 30:
        pytest.skip("runs after test_nested_queries_equal_the_oracle (all seeds)")
    assert sum(n > 0 for n in NESTED_SEEN) >= 10


def test_nested_consumer_added_and_producer_removed_while_running() -> None:
    prod = "NAME ab PATTERN SEQ(A a, B b) WHERE [src] WITHIN 5 seconds"
    cons = "NAME twice PATTERN SEQ(ab x, ab y) PARTITION BY src WITHIN 9 seconds"
    rng = random.Random(11)
    recs = [dict(r, type=rng.choice("AB")) for r in _stream(rng, 40)]
    qs = kleene.compile_many([prod, "NAME o PATTERN OR(A a, C c)"])
    rt = qs.start()
    got = rt.push(EventBatch.from_records(recs[:10]))
    rt.add(cons)
    got += rt.push(EventBatch.from_records(recs[10:30]))
    rt.remove("ab")
    got += rt.push(EventBatch.from_records(recs[30:])) + rt.close()
    queries = [kleene.compile(t) for t in (prod, "NAME o PATTERN OR(A a, C c)", cons)]
    want = _expected(queries, recs, [(0, 30), (0, 40), (10, 40)])
    assert _keys(got) == _keys(want)
    assert any(m.query == "twice" for m in got)


@pytest.mark.parametrize(("texts", "message"), [
    (["NAME p PATTERN SEQ(p a, B b) WITHIN 3 seconds"], "'p' reads its own matches"),
    (["NAME p PATTERN SEQ(q a, B b) WITHIN 3 seconds",
      "NAME q PATTERN SEQ(p a, B b) WITHIN 3 seconds"], "read each other's matches"),
    (["NAME p PATTERN SEQ(A a, B b) WITHIN 3 seconds",
      "NAME q PATTERN SEQ(p x, B b) WITHIN 3 seconds",
      "NAME r PATTERN SEQ(q x, B b) WITHIN 3 seconds"], "one level of nesting"),
])
def test_nested_cycles_and_depth_are_errors(texts: list[str], message: str) -> None:
    with pytest.raises(QueryValidationError, match=message):
        kleene.compile_many(texts)


def test_nested_producer_must_be_in_the_network() -> None:
    texts = ["NAME p PATTERN SEQ(A a, B+ b[]) WITHIN 3 seconds",
             "NAME q PATTERN SEQ(p x, C c) WITHIN 3 seconds"]
    with pytest.raises(QueryValidationError, match="'q' reads the matches of 'p', which the "
                       "shared network does not evaluate \\(Kleene"):
        kleene.compile_many(texts).start()
    ok = ["NAME p PATTERN SEQ(A a, B b) WITHIN 3 seconds", texts[1]]
    with pytest.raises(QueryValidationError, match="plan 'separate'"):
        kleene.compile_many(ok, plan="separate").start()
    with pytest.raises(QueryValidationError, match="count_only"):
        kleene.compile_many(ok).start(count_only=True)
    rt = kleene.compile_many(["NAME q PATTERN SEQ(p x, C c) WITHIN 3 seconds",
                              "NAME o PATTERN A a"]).start()
    with pytest.raises(QueryValidationError, match="'p' is an event type of the running "
                       "query 'q'"):
        rt.add(ok[0])
    assert rt.names == ["q", "o"]


def test_nested_snapshot_restore_continues_the_same_matches() -> None:
    texts = ["NAME ab PATTERN SEQ(A a, B b) WHERE [src] WITHIN 5 seconds",
             "NAME twice PATTERN SEQ(ab x, ab y) PARTITION BY src WITHIN 9 seconds",
             "NAME abc PATTERN SEQ(ab x, C c) PARTITION BY src WITHIN 3 seconds"]
    rng = random.Random(12)
    recs = [dict(r, type=rng.choice("ABC")) for r in _stream(rng, 40)]
    qs = kleene.compile_many(texts)
    whole = qs.run(EventBatch.from_records(recs))
    assert {m.query for m in whole} == {"ab", "twice", "abc"}
    rt = qs.start()
    first = rt.push(EventBatch.from_records(recs[:20]))
    rt2 = qs.start()
    rt2.restore(rt.snapshot())
    rest = rt2.push(EventBatch.from_records(recs[20:])) + rt2.close()
    assert _keys(first + rest) == _keys(whole)


def test_nested_example_of_the_semantics_by_hand() -> None:
    """docs/semantics.md §17's nested example, written by hand: the oracle and the set agree
    with it (labels, the place of derived events, the output order)."""
    texts = ["NAME ab PATTERN SEQ(A a, B b) WHERE [src] WITHIN 10 seconds",
             "NAME twice PATTERN SEQ(ab x, ab y) PARTITION BY src WITHIN 10 seconds"]
    recs = [{"id": n, "type": n[0].upper(), "ts": i + 1, "src": 1}
            for i, n in enumerate(["a1", "b2", "a3", "b4"])]
    by_hand = [("ab", {"a": "a1", "b": "b2"}), ("ab", {"a": "a1", "b": "b4"}),
               ("ab", {"a": "a3", "b": "b4"}), ("twice", {"x": "ab#1", "y": "ab#2"}),
               ("twice", {"x": "ab#1", "y": "ab#3"}), ("twice", {"x": "ab#2", "y": "ab#3"})]
    qs = kleene.compile_many(texts)
    oracle = _expected(list(qs.queries), recs)
    assert [(m.query, dict(m.bindings)) for m in oracle] == by_hand
    assert [(m.start, m.end) for m in oracle][3:] == [(2_000_000, 4_000_000)] * 2 + [
        (4_000_000, 4_000_000)]
    got = qs.run(EventBatch.from_records(recs))
    assert _keys(got) == _keys(oracle)
