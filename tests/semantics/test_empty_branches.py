"""OR / ANY items that bind no event (docs/semantics.md 2, 3): an item that can match empty (a
``*`` repetition, or a SEQ of them) is a branch like any other, and the list variables of a
taken branch that bound nothing are ``[]``, never unbound. Conformance cases on every backend
and plan, then a random differential of every plan against the oracle over patterns with OR,
ANY and repetitions that may repeat zero times (``KLEENE_DIFF_CASES`` seeds, 120 by default;
``KLEENE_DIFF_SECONDS`` caps a long run)."""

from __future__ import annotations

import os
import random
import time

import pytest

import kleene
from kleene.backends import BackendFn
from kleene.errors import InputError, QueryValidationError
from kleene.events import EventBatch
from kleene.plans import plan_names
from kleene.testing.oracle import OracleLimitError
from kleene.testing.timeline import Case, case

CASES = [
    case("OR: the empty branch is taken",
         "PATTERN SEQ(OR(A a, B* b[]), C c)",
         """
         ts  1   2
             a1  c1
         """,
         ["a=a1 c=c1", "b=[] c=c1"]),
    case("OR of any type with an empty branch (every assignment)",
         "PATTERN SEQ(OR(ANY a, ANY* b[]), ANY c)",
         """
         ts  1   2
             x1  x2
         """,
         ["b=[] c=x1", "b=[x1] c=x2", "a=x1 c=x2", "b=[] c=x2"]),
    case("OR: two empty branches are two matches",
         "PATTERN SEQ(OR(A* a[], B* b[]), C c)",
         """
         ts  1
             c1
         """,
         ["b=[] c=c1", "a=[] c=c1"]),
    case("OR: an empty repetition in the taken branch is []",
         "PATTERN SEQ(OR(SEQ(A* a[], B b), D d), C c)",
         """
         ts  1   2   3
             b1  d1  c1
         """,
         ["a=[] b=b1 c=c1", "d=d1 c=c1"]),
    case("OR: an empty repetition in a taken branch of any type is []",
         "PATTERN OR(SEQ(ANY* a[], ANY b, ANY c), ANY d)",
         """
         ts  1   2
             x1  x2
         """,
         ["d=x1", "a=[] b=x1 c=x2", "d=x2"]),
    case("OR: the empty branch after the last event",
         "PATTERN SEQ(A a, OR(B b, C* c[]))",
         """
         ts  1   2
             a1  b1
         """,
         ["a=a1 c=[]", "a=a1 b=b1"]),
    case("ANY(k) counts an item that binds no event",
         "PATTERN SEQ(ANY(2, A a, B* b[], C c), D d)",
         """
         ts  1   2   3
             a1  c1  d1
         """,
         ["a=a1 b=[] d=d1", "a=a1 c=c1 d=d1", "b=[] c=c1 d=d1"]),
    case("AFTER MATCH: the preferred mapping may take the empty branch",
         "PATTERN SEQ(OR(ANY a, ANY* b[]), ANY c) USING strict-contiguity "
         "AFTER MATCH SKIP PAST LAST ROW",
         """
         ts  1   2   3
             x1  x2  x3
         """,
         ["a=x1 c=x2", "b=[] c=x3"]),
    # semantics 2, "one match per mapping": the oracle once gave each way of forming a
    # mapping as its own identical match (10 here, 5 distinct), and pda refused the shape
    case("a repeated group: two empty choices of an OR are one match",
         "PATTERN (SEQ(OR(ANY* b[], ANY* d[]), ANY c))+",
         """
         ts  1   2
             x1  x2
         """,
         ["b=[] d=[] c=[x1]", "b=[] d=[] c=[x1 x2]", "b=[] d=[x1] c=[x2]",
          "b=[x1] d=[] c=[x2]", "b=[] d=[] c=[x2]"]),
    case("a repeated group: one match however the repetitions split its events",
         "PATTERN (SEQ(ANY+ b[]))+",
         """
         ts  1   2
             x1  x2
         """,
         ["b=[x1]", "b=[x1 x2]", "b=[x2]"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_empty_branches(backend: BackendFn, c: Case) -> None:
    c.check(backend)


# --- random differential --------------------------------------------------------------------

RANDOM_CASES = int(os.environ.get("KLEENE_DIFF_CASES", "120"))
RANDOM_SECONDS = float(os.environ.get("KLEENE_DIFF_SECONDS", "inf"))
"""Long run (as test_differential.py): stop drawing seeds after this many seconds."""
TYPES = ("A", "B", "C")


def _item(rng: random.Random, names: list[str], depth: int, lists: set[str],
          in_rep: bool) -> str:
    kinds = ["ev", "ev", "kl", "kl"] + (["seq", "or", "or", "any", "and", "rep"]
                                        if depth < 2 else [])
    kind = rng.choice(kinds)
    t = rng.choice(TYPES + ("ANY",))
    if kind == "ev" or len(names) < 3:
        v = names.pop(0)
        if in_rep:
            lists.add(v)
        return f"{t} {v}"
    if kind == "kl":
        v = names.pop(0)
        lists.add(v)
        return f"{t}{rng.choice(['*', '*', '+', '{0,2}', '{1,2}'])} {v}[]"
    if kind == "rep":
        body = _item(rng, names, depth + 1, lists, True)
        other = _item(rng, names, depth + 1, lists, True)
        return f"(SEQ({body}, {other})){rng.choice(['*', '+', '{0,2}', '{1,2}'])}"
    items = [_item(rng, names, depth + 1, lists, in_rep) for _ in range(rng.randint(2, 3))]
    if kind == "any":
        return f"ANY({rng.randint(1, len(items) - 1)}, {', '.join(items)})"
    if kind == "seq" and not in_rep and rng.random() < 0.3 and len(names) > 1:
        items.insert(1, f"NOT({rng.choice(TYPES)} {names.pop(0)})")
    return {"seq": "SEQ", "or": "OR", "and": "AND"}[kind] + "(" + ", ".join(items) + ")"


def _query(rng: random.Random) -> str:
    names = [f"v{i}" for i in range(24)]
    lists: set[str] = set()
    if rng.random() < 0.3:
        pat = _item(rng, names, 0, lists, False)
    else:
        pat = (f"SEQ(OR({_item(rng, names, 1, lists, False)}, "
               f"{_item(rng, names, 1, lists, False)}), {_item(rng, names, 1, lists, False)})")
    used = [n for n in (f"v{i}" for i in range(24)) if n not in names]
    conds = []
    for v in rng.sample(used, k=min(len(used), rng.randint(0, 2))):
        if v in lists:
            conds.append(rng.choice([f"count({v}) {rng.choice(['=', '>', '<'])} 1",
                                     f"{v}[i].x >= {v}[i-1].x"]))
        else:
            conds.append(f"{v}.x {rng.choice(['<', '>', '!='])} {rng.randint(0, 3)}")
    where = (" WHERE " + " AND ".join(conds)) if conds else ""
    window = rng.choice(["", "", " WITHIN 3 seconds", " WITHIN 3 events"])
    strategy = rng.choice(["", "", " USING strict-contiguity", " USING partition-contiguity"])
    part = " PARTITION BY k" if rng.random() < 0.3 else ""
    after = ""
    if strategy == " USING strict-contiguity" and rng.random() < 0.5:
        after = " AFTER MATCH SKIP " + rng.choice(["TO NEXT ROW", "PAST LAST ROW"])
    return f"PATTERN {pat}{where}{part}{window}{strategy}{after}"


def _stream(rng: random.Random) -> EventBatch:
    n = rng.randint(2, 6)
    recs = [{"id": f"e{i}", "type": rng.choice(TYPES),
             "ts": (i + rng.choice([0, 0, 1])) * 1_000_000,
             "k": rng.choice(["p", "q"]), "x": rng.randint(0, 3)} for i in range(n)]
    recs.sort(key=lambda r: r["ts"])
    return EventBatch.from_records(recs)


def _outcome(q: str, events: EventBatch, **kw: str) -> object:
    try:
        found = kleene.compile(q, **kw).run(events)
    except InputError as exc:
        return ("InputError", str(exc).split(":")[0])
    return [(m.bindings, m.start, m.end, m.values) for m in found]


def test_plans_agree_with_the_oracle_on_empty_branches() -> None:
    """Every plan that runs a drawn query equals the oracle; pda runs most of them."""
    bad: list[str] = []
    ran = dict.fromkeys(plan_names(), 0)
    valid = drawn = 0
    started = time.perf_counter()
    for seed in range(RANDOM_CASES):
        if time.perf_counter() - started > RANDOM_SECONDS:
            break
        drawn += 1
        rng = random.Random(seed)
        q = _query(rng)
        streams = [_stream(rng) for _ in range(3)]
        try:
            wants = [_outcome(q, events, engine="oracle") for events in streams]
        except QueryValidationError:
            continue  # e.g. a pattern that can match without any event
        except OracleLimitError:
            continue  # too many partial matches for the brute-force reference
        valid += 1
        for events, want in zip(streams, wants, strict=True):
            for plan in ran:
                try:
                    kleene.compile(q, plan=plan)
                except QueryValidationError:
                    continue  # the plan does not support the shape; it says why
                ran[plan] += 1
                got = _outcome(q, events, plan=plan)
                if got != want:
                    bad.append(f"{plan} seed {seed}: {q}\n  oracle: {want}\n  {plan}: {got}")
    assert not bad, f"{len(bad)} disagreements:\n" + "\n".join(bad[:8])
    assert valid > drawn // 3 and ran["pda"] > valid, (valid, ran)
