"""The forward walk prunes by a NOT between states (``kleene.plans.chain_fwd``,
``FwdJoin._neg_setup``; docs/engine.md, "The chain plan" item 3): a NOT of one event bounded
by bound events on both sides whose predicates read single variables is decided at the step
that fixes its interval (and binds what it reads), and a failing test prunes the subtree; the
rest is tested on each complete match. Random queries (predicates on the negated event
alone, against a variable before / after the gap, lists around the gap, shared types, two
NOTs, a leading one beside): ``push_to``'s pieces and ``push`` are the
oracle's matches in order over split pushes and snapshots, with caps and without (one
walk, pruned: the caps count what it makes); caps as for ``push``; the pruning bounds the
walk's work per written match (a counting UDF). Session 12: a NOT right after a single
first state, bounded per first node by the first negating event after it; a leading NOT
over the first and the last variable, decided per first node where nothing counts the
matches before it (no caps, a block's walk)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kleene.api import analyze
from kleene.errors import CapacityError
from kleene.events import EventBatch, Match
from kleene.plans import chain, chain_fwd
from kleene.plans.chain_fwd import FwdJoin
from kleene.plans.registry import start
from kleene.testing.oracle import OracleLimitError
from kleene.testing.oracle import evaluate as oracle

from .sinks import Collect
from .test_chain_fwd import _check_cases, _key, _outcome, _records, _seq_query

NOCAP: dict[str, Any] = {"max_matches_per_event": None, "max_matches_per_call": None}
"""No cap: nothing reads the count before the NOT, the count walk prunes too."""


def _items(types: list[str], kinds: list[str], names: list[str]) -> list[str]:
    """The SEQ's items: kind ``1`` a single variable, ``+`` / ``*`` a list."""
    return [f"{t}{k} {v}[]" if k != "1" else f"{t} {v}"
            for t, k, v in zip(types, kinds, names, strict=True)]


def _neg_pred(rng: random.Random, nv: str, menu: list[tuple[float, str | None]]
              ) -> list[str]:
    """One predicate of the negated variable ``nv``: the first form of ``menu`` (an upper
    bound for a random draw, a form with ``{n}`` and ``{op}``, None where it does not apply)
    whose bound the draw is under; none past the last."""
    op = rng.choice((">", ">=", "<", "=", "!="))
    r = rng.random()
    for hi, form in menu:
        if r < hi and form:
            return [form.format(n=nv, op=op)]
    return []


def _elem_conds(rng: random.Random, names: list[str], kinds: list[str], lo: int, p: float,
                against: list[str]) -> list[str]:
    """Per-element conjuncts of the lists from state ``lo`` on, each with probability ``p``,
    against a single variable of ``against``."""
    if not against:
        return []
    return [f"{names[i]}[i].x {rng.choice(('>', '>=', '<'))} {rng.choice(against)}.x"
            for i in range(lo, len(names)) if kinds[i] != "1" and rng.random() < p]


def _pair(rng: random.Random, singles: list[str]) -> list[str]:
    """Sometimes a conjunct between two single variables."""
    if len(singles) >= 2 and rng.random() < 0.3:
        a, b = rng.sample(singles, 2)
        return [f"{a}.x {rng.choice(('>', '<=', '!='))} {b}.x"]
    return []


def _events_for(rng: random.Random, alphabet: str, kinds: list[str]
                ) -> list[dict[str, object]]:
    """The random events of a case: fewer as it has more lists."""
    return _records(rng, alphabet, 8, (18, 14, 11)[min(sum(k != "1" for k in kinds), 2)])


