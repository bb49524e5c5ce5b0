"""Engine faults of issue 17 (items 7, 8, 13, 14, 15): each reproducer from the issue, on the
automaton engine (every registered plan that accepts it) and on the oracle, which must agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kleene.api import analyze
from kleene.errors import QueryValidationError
from kleene.events import EventBatch, Match
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.timeline import PlanBackend, plan_backends

SMALL = "ts,type,x,s\n1,A,1,foo\n2,B,2,bar\n3,C,3,baz\n4,A,0,qux\n5,B,5,quux\n"
INT64_MAX = 2 ** 63 - 1


def kleene(*args: str) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "kleene", *args], capture_output=True,
                          timeout=300, env={**os.environ, "PYTHONWARNINGS": "error"})
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def matches(out: str) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in out.splitlines() if ln.strip()]


def _key(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [(dict(m.bindings), m.start, m.end, dict(m.values)) for m in ms]


def agree(query: str, stream: EventBatch) -> list[tuple[Any, ...]]:
    """The oracle's matches, after checking that every plan accepting ``query`` gives them."""
    aq = analyze(query)
    want = _key(oracle(aq, stream))
    ran = 0
    for name in plan_backends():
        pb = PlanBackend(name.partition("/")[2])
        if pb.reason(aq) is not None:
            continue
        assert _key(pb(aq, stream)) == want, f"{name} differs from the oracle on {query}"
        ran += 1
    assert ran, f"no plan accepts {query}"
    return want


# --- item 7: int64 overflow in the vectorized path ------------------------------------------

def test_item7_overflowing_product_matches_nothing(tmp_path: Path) -> None:
    p = tmp_path / "small.csv"
    p.write_text(SMALL)
    code, out, err = kleene("run", "PATTERN A a WHERE a.x * 9223372036854775807 * 4 < 0",
                            "--input", str(p), "-q")
    assert code == 0, err
    assert matches(out) == []
    code, out, err = kleene("run", "PATTERN A a WHERE a.x * 9223372036854775807 * 4 > 0 "
                            "RETURN a.x * 9223372036854775807 * 4 AS v", "--input", str(p), "-q")
    assert code == 0, err
    assert [m["values"]["v"] for m in matches(out)] == [4 * INT64_MAX]


def test_item7_int64_max_plus_one(tmp_path: Path) -> None:
    p = tmp_path / "big.csv"
    p.write_text(f"ts,type,i\n1,A,{INT64_MAX}\n2,A,5\n3,A,{-INT64_MAX - 1}\n")
    code, out, err = kleene("run", "PATTERN A a WHERE a.i + 1 > a.i", "--input", str(p), "-q")
    assert code == 0, err
    assert [m["match"]["a"] for m in matches(out)] == [0, 1, 2]
    code, out, err = kleene("run", "PATTERN A a WHERE a.i - 1 < a.i AND -a.i != 0 "
                            "AND abs(a.i) > 0", "--input", str(p), "-q")
    assert code == 0, err
    assert [m["match"]["a"] for m in matches(out)] == [0, 1, 2]


def test_item7_literal_beyond_int64(tmp_path: Path) -> None:
    p = tmp_path / "small.csv"
    p.write_text(SMALL)
    code, out, err = kleene("run", "PATTERN A a WHERE a.x > 99999999999999999999",
                            "--input", str(p), "-q")
    assert code == 0, err
    assert matches(out) == []
    code, out, err = kleene("run", "PATTERN A a WHERE a.x < 99999999999999999999",
                            "--input", str(p), "-q")
    assert code == 0, err
    assert [m["match"]["a"] for m in matches(out)] == [0, 3]


@pytest.mark.parametrize("where", [
    "a.i * 3 > 0", "a.i + a.i < 0", "a.i - 9223372036854775807 < -1", "-a.i > 0",
    "a.i > 9007199254740992.0", "a.i = 9007199254740993.0", "a.i / 3 > 3074457345618258602",
    "a.i BETWEEN 9007199254740992.0 AND 9007199254740993.5", "a.i IN (9007199254740992.0)",
    "a.i * 2.0 > 1.8446744073709552e19", "a.i > 99999999999999999999 OR a.i < 0",
])
def test_item7_big_integers_agree_with_the_oracle(where: str) -> None:
    vals = [INT64_MAX, -INT64_MAX - 1, 2 ** 53 + 1, 2 ** 53, 5, None, -(2 ** 53) - 1]
    stream = EventBatch.from_records([{"ts": k, "type": "A", "i": v}
                                      for k, v in enumerate(vals, 1)])
    assert stream.column("i").type == pa.int64()
    agree(f"PATTERN A a WHERE {where}", stream)


# --- item 8: list-valued attributes ------------------------------------------------------------

