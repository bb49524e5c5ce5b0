"""AFTER MATCH SKIP: every plan that runs it agrees with the oracle, match for match and in
order, on random SEQ / OR / Kleene patterns (greedy and reluctant) with random conditions over
random two-partition streams, for the four skip modes (docs/semantics.md 19). The oracle
enumerates mappings in preference order; the runtime ranks candidates by a preference key:
two independent readings of the same definition."""

from __future__ import annotations

import random

import pytest

import kleene
from kleene.errors import InputError, QueryValidationError
from kleene.events import EventBatch

VARS = "abcdef"


def _pattern(rng: random.Random, names: list[str], depth: int) -> str:
    kind = rng.choice(["ev", "ev", "ev", "kl", "seq", "or"] if depth < 2 else ["ev", "kl"])
    if kind == "ev" or not names:
        return f"ANY {names.pop(0)}"
    if kind == "kl":
        q = rng.choice(["+", "*", "{1,2}", "{2}", "{0,2}"]) + rng.choice(["", "?"])
        return f"ANY{q} {names.pop(0)}[]"
    n = rng.randint(2, 3)
    items = [_pattern(rng, names, depth + 1) for _ in range(n) if names]
    if len(items) < 2:
        return items[0] if items else f"ANY {names.pop(0)}"
    return ("SEQ(" if kind == "seq" else "OR(") + ", ".join(items) + ")"


def _query(rng: random.Random) -> tuple[str, list[str]]:
    names = list(VARS)
    pat = _pattern(rng, names, 0)
    if not pat.startswith("SEQ("):
        pat = f"SEQ({pat}, {_pattern(rng, names, 1)})" if names else pat
    used = [v for v in VARS if v not in names]
    lists = {v for v in used if f" {v}[]" in pat}
    conds = []
    for v in rng.sample(used, k=min(len(used), rng.randint(0, 3))):
        if v in lists and rng.random() < 0.5:
            conds.append(f"{v}[i].x > {v}[i-1].x")
        else:
            conds.append(f"{v}.x {rng.choice(['<', '>', '<=', '!='])} {rng.randint(1, 4)}")
    where = (" WHERE " + " AND ".join(conds)) if conds else ""
    mode = rng.choice(["TO NEXT ROW", "PAST LAST ROW", "TO FIRST", "TO LAST"])
    if mode in ("TO FIRST", "TO LAST"):
        mode += " " + rng.choice(used)
    window = rng.choice(["", " WITHIN 4 seconds"])
    return (f"PATTERN {pat}{where} PARTITION BY k{window} USING strict-contiguity "
            f"AFTER MATCH SKIP {mode}"), used


def _stream(rng: random.Random, n: int) -> EventBatch:
    recs = [{"id": f"e{i}", "type": "E", "ts": i * 1_000_000 + rng.choice([0, 0, 500_000]),
             "k": rng.choice(["p", "q"]), "x": rng.randint(0, 5)} for i in range(n)]
    recs.sort(key=lambda r: r["ts"])
    return EventBatch.from_records(recs)


def _outcome(q: str, events: EventBatch, **kw: str) -> object:
    try:
        found = kleene.compile(q, **kw).run(events)
    except InputError as exc:
        return ("InputError", str(exc).split(":")[0])
    return [(m.bindings, m.start, m.end) for m in found]


@pytest.mark.parametrize("seed", range(150))
def test_plans_agree_with_the_oracle(seed: int) -> None:
    rng = random.Random(seed)
    q, _used = _query(rng)
    try:
        kleene.compile(q, engine="oracle")
    except QueryValidationError:
        pytest.skip("the drawn query is invalid (e.g. a pattern that can match no rows)")
    events = _stream(rng, 14)
    want = _outcome(q, events, engine="oracle")
    ran = 0
    for plan in ("nfa", "union", "pda"):
        try:
            kleene.compile(q, plan=plan)
        except QueryValidationError:
            continue  # the plan does not support the pattern's shape; it says why
        ran += 1
        assert _outcome(q, events, plan=plan) == want, (plan, q)
    assert ran > 0, ("no plan runs", q)  # pda runs every SEQ / OR / Kleene shape drawn here


def _rows_query(rng: random.Random) -> str:
    """A random AFTER MATCH SKIP query with EMIT ROWS (random EXCLUDE) and random RETURN
    items: running and final() references, aggregates, classifier(), match_number()."""
    q, used = _query(rng)
    lists = [v for v in used if f" {v}[]" in q]
    items = ["classifier() AS cl", "match_number() * 100 AS n"]
    for k, v in enumerate(rng.sample(used, k=min(len(used), 3))):
        choices = ([f"{v}[last].x", f"{v}[1].x", f"sum({v}.x)", f"count({v})", f"max({v}.x)"]
                   if v in lists else
                   [f"{v}.x", f"{v}.x * 2 + 1", f"count({v})", f"nullif({v}.x, 2)"])
        ref = rng.choice(choices)
        if rng.random() < 0.4:
            ref = f"final({ref})"
        items.append(f"{ref} AS r{k}")
    if lists and rng.random() < 0.5:
        items.append(f"{lists[0]}.x AS xs")
    excl = rng.sample(used, k=rng.randint(0, min(2, len(used) - 1)))
    rows = "EMIT ROWS" + (" EXCLUDE " + ", ".join(excl) if excl else "")
    head, after = q.split(" AFTER MATCH SKIP ")
    return f"{head} {rows} AFTER MATCH SKIP {after} RETURN {', '.join(items)}"


def _rows_outcome(q: str, events: EventBatch, **kw: str) -> object:
    try:
        found = kleene.compile(q, **kw).run(events)
    except InputError as exc:
        return ("InputError", str(exc).split(":")[0])
    return [(m.bindings, m.start, m.end, dict(m.values)) for m in found]


@pytest.mark.parametrize("seed", range(120))
def test_rows_agree_with_the_oracle(seed: int) -> None:
    """EMIT ROWS: every plan that runs the query gives the oracle's rows and values."""
    rng = random.Random(10_000 + seed)
    q = _rows_query(rng)
    try:
        kleene.compile(q, engine="oracle")
    except QueryValidationError:
        pytest.skip("the drawn query is invalid (e.g. a pattern that can match no rows)")
    events = _stream(rng, 12)
    want = _rows_outcome(q, events, engine="oracle")
    ran = 0
    for plan in ("nfa", "union", "pda"):
        try:
            kleene.compile(q, plan=plan)
        except QueryValidationError:
            continue
        ran += 1
        assert _rows_outcome(q, events, plan=plan) == want, (plan, q)
    assert ran > 0, ("no plan runs", q)
