"""docs/engine.md "Adding a plan": its example is real code. This test takes the code block from
the doc, registers it as a plan kind and checks the claims the doc makes: one module plus one
registry line, the oracle's matches, the chooser and ``explain``."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kleene
from kleene.errors import QueryValidationError
from kleene.events import EventBatch
from kleene.plans import registry
from kleene.plans.explain import explain
from kleene.testing.oracle import evaluate as oracle

DOC = Path(__file__).resolve().parents[2] / "docs" / "engine.md"


@pytest.fixture(scope="module")
def single_plan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### Adding a plan", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "docs/engine.md lost its 'Adding a plan' example"
    folder = tmp_path_factory.mktemp("plugin")
    (folder / "doc_single_plan.py").write_text(code.group(1), encoding="utf-8")
    sys.path.insert(0, str(folder))
    registry.register("doc_single_plan:PLAN")  # the one registry line
    try:
        yield "single"
    finally:
        registry.unregister("doc_single_plan:PLAN")
        sys.path.remove(str(folder))
        sys.modules.pop("doc_single_plan", None)


QUERIES = [
    "PATTERN A a",
    "PATTERN A a WHERE a.x > 2",
    "PATTERN A a WHERE a.x > 1 AND a.x < 4 PARTITION BY k RETURN a.x * 10 AS y",
    "PATTERN A a WHERE a.x >= 2 PICK FIRST a",
    "PATTERN A a WHERE a.x IS NOT NULL USING strict-contiguity",
]


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.sampled_from(QUERIES),
       rows=st.lists(st.tuples(st.sampled_from("AB"), st.integers(0, 5),
                               st.one_of(st.none(), st.integers(0, 5)), st.sampled_from("xy")),
                     min_size=1, max_size=12))
def test_the_doc_plan_equals_the_oracle(single_plan: str, query: str,
                                        rows: list[tuple[str, int, int | None, str]]) -> None:
    batch = EventBatch.from_records(
        [{"id": i, "type": t, "ts": ts, "x": x, "k": k}
         for i, (t, ts, x, k) in enumerate(sorted(rows, key=lambda r: r[1]))])
    q = kleene.compile(query, plan=single_plan)
    assert q.plan == "single"
    want = oracle(q.analyzed, batch)
    assert q.run(batch) == want
    assert kleene.compile(query).run(batch) == want  # chosen by default (cheapest)


def test_the_chooser_and_explain_know_it(single_plan: str) -> None:
    text = explain(kleene.analyze("PATTERN A a WHERE a.x > 1"))
    assert "plan: single (lowest estimated cost" in text
    assert "* single" in text and "single: every candidate event is a match" in text
    seq = explain(kleene.analyze("PATTERN SEQ(A a, B b)"))
    assert "single   does not apply: single needs a pattern of exactly one event" in seq
    with pytest.raises(QueryValidationError, match="plan 'single' does not support query"):
        kleene.compile("PATTERN SEQ(A a, B b)", plan="single")


def test_unknown_plan_and_engine_fail_at_compile() -> None:
    with pytest.raises(QueryValidationError, match="unknown plan 'nope'; available: nfa"):
        kleene.compile("PATTERN A a", plan="nope")
    with pytest.raises(QueryValidationError, match="unknown engine 'nope'"):
        kleene.compile("PATTERN A a", engine="nope")
    with pytest.raises(QueryValidationError, match="engine 'oracle' has no plans"):
        kleene.compile("PATTERN A a", engine="oracle", plan="nfa")