def test_item8_list_values_have_no_order(tmp_path: Path) -> None:
    p = tmp_path / "l.jsonl"
    p.write_text('{"ts":1,"type":"A","x":[1]}\n{"ts":2,"type":"B","x":[2]}\n')
    code, out, err = kleene("run", "PATTERN SEQ(A a, B b) WHERE b.x > a.x", "--input", str(p),
                            "-q")
    assert code == 0, err
    assert matches(out) == []
    code, out, err = kleene("run", "PATTERN SEQ(A a, B b) RETURN a.x AS ax", "--input", str(p),
                            "-q")
    assert code == 0, err
    assert [m["values"]["ax"] for m in matches(out)] == [[1]]


@pytest.mark.parametrize("query", [
    "PATTERN SEQ(A a, B b) WHERE b.x > a.x",
    "PATTERN SEQ(A a, B b) WHERE b.x <= a.x OR a.x >= b.x",
    "PATTERN SEQ(A a, B b) WHERE a.x = b.x",
    "PATTERN SEQ(A a, B b) WHERE NOT (a.x < b.x)",
    "PATTERN SEQ(A a, B+ b[]) WHERE b[i].x > a.x RETURN max(b.x) AS m, min(b.x) AS n",
    "PATTERN SEQ(A a, B b) WHERE b.x BETWEEN a.x AND a.x RETURN a.x AS ax, b.x AS bx",
])
def test_item8_lists_agree_with_the_oracle(query: str) -> None:
    xs: list[Any] = [[1], [2], [1, 2], None, [2], [], [3]]
    stream = EventBatch.from_records([{"ts": k, "type": "AB"[k % 2], "x": v}
                                      for k, v in enumerate(xs, 1)])
    agree(query, stream)


# --- item 13: caps -------------------------------------------------------------------------------

def test_item13_an_explicitly_uncapped_call_warns(tmp_path: Path) -> None:
    p = tmp_path / "small.csv"
    p.write_text(SMALL)
    code, out, err = kleene("run", "PATTERN SEQ(A a, B b)", "--input", str(p), "-q",
                            "--max-matches-per-call", "0")
    assert code == 0, err
    assert len(matches(out)) == 3
    assert err.startswith("kleene: warning: --max-matches-per-call 0 buffers every match"), err
    code, out, err = kleene("run", "PATTERN SEQ(A a, B b)", "--input", str(p), "-q",
                            "--max-matches-per-call", "10")
    assert code == 0 and err == "", err


# --- found by the wild differential test: a boolean is not a number -----------------------------

@pytest.mark.parametrize("where", [
    "a.f > 0", "a.f <= 2", "-a.f >= 0", "0 < a.f", "a.f > a.x", "a.x >= a.f", "a.f > FALSE",
    "a.f >= a.f", "NOT (a.f > 0)", "a.f * 1 > 0", "abs(a.f) >= 0", "a.x - 1 < a.f",
])
def test_booleans_do_not_compare_with_numbers(where: str) -> None:
    rows = [{"ts": 1, "type": "A", "f": True, "x": 0}, {"ts": 2, "type": "A", "f": False, "x": 1},
            {"ts": 3, "type": "A", "f": None, "x": None}]
    got = agree(f"PATTERN A a WHERE {where}", EventBatch.from_records(rows))
    if where not in ("a.f > FALSE", "a.f >= a.f"):
        assert got == []


# --- item 14: a NOT inside a NOT -----------------------------------------------------------------

NESTED = "PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), E e) WITHIN 10 seconds"
NESTED_CSV = "ts,type,x\n1,A,1\n2,B,1\n3,C,1\n4,D,1\n5,E,1\n6,A,1\n7,B,1\n8,D,1\n9,E,1\n"


def test_item14_nested_negation_runs_and_gives_the_oracles_matches(tmp_path: Path) -> None:
    """``check`` accepted it and ``run`` failed with a false reason; now ``run`` evaluates it
    (docs/semantics.md 4, "Nested negation") and agrees with ``--engine oracle``."""
    p = tmp_path / "nested.csv"
    p.write_text(NESTED_CSV)
    code, out, err = kleene("check", NESTED)
    assert code == 0, err
    code, out, err = kleene("explain", NESTED)
    assert code == 0 and "plan: pda" in out, out + err
    assert "inside it, checked on each occurrence: NOT C c" in out, out
    got = []
    for engine in ("automaton", "oracle"):
        code, out, err = kleene("run", NESTED, "--input", str(p), "--engine", engine)
        assert code == 0, err
        assert "Traceback" not in err
        got.append(matches(out))
    # rows 0..8 are a1 b1 c1 d1 e1 a2 b2 d2 e2: b1..d1 has c1 between them, b2..d2 has not
    assert got[0] == got[1] == [{"query": "query", "match": {"a": 0, "e": 4}, "start": 1,
                                 "end": 5, "values": {}}]


