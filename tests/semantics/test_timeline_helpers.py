"""The feed-and-compare helpers (kleene.testing.timeline) the suite is built on."""

from __future__ import annotations

import pytest

from kleene.errors import InputError
from kleene.testing.oracle import evaluate
from kleene.testing.timeline import assert_matches, events, parse_expected, timeline, type_of


def test_drawn_timeline_orders_ties_by_row() -> None:
    b = timeline("""
        ts  1    2    10
            a1   b1   c1
                 b2
            a2
    """, b2={"x": 4})
    assert b.ids.to_pylist() == ["a1", "a2", "b1", "b2", "c1"]
    assert b.ts.tolist() == [1_000_000, 1_000_000, 2_000_000, 2_000_000, 10_000_000]
    assert b.types.tolist() == ["A", "A", "B", "B", "C"]
    assert b.column("x").to_pylist() == [None, None, None, 4, None]


def test_compact_tokens_keep_input_order_among_ties() -> None:
    b = events("b1@2 a1@1 c1@2")
    assert b.ids.to_pylist() == ["a1", "b1", "c1"]


def test_type_override_and_names() -> None:
    assert type_of("xy12") == "XY"
    b = events("e1@1", e1={"type": "Stock", "price": 3})
    assert b.types.tolist() == ["Stock"]


@pytest.mark.parametrize("bad", ["a1", "1a@3", "a1@1 a1@2"])
def test_bad_tokens_are_input_errors(bad: str) -> None:
    with pytest.raises(InputError):
        events(bad)


def test_attributes_for_unknown_events_are_rejected() -> None:
    with pytest.raises(InputError, match="not in the timeline"):
        events("a1@1", b1={"x": 1})


def test_parse_expected() -> None:
    assert parse_expected("a=a1 b=[b1 b2] c=[]") == {"a": "a1", "b": ("b1", "b2"), "c": ()}
    assert parse_expected({"a": "a1", "b": ["b1"]}) == {"a": "a1", "b": ("b1",)}


def test_assert_matches_fails_on_a_difference() -> None:
    with pytest.raises(AssertionError, match="matches differ"):
        assert_matches(evaluate, "PATTERN SEQ(A a, B b)", events("a1@1 b1@2"), ["a=a1 b=b2"])
