"""Timed-out partial matches, ``EMIT TIMEOUTS`` (docs/semantics.md 20).

Every case runs on every backend and plan; a plan that does not compute timeouts says why (the
suite reports it as skipped with the reason). Expected entries are the whole output in order:
matches as ``"a=a1 b=b1"`` and timed-out partial matches as ``"timeout@T a=a1"`` (T in seconds).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from kleene.api import analyze
from kleene.backends import BackendFn
from kleene.errors import QueryValidationError
from kleene.events import Match
from kleene.testing.timeline import Case, case, run


def show(m: Match) -> str:
    """A match or a timed-out partial match as the cases write it."""
    def one(v: Any) -> str:
        return f"[{' '.join(map(str, v))}]" if isinstance(v, tuple) else str(v)

    text = " ".join(f"{k}={one(v)}" for k, v in m.bindings.items())
    if m.expired is None:
        return text
    t = m.expired / 1_000_000
    return f"timeout@{int(t) if t == int(t) else t} {text}"


CASES = [
    case("skip-till-any: dead ends time out, a prefix that was extended does not",
         "PATTERN SEQ(A a, B b, C c) WITHIN 5 seconds EMIT TIMEOUTS",
         """
         ts  1   2   3   4   9
             a1  b1  b2  a2  c1
         """,
         ["timeout@6 a=a1 b=b1", "timeout@6 a=a1 b=b2", "timeout@9 a=a2"]),
    case("skip-till-next-match: one timeout per run",
         "PATTERN SEQ(A a, B b, C c) WITHIN 5 seconds USING skip-till-next-match "
         "EMIT TIMEOUTS",
         """
         ts  1   2   3   4   9
             a1  b1  b2  a2  c1
         """,
         ["timeout@6 a=a1 b=b1", "timeout@9 a=a2"]),
    case("Kleene under skip-till-any: every list that was not extended",
         "PATTERN SEQ(A a, B+ b[], C c) WITHIN 5 seconds EMIT TIMEOUTS",
         "a1@1 b1@2 b2@3",
         ["timeout@6 a=a1 b=[b2]", "timeout@6 a=a1 b=[b1 b2]"]),
    case("Kleene under skip-till-next-match: the run's whole list",
         "PATTERN SEQ(A a, B+ b[], C c) WITHIN 5 seconds USING skip-till-next-match "
         "EMIT TIMEOUTS",
         "a1@1 b1@2 b2@3",
         ["timeout@6 a=a1 b=[b1 b2]"]),
    case("a timeout comes after the matches completed at or before its expiry",
         "PATTERN SEQ(A a, B b) WITHIN 2 seconds EMIT TIMEOUTS",
         "a1@1 b1@2 a2@3 a3@4 b2@6",
         ["a=a1 b=b1", "timeout@5 a=a2", "a=a3 b=b2"]),
    case("PARTITION BY: a match of another partition ending at T comes first",
         "PATTERN SEQ(A a, B b) PARTITION BY k WITHIN 2 seconds EMIT TIMEOUTS",
         "a1@1 a2@2 b1@3 b2@4",
         ["a=a2 b=b1", "timeout@3 a=a1"],
         a1={"k": "u"}, a2={"k": "v"}, b1={"k": "v"}, b2={"k": "u"}),
    case("an event at exactly T still extends (inclusive window)",
         "PATTERN SEQ(A a, B b, C c) WITHIN 5 seconds EMIT TIMEOUTS",
         "a1@1 b1@6",
         ["timeout@6 a=a1 b=b1"]),
    case("end of a batch: a partial match whose window has not passed times out too",
         "PATTERN SEQ(A a, B b) WITHIN 10 seconds EMIT TIMEOUTS",
         "a1@1",
         ["timeout@11 a=a1"]),
    case("conditions decidable on the prefix must hold",
         "PATTERN SEQ(A a, B b, C c) WHERE b.x > a.x AND c.x > b.x WITHIN 5 seconds "
         "EMIT TIMEOUTS",
         "a1@1 b1@2 b2@3",
         ["timeout@6 a=a1 b=b2"],
         a1={"x": 1}, b1={"x": 0}, b2={"x": 5}),
    case("a closing condition is not decided on an open Kleene",
         "PATTERN SEQ(A a, B+ b[], C c) WHERE sum(b.x) > 10 WITHIN 5 seconds "
         "USING skip-till-next-match EMIT TIMEOUTS",
         "a1@1 b1@2 b2@3",
         ["timeout@6 a=a1 b=[b1 b2]"],
         b1={"x": 3}, b2={"x": 4}),
    case("a full Kleene that fails its closing condition is a timed-out prefix",
         "PATTERN SEQ(A a, B{2} b[]) WHERE sum(b.x) > 10 WITHIN 5 seconds EMIT TIMEOUTS",
         "a1@1 b1@2 b2@3",
         ["timeout@6 a=a1 b=[b2]", "timeout@6 a=a1 b=[b1 b2]"],
         b1={"x": 3}, b2={"x": 4}),
    case("a match is never a timeout, even if its Kleene could still grow",
         "PATTERN SEQ(A a, B+ b[]) WITHIN 5 seconds EMIT TIMEOUTS",
         "a1@1 b1@2",
         ["a=a1 b=[b1]"]),
    case("an empty * before the last component is bound to []",
         "PATTERN SEQ(A a, B* b[], C c, D d) WITHIN 5 seconds EMIT TIMEOUTS",
         "a1@1 c1@2",
         ["timeout@6 a=a1 b=[] c=c1"]),
    case("a choice binds the branch it took",
         "PATTERN SEQ(A a, OR(B b, C c), D d) WITHIN 5 seconds EMIT TIMEOUTS",
         "a1@1 b1@2 c1@3",
         ["timeout@6 a=a1 b=b1", "timeout@6 a=a1 c=c1"]),
    case("CONSUME drops a match, which still extends its prefix",
         "PATTERN SEQ(A a, B b) WITHIN 5 seconds CONSUME b EMIT TIMEOUTS",
         "a1@1 a2@2 b1@3",
         ["a=a1 b=b1"]),
    case("EMIT RECENT keeps one match per completing event; prefixes are unaffected",
         "PATTERN SEQ(A a, B b, C c) WITHIN 5 seconds EMIT RECENT TIMEOUTS",
         "a1@1 a2@2 b1@3 c1@4 b2@5",
         ["a=a2 b=b1 c=c1", "timeout@6 a=a1 b=b2", "timeout@7 a=a2 b=b2"]),
    case("PICK keeps one match; the prefix of the match it dropped was still extended",
         "PATTERN SEQ(A a, B b) WITHIN 5 seconds PICK FIRST a EMIT TIMEOUTS",
         "a1@1 a2@2 b1@3 a3@10",
         ["a=a1 b=b1", "timeout@15 a=a3"]),
    case("strict-contiguity: a run killed inside its window does not time out",
         "PATTERN SEQ(A a, B b) WITHIN 5 seconds USING strict-contiguity EMIT TIMEOUTS",
         "a1@1 c1@2 a2@10",
         ["timeout@15 a=a2"]),
    case("strict-contiguity: the next event after the window does not kill it",
         "PATTERN SEQ(A a, B b) WITHIN 5 seconds USING strict-contiguity EMIT TIMEOUTS",
         "a1@1 c1@7",
         ["timeout@6 a=a1"]),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_timeouts(backend: BackendFn, c: Case) -> None:
    got = run(backend, c.query, c.stream)
    assert [show(m) for m in got] == list(c.expected)


@pytest.mark.parametrize("query, message", [
    ("PATTERN SEQ(A a, B b) EMIT TIMEOUTS", "needs a time window"),
    ("PATTERN SEQ(A a, B b) WITHIN 3 EVENTS EMIT TIMEOUTS", "needs a time window"),
    ("PATTERN SEQ(A a, NOT(C c), B b) WITHIN 5 seconds EMIT TIMEOUTS", "not NOT(C c)"),
    ("PATTERN AND(A a, B b) WITHIN 5 seconds EMIT TIMEOUTS", "not AND(A a, B b)"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 seconds EMIT COVERAGE TIMEOUTS", "EMIT COVERAGE"),
])
def test_timeouts_validation(query: str, message: str) -> None:
    with pytest.raises(QueryValidationError, match=re.escape(message)):
        analyze(query)


def test_timeouts_round_trip() -> None:
    from kleene.api import parse, to_text

    for text in ("PATTERN SEQ(A a, B b) WITHIN 5 seconds EMIT TIMEOUTS",
                 "PATTERN SEQ(A a, B b) WITHIN 5 seconds EMIT RECENT TIMEOUTS"):
        q = parse(text)
        assert q.timeouts and parse(to_text(q)) == q
        assert to_text(q).endswith("TIMEOUTS")