@pytest.mark.parametrize(("query", "message"), [
    ("PATTERN SEQ(A a, NOT(NOT(C c)), E e)",
     "Line 1, column 22: NOT(C c) is inside NOT; a negation is only allowed inside SEQ or AND, "
     "next to positive events (e.g. SEQ(A a, NOT(B b), C c))"),
    ("PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c))+), E e)",
     "Line 1, column 31: NOT(C c) is inside the repetition SEQ(B b, NOT(C c))+; a negation "
     "inside a repetition is not supported"),
    ("PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d, NOT(F f), G g)), E e) WHERE c.x = f.x",
     "Line 1, column 74: this condition relates 'c' in NOT(C c) and 'f' in NOT(F f); each "
     "negation is checked on its own, so a condition may mention the variables of one NOT only, "
     "or of NOTs nested in one another (split it, or put both events in one NOT, e.g. "
     "NOT(SEQ(C c, D d)))"),
    ("PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), NOT(F f), E e) WHERE c.x = f.x",
     "Line 1, column 69: this condition relates 'c' in NOT(C c) and 'f' in NOT(F f); each "
     "negation is checked on its own, so a condition may mention the variables of one NOT only, "
     "or of NOTs nested in one another (split it, or put both events in one NOT, e.g. "
     "NOT(SEQ(C c, D d)))"),
])
def test_item14_what_validation_still_rejects(query: str, message: str) -> None:
    """What remains rejected (docs/semantics.md 14): a NOT not directly inside SEQ or AND (a
    NOT's body included), a NOT inside a repetition, and a condition relating two NOTs that are
    not nested in one another. The oracle refuses the same queries."""
    code, _out, err = kleene("check", query)
    assert code == 1, err
    assert err.splitlines()[0] == f"kleene: query error: {message}"
    with pytest.raises(QueryValidationError):
        analyze(query)


def test_item14_conditions_along_one_chain_of_nots_are_accepted() -> None:
    """A condition may relate an inner NOT's variable with its body's and the match's."""
    stream = EventBatch.from_records([
        {"ts": t, "type": ty, "x": x} for t, ty, x in
        [(1, "A", 1), (2, "B", 2), (3, "C", 2), (4, "D", 1), (5, "E", 1), (6, "B", 1),
         (7, "C", 0), (8, "D", 1), (9, "E", 1)]])
    got = agree("PATTERN SEQ(A a, NOT(SEQ(B b, NOT(C c), D d)), E e) "
                "WHERE c.x = b.x AND c.x > a.x - 5", stream)
    # b1..d1 (rows 1, 3) has c1 with c.x = b.x, so a=0 e=4 survives; b2..d2 has c2 with 0 != 1
    assert [m[0] for m in got] == [{"a": 0, "e": 4}]


# --- item 15: conjuncts of an AND block are decided as soon as their variables are bound ---------

def test_item15_and_block_conjuncts_prune_runs_early() -> None:
    """On the group plan (pda), whose AND blocks kept every partial run until the block
    completed."""
    from kleene.errors import CapacityError
    from kleene.plans import evaluate

    rows = [{"ts": i // 3, "type": "ABC"[i % 3], "x": i // 3} for i in range(180)]
    stream = EventBatch.from_records(rows)
    aq = analyze("PATTERN AND(A a, B b, C c) WHERE a.x = b.x")
    want = evaluate(aq, stream, plan="pda", max_runs_per_partition=None)
    assert len(want) == 3600
    # the {a, c} and {b, c} partial runs are needed; the {a, b} ones with a.x != b.x no longer
    # wait for c (before: over 7,500 live runs at once, now about 7,000)
    assert evaluate(aq, stream, plan="pda", max_runs_per_partition=7500) == want
    with pytest.raises(CapacityError):
        evaluate(aq, stream, plan="pda", max_runs_per_partition=6000)
    small = EventBatch.from_records(rows[:24])
    agree("PATTERN AND(A a, B b, C c) WHERE a.x = b.x", small)
    agree("PATTERN AND(A a, B b, C c) WHERE a.x < b.x AND c.x != a.x", small)
    agree("PATTERN SEQ(AND(A a, B b), C c) WHERE a.x = b.x AND c.x > b.x WITHIN 3 seconds", small)


# --- found by the wild differential test: -0.0 IN (0, ...) -----------------------------------------

@pytest.mark.parametrize("where", ["a.x IN (0, 3)", "a.x NOT IN (0, 3)", "a.x IN (-0.0, 2.5)",
                                   "a.x = 0", "a.x IN (3, NULL)"])
def test_negative_zero_is_in_a_list_with_zero(where: str) -> None:
    rows = [{"ts": 1, "type": "A", "x": -0.0}, {"ts": 2, "type": "A", "x": 0.0},
            {"ts": 3, "type": "A", "x": 2.5}, {"ts": 4, "type": "A", "x": None},
            {"ts": 5, "type": "A", "x": float("nan")}]
    got = agree(f"PATTERN A a WHERE {where}", EventBatch.from_records(rows))
    if where in ("a.x IN (0, 3)", "a.x = 0"):
        assert [m[0]["a"] for m in got] == [0, 1]
