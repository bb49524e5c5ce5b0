"""Differential test: every backend equals the oracle, match for match and in order.

Random canonical queries from a grammar of every feature (kleene.testing.strategies) × small
random streams with timestamp ties, two partitions, NULLs and every event type. One test per
feature group so a failure names the feature; a fixed seed (derandomize) keeps CI reproducible.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings

from kleene.api import analyze
from kleene.backends import BACKENDS
from kleene.events import EventBatch, Match
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.strategies import FEATURES, describe, queries, streams
from kleene.testing.timeline import importable_backends

OTHERS = [pytest.param(n, id=n, marks=[pytest.mark.spark] if BACKENDS[n].needs_spark else [])
          for n in importable_backends() if n != "oracle"]
EXAMPLES = 100
"""Examples per feature group and in-process backend (10 groups): well under a minute each."""
SPARK_EXAMPLES = 4
"""Spark backends start a job per example: a few per feature group."""


def _key(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [(m.query, dict(m.bindings), m.start, m.end, dict(m.values)) for m in ms]


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("name", OTHERS or [pytest.param("none", marks=pytest.mark.skip(
    reason="no backend besides the oracle is importable yet"))])
def test_backend_equals_oracle(name: str, feature: str) -> None:
    fn = BACKENDS[name].load()

    examples = SPARK_EXAMPLES if BACKENDS[name].needs_spark else EXAMPLES

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(query=queries(feature=feature), stream=streams())
    def check(query: str, stream: EventBatch) -> None:
        note(f"query:  {query}")
        note(f"stream: {describe(stream)}")
        aq = analyze(query)
        want = _key(oracle(aq, stream))
        got = _key(fn(aq, stream))
        assert got == want, f"{name} differs from the oracle"

    check()
