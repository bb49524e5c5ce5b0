"""The random-query grammar (kleene.testing.strategies) only produces valid queries."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from kleene.api import analyze
from kleene.events import EventBatch
from kleene.testing.strategies import FEATURES, queries, streams


@pytest.mark.parametrize("feature", FEATURES)
def test_every_drawn_query_is_valid(feature: str) -> None:
    @settings(max_examples=30, derandomize=True, deadline=None, database=None)
    @given(queries(feature=feature))
    def check(query: str) -> None:
        analyze(query)

    check()


@settings(max_examples=30, derandomize=True, deadline=None, database=None)
@given(streams())
def test_streams_have_ties_partitions_and_ordered_positions(stream: EventBatch) -> None:
    ts = stream.ts.tolist()
    assert ts == sorted(ts)
    assert 3 <= len(stream) <= 9
    assert set(stream.column("k").to_pylist()) <= {"u", "v", None}


def test_unknown_feature_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown feature"):
        queries(feature="nope")
