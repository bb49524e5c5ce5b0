"""The oracle itself: input guards, builder ASTs, independence from the engines."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from kleene import ast
from kleene.api import analyze
from kleene.errors import CapacityError, QueryValidationError
from kleene.events import EventBatch
from kleene.testing.oracle import MAX_EVENTS, OracleLimitError, evaluate
from kleene.testing.timeline import bindings_of, events


def test_refuses_too_many_events() -> None:
    stream = EventBatch.from_records(
        [{"type": "A", "ts": i} for i in range(MAX_EVENTS + 1)])
    with pytest.raises(OracleLimitError, match=f"{MAX_EVENTS + 1} events"):
        evaluate(analyze("PATTERN A a"), stream)


def test_refuses_an_exponential_enumeration_quickly() -> None:
    stream = EventBatch.from_records([{"type": "A", "ts": i} for i in range(40)])
    t0 = time.monotonic()
    with pytest.raises(CapacityError, match="brute-force"):
        evaluate(analyze("PATTERN A+ a[]"), stream)
    assert time.monotonic() - t0 < 60


def test_accepts_builder_asts() -> None:
    q = ast.Query(pattern=ast.Seq((ast.EventPattern("A", "a"), ast.EventPattern("B", "b"))),
                  where=ast.Binary(">", ast.AttrRef("b", "x"), ast.AttrRef("a", "x")))
    ms = evaluate(analyze(q), events("a1@1 b1@2 b2@3", a1={"x": 1}, b1={"x": 0}, b2={"x": 2}))
    assert bindings_of(ms) == [{"a": "a1", "b": "b2"}]


def test_rejects_next_match_with_and_even_without_the_semantic_layer() -> None:
    aq = analyze("PATTERN SEQ(A a, B b)")
    bad = type(aq)(query=ast.Query(pattern=ast.And((ast.EventPattern("A", "a"),
                                                     ast.EventPattern("B", "b")))),
                   name="q", variables=aq.variables,
                   strategy=ast.Strategy.SKIP_TILL_NEXT_MATCH, emit=ast.Emit.ALL)
    with pytest.raises(QueryValidationError, match="skip-till-any-match"):
        evaluate(bad, events("a1@1 b1@2"))


def test_oracle_does_not_import_the_engines() -> None:
    code = ("import sys, kleene.testing.oracle; "
            "print(sorted(m for m in sys.modules if m.startswith(('kleene.runtime', "
            "'kleene.plan'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