def _case(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    """A random query with a NOT between two states: 3-5 variables, lists (``+`` / ``*``)
    around the gap, the NOT's predicate on the negated event alone, against a single
    variable before or after the gap (or both), sometimes over a list (not decided early);
    sometimes a second NOT or a leading one (with a window) beside it."""
    n = rng.choice((3, 3, 4, 4, 5))
    alphabet = rng.choice(("ABC", "AB", "S", "ABS", "ABN"))
    types = [rng.choice(alphabet.replace("N", "") or "A") for _ in range(n)]
    names = [f"v{i}" for i in range(n)]
    kinds = ["1"] * n
    for i in range(n):
        r = rng.random()
        if r < 0.3 and i < n - 1:
            kinds[i] = "+"
        elif r < 0.4 and i < n - 1:
            kinds[i] = "*"
    if sum(k != "1" for k in kinds) > 2:
        kinds = ["1" if k != "1" and rng.random() < 0.5 else k for k in kinds]
    items = _items(types, kinds, names)
    gap = rng.randrange(1, n)  # the NOT goes before item ``gap``
    nt = rng.choice(alphabet)
    singles = [i for i in range(n) if kinds[i] == "1"]
    before = [names[i] for i in singles if i < gap]
    after = [names[i] for i in singles if i >= gap]
    lists = [names[i] for i in range(n) if kinds[i] != "1"]
    conds = _neg_pred(rng, "n", [
        (0.2, f"{{n}}.x = {rng.randint(0, 3)}"),
        (0.45, before and f"{{n}}.x {{op}} {rng.choice(before)}.x"),
        (0.7, after and f"{{n}}.x {{op}} {rng.choice(after)}.x"),
        (0.8, before and after and f"{{n}}.x > {rng.choice(before)}.x AND "
                                   f"{{n}}.x <= {rng.choice(after)}.x"),
        (0.85, lists and f"{{n}}.x > max({rng.choice(lists)}.x)")])  # (a list: on the match)
    neg = f"NOT {nt} n"
    items.insert(gap, neg)
    r = rng.random()
    if r < 0.15 and n >= 3:  # a second NOT between states
        g2 = rng.randrange(1, len(items) - 1)
        if "NOT" not in items[g2] and "NOT" not in items[g2 - 1]:
            items.insert(g2, f"NOT {rng.choice(alphabet)} m")
            conds.append(f"m.x {rng.choice(('>', '='))} {names[singles[0]]}.x"
                         if singles else "m.x = 1")
    elif r < 0.27:
        items.insert(0, f"NOT {rng.choice(alphabet)} m")  # leading: the window's lead-in
    conds += _elem_conds(rng, names, kinds, 0, 0.5, [names[i] for i in singles])
    conds += _pair(rng, [names[i] for i in singles])
    lead = items[0].startswith("NOT") or kinds[0] == "*"  # (a NOT with nothing before it)
    q = _seq_query(rng, items, conds, (3, 9), (4, 10), 1.0 if lead else 0.5, 0.75)
    if singles and rng.random() < 0.2:
        q += f" RETURN {names[singles[0]]}.x AS x0"
    return q, _events_for(rng, alphabet, kinds)


def _split(aq: Any, recs: list[dict[str, object]], cuts: list[int], stream: bool, chunk: int,
           snap_at: int | None, opts: dict[str, Any]) -> tuple[list[Match], int]:
    """Push ``recs`` in pieces (``push_to`` into a sink when ``stream``), restoring from a
    snapshot into a new runtime (the same options) after piece ``snap_at``: the matches,
    and the largest piece."""
    rt = start(aq, plan="chain", **opts)
    sink = Collect()
    got: list[Match] = []
    bounds = list(zip([0, *cuts], [*cuts, len(recs)], strict=True))
    for n, (i, j) in enumerate(bounds):
        if j > i:
            batch = EventBatch.from_records(recs[i:j])
            if stream:
                rt.push_to(batch, sink, chunk=chunk)
            else:
                got += rt.push(batch)
        if n == snap_at:
            blob = rt.snapshot()
            rt = start(rt.compiled, plan="chain", **opts)
            rt.restore(blob)
    if stream:
        rt.close_to(sink, chunk=chunk)
        return sink.matches, max(map(len, sink.pieces), default=0)
    return got + rt.close(), 0


def _check_caps_or_not(make: Any, rng: random.Random, n: int, look: Any) -> int:
    """``n`` random cases of ``make(rng)``, each without caps (nothing counts the matches
    before a NOT) and with the default caps: push_to's pieces over split pushes, a snapshot
    and chunks of 1-30, and push's matches, are the oracle's in its order. ``look(fwd)``
    sees each query's forward join first. Returns the matches."""
    matches = 0
    for _ in range(n):
        q, recs = make(rng)
        aq = analyze(q)
        try:
            want = oracle(aq, EventBatch.from_records(recs))
        except OracleLimitError:
            continue
        look(start(aq, plan="chain").matcher.fwd)
        cuts = sorted(rng.sample(range(1, len(recs)), rng.randint(0, 3)))
        snap_at = rng.randrange(len(cuts) + 1) if rng.random() < 0.5 else None
        chunk = rng.randint(1, 30)
        for opts in (NOCAP, {}):
            got, big = _split(aq, recs, cuts, True, chunk, snap_at, opts)
            assert _key(got) == _key(want), f"{q} over {recs}, cuts {cuts}, {opts}"
            assert big <= chunk
            got, _ = _split(aq, recs, cuts, False, chunk, snap_at, opts)
            assert _key(got) == _key(want), f"{q} (push), {opts}"
        matches += len(want)
    return matches


class _Spy:
    """Counts the early NOT tests and their rejections (``FwdJoin._neg_pass``)."""

    def __init__(self, monkeypatch: Any) -> None:
        self.calls = self.pruned = 0
        test = FwdJoin._neg_pass

        def spy(fj: FwdJoin, *a: Any) -> bool:
            ok = test(fj, *a)
            self.calls += 1
            self.pruned += not ok
            return ok

        monkeypatch.setattr(FwdJoin, "_neg_pass", spy)


@pytest.mark.parametrize("block_min", [64, 1])
def test_a_pruning_not_equals_the_oracle_and_push_in_order(block_min: int,
                                                           monkeypatch: Any) -> None:
    """Random queries with a NOT between states: without caps (the walk prunes) and with
    them (a count-only walk counts before the NOT, as the reverse join), ``push_to``'s pieces over split
    pushes, a snapshot and chunks of 1-30, and ``push``'s matches, are the oracle's in its
    order; with ``BLOCK_MIN`` 1 every last event's matches go through a block (whose second
    walk prunes against its copy of the history)."""
    monkeypatch.setattr(chain, "BLOCK_MIN", block_min)
    spy = _Spy(monkeypatch)
    rng = random.Random(9127 + block_min)
    walked = early = late = 0

    def look(fwd: FwdJoin | None) -> None:
        nonlocal walked, early, late
        if fwd is not None:
            walked += 1
            early += fwd.neg_at is not None
            late += fwd.neg_late is not None

    matches = _check_caps_or_not(_case, rng, 260, look)
    assert walked > 150 and early > 120 and late > 20 and matches > 1500, (
        walked, early, late, matches)
    assert spy.pruned > 200 and spy.calls > spy.pruned, (spy.calls, spy.pruned)


def test_which_nots_the_walk_decides_early() -> None:
    """A NOT of one event bounded on both sides, its predicates over single variables:
    decided in the walk (at the step below the gap, or at the one binding a variable left of
    it that it reads); a leading NOT, one over a list: on the match (a NOT of a SEQ is no
    chain plan)."""
    def fwd(q: str) -> FwdJoin:
        f = start(analyze(q), plan="chain").matcher.fwd
        assert f is not None, q
        return f

    f = fwd("PATTERN SEQ(A a, B+ b[], NOT C n, D d) WHERE n.x > d.x")
    assert f.neg_at is not None and f.neg_late is None
    assert [(k, j) for k in range(3) for j in range(3) if f.neg_at[k][j]] == [
        (2, 0), (2, 1)]  # the step below the gap (before state 2), from its right side
    f = fwd("PATTERN SEQ(A a, B b, C+ c[], NOT D n, E e) WHERE n.x = b.x")
    assert f.neg_at is not None and f.neg_reads == {1}  # b's node: bound for the test
    assert [(k, j) for k in range(4) for j in range(4) if f.neg_at[k][j]] == [
        (k, j) for k in (2, 3) for j in (0, 1)]  # at b's step, below c
    for q in ("PATTERN SEQ(NOT C n, A a, B b) WITHIN 5 seconds",
              "PATTERN SEQ(A a, B+ b[], NOT C n, D d) WHERE n.x > max(b.x)"):
        f = fwd(q)
        assert f.neg_at is None and f.neg_late is not None, q
    f = fwd("PATTERN SEQ(NOT C m, A a, B+ b[], NOT C n, D d) WITHIN 5 seconds")
    assert f.neg_at is not None and f.neg_late is not None  # one of each


CAP_SHAPES = {
    "after": ("PATTERN SEQ(S a, S+ b[], NOT S n, S c) WHERE n.x > c.x AND b[i].x > a.x AND "
              "c.x < a.x WITHIN 16 seconds"),
    "before": ("PATTERN SEQ(S a, S b, S+ c[], NOT S n, S d) WHERE n.x = b.x AND "
               "c[i].x >= a.x AND d.x < a.x WITHIN 14 seconds"),
    "lists": ("PATTERN SEQ(S a, S+ b[], NOT S n, S* c[], S d) WHERE n.x > 6 AND "
              "b[i].x > a.x AND d.x < a.x WITHIN 12 seconds"),
}
"""Explosions over one type with a NOT the walk decides early: its predicate against the
variable after the gap, against one further left (decided at its step), lists on both sides
(shared types: the walk over position sequences)."""


@pytest.mark.parametrize("shape", sorted(CAP_SHAPES))
@pytest.mark.parametrize("on_cap", ["error", "truncate"])
@pytest.mark.parametrize("per_event,per_call", [
    (None, None), (60, None), (None, 900), (200, 1500), (5000, 50_000)])
def test_caps_mean_what_they_mean_for_push(on_cap: str, per_event: int | None,
                                           per_call: int | None, shape: str) -> None:
    """push_to under max_matches_per_event / max_matches_per_call, error and truncate: the
    same matches, errors and counters as push (with a cap a count-only walk counts the
    matches before the NOT, as the reverse join; without one nothing does); without caps the
    NFA's matches."""
    rng = random.Random(23)
    recs = [{"id": i, "type": "S", "ts": i, "x": rng.randint(0, 9)} for i in range(60)]
    events = EventBatch.from_records(recs)
    aq = analyze(CAP_SHAPES[shape])
    fwd = start(aq, plan="chain").matcher.fwd
    assert fwd is not None and fwd.neg_at is not None and fwd.neg_late is None
    opts = {"max_matches_per_event": per_event, "max_matches_per_call": per_call,
            "on_cap": on_cap}
    plain = _outcome(start(aq, plan="chain", **opts), events, stream=False)
    streamed = _outcome(start(aq, plan="chain", **opts), events, stream=True)
    assert streamed == plain
    if per_event is None and per_call is None:
        nfa = start(aq, plan="nfa", **NOCAP)
        assert plain[0] == _key(nfa.push(events) + nfa.close())
        assert plain[1] > 1000


def test_pruning_bounds_the_walks_work_per_written_match() -> None:
    """``SEQ(A a, B+ b[], NOT N n, C c)``: 14 ``b`` before an ``N``, one after it, then ``c``:
    2^14 lists end before the ``N`` (rejected), 2^14 with the last ``b`` (kept) -- and in
    another partition 16 ``b`` and an ``N`` with no ``b`` after it (2^16 rejected, none
    kept). A counting UDF in the per-element conjunct counts the walk's steps into ``b``:
    pruned they are one per written match (per walk: the count and the block's), with or
    without a cap: the caps count what the pruned walk makes (session 11; before, a cap
    made a count-only walk take every rejected list too, 3 x 2^15 steps and more)."""
    steps = [0]

    def tick(x: int, y: int) -> bool:
        steps[0] += 1
        return x >= y

    q = ("PATTERN SEQ(A a, B+ b[], NOT N n, C c) WHERE tick(b[i].x, a.x) PARTITION BY k")
    aq = analyze(q, udfs={"tick": tick})
    recs: list[dict[str, object]] = []
    for key, nb, tail in (("u", 14, 1), ("v", 16, 0)):
        recs.append({"id": f"a{key}", "type": "A", "ts": 0, "x": 0, "k": key})
        recs += [{"id": f"b{key}{i}", "type": "B", "ts": 1 + i, "x": 1, "k": key}
                 for i in range(nb)]
        recs.append({"id": f"n{key}", "type": "N", "ts": 40, "x": 0, "k": key})
        recs += [{"id": f"t{key}{i}", "type": "B", "ts": 41, "x": 1, "k": key}
                 for i in range(tail)]
        recs.append({"id": f"c{key}", "type": "C", "ts": 50, "x": 0, "k": key})
    events = EventBatch.from_records(recs)
    work = {}
    for name, opts in (("pruned", NOCAP), ("counted", {})):
        rt = start(aq, plan="chain", **opts)
        assert rt.matcher.fwd is not None and rt.matcher.fwd.neg_at is not None
        steps[0] = 0
        sink = Collect()
        n = rt.push_to(events, sink, chunk=1000) + rt.close_to(sink, chunk=1000)
        assert n == len(sink.matches) == 2 ** 14
        work[name] = steps[0]
    # a kept match: its 1-15 elements' steps (each step pushes once); the rejected lists:
    # one step at each b right of the gap's first node (pruned there), 14 + 16
    assert work["pruned"] <= 2 * 2 ** 14 + 200, work
    # with the default caps the same walk (it counted before the NOT: every list of the
    # 2^15 + 2^16 rejected and kept was walked)
    assert work["counted"] == work["pruned"], work


def test_the_caps_count_the_matches_the_pruning_walk_makes_as_the_nfa() -> None:
    """The NOT above rejects 2^14 + 2^16 lists, 2^14 pass: a per-event cap between the two
    counts (2^14 + 10) lets the matches through on both plans, as the NFA decides such a NOT
    in its automaton and counts its runs' matches (the chain plan raised CapacityError:
    it counted before the NOT); one below 2^14 stops both."""
    q = "PATTERN SEQ(A a, B+ b[], NOT N n, C c) WHERE b[i].x >= a.x PARTITION BY k"
    aq = analyze(q)
    recs: list[dict[str, object]] = []
    for key, nb, tail in (("u", 14, 1), ("v", 16, 0)):
        recs.append({"id": f"a{key}", "type": "A", "ts": 0, "x": 0, "k": key})
        recs += [{"id": f"b{key}{i}", "type": "B", "ts": 1 + i, "x": 1, "k": key}
                 for i in range(nb)]
        recs.append({"id": f"n{key}", "type": "N", "ts": 40, "x": 0, "k": key})
        recs += [{"id": f"t{key}{i}", "type": "B", "ts": 41, "x": 1, "k": key}
                 for i in range(tail)]
        recs.append({"id": f"c{key}", "type": "C", "ts": 50, "x": 0, "k": key})
    events = EventBatch.from_records(recs)
    caps = {"max_matches_per_event": 2 ** 14 + 10, "max_matches_per_call": None}
    want = _key(start(aq, plan="nfa", **caps).push(events))
    assert len(want) == 2 ** 14
    assert _key(start(aq, plan="chain", **caps).push(events)) == want
    sink = Collect()
    start(aq, plan="chain", **caps).push_to(events, sink, chunk=4096)
    assert _key(sink.matches) == want
    low = {"max_matches_per_event": 2 ** 14 - 1, "max_matches_per_call": None}
    for plan in ("nfa", "chain"):
        with pytest.raises(CapacityError):
            start(aq, plan=plan, **low).push(events)


def _case_first(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    """A random query with a NOT right after a single first state (or, the first a ``*``
    list, after the single second: the walk without the list has it first): 2-4 variables
    after it, ``+`` / ``*`` lists anywhere after the gap (a ``*`` last too), the NOT's
    predicate on the negated event alone, against the first, the last, both, a middle
    single (decided at a step, as before) or a list (on the match); per-element conjuncts
    against the first or a middle single; shared types."""
    star0 = rng.random() < 0.2
    n = rng.choice((2, 3, 3, 4)) + star0
    alphabet = rng.choice(("ABC", "AB", "S", "ABN", "SN"))
    pos = alphabet.replace("N", "")
    types = [rng.choice(pos) for _ in range(n)]
    names = [f"v{i}" for i in range(n)]
    head = 1 + star0  # the states before the gap
    kinds = ["*"] * star0 + ["1"] + [rng.choice("1+*+") for _ in range(n - head)]
    if kinds[-1] == "+" or (kinds[-1] == "*" and rng.random() < 0.5):
        kinds[-1] = "1"
    if sum(k != "1" for k in kinds) > 2:
        kinds = [k if i < head or k == "1" or rng.random() < 0.5 else "1"
                 for i, k in enumerate(kinds)]
    if all(k == "*" for k in kinds[head:]):  # (a NOT needs a positive event after it)
        kinds[-1] = "1"
    items = _items(types, kinds, names)
    items.insert(head, f"NOT {rng.choice(alphabet)} n")
    singles = [names[i] for i in range(n) if kinds[i] == "1"]
    first = names[head - 1]
    lastv = names[n - 1] if kinds[n - 1] == "1" else None
    mids = [v for v in singles if v not in (first, lastv)]
    lists = [names[i] for i in range(n) if kinds[i] != "1"]
    conds = _neg_pred(rng, "n", [
        (0.15, f"{{n}}.x = {rng.randint(0, 3)}"),
        (0.5, f"{{n}}.x {{op}} {first}.x"),
        (0.65, lastv and f"{{n}}.x {{op}} {lastv}.x"),
        (0.75, lastv and f"{{n}}.x > {first}.x AND {{n}}.x <= {lastv}.x"),
        (0.85, mids and f"{{n}}.x {{op}} {rng.choice(mids)}.x"),
        (0.9, lists and f"{{n}}.x > max({rng.choice(lists)}.x)")])
    conds += _elem_conds(rng, names, kinds, head, 0.6, [first, first, *mids])
    conds += _pair(rng, singles)
    q = _seq_query(rng, items, conds, (3, 9), (4, 10), 1.0 if star0 else 0.5, 0.75)
    if rng.random() < 0.2:
        q += f" RETURN {first}.x AS x0"
    return q, _events_for(rng, alphabet, kinds)


class _FirstSpy:
    """Counts the second events a first node's limit rejects (``chain_fwd._FirstNeg.ok``)
    and the first nodes it skips (``FwdJoin._first_open``)."""

    def __init__(self, monkeypatch: Any) -> None:
        self.rejected = self.skipped = 0
        ok, open_ = chain_fwd._FirstNeg.ok, FwdJoin._first_open

        def spy_ok(lim: Any, y: int) -> bool:
            r = ok(lim, y)
            self.rejected += not r
            return r

        def spy_open(fj: FwdJoin, *a: Any) -> bool:
            r = open_(fj, *a)
            self.skipped += not r
            return r

        monkeypatch.setattr(chain_fwd._FirstNeg, "ok", spy_ok)
        monkeypatch.setattr(FwdJoin, "_first_open", spy_open)


@pytest.mark.parametrize("block_min", [64, 1])
def test_a_not_after_the_first_state_equals_the_oracle_in_order(block_min: int,
                                                                monkeypatch: Any) -> None:
    """Random queries with a NOT right after a single first state (or the single second
    after a ``*`` first): the walk bounds each first node's second event by the first
    negating event after it and skips the first nodes it leaves no match. push_to's pieces
    over split pushes, a snapshot and chunks of 1-30 are the oracle's matches in its order,
    and push's; with ``BLOCK_MIN`` 1 every last event's matches go through a block (its
    walk bounds them against its copy of the history)."""
    monkeypatch.setattr(chain, "BLOCK_MIN", block_min)
    spy = _FirstSpy(monkeypatch)
    rng = random.Random(6151 + block_min)
    shapes = {"first": 0, "alt": 0, "step": 0, "late": 0}

    def look(q: str, rt: Any) -> None:
        f = rt.matcher.fwd
        if f is None:
            return
        shapes["first"] += bool(f.neg0)
        shapes["alt"] += f.alt is not None and bool(f.alt.neg0)
        shapes["step"] += f.neg_at is not None and any(x for row in f.neg_at for x in row)
        shapes["late"] += f.neg_late is not None

    matches, _columns, big = _check_cases(_case_first, rng, 260, look)
    assert matches > 4000 and big < 15, (matches, big)
    assert shapes["first"] > 120 and shapes["alt"] > 15 and shapes["step"] > 20 and (
        shapes["late"] > 10), shapes
    assert spy.rejected > 2000 and spy.skipped > 800, (spy.rejected, spy.skipped)


def _first_events() -> list[dict[str, object]]:
    """``a``, one ``b``, an ``N``, 13 ``b``, ``c`` in partition ``u`` (the lists that hold
    the first ``b`` are kept, 2^13; those of the 13 after the ``N`` rejected, 2^13 - 1) and
    ``a``, an ``N``, 16 ``b``, ``c`` in ``v`` (2^16 - 1 lists, all rejected)::

        u:  a  b  N  b b ... b (13)  c
        v:  a  N  b b ... b (16)  c
    """
    return (_timeline("u", [("a", "A", 1, 0), ("p", "B", 1, 1), ("n", "N", 1, 10),
                            ("b", "B", 13, 11), ("c", "C", 1, 50)])
            + _timeline("v", [("a", "A", 1, 0), ("n", "N", 1, 10), ("b", "B", 16, 11),
                              ("c", "C", 1, 50)]))


def _timeline(key: str, runs: list[tuple[str, str, int, int]]) -> list[dict[str, object]]:
    """Events of partition ``key``: per run (id prefix, type, how many, first second), one a
    second, ``x`` 1 for ``B``, else 0."""
    return [{"id": f"{p}{key}{i}", "type": t, "ts": ts + i, "x": int(t == "B"), "k": key}
            for p, t, count, ts in runs for i in range(count)]


def _walked(rt: Any, events: EventBatch, stream: bool, steps: list[int]
            ) -> tuple[list[Match], int]:
    """The matches of ``events`` pushed at once (``push_to`` into a sink when ``stream``)
    and the steps a counting UDF counted meanwhile (``steps[0]``, reset first)."""
    steps[0] = 0
    if stream:
        sink = Collect()
        rt.push_to(events, sink, chunk=1000)
        rt.close_to(sink, chunk=1000)
        return sink.matches, steps[0]
    got = rt.push(events) + rt.close()
    return got, steps[0]


def test_a_not_after_the_first_state_bounds_the_walks_work_and_counts_as_the_nfa() -> None:
    """``SEQ(A a, NOT N n, B+ b[], C c)`` over :func:`_first_events`: a counting UDF in the
    per-element conjunct counts the walk's steps into ``b``. The list's first element, the
    NOT's upper end, is bound last, so before a rejected list was walked to its end (2^13 +
    2^16 steps and more); now each first node's second event is bounded by the first
    negating event after it: ``v``'s first node is skipped, and ``u``'s walk makes at most
    two steps per written match (a list without the first ``b`` leads to one with it).
    The caps count what the pruned walk makes, as the NFA, which decides the NOT in its
    automaton, counts its runs' matches: the same work with the default caps and with a
    per-event cap between the two counts (2^13 kept, 2^14 + 2^16 - 2 before the NOT), which
    lets both plans write the matches; one below 2^13 stops both (``on_cap="error"``)."""
    steps = [0]

    def tick(x: int, y: int) -> bool:
        steps[0] += 1
        return x >= y

    q = "PATTERN SEQ(A a, NOT N n, B+ b[], C c) WHERE tick(b[i].x, a.x) PARTITION BY k"
    aq = analyze(q, udfs={"tick": tick})
    plain = analyze(q.replace("tick(b[i].x, a.x)", "b[i].x >= a.x"))
    events = EventBatch.from_records(_first_events())
    between = {"max_matches_per_event": 2 ** 13 + 5, "max_matches_per_call": None}
    nfa = start(plain, plan="nfa", **between)
    want = _key(nfa.push(events) + nfa.close())  # (too many for the brute-force oracle)
    assert len(want) == 2 ** 13
    work = {}
    for name, opts in (("nocap", NOCAP), ("caps", {}), ("between", between)):
        for stream in (True, False):
            rt = start(aq, plan="chain", **opts)
            assert rt.matcher.fwd is not None and rt.matcher.fwd.neg0
            got, work[name, stream] = _walked(rt, events, stream, steps)
            assert _key(got) == want, (name, stream)
    # push_to walks twice (the count, then the block's walk), push once
    assert work["nocap", True] <= 2 * (2 * 2 ** 13) + 100, work
    assert work["nocap", False] <= 2 * 2 ** 13 + 100, work
    for stream in (True, False):
        assert work["caps", stream] == work["between", stream] == work["nocap", stream], work
    low = {"max_matches_per_event": 2 ** 13 - 1, "max_matches_per_call": None}
    for plan in ("nfa", "chain"):
        with pytest.raises(CapacityError):
            start(plain, plan=plan, **low).push(events)
    # truncated past the cap: the event's matches go to the reverse join, which stops one
    # past the cap counting its candidates before the NOT (docs/engine.md), so the chain
    # keeps other matches than the NFA (its runs' first): true ones, push_to as push
    every = set(map(repr, _key(start(plain, plan="nfa", **NOCAP).push(events))))
    cut = [_outcome(start(plain, plan="chain", on_cap="truncate", **low), events, stream)
           for stream in (False, True)]
    assert cut[0] == cut[1] and set(map(repr, cut[0][0])) < every and cut[0][2] >= 1, (
        cut[0][1:])


def _case_lead(rng: random.Random) -> tuple[str, list[dict[str, object]]]:
    """A random query with a leading NOT (a time or count window): 2-4 variables, ``+`` /
    ``*`` lists anywhere (a ``*`` first or last too), its predicate on the negated event
    alone, against the first, the last (both bound before a first node's walk), a middle
    single or a list (on the match); sometimes a NOT between states beside it."""
    n = rng.choice((2, 3, 3, 4))
    alphabet = rng.choice(("ABC", "AB", "S", "ABN", "SN"))
    pos = alphabet.replace("N", "")
    types = [rng.choice(pos) for _ in range(n)]
    names = [f"v{i}" for i in range(n)]
    kinds = [rng.choice("11+*") for _ in range(n)]
    if sum(k != "1" for k in kinds) > 2 or all(k == "*" for k in kinds):
        kinds = [k if k == "1" or rng.random() < 0.4 else "1" for k in kinds]
        kinds[rng.randrange(n)] = "1"
    items = _items(types, kinds, names)
    singles = [names[i] for i in range(n) if kinds[i] == "1"]
    ends = [names[i] for i in (0, n - 1) if kinds[i] == "1"]
    lists = [names[i] for i in range(n) if kinds[i] != "1"]
    conds = _neg_pred(rng, "m", [
        (0.2, f"{{n}}.x = {rng.randint(0, 3)}"),
        (0.7, ends and f"{{n}}.x {{op}} {rng.choice(ends)}.x"),
        (0.85, singles and f"{{n}}.x {{op}} {rng.choice(singles)}.x"),
        (1.0, lists and f"{{n}}.x > max({rng.choice(lists)}.x)")])
    if rng.random() < 0.25 and n >= 3:  # a NOT between states beside it
        g = rng.randrange(1, n)
        items.insert(g, f"NOT {rng.choice(alphabet)} n")
        conds.append(f"n.x {rng.choice(('>', '='))} {rng.choice(singles or ['x'])}.x"
                     if singles else "n.x = 1")
    items.insert(0, f"NOT {rng.choice(alphabet)} m")
    conds += _elem_conds(rng, names, kinds, 0, 0.5, singles)
    q = _seq_query(rng, items, conds, (2, 8), (3, 9), 0.6)
    if "WITHIN" not in q:
        q += f" WITHIN {rng.randint(2, 8)} seconds"
    return q, _events_for(rng, alphabet, kinds)


@pytest.mark.parametrize("block_min", [64, 1])
def test_a_leading_not_equals_the_oracle_without_caps(block_min: int,
                                                       monkeypatch: Any) -> None:
    """Random queries with a leading NOT: without caps (the walk skips the first nodes whose
    lead-in, from the last event's time less the window to the first event, holds a
    negating event; nothing counts the matches before it) and with the default caps (the
    count walk counts them, as the NFA, which tests such a NOT on complete matches; a
    block's walk skips them), push_to's pieces over split pushes, a snapshot and chunks of
    1-30, and push's matches, are the oracle's in its order."""
    monkeypatch.setattr(chain, "BLOCK_MIN", block_min)
    rng = random.Random(7229 + block_min)
    skipped = [0]
    test = FwdJoin._lead_ok

    def spy(*a: Any) -> bool:
        ok = test(*a)
        skipped[0] += not ok
        return ok

    monkeypatch.setattr(FwdJoin, "_lead_ok", staticmethod(spy))
    lead = alone = 0

    def look(fwd: FwdJoin | None) -> None:
        nonlocal lead, alone
        if fwd is not None and fwd.leads():
            lead += 1
            alone += fwd.leads_all()

    matches = _check_caps_or_not(_case_lead, rng, 220, look)
    assert lead > 120 and alone > 120 and matches > 5000, (lead, alone, matches)
    assert skipped[0] > 600, skipped


def test_a_leading_not_is_decided_per_first_node_where_nothing_counts_before_it() -> None:
    """``SEQ(NOT N m, A a, B+ b[], C c) WITHIN 100 seconds``: in ``u`` an ``N`` before ``a``
    (its 2^16 - 1 lists rejected), in ``v`` none (2^13 - 1 kept). Without caps the walk
    skips ``u``'s first node (its lead-in, from the last event's time less the window to
    ``a``, holds the ``N``): one step into ``b`` per written partial list, none for ``u``
    (before, every rejected list was walked and tested). With a cap the count walk makes
    every list, as the NFA (which tests a leading NOT on complete matches, after counting
    them) -- so a per-event cap between the two counts stops both plans -- and only the
    block's walk skips ``u``."""
    steps = [0]

    def tick(x: int, y: int) -> bool:
        steps[0] += 1
        return x >= y

    q = ("PATTERN SEQ(NOT N m, A a, B+ b[], C c) WHERE tick(b[i].x, a.x) PARTITION BY k "
         "WITHIN 100 seconds")
    aq = analyze(q, udfs={"tick": tick})
    plain = analyze(q.replace("tick(b[i].x, a.x)", "b[i].x >= a.x"))
    events = EventBatch.from_records(
        _timeline("u", [("m", "N", 1, 0), ("a", "A", 1, 1), ("b", "B", 16, 2), ("c", "C", 1, 40)])
        + _timeline("v", [("a", "A", 1, 1), ("b", "B", 13, 2), ("c", "C", 1, 40)]))
    nfa = start(plain, plan="nfa", **NOCAP)
    want = _key(nfa.push(events) + nfa.close())  # (too many for the brute-force oracle)
    assert len(want) == 2 ** 13 - 1
    work = {}
    for name, opts in (("nocap", NOCAP), ("caps", {})):
        for stream in (True, False):
            rt = start(aq, plan="chain", **opts)
            assert rt.matcher.fwd is not None and rt.matcher.fwd.leads_all()
            got, work[name, stream] = _walked(rt, events, stream, steps)
            assert _key(got) == want, (name, stream)
    # without caps: each partial list once (the count walk and the block's, push_to)
    assert work["nocap", False] < 2 ** 13 + 50, work
    assert work["nocap", True] < 2 * 2 ** 13 + 50, work
    # with the default caps the count walk makes u's 2^16 - 1 lists too (as the NFA counts)
    # and the block's walk skips them
    assert work["caps", False] > 2 ** 16
    assert work["caps", True] == work["caps", False] + work["nocap", False], work
    between = {"max_matches_per_event": 2 ** 13 + 5, "max_matches_per_call": None}
    for plan in ("nfa", "chain"):
        with pytest.raises(CapacityError):
            start(plain, plan=plan, **between).push(events)
