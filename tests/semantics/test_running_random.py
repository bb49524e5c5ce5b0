"""Running aggregates (docs/semantics.md 21): the plans that evaluate ``agg(v[..i].x)`` (nfa,
union, pda) agree with the oracle, match for match and in order, on random patterns with a
Kleene variable (or a list variable in a repeated group), random running conditions (every
aggregate, NULLs in the data, compared with a constant, the current element, the element one
or two before or a later variable), every selection strategy and, at random, AFTER MATCH
SKIP; every other plan refuses the query."""

from __future__ import annotations

import random

import pytest

import kleene
from kleene.errors import QueryValidationError
from kleene.events import EventBatch

RUNS = ("nfa", "union", "pda")
REFUSE = ("chain", "tasks", "tree")


def _condition(rng: random.Random, v: str, later: str | None) -> str:
    agg = rng.choice(["sum", "avg", "min", "max", "count"])
    run = f"{agg}({v}[..i].x{rng.choice(['', ' * 2', ' - 1'])})"
    other = rng.choice(["const", "const", "cur", "prev", "prev2"] + (["later"] if later else []))
    op = rng.choice(["<", "<=", ">", ">=", "!="])
    if other == "const":
        return f"{run} {op} {rng.randint(0, 8)}"
    if other == "cur":
        return f"{v}[i].x {op} {run}"
    if other == "prev":
        return f"{run} {op} {v}[i-1].x + {rng.randint(0, 3)}"
    if other == "prev2":  # LAST(A.x, 2) in the dialect: NULL on the first two elements
        return f"({v}[i-2].x IS NULL OR {run} {op} {v}[i-2].x)"
    return f"{run} {op} {later}.x"


def _query(rng: random.Random) -> str:
    q = rng.choice(["+", "*", "{1,3}", "{2,3}"]) + rng.choice(["", "", "?"])
    shape = rng.choice(["ab", "xab", "xa", "or", "group"])
    if shape == "ab":
        pat, v, later = f"SEQ(ANY{q} a[], ANY b)", "a", "b"
    elif shape == "xab":
        pat, v, later = f"SEQ(ANY x, ANY{q} a[], ANY b)", "a", "b"
    elif shape == "xa":
        pat, v, later = f"SEQ(ANY x, ANY{q} a[])", "a", None
    elif shape == "group":  # a list variable inside a repeated group (the pda plan)
        pat, v, later = f"SEQ(SEQ(ANY a, ANY d){q}, ANY b)", "a", "b"
    else:
        pat, v, later = f"OR(SEQ(ANY{q} a[], ANY b), ANY c)", "a", "b"
    conds = [_condition(rng, v, later) for _ in range(rng.randint(1, 2))]
    if shape == "or":
        conds.append(f"c.x > {rng.randint(2, 5)}")
    if rng.random() < 0.3 and "x," in pat:
        conds.append(f"x.x {rng.choice(['<', '>'])} {rng.randint(1, 4)}")
    strategy = rng.choice(["strict-contiguity", "strict-contiguity", "skip-till-next-match",
                           "skip-till-any-match"])
    tail = ""
    if strategy == "strict-contiguity" and rng.random() < 0.5:
        tail = " AFTER MATCH SKIP " + rng.choice(["TO NEXT ROW", "PAST LAST ROW"])
    else:
        pat = pat.replace("?", "")  # reluctance only has a meaning with AFTER MATCH SKIP
    return (f"PATTERN {pat} WHERE {' AND '.join(conds)} PARTITION BY k "
            f"USING {strategy}{tail}")


def _stream(rng: random.Random, n: int) -> EventBatch:
    recs = [{"id": f"e{i}", "type": "E", "ts": i * 1_000_000, "k": rng.choice(["p", "q"]),
             "x": rng.choice([None, 0, 1, 2, 3, 4, 5])} for i in range(n)]
    return EventBatch.from_records(recs)


@pytest.mark.parametrize("seed", range(100))
def test_plans_agree_with_the_oracle(seed: int) -> None:
    rng = random.Random(seed)
    q = _query(rng)
    try:
        kleene.compile(q, engine="oracle")
    except QueryValidationError:
        pytest.skip("the drawn query is invalid (e.g. a pattern that can match no rows)")
    events = _stream(rng, 10)
    want = [(m.bindings, m.start, m.end) for m in kleene.compile(q, engine="oracle").run(events)]
    ran = 0
    for plan in RUNS:
        try:
            compiled = kleene.compile(q, plan=plan)
        except QueryValidationError:
            continue  # the plan does not support the pattern's shape; it says why
        ran += 1
        got = [(m.bindings, m.start, m.end) for m in compiled.run(events)]
        assert got == want, (plan, q)
    assert ran > 0, ("no plan runs", q)
    for plan in REFUSE:
        with pytest.raises(QueryValidationError, match="running aggregate|AFTER MATCH"):
            kleene.compile(q, plan=plan)
